//! The OpenFlow management socket (issue 19: the session, flow_mod and
//! the statistics) against Open vSwitch's own `ovs-ofctl`, against
//! clients that send garbage, and beside Open vSwitch 3.1 itself given the
//! same flows, while the node carries tenant traffic. Needs root
//! (namespaces) and openvswitch-switch.

mod common;

use common::*;
use std::collections::BTreeSet;
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

/// `ovs-ofctl`'s name for a node's management socket.
fn ofctl_target(s: &Switch) -> String {
    format!(
        "unix:{}",
        tunlab_switch::mgmt::path_beside(s.ctl_path()).display()
    )
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
        match retry_eintr(|| s.read(&mut chunk)) {
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
    let target = ofctl_target(&s1);

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
    // 1.0, 1.3 and 1.5.
    assert_eq!(of::hello_bitmap(&m).unwrap(), Some(0x52));
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
    // The largest message there is, of garbage: a flow_mod that does not
    // read (BAD_LEN, its first 64 bytes sent back), and the connection
    // goes on (the features are still answered).
    let mut big = of::header(of::OF13, of::FLOW_MOD, of::MAX_LEN, 4).to_vec();
    big.extend((0..of::MAX_LEN - 8).map(|i| (i * 7 % 251) as u8));
    big[48..52].copy_from_slice(&[0, 1, 0xff, 0xf0]); // an OXM match longer than the message
    s.write_all(&big).unwrap();
    let e = read_msg(&mut s).expect("an error for the oversized flow_mod");
    let m = Message::new_checked(&e).unwrap();
    let (t, c, data) = of::parse_error(&m).unwrap();
    assert_eq!((m.xid(), t, c), (4, of::ET_BAD_REQUEST, of::BRC_BAD_LEN));
    assert_eq!(data.len(), of::ERROR_DATA_LEN);
    s.write_all(&of::header(of::OF13, 5, 8, 5)).unwrap();
    let f = read_msg(&mut s).expect("features after the garbage");
    assert_eq!(Message::new_checked(&f).unwrap().msg_type(), 6);
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
    // (ovs-ofctl reads port names from the port descriptions and table
    // features, as it does from OVS.)
    let add = |rule: &str| {
        let (ok, out) = ofctl(&["-O", "OpenFlow13", "add-flow", &target, rule]);
        assert!(ok, "add-flow {rule}: {out}");
    };
    let (ok, out) = ofctl(&["--no-names", "-O", "OpenFlow13", "del-flows", &target]);
    assert!(ok, "{out}");
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    assert_eq!(dump.lines().count(), 0, "{dump}");
    for rule in [
        "in_port=tap-n1 actions=output:t-n1",
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
        " tun_id=0x6,in_port=t-n1 actions=output:tap-n1",
        " tun_dst=10.222.0.1,in_port=tap-n1 actions=output:2",
        " in_port=tap-n1,dl_vlan=1 actions=pop_vlan,output:2",
        " in_port=2 actions=push_vlan:0x88a8,mod_vlan_vid:1,output:tap-n1",
        " priority=5,tun_id=0x6,in_port=3 actions=set_field:0x20003->tun_metadata0,output:4",
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
    // ovs-ofctl's default, 1.0 (a plain flow_mod, and Nicira's with an
    // NXM match for a tunnel field), adds and deletes alike.
    for rule in [
        "priority=3,in_port=9 actions=drop",
        "priority=3,in_port=9,tun_id=0x7 actions=drop",
    ] {
        let (ok, out) = ofctl(&["add-flow", &target, rule]);
        assert!(ok, "{rule}: {out}");
    }
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    assert_eq!(dump.lines().count(), 7, "{dump}");
    let (ok, out) = ofctl(&["del-flows", &target, "in_port=9"]);
    assert!(ok, "{out}");
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    assert_eq!(dump.lines().count(), 5, "{dump}");
    // Modify changes the actions of the rules it picks and keeps their
    // counters; here it sends the tenant's traffic nowhere, then back.
    let modify = |args: &[&str]| {
        let mut a = vec!["-O", "OpenFlow13"];
        a.extend_from_slice(args);
        let (ok, out) = ofctl(&a);
        assert!(ok, "{a:?}: {out}");
    };
    modify(&["mod-flows", &target, "in_port=1 actions=drop"]);
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    assert!(
        dump.contains(" in_port=tap-n1 actions=drop") && dump.contains(",dl_vlan=1 actions=drop"),
        "non-strict modify takes every rule under in_port=1:\n{dump}"
    );
    modify(&[
        "--strict",
        "mod-flows",
        &target,
        "in_port=1 actions=output:10",
    ]);
    modify(&[
        "--strict",
        "mod-flows",
        &target,
        "in_port=1,dl_vlan=1 actions=pop_vlan,output:2",
    ]);
    modify(&[
        "--strict",
        "mod-flows",
        &target,
        "in_port=1,tun_dst=10.222.0.1 actions=output:2",
    ]);
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    assert!(!dump.contains("actions=drop"), "{dump}");
    traffic_both_ways(&l, "geneve after modify over OpenFlow");
    // What is not built is refused by name, in OVS's own words: groups,
    // other instructions, the overlap check.
    for (rule, why) in [
        ("in_port=1 actions=group:1", "OFPBAC_BAD_TYPE"),
        (
            "in_port=1 actions=write_actions(output:2)",
            "OFPBIC_UNKNOWN_INST",
        ),
        ("check_overlap,in_port=1 actions=drop", "OFPFMFC_BAD_FLAGS"),
    ] {
        let (ok, out) = ofctl(&["-O", "OpenFlow13", "add-flow", &target, rule]);
        assert!(!ok && out.contains(why), "{rule}: {out}");
    }
    s1.stop();
    s2.stop();
    assert!(!mgmt.exists(), "the socket is removed when the node stops");
}

/// A dump-flows line without its counters: cookie, table, the match's
/// fields as a set (ovs-ofctl prints them in the order they came), the
/// actions.
fn flow_fields(line: &str) -> Option<(String, String, BTreeSet<String>, String)> {
    let (head, actions) = line.trim().split_once(" actions=")?;
    let mut cookie = String::new();
    let mut table = String::new();
    let mut matched = BTreeSet::new();
    for part in head.split(", ") {
        if let Some(c) = part.strip_prefix("cookie=") {
            cookie = c.to_string();
        } else if let Some(t) = part.strip_prefix("table=") {
            table = t.to_string();
        } else if [
            "duration=",
            "n_packets=",
            "n_bytes=",
            "idle_age=",
            "hard_age=",
        ]
        .iter()
        .any(|p| part.starts_with(p))
        {
            // Counters and ages differ between any two switches.
        } else {
            matched.extend(part.split(',').map(str::to_string));
        }
    }
    Some((cookie, table, matched, actions.to_string()))
}

/// A dump-flows line's table, cookie, priority and match, as Open
/// vSwitch printed them (counters and ages left out), and its actions.
fn head_and_actions(line: &str) -> Option<(String, String)> {
    let (head, actions) = line.trim().split_once(" actions=")?;
    let keep: Vec<&str> = head
        .split(", ")
        .filter(|p| {
            p.starts_with("cookie=") || p.starts_with("table=") || p.starts_with("priority=")
        })
        .collect();
    Some((keep.join(","), actions.to_string()))
}

/// OVN's pipeline (`shared/ovn`'s deployment, as Open vSwitch 3.1 dumped
/// it on each chassis): each flow's table, cookie, priority and match, as
/// OVS printed them.
fn ovn_matches(file: &str) -> Vec<String> {
    let path = format!("{}/../dp/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| l.starts_with(' '))
        .filter_map(|l| head_and_actions(l).map(|(h, _)| h))
        .collect()
}

/// Every match of OVN's pipeline (673 and 668 flows over 50 tables:
/// registers, metadata, conntrack state and mark, ARP, ND, ICMP type and
/// code, TTL, fragments) goes to the node through `ovs-ofctl add-flows`
/// (OpenFlow 1.3's OXM, and 1.0 with Nicira's NXM) and comes back from
/// `dump-flows` as Open vSwitch printed it: Open vSwitch's own codec on
/// both ends, tunlab's in between. (Their actions are not all built yet:
/// the flows go in with `actions=drop`.)
#[test]
fn ovns_matches_go_through_ovs_ofctl_and_come_back_as_ovs_printed_them() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, _s2) = start_pair(&l, &c1, &c2);
    let ours = ofctl_target(&s1);
    for (file, count) in [("flows-ch1.txt", 673), ("flows-ch2.txt", 668)] {
        let want: BTreeSet<String> = ovn_matches(file).into_iter().collect();
        assert_eq!(want.len(), count, "{file}: distinct flows");
        let rules: Vec<String> = want.iter().map(|m| format!("{m} actions=drop")).collect();
        let path = l.dir.join("ovn-rules.txt");
        std::fs::write(&path, rules.join("\n")).unwrap();
        let path = path.display().to_string();
        for version in [&["-O", "OpenFlow13"][..], &[]] {
            for cmd in [
                vec!["del-flows", ours.as_str()],
                vec!["add-flows", ours.as_str(), &path],
            ] {
                let args: Vec<&str> = version.iter().copied().chain(cmd).collect();
                let (ok, out) = ofctl(&args);
                assert!(ok, "{args:?}: {out}");
            }
            let mut args: Vec<&str> = version.to_vec();
            args.extend(["dump-flows", ours.as_str()]);
            let (ok, out) = ofctl(&args);
            assert!(ok, "{args:?}: {out}");
            let got: BTreeSet<String> = out
                .lines()
                .filter_map(|l| {
                    let (head, actions) = head_and_actions(l)?;
                    assert_eq!(actions, "drop", "{l}");
                    Some(head)
                })
                .collect();
            let missing: Vec<_> = want.difference(&got).take(5).collect();
            let extra: Vec<_> = got.difference(&want).take(5).collect();
            assert!(
                missing.is_empty() && extra.is_empty(),
                "{file} {version:?}: {} in, {} out; not back as OVS printed them: {missing:#?}; printed instead: {extra:#?}",
                want.len(),
                got.len()
            );
        }
    }
}

/// OVN's whole pipeline, actions and all, as ovn-controller installs it:
/// the TLV map for its Geneve option, then every rule of each chassis in
/// one `ovs-ofctl -O OpenFlow15 --bundle add-flows` into tunlab and into
/// Open vSwitch 3.1, and `dump-flows` of the two gives the same rules
/// (table, cookie, priority, match and actions). All but the rules with
/// `learn` or `group` (three on each chassis), which are not built; with
/// one of them in the bundle, nothing is installed.
#[test]
fn ovns_whole_pipeline_goes_through_a_bundle_but_learn_and_group() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, _s2) = start_pair(&l, &c1, &c2);
    let ours = ofctl_target(&s1);
    let (_ovs, theirs) = ovs_bridge(&l, 0);
    for target in [&ours, &theirs] {
        let (ok, out) = ofctl(&[
            "-O",
            "OpenFlow15",
            "add-tlv-map",
            target,
            "{class=0x0102,type=0x80,len=4}->tun_metadata0",
        ]);
        assert!(ok, "{out}");
    }
    let dump = |target: &str| -> BTreeSet<(String, String)> {
        let (ok, out) = ofctl(&["-O", "OpenFlow15", "dump-flows", target]);
        assert!(ok, "{out}");
        out.lines().filter_map(head_and_actions).collect()
    };
    for (file, built) in [("flows-ch1.txt", 670), ("flows-ch2.txt", 665)] {
        let path = format!("{}/../dp/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let all: Vec<(String, String)> = text
            .lines()
            .filter(|l| l.starts_with(' '))
            .filter_map(head_and_actions)
            .collect();
        let (want, not_built): (Vec<_>, Vec<_>) = all
            .into_iter()
            .partition(|(_, a)| !a.contains("learn(") && !a.contains("group:"));
        assert_eq!(want.len(), built, "{file}");
        let rules_file = |rules: &[(String, String)], name: &str| {
            let text: Vec<String> = rules
                .iter()
                .map(|(h, a)| format!("{h} actions={a}"))
                .collect();
            let path = l.dir.join(name);
            std::fs::write(&path, text.join("\n")).unwrap();
            path.display().to_string()
        };
        let good = rules_file(&want, "ovn-whole.txt");
        for target in [&ours, &theirs] {
            for args in [
                vec!["-O", "OpenFlow15", "del-flows", target.as_str()],
                vec![
                    "-O",
                    "OpenFlow15",
                    "--bundle",
                    "add-flows",
                    target.as_str(),
                    &good,
                ],
            ] {
                let (ok, out) = ofctl(&args);
                assert!(ok, "{file} {args:?}: {out}");
            }
        }
        let (got, theirs_got) = (dump(&ours), dump(&theirs));
        assert_eq!(got.len(), built, "{file}");
        let missing: Vec<_> = theirs_got.difference(&got).take(3).collect();
        let extra: Vec<_> = got.difference(&theirs_got).take(3).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{file}: Open vSwitch dumps {missing:#?}; tunlab instead: {extra:#?}"
        );
        // One rule that is not built spoils the bundle, which changes
        // nothing.
        let mut spoilt: Vec<(String, String)> = want.iter().take(10).cloned().collect();
        spoilt.push(not_built[0].clone());
        let bad = rules_file(&spoilt, "ovn-spoilt.txt");
        let (ok, out) = ofctl(&["-O", "OpenFlow15", "--bundle", "add-flows", &ours, &bad]);
        assert!(!ok && out.contains("OFPBAC_BAD"), "{out}");
        assert_eq!(dump(&ours), got, "{file}: a failed bundle changes nothing");
    }
}

