//! The five articles of `shared/reference/`, as data: each one's
//! testbed, the variants that stand for its systems here, the plan of its
//! experiment (quick and full), and its findings as checks. Figures are
//! the articles'; the sentences are ours.

use super::{
    Article, Axes, Check, Claim, Experiment, Finding, Metric, PvpCheck, RatioCheck, Sel, Spec,
    Testbed,
};
use crate::plan::{Plan, QUICK_BUDGET_S};
use crate::sample::{Kind, Test};
use crate::stats::Rule;
use crate::variant::Variant;
use Variant as V;

/// Seconds a quick article's rounds may take (set-up aside): five
/// articles, one of them the PVP search, within 15 minutes.
pub const QUICK_ARTICLE_BUDGET_S: u64 = 170;

pub fn spec(a: Article) -> Spec {
    match a {
        Article::GeneveVsVxlan => geneve_vs_vxlan(),
        Article::VxlanOffload => vxlan_offload(),
        Article::TrexGenevePvp => trex_geneve_pvp(),
        Article::Qinq => qinq(),
        Article::SttGre => stt_gre(),
    }
}

fn tests(names: &[&str]) -> Vec<Test> {
    names.iter().filter_map(|n| Test::parse(n).ok()).collect()
}

/// A plan for an article: its variants, tests and baseline; quick: 1-s
/// samples and rounds within [`QUICK_ARTICLE_BUDGET_S`]; full: the
/// article's own sample length and at least five rounds.
fn plan(
    name: &str,
    profile: &str,
    variants: Vec<Variant>,
    baseline: Variant,
    quick: &[&str],
    full: &[&str],
    full_seconds: u32,
) -> Plan {
    let mut p = Plan::base(&format!("{name} {profile}"));
    p.baseline = Some(baseline);
    p.variants = variants;
    if profile == "full" {
        p.tests = tests(full);
        p.seconds = full_seconds;
        p.rule = Rule::rounds(5, 20);
    } else {
        p.tests = tests(quick);
        p.seconds = 1;
        p.rule = Rule {
            budget_s: Some(QUICK_ARTICLE_BUDGET_S.min(QUICK_BUDGET_S)),
            ..Rule::rounds(5, 100)
        };
    }
    p
}

fn ratio(a: Variant, b: Variant, tests: Sel, metric: Metric, claim: Claim) -> Check {
    Check::Ratio(RatioCheck {
        a,
        b,
        tests,
        b_test: None,
        metric,
        claim,
    })
}

const STREAMS: Sel = Sel::Kinds(&[Kind::TcpStream, Kind::TcpBidirec]);
const RR: Sel = Sel::Kinds(&[Kind::TcpRr, Kind::UdpRr]);
const ALL_STREAMS: Sel = Sel::Kinds(&[Kind::TcpStream]);

