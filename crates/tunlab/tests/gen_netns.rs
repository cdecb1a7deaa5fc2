//! `tunlab gen` sending for real, as a user runs it (needs root, as CI
//! has): over its own veth wire, with a JSON report; the PVP test through
//! tunlab's switch and a reflecting tenant; and the errors a user sees.
//!
//! ```text
//!  plain:  [gen TX] tlg0 ══ veth ══ tlg1 [gen RX]
//!  PVP:    [gen] tg0 ══ veth ══ under [tunlab switch] ── tap0 [macswap]
//! ```

use std::process::{Command, Output};

fn tunlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tunlab"))
        .args(args)
        .output()
        .expect("run tunlab")
}

/// Run `tunlab ARGS --json FILE`, which must succeed; its stdout and the
/// JSON it wrote (the file is removed).
fn run_json(args: &[&str]) -> (String, serde_json::Value) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "tunlab-gen-test-{}-{}.json",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let mut argv = args.to_vec();
    argv.extend(["--json", path.to_str().unwrap()]);
    let out = tunlab(&argv);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&path).expect("json written");
    let _ = std::fs::remove_file(&path);
    (stdout, serde_json::from_str(&text).expect("json"))
}

/// Namespaces named `PREFIX-PID-N` whose process has exited: what a run
/// left behind (tests running beside this one have theirs alive).
fn namespaces_left(prefix: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| {
            let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else {
                return false;
            };
            let pid = rest.split('-').next().unwrap_or("");
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn a_counted_run_reports_every_frame_in_table_and_json() {
    for io in ["packet", "xdp"] {
        counted_run(io);
    }
}

fn counted_run(io: &str) {
    let (stdout, report) = run_json(&[
        "gen",
        "Ether()/IP(src=10.0.0.1-10.0.0.4)/UDP(dport=[53,54])",
        "--size",
        "64,1518",
        "--count",
        "4000",
        "--rate",
        "20kpps",
        "--io",
        io,
    ]);
    // How the frames left, in the table and the JSON (veth: copy mode).
    let how = if io == "xdp" { "xdp (copy)" } else { "packet" };
    assert!(stdout.contains(&format!("sent through: {how}")), "{stdout}");
    // One row per frame size, the article's columns.
    assert!(
        stdout.contains("Tx L1") && stdout.contains("Rx Mpps") && stdout.contains("Drop %"),
        "{stdout}"
    );
    let rows = report["rows"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 2);
    for (row, size) in rows.iter().zip([64u64, 1518]) {
        let m = &row["measured"];
        assert_eq!(row["frame_size"], size.to_string());
        assert_eq!(m["io"], how);
        assert_eq!(m["tx_packets"], 4000);
        assert_eq!(m["rx_packets"], 4000, "{m}");
        assert_eq!(m["lost"], 0);
        assert_eq!(m["flows"], 8);
        assert_eq!(m["tx_bytes"], 4000 * size);
        assert!(m["per_flow"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f[0] == 500 && f[1] == 500));
    }
}

#[test]
fn pvp_frames_go_through_the_switch_and_come_back() {
    for (io, node, reflector) in [
        ("packet", "userspace", "ring"),
        ("xdp", "userspace", "xdp"),
        ("packet", "ebpf", "ring"),
        ("xdp", "ebpf", "xdp"),
    ] {
        pvp_run(io, node, reflector);
    }
}

/// The full profile's largest frame, 9000 B as TRex counts it: the node
/// delivers its inner frame to the tenant and carries the reflection back.
#[test]
fn pvp_jumbo_frames_go_through_and_come_back() {
    for node in ["ebpf", "userspace"] {
        pvp_sized("packet", node, "ring", "9000");
    }
}

fn pvp_run(io: &str, node: &str, reflector: &str) {
    pvp_sized(io, node, reflector, "256");
}

fn pvp_sized(io: &str, node: &str, reflector: &str, size: &str) {
    let (_, report) = run_json(&[
        "gen",
        "--pvp",
        "--node",
        node,
        "--size",
        size,
        "--count",
        "3000",
        "--rate",
        "5kpps",
        "--io",
        io,
        "--reflector",
        reflector,
        "--threads",
        "2",
    ]);
    assert_eq!(report["pvp_node"], node);
    let m = &report["rows"][0]["measured"];
    assert_eq!(m["tx_packets"], 3000);
    // Decapsulated, reflected by the tenant, encapsulated back: at 5 kfps
    // nothing is lost, and the frames come back with their size.
    assert_eq!(m["rx_packets"], 3000, "{m}");
    assert_eq!(m["rx_bytes"], m["tx_bytes"]);
    assert_eq!(m["duplicates"], 0);
    assert!(
        namespaces_left("tl-bench").is_empty(),
        "{:?}",
        namespaces_left("tl-bench")
    );
}

/// The node in VXLAN, and sockperf's ping-pong through it beside the
/// generator's round trips: both cross the node and come back.
#[test]
fn sockperf_crosses_the_same_pvp_node() {
    let (out, report) = run_json(&[
        "gen",
        "--pvp",
        "--node",
        "ebpf",
        "--tunnel",
        "vxlan",
        "--size",
        "128",
        "--rate",
        "5kpps",
        "--duration",
        "2",
        "--sockperf",
    ]);
    assert_eq!(report["pvp_tunnel"], "vxlan");
    let m = &report["rows"][0]["measured"];
    assert_eq!(m["lost"], 0, "{m}");
    assert!(m["rx_packets"].as_u64().unwrap() > 9000, "{m}");
    let s = &report["sockperf"][0];
    // 128-byte frames: 36 bytes of UDP payload in VXLAN's 92 of headers.
    assert_eq!(s["message_bytes"], 36);
    let t = s["trans_s"].as_f64().unwrap();
    assert!(t > 1000.0, "{s}");
    let (p50, p99) = (
        s["rtt_p50_us"].as_f64().unwrap(),
        s["rtt_p99_us"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p50 <= p99, "{s}");
    assert!(out.contains("tunlab gen beside sockperf"), "{out}");
    assert!(namespaces_left("tl-bench").is_empty());
}

#[test]
fn a_short_zero_loss_search_ends_with_a_validated_rate() {
    let (_, report) = run_json(&[
        "gen",
        "--pvp",
        "--size",
        "512",
        "--ndr",
        "--trial",
        "0.5",
        "--validation",
        "1",
        "--granularity",
        "20",
    ]);
    let row = &report["rows"][0];
    let steps = row["search"]["steps"].as_array().unwrap();
    assert_eq!(steps[0]["phase"], "max");
    let rate = row["search"]["rate_pps"].as_f64().expect("a rate passed");
    assert!(rate > 0.0);
    let last = steps.last().unwrap();
    assert!(last["passed"].as_bool().unwrap());
    // The row is the passing trial, with no loss.
    assert_eq!(row["measured"]["lost"], 0);
}

#[test]
fn bad_input_names_what_is_wrong() {
    let udp = "Ether()/IP()/UDP()";
    let cases: &[(&str, &[&str], &str)] = &[
        (udp, &["--rate", "fast"], "--rate: 'fast'"),
        ("Ether()/IP()/TCP()", &[], "--size 74"),
        (udp, &["--size", "46"], "--size: '46'"),
        (udp, &["--tx", "a@", "--rx", "b"], "--tx: 'a@'"),
        (udp, &["--threads", "0"], "--threads"),
        (udp, &["--io", "dpdk"], "--io: 'dpdk'"),
        (udp, &["--pvp", "--node", "dpdk"], "--node: 'dpdk'"),
        (udp, &["--pvp", "--tunnel", "gre"], "--tunnel: 'gre'"),
        (
            udp,
            &["--pvp", "--reflector", "dpdk"],
            "--reflector: 'dpdk'",
        ),
        (
            udp,
            &["--pvp", "--sockperf", "--rate", "10kpps"],
            "add --tunnel vxlan",
        ),
        (
            udp,
            &["--pvp", "--sockperf", "--tunnel", "vxlan"],
            "--rate max is not a fixed",
        ),
        (udp, &["--pdr", "200"], "--pdr: 200"),
        (udp, &["--duration", "0"], "--duration: 0"),
        (
            udp,
            &["--tx", "x", "--rx", "none", "--ndr"],
            "--ndr and --pdr count",
        ),
    ];
    for (desc, extra, want) in cases {
        let mut args = vec!["gen", desc];
        args.extend_from_slice(extra);
        if !args.contains(&"--size") {
            args.extend(["--size", "64"]);
        }
        let out = tunlab(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert!(
        namespaces_left("tlgen").is_empty(),
        "{:?}",
        namespaces_left("tlgen")
    );
}