/// OpenFlow 1.5 as OVN speaks it: `ovs-ofctl -O OpenFlow15 --bundle
/// add-flows` loads OVN's matches as one atomic bundle, `dump-flows` in
/// 1.5 (flow descriptions, OXS statistics, the packet registers) gives
/// them back as Open vSwitch printed them, `replace-flows` (a bundle of
/// deletes and adds) leaves the same set, and a bundle with a bad flow
/// changes nothing and names the flow.
#[test]
fn ovs_ofctl_bundles_in_openflow_15() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, _s2) = start_pair(&l, &c1, &c2);
    let ours = ofctl_target(&s1);
    let (ok, out) = ofctl(&["-O", "OpenFlow15", "probe", &ours]);
    assert!(ok, "{out}");
    let want: BTreeSet<String> = ovn_matches("flows-ch1.txt").into_iter().collect();
    let rules: Vec<String> = want.iter().map(|m| format!("{m} actions=drop")).collect();
    let path = l.dir.join("ovn-rules-15.txt");
    std::fs::write(&path, rules.join("\n")).unwrap();
    let path = path.display().to_string();
    let dump = || -> BTreeSet<String> {
        let (ok, out) = ofctl(&["-O", "OpenFlow15", "dump-flows", &ours]);
        assert!(ok, "{out}");
        assert!(out.starts_with("OFPST_FLOW reply (OF1.5)"), "{out}");
        out.lines()
            .filter_map(|l| head_and_actions(l).map(|(h, _)| h))
            .collect()
    };
    for cmd in [
        vec!["-O", "OpenFlow15", "del-flows", ours.as_str()],
        vec![
            "-O",
            "OpenFlow15",
            "--bundle",
            "add-flows",
            ours.as_str(),
            &path,
        ],
    ] {
        let (ok, out) = ofctl(&cmd);
        assert!(ok, "{cmd:?}: {out}");
    }
    assert_eq!(dump(), want);
    let (ok, out) = ofctl(&[
        "-O",
        "OpenFlow15",
        "--bundle",
        "replace-flows",
        &ours,
        &path,
    ]);
    assert!(ok, "{out}");
    assert_eq!(dump(), want);
    // One bad flow in a bundle: nothing of it is installed, and ovs-ofctl
    // says which.
    let bad = l.dir.join("bad-bundle.txt");
    std::fs::write(
        &bad,
        "table=90,priority=5,reg0=0x1 actions=drop\ntable=90,priority=6,ip,nw_ttl=3 actions=group:7\n",
    )
    .unwrap();
    let (ok, out) = ofctl(&[
        "-O",
        "OpenFlow15",
        "--bundle",
        "add-flows",
        &ours,
        &bad.display().to_string(),
    ]);
    assert!(!ok, "{out}");
    assert!(out.contains("OFPBAC_BAD"), "{out}");
    assert_eq!(dump(), want, "a failed bundle changes nothing");
    // Conntrack flushes, as ovn-controller sends one per zone it
    // assigns: taken (there is no connection state to flush until the
    // datapaths track connections), a malformed one refused by name.
    for args in [
        vec!["-O", "OpenFlow15", "ct-flush-zone", ours.as_str(), "5"],
        vec!["-O", "OpenFlow15", "ct-flush", ours.as_str()],
        vec!["-O", "OpenFlow15", "ct-flush", ours.as_str(), "zone=7"],
        vec!["ct-flush-zone", ours.as_str(), "65535"],
    ] {
        let (ok, out) = ofctl(&args);
        assert!(ok, "{args:?}: {out}");
    }
    let mut raw = UnixStream::connect(ours.trim_start_matches("unix:")).unwrap();
    raw.write_all(&of::hello(of::OF15, 1 << of::OF15, 1))
        .unwrap();
    let _ = read_msg(&mut raw);
    raw.write_all(&of::nx_message(
        of::OF15,
        9,
        of::NXT_CT_FLUSH_ZONE,
        &[0, 1, 0, 0, 0, 0, 0, 5],
    ))
    .unwrap();
    let reply = read_msg(&mut raw).expect("an error");
    let hex: String = reply.iter().map(|b| format!("{b:02x}")).collect();
    let (ok, text) = ofctl(&["ofp-print", &hex]);
    assert!(ok && text.contains("NXBRC_MUST_BE_ZERO"), "{text}");
    // Meters: none, said as such; deleting them all (what ovn-controller
    // does at start) works, adding one is refused by name.
    let (ok, out) = ofctl(&["-O", "OpenFlow15", "meter-features", &ours]);
    assert!(ok && out.contains("max_meter:0"), "{out}");
    let (ok, out) = ofctl(&["-O", "OpenFlow15", "del-meters", &ours]);
    assert!(ok, "{out}");
    let (ok, out) = ofctl(&["-O", "OpenFlow15", "dump-meters", &ours]);
    assert!(ok && !out.contains("meter="), "{out}");
    let (ok, out) = ofctl(&[
        "-O",
        "OpenFlow15",
        "add-meter",
        &ours,
        "meter=1 kbps bands=type=drop rate=100",
    ]);
    assert!(!ok && out.contains("OFPMMFC_OUT_OF_METERS"), "{out}");
}