fn geneve_vs_vxlan() -> Spec {
    fn lab(profile: &str) -> Plan {
        // Quick: the article's comparison only (one switch, two
        // encapsulations), for rounds enough to decide it.
        let mut v = vec![V::TunlabEbpfVxlan, V::TunlabEbpfGeneveOvn];
        if profile == "full" {
            v.extend([V::KernelVxlan, V::OvsVxlan, V::OvsGeneveOvn]);
        }
        plan(
            "geneve-vs-vxlan",
            profile,
            v,
            V::TunlabEbpfVxlan,
            &["tcp_stream-16384B-8i", "tcp_rr-1024B-8i", "udp_rr-64B-8i"],
            &[
                "tcp_stream-1024B-8i",
                "tcp_stream-1024B-64i",
                "tcp_stream-16384B-8i",
                "tcp_stream-16384B-64i",
                "tcp_bidirec-1024B-8i",
                "tcp_bidirec-1024B-64i",
                "tcp_bidirec-16384B-8i",
                "tcp_bidirec-16384B-64i",
                "tcp_rr-1024B-8i",
                "tcp_rr-1024B-64i",
                "tcp_rr-16384B-8i",
                "tcp_rr-16384B-64i",
                "udp_rr-64B-8i",
                "udp_rr-64B-64i",
                "udp_rr-1024B-8i",
                "udp_rr-1024B-64i",
            ],
            5,
        )
    }
    // The article's comparison: one switch, two encapsulations; and
    // tunlab's Geneve against the kernel's VXLAN.
    let pairs = [
        (V::TunlabEbpfGeneveOvn, V::TunlabEbpfVxlan),
        (V::OvsGeneveOvn, V::OvsVxlan),
        (V::TunlabEbpfGeneveOvn, V::KernelVxlan),
    ];
    let each = |sel: Sel, m: Metric, c: Claim| -> Vec<Check> {
        pairs
            .iter()
            .map(|(a, b)| ratio(*a, *b, sel, m, c))
            .collect()
    };
    Spec {
        article: Article::GeneveVsVxlan,
        title: "OVN - Geneve vs VXLAN, Does it Matter?",
        date: "2017-05-30",
        file: "geneve-vs-vxlan-ovn.md",
        question: "Does OVN's Geneve (UDP checksums, one 32-bit option) cost throughput or CPU against VXLAN, on a NIC that spreads VXLAN, not Geneve, over its receive queues (RSS)?",
        testbed: Testbed {
            machines: "two HP Z220, Intel i5-3470 (4 cores, 3.2 GHz), 4 GB",
            network: "Mellanox ConnectX (mlx4_en) back to back, RSS for VXLAN only",
            software: "RHEL 7.3, kernel 4.10.2, Open vSwitch 2.6.1 kernel datapath, tuned throughput-performance",
            method: "pbench-uperf: TCP stream and bidirectional at 1 KB and 16 KB, TCP RR at 1 KB and 16 KB, UDP RR at 64 B and 1 KB, 8 and 64 instances; 3 runs, kept if within 5 % standard deviation",
        },
        stands_for: vec![
            ("OVS kernel datapath, VXLAN", "tunlab-ebpf-vxlan (tunlab's kernel datapath); kernel-vxlan; full: ovs-vxlan"),
            ("OVS kernel datapath, Geneve with checksums and one option", "tunlab-ebpf-geneve-ovn; full: ovs-geneve-ovn (Open vSwitch 3.1 userspace)"),
            ("mlx4_en NIC pair", "a veth pair (no RSS, no checksum offload to verify)"),
        ],
        experiment: Experiment::Lab(lab),
        findings: vec![
            Finding {
                id: "gv1",
                says: "TCP throughput: Geneve carried what VXLAN carried (both at the 10 GbE line rate).",
                checks: each(STREAMS, Metric::Primary, Claim::Above(0.95)),
                gap: Some("nothing here runs at a line rate: both encapsulations are CPU-bound on two vCPUs, so a few per cent of header work shows, where the article's NICs capped both at 10 Gbit/s"),
            },
            Finding {
                id: "gv2",
                says: "Geneve used less CPU than VXLAN in all eight TCP throughput scenarios: 3.96 points less on average (28.1 % against 32.0 % of the hosts' CPU, 0.88x).",
                checks: each(STREAMS, Metric::Demand, Claim::Saving(0.88)),
                gap: Some("the article credits Geneve's saving to the NIC verifying the outer UDP checksum; veth verifies nothing, so that saving cannot appear here"),
            },
            Finding {
                id: "gv3",
                says: "Request/response: Geneve did more transactions per second than VXLAN: 12.8 % more on average, up to 27.8 % at udp_rr-1024B-8i.",
                checks: each(RR, Metric::Primary, Claim::Gain(1.128)),
                gap: Some("the article's RR gain came with RSS spreading flows over four cores; here two vCPUs and one veth queue carry every instance"),
            },
            Finding {
                id: "gv4",
                says: "Request/response: Geneve used slightly more CPU than VXLAN: 2.28 points more on average (68.6 % against 66.3 %, 1.03x).",
                checks: each(RR, Metric::Cpu, Claim::Gain(1.034)),
                gap: Some("CPU here is the whole machine's busy share, the tenants' tools included, not the hosts' switching alone"),
            },
            Finding {
                id: "gv5",
                says: "A NIC that spreads VXLAN but not Geneve over its queues (RSS) did not give VXLAN the lead.",
                checks: vec![Check::NotHere {
                    needs: "two hosts with mlx4_en, mlx5_core, qlcnic or be2net NICs (RSS for VXLAN only) and several receive queues; veth has one queue and no RSS",
                }],
                gap: None,
            },
            Finding {
                id: "gv6",
                says: "The outer UDP checksum, verified by the NIC, lets the kernel skip the inner checksums on receive.",
                checks: vec![Check::NotHere {
                    needs: "a NIC that verifies outer UDP checksums (CHECKSUM_UNNECESSARY with csum_level); veth verifies nothing",
                }],
                gap: None,
            },
        ],
        gaps: vec![
            "veth instead of 10 GbE NICs: no line rate to reach, so throughput is CPU-bound and CPU is compared per KB moved (service demand), not at equal throughput",
            "no RSS and no checksum verification on veth: the two NIC effects the article weighs are absent on both sides",
            "kernel 6.18 against 4.10; two vCPUs against four cores: 64 instances share two CPUs",
            "the article's Geneve was the OVS kernel module; this kernel has no Geneve device, so Geneve is tunlab's eBPF datapath (and, in full, Open vSwitch's userspace one)",
        ],
        charts: geneve_vs_vxlan_charts(),
    }
}

