//! Classification cost per packet against the size of the flow table:
//! 10 rules beside 100,000 (issue 16), in two shapes, without the
//! exact-match cache (which would hide the classifier entirely).
//!
//! * `one-mask`: every rule sends one tenant MAC to its own tunnel
//!   endpoint (`in_port=1,dl_dst=MAC actions=set_field:IP->tun_dst,...`),
//!   the shape of a node with one rule per remote VM; plus a catch-all.
//! * `mixed-masks`: the rules spread over five masks (exact MAC, /32 and
//!   /24 destinations, a TCP port, a tunnel ID), so every lookup probes
//!   several hash tables.
//!
//! The keys hit rules chosen at random, and one in eight misses every rule
//! but the catch-all. Read the result as the ratio of the 100,000-rule
//! figure to the 10-rule one, measured in the same run.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tunlab_dp::flow::{parse_flow, NumericPorts};
use tunlab_dp::key::{f, FlowKey};
use tunlab_dp::Classifier;

fn mac(i: u32) -> String {
    let b = i.to_be_bytes();
    format!("02:00:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3])
}

fn ip(i: u32) -> String {
    std::net::Ipv4Addr::from(0x0a00_0000 | (i & 0x00ff_ffff)).to_string()
}

/// Rule `i` of a table of shape `mixed` and the key of a packet it matches.
fn rule_and_key(i: u32, mixed: bool) -> (String, FlowKey) {
    let mut k = FlowKey::default();
    k.set(f::IN_PORT, 1);
    k.set(f::DL_TYPE, 0x0800);
    k.set(f::NW_PROTO, 6);
    let shape = if mixed { i % 5 } else { 0 };
    let text = match shape {
        0 => {
            k.set(f::DL_DST, 0x0200_0000_0000 | i as u64);
            format!("priority=100,in_port=1,dl_dst={}", mac(i))
        }
        1 => {
            k.set(f::NW_DST, 0x0a00_0000 | (i & 0x00ff_ffff) as u64);
            format!("priority=90,ip,nw_dst={}", ip(i))
        }
        2 => {
            k.set(f::NW_DST, 0x0b00_0000 | ((i & 0xffff) << 8) as u64);
            format!(
                "priority=80,ip,nw_dst=11.{}.{}.0/24",
                (i >> 8) & 0xff,
                i & 0xff
            )
        }
        3 => {
            k.set(f::TP_DST, (i & 0xffff) as u64);
            format!("priority=70,tcp,tp_dst={}", i & 0xffff)
        }
        _ => {
            k.set(f::TUN_ID, 1_000_000 + i as u64);
            format!("priority=60,tun_id={}", 1_000_000 + i)
        }
    };
    let actions = format!(" actions=set_field:{}->tun_dst,output:2", ip(i));
    (text + &actions, k)
}

fn table(n: u32, mixed: bool) -> (Classifier, Vec<FlowKey>) {
    let mut c = Classifier::new();
    c.add(
        parse_flow("priority=0 actions=drop", &NumericPorts).unwrap(),
        0,
    );
    let mut keys = Vec::new();
    for i in 0..n {
        let (text, k) = rule_and_key(i, mixed);
        c.add(parse_flow(&text, &NumericPorts).unwrap(), 0);
        keys.push(k);
    }
    // 1024 keys in a fixed pseudo-random order; every eighth misses.
    let mut x: u32 = 0x9e37_79b9;
    let keys = (0..1024)
        .map(|j| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if j % 8 == 7 {
                let mut k = FlowKey::default();
                k.set(f::IN_PORT, 3);
                k
            } else {
                keys[(x % n) as usize]
            }
        })
        .collect();
    (c, keys)
}

fn classify(c: &mut Criterion) {
    let mut g = c.benchmark_group("classify");
    g.throughput(Throughput::Elements(1024));
    for mixed in [false, true] {
        let shape = if mixed { "mixed-masks" } else { "one-mask" };
        for n in [10u32, 100_000] {
            let (cls, keys) = table(n, mixed);
            g.bench_with_input(BenchmarkId::new(shape, n), &keys, |b, keys| {
                b.iter(|| {
                    let mut found = 0u32;
                    for k in keys {
                        found += cls.lookup(0, black_box(k)).is_some() as u32;
                    }
                    found
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, classify);
criterion_main!(benches);