/// `ovs-ofctl dump-flows` in 1.3, or in its default (1.0 with Nicira's
/// NXST_FLOW) when `version` is `None`.
fn dump(
    version: Option<&str>,
    target: &str,
    extra: &[&str],
) -> BTreeSet<(String, String, BTreeSet<String>, String)> {
    let mut a = match version {
        Some(v) => vec!["-O", v],
        None => Vec::new(),
    };
    a.extend(["dump-flows", target]);
    a.extend_from_slice(extra);
    let (ok, out) = ofctl(&a);
    assert!(ok, "{a:?}: {out}");
    out.lines().filter_map(flow_fields).collect()
}

/// The same flows given to tunlab and to Open vSwitch 3.1 (its userspace
/// datapath, in a namespace of this test) through `ovs-ofctl add-flows`
/// come back from `ovs-ofctl dump-flows` with the same cookies, tables,
/// matches and actions, field by field; so do the filtered dumps, the
/// aggregate and the table stats. Then the port statistics and
/// descriptions count and name tunlab's ports.
#[test]
fn dump_flows_lists_what_ovs_3_1_lists_for_the_same_flows() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &c1, &c2);
    let ours = ofctl_target(&s1);
    let (ovs, theirs) = ovs_bridge(&l, 0);
    // OVS takes tun_metadata0 only once a TLV is mapped to it; tunlab
    // takes the field either way (the map matters when the option goes on
    // the wire).
    ovs.ofctl(&[
        "add-tlv-map",
        "br0",
        "{class=0x0102,type=0x80,len=4}->tun_metadata0",
    ])
    .unwrap();
    let rules = [
        // The node's own two rules, by number.
        "in_port=1 actions=output:10",
        "in_port=10,tun_id=6 actions=output:1",
        // The tun_dst and QinQ articles' rules, as written there.
        "in_port=1,tun_dst=10.222.0.1 action=output:2",
        "in_port=1,dl_vlan=1 action=pop_vlan,output:2",
        "in_port=2 action=push_vlan:0x88a8,mod_vlan_vid:1,output:1",
        "priority=10,in_port=2 actions=set_field:10.222.0.6->tun_dst,output:1",
        // OVN's option in tun_metadata0, tunnel ids, resubmit to a table.
        "cookie=0x77,priority=60,tun_metadata0=0x1234,dl_dst=00:11:22:33:44:55 actions=set_field:0xabcd->tun_metadata0,set_field:0x9->tun_id,resubmit(,1)",
        "table=1,cookie=0x78,priority=61,tun_id=0x10/0xff,tun_src=10.0.0.1 actions=set_field:10.0.0.9->tun_src,output:2",
        "priority=50,ip,nw_dst=10.0.0.0/8,tun_id=0x5 actions=normal",
        "priority=2,udp,nw_src=1.2.3.4,nw_dst=5.6.7.8,nw_tos=32,tp_src=53,tp_dst=99 actions=output:2",
        "priority=3,ipv6,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::/32 actions=in_port",
        "priority=1,dl_src=00:00:00:00:00:01,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,dl_vlan=7,dl_vlan_pcp=2 actions=mod_vlan_vid:9,output:4",
        "priority=11,arp,nw_src=10.0.0.1 actions=normal",
        "priority=12,tcp,tp_dst=80 actions=drop",
        "priority=13,vlan_tci=0x0000/0x1fff,tun_ipv6_dst=fd00::2 actions=set_field:fd00::9->tun_ipv6_dst,output:10",
    ];
    let file = l.dir.join("of-rules.txt");
    std::fs::write(&file, rules.join("\n")).unwrap();
    let file = file.display().to_string();
    for target in [&ours, &theirs] {
        for args in [
            vec!["-O", "OpenFlow13", "del-flows", target.as_str()],
            vec!["-O", "OpenFlow13", "add-flows", target.as_str(), &file],
        ] {
            let (ok, out) = ofctl(&args);
            assert!(ok, "{args:?}: {out}");
        }
    }
    // In 1.3, and in ovs-ofctl's default (1.0 with NXM, where OVS writes
    // VLAN edits as 1.0's actions, set_field as NXAST_REG_LOAD and
    // push_vlan as nothing).
    for version in [Some("OpenFlow13"), None] {
        let (a, b) = (dump(version, &ours, &[]), dump(version, &theirs, &[]));
        assert_eq!(a.len(), rules.len(), "{a:#?}");
        assert_eq!(a, b, "tunlab and OVS 3.1 list the same flows ({version:?})");
        // The filtered dumps pick alike: by match, by cookie, by table, by
        // output port.
        for filter in [
            &["ip"][..],
            &["in_port=1"],
            &["cookie=0x70/0xf0"],
            &["table=1"],
            &["out_port=2"],
            &["in_port=2,tun_dst=0.0.0.0/0"],
            &["dl_dst=00:11:22:33:44:55"],
        ] {
            let (a, b) = (dump(version, &ours, filter), dump(version, &theirs, filter));
            assert!(!a.is_empty(), "{filter:?}");
            assert_eq!(a, b, "dump-flows {filter:?} ({version:?})");
        }
    }
    let counts = |target: &str, cmd: &str| {
        let (ok, out) = ofctl(&["-O", "OpenFlow13", cmd, target]);
        assert!(ok, "{cmd}: {out}");
        out
    };
    let (mine, theirs_agg) = (
        counts(&ours, "dump-aggregate"),
        counts(&theirs, "dump-aggregate"),
    );
    let flow_count = |s: &str| s.split("flow_count=").nth(1).map(|x| x.trim().to_string());
    assert_eq!(
        flow_count(&mine),
        flow_count(&theirs_agg),
        "{mine} / {theirs_agg}"
    );

    // The node's rules still carry the tenants' traffic, and the port
    // counters and descriptions say so.
    traffic_both_ways(&l, "geneve on rules from add-flows");
    let ports = counts(&ours, "dump-ports");
    assert!(
        ports.contains("2 ports") && ports.contains("port  1:") && ports.contains("port 10:"),
        "{ports}"
    );
    let rx1: u64 = ports
        .split("port  1: rx pkts=")
        .nth(1)
        .and_then(|x| x.split(',').next())
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    assert!(rx1 > 0, "{ports}");
    let desc = counts(&ours, "dump-ports-desc");
    assert!(
        desc.contains(" 1(tap-n1)") && desc.contains(" 10(t-n1)"),
        "{desc}"
    );
    let tables = counts(&ours, "dump-tables");
    assert!(
        tables.contains("active=14") && tables.contains("table 1:"),
        "{tables}"
    );
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    assert_eq!(dump.lines().count(), rules.len(), "{dump}");
    drop(ovs);
    s1.stop();
    s2.stop();
}

