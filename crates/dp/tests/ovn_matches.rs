//! OVN's pipeline as Open vSwitch 3.1 printed it (`ovs-ofctl -O OpenFlow15
//! dump-flows br-int` on the two chassis of `shared/ovn`'s deployment,
//! 673 and 668 flows): every match parses, and prints back exactly as OVS
//! printed it, field order and number forms included.

use tunlab_dp::{format_flow, parse_flow, NumericPorts};

/// The match of one dump line: what follows the counters, before
/// ` actions=`.
fn match_of(line: &str) -> Option<&str> {
    let (head, _) = line.split_once(" actions=")?;
    let at = head.find("n_bytes=")?;
    let rest = &head[at..];
    let rest = &rest[rest.find(", ")? + 2..];
    // idle_age and hard_age come after the counters.
    Some(
        rest.split(", ")
            .find(|f| !f.starts_with("idle_age=") && !f.starts_with("hard_age="))
            .unwrap_or(""),
    )
}

fn check(dump: &str) -> usize {
    let mut n = 0;
    for line in dump.lines().filter(|l| l.starts_with(' ')) {
        let m = match_of(line).unwrap_or_else(|| panic!("no match in {line}"));
        let text = format!("{m} actions=drop");
        let rule = parse_flow(&text, &NumericPorts).unwrap_or_else(|e| panic!("{e}"));
        let printed = format_flow(&rule, &NumericPorts);
        assert_eq!(printed, text, "OVS printed: {m}");
        n += 1;
    }
    n
}

#[test]
fn every_match_of_ovns_pipeline_reads_and_prints_as_ovs_printed_it() {
    assert_eq!(check(include_str!("data/flows-ch1.txt")), 673);
    assert_eq!(check(include_str!("data/flows-ch2.txt")), 668);
}

/// Whole rules, actions too: every rule of OVN's pipeline whose actions
/// tunlab has parses and prints back exactly as OVS printed it; the rest
/// (learn, group) are refused by name. Returns (read, refused).
fn check_whole(dump: &str) -> (usize, usize) {
    let (mut read, mut refused) = (0, 0);
    for line in dump.lines().filter(|l| l.starts_with(' ')) {
        let m = match_of(line).unwrap_or_else(|| panic!("no match in {line}"));
        let (_, acts) = line.split_once(" actions=").unwrap();
        let text = format!("{m} actions={acts}");
        match parse_flow(&text, &NumericPorts) {
            Ok(rule) => {
                assert_eq!(format_flow(&rule, &NumericPorts), text, "OVS printed it so");
                read += 1;
            }
            Err(e) => {
                let named = ["learn", "group"].iter().any(|a| e.msg.contains(a));
                assert!(named, "refused without naming what is not built: {e}");
                assert!(
                    acts.contains("learn(") || acts.contains("group:"),
                    "refused a rule of built actions: {e}"
                );
                refused += 1;
            }
        }
    }
    (read, refused)
}

#[test]
fn ovns_rules_read_whole_but_for_learn_and_group() {
    assert_eq!(check_whole(include_str!("data/flows-ch1.txt")), (670, 3));
    assert_eq!(check_whole(include_str!("data/flows-ch2.txt")), (665, 3));
}
