//! Two tunlab nodes in network namespaces, tenants behind them:
//!
//! ```text
//!  netns ta            netns hv1                          netns hv2            netns tb
//!  192.168.7.1 ──tap── [tunlab switch] ─veth─ 172.31.0.1 ═══ 172.31.0.2 ─veth─ [tunlab switch] ──tap── 192.168.7.2
//!                       (fd00:31::1)                          (fd00:31::2)
//! ```
//!
//! For Geneve and VXLAN (and Geneve over an IPv6 underlay): UDP echo and a
//! TCP transfer with a checksum of the bytes, both directions. Isolation: a
//! node whose flows accept another VNI delivers nothing, and its counters
//! say why. Needs root; every namespace and process is removed on success
//! and failure, and a killed run's namespaces are swept by the next.

mod common;

use common::*;
use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;
use tunlab_netio::netns;

/// How a pair of nodes is set up for one offload combination.
#[derive(Clone, Copy)]
struct Offloads {
    /// Outer UDP checksum (the UDP GSO path needs it).
    csum: bool,
    /// The node's `offloads` setting (TAP TSO, UDP GSO, software GRO).
    node: bool,
    /// The tenants turn TSO off on their TAP (`ethtool -K tso off`).
    tenant_tso: bool,
    /// Tenant MTUs (None: the node's default, the tunnel's room).
    mtu: [Option<u16>; 2],
}

const ALL_ON: Offloads = Offloads {
    csum: true,
    node: true,
    tenant_tso: true,
    mtu: [None, None],
};

/// Packets in a `stats` line's field: `port 1 tap-n1 (tap): rx N pkts ..., tx M pkts`.
fn pkts(stats: &str, port: &str, dir: &str) -> u64 {
    let line = stats
        .lines()
        .find(|l| l.contains(&format!(" {port} (")))
        .unwrap_or_else(|| panic!("no port {port} in {stats}"));
    let at = line.find(&format!("{dir} ")).unwrap() + dir.len() + 1;
    line[at..].split(' ').next().unwrap().parse().unwrap()
}

/// Frames the slow path read (`rx`) or wrote (`tx`) on `port`, a
/// super-frame once: `slow path frames rx N tx M` when they differ from
/// the packets, which count segments; the packets otherwise.
fn frames(stats: &str, port: &str, dir: &str) -> u64 {
    let line = stats
        .lines()
        .find(|l| l.contains(&format!(" {port} (")))
        .unwrap_or_else(|| panic!("no port {port} in {stats}"));
    match line.split_once("slow path frames ") {
        Some((_, f)) => pkts(&format!(" {port} ( {f}"), port, dir),
        None => pkts(stats, port, dir),
    }
}

/// Two nodes under one offload combination: ping, UDP echo and a 2 MB
/// TCP transfer checked byte for byte, both ways. Returns the nodes'
/// final statistics.
fn offload_case(kind: &str, o: Offloads) -> (String, String) {
    let l = lab();
    let cfg = |name: &str, ns: &str, ip: &str, local: &str, remote: &str, mtu: Option<u16>| {
        let mut c = node_config(name, ns, ip, kind, local, remote, 6, 6);
        if o.csum {
            c = c.replace("key = 6\n", "key = 6\ncsum = true\n");
        }
        if !o.node {
            c = c.replacen("[switch]\n", "[switch]\noffloads = false\n", 1);
        }
        if let Some(m) = mtu {
            c = c.replace("/24\"\n", &format!("/24\"\nmtu = {m}\n"));
        }
        c
    };
    let (s1, s2) = start_pair(
        &l,
        &cfg(
            "n1",
            l.ta.name(),
            "192.168.7.1",
            "172.31.0.1",
            "172.31.0.2",
            o.mtu[0],
        ),
        &cfg(
            "n2",
            l.tb.name(),
            "192.168.7.2",
            "172.31.0.2",
            "172.31.0.1",
            o.mtu[1],
        ),
    );
    if !o.tenant_tso {
        for (ns, tap) in [(&l.ta, "tap-n1"), (&l.tb, "tap-n2")] {
            let st = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    ns.name(),
                    "ethtool",
                    "-K",
                    tap,
                    "tso",
                    "off",
                ])
                .status()
                .unwrap();
            assert!(st.success(), "ethtool -K {tap} tso off");
        }
    }
    traffic_both_ways(&l, kind);
    (s1.stop(), s2.stop())
}

/// Every offload on: the tenant hands over super-frames (far fewer frames
/// from the TAP than segments into the tunnel), and the receiver joins
/// segments again (far fewer frames to its TAP than segments received).
/// Packets count segments on every port, so they add up across the node.
#[test]
fn super_frames_through_geneve() {
    let (e1, e2) = offload_case("geneve", ALL_ON);
    let (tap_rx, tun_tx) = (frames(&e1, "tap-n1", "rx"), pkts(&e1, "t-n1", "tx"));
    assert!(
        tun_tx > 3 * tap_rx,
        "segments {tun_tx}, frames {tap_rx}: {e1}"
    );
    assert_eq!(pkts(&e1, "tap-n1", "rx"), tun_tx, "{e1}");
    let (tun_rx, tap_tx) = (pkts(&e2, "t-n2", "rx"), frames(&e2, "tap-n2", "tx"));
    assert!(
        tun_rx > 3 * tap_tx,
        "segments {tun_rx}, joined {tap_tx}: {e2}"
    );
    assert_eq!(pkts(&e2, "tap-n2", "tx"), tun_rx, "{e2}");
    assert!(!e1.contains("dropped"), "{e1}");
    assert!(!e2.contains("dropped"), "{e2}");
}

#[test]
fn super_frames_through_vxlan() {
    let (e1, e2) = offload_case("vxlan", ALL_ON);
    assert!(
        pkts(&e1, "t-n1", "tx") > 3 * frames(&e1, "tap-n1", "rx"),
        "{e1}"
    );
    assert!(
        pkts(&e2, "t-n2", "rx") > 3 * frames(&e2, "tap-n2", "tx"),
        "{e2}"
    );
}

/// STT's point: the super-frame crosses as one STT frame that the kernel
/// segments as TCP, and arrives whole (one frame per many segments).
#[test]
fn super_frames_through_stt() {
    let (e1, e2) = offload_case("stt", ALL_ON);
    let (tun_tx, tun_rx) = (pkts(&e1, "t-n1", "tx"), frames(&e2, "t-n2", "rx"));
    assert!(
        tun_tx > 3 * tun_rx,
        "segments sent {tun_tx}, frames received {tun_rx}: {e1}{e2}"
    );
    assert!(!e2.contains("dropped"), "{e2}");
}

/// Super-frames into ports without a whole-frame path are cut into segments.
#[test]
fn super_frames_cut_for_gre_and_zero_checksum_geneve() {
    offload_case("gre", ALL_ON);
    let (e1, _) = offload_case(
        "geneve",
        Offloads {
            csum: false,
            ..ALL_ON
        },
    );
    assert!(
        pkts(&e1, "t-n1", "tx") > 3 * frames(&e1, "tap-n1", "rx"),
        "{e1}"
    );
}

/// The node's offloads off: nothing larger than the MTU crosses the TAP.
#[test]
fn node_offloads_off() {
    let (e1, e2) = offload_case(
        "geneve",
        Offloads {
            node: false,
            ..ALL_ON
        },
    );
    assert_eq!(pkts(&e1, "tap-n1", "rx"), pkts(&e1, "t-n1", "tx"), "{e1}");
    assert_eq!(pkts(&e2, "t-n2", "rx"), pkts(&e2, "tap-n2", "tx"), "{e2}");
}