/// os-ken's application, run by tests/interop/osken_run.py in a namespace
/// of the test, stopped on drop.
struct Controller {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl Controller {
    fn start(ns: &str, host: &str, port: u16, dir: &std::path::Path) -> Controller {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let app = root.join("target/os-ken-apps/simple_switch_13.py");
        assert!(
            app.exists(),
            "{} is missing: scripts/install-deps fetches it (os-ken 1.4.1's learning switch)",
            app.display()
        );
        let log = dir.join("os-ken.log");
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "python3"])
            .arg(root.join("tests/interop/osken_run.py"))
            .args([host, &port.to_string()])
            .arg(&app)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("python3 (scripts/install-deps installs os-ken)");
        Controller { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A node of the usual pair with no rules of its own, programmed by the
/// controller at `controller` instead.
fn controlled(cfg: &str, controller: &str) -> String {
    let start = cfg.find("flows = [").unwrap();
    let end = start + cfg[start..].find("]\n").unwrap() + 2;
    format!(
        "{}openflow = [\"tcp:{controller}\"]\n{}",
        &cfg[..start],
        &cfg[end..]
    )
}

/// A controller nobody here wrote: os-ken's simple_switch_13, over TCP,
/// programs both nodes of a Geneve pair from nothing. It installs its
/// table-miss rule (`actions=CONTROLLER:65535`), learns the tenants' MACs
/// from PACKET_INs, floods with PACKET_OUTs until it knows, and installs
/// the rules that then carry the tenants' ping and a TCP stream without
/// it.
#[test]
fn os_ken_simple_switch_13_learns_and_tenants_ping_and_stream() {
    os_ken_programs_a_pair(false);
}

/// The same on the eBPF datapath: the learned rules are cached in the
/// kernel, which carries the stream; what goes to the controller never is
/// (every such packet comes up to the slow path).
#[test]
fn os_ken_programs_the_ebpf_datapath_too() {
    os_ken_programs_a_pair(true);
}

fn os_ken_programs_a_pair(ebpf: bool) {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let controller = Controller::start(l.hv1.name(), "172.31.0.1", 16653, &l.dir);
    let (mut c1, mut c2) = (
        controlled(&c1, "172.31.0.1:16653"),
        controlled(&c2, "172.31.0.1:16653"),
    );
    if ebpf {
        c1 = on_kernel(&c1);
        c2 = on_kernel(&c2);
    }
    let (s1, s2) = start_pair(&l, &c1, &c2);
    // Each node connects (and reconnects until os-ken listens) and gets
    // the table-miss rule.
    for s in [&s1, &s2] {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (_, dump, _) = ctl(s.ctl_path(), &["dump-flows"]);
            if dump.contains("priority=0 actions=CONTROLLER:65535") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no table-miss rule from os-ken:\n{dump}\nos-ken: {}",
                controller.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    traffic_both_ways(&l, "geneve, programmed by os-ken's simple_switch_13");
    let (sent, got) = tcp_transfer(&l.ta, &l.tb, "192.168.7.2");
    assert_eq!(sent, got, "the TCP stream arrives whole");
    // What it learned: a rule per direction on each node, which carried
    // the stream.
    for s in [&s1, &s2] {
        let (_, dump, _) = ctl(s.ctl_path(), &["dump-flows"]);
        let learned: Vec<&str> = dump
            .lines()
            .filter(|l| l.contains("priority=1,in_port=") && l.contains(",dl_dst="))
            .collect();
        assert!(learned.len() >= 2, "{dump}");
        // The rules count what they carried: on the eBPF datapath, what
        // the kernel's cached flows carried is credited to them at the
        // revalidator's next sweep (within a second).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let (_, dump, _) = ctl(s.ctl_path(), &["dump-flows"]);
            let ours: String = dump
                .lines()
                .filter(|l| l.contains("priority=1,in_port="))
                .map(|l| format!("{l}\n"))
                .collect();
            let busiest = numbers_after(&ours, "n_packets=").max().unwrap_or(0);
            if busiest > 100 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the stream went through learned rules:\n{dump}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let log = controller.log();
    assert!(
        log.contains("packet in"),
        "os-ken logged no PACKET_IN:\n{log}"
    );
    if ebpf {
        assert_kernel_carried(&l.dir, "n1", "the learned rules");
    }
    s1.stop();
    s2.stop();
}

/// `ovs-ofctl add-tlv-map` maps OVN's Geneve option (class 0x0102, type
/// 0x80) to tun_metadata0 on both nodes, which start with no map; then a
/// rule on n1 sets the option and a rule on n2 forwards only what carries
/// the right value: the option crosses the tunnel end to end. The TLV
/// table answers as OVS's does: dump-tlv-map lists it, a field mapped
/// twice, an option mapped to two fields and a mapping still in use are
/// refused by name.
#[test]
fn add_tlv_map_then_a_tun_metadata0_rule_carries_the_ovn_option() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &c1, &c2);
    let t1 = ofctl_target(&s1);
    let t2 = ofctl_target(&s2);
    let ovn = "{class=0x0102,type=0x80,len=4}->tun_metadata0";
    // One node in ovs-ofctl's default (1.0 with Nicira's extensions), the
    // other in 1.3.
    let (ok, out) = ofctl(&["add-tlv-map", &t1, ovn]);
    assert!(ok, "{out}");
    let (ok, out) = ofctl(&["-O", "OpenFlow13", "add-tlv-map", &t2, ovn]);
    assert!(ok, "{out}");
    let (ok, out) = ofctl(&["-O", "OpenFlow13", "dump-tlv-map", &t2]);
    assert!(
        ok && out.contains("0x102  0x80       4  tun_metadata0"),
        "{out}"
    );
    let program = |target: &str, rules: &[&str]| {
        let (ok, out) = ofctl(&["-O", "OpenFlow13", "del-flows", target]);
        assert!(ok, "{out}");
        for r in rules {
            let (ok, out) = ofctl(&["-O", "OpenFlow13", "add-flow", target, r]);
            assert!(ok, "{r}: {out}");
        }
    };
    program(
        &t1,
        &[
            "in_port=1 actions=set_field:0x20003->tun_metadata0,output:10",
            "in_port=10 actions=output:1",
        ],
    );
    program(
        &t2,
        &[
            "in_port=10,tun_metadata0=0x20003 actions=output:1",
            "in_port=1 actions=output:10",
        ],
    );
    traffic_both_ways(&l, "geneve with OVN's option in tun_metadata0");
    // n2 now wants another value: nothing gets through a to b.
    program(
        &t2,
        &[
            "in_port=10,tun_metadata0=0x20004 actions=output:1",
            "in_port=1 actions=output:10",
        ],
    );
    let through = Command::new("ip")
        .args([
            "netns",
            "exec",
            l.ta.name(),
            "ping",
            "-q",
            "-c",
            "2",
            "-W",
            "1",
            "192.168.7.2",
        ])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!through.success(), "the option's value decides");
    let stats = s2.stats();
    assert!(dropped(&stats, "no_rule") > 0, "{stats}");

    // OVS's refusals, by name.
    let (ok, out) = ofctl(&["-O", "OpenFlow13", "add-tlv-map", &t2, ovn]);
    assert!(!ok && out.contains("NXTTMFC_ALREADY_MAPPED"), "{out}");
    let (ok, out) = ofctl(&[
        "-O",
        "OpenFlow13",
        "add-tlv-map",
        &t2,
        "{class=0x0102,type=0x80,len=4}->tun_metadata1",
    ]);
    assert!(!ok && out.contains("NXTTMFC_DUP_ENTRY"), "{out}");
    let (ok, out) = ofctl(&["del-tlv-map", &t2]);
    assert!(!ok && out.contains("NXTTMFC_INVALID_TLV_DEL"), "{out}");
    // Once no rule uses it, it goes.
    program(&t2, &["in_port=1 actions=output:10"]);
    let (ok, out) = ofctl(&["del-tlv-map", &t2]);
    assert!(ok, "{out}");
    let (ok, out) = ofctl(&["-O", "OpenFlow13", "dump-tlv-map", &t2]);
    assert!(ok && !out.contains("tun_metadata0"), "{out}");
    s1.stop();
    s2.stop();
}

/// `ovs-ofctl monitor` in the background: it prints what the switch
/// sends it on stderr (flushed per message); stopped and reaped on drop.
struct Monitor {
    child: std::process::Child,
    out: std::path::PathBuf,
}

impl Monitor {
    fn start(args: &[&str], out: std::path::PathBuf) -> Monitor {
        let file = std::fs::File::create(&out).unwrap();
        // Its control socket beside its log, not in OVS's run directory
        // (which may not exist here).
        let unixctl = format!("--unixctl={}", out.with_extension("ctl").display());
        let child = Command::new("ovs-ofctl")
            .arg(unixctl)
            .args(args)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("ovs-ofctl");
        Monitor { child, out }
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pings(from: &tunlab_netio::netns::Netns, to: &str, n: &str) -> bool {
    Command::new("ip")
        .args([
            "netns",
            "exec",
            from.name(),
            "ping",
            "-q",
            "-c",
            n,
            "-i",
            "0.3",
            "-W",
            "2",
            to,
        ])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `controller(userdata=...,pause)` as OVN's DHCP rules use it, with
/// ovs-ofctl's monitor as the controller (its `resume` argument answers
/// every paused packet_in with NXT_RESUME, as ovn-controller's pinctrl
/// does): the ping from a to b pauses in table 1 of n1 after a register
/// was set, goes to the monitor as NXT_PACKET_IN2 with the userdata, the
/// register and a continuation, comes back, and carries on to table 2,
/// which sends it on only if the register survived. With no connection
/// taking packet_ins the ping does not get through. OVS's rule for
/// service connections holds: a monitor that set no miss_send_len is sent
/// nothing; one that asked for the standard format in 1.3 gets
/// OFPT_PACKET_IN with the register in its match.
#[test]
fn a_paused_packet_in_goes_to_the_monitor_and_resumes() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "vxlan");
    let (s1, s2) = start_pair(&l, &c1, &c2);
    let t1 = ofctl_target(&s1);
    let (ok, out) = ofctl(&["-O", "OpenFlow15", "del-flows", &t1]);
    assert!(ok, "{out}");
    for r in [
        "priority=10,icmp,in_port=1 actions=set_field:0x5->reg0,resubmit(,1)",
        "priority=1,in_port=1 actions=output:10",
        "in_port=10 actions=output:1",
        "table=1,icmp actions=controller(userdata=01.02.03,pause),resubmit(,2)",
        "table=2,reg0=5 actions=output:10",
    ] {
        let (ok, out) = ofctl(&["-O", "OpenFlow15", "add-flow", &t1, r]);
        assert!(ok, "{r}: {out}");
    }
    assert!(
        !pings(&l.ta, "192.168.7.2", "2"),
        "no controller: the paused ping goes nowhere"
    );
    let silent = Monitor::start(
        &["-O", "OpenFlow15", "monitor", &t1],
        l.dir.join("silent.log"),
    );
    let standard = Monitor::start(
        &[
            "-O",
            "OpenFlow13",
            "-P",
            "standard",
            "monitor",
            &t1,
            "65535",
        ],
        l.dir.join("standard.log"),
    );
    let resumer = Monitor::start(
        &["-O", "OpenFlow15", "monitor", &t1, "65535", "resume"],
        l.dir.join("resume.log"),
    );
    std::thread::sleep(Duration::from_millis(700));
    let through = pings(&l.ta, "192.168.7.2", "3");
    // A port that comes and goes: PORT_STATUS in each one's version.
    let x = "x-n1 ofport=12 type=vxlan local_ip=172.31.0.1 remote_ip=172.31.0.9 key=6";
    let (ok, _, err) = ctl(s1.ctl_path(), &["add-port", x]);
    assert!(ok, "{err}");
    let (ok, _, err) = ctl(s1.ctl_path(), &["del-port", "x-n1"]);
    assert!(ok, "{err}");
    std::thread::sleep(Duration::from_millis(600));
    let (r, st, sl) = (resumer.text(), standard.text(), silent.text());
    for (log, version) in [(&r, "OF1.5"), (&st, "OF1.3")] {
        for what in ["ADD: 12(x-n1)", "DEL: 12(x-n1)"] {
            assert!(
                log.contains(&format!("OFPT_PORT_STATUS ({version}) (xid=0x0): {what}")),
                "{what} in {version}: {log}"
            );
        }
    }
    assert!(
        through,
        "the resumed ping gets through
{r}
{}",
        both_nodes(&l)
    );
    assert!(r.contains("NXT_PACKET_IN2"), "{r}");
    assert!(r.contains("userdata=01.02.03"), "{r}");
    assert!(r.contains("reg0=0x5"), "{r}");
    assert!(r.contains("continuation.actions="), "{r}");
    assert!(r.contains("resubmit(,2)"), "{r}");
    assert!(r.contains("NXT_RESUME"), "ovs-ofctl sent it back: {r}");
    assert!(!r.contains("OFPT_ERROR"), "{r}");
    assert!(
        st.contains("OFPT_PACKET_IN") && st.contains("reg0=0x5"),
        "{st}"
    );
    assert!(
        !sl.contains("PACKET_IN"),
        "no miss_send_len, no packet_in: {sl}"
    );
    assert!(
        !sl.contains("PORT_STATUS"),
        "no miss_send_len, no port status: {sl}"
    );
    drop((silent, standard, resumer));
    // A ct rule is taken (and traced), but the datapaths track no
    // connections yet: what reaches it is dropped, and counted so.
    let (ok, out) = ofctl(&[
        "-O",
        "OpenFlow15",
        "add-flow",
        &t1,
        "priority=20,icmp,in_port=1 actions=ct(commit,table=2,zone=5)",
    ]);
    assert!(ok, "{out}");
    assert!(!pings(&l.ta, "192.168.7.2", "2"));
    let stats = s1.stats();
    assert!(dropped(&stats, "conntrack_not_built") > 0, "{stats}");
    s1.stop();
    s2.stop();
}

/// The same paused translation in tunlab and in Open vSwitch 3.1, given
/// the same rules and the same packet (a PACKET_OUT through the table),
/// with ovs-ofctl's monitor resuming both: the NXT_PACKET_IN2s, the
/// continuations (the frozen actions of every level, the field stack)
/// and the NXT_RESUMEs read the same, and so does the packet_in the
/// resumed translation sends from table 2, with the register set after
/// the pause and the one popped off the stack the pause carried. Only the
/// bridge's UUID and the datapath port differ.
#[test]
fn paused_packet_ins_read_as_open_vswitchs_do() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "vxlan");
    let (s1, s2) = start_pair(&l, &c1, &c2);
    let ours = ofctl_target(&s1);
    let (_ovs, theirs) = ovs_bridge(&l, 0);
    let rules = [
        "cookie=0x31,priority=10,icmp,in_port=1 actions=set_field:0x5->reg0,set_field:0x7->reg3,push:NXM_NX_REG0[],push:NXM_NX_REG3[],resubmit(,1),output:7",
        "cookie=0x32,table=1,icmp actions=controller(userdata=01.02.03,pause),set_field:0x9->reg1,resubmit(,2)",
        "cookie=0x33,table=2 actions=pop:NXM_NX_REG2[],controller(userdata=0a.0b,max_len=20)",
    ];
    let file = l.dir.join("pause-rules.txt");
    std::fs::write(&file, rules.join("\n")).unwrap();
    let file = file.display().to_string();
    // An ICMP echo from 192.168.7.1 to .2.
    let packet = "000000000002000000000001080045000054000040004001b6f6c0a80701c0a8070208004d5b00010001\
                  0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\
                  00000000000000000000000000000000";
    let mut logs = Vec::new();
    for (name, target) in [("ours", &ours), ("theirs", &theirs)] {
        for args in [
            vec!["-O", "OpenFlow15", "del-flows", target.as_str()],
            vec!["-O", "OpenFlow15", "add-flows", target.as_str(), &file],
        ] {
            let (ok, out) = ofctl(&args);
            assert!(ok, "{name} {args:?}: {out}");
        }
        let m = Monitor::start(
            &["-O", "OpenFlow15", "monitor", target, "65535", "resume"],
            l.dir.join(format!("{name}-monitor.log")),
        );
        std::thread::sleep(Duration::from_millis(700));
        let out = format!("in_port=1 packet={packet} actions=table");
        let (ok, text) = ofctl(&["-O", "OpenFlow15", "packet-out", target, &out]);
        assert!(ok, "{name}: {text}");
        std::thread::sleep(Duration::from_millis(700));
        logs.push(m.text());
    }
    let normal = |log: &str| -> Vec<String> {
        log.lines()
            .filter(|l| {
                !l.contains("continuation.bridge=") && !l.contains("continuation.odp_port=")
            })
            .map(str::to_string)
            .collect()
    };
    let (a, b) = (normal(&logs[0]), normal(&logs[1]));
    assert!(
        a.iter()
            .any(|l| l.contains("table_id=2") && l.contains("reg2=0x7")),
        "the stack came back top first: {}",
        logs[0]
    );
    assert_eq!(a, b, "tunlab:\n{}\nOpen vSwitch:\n{}", logs[0], logs[1]);
    s1.stop();
    s2.stop();
}

