//! The OpenFlow management socket (issue 19, first parts: the session and
//! flow_mod add/delete)
//! against Open vSwitch's own `ovs-ofctl`, and against clients that send
//! garbage, while the node carries tenant traffic. Needs root
//! (namespaces) and openvswitch-common.

mod common;

use common::*;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::Duration;
use tunlab_wire::openflow::{self as of, Message};

fn ofctl(args: &[&str]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("10")
        .arg("ovs-ofctl")
        .args(args)
        .output()
        .expect("ovs-ofctl (scripts/install-deps installs openvswitch-common)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Read one whole message (at most 2 s).
fn read_msg(s: &mut UnixStream) -> Option<Vec<u8>> {
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Ok(Some(n)) = of::frame(&buf) {
            buf.truncate(n);
            return Some(buf);
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

#[test]
fn ovs_ofctl_programs_the_node_and_bad_clients_are_turned_away() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &c1, &c2);
    let mgmt = tunlab_switch::mgmt::path_beside(s1.ctl_path());
    let target = format!("unix:{}", mgmt.display());

    // Open vSwitch's client agrees on 1.0 by default and on 1.3 when
    // asked; its echo requests come back.
    for v in [None, Some("OpenFlow13")] {
        let mut a = Vec::new();
        if let Some(v) = v {
            a.extend(["-O", v]);
        }
        a.extend(["probe", &target]);
        let (ok, out) = ofctl(&a);
        assert!(ok, "ovs-ofctl {a:?}: {out}");
    }
    let (ok, out) = ofctl(&["ping", &target, "64"]);
    assert!(ok && out.contains("64 bytes from"), "{out}");
    // A version only it speaks: it reads our bitmap and names both sides.
    let (ok, out) = ofctl(&["-O", "OpenFlow14", "probe", &target]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("version negotiation failed") && out.contains("0x01, 0x04"),
        "{out}"
    );

    // A raw client: HELLO, FEATURES, an unknown type, then a header that
    // cannot frame anything.
    let mut s = UnixStream::connect(&mgmt).unwrap();
    let hello = read_msg(&mut s).expect("the switch says HELLO first");
    let m = Message::new_checked(&hello).unwrap();
    assert_eq!(of::hello_bitmap(&m).unwrap(), Some(0x12));
    s.write_all(&of::hello(of::OF13, 1 << of::OF13, 1)).unwrap();
    s.write_all(&of::header(of::OF13, 5, 8, 2)).unwrap();
    let f = read_msg(&mut s).expect("features reply");
    let m = Message::new_checked(&f).unwrap();
    assert_eq!((m.msg_type(), m.xid(), m.len()), (6, 2, 32));
    assert_eq!(
        &m.body()[..8],
        &tunlab_switch::mgmt::datapath_id("n1").to_be_bytes()
    );
    s.write_all(&of::header(of::OF13, 99, 8, 3)).unwrap();
    let e = read_msg(&mut s).expect("an error");
    let m = Message::new_checked(&e).unwrap();
    assert_eq!((m.msg_type(), m.xid()), (of::ERROR, 3));
    let (t, c, data) = of::parse_error(&m).unwrap();
    assert_eq!((t, c), (of::ET_BAD_REQUEST, of::BRC_BAD_TYPE));
    assert_eq!(&data[..8], &of::header(of::OF13, 99, 8, 3));
    s.write_all(&[4, 2, 0, 3, 0, 0, 0, 4]).unwrap();
    let e = read_msg(&mut s).expect("an error before closing");
    let (_, c, _) = of::parse_error(&Message::new_checked(&e).unwrap()).unwrap();
    assert_eq!(c, of::BRC_BAD_LEN);
    assert!(read_msg(&mut s).is_none(), "closed after a length below 8");

    // A client that speaks first without HELLO, and one that sends random
    // bytes and hangs up: each is turned away, the node goes on.
    let mut s = UnixStream::connect(&mgmt).unwrap();
    let _ = read_msg(&mut s);
    s.write_all(&of::header(of::OF13, of::ECHO_REQUEST, 8, 5))
        .unwrap();
    let e = read_msg(&mut s).expect("hello failed");
    let (t, _, _) = of::parse_error(&Message::new_checked(&e).unwrap()).unwrap();
    assert_eq!(t, of::ET_HELLO_FAILED);
    assert!(read_msg(&mut s).is_none());
    {
        let mut s = UnixStream::connect(&mgmt).unwrap();
        let _ = s.write_all(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3]);
    }
    traffic_both_ways(&l, "geneve while OpenFlow clients came and went");
    let (ok, out) = ofctl(&["-O", "OpenFlow13", "probe", &target]);
    assert!(ok, "{out}");

    // One flow table, two doors: the node's rules deleted and put back
    // over OpenFlow carry the traffic again, beside the articles' rules,
    // and `tunlab ctl dump-flows` lists what ovs-ofctl added.
    let add = |rule: &str| {
        let (ok, out) = ofctl(&["--no-names", "-O", "OpenFlow13", "add-flow", &target, rule]);
        assert!(ok, "add-flow {rule}: {out}");
    };
    let (ok, out) = ofctl(&["--no-names", "-O", "OpenFlow13", "del-flows", &target]);
    assert!(ok, "{out}");
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    assert_eq!(dump.lines().count(), 0, "{dump}");
    for rule in [
        "in_port=1 actions=output:10",
        "in_port=10,tun_id=6 actions=output:1",
        // The tun_dst and QinQ articles' rules, as written there.
        "in_port=1,tun_dst=10.222.0.1 action=output:2",
        "in_port=1,dl_vlan=1 action=pop_vlan,output:2",
        "in_port=2 action=push_vlan:0x88a8,mod_vlan_vid:1,output:1",
        "priority=5,in_port=3,tun_id=0x6 actions=set_field:0x20003->tun_metadata0,output:4",
    ] {
        add(rule);
    }
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    // (dump-flows names the ports it knows: 1 is tap-n1, 10 is t-n1.)
    for want in [
        " in_port=tap-n1 actions=output:t-n1",
        " in_port=t-n1,tun_id=0x6 actions=output:tap-n1",
        " in_port=tap-n1,tun_dst=10.222.0.1 actions=output:2",
        " in_port=tap-n1,dl_vlan=1 actions=pop_vlan,output:2",
        " in_port=2 actions=push_vlan:0x88a8,mod_vlan_vid:1,output:tap-n1",
        " priority=5,in_port=3,tun_id=0x6 actions=set_field:0x20003->tun_metadata0,output:4",
    ] {
        assert!(dump.contains(want), "{want} not in:\n{dump}");
    }
    traffic_both_ways(&l, "geneve on rules put back over OpenFlow");
    // Strict delete takes only the rule with that priority.
    let (ok, out) = ofctl(&[
        "--no-names",
        "-O",
        "OpenFlow13",
        "--strict",
        "del-flows",
        &target,
        "priority=5,in_port=3,tun_id=0x6",
    ]);
    assert!(ok, "{out}");
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    assert_eq!(dump.lines().count(), 5, "{dump}");
    // Under 1.0, ovs-ofctl asks for the table stats first, then sends a
    // 1.0 flow_mod, which is not built and is refused by name.
    let (ok, out) = ofctl(&["dump-tables", &target]);
    assert!(
        ok && out.contains("table 0 (\"classifier\")") && out.contains("active=5"),
        "{out}"
    );
    let (ok, out) = ofctl(&["add-flow", &target, "in_port=1 actions=drop"]);
    assert!(!ok && out.contains("OFPBRC_BAD_TYPE"), "{out}");
    // What is not built is refused by name, in OVS's own words.
    let (ok, out) = ofctl(&[
        "--no-names",
        "-O",
        "OpenFlow13",
        "mod-flows",
        &target,
        "in_port=1 actions=drop",
    ]);
    assert!(!ok && out.contains("OFPFMFC_BAD_COMMAND"), "{out}");
    let (ok, out) = ofctl(&[
        "--no-names",
        "-O",
        "OpenFlow13",
        "add-flow",
        &target,
        "in_port=1 actions=controller",
    ]);
    assert!(!ok && out.contains("OFPBAC_BAD_OUT_PORT"), "{out}");
    s1.stop();
    s2.stop();
    assert!(!mgmt.exists(), "the socket is removed when the node stops");
}
