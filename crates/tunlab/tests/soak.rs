//! The soak's CI version: `tunlab soak` for three minutes on the kernel
//! datapath (the generator, two iperf3 streams, a flow change every
//! second), which exits 0 only when every check held: counters add up,
//! no iperf3 interval empty, memory, descriptors and maps flat, nothing
//! left behind. Its own test binary, so that no other test's maps or
//! namespaces come and go while it counts the system's BPF maps.

use std::process::Command;

#[test]
fn three_minutes_of_mixed_traffic_and_flow_changes() {
    let out = Dir(std::env::temp_dir().join(format!("tunlab-soak-test-{}", std::process::id())));
    let run = Command::new(env!("CARGO_BIN_EXE_tunlab"))
        .args(["soak", "--duration", "3m", "--out"])
        .arg(out.path())
        .output()
        .expect("run tunlab soak");
    let stdout = String::from_utf8_lossy(&run.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "the soak failed: {stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("soak.json")).unwrap())
            .unwrap();
    let checks = json["checks"].as_array().unwrap();
    // Thirteen checks: gen sums, loss counted, the port sums per node and
    // across the underlay both ways, iperf3, flow changes, memory and
    // descriptors per node, the teardown.
    assert_eq!(checks.len(), 13, "{checks:?}");
    assert!(checks.iter().all(|c| c["held"] == true));
    assert!(json["samples"].as_array().unwrap().len() >= 170);
    assert!(json["gen"]["received"].as_u64().unwrap() > 1_000_000);
    for chart in [
        "soak-rss",
        "soak-fds",
        "soak-flows",
        "soak-hit-h1",
        "soak-miss-h1",
    ] {
        let svg = std::fs::read_to_string(out.path().join(format!("charts/{chart}.svg"))).unwrap();
        assert!(svg.contains("<path"), "{chart} has no curve");
    }
}

/// A results folder removed when the test ends, passed or failed.
struct Dir(std::path::PathBuf);

impl Dir {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
