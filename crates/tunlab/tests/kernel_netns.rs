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

/// Traffic both ways between two kernel-datapath nodes, and the kernel's
/// counters show it carried the bulk.
fn two_nodes(kind: &str, v6: bool) {
    let l = lab();
    let (a, b) = if v6 {
        ("fd00:31::1", "fd00:31::2")
    } else {
        ("172.31.0.1", "172.31.0.2")
    };
    let (s1, s2) = start_pair(
        &l,
        &on_kernel(&node_config(
            "n1",
            l.ta.name(),
            "192.168.7.1",
            kind,
            a,
            b,
            6,
            6,
        )),
        &on_kernel(&node_config(
            "n2",
            l.tb.name(),
            "192.168.7.2",
            kind,
            b,
            a,
            6,
            6,
        )),
    );
    traffic_both_ways(&l, &format!("{kind} on the kernel datapath"));
    for node in ["n1", "n2"] {
        assert_kernel_carried(&l.dir, node, kind);
    }
    let (ok, dump, err) = ctl(&l.dir.join("n1.ctl"), &["dump-flows", "--datapath"]);
    assert!(
        ok && dump.contains("tnl_push") && dump.contains("output(ifindex"),
        "{dump}{err}"
    );
    drop((s1.stop(), s2.stop()));
}

#[test]
fn geneve() {
    two_nodes("geneve", false);
}

#[test]
fn geneve_ipv6_underlay() {
    two_nodes("geneve", true);
}

#[test]
fn vxlan() {
    two_nodes("vxlan", false);
}

#[test]
fn gre() {
    two_nodes("gre", false);
}

#[test]
fn nvgre() {
    two_nodes("nvgre", false);
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
