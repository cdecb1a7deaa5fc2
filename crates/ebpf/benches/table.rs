//! An experiment on the flow cache's table (bpf/tablebench.c, not the
//! datapath): what a lookup costs the kernel when the cache holds `N`
//! flows and each lookup names another one, waiting for the last (as
//! packets do), in the datapath's BPF hash map, in the same with 32-byte
//! keys, and in open addressing over 128-byte slots (one BPF array,
//! vmalloc'ed; or split into slab-allocated arrays, on huge pages); keys
//! at random and in the order they were put in.
//!
//! `cargo bench -p tunlab-ebpf --bench table [-- FLOWS]` (as root; FLOWS
//! defaults to 1,000,000). Prints the median ns per lookup over rounds
//! that run every case once each, less the loop's own cost.

use aya::maps::{Array, ArrayOfMaps, HashMap, MapData};
use aya::programs::SchedClassifier;
use aya::EbpfLoader;
use std::os::fd::AsFd;
use tunlab_bpf::test_run::time_tc;

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tablebench.o"));

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Key {
    w: [u64; 10],
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Key4 {
    w: [u64; 4],
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Flow {
    generation: u64,
    packets: u64,
    bytes: u64,
    n_ops: u32,
    used: u32,
    ops: [u64; 4],
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Slot {
    w: [u64; 6],
    tag: u64,
    flow: Flow,
    pad: u64,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Conf {
    flows: u64,
    seed: u64,
    mode: u32,
    bits: u32,
    seq: u32,
    pad: u32,
    found: u64,
}
// The structs of tablebench.c, field for field.
// SAFETY: plain repr(C) data without padding, valid for any bytes.
unsafe impl aya::Pod for Key {}
// SAFETY: as above.
unsafe impl aya::Pod for Key4 {}
// SAFETY: as above.
unsafe impl aya::Pod for Flow {}
// SAFETY: as above.
unsafe impl aya::Pod for Slot {}
// SAFETY: as above.
unsafe impl aya::Pod for Conf {}

/// `TB_INNER`: slots of each array of the split table.
const INNER: u32 = 240;
/// `TB_PROBES`.
const PROBES: u32 = 64;

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ceb9fe1a85ec53);
    x ^ (x >> 33)
}

/// Key `j`, as `key_of` in tablebench.c.
fn key_of(j: u64) -> Key {
    let mut k = Key::default();
    k.w[0] = 1;
    k.w[1] = 0x110800;
    k.w[2] = j;
    k.w[3] = j.wrapping_mul(0x9e3779b97f4a7c15);
    k
}

fn slot_hash(k: &Key) -> u64 {
    mix(k.w[0] ^ mix(k.w[1] ^ mix(k.w[2] ^ mix(k.w[3])))) | 1
}

/// Where each of keys 0..n lands in an open table of 2^bits slots.
fn place(n: u64, bits: u32) -> Vec<(u32, Slot)> {
    let mask = (1u32 << bits) - 1;
    let mut used = vec![false; 1 << bits];
    let mut out = Vec::with_capacity(n as usize);
    for j in 0..n {
        let k = key_of(j);
        let tag = slot_hash(&k);
        let mut at = (tag >> 32) as u32 & mask;
        for _ in 0..PROBES {
            if !used[at as usize] {
                break;
            }
            at = (at + 1) & mask;
        }
        assert!(
            !used[at as usize],
            "key {j} is {PROBES} slots from its home"
        );
        used[at as usize] = true;
        let mut s = Slot {
            tag,
            ..Slot::default()
        };
        s.w.copy_from_slice(&k.w[..6]);
        out.push((at, s));
    }
    out
}

struct Bench {
    ebpf: aya::Ebpf,
    bits: u32,
}

impl Bench {
    /// Every table holding keys 0..n, each in the order of its number.
    fn new(n: u64) -> Bench {
        let cap = (n + n / 4).max(16) as u32;
        let bits = (2 * n).max(64).next_power_of_two().trailing_zeros();
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("tb_hash", cap)
            .map_max_entries("tb_hash4", cap)
            .map_max_entries("tb_open", 1 << bits)
            .map_max_entries("tb_outer", (1u32 << bits).div_ceil(INNER))
            .load(OBJECT)
            .expect("load (run as root)");
        let p: &mut SchedClassifier = ebpf
            .program_mut("tb_run")
            .expect("tb_run")
            .try_into()
            .expect("a classifier");
        p.load().expect("verifier");
        let mut h: HashMap<_, Key, Flow> =
            HashMap::try_from(ebpf.map_mut("tb_hash").expect("tb_hash")).expect("hash");
        for j in 0..n {
            h.insert(key_of(j), Flow::default(), 0)
                .expect("hash insert");
        }
        let mut h4: HashMap<_, Key4, Flow> =
            HashMap::try_from(ebpf.map_mut("tb_hash4").expect("tb_hash4")).expect("hash");
        for j in 0..n {
            let k = key_of(j);
            let k4 = Key4 {
                w: [k.w[0], k.w[1], k.w[2], k.w[3]],
            };
            h4.insert(k4, Flow::default(), 0).expect("hash insert");
        }
        let slots = place(n, bits);
        let mut a: Array<_, Slot> =
            Array::try_from(ebpf.map_mut("tb_open").expect("tb_open")).expect("array");
        for &(at, s) in &slots {
            a.set(at, s, 0).expect("slot");
        }
        // The split table: its arrays made here and put in the outer one,
        // which keeps them.
        let mut inners: Vec<Array<MapData, Slot>> = (0..(1u32 << bits).div_ceil(INNER))
            .map(|_| Array::create(INNER, 0).expect("inner array"))
            .collect();
        for &(at, s) in &slots {
            inners[(at / INNER) as usize]
                .set(at % INNER, s, 0)
                .expect("inner slot");
        }
        let mut outer: ArrayOfMaps<&mut MapData, Array<MapData, Slot>> =
            ArrayOfMaps::try_from(ebpf.map_mut("tb_outer").expect("tb_outer")).expect("outer");
        for (o, inner) in inners.iter().enumerate() {
            outer.set(o as u32, inner, 0).expect("outer slot");
        }
        Bench { ebpf, bits }
    }

    /// ns per lookup over one run of 64 * 4096 lookups.
    fn run(&mut self, mode: u32, flows: u64, seq: bool) -> f64 {
        const RUN: u8 = 64;
        let mut c: Array<_, Conf> =
            Array::try_from(self.ebpf.map_mut("tb_conf").expect("tb_conf")).expect("conf");
        let mut conf = c.get(&0, 0).expect("conf");
        conf.mode = mode;
        conf.bits = self.bits;
        conf.flows = flows;
        conf.seq = u32::from(seq);
        c.set(0, conf, 0).expect("conf");
        let p: &SchedClassifier = self
            .ebpf
            .program("tb_run")
            .expect("tb_run")
            .try_into()
            .expect("a classifier");
        let (ns, _) = time_tc(p.fd().expect("fd").as_fd(), &[RUN; 64], 0, 1).expect("test run");
        let c: Array<_, Conf> =
            Array::try_from(self.ebpf.map("tb_conf").expect("tb_conf")).expect("conf");
        let found = c.get(&0, 0).expect("conf").found;
        let lookups = RUN as u64 * 4096;
        assert!(
            mode == 2 || found == lookups,
            "mode {mode}: every lookup finds its flow"
        );
        ns as f64 / lookups as f64
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let n: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let mut b = Bench::new(n);
    const ROUNDS: usize = 21;
    let tables = [
        ("hash map (the datapath's)", 0),
        ("hash map, 32-byte keys", 3),
        ("open table, one array", 1),
        ("open table, slab arrays", 4),
    ];
    // (table, flows, in order); the loop alone last.
    let mut cases: Vec<(usize, u64, bool)> = Vec::new();
    for t in 0..tables.len() {
        cases.extend([(t, 1, false), (t, n, false), (t, n, true)]);
    }
    let mut t = vec![Vec::new(); cases.len() + 1];
    for round in 0..ROUNDS {
        for k in 0..=cases.len() {
            let i = (k + round) % (cases.len() + 1);
            t[i].push(match cases.get(i) {
                Some(&(table, flows, seq)) => b.run(tables[table].1, flows, seq),
                None => b.run(2, n, false),
            });
        }
    }
    let base = median(t[cases.len()].clone());
    println!("{n} flows; ns per lookup, each waiting for the last (median of {ROUNDS} rounds), less the loop's {base:.1}");
    println!(
        "{:<28} {:>9} {:>11} {:>11}",
        "table", "one flow", "at random", "in order"
    );
    for (ti, (name, _)) in tables.iter().enumerate() {
        let at = |flows: u64, seq: bool| {
            let i = cases
                .iter()
                .position(|&c| c == (ti, flows, seq))
                .expect("case");
            median(t[i].clone()) - base
        };
        println!(
            "{name:<28} {:>9.1} {:>11.1} {:>11.1}",
            at(1, false),
            at(n, false),
            at(n, true)
        );
    }
}