fn vxlan_offload() -> Spec {
    fn lab(profile: &str) -> Plan {
        let mut v = vec![V::None, V::KernelVxlan, V::KernelVxlanSw, V::OvsVxlan];
        if profile == "full" {
            v.push(V::TunlabEbpfVxlan);
        }
        plan(
            "vxlan-offload",
            profile,
            v,
            V::None,
            &["tcp_stream-4096B-1i", "tcp_stream-65536B-1i"],
            &[
                "tcp_stream-4096B-1i",
                "tcp_stream-8192B-1i",
                "tcp_stream-16384B-1i",
                "tcp_stream-32768B-1i",
                "tcp_stream-65536B-1i",
            ],
            10,
        )
    }
    Spec {
        article: Article::VxlanOffload,
        title: "VXLAN Offload",
        date: "2015-03-08",
        file: "vxlan-offload-ovs-netperf.md",
        question: "What does the NIC's VXLAN segmentation offload (tx-udp_tnl-segmentation) save, against no tunnel, with Open vSwitch and netperf?",
        testbed: Testbed {
            machines: "Cisco UCS C220 M4S and C240 M4X, 2 × Xeon E5-2680 v3, 256 GB",
            network: "Emulex OneConnect (be2net) through a Nexus 9372 leaf, jumbo frames (tenant MTU 8950)",
            software: "RHEL 7.1, kernel 3.10.0-229, Open vSwitch (br-int with a VXLAN port)",
            method: "netperf TCP_STREAM, 10 s, 4 KB to 64 KB messages, one stream; offload on and off with ethtool",
        },
        stands_for: vec![
            ("physical-to-physical (baseline)", "none (tenant bridged onto the underlay)"),
            ("VXLAN, offload on", "kernel-vxlan (the veth underlay takes tunnelled TSO frames whole)"),
            ("VXLAN, offload off", "kernel-vxlan-sw (tx-udp_tnl-segmentation off: the kernel segments first)"),
            ("VXLAN over the OVS bridge", "ovs-vxlan (Open vSwitch 3.1 userspace)"),
        ],
        experiment: Experiment::Lab(lab),
        findings: vec![
            Finding {
                id: "vo1",
                says: "With the offload on, VXLAN carried the no-tunnel rate: 9.47–9.84 Gbit/s against 9.11–9.59 (line rate).",
                checks: vec![ratio(V::KernelVxlan, V::None, ALL_STREAMS, Metric::Primary, Claim::Above(0.9))],
                gap: Some("veth has no line rate: without a 10 Gbit/s cap the VXLAN path's extra work shows as throughput lost"),
            },
            Finding {
                id: "vo2",
                says: "With the offload off, CPU use rose by over 50 %.",
                checks: vec![ratio(V::KernelVxlanSw, V::KernelVxlan, ALL_STREAMS, Metric::Demand, Claim::Above(1.5))],
                gap: Some("'offload on' here means the tunnelled TSO frame crosses the veth whole and is never segmented at all; a NIC still segments it, in hardware"),
            },
            Finding {
                id: "vo3",
                says: "With the offload on, small messages cost more CPU per KB than large ones: 0.440 µs/KB sent at 4 KB against 0.214 at 64 KB.",
                checks: vec![Check::Ratio(RatioCheck {
                    a: V::KernelVxlan,
                    b: V::KernelVxlan,
                    tests: Sel::Named(&["tcp_stream-4096B-1i"]),
                    b_test: Some("tcp_stream-65536B-1i"),
                    metric: Metric::Demand,
                    claim: Claim::Gain(2.06),
                })],
                gap: None,
            },
            Finding {
                id: "vo4",
                says: "VXLAN through a bridge (br-int of Open vSwitch) fell short of line rate, where VXLAN straight over the NIC did not.",
                checks: vec![ratio(V::OvsVxlan, V::KernelVxlan, ALL_STREAMS, Metric::Primary, Claim::Below(0.9))],
                gap: Some("ovs-vxlan is Open vSwitch's userspace datapath (netdev), the article's OVS was its kernel module"),
            },
            Finding {
                id: "vo5",
                says: "Newer (4.x) kernels' networking made the same test over 3 times faster.",
                checks: vec![Check::NotHere {
                    needs: "the article's RHEL 7.1 kernel (3.10) and a 4.x kernel on the same hosts; this machine runs one kernel, 6.18",
                }],
                gap: None,
            },
        ],
        gaps: vec![
            "the offload here is the veth's: with tx-udp_tnl-segmentation on, a tunnelled TSO frame crosses to the peer unsegmented (no NIC does the work; nobody does)",
            "MTU 1500 here against the article's 9000-byte jumbo frames",
            "ovs-vxlan is Open vSwitch's userspace datapath, the article's was its kernel module",
        ],
        charts: vxlan_offload_charts(),
    }
}