/// A tenant with TSO off sends MTU-sized frames with the checksum partial.
#[test]
fn tenant_with_tso_off() {
    let (e1, _) = offload_case(
        "geneve",
        Offloads {
            tenant_tso: false,
            ..ALL_ON
        },
    );
    let (tap_rx, tun_tx) = (pkts(&e1, "tap-n1", "rx"), pkts(&e1, "t-n1", "tx"));
    assert!(
        tun_tx <= tap_rx + 10,
        "segments {tun_tx}, frames {tap_rx}: {e1}"
    );
}

/// Tenant MTUs that differ, and one larger than the tunnel leaves: TCP
/// finds its way (MSS, then ICMP "fragmentation needed" from the node for
/// segments of a super-frame too big for the underlay).
#[test]
fn mixed_tenant_mtus() {
    offload_case(
        "geneve",
        Offloads {
            mtu: [None, Some(4000)],
            ..ALL_ON
        },
    );
    let (e1, _) = offload_case(
        "vxlan",
        Offloads {
            mtu: [Some(3000), Some(3000)],
            ..ALL_ON
        },
    );
    assert!(e1.contains("too_big_icmp_sent"), "{e1}");
}

/// Header rewrites carried out on real frames, checksums and all: tenant
/// a talks to 192.168.7.99, which does not exist; n1 rewrites the
/// destination to b's 192.168.7.2 (and the TTL down by one), n2 rewrites
/// b's answers to come from .99. A TCP stream arrives whole both ways
/// round, through TAPs that hand over partial checksums and super-frames
/// (the userspace datapath), and through the eBPF datapath, which leaves
/// such flows to the slow path by name.
fn dnat_by_set_field(dp: Datapath) {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (c1, c2) = (dp.config(&l.hv1, c1), dp.config(&l.hv2, c2));
    let (p1, p2) = (l.dir.join("n1.ctl"), l.dir.join("n2.ctl"));
    let (s1, s2) = start_pair(&l, &with_ctl(&c1, &p1), &with_ctl(&c2, &p2));
    for (c, rule) in [
        (&p1, "priority=40000,in_port=1,ip,nw_dst=192.168.7.99 actions=dec_ttl,set_field:192.168.7.2->ip_dst,output:10"),
        (&p2, "priority=40000,in_port=1,ip,nw_src=192.168.7.2,nw_dst=192.168.7.1 actions=set_field:192.168.7.99->ip_src,output:10"),
    ] {
        let (ok, _, err) = ctl(c, &["add-flow", rule]);
        assert!(ok, "{err}");
    }
    // a reaches .99 at b's MAC (no ARP answers for it).
    wait_for_tap(&l.ta, "tap-n1");
    wait_for_tap(&l.tb, "tap-n2");
    let mac = netns::ip(l.tb.name(), &["-br", "link", "show", "tap-n2"])
        .ok()
        .and_then(|o| o.split_whitespace().nth(2).map(str::to_string))
        .unwrap_or_else(|| panic!("tap-n2's address in {}", l.tb.name()));
    netns::ip(
        l.ta.name(),
        &[
            "neigh",
            "replace",
            "192.168.7.99",
            "lladdr",
            &mac,
            "dev",
            "tap-n1",
        ],
    )
    .unwrap();
    let pinged = (0..3).any(|_| {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                l.ta.name(),
                "ping",
                "-q",
                "-c",
                "2",
                "-i",
                "0.2",
                "-W",
                "2",
                "192.168.7.99",
            ])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    assert!(pinged, "ping through the DNAT\n{}", both_nodes(&l));
    let (sent, got) = tcp_transfer_via(&l.ta, &l.tb, "192.168.7.2", "192.168.7.99");
    assert_eq!(sent, got, "the stream through the DNAT\n{}", both_nodes(&l));
    let (ok, dump, _) = ctl(&p1, &["dump-flows"]);
    assert!(ok);
    let hits = dump
        .lines()
        .find(|l| l.contains("192.168.7.99"))
        .and_then(|l| l.split("n_packets=").nth(1))
        .and_then(|n| n.split(',').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(hits > 0, "{dump}");
    if dp.on_kernel() {
        let st = s1.stats();
        assert!(
            counter(&st, "kernel_not_installed_header_rewrite_not_in_kernel") > 0,
            "{st:?}"
        );
    }
    drop((s1, s2));
}

#[test]
fn dnat_by_set_field_on_the_userspace_datapath() {
    dnat_by_set_field(Datapath::Userspace);
}

#[test]
fn dnat_by_set_field_on_the_kernel_datapath() {
    dnat_by_set_field(Datapath::Kernel);
}

#[test]
fn stt_ipv4_underlay() {
    two_nodes("stt", false, Datapath::Userspace);
}

#[test]
fn flows_change_at_run_time_through_ctl() {
    let l = lab();
    let c1 = l.dir.join("n1.ctl");
    // n1 starts with no flows at all; n2 is complete.
    let n1 = node_config(
        "n1",
        l.ta.name(),
        "192.168.7.1",
        "vxlan",
        "172.31.0.1",
        "172.31.0.2",
        6,
        6,
    );
    let n1 = with_ctl(&n1, &c1).replace(
        "  \"in_port=1 actions=output:10\",\n  \"in_port=10,tun_id=6 actions=output:1\",\n",
        "",
    );
    let (s1, s2) = start_pair(
        &l,
        &n1,
        &with_ctl(
            &node_config(
                "n2",
                l.tb.name(),
                "192.168.7.2",
                "vxlan",
                "172.31.0.2",
                "172.31.0.1",
                6,
                6,
            ),
            &l.dir.join("n2.ctl"),
        ),
    );
    assert!(
        !udp_echo(&l.ta, &l.tb, "192.168.7.2", 1, 2),
        "no flows: nothing may pass"
    );

    let (ok, out, _) = ctl(&c1, &["show"]);
    assert!(
        ok && out.contains(" 1(tap-n1): tap") && out.contains(" 10(t-n1): vxlan"),
        "{out}"
    );
    let (ok, _, err) = ctl(
        &c1,
        &["add-flow", "in_port=tap-n1,dl_vlan=5000 actions=output:10"],
    );
    assert!(
        !ok && err.contains("dl_vlan: 5000 is out of range") && err.contains("^^^^"),
        "{err}"
    );
    assert_eq!(
        ctl(&c1, &["dump-flows"]).1,
        "",
        "a refused rule must leave no trace"
    );
    assert!(ctl(&c1, &["add-flow", "in_port=tap-n1 actions=output:t-n1"]).0);
    assert!(ctl(&c1, &["add-flow", "in_port=10,tun_id=6 actions=output:1"]).0);
    let (_, off, _) = ctl(&c1, &["stats", "--cycles"]);
    assert!(off.contains("cycles: off"), "{off}");
    assert!(ctl(&c1, &["cycles", "on"]).0);
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.7.2", 5, 6),
        "flows added at run time must carry traffic"
    );
    // Every echo went through receive, classify and transmit on n1.
    let (_, cyc, _) = ctl(&c1, &["stats", "--cycles"]);
    for stage in ["receive", "classify", "encap", "transmit"] {
        let line = cyc
            .lines()
            .find(|l| l.starts_with(stage))
            .unwrap_or_else(|| panic!("{stage}: {cyc}"));
        let frames: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(frames >= 5, "{stage} saw {frames} frames: {cyc}");
    }
    let (ok, _, err) = ctl(&c1, &["cycles", "sideways"]);
    assert!(!ok && err.contains("'on' or 'off'"), "{err}");
    assert!(ctl(&c1, &["cycles", "off"]).0);
    let (_, dump, _) = ctl(&c1, &["dump-flows"]);
    assert!(
        dump.contains("in_port=tap-n1 actions=output:t-n1"),
        "{dump}"
    );
    assert!(
        !dump.contains("n_packets=0,"),
        "both rules were used: {dump}"
    );
    let (ok, out, _) = ctl(&c1, &["del-flows", "in_port=tap-n1"]);
    assert!(ok && out.contains("deleted 1 rules"), "{out}");
    assert!(
        !udp_echo(&l.ta, &l.tb, "192.168.7.2", 1, 2),
        "deleted rule must stop traffic"
    );
    let (_, stats, _) = ctl(&c1, &["stats"]);
    assert!(
        stats.contains("dropped no_rule: ") && stats.contains("exact-match cache: "),
        "{stats}"
    );
    let (ok, _, err) = ctl(&c1, &["frobnicate"]);
    assert!(!ok && err.contains("unknown request 'frobnicate'"), "{err}");
    s1.stop();
    s2.stop();
    assert!(!c1.exists(), "the control socket is removed on exit");
}

