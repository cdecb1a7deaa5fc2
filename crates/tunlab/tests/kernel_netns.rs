//! The namespace tests of the switch on the kernel (eBPF) datapath: the
//! same two-node lab and the same configurations as switch_netns.rs, with
//! `datapath = "ebpf"` and the tenants on veth ports.
//!
//! ```text
//!  netns ta             netns hv1                               netns hv2             netns tb
//!  192.168.7.1 ─veth─ [TC: tl_from_tenant] ─veth─ 172.31.0.1 ═══ 172.31.0.2 ─veth─ [TC] ─veth─ 192.168.7.2
//!                     [tunlab switch: slow path, upcall TAP]      [tl_from_underlay]
//! ```
//!
//! Each test checks that traffic passes both ways and that the kernel
//! carried it (its hit, encap and decap counters), not only the slow
//! path. Needs root; namespaces and processes are removed on success and
//! failure.

mod common;

use common::*;

#[test]
fn geneve() {
    two_nodes("geneve", false, Datapath::Kernel);
}

#[test]
fn geneve_ipv6_underlay() {
    two_nodes("geneve", true, Datapath::Kernel);
}

#[test]
fn vxlan() {
    two_nodes("vxlan", false, Datapath::Kernel);
}

#[test]
fn gre() {
    two_nodes("gre", false, Datapath::Kernel);
}

#[test]
fn nvgre() {
    two_nodes("nvgre", false, Datapath::Kernel);
}

/// Tenants on devices the switch did not make (veths made beforehand, as
/// a container runtime does), attached as `type = "system"` ports; they
/// are left in place when the switch stops.
#[test]
fn system_ports() {
    two_nodes("geneve", false, Datapath::KernelSystem);
}

#[test]
fn system_ports_ipv6_underlay() {
    two_nodes("vxlan", true, Datapath::KernelSystem);
}

/// veth and tunnel ports added and removed while running, on the kernel
/// datapath: the kernel carries the added ports' flows.
#[test]
fn ports_added_and_removed_at_run_time() {
    ports_at_run_time(Datapath::Kernel);
}

/// Once `del-flows` has returned nothing is forwarded by an entry the
/// kernel still holds; once `add-flow` has returned traffic flows again.
#[test]
fn flow_changes_revalidate() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &on_kernel(&c1), &on_kernel(&c2));
    traffic_both_ways(&l, "before the change");
    let sock = l.dir.join("n1.ctl");
    let (ok, _, err) = ctl(&sock, &["del-flows", "in_port=1"]);
    assert!(ok, "{err}");
    let before = counter(&node_stats(&l.dir, "n1"), "kernel_encap");
    assert!(
        !udp_echo(&l.ta, &l.tb, "192.168.7.2", 5, 1),
        "forwarded after del-flows"
    );
    let st = node_stats(&l.dir, "n1");
    assert_eq!(counter(&st, "kernel_encap"), before, "{st}");
    assert!(counter(&st, "kernel_stale") > 0, "{st}");
    let (ok, _, err) = ctl(&sock, &["add-flow", "in_port=1 actions=output:10"]);
    assert!(ok, "{err}");
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.7.2", 5, 6),
        "after add-flow"
    );
    drop((s1.stop(), s2.stop()));
}

/// Isolation on the kernel datapath: a VNI no rule accepts, and an outer
/// source no tunnel port expects, are dropped and counted; nothing reaches
/// the tenant.
#[test]
fn wrong_vni_is_dropped_and_counted() {
    wrong_vni(Datapath::Kernel);
}

#[test]
fn unknown_remote_is_dropped_and_counted() {
    unknown_remote(Datapath::Kernel);
}

/// Malformed underlay packets (short, options overrunning, an unknown
/// critical option, no inner frame, garbage) and odd tenant frames on the
/// kernel datapath: each dropped with its reason, forwarding goes on.
#[test]
fn malformed_packets_are_dropped_and_counted() {
    malformed_packets(Datapath::Kernel);
}

