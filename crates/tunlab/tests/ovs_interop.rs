//! Interop with Open vSwitch 3.1's userspace datapath (Debian
//! `openvswitch-switch`, `datapath_type=netdev`):
//!
//! ```text
//!  netns ta          netns hv1                     netns hv2                                netns tb
//!  192.168.7.1 ─tap─ [tunlab switch] ─ 172.31.0.1 ═══ br-phy 172.31.0.2 [ovs-vswitchd]   
//!                                                     br-int: port 10 tunnel, port 1 tbh ─veth─ 192.168.7.2
//! ```
//!
//! ovsdb-server and ovs-vswitchd run inside hv2 with their own database and
//! run directory (never touching a system instance) and are stopped on drop
//! (`tunlab_lab::ovs::Ovs`, which the lab's OVS variants use too).
//! The OVS side's tenant has `tx off tso off`: OVS's userspace datapath
//! forwards unfinished checksums otherwise.

mod common;

use common::*;
use tunlab_lab::ovs::Ovs;
use tunlab_netio::netns;

/// hv2: OVS with br-phy holding the underlay address and br-int holding a
/// tunnel port (ofport 10) and the tenant's veth (ofport 1).
fn ovs_side(l: &Lab, kind: &str) -> Ovs {
    let ovs = Ovs::start(l.hv2.name(), &l.dir).unwrap();
    l.hv2.ip(&["addr", "flush", "dev", &l.u2]).unwrap();
    ovs.vsctl(&[
        "add-br",
        "br-phy",
        "--",
        "set",
        "bridge",
        "br-phy",
        "datapath_type=netdev",
        "--",
        "add-port",
        "br-phy",
        &l.u2,
    ])
    .unwrap();
    l.hv2
        .ip(&["addr", "add", "172.31.0.2/24", "dev", "br-phy"])
        .unwrap();
    l.hv2.ip(&["link", "set", "br-phy", "up"]).unwrap();
    ovs.vsctl(&[
        "add-br",
        "br-int",
        "--",
        "set",
        "bridge",
        "br-int",
        "datapath_type=netdev",
        "--",
        "add-port",
        "br-int",
        "tun0",
        "--",
        "set",
        "interface",
        "tun0",
        &format!("type={kind}"),
        "options:remote_ip=172.31.0.1",
        "options:key=6",
        "ofport_request=10",
    ])
    .unwrap();
    l.hv2
        .veth("tbh", l.tb.name(), "tbe", netns::Veth::default())
        .unwrap();
    ovs.vsctl(&[
        "add-port",
        "br-int",
        "tbh",
        "--",
        "set",
        "interface",
        "tbh",
        "ofport_request=1",
    ])
    .unwrap();
    l.tb.ip(&["addr", "add", "192.168.7.2/24", "dev", "tbe"])
        .unwrap();
    l.tb.ip(&["link", "set", "tbe", "mtu", "1442", "up"])
        .unwrap();
    netns::run(&[
        "ip",
        "netns",
        "exec",
        l.tb.name(),
        "ethtool",
        "-K",
        "tbe",
        "tx",
        "off",
        "tso",
        "off",
    ])
    .expect("ethtool (install-deps installs it)");
    ovs
}

fn plain(kind: &str) {
    let l = lab();
    let ovs = ovs_side(&l, kind);
    let cfg = node_config(
        "n1",
        l.ta.name(),
        "192.168.7.1",
        kind,
        "172.31.0.1",
        "172.31.0.2",
        6,
        6,
    )
    .replace(
        "address = \"192.168.7.1/24\"",
        "address = \"192.168.7.1/24\"\nmtu = 1442",
    );
    let s1 = Switch::start(l.hv1.name(), &cfg, &l.dir, "n1");
    wait_for_tap(&l.ta, "tap-n1");
    traffic_both_ways(&l, "tunlab/OVS");
    let e = s1.stop();
    assert!(!e.contains("dropped malformed"), "{e}");
    assert!(!ovs.log().contains("ERR"), "{}", ovs.log());
}

#[test]
fn ovs_geneve() {
    plain("geneve");
}

#[test]
fn ovs_vxlan() {
    plain("vxlan");
}

#[test]
fn ovs_gre() {
    plain("gre");
}

/// OVN's option both ways: tunlab sets ingress 3 / egress 2 in
/// tun_metadata0 and OVS matches exactly that; OVS sets ingress 2 /
/// egress 3 and tunlab matches exactly that. Any other value, or no
/// option, matches nothing and nothing passes.
#[test]
fn ovs_geneve_ovn_option() {
    geneve_ovn_option(false);
}

/// The same with tunlab on its kernel datapath, which must carry it.
#[test]
fn ovs_geneve_ovn_option_on_the_kernel_datapath() {
    geneve_ovn_option(true);
}

fn geneve_ovn_option(kernel: bool) {
    let l = lab();
    let ovs = ovs_side(&l, "geneve");
    ovs.ofctl(&[
        "add-tlv-map",
        "br-int",
        "{class=0x0102,type=0x80,len=4}->tun_metadata0",
    ])
    .unwrap();
    ovs.ofctl(&["del-flows", "br-int"]).unwrap();
    ovs.ofctl(&[
        "add-flow",
        "br-int",
        "in_port=10,tun_metadata0=0x30002 actions=output:1",
    ])
    .unwrap();
    ovs.ofctl(&[
        "add-flow",
        "br-int",
        "in_port=1 actions=set_field:0x20003->tun_metadata0,output:10",
    ])
    .unwrap();
    let cfg = node_config(
        "n1",
        l.ta.name(),
        "192.168.7.1",
        "geneve",
        "172.31.0.1",
        "172.31.0.2",
        6,
        6,
    )
    .replace(
        "address = \"192.168.7.1/24\"",
        "address = \"192.168.7.1/24\"\nmtu = 1442",
    )
    .replace(
        "[switch]\n",
        "[switch]\ntlv_map = [\"{class=0x0102,type=0x80,len=4}->tun_metadata0\"]\n",
    )
    .replace(
        "\"in_port=1 actions=output:10\"",
        "\"in_port=1 actions=set_field:0x30002->tun_metadata0,output:10\"",
    )
    .replace(
        "\"in_port=10,tun_id=6 actions=output:1\"",
        "\"in_port=10,tun_id=6,tun_metadata0=0x20003 actions=output:1\"",
    );
    let cfg = if kernel {
        // A tenant's checksum the kernel path leaves partial stays partial
        // across a veth (the peer kernel trusts it), and OVS's userspace
        // datapath reads the raw bytes: with the underlay's checksum
        // offload off the kernel completes it before the "wire", as a
        // NIC would. (The userspace path completes it itself.)
        netns::run(&[
            "ip",
            "netns",
            "exec",
            l.hv1.name(),
            "ethtool",
            "-K",
            &l.u1,
            "tx",
            "off",
        ])
        .expect("ethtool");
        on_kernel(&cfg)
    } else {
        cfg
    };
    let s1 = Switch::start(l.hv1.name(), &cfg, &l.dir, "n1");
    wait_for_tap(&l.ta, "tap-n1");
    traffic_both_ways(&l, "tunlab/OVS");
    if kernel {
        assert_kernel_carried(&l.dir, "n1", "tunlab/OVS Geneve+OVN");
    }
    let dump = ovs.ofctl(&["dump-flows", "br-int"]).unwrap();
    assert!(
        dump.contains("tun_metadata0=0x30002") && !dump.contains("n_packets=0,"),
        "{dump}"
    );
    let e = s1.stop();
    assert!(e.contains("port 10 t-n1 (geneve): rx "), "{e}");
}
