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
