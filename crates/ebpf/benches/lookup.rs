//! What a cached flow's lookup costs the kernel per packet, by how many
//! megaflow masks the cache holds and whether the per-CPU hint names the
//! right one: the kernel's own time per run of `tl_from_tenant`
//! (BPF_PROG_TEST_RUN with `repeat`), on a frame whose flow is cached as
//! a drop (the program changes nothing, so every run is the same).
//!
//! `cargo bench -p tunlab-ebpf --bench lookup` (as root). Prints, per case,
//! the median time per packet over 31 rounds that run every case once
//! each, and the median of the per-round ratios to the first case (one
//! mask: the cache as it was before it held several) with its
//! interquartile range.

use tunlab_bpf::test_run::{time_tc, TC_ACT_SHOT};
use tunlab_dp::key::{f, FieldPos};
use tunlab_dp::{extract, FlowKey};
use tunlab_ebpf::datapath::FROM_TENANT;
use tunlab_ebpf::maps::{self, Flow};
use tunlab_ebpf::KernelDatapath;

/// A UDP datagram from a tenant: 10.1.0.1:4000 -> 10.1.0.2:5000.
fn frame() -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 18];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 1, 0, 1]);
    f[30..34].copy_from_slice(&[10, 1, 0, 2]);
    f[34..36].copy_from_slice(&4000u16.to_be_bytes());
    f[36..38].copy_from_slice(&5000u16.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f
}

/// The mask of the in-port and field `p`.
fn mask_with(p: FieldPos) -> FlowKey {
    let mut m = FlowKey::default();
    m.set(f::IN_PORT, f::IN_PORT.max());
    m.set(p, p.max());
    m
}

/// A datapath whose loopback device (ifindex 1) is tenant port 1, with
/// the frame's flow cached as a drop under `own` (None: under the union,
/// mask 0) after `others` masks holding a flow each that this frame does
/// not match.
fn datapath(own: Option<FlowKey>, others: &[FlowKey]) -> KernelDatapath {
    let mut dp = KernelDatapath::load(1 << 16, 16, None).expect("programs load (run as root)");
    let port = maps::PortEntry {
        ofport: 1,
        role: maps::ROLE_VETH,
        peer_ifindex: 99,
        policed: 0,
    };
    dp.set_port_entry(1, port).expect("port entry");
    let mut union = FlowKey::default();
    union.set(f::IN_PORT, f::IN_PORT.max());
    dp.revalidate(&union).expect("revalidate");
    let mut key = FlowKey::default();
    extract(&frame(), 1, &mut key);
    // A flow that differs from the frame's in every field but the port.
    let mut other = key;
    for p in FIELDS {
        other.set(p, (key.get(p) ^ 1) & p.max());
    }
    for m in others {
        dp.install_masked(&other, m, Flow::default())
            .expect("other flow");
    }
    match own {
        Some(m) => dp.install_masked(&key, &m, Flow::default()).map(|_| ()),
        None => dp.install(&key, Flow::default()).map(|_| ()),
    }
    .expect("the flow");
    dp
}

/// The kernel's ns per packet over one run of 200,000.
fn time(dp: &KernelDatapath, pkt: &[u8]) -> u32 {
    let prog = dp.program_fd(FROM_TENANT).expect("program");
    let (ns, out) = time_tc(prog, pkt, 1, 200_000).expect("test run");
    assert_eq!(out.verdict, TC_ACT_SHOT, "the cached drop");
    ns
}

/// The middle of `v` and its quartiles.
fn quartiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.25), at(0.75))
}

/// Fields for the other masks (each with the in-port).
const FIELDS: [FieldPos; 15] = [
    f::DL_SRC,
    f::DL_DST,
    f::DL_TYPE,
    f::VLAN_TCI,
    f::NW_SRC,
    f::NW_PROTO,
    f::NW_TOS,
    f::TP_SRC,
    f::TP_DST,
    f::TUN_ID,
    f::TUN_SRC,
    f::TUN_DST,
    f::IPV6_SRC_HI,
    f::IPV6_DST_HI,
    f::TUN_FAMILY,
];

fn main() {
    let others: Vec<FlowKey> = FIELDS.iter().map(|&p| mask_with(p)).collect();
    let own = Some(mask_with(f::NW_DST));
    let cases: [(&str, Option<FlowKey>, &[FlowKey]); 4] = [
        ("one mask (the union), as before", None, &[]),
        ("its own mask, the only one", own, &[]),
        ("its own mask among 5", own, &others[..4]),
        ("its own mask among 15 (every slot)", own, &others[..14]),
    ];
    let dps: Vec<KernelDatapath> = cases.iter().map(|(_, o, x)| datapath(*o, x)).collect();
    let pkt = frame();
    // Rounds of every case, each round in another order: a ratio is taken
    // within a round, so that what the machine does meanwhile (another
    // guest, a frequency change) weighs on both sides of it.
    const ROUNDS: usize = 31;
    let mut ns = vec![Vec::new(); cases.len()];
    let mut ratio = vec![Vec::new(); cases.len()];
    for round in 0..ROUNDS {
        let mut t = vec![0u32; cases.len()];
        for k in 0..cases.len() {
            let i = (k + round) % cases.len();
            t[i] = time(&dps[i], &pkt);
        }
        for i in 0..cases.len() {
            ns[i].push(t[i] as f64);
            ratio[i].push(t[i] as f64 / t[0].max(1) as f64);
        }
    }
    println!(
        "{:<36} {:>10} {:>24}",
        "case", "ns/packet", "ratio to the first [IQR]"
    );
    for (i, (name, _, _)) in cases.iter().enumerate() {
        let (n, _, _) = quartiles(ns[i].clone());
        let (r, lo, hi) = quartiles(ratio[i].clone());
        println!("{name:<36} {n:>10.0} {r:>12.2} [{lo:.2}, {hi:.2}]");
    }
    println!("({ROUNDS} rounds of 200,000 runs per case, medians)");
}