fn trex_geneve_pvp() -> Spec {
    Spec {
        article: Article::TrexGenevePvp,
        title: "Measuring Geneve Tunnel Throughput for Hardware Accelerated DataPath with OVN",
        date: "2021",
        file: "geneve-hw-offload-trex.md",
        question: "Can a TRex host speaking Geneve with OVN's option to a compute node measure its offloaded datapath's line rate in a PVP loop, with no gateway between?",
        testbed: Testbed {
            machines: "OpenStack 16.2 compute node (DUT) with a TestPMD VM; a bare-metal TRex host",
            network: "hardware-offloaded OVN datapath, 50 Gbit/s bidirectional, VLAN 177 outer tag",
            software: "RHEL 8.4 (4.18), Open vSwitch 2.15, OVN 21.03, TRex 2.89 with a patched scapy Geneve layer",
            method: "zero-drop throughput, PVP, bidirectional, frames of 128 to 9000 B, 10-minute trials",
        },
        stands_for: vec![
            ("TRex host", "tunlab gen (AF_XDP where the wire takes it)"),
            ("compute node with offloaded OVN", "a tunlab node on its eBPF datapath, then on its userspace one"),
            ("TestPMD VM", "an XDP reflector in the tenant namespace"),
        ],
        experiment: Experiment::Pvp,
        findings: vec![
            Finding {
                id: "tp1",
                says: "The loop forwarded every frame size at line rate with no drop (50 Gbit/s offered, 0 dropped, 128 to 9000 B).",
                checks: vec![Check::Pvp(PvpCheck::NoLossAtTop)],
                gap: Some("'line rate' here is the generator's own top rate on the same two vCPUs"),
            },
            Finding {
                id: "tp2",
                says: "The bit rate held across frame sizes (41.9 to 49.9 Gbit/s received) while frames per second fell with size: 42.25 Mpps at 128 B, 4.12 Mpps at 1500 B.",
                checks: vec![Check::Pvp(PvpCheck::BitRateHolds)],
                gap: Some("the loop here is limited by frames (CPU per frame), not by bits on a 50 Gbit/s link: the frame rate stays nearly flat and the bit rate grows with the frame"),
            },
            Finding {
                id: "tp3",
                says: "A software traffic generator in a VM reached only 6–7 Mpps.",
                checks: vec![Check::Pvp(PvpCheck::GeneratorBelowMfps(7))],
                gap: None,
            },
            Finding {
                id: "tp4",
                says: "A software OVN gateway in the path could not sustain the generator's rate; the datapath had to carry it.",
                checks: vec![Check::Pvp(PvpCheck::UserspaceBelowKernel)],
                gap: Some("the software path here is tunlab's userspace datapath, not an OVN gateway host"),
            },
            Finding {
                id: "tp5",
                says: "The NIC's hardware offload of the OVN datapath used 0.17–8.12 % CPU at line rate.",
                checks: vec![Check::NotHere {
                    needs: "a NIC that offloads OVN's Geneve flows (e.g. ConnectX-5/6 with TC flower offload, switchdev mode)",
                }],
                gap: None,
            },
        ],
        gaps: vec![
            "veth and AF_XDP in one VM, not 50 Gbit/s NICs: the generator, the node and the reflector share two vCPUs, so 'line rate' is the generator's top rate here",
            "no NIC offload: the node's eBPF datapath stands for the offloaded one, the userspace datapath for software OVN",
            "2-s trials and 5-s validation (quick) against 10-minute trials",
        ],
        // The article gave tables; the searches' own report draws them.
        charts: vec![],
    }
}