/// A controller written here, over `tcp:`, sees what OVS's controllers
/// see: FLOW_REMOVED for rules that time out (hard and idle) or are
/// deleted with send_flow_rem, PORT_STATUS when `tunlab ctl` adds and
/// deletes a port, and ECHO requests when it is quiet. A controller that
/// stops answering is dropped after the probe, forwarding never stops,
/// and the switch connects again.
#[test]
fn a_controller_hears_of_expiry_deletion_and_ports_and_a_silent_one_is_dropped() {
    use std::net::{TcpListener, TcpStream};
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    // The controller listens in hv1 before the node starts, and hands
    // over each connection as it comes.
    let (conns, accepted) = std::sync::mpsc::channel::<TcpStream>();
    let (ready, listening) = std::sync::mpsc::channel();
    let _acceptor = in_ns(l.hv1.name(), move || {
        let ls = TcpListener::bind("172.31.0.1:16700").unwrap();
        ready.send(()).unwrap();
        for s in ls.incoming().take(3).flatten() {
            if conns.send(s).is_err() {
                break;
            }
        }
    });
    listening.recv().unwrap();
    let c1 = c1.replacen(
        "[switch]\n",
        "[switch]\nopenflow = [\"tcp:172.31.0.1:16700\"]\n",
        1,
    );
    let (s1, s2) = start_pair(&l, &c1, &c2);
    let mut s = accepted
        .recv_timeout(Duration::from_secs(10))
        .expect("the node connects to its controller");
    // The next message of type `typ`, answering echo requests on the way.
    let next = |s: &mut TcpStream, typ: u8| -> Vec<u8> {
        s.set_read_timeout(Some(Duration::from_secs(6))).unwrap();
        loop {
            let mut m = vec![0u8; 8];
            s.read_exact(&mut m)
                .unwrap_or_else(|e| panic!("waiting for type {typ}: {e}"));
            let len = usize::from(u16::from_be_bytes([m[2], m[3]]));
            m.resize(len, 0);
            s.read_exact(&mut m[8..]).unwrap();
            if m[1] == typ {
                return m;
            }
            if m[1] == of::ECHO_REQUEST {
                let r = of::echo_reply(&Message::new_checked(&m).unwrap());
                s.write_all(&r).unwrap();
            }
        }
    };
    let hello = next(&mut s, of::HELLO);
    assert_eq!(
        of::hello_bitmap(&Message::new_checked(&hello).unwrap()).unwrap(),
        Some(0x52)
    );
    s.write_all(&of::hello(of::OF13, 1 << of::OF13, 1)).unwrap();
    s.write_all(&of::header(of::OF13, 5, 8, 2)).unwrap();
    let f = next(&mut s, 6);
    assert_eq!(
        &f[8..16],
        &tunlab_switch::mgmt::datapath_id("n1").to_be_bytes()
    );

    let port3 = 3u32.to_be_bytes();
    let flow_mod = |command, cookie: u64, idle, hard| {
        of::FlowMod {
            cookie,
            cookie_mask: 0,
            table_id: 0,
            command,
            idle_timeout: idle,
            hard_timeout: hard,
            priority: 5,
            buffer_id: of::NO_BUFFER,
            out_port: of::PORT_ANY,
            out_group: of::GROUP_ANY,
            flags: 1, // send_flow_rem
            matches: vec![of::Oxm {
                class: of::OXM_BASIC,
                field: 0,
                value: &port3,
                mask: None,
            }],
            actions: vec![of::Action::Output {
                port: 4,
                max_len: 0,
            }],
            other_instructions: Vec::new(),
        }
        .emit(7)
    };
    // (cookie, reason) of a FLOW_REMOVED.
    let removed = |m: &[u8]| (u64::from_be_bytes(m[8..16].try_into().unwrap()), m[18]);
    s.write_all(&flow_mod(of::FC_ADD, 0x11, 0, 1)).unwrap();
    assert_eq!(
        removed(&next(&mut s, of::FLOW_REMOVED)),
        (0x11, 1),
        "hard timeout"
    );
    s.write_all(&flow_mod(of::FC_ADD, 0x12, 1, 0)).unwrap();
    assert_eq!(
        removed(&next(&mut s, of::FLOW_REMOVED)),
        (0x12, 0),
        "idle timeout"
    );
    s.write_all(&flow_mod(of::FC_ADD, 0x13, 0, 0)).unwrap();
    s.write_all(&flow_mod(of::FC_DELETE_STRICT, 0, 0, 0))
        .unwrap();
    assert_eq!(
        removed(&next(&mut s, of::FLOW_REMOVED)),
        (0x13, 2),
        "deleted"
    );
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    assert!(!dump.contains("in_port=3"), "{dump}");

    // Ports that come and go.
    let x = "x-n1 ofport=12 type=vxlan local_ip=172.31.0.1 remote_ip=172.31.0.9 key=6";
    let (ok, _, err) = ctl(s1.ctl_path(), &["add-port", x]);
    assert!(ok, "{err}");
    let st = next(&mut s, 12);
    assert_eq!((st[8], &st[16..20]), (0, &12u32.to_be_bytes()[..]), "added");
    assert!(st[32..48].starts_with(b"x-n1\0"), "{:?}", &st[32..48]);
    let (ok, _, err) = ctl(s1.ctl_path(), &["del-port", "x-n1"]);
    assert!(ok, "{err}");
    let st = next(&mut s, 12);
    assert_eq!(
        (st[8], &st[16..20]),
        (1, &12u32.to_be_bytes()[..]),
        "deleted"
    );

    // Silence: the switch asks (ECHO after 5 s), gives up after 5 s more,
    // and connects again; the tenants' traffic never waits for it.
    let t0 = std::time::Instant::now();
    traffic_both_ways(&l, "geneve while the controller is silent");
    let again = accepted
        .recv_timeout(Duration::from_secs(25))
        .expect("the node reconnects after dropping a silent controller");
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_secs(9), "dropped after {waited:?}");
    // The first connection was closed by the switch.
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = [0u8; 4096];
    let mut closed = false;
    for _ in 0..64 {
        match retry_eintr(|| s.read(&mut buf)) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(_) => continue, // its echo requests, unanswered
            Err(_) => break,
        }
    }
    assert!(closed, "the silent connection was closed");

    // A controller that stops reading while a flood of its PACKET_INs
    // comes: the switch's writes stall, it drops the connection after
    // 500 ms (long before the probe would), the workers never wait (what
    // the queue cannot take is dropped and counted), and the tenants'
    // other traffic goes on.
    let mut s = again;
    let hello = next(&mut s, of::HELLO);
    assert_eq!(hello[0], of::OF15);
    s.write_all(&of::hello(of::OF13, 1 << of::OF13, 1)).unwrap();
    let (port1, ip, udp, dport) = (
        1u32.to_be_bytes(),
        [0x08, 0x00],
        [17],
        9999u16.to_be_bytes(),
    );
    let field = |field, value| of::Oxm {
        class: of::OXM_BASIC,
        field,
        value,
        mask: None,
    };
    let to_controller = of::FlowMod {
        cookie: 0x99,
        cookie_mask: 0,
        table_id: 0,
        command: of::FC_ADD,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 40000, // above the node's own rules
        buffer_id: of::NO_BUFFER,
        out_port: of::PORT_ANY,
        out_group: of::GROUP_ANY,
        flags: 0,
        matches: vec![
            field(0, &port1[..]),
            field(5, &ip[..]),
            field(10, &udp[..]),
            field(16, &dport[..]),
        ],
        actions: vec![of::Action::Output {
            port: 0xffff_fffd,
            max_len: 0xffff,
        }],
        other_instructions: Vec::new(),
    };
    s.write_all(&to_controller.emit(9)).unwrap();
    s.write_all(&of::header(of::OF13, 20, 8, 10)).unwrap(); // barrier
    let _ = next(&mut s, 21);
    let t0 = std::time::Instant::now();
    let flood = in_ns(l.ta.name(), || {
        let u = std::net::UdpSocket::bind("192.168.7.1:0").unwrap();
        let payload = [0x5a; 1000];
        for _ in 0..40_000 {
            let _ = u.send_to(&payload, "192.168.7.2:9999");
        }
    });
    let third = accepted.recv_timeout(Duration::from_secs(20));
    let took = t0.elapsed();
    flood.join().unwrap();
    let (_, stats, _) = ctl(s1.ctl_path(), &["stats"]);
    let (_, flows, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    eprintln!("after the flood (reconnected after {took:?}): {stats}\n{flows}");
    assert!(
        third.is_ok(),
        "the switch connects again after dropping the stuck controller"
    );
    let to_controller = flows
        .lines()
        .find(|l| l.contains("actions=CONTROLLER:65535"))
        .and_then(|l| {
            l.split("n_packets=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0);
    assert!(
        to_controller > 1000,
        "the flood met the controller rule:\n{flows}"
    );
    traffic_both_ways(
        &l,
        "geneve after a flood of PACKET_INs to a stuck controller",
    );
    drop(s);
    s1.stop();
    s2.stop();
}

/// PEM files for the TLS test, made by the openssl command line: a CA,
/// the switch's and a controller's certificates it signed, and a rogue
/// CA with a certificate of its own. Returns the directory.
fn tls_files(dir: &std::path::Path) -> std::path::PathBuf {
    let d = dir.join("pki");
    std::fs::create_dir_all(&d).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&d)
            .output()
            .expect("openssl (scripts/install-deps installs it)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(
        d.join("leaf.cnf"),
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .unwrap();
    for ca in ["ca", "rogueca"] {
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            &format!("{ca}-privkey.pem"),
            "-out",
            &format!("{ca}-cert.pem"),
            "-subj",
            &format!("/CN=tunlab test {ca}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
    }
    for (leaf, ca) in [("sc", "ca"), ("ctl", "ca"), ("rogue", "rogueca")] {
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &format!("{leaf}-privkey.pem"),
            "-out",
            &format!("{leaf}.csr"),
            "-subj",
            &format!("/CN={leaf}"),
        ]);
        run(&[
            "x509",
            "-req",
            "-in",
            &format!("{leaf}.csr"),
            "-days",
            "2",
            "-CA",
            &format!("{ca}-cert.pem"),
            "-CAkey",
            &format!("{ca}-privkey.pem"),
            "-CAcreateserial",
            "-out",
            &format!("{leaf}-cert.pem"),
            "-extfile",
            "leaf.cnf",
        ]);
    }
    d
}

/// A TLS controller in `ns` for the `ssl:` side: it accepts one
/// connection with `cert` (asking for the switch's certificate, signed by
/// `ca`), and prints the first message's header in hex, or the error.
fn tls_controller(
    ns: &tunlab_netio::netns::Netns,
    pki: &std::path::Path,
    cert: &str,
    port: u16,
) -> std::process::Child {
    let script = format!(
        r#"
import socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("{d}/{cert}-cert.pem", "{d}/{cert}-privkey.pem")
ctx.load_verify_locations("{d}/ca-cert.pem")
ctx.verify_mode = ssl.CERT_REQUIRED
ls = socket.create_server(("127.0.0.1", {port}))
print("listening", flush=True)
ls.settimeout(10)
c, _ = ls.accept()
c.settimeout(5)
try:
    s = ctx.wrap_socket(c, server_side=True)
    print("hello", s.recv(8).hex(), s.getpeercert()["subject"], flush=True)
except Exception as e:
    print("error", e, flush=True)
"#,
        d = pki.display()
    );
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns.name(), "python3", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it listens, so the switch's first try reaches it.
    let mut line = String::new();
    let out = child.stdout.take().unwrap();
    let mut out = std::io::BufReader::new(out);
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "listening");
    child.stdout = Some(out.into_inner());
    child
}

/// Controllers over TLS, as OVS offers them: `ovs-ofctl` over `ssl:`
/// with a certificate the CA signed programs the node through `pssl:`;
/// one with a rogue CA's certificate, and a client with none, are
/// refused, counted and logged. Over `ssl:` the switch shows its
/// certificate to a controller that asks for it and says HELLO inside
/// TLS, and it refuses a controller whose certificate the CA did not
/// sign.
#[test]
fn controllers_over_tls_need_a_certificate_the_ca_signed() {
    let l = lab();
    let pki = tls_files(&l.dir);
    let good = tls_controller(&l.hv1, &pki, "ctl", 16654);
    let rogue = tls_controller(&l.hv1, &pki, "rogue", 16655);
    let (c1, c2) = pair_configs(&l, "geneve");
    let c1 = c1.replacen(
        "[switch]\n",
        "[switch]\nopenflow = [\"pssl:16653:127.0.0.1\", \"ssl:127.0.0.1:16654\", \"ssl:127.0.0.1:16655\"]\n",
        1,
    ) + &format!(
        "\n[ssl]\nprivate_key = \"{d}/sc-privkey.pem\"\ncertificate = \"{d}/sc-cert.pem\"\nca_cert = \"{d}/ca-cert.pem\"\n",
        d = pki.display()
    );
    let (s1, s2) = start_pair(&l, &c1, &c2);

    let ofctl_as = |who: &str, args: &[&str]| {
        let key = format!("--private-key={}/{who}-privkey.pem", pki.display());
        let cert = format!("--certificate={}/{who}-cert.pem", pki.display());
        let ca = format!("--ca-cert={}/ca-cert.pem", pki.display());
        let mut a = vec!["netns", "exec", l.hv1.name(), "timeout", "10", "ovs-ofctl"];
        a.extend([key.as_str(), cert.as_str(), ca.as_str()]);
        a.extend(args);
        let out = Command::new("ip").args(&a).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    };
    let target = "ssl:127.0.0.1:16653";
    let (ok, out) = ofctl_as("ctl", &["-O", "OpenFlow13", "show", target]);
    assert!(ok && out.contains("FEATURES_REPLY"), "{out}");
    let (ok, out) = ofctl_as(
        "ctl",
        &["add-flow", target, "priority=77,udp,tp_dst=9,actions=drop"],
    );
    assert!(ok, "{out}");
    let (ok, out) = ofctl_as("ctl", &["dump-flows", target]);
    assert!(
        ok && out.contains("priority=77,udp,tp_dst=9 actions=drop"),
        "{out}"
    );
    traffic_both_ways(&l, "with the TLS controllers");
    // The switch refuses the rogue `ssl:` controller (below) once its
    // certificate comes, or after 5 s without a handshake.
    let refused = |st: &tunlab_ctl::Stats| st.openflow_refused.get("tls").copied().unwrap_or(0);
    let end = std::time::Instant::now() + Duration::from_secs(10);
    let mut before = refused(&node_stats(&l.dir, "n1"));
    while before == 0 && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(200));
        before = refused(&node_stats(&l.dir, "n1"));
    }
    if before == 0 {
        let log = s1.stop();
        panic!("the rogue controller was not refused in 10 s: {log}");
    }

    // A certificate another CA signed, then no certificate at all.
    let (ok, out) = ofctl_as("rogue", &["show", target]);
    assert!(!ok, "a rogue certificate was let in: {out}");
    let (ok, out) = ofctl_as("rogue", &["add-flow", target, "actions=drop"]);
    assert!(!ok, "a rogue certificate changed the rules: {out}");
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            l.hv1.name(),
            "timeout",
            "10",
            "openssl",
            "s_client",
        ])
        // -ign_eof: read on after stdin's end, until the switch's alert
        // (TLS 1.3 refuses a client's missing certificate after the
        // client's handshake is done).
        .args(["-ign_eof", "-connect", "127.0.0.1:16653", "-CAfile"])
        .arg(pki.join("ca-cert.pem"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("certificate required"), "{text}");
    let (ok, out) = ofctl_as("ctl", &["dump-flows", target]);
    // Only the good controller's drop rule, beside the pair's own two.
    assert!(ok && out.matches("actions=drop").count() == 1, "{out}");

    // The `ssl:` side: HELLO (version 6, type 0) inside TLS to the good
    // controller; the rogue one is refused by the switch.
    let good = good.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&good.stdout);
    assert!(
        said.contains("hello 0600") && said.contains("'sc'"),
        "{said}"
    );
    let rogue = rogue.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&rogue.stdout);
    assert!(
        said.contains("error") && said.contains("UNKNOWN_CA"),
        "{said}"
    );

    // Two rogue ovs-ofctl runs and the bare client, besides the rogue
    // controller's tries.
    let st = node_stats(&l.dir, "n1");
    assert!(refused(&st) >= before + 3, "{st}");
    assert!(
        st.text().contains("OpenFlow connections refused (tls): "),
        "{st}"
    );
    let log = s1.stop();
    assert!(
        log.contains("event=openflow_refused") && log.contains("reason=tls"),
        "{log}"
    );
    drop(s2.stop());
}