/// Interop with the Linux kernel's VXLAN device:
///
/// ```text
///  ta 192.168.7.1 ─tap─ [tunlab switch, hv1] ═ VXLAN 6 ═ [hv2: vxlan0 ─ br0 ─ veth] ─ tb 192.168.7.2
/// ```
#[test]
fn interop_with_kernel_vxlan() {
    kernel_vxlan_interop(false);
}

/// The same with tunlab on its kernel datapath (the kernel's VXLAN sends
/// outer UDP checksums by default: verified, or trusted where the kernel
/// has checked them), which must carry the traffic.
#[test]
fn interop_with_kernel_vxlan_on_the_kernel_datapath() {
    kernel_vxlan_interop(true);
}

fn kernel_vxlan_interop(kernel: bool) {
    let l = lab();
    let u2 = l.u2.clone();
    let cfg = node_config(
        "n1",
        l.ta.name(),
        "192.168.7.1",
        "vxlan",
        "172.31.0.1",
        "172.31.0.2",
        6,
        6,
    );
    let cfg = if kernel { on_kernel(&cfg) } else { cfg };
    let s1 = Switch::start(l.hv1.name(), &cfg, &l.dir, "n1");
    // hv2: the kernel's VXLAN, bridged to a veth whose other end is tb's.
    let hv2 = l.hv2.name();
    l.hv2
        .ip(&[
            "link",
            "add",
            "vxlan0",
            "type",
            "vxlan",
            "id",
            "6",
            "local",
            "172.31.0.2",
            "remote",
            "172.31.0.1",
            "dstport",
            "4789",
            "dev",
            &u2,
        ])
        .unwrap();
    l.hv2.ip(&["link", "add", "br0", "type", "bridge"]).unwrap();
    l.hv2
        .ip(&["link", "set", "vxlan0", "master", "br0"])
        .unwrap();
    l.hv2
        .veth("tbh", l.tb.name(), "tbe", netns::Veth::default())
        .unwrap();
    l.hv2.ip(&["link", "set", "tbh", "master", "br0"]).unwrap();
    for dev in ["vxlan0", "br0", "tbh"] {
        l.hv2.ip(&["link", "set", dev, "up"]).unwrap();
    }
    l.tb.ip(&["link", "set", "tbe", "mtu", "1450"]).unwrap();
    l.tb.addr("tbe", "192.168.7.2/24").unwrap();
    wait_for_tap(&l.ta, "tap-n1");
    if !udp_echo(&l.ta, &l.tb, "192.168.7.2", 10, 6) {
        let k = l
            .hv2
            .ip(&["-s", "link", "show", "vxlan0"])
            .unwrap_or_default();
        let fdb =
            netns::run(&["bridge", "-n", hv2, "fdb", "show", "dev", "vxlan0"]).unwrap_or_default();
        let t = l.tb.ip(&["-s", "link", "show", "tbe"]).unwrap_or_default();
        panic!(
            "UDP tunlab -> kernel VXLAN\nswitch:\n{}\nvxlan0:\n{k}\nfdb:\n{fdb}\ntbe:\n{t}",
            s1.stop()
        );
    }
    // The first direction was checked above with diagnostics; now all of it.
    traffic_both_ways(&l, "tunlab/kernel VXLAN");
    if kernel {
        assert_kernel_carried(&l.dir, "n1", "tunlab/kernel VXLAN");
    }
    let e1 = s1.stop();
    assert!(!e1.contains("dropped malformed"), "{e1}");
}

/// Path MTU: the tenant's interface allows 1500, but a tunnel over a 1500
/// underlay carries `fits` bytes of tenant IP (VXLAN 1450). A DF packet of
/// `fits` bytes passes; one of `fits + 1` is answered with ICMP
/// fragmentation-needed (MTU `fits`), and the tenant's kernel then knows
/// the path MTU.
fn too_big_gets_icmp_fragmentation_needed(kind: &str, fits: usize) {
    too_big_on(kind, fits, false);
}