fn qinq() -> Spec {
    fn lab(profile: &str) -> Plan {
        let mut v = vec![
            V::KernelVxlan,
            V::KernelVxlanSw,
            V::TunlabEbpfGeneve,
            V::TunlabEbpfQinq,
        ];
        if profile == "full" {
            v.extend([V::OvsQinq, V::OvsVxlan, V::OvsGeneve]);
        }
        plan(
            "qinq",
            profile,
            v,
            V::KernelVxlanSw,
            &["tcp_stream-16384B-1i", "tcp_stream-16384B-5i"],
            &[
                "tcp_stream-16384B-1i",
                "tcp_stream-16384B-5i",
                "tcp_stream-16384B-64i",
                "tcp_stream-16384B-1i@2G",
            ],
            5,
        )
    }
    let sw = [V::KernelVxlanSw, V::TunlabEbpfGeneve];
    let vs_sw = |sel: Sel, m: Metric, c: Claim| -> Vec<Check> {
        sw.iter()
            .map(|b| ratio(V::TunlabEbpfQinq, *b, sel, m, c))
            .collect()
    };
    let mut cpu = vs_sw(Sel::FixedRate, Metric::Primary, Claim::Below(0.5));
    cpu.extend(vs_sw(
        Sel::Named(&["tcp_stream-16384B-1i", "tcp_stream-16384B-5i"]),
        Metric::Demand,
        Claim::Below(0.5),
    ));
    Spec {
        article: Article::Qinq,
        title: "QinQ Performance",
        date: "2017",
        file: "qinq-vs-vxlan-geneve.md",
        question: "How does QinQ compare with VXLAN and Geneve, in software and with NIC offloads, in throughput and CPU?",
        testbed: Testbed {
            machines: "two directly connected nodes, Xeon E5-2690",
            network: "Mellanox ConnectX-3 Pro (mlx4), 40 Gbit/s; S-VLAN parsing but no S-VLAN insert",
            software: "kernel 4.12.0-rc2, Open vSwitch kernel datapath, tenants in namespaces on veth",
            method: "netperf 1 and 5 instances, iperf3 5 × 128 streams, CPU with mpstat at a fixed 20 Gbit/s (5 CPUs on)",
        },
        stands_for: vec![
            ("VXLAN-SW", "kernel-vxlan-sw (tunnel segmentation offload off)"),
            ("VXLAN-HW", "kernel-vxlan (the veth's tunnel segmentation offload on)"),
            ("GENEVE-SW", "tunlab-ebpf-geneve (no kernel Geneve here)"),
            ("QinQ-SW", "tunlab-ebpf-qinq; full: ovs-qinq"),
        ],
        experiment: Experiment::Lab(lab),
        findings: vec![
            Finding {
                id: "qq1",
                says: "With one netperf stream, QinQ in software carried almost twice what VXLAN and Geneve carried in software.",
                checks: vs_sw(Sel::Named(&["tcp_stream-16384B-1i"]), Metric::Primary, Claim::Above(1.8)),
                gap: Some("tunlab's eBPF Geneve keeps the veth's segmentation offload, so it is not the article's software-only GENEVE-SW; kernel-vxlan-sw is"),
            },
            Finding {
                id: "qq2",
                says: "With five netperf instances the same gap held, QinQ near the 40 Gbit/s line.",
                checks: vs_sw(Sel::Named(&["tcp_stream-16384B-5i"]), Metric::Primary, Claim::Above(1.8)),
                gap: Some("as qq1; and five instances share one underlay here, not five tunnels"),
            },
            Finding {
                id: "qq3",
                says: "At a fixed 20 Gbit/s, QinQ in software used less than half the CPU of VXLAN and Geneve in software (full: CPU % at a fixed 2 Gbit/s; quick: CPU per KB moved).",
                checks: cpu,
                gap: Some("quick compares CPU per KB moved, full the CPU at a fixed rate of 2 Gbit/s (the article: 20 Gbit/s on five cores)"),
            },
            Finding {
                id: "qq4",
                says: "VXLAN's offload helped a lot: VXLAN-HW far above VXLAN-SW in throughput.",
                checks: vec![ratio(V::KernelVxlan, V::KernelVxlanSw, STREAMS, Metric::Primary, Claim::Above(1.2))],
                gap: Some("the 'hardware' here is the veth's offload, done by nobody: the tunnelled TSO frame is never segmented"),
            },
            Finding {
                id: "qq5",
                says: "QinQ with the NIC parsing S-VLAN tags did hardly better than QinQ in software (the tag costs 0.02 % of transmit).",
                checks: vec![Check::NotHere {
                    needs: "a NIC with S-VLAN (802.1ad) tag parsing and insertion; veth's VLAN offloads are done in software",
                }],
                gap: None,
            },
        ],
        gaps: vec![
            "the offloads here are veth's, done in software: 'VXLAN-HW' is the kernel passing tunnelled TSO frames across the veth whole",
            "Geneve in software is tunlab's eBPF datapath, which keeps the veth's segmentation offload; the article's GENEVE-SW had none",
            "one underlay, not one tunnel per instance; two vCPUs against the article's five cores for the CPU test",
            "CPU is read at 2 Gbit/s (the lab's fixed rate), not at 20",
        ],
        charts: qinq_charts(),
    }
}

