//! A translation through OVN's pipeline (issue 44's target: within 3x of
//! one through a handful of rules): OVN 23.03's rules on chassis 1 of
//! `shared/ovn` (the 670 of 673 that tunlab holds: all but `learn` and
//! `group`), and packets of OVN's cases, each translated as an upcall
//! translates it (`decide_megaflow`: the classifier with wildcards, no
//! exact-match cache), against the same packet through only the rules on
//! its way (the rules it hit, in their tables, and nothing else). The
//! difference is what the other ~650 rules cost the lookups.
//!
//! `cargo bench -p tunlab-dp --bench ovn_pipeline`; read each packet's
//! `full` figure against its `on-path` one, measured in the same run.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use tunlab_dp::flow::{parse_flow, NumericPorts};
use tunlab_dp::key::FlowKey;
use tunlab_dp::{Classifier, Pipeline};

/// A dump line of `ovs-ofctl dump-flows` as a rule tunlab reads: the
/// counters and ages left out.
fn rule_text(line: &str) -> Option<String> {
    let (head, actions) = line.trim().split_once(" actions=")?;
    let keep: Vec<&str> = head
        .split(", ")
        .filter(|p| {
            ![
                "duration=",
                "n_packets=",
                "n_bytes=",
                "idle_age=",
                "hard_age=",
            ]
            .iter()
            .any(|c| p.starts_with(c))
        })
        .collect();
    Some(format!("{} actions={actions}", keep.join(",")))
}

fn ovn_rules() -> Vec<tunlab_dp::FlowRule> {
    include_str!("../tests/data/flows-ch1.txt")
        .lines()
        .filter(|l| l.starts_with(' '))
        .filter_map(rule_text)
        .filter_map(|t| parse_flow(&t, &NumericPorts).ok())
        .collect()
}

/// OVN's cases on chassis 1 (vm1 on port 2, logical switch 1): ARP for
/// the router and for vm2, an ICMP echo to vm2 (its translation ends at
/// the ACL's conntrack), a DHCP discover (pauses for the controller), an
/// IPv6 neighbour solicitation, and a packet from an unknown MAC.
const PACKETS: &[(&str, &str)] = &[
    ("arp-router", "in_port=2,arp,dl_src=0a:00:00:00:01:11,dl_dst=ff:ff:ff:ff:ff:ff,arp_spa=10.0.1.11,arp_tpa=10.0.1.1,arp_op=1,arp_sha=0a:00:00:00:01:11"),
    ("arp-vm2", "in_port=2,arp,dl_src=0a:00:00:00:01:11,dl_dst=ff:ff:ff:ff:ff:ff,arp_spa=10.0.1.11,arp_tpa=10.0.1.12,arp_op=1,arp_sha=0a:00:00:00:01:11"),
    ("icmp-vm2", "in_port=2,icmp,dl_src=0a:00:00:00:01:11,dl_dst=0a:00:00:00:01:12,nw_src=10.0.1.11,nw_dst=10.0.1.12,nw_ttl=64,icmp_type=8,icmp_code=0"),
    ("dhcp", "in_port=2,udp,dl_src=0a:00:00:00:01:11,dl_dst=ff:ff:ff:ff:ff:ff,nw_src=0.0.0.0,nw_dst=255.255.255.255,nw_ttl=64,tp_src=68,tp_dst=67"),
    ("nd", "in_port=2,icmp6,dl_src=0a:00:00:00:01:11,dl_dst=33:33:ff:00:01:01,ipv6_src=fe80::811:11ff:fe00:111,ipv6_dst=ff02::1:ff00:101,nw_ttl=255,icmp_type=135,icmp_code=0,nd_target=fe80::1"),
    ("spoofed", "in_port=2,ip,dl_src=0a:00:00:00:09:99,dl_dst=0a:00:00:00:01:12,nw_src=10.0.1.99,nw_dst=10.0.1.12,nw_ttl=64"),
];

fn key(flow: &str) -> FlowKey {
    parse_flow(&format!("{flow} actions=drop"), &NumericPorts)
        .expect("a packet in ovs-ofctl's syntax")
        .m
        .value
}

/// The rules `k` hits in `all`, alone in a classifier of their own.
fn on_path(all: &[tunlab_dp::FlowRule], k: &FlowKey) -> Classifier {
    let mut c = Classifier::new();
    for r in all {
        c.add(r.clone(), 0);
    }
    let mut ops = Vec::new();
    let _ = Pipeline::new().process(&mut c, k, 64, 0, &mut ops);
    let mut path = Classifier::new();
    for r in c.iter().filter(|r| r.packets > 0) {
        path.add(r.flow.clone(), 0);
    }
    path
}

fn ovn_pipeline(c: &mut Criterion) {
    let rules = ovn_rules();
    let mut full = Classifier::new();
    for r in &rules {
        full.add(r.clone(), 0);
    }
    let mut g = c.benchmark_group("ovn-pipeline");
    for (name, flow) in PACKETS {
        let k = key(flow);
        let mut path = on_path(&rules, &k);
        // Both give the same steps, or the comparison means nothing.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let ra = Pipeline::new().decide_megaflow(&mut full, &k, 0, &mut a).0;
        let rb = Pipeline::new().decide_megaflow(&mut path, &k, 0, &mut b).0;
        assert_eq!((ra, &a), (rb, &b), "{name}");
        eprintln!("{name}: {} rules on its way, of {}", path.len(), full.len());
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        g.bench_with_input(BenchmarkId::new("full", name), &k, |bn, k| {
            bn.iter(|| p.decide_megaflow(&mut full, black_box(k), 0, &mut ops).0)
        });
        g.bench_with_input(BenchmarkId::new("on-path", name), &k, |bn, k| {
            bn.iter(|| p.decide_megaflow(&mut path, black_box(k), 0, &mut ops).0)
        });
    }
    g.finish();
}

criterion_group!(benches, ovn_pipeline);
criterion_main!(benches);