/// The same on the kernel datapath: the frame that does not fit goes up
/// whole and the slow path answers it.
fn too_big_on(kind: &str, fits: usize, kernel: bool) {
    use std::os::fd::AsRawFd;
    let l = lab();
    let big = |c: String| {
        c.replace(
            "address = \"192.168.7.1/24\"",
            "address = \"192.168.7.1/24\"\nmtu = 1500",
        )
        .replace(
            "address = \"192.168.7.2/24\"",
            "address = \"192.168.7.2/24\"\nmtu = 1500",
        )
    };
    let (n1, n2) = if kind == "qinq" {
        (
            qinq_article_node("n1", l.ta.name(), 1, &l.u1),
            qinq_article_node("n2", l.tb.name(), 2, &l.u2),
        )
    } else {
        (
            node_config(
                "n1",
                l.ta.name(),
                "192.168.7.1",
                kind,
                "172.31.0.1",
                "172.31.0.2",
                6,
                6,
            ),
            node_config(
                "n2",
                l.tb.name(),
                "192.168.7.2",
                kind,
                "172.31.0.2",
                "172.31.0.1",
                6,
                6,
            ),
        )
    };
    let (n1, n2) = if kernel {
        (on_kernel(&n1), on_kernel(&n2))
    } else {
        (n1, n2)
    };
    let (s1, s2) = start_pair(&l, &big(n1), &big(n2));
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.7.2", 1, 6),
        "small packets pass (and ARP is done)"
    );
    // First without DF (before the tenant learns a path MTU and starts
    // fragmenting itself): Geneve and GRE fragment the outer packet, STT
    // segments the frame; VXLAN (RFC 7348 § 4.3) and QinQ cannot, and
    // count a drop.
    let receiver = in_ns(l.tb.name(), || {
        let s = UdpSocket::bind("192.168.7.2:7004").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 2000];
        retry_eintr(|| s.recv(&mut buf)).ok()
    });
    std::thread::sleep(Duration::from_millis(100));
    in_ns(l.ta.name(), move || {
        let s = UdpSocket::bind("192.168.7.1:0").unwrap();
        s.connect("192.168.7.2:7004").unwrap();
        let dont: nix::libc::c_int = nix::libc::IP_PMTUDISC_DONT;
        // SAFETY: setsockopt reads one c_int from `&dont` during the call.
        let r = unsafe {
            nix::libc::setsockopt(
                s.as_raw_fd(),
                nix::libc::IPPROTO_IP,
                nix::libc::IP_MTU_DISCOVER,
                (&dont as *const nix::libc::c_int).cast(),
                4,
            )
        };
        assert_eq!(r, 0);
        s.send(&vec![3u8; fits + 1 - 28]).unwrap();
    })
    .join()
    .unwrap();
    let got = receiver.join().unwrap();
    let receiver = in_ns(l.tb.name(), || {
        let s = UdpSocket::bind("192.168.7.2:7002").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut sizes = Vec::new();
        let mut buf = [0u8; 2000];
        while let Ok(n) = retry_eintr(|| s.recv(&mut buf)) {
            sizes.push(n);
        }
        sizes
    });
    std::thread::sleep(Duration::from_millis(100));
    let mtu = in_ns(l.ta.name(), move || {
        let s = UdpSocket::bind("192.168.7.1:0").unwrap();
        s.connect("192.168.7.2:7002").unwrap();
        let on: nix::libc::c_int = nix::libc::IP_PMTUDISC_DO;
        // SAFETY: setsockopt reads one c_int from `&on` during the call.
        let r = unsafe {
            nix::libc::setsockopt(
                s.as_raw_fd(),
                nix::libc::IPPROTO_IP,
                nix::libc::IP_MTU_DISCOVER,
                (&on as *const nix::libc::c_int).cast(),
                4,
            )
        };
        assert_eq!(r, 0);
        s.send(&vec![1u8; fits - 28]).unwrap(); // fits
        std::thread::sleep(Duration::from_millis(200));
        let _ = s.send(&vec![2u8; fits + 1 - 28]); // one byte too big
        std::thread::sleep(Duration::from_millis(500));
        let mut mtu: nix::libc::c_int = 0;
        let mut len: nix::libc::socklen_t = 4;
        // SAFETY: getsockopt writes at most `len` (4) bytes into `mtu`.
        unsafe {
            nix::libc::getsockopt(
                s.as_raw_fd(),
                nix::libc::IPPROTO_IP,
                nix::libc::IP_MTU,
                (&mut mtu as *mut nix::libc::c_int).cast(),
                &mut len,
            )
        };
        mtu
    })
    .join()
    .unwrap();
    let sizes = receiver.join().unwrap();
    assert_eq!(
        sizes,
        vec![fits - 28],
        "{kind}: only the packet that fits arrives"
    );
    assert_eq!(
        mtu, fits as i32,
        "{kind}: the tenant learned the path MTU from tunlab's ICMP"
    );
    if kernel {
        let st = node_stats(&l.dir, "n1");
        assert!(counter(&st, "kernel_too_big") >= 2, "{kind}: {st}");
    }
    let e1 = s1.stop();
    s2.stop();
    assert!(e1.contains("dropped too_big_icmp_sent: 1"), "{e1}");
    match kind {
        "vxlan" => {
            assert_eq!(got, None, "VXLAN must not fragment");
            assert!(e1.contains("dropped too_big_vxlan: 1"), "{e1}");
        }
        "qinq" => {
            assert_eq!(got, None, "QinQ has no outer header to fragment");
            assert!(e1.contains("dropped too_big: 1"), "{e1}");
        }
        "stt" => assert_eq!(got, Some(fits + 1 - 28), "STT segments it"),
        _ => {
            assert_eq!(
                got,
                Some(fits + 1 - 28),
                "{kind}: the outer packet is fragmented\n{e1}"
            );
            assert!(
                e1.contains(&format!("sent in fragmented outer packets ({kind}): 1")),
                "{e1}"
            );
        }
    }
}

#[test]
fn too_big_on_the_kernel_datapath() {
    for (kind, fits) in [
        ("vxlan", 1450),
        ("geneve", 1450),
        ("gre", 1458),
        ("nvgre", 1458),
    ] {
        too_big_on(kind, fits, true);
    }
}

#[test]
fn too_big_vxlan() {
    // IPv4 20 + UDP 8 + VXLAN 8 + inner Ethernet 14.
    too_big_gets_icmp_fragmentation_needed("vxlan", 1450);
}

#[test]
fn too_big_geneve() {
    // No options on these flows: as VXLAN.
    too_big_gets_icmp_fragmentation_needed("geneve", 1450);
}

#[test]
fn too_big_gre() {
    // IPv4 20 + GRE with key 8 + inner Ethernet 14.
    too_big_gets_icmp_fragmentation_needed("gre", 1458);
}

#[test]
fn too_big_nvgre() {
    too_big_gets_icmp_fragmentation_needed("nvgre", 1458);
}

#[test]
fn too_big_qinq() {
    // The 4-byte S-tag counts against the underlay's 1500.
    too_big_gets_icmp_fragmentation_needed("qinq", 1496);
}

#[test]
fn too_big_stt() {
    // IPv4 20 + TCP 20 + STT 18 + inner Ethernet 14.
    too_big_gets_icmp_fragmentation_needed("stt", 1428);
}