fn stt_gre() -> Spec {
    fn lab(profile: &str) -> Plan {
        let mut v = vec![V::None, V::TunlabStt, V::TunlabGre, V::TunlabEbpfGre];
        if profile == "full" {
            v.extend([V::OvsBridge, V::OvsGre]);
        }
        plan(
            "stt-gre",
            profile,
            v,
            V::None,
            &["tcp_stream-32768B-1i", "tcp_bidirec-32768B-4i"],
            &["tcp_stream-32768B-1i", "tcp_bidirec-32768B-4i"],
            10,
        )
    }
    let one = Sel::Named(&["tcp_stream-32768B-1i"]);
    let four = Sel::Named(&["tcp_bidirec-32768B-4i"]);
    Spec {
        article: Article::SttGre,
        title: "The Overhead of Software Tunneling",
        date: "2012",
        file: "software-tunneling-overhead-stt-gre.md",
        question: "Does tunnelling in software cost throughput or CPU against no tunnel, with STT and with GRE, in Open vSwitch?",
        testbed: Testbed {
            machines: "Intel Xeon 2.40 GHz servers, KVM guests, Ubuntu 12.04",
            network: "10 GbE Broadcom NICs through a Dell 10G switch, MTU 1500",
            software: "Open vSwitch (kernel datapath): bridge, STT and GRE ports; Linux bridge",
            method: "netperf, 32 KB payloads: one flow between two VMs; then four VMs per hypervisor, aggregate bidirectional",
        },
        stands_for: vec![
            ("Linux bridge / OVS bridge (no tunnel)", "none (the tenant bridged onto the underlay); full: ovs-bridge"),
            ("OVS-STT", "tunlab-stt (userspace datapath)"),
            ("OVS-GRE (no segmentation offload on the NICs)", "tunlab-gre (userspace datapath: every segment encapsulated in software)"),
            ("GRE with the offload the article expected of later NICs", "tunlab-ebpf-gre (the veth underlay's GRE segmentation offload)"),
        ],
        experiment: Experiment::Lab(lab),
        findings: vec![
            Finding {
                id: "sg1",
                says: "STT carried one flow at the no-tunnel rate: 9.5 Gbit/s against 9.3 (Linux bridge) and 9.4 (OVS bridge).",
                checks: vec![
                    ratio(V::TunlabStt, V::None, one, Metric::Primary, Claim::Above(0.9)),
                    // The article's own pair: OVS-STT against the OVS bridge.
                    ratio(V::TunlabStt, V::OvsBridge, one, Metric::Primary, Claim::Above(0.9)),
                ],
                gap: Some("tunlab's STT is its userspace datapath (TAP, sockets), the article's was Open vSwitch's kernel module"),
            },
            Finding {
                id: "sg2",
                says: "GRE without segmentation offload carried a quarter of it: 2.3 Gbit/s.",
                checks: vec![
                    ratio(V::TunlabGre, V::None, one, Metric::Primary, Claim::Below(0.35)),
                    ratio(V::OvsGre, V::None, one, Metric::Primary, Claim::Below(0.35)),
                ],
                gap: Some("tunlab's userspace GRE encapsulates each segment in software, as the article's NICs forced; that part is alike"),
            },
            Finding {
                id: "sg3",
                says: "STT cost less CPU than no tunnel: 70 % of a core on each side against 82 % and 70 % (OVS bridge).",
                checks: vec![ratio(V::TunlabStt, V::None, one, Metric::Demand, Claim::Saving(0.85))],
                gap: Some("as sg1: userspace copies cost CPU the kernel module did not; the article counted the switching CPU alone, here the whole machine's"),
            },
            Finding {
                id: "sg4",
                says: "Four VMs a side, both directions: STT's aggregate matched the bridge's (18.5 against 18.4 Gbit/s), GRE stayed at 2.3.",
                checks: vec![
                    ratio(V::TunlabStt, V::None, four, Metric::Primary, Claim::Above(0.9)),
                    ratio(V::TunlabGre, V::None, four, Metric::Primary, Claim::Below(0.35)),
                ],
                gap: Some("as sg1"),
            },
            Finding {
                id: "sg5",
                says: "GRE's gap is the NICs' (no segmentation offload for it), not the protocol's: with the offload GRE would carry the no-tunnel rate.",
                checks: vec![ratio(V::TunlabEbpfGre, V::None, one, Metric::Primary, Claim::Above(0.9))],
                gap: Some("the offload here is the veth's GRE segmentation (tx-gre-segmentation), in software"),
            },
        ],
        gaps: vec![
            "tunlab's STT and GRE are its userspace datapath (TAP, a socket per tunnel), the article's were Open vSwitch's kernel module: the userspace copies cost what the kernel module did not",
            "STT's receive-side coalescing is tunlab's own; the article's CPU was the hypervisor's switching CPU only, here it is the whole machine's per KB",
            "no guests: tenants are namespaces on the same two vCPUs as the datapath",
        ],
        charts: stt_gre_charts(),
    }
}