/// Two VXLAN ports on one UDP port, to different remotes: each has its
/// decapsulation entry under its remote, so adding and removing the second
/// leaves the first one's traffic in the kernel.
#[test]
fn tunnel_ports_sharing_a_udp_port() {
    let l = lab();
    let (n1, n2) = pair_configs(&l, "vxlan");
    let dp = Datapath::Kernel;
    let (s1, s2) = start_pair(&l, &dp.config(&l.hv1, n1), &dp.config(&l.hv2, n2));
    let c1 = l.dir.join("n1.ctl");
    assert!(udp_echo(&l.ta, &l.tb, "192.168.7.2", 5, 6));
    let x = "x-n1 ofport=12 type=vxlan local_ip=172.31.0.1 remote_ip=172.31.0.9 key=6";
    let (ok, _, err) = ctl(&c1, &["add-port", x]);
    assert!(ok, "{err}");
    // Another port on the same UDP port, to another remote: the entries
    // are keyed by remote too, so the first port's traffic stays in the
    // kernel (it went up to the slow path when one entry served the key).
    let st = node_stats(&l.dir, "n1");
    let (decap0, slow0) = (
        counter(&st, "kernel_decap"),
        counter(&st, "kernel_slow_unknown_remote"),
    );
    assert!(udp_echo(&l.ta, &l.tb, "192.168.7.2", 10, 6));
    // The first reply misses (a new generation) and is the slow path's.
    let st = node_stats(&l.dir, "n1");
    assert!(counter(&st, "kernel_decap") >= decap0 + 8, "{st}");
    assert_eq!(counter(&st, "kernel_slow_unknown_remote"), slow0, "{st}");
    // The added port goes: its entry with it, the first port's stays.
    let (ok, _, err) = ctl(&c1, &["del-port", "x-n1"]);
    assert!(ok, "{err}");
    let decap0 = counter(&node_stats(&l.dir, "n1"), "kernel_decap");
    assert!(udp_echo(&l.ta, &l.tb, "192.168.7.2", 10, 6));
    let st = node_stats(&l.dir, "n1");
    assert!(counter(&st, "kernel_decap") >= decap0 + 8, "{st}");
    // A source neither port names is still counted as unknown (the
    // any-remote entry); the unknown_remote test sends such packets.
    s1.stop();
    s2.stop();
}

/// The revalidator deletes cached flows no CPU has used for max_idle_ms
/// (OVS's max-idle): after traffic stops, the kernel's flow cache empties,
/// the deletions are counted, and the next packets are a miss that the
/// slow path installs again.
#[test]
fn idle_flows_expire() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let idle = |c: &str| on_kernel(c).replacen("[switch]\n", "[switch]\nmax_idle_ms = 300\n", 1);
    let (s1, s2) = start_pair(&l, &idle(&c1), &idle(&c2));
    let sock = l.dir.join("n1.ctl");
    let cached = || {
        let (ok, out, err) = ctl(&sock, &["dump-flows", "--datapath"]);
        assert!(ok, "{err}");
        out.lines().count()
    };
    traffic_both_ways(&l, "before going idle");
    assert!(cached() > 0, "traffic left nothing in the kernel's cache");
    // Idle for twice the limit plus a sweep interval.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while cached() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(cached(), 0, "idle flows stayed in the cache");
    let st = node_stats(&l.dir, "n1");
    let line = st
        .lines()
        .find(|l| l.starts_with("revalidator: "))
        .unwrap_or_default();
    let deleted: u64 = line
        .split("deleted ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(deleted > 0, "{st}");
    let installed = counter(&st, "kernel_installed");
    traffic_both_ways(&l, "after the flows expired");
    assert!(counter(&node_stats(&l.dir, "n1"), "kernel_installed") > installed);
    assert_kernel_carried(&l.dir, "n1", "after the flows expired");
    drop((s1.stop(), s2.stop()));
}