/// Flows changed under load: iperf3 runs through the tunnel while rules
/// for other ports are added and deleted and the active rules are re-added
/// (replaced). The transfer completes, with throughput, and the switch
/// keeps running.
#[test]
fn flows_changed_under_load() {
    let l = lab();
    let c1 = l.dir.join("n1.ctl");
    let (s1, s2) = start_pair(
        &l,
        &with_ctl(
            &node_config(
                "n1",
                l.ta.name(),
                "192.168.7.1",
                "geneve",
                "172.31.0.1",
                "172.31.0.2",
                6,
                6,
            ),
            &c1,
        ),
        &node_config(
            "n2",
            l.tb.name(),
            "192.168.7.2",
            "geneve",
            "172.31.0.2",
            "172.31.0.1",
            6,
            6,
        ),
    );
    assert!(udp_echo(&l.ta, &l.tb, "192.168.7.2", 1, 6));
    let mut server = Command::new("ip")
        .args([
            "netns",
            "exec",
            l.tb.name(),
            "iperf3",
            "-s",
            "-1",
            "-B",
            "192.168.7.2",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("iperf3 (install-deps installs it)");
    std::thread::sleep(Duration::from_millis(300));
    let client = Command::new("ip")
        .args([
            "netns",
            "exec",
            l.ta.name(),
            "iperf3",
            "-c",
            "192.168.7.2",
            "-t",
            "4",
            "-J",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut changes = 0;
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_millis(3500) {
        let port = 100 + changes % 50;
        assert!(
            ctl(
                &c1,
                &[
                    "add-flow",
                    &format!(
                        "priority=10,in_port={port},dl_vlan={} actions=output:10",
                        changes % 4000
                    )
                ]
            )
            .0
        );
        assert!(
            ctl(&c1, &["add-flow", "in_port=1 actions=output:10"]).0,
            "replacing the active rule"
        );
        assert!(ctl(&c1, &["del-flows", &format!("in_port={port}")]).0);
        changes += 1;
    }
    let out = client.wait_with_output().unwrap();
    let _ = server.wait();
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "iperf3 failed: {json}");
    let bps: f64 = json
        .split("\"sum_received\":")
        .nth(1)
        .and_then(|s| s.split("\"bits_per_second\":").nth(1))
        .and_then(|s| s.split([',', '}']).next())
        .and_then(|s| s.trim().parse().ok())
        .expect("iperf3 JSON has sum_received.bits_per_second");
    assert!(bps > 1e6, "throughput under flow changes: {bps} bit/s");
    // Enough rounds to have changed the rules all through the transfer;
    // how many a loaded machine does in 3.5 s is not this test's question
    // (a full run beside another test binary did 18).
    assert!(changes >= 10, "only {changes} rounds of flow changes");
    let (_, dump, _) = ctl(&c1, &["dump-flows"]);
    assert_eq!(
        dump.lines().count(),
        2,
        "only the two base rules remain: {dump}"
    );
    s1.stop();
    s2.stop();
}

/// STT's own segmentation: tenants with a 9000-byte MTU send 4000-byte UDP
/// datagrams without DF; each leaves hv1 as one STT frame split into TCP
/// segments that fit the 1500-byte underlay, and hv2 reassembles it into
/// the whole tenant packet.
#[test]
fn stt_segments_frames_larger_than_the_underlay() {
    let l = lab();
    let jumbo = |c: String| {
        c.replace(
            "address = \"192.168.7.1/24\"",
            "address = \"192.168.7.1/24\"\nmtu = 9000",
        )
        .replace(
            "address = \"192.168.7.2/24\"",
            "address = \"192.168.7.2/24\"\nmtu = 9000",
        )
    };
    let (s1, s2) = start_pair(
        &l,
        &jumbo(node_config(
            "n1",
            l.ta.name(),
            "192.168.7.1",
            "stt",
            "172.31.0.1",
            "172.31.0.2",
            6,
            6,
        )),
        &jumbo(node_config(
            "n2",
            l.tb.name(),
            "192.168.7.2",
            "stt",
            "172.31.0.2",
            "172.31.0.1",
            6,
            6,
        )),
    );
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.7.2", 1, 6),
        "small packets pass"
    );
    let receiver = in_ns(l.tb.name(), || {
        let s = UdpSocket::bind("192.168.7.2:7003").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 9000];
        while let Ok(n) = retry_eintr(|| s.recv(&mut buf)) {
            got.push(buf[..n].to_vec());
        }
        got
    });
    std::thread::sleep(Duration::from_millis(100));
    in_ns(l.ta.name(), || {
        use std::os::fd::AsRawFd;
        let s = UdpSocket::bind("192.168.7.1:0").unwrap();
        // No DF (Linux sets it on UDP by default): the frame is the
        // tunnel's to segment, not the sender's to shrink.
        let dont: nix::libc::c_int = nix::libc::IP_PMTUDISC_DONT;
        // SAFETY: setsockopt reads one c_int from `&dont` during the call.
        let r = unsafe {
            nix::libc::setsockopt(
                s.as_raw_fd(),
                nix::libc::IPPROTO_IP,
                nix::libc::IP_MTU_DISCOVER,
                (&dont as *const nix::libc::c_int).cast(),
                4,
            )
        };
        assert_eq!(r, 0);
        for i in 0..5u8 {
            let payload: Vec<u8> = (0..4000u32).map(|b| (b as u8) ^ i).collect();
            s.send_to(&payload, "192.168.7.2:7003").unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .join()
    .unwrap();
    let got = receiver.join().unwrap();
    assert_eq!(got.len(), 5, "every 4000-byte datagram arrives whole");
    for (i, g) in got.iter().enumerate() {
        let want: Vec<u8> = (0..4000u32).map(|b| (b as u8) ^ i as u8).collect();
        assert_eq!(g, &want, "datagram {i} reassembled byte for byte");
    }
    let e1 = s1.stop();
    let e2 = s2.stop();
    assert!(!e1.contains("too_big"), "segmented, not refused: {e1}");
    assert!(!e2.contains("bad_stt_segment"), "{e2}");
}

/// One node of the QinQ article's lab: its flows exactly as printed there
/// (port 1 the underlay, ports 2 and 6 the tenants; S-VLAN 1 and 5), with
/// the two tenants' taps in one namespace on two subnets.
fn qinq_article_node(name: &str, tenant_ns: &str, host: u8, underlay: &str) -> String {
    format!(
        r#"
[switch]
name = "{name}"
flows = [
  "in_port=1,dl_vlan=1 action=pop_vlan,output:2",
  "in_port=2 action=push_vlan:0x88a8,mod_vlan_vid:1,output:1",
  "in_port=1,dl_vlan=5 action=pop_vlan,output:6",
  "in_port=6 action=push_vlan:0x88a8,mod_vlan_vid:5,output:1",
]

[[port]]
name = "up-{name}"
ofport = 1
type = "qinq"
underlay = "{underlay}"

[[port]]
name = "tap-{name}"
ofport = 2
type = "tap"
netns = "{tenant_ns}"
address = "192.168.7.{host}/24"

[[port]]
name = "tap5-{name}"
ofport = 6
type = "tap"
netns = "{tenant_ns}"
address = "192.168.8.{host}/24"
"#
    )
}

/// The QinQ article's flows, loaded verbatim, carry UDP and TCP both ways
/// on S-VLAN 1 and on S-VLAN 5; frames on the wire carry the 802.1ad tag.
#[test]
fn qinq_article_flows_carry_traffic() {
    qinq_article(false);
}

/// The same on the kernel datapath: tags pushed and popped in TC, the
/// S-tagged frames switched on the underlay's ingress.
#[test]
fn qinq_article_flows_on_the_kernel_datapath() {
    qinq_article(true);
}

fn qinq_article(kernel: bool) {
    let l = lab();
    let (n1, n2) = (
        qinq_article_node("n1", l.ta.name(), 1, &l.u1),
        qinq_article_node("n2", l.tb.name(), 2, &l.u2),
    );
    let (n1, n2) = if kernel {
        (on_kernel(&n1), on_kernel(&n2))
    } else {
        (n1, n2)
    };
    let (s1, s2) = start_pair(&l, &n1, &n2);
    wait_for_tap(&l.ta, "tap5-n1");
    wait_for_tap(&l.tb, "tap5-n2");
    // Watch the underlay for the S-tags while the tenants talk.
    let cap = l.dir.join("underlay.pcap");
    let mut dump = Command::new("ip")
        .args([
            "netns",
            "exec",
            l.hv2.name(),
            "tshark",
            "-q",
            "-i",
            &l.u2,
            "-w",
        ])
        .arg(&cap)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    traffic_both_ways(&l, "qinq S-VLAN 1");
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.8.2", 10, 6),
        "S-VLAN 5 a->b\n{}",
        both_nodes(&l)
    );
    assert!(
        udp_echo(&l.tb, &l.ta, "192.168.8.1", 10, 6),
        "S-VLAN 5 b->a\n{}",
        both_nodes(&l)
    );
    let (s, r) = tcp_transfer(&l.ta, &l.tb, "192.168.8.2");
    assert_eq!(s, r, "S-VLAN 5 TCP bytes differ");
    if kernel {
        for node in ["n1", "n2"] {
            let st = node_stats(&l.dir, node);
            // Pops on the underlay's ingress count as decapsulations;
            // pushes from the tenants as hits.
            assert!(counter(&st, "kernel_decap") > 20, "{node}: {st}");
            assert!(counter(&st, "kernel_hit") > 40, "{node}: {st}");
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill")
        .args(["-INT", &dump.id().to_string()])
        .status();
    let _ = dump.wait();
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(&cap)
        .args([
            "-T",
            "fields",
            "-e",
            "eth.type",
            "-e",
            "ieee8021ad.id",
            "-Y",
            "ieee8021ad",
        ])
        .output()
        .unwrap();
    let fields = String::from_utf8_lossy(&out.stdout);
    for vid in [1, 5] {
        assert!(
            fields.lines().any(|l| l == format!("0x88a8\t{vid}")),
            "S-VLAN {vid} frames on the wire: {fields:.300}"
        );
    }
    let e1 = s1.stop();
    let e2 = s2.stop();
    assert!(e1.contains("port 1 up-n1 (qinq): rx "), "{e1}");
    let tenant = if kernel { "veth" } else { "tap" };
    assert!(
        e2.contains(&format!("port 6 tap5-n2 ({tenant}): rx ")),
        "{e2}"
    );
}

/// One node of the QinQ article's VXLAN/Geneve lab: tunnel port 1 takes
/// its destination from the flow, and the host has two underlay addresses,
/// one per tunnel. Host A's flows are the article's, verbatim; host B's are
/// their mirror image.
fn tun_dst_article_node(
    name: &str,
    kind: &str,
    tenant_ns: &str,
    host: u8,
    flows: [&str; 4],
) -> String {
    format!(
        r#"
[switch]
name = "{name}"
flows = ["{}", "{}", "{}", "{}"]

[[port]]
name = "t-{name}"
ofport = 1
type = "{kind}"
local_ip = "0.0.0.0"
remote_ip = "flow"

[[port]]
name = "tap-{name}"
ofport = 2
type = "tap"
netns = "{tenant_ns}"
address = "192.168.7.{host}/24"

[[port]]
name = "tap5-{name}"
ofport = 6
type = "tap"
netns = "{tenant_ns}"
address = "192.168.8.{host}/24"
"#,
        flows[0], flows[1], flows[2], flows[3]
    )
}

/// `n_packets` of the flow whose dump line contains `m`.
fn flow_packets(dump: &str, m: &str) -> u64 {
    let line = dump
        .lines()
        .find(|l| l.contains(m))
        .unwrap_or_else(|| panic!("no flow with {m} in {dump}"));
    let at = line.find("n_packets=").unwrap() + "n_packets=".len();
    line[at..].split(',').next().unwrap().parse().unwrap()
}

fn tun_dst_article_flows(kind: &str) {
    let l = lab();
    for (ns, dev, a) in [
        (&l.hv1, &l.u1, ["10.222.0.1/24", "10.222.0.5/24"]),
        (&l.hv2, &l.u2, ["10.222.0.6/24", "10.222.0.10/24"]),
    ] {
        for a in a {
            ns.ip(&["addr", "add", a, "dev", dev]).unwrap();
        }
    }
    let (c1, c2) = (l.dir.join("n1.ctl"), l.dir.join("n2.ctl"));
    let a = [
        "in_port=1,tun_dst=10.222.0.1 action=output:2",
        "in_port=2 action=set_field:10.222.0.6->tun_dst,output:1",
        "in_port=1,tun_dst=10.222.0.5 action=output:6",
        "in_port=6 action=set_field:10.222.0.10->tun_dst,output:1",
    ];
    let b = [
        "in_port=1,tun_dst=10.222.0.6 action=output:2",
        "in_port=2 action=set_field:10.222.0.1->tun_dst,output:1",
        "in_port=1,tun_dst=10.222.0.10 action=output:6",
        "in_port=6 action=set_field:10.222.0.5->tun_dst,output:1",
    ];
    let (s1, s2) = start_pair(
        &l,
        &with_ctl(&tun_dst_article_node("n1", kind, l.ta.name(), 1, a), &c1),
        &with_ctl(&tun_dst_article_node("n2", kind, l.tb.name(), 2, b), &c2),
    );
    wait_for_tap(&l.ta, "tap5-n1");
    wait_for_tap(&l.tb, "tap5-n2");
    traffic_both_ways(&l, &format!("{kind} tunnel 10.222.0.1 <-> .6"));
    let (ok, d2, e) = ctl(&c2, &["dump-flows"]);
    assert!(ok, "{e}");
    let before = flow_packets(&d2, "tun_dst=10.222.0.10");
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.8.2", 10, 6),
        "{kind}: second tunnel a->b"
    );
    assert!(
        udp_echo(&l.tb, &l.ta, "192.168.8.1", 10, 6),
        "{kind}: second tunnel b->a"
    );
    // Each tenant's packets arrived on its own tunnel address and were
    // steered by it: the rule for the first address saw the first run, the
    // rule for the second address the second.
    let (_, d1, _) = ctl(&c1, &["dump-flows"]);
    let (_, d2, _) = ctl(&c2, &["dump-flows"]);
    assert!(flow_packets(&d2, "tun_dst=10.222.0.6") > 0, "{d2}");
    assert!(
        flow_packets(&d2, "tun_dst=10.222.0.10") >= before + 10,
        "{d2}"
    );
    assert!(flow_packets(&d1, "tun_dst=10.222.0.1") > 0, "{d1}");
    assert!(flow_packets(&d1, "tun_dst=10.222.0.5") >= 10, "{d1}");
    s1.stop();
    s2.stop();
}

#[test]
fn tun_dst_article_flows_vxlan() {
    tun_dst_article_flows("vxlan");
}

#[test]
fn tun_dst_article_flows_geneve() {
    tun_dst_article_flows("geneve");
}

/// Multi-queue tenant TAPs: with four queues the kernel spreads the
/// tenant's connections over them, and the switch serves every queue.
#[test]
fn multi_queue_taps_spread_flows() {
    let l = lab();
    let four = |c: String| c.replace("type = \"tap\"\n", "type = \"tap\"\nqueues = 4\n");
    let c1 = l.dir.join("n1.ctl");
    let (s1, s2) = start_pair(
        &l,
        &with_ctl(
            &four(node_config(
                "n1",
                l.ta.name(),
                "192.168.7.1",
                "geneve",
                "172.31.0.1",
                "172.31.0.2",
                6,
                6,
            )),
            &c1,
        ),
        &four(node_config(
            "n2",
            l.tb.name(),
            "192.168.7.2",
            "geneve",
            "172.31.0.2",
            "172.31.0.1",
            6,
            6,
        )),
    );
    traffic_both_ways(&l, "geneve, 4-queue taps");
    for _ in 0..6 {
        let (s, r) = tcp_transfer(&l.ta, &l.tb, "192.168.7.2");
        assert_eq!(s, r);
    }
    let (ok, stats, err) = ctl(&c1, &["stats"]);
    assert!(ok, "{err}");
    let per = stats
        .lines()
        .find_map(|l| l.trim().strip_prefix("rx per queue: "))
        .unwrap_or_else(|| panic!("no per-queue counters: {stats}"));
    let busy = per.split(' ').filter(|n| *n != "0").count();
    assert!(busy >= 2, "connections spread over the queues: {per}");
    s1.stop();
    s2.stop();
}

/// A tenant TAP that already exists (created by someone else, persistent,
/// multi-queue) is attached by name rather than created.
#[test]
fn existing_tap_is_attached_by_name() {
    let l = lab();
    l.hv1
        .ip(&[
            "tuntap",
            "add",
            "dev",
            "tap-n1",
            "mode",
            "tap",
            "multi_queue",
            "vnet_hdr",
        ])
        .unwrap();
    let (s1, s2) = start_pair(
        &l,
        &node_config(
            "n1",
            l.ta.name(),
            "192.168.7.1",
            "vxlan",
            "172.31.0.1",
            "172.31.0.2",
            6,
            6,
        ),
        &node_config(
            "n2",
            l.tb.name(),
            "192.168.7.2",
            "vxlan",
            "172.31.0.2",
            "172.31.0.1",
            6,
            6,
        ),
    );
    traffic_both_ways(&l, "vxlan over an attached tap");
    s1.stop();
    s2.stop();
    // Persistent: it outlives the switch (and goes with the namespace).
    assert!(l.ta.ip(&["link", "show", "tap-n1"]).is_ok());
}

/// `workers = 2` in a node's `[switch]` table.
fn two_workers(cfg: String) -> String {
    cfg.replacen("[switch]\n", "[switch]\nworkers = 2\n", 1)
}

/// The per-queue receive counters of a TAP port in `stats`.
fn queue_counts(stats: &str) -> Vec<u64> {
    stats
        .lines()
        .find_map(|l| l.trim().strip_prefix("rx per queue: "))
        .unwrap_or_else(|| panic!("no per-queue counters: {stats}"))
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect()
}

/// Two packet workers per node, through every kind of underlay socket:
/// UDP (one reuse-port socket per worker), raw IP (GRE, STT: worker 0
/// receives, both send) and the QinQ packet socket. Traffic passes both
/// ways byte for byte, the tenant's connections are spread over both
/// workers' TAP queues, and the counters are the sum of both workers'.
#[test]
fn two_workers_carry_every_underlay() {
    for kind in ["geneve", "gre", "stt"] {
        let l = lab();
        let (c1, c2) = (l.dir.join("n1.ctl"), l.dir.join("n2.ctl"));
        let node = |name: &str, ns: &str, ip: &str, local: &str, remote: &str| {
            let mut c = node_config(name, ns, ip, kind, local, remote, 6, 6);
            if kind == "geneve" {
                c = c.replace("key = 6\n", "key = 6\ncsum = true\n");
            }
            two_workers(c)
        };
        let (s1, s2) = start_pair(
            &l,
            &with_ctl(
                &node("n1", l.ta.name(), "192.168.7.1", "172.31.0.1", "172.31.0.2"),
                &c1,
            ),
            &with_ctl(
                &node("n2", l.tb.name(), "192.168.7.2", "172.31.0.2", "172.31.0.1"),
                &c2,
            ),
        );
        traffic_both_ways(&l, &format!("{kind}, two workers"));
        // Twelve connections: all on one worker by chance is 1 in 2048.
        for _ in 0..12 {
            let (s, r) = tcp_transfer(&l.ta, &l.tb, "192.168.7.2");
            assert_eq!(s, r, "{kind}");
        }
        let (ok, stats, err) = ctl(&c1, &["stats"]);
        assert!(ok, "{err}");
        let q = queue_counts(&stats);
        assert_eq!(q.len(), 2, "{kind}: one queue per worker: {stats}");
        assert!(
            q.iter().all(|&n| n > 0),
            "{kind}: connections spread over both workers: {stats}"
        );
        // The TAP's frame counter is the sum over the queues, i.e. over
        // workers (its packets count a super-frame's segments).
        assert_eq!(
            frames(&stats, "tap-n1", "rx"),
            q.iter().sum::<u64>(),
            "{stats}"
        );
        let (ok, show, _) = ctl(&c1, &["show"]);
        assert!(ok && show.contains("workers: 2"), "{show}");
        // Each worker's raw socket sees every GRE/STT packet; its CPU
        // filter must keep each in one worker only: never more received
        // than the other side sent.
        let (ok, stats2, err) = ctl(&c2, &["stats"]);
        assert!(ok, "{err}");
        let (rx, tx) = (pkts(&stats, "t-n1", "rx"), pkts(&stats2, "t-n2", "tx"));
        assert!(
            rx > 0 && rx <= tx,
            "{kind}: n1 received {rx} tunnel packets, n2 sent {tx}"
        );
        s1.stop();
        s2.stop();
    }
}

/// The control socket of a two-worker node changes both workers: a rule
/// added drops every connection (whichever worker carries it), its
/// counters are both workers' together, deleting it restores traffic,
/// and a TAP port added at run time gets a queue per worker.
#[test]
fn two_workers_obey_the_control_socket() {
    let l = lab();
    let (c1, c2) = (l.dir.join("n1.ctl"), l.dir.join("n2.ctl"));
    let (n1, n2) = pair_configs(&l, "vxlan");
    let (s1, s2) = start_pair(
        &l,
        &with_ctl(&two_workers(n1), &c1),
        &with_ctl(&two_workers(n2), &c2),
    );
    traffic_both_ways(&l, "vxlan, two workers");
    let (ok, _, err) = ctl(
        &c1,
        &["add-flow", "priority=40000,in_port=1,ip actions=drop"],
    );
    assert!(ok, "{err}");
    for _ in 0..8 {
        assert!(
            !udp_echo(&l.ta, &l.tb, "192.168.7.2", 1, 1),
            "the drop rule holds on every worker"
        );
    }
    let (_, dump, _) = ctl(&c1, &["dump-flows"]);
    assert!(
        flow_packets(&dump, "priority=40000") >= 8,
        "the drop rule counted the echoes: {dump}"
    );
    let (ok, out, err) = ctl(
        &c1,
        &["del-flows", "--strict", "priority=40000,in_port=1,ip"],
    );
    assert!(ok && out.contains("deleted 1 rules"), "{out}{err}");
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.7.2", 10, 6),
        "traffic again"
    );
    // A tenant and a Geneve port added at run time: the TAP gets a queue
    // per worker, the UDP port a socket per worker.
    add_tenant_over_geneve(&l, &c1, &c2, "tap");
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.8.2", 10, 6),
        "the tenant added at run time"
    );
    let (_, stats, _) = ctl(&c1, &["stats"]);
    let tap5 = stats
        .split("port 6 tap5-n1")
        .nth(1)
        .unwrap_or_else(|| panic!("{stats}"));
    assert_eq!(queue_counts(tap5).len(), 2, "a queue per worker: {stats}");
    s1.stop();
    s2.stop();
}

/// A node with two tenants on one Geneve port, told apart by VNI (6:
/// 192.168.7.0/24 on TAP 1, 9: 192.168.8.0/24 on TAP 6). A frame only
/// reaches a tenant if its VNI and its destination agree; any other IPv4
/// frame from the tunnel hits a drop rule whose counter shows it (the
/// tenants' IPv6 chatter has a drop rule of its own).
fn two_vni_node(name: &str, ta: &str, me: u8, local: &str, remote: &str) -> String {
    format!(
        r#"
[switch]
name = "{name}"
flows = [
  "in_port=1 actions=set_field:6->tun_id,output:10",
  "in_port=6 actions=set_field:9->tun_id,output:10",
  "priority=200,in_port=10,tun_id=6,ip,nw_dst=192.168.7.{me} actions=output:1",
  "priority=200,in_port=10,tun_id=6,arp actions=output:1",
  "priority=200,in_port=10,tun_id=9,ip,nw_dst=192.168.8.{me} actions=output:6",
  "priority=200,in_port=10,tun_id=9,arp actions=output:6",
  "priority=100,in_port=10,ip actions=drop",
  "priority=50,in_port=10 actions=drop",
]

[[port]]
name = "tap-{name}"
ofport = 1
type = "tap"
netns = "{ta}"
address = "192.168.7.{me}/24"

[[port]]
name = "tap5-{name}"
ofport = 6
type = "tap"
netns = "{ta}"
address = "192.168.8.{me}/24"

[[port]]
name = "t-{name}"
ofport = 10
type = "geneve"
local_ip = "{local}"
remote_ip = "{remote}"
key = "flow"
csum = true
"#
    )
}

/// Segments joined on receive (software GRO) go on with their own tunnel
/// metadata: two tenants' bulk transfers at once through one Geneve
/// socket, told apart by VNI, and no frame is delivered under the other
/// tenant's VNI. (A joined frame once took the metadata of the datagram
/// that ended it, which sent it to the wrong tenant.)
#[test]
fn joined_segments_keep_their_own_vni() {
    let l = lab();
    let (c1, c2) = (l.dir.join("n1.ctl"), l.dir.join("n2.ctl"));
    let (s1, s2) = start_pair(
        &l,
        &with_ctl(
            &two_vni_node("n1", l.ta.name(), 1, "172.31.0.1", "172.31.0.2"),
            &c1,
        ),
        &with_ctl(
            &two_vni_node("n2", l.tb.name(), 2, "172.31.0.2", "172.31.0.1"),
            &c2,
        ),
    );
    wait_for_tap(&l.ta, "tap5-n1");
    wait_for_tap(&l.tb, "tap5-n2");
    traffic_both_ways(&l, "geneve, VNI 6");
    assert!(udp_echo(&l.ta, &l.tb, "192.168.8.2", 10, 6), "VNI 9");
    for _ in 0..3 {
        std::thread::scope(|sc| {
            let other = sc.spawn(|| tcp_transfer(&l.ta, &l.tb, "192.168.8.2"));
            let (s, r) = tcp_transfer(&l.ta, &l.tb, "192.168.7.2");
            assert_eq!(s, r, "VNI 6");
            let (s, r) = other.join().unwrap();
            assert_eq!(s, r, "VNI 9");
        });
    }
    for c in [&c1, &c2] {
        let (ok, dump, err) = ctl(c, &["dump-flows"]);
        assert!(ok, "{err}");
        assert!(flow_packets(&dump, "nw_dst=192.168.8.") > 50, "{dump}");
        assert_eq!(
            flow_packets(&dump, "priority=100,"),
            0,
            "frames under the wrong VNI: {dump}"
        );
    }
    s1.stop();
    s2.stop();
}

/// The outer UDP source port comes from a hash of the inner flow, as
/// RFC 7348 § 5 and RFC 8926 § 3.3 ask (entropy for the underlay's ECMP
/// and the receiver's RSS): every datagram of one inner flow leaves from
/// one source port, and different flows from different ports.
#[test]
fn outer_source_port_follows_the_inner_flow() {
    use tunlab_netio::packet::PacketSocket;
    let l = lab();
    let (n1, n2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &n1, &n2);
    traffic_both_ways(&l, "geneve");
    let u2 = l.u2.clone();
    let capture = in_ns(l.hv2.name(), move || {
        let sock = PacketSocket::open(&u2).unwrap();
        // (inner UDP source port, outer UDP source port) of Geneve
        // datagrams from 172.31.0.1 carrying IPv4/UDP to port 9.
        let mut seen = Vec::new();
        let mut buf = vec![0u8; 65536];
        let deadline = std::time::Instant::now() + Duration::from_secs(4);
        while std::time::Instant::now() < deadline {
            let Some(n) = sock.recv(&mut buf).unwrap() else {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            };
            let f = &buf[..n];
            let outer_udp = 14 + 20;
            if n < outer_udp + 8 + 8 || f[12..14] != [8, 0] || f[23] != 17 {
                continue;
            }
            if f[26..30] != [172, 31, 0, 1] || f[outer_udp + 2..outer_udp + 4] != [0x17, 0xc1] {
                continue;
            }
            let inner = outer_udp + 8 + 8 + (f[outer_udp + 8] & 0x3f) as usize * 4;
            let inner_udp = inner + 14 + 20;
            if n < inner_udp + 8 || f[inner + 12..inner + 14] != [8, 0] || f[inner + 14 + 9] != 17 {
                continue;
            }
            if f[inner_udp + 2..inner_udp + 4] != [0, 9] {
                continue;
            }
            let sport = |at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
            seen.push((sport(inner_udp), sport(outer_udp)));
        }
        seen
    });
    std::thread::sleep(Duration::from_millis(300));
    in_ns(l.ta.name(), || {
        for _ in 0..8 {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            for _ in 0..3 {
                s.send_to(b"flow", "192.168.7.2:9").unwrap();
            }
        }
    })
    .join()
    .unwrap();
    let seen = capture.join().unwrap();
    let mut by_flow = std::collections::BTreeMap::<u16, std::collections::BTreeSet<u16>>::new();
    for (inner, outer) in &seen {
        by_flow.entry(*inner).or_default().insert(*outer);
    }
    assert_eq!(
        by_flow.len(),
        8,
        "eight flows seen on the underlay: {seen:?}"
    );
    assert!(
        by_flow.values().all(|ports| ports.len() == 1),
        "one outer port per flow: {by_flow:?}"
    );
    let ports: std::collections::BTreeSet<u16> =
        by_flow.values().flat_map(|p| p.iter().copied()).collect();
    // All eight on one of the node's eight ports by chance: 1 in 2 million.
    assert!(
        ports.len() >= 2,
        "flows spread over source ports: {by_flow:?}"
    );
    s1.stop();
    s2.stop();
}

/// Two Geneve ports between the same hosts on one UDP port, differing
/// only in their VNI: each frame goes to the port of its VNI (it used to
/// go to the first port with that remote, where no rule took it).
#[test]
fn ports_differing_only_in_vni() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &c1, &c2);
    let (k1, k2) = (l.dir.join("n1.ctl"), l.dir.join("n2.ctl"));
    add_tenant_over_geneve(&l, &k1, &k2, "tap");
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.8.2", 5, 6),
        "VNI 9 tenant; n2: {}",
        node_stats(&l.dir, "n2")
    );
    traffic_both_ways(&l, "VNI 6 tenant beside VNI 9");
    drop((s1.stop(), s2.stop()));
}

/// Two GRE ports between the same hosts, differing only in their key, and
/// two STT ports differing only in their context ID: each frame goes to
/// the port of its key (the port was once chosen by remote alone).
#[test]
fn gre_and_stt_ports_differing_only_in_key() {
    for kind in ["gre", "stt"] {
        let l = lab();
        let (c1, c2) = pair_configs(&l, kind);
        let (s1, s2) = start_pair(&l, &c1, &c2);
        let (k1, k2) = (l.dir.join("n1.ctl"), l.dir.join("n2.ctl"));
        add_tenant_over(&l, &k1, &k2, "tap", kind);
        assert!(
            udp_echo(&l.ta, &l.tb, "192.168.8.2", 5, 6),
            "{kind}: key 9 tenant; n2: {}",
            node_stats(&l.dir, "n2")
        );
        traffic_both_ways(&l, &format!("{kind}: key 6 tenant beside key 9"));
        drop((s1.stop(), s2.stop()));
    }
}