/// The charts of geneve-vs-vxlan: the article's three figures, and CPU per KB as the checks read it.
fn geneve_vs_vxlan_charts() -> Vec<Axes> {
    vec![
        Axes {
            title: "TCP throughput scenarios: CPU (the article's tcp-throughput-cpu)",
            metric: Metric::Cpu,
            tests: STREAMS,
        },
        Axes {
            title: "TCP throughput scenarios: throughput (the article: line rate for both)",
            metric: Metric::Primary,
            tests: STREAMS,
        },
        Axes {
            title: "TCP throughput scenarios: CPU per KB moved (how the checks compare CPU here)",
            metric: Metric::Demand,
            tests: STREAMS,
        },
        Axes {
            title: "Request/response: transactions per second (the article's rr-perf)",
            metric: Metric::Primary,
            tests: RR,
        },
        Axes {
            title: "Request/response: CPU (the article's rr-cpu)",
            metric: Metric::Cpu,
            tests: RR,
        },
    ]
}

/// The charts of vxlan-offload: its throughput and CPU figures, and CPU per KB (vo3).
fn vxlan_offload_charts() -> Vec<Axes> {
    vec![
        Axes {
            title: "Throughput by message size (the article's total throughput)",
            metric: Metric::Primary,
            tests: ALL_STREAMS,
        },
        Axes {
            title: "CPU by message size (the article's CPU, server and client: here the whole machine, both sides)",
            metric: Metric::Cpu,
            tests: ALL_STREAMS,
        },
        Axes {
            title: "CPU per KB moved by message size (the article's service demand, vo3)",
            metric: Metric::Demand,
            tests: ALL_STREAMS,
        },
    ]
}

/// The charts of qinq: its throughput and CPU figures, and quick's CPU per KB.
fn qinq_charts() -> Vec<Axes> {
    vec![
        Axes {
            title: "netperf throughput, 1 and 5 instances (full: 64 streams)",
            metric: Metric::Primary,
            tests: ALL_STREAMS,
        },
        Axes {
            title: "CPU at a fixed rate (the article's CPU utilization at 20 Gbit/s; full profile)",
            metric: Metric::Primary,
            tests: Sel::FixedRate,
        },
        Axes {
            title: "CPU per KB moved (quick's CPU comparison)",
            metric: Metric::Demand,
            tests: ALL_STREAMS,
        },
    ]
}

/// The charts of stt-gre: its two tables, as bars.
fn stt_gre_charts() -> Vec<Axes> {
    vec![
        Axes {
            title: "Throughput: one flow, and four pairs both ways (the article's two tables)",
            metric: Metric::Primary,
            tests: STREAMS,
        },
        Axes {
            title: "CPU (the article's CPU column; here the whole machine)",
            metric: Metric::Cpu,
            tests: STREAMS,
        },
        Axes {
            title: "CPU per KB moved (how the checks compare CPU here)",
            metric: Metric::Demand,
            tests: STREAMS,
        },
    ]
}
