//! `tunlab bench` end to end: every variant is built, measured with a
//! short test and torn down; figures are plausible and agree with an
//! independent count; a failing tool is reported as failed and the run goes
//! on; Ctrl-C leaves no namespace or process behind. Needs root and the
//! traffic tools (scripts/install-deps).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn tunlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tunlab"))
}

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tunlab-bench-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn results(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json written");
    serde_json::from_str(&text).unwrap()
}

/// Bench runs in this file one at a time: the leftover check looks for the
/// lab's traffic tools by their addresses, which every run shares.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Namespaces and processes the bench run `child_pid` (results in `dir`)
/// could leave: its namespaces, switches started with configurations in
/// its folder, traffic tools on the lab's tenant addresses.
fn leftovers(child_pid: u32, dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(&format!("tl-bench-{child_pid}-")))
        .map(str::to_string)
        .collect();
    let ps = Command::new("ps")
        .args(["-eo", "pid,args"])
        .output()
        .unwrap();
    for l in String::from_utf8_lossy(&ps.stdout).lines() {
        let tool = (l.contains("iperf3") || l.contains("sockperf")) && l.contains("192.168.30.");
        if tool || l.contains(&dir.display().to_string()) {
            v.push(l.to_string());
        }
    }
    v
}

fn run(args: &[&str], dir: &Path) -> (Output, u32) {
    let child = tunlab()
        .arg("bench")
        .args(args)
        .arg("--out")
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    (child.wait_with_output().unwrap(), pid)
}

#[test]
fn every_variant_is_built_measured_and_torn_down() {
    let _one = serial();
    let dir = out_dir("all");
    let all = "none,kernel-vxlan,kernel-vxlan-sw,tunlab-geneve,tunlab-geneve-ovn,tunlab-vxlan,tunlab-gre,tunlab-nvgre,tunlab-stt,tunlab-qinq,\
               tunlab-ebpf-geneve,tunlab-ebpf-geneve-ovn,tunlab-ebpf-vxlan,tunlab-ebpf-gre,tunlab-ebpf-nvgre,tunlab-ebpf-qinq,\
               ovs-bridge,ovs-vxlan,ovs-geneve,ovs-geneve-ovn,ovs-gre,ovs-qinq";
    let (o, pid) = run(
        &[
            "--variants",
            all,
            "--tests",
            "tcp_stream-16384B-1i",
            "--samples",
            "1",
            "--seconds",
            "1",
        ],
        &dir,
    );
    let text = succeeded(&o, "every variant");
    assert!(
        text.contains("192.168.30.1 ─") && text.contains("tcp_stream-16384B-1i"),
        "{text}"
    );
    let r = results(&dir);
    let variants = r["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 22, "{text}");
    for v in variants {
        let name = v["variant"].as_str().unwrap();
        assert_eq!(v["status"], "ok", "{name}: {}", v["reason"]);
        let t = &v["tests"][0];
        assert!(t["error"].is_null(), "{name}: {}", t["error"]);
        let s = &t["samples"][0];
        let tool = s["gbit_s"].as_f64().unwrap();
        let iface = s["iface_rx_gbit_s"].as_f64().unwrap();
        // Plausible: something moved, and no more than a veth can carry here.
        assert!(tool > 0.01 && tool < 200.0, "{name}: {tool} Gbit/s");
        // Consistent: the tenant interface counted what iperf3 reported,
        // plus headers and minus start-up time (within a factor of 2).
        assert!(
            iface > tool * 0.5 && iface < tool * 2.0,
            "{name}: iperf3 {tool} vs interface {iface} Gbit/s"
        );
        assert!(s["cpu"]["system_pct"].as_f64().unwrap() > 0.0, "{name}");
        // ethtool -k of every interface of the four namespaces.
        let ifs: Vec<&str> = v["offloads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x[0].as_str().unwrap())
            .collect();
        for want in ["h1:under", "h2:under"] {
            assert!(ifs.contains(&want), "{name}: {ifs:?}");
        }
        for ns in ["t1:", "t2:"] {
            assert!(ifs.iter().any(|i| i.starts_with(ns)), "{name}: {ifs:?}");
        }
        if name.starts_with("kernel-vxlan") {
            assert!(ifs.len() > 4, "{name}: the VXLAN devices too: {ifs:?}");
        }
        // The software path's underlay segments tunnelled frames itself.
        let under = v["offloads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x[0] == "h1:under")
            .map(|x| x[1].as_str().unwrap().split(',').collect::<Vec<_>>())
            .unwrap();
        assert_eq!(
            under.contains(&"tx-udp_tnl-segmentation"),
            name != "kernel-vxlan-sw",
            "{name}: {under:?}"
        );
        if name.starts_with("tunlab-ebpf-") {
            // The kernel carries these: its work shows in the machine's
            // CPU, the switch (the slow path) may well be idle.
            assert!(
                s["cpu"]["datapath_pct"].as_f64().unwrap() >= 0.0,
                "{name}: the switch's own CPU"
            );
        } else if name.starts_with("tunlab-") || name.starts_with("ovs-") {
            assert!(
                s["cpu"]["datapath_pct"].as_f64().unwrap() > 0.0,
                "{name}: the switch's own CPU"
            );
        }
    }
    assert_eq!(r["environment"]["underlay_mtu"], 1500);
    assert!(
        leftovers(pid, &dir).is_empty(),
        "{:?}",
        leftovers(pid, &dir)
    );
    check_report_and_compare(&dir, &text);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The run wrote an HTML report with a chart per test and figure, and PNGs;
/// `tunlab report` makes the same again from results.json alone; `tunlab
/// compare` finds nothing changed between a run and itself, and flags a
/// doubled figure.
fn check_report_and_compare(dir: &Path, bench_stdout: &str) {
    let html = std::fs::read_to_string(dir.join("report.html")).expect("report.html");
    // One test: its throughput chart and its CPU chart, 22 variants each.
    assert_eq!(html.matches("<svg").count(), 2, "{html}");
    assert!(html.contains("tcp_stream-16384B-1i: throughput"));
    for v in ["none", "kernel-vxlan", "tunlab-stt", "ovs-qinq"] {
        assert!(
            html.contains(&format!(">{v}<")),
            "{v} missing from the report"
        );
    }
    let png = std::fs::read(dir.join("charts/tcp_stream-16384B-1i-primary.png")).expect("PNG");
    assert_eq!(&png[..4], b"\x89PNG");
    assert!(dir.join("charts/tcp_stream-16384B-1i-cpu.svg").exists());
    let again = dir.join("again");
    let o = tunlab()
        .args(["report", "--baseline", "none", "--out"])
        .arg(&again)
        .arg(dir.join("results.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("percent difference against none"), "{table}");
    // The bench's own table (against kernel-vxlan) had the same first row.
    let first = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("tcp_stream"))
            .map(str::to_string)
    };
    assert_eq!(first(&table), first(bench_stdout));
    assert_eq!(
        std::fs::read_to_string(again.join("report.html"))
            .unwrap()
            .matches("<svg")
            .count(),
        2
    );
    let bad = tunlab()
        .args(["report", "--baseline", "nonesuch"])
        .arg(dir.join("results.json"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("'nonesuch' is not in this run"));

    let a = dir.join("results.json");
    let o = tunlab().arg("compare").arg(&a).arg(&a).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && text.contains("0 of 22 changed"),
        "{text}"
    );
    // tunlab-vxlan's figure as if from 3 samples with a 1 % spread, and
    // the same doubled: a change far beyond the noise.
    let edit = |factor: f64, name: &str| {
        let mut r = results(dir);
        for v in r["variants"].as_array_mut().unwrap() {
            if v["variant"] == "tunlab-vxlan" {
                let s = &mut v["tests"][0]["summary"];
                let mean = s["mean"].as_f64().unwrap();
                s["mean"] = (factor * mean).into();
                s["n"] = 3.into();
                s["stddev"] = (0.01 * mean).into();
            }
        }
        let p = dir.join(name);
        std::fs::write(&p, serde_json::to_string(&r).unwrap()).unwrap();
        p
    };
    let (one, two) = (edit(1.0, "one.json"), edit(2.0, "two.json"));
    let o = tunlab()
        .arg("compare")
        .arg(&one)
        .arg(&two)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with("tunlab-vxlan"))
        .unwrap_or("");
    assert!(row.contains("+100.0%") && row.contains("CHANGED"), "{text}");
    assert!(text.contains("1 of 22 changed"), "{text}");
    // Against the real run (one sample each): no spread to judge by.
    let o = tunlab().arg("compare").arg(&a).arg(&two).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with("tunlab-vxlan"))
        .unwrap_or("");
    assert!(row.contains("too few samples"), "{text}");
    let o = tunlab()
        .arg("compare")
        .arg(&a)
        .arg(dir.join("missing.json"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.json"));
}

#[test]
fn a_failing_tool_is_reported_and_the_run_goes_on() {
    let _one = serial();
    let dir = out_dir("failing");
    // An iperf3 that always fails, first on PATH.
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("iperf3");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'iperf3: planted failure' >&2\nexit 3\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = tunlab()
        .env("PATH", path)
        .args([
            "bench",
            "--variants",
            "none",
            "--tests",
            "tcp_stream-64B-1i,tcp_rr-64B-1i",
            "--samples",
            "1",
            "--seconds",
            "1",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&child.stdout);
    assert!(child.status.success(), "{text}");
    assert!(text.contains("FAILED"), "{text}");
    let r = results(&dir);
    let tests = r["variants"][0]["tests"].as_array().unwrap();
    assert!(
        tests[0]["error"]
            .as_str()
            .unwrap()
            .contains("planted failure")
            || tests[0]["error"]
                .as_str()
                .unwrap()
                .contains("servers listening"),
        "{}",
        tests[0]["error"]
    );
    assert!(
        tests[1]["error"].is_null(),
        "the next test still ran: {}",
        tests[1]["error"]
    );
    assert!(tests[1]["samples"][0]["trans_s"].as_f64().unwrap() > 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The stdout of a bench that exited with success (else its output).
fn succeeded(o: &Output, what: &str) -> String {
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{what}: {text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

/// Run one short `first_packet-64B-1i` sample of `variants` into `dir`
/// and check it went through and left nothing behind; its results.json.
fn first_packet_run(variants: &str, dir: &Path, what: &str) -> serde_json::Value {
    let args = [
        "--variants",
        variants,
        "--tests",
        "first_packet-64B-1i",
        "--samples",
        "1",
        "--seconds",
        "1",
    ];
    let (o, pid) = run(&args, dir);
    let text = succeeded(&o, what);
    assert!(
        leftovers(pid, dir).is_empty(),
        "{what}: {:?}",
        leftovers(pid, dir)
    );
    assert!(text.contains("a new flow's first packet"), "{what}: {text}");
    results(dir)
}

/// A new flow's first packet: on the eBPF datapath the caches are emptied
/// before each probe, so the first packet takes the slow path on both
/// nodes and arrives later than the next one (which the kernel forwards);
/// without the flush the two would be alike.
#[test]
fn first_packet_probes_miss_the_emptied_cache() {
    let _one = serial();
    let dir = out_dir("first-packet");
    let r = first_packet_run("none,tunlab-ebpf-geneve", &dir, "first packet");
    for v in r["variants"].as_array().unwrap() {
        let name = v["variant"].as_str().unwrap();
        assert_eq!(v["status"], "ok", "{name}: {}", v["reason"]);
        let t = &v["tests"][0];
        assert!(t["error"].is_null(), "{name}: {}", t["error"]);
        let fp = &t["samples"][0]["first_packet"];
        let probes = fp["probes"].as_u64().unwrap();
        let (first, next) = (
            fp["first_p50_us"].as_f64().unwrap(),
            fp["next_p50_us"].as_f64().unwrap(),
        );
        assert!(probes >= 20, "{name}: {probes} probes");
        assert!(first > 0.0 && next > 0.0, "{name}: {fp}");
        if name == "tunlab-ebpf-geneve" {
            // Two upcalls against none: tens of microseconds at least.
            assert!(
                first > next * 2.0,
                "{name}: first {first} µs, next {next} µs"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Open vSwitch's first packets (its caches emptied with dpctl/del-flows),
/// twice into the same folder: the second run sets OVS up again over the
/// first one's files.
#[test]
fn ovs_runs_again_into_the_same_folder() {
    let _one = serial();
    let dir = out_dir("ovs-again");
    for round in 1..=2 {
        let r = first_packet_run("ovs-bridge", &dir, &format!("round {round}"));
        let v = &r["variants"][0];
        assert_eq!(v["status"], "ok", "round {round}: {}", v["reason"]);
        let t = &v["tests"][0];
        assert!(t["error"].is_null(), "round {round}: {}", t["error"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_arguments_name_the_valid_ones() {
    let o = tunlab()
        .args(["bench", "--variants", "tunlab-vxlann"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        e.contains("'tunlab-vxlann' is not a variant; valid: none, kernel-vxlan"),
        "{e}"
    );
    let o = tunlab()
        .args(["bench", "--tests", "tcp_rr-64B"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("KIND-SIZEB-Ni"));
    let o = tunlab()
        .args(["bench", "--profile", "huge"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("valid: quick, full"));
    // tunlab rr, as a user would run it: each wrong argument named.
    for (args, code, says) in [
        (
            &["--time", "-1"][..],
            2,
            "--time -1: must be a positive number",
        ),
        (&["--proto", "udp", "--size", "4"][..], 1, "message size 4"),
        (&["--proto", "sctp"][..], 2, "'sctp'"),
    ] {
        let o = tunlab()
            .args(["rr", "client", "127.0.0.1", "--port", "9"])
            .args(args)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {e}");
        assert!(e.contains(says), "{args:?}: {e}");
    }
}

#[test]
fn interrupt_leaves_nothing_behind() {
    let _one = serial();
    let dir = out_dir("sigint");
    let child = tunlab()
        .args([
            "bench",
            "--variants",
            "tunlab-geneve,none",
            "--tests",
            "tcp_stream-16384B-1i",
            "--samples",
            "3",
            "--seconds",
            "5",
            "--out",
        ])
        .arg(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until the switch runs and traffic flows, then Ctrl-C.
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end
        && !Command::new("pgrep")
            .args(["-f", "iperf3 -c 192.168.30.2"])
            .status()
            .unwrap()
            .success()
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("interrupted"));
    assert!(results(&dir)["interrupted"].as_bool().unwrap());
    assert!(
        leftovers(pid, &dir).is_empty(),
        "{:?}",
        leftovers(pid, &dir)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The flow set-up rate search on the kernel datapath: trials at rising
/// and falling rates of new flows, the rate found passed (twice: search
/// and validation), every faster trial tried lost frames, and nothing is
/// left behind.
#[test]
fn setup_rate_search_finds_a_lossless_rate() {
    let _one = serial();
    let dir = out_dir("setup-rate");
    let (o, pid) = run(&["--setup-rate", "--variants", "tunlab-ebpf-geneve"], &dir);
    let text = succeeded(&o, "setup rate");
    assert!(
        leftovers(pid, &dir).is_empty(),
        "{:?}",
        leftovers(pid, &dir)
    );
    assert!(text.contains("new flows/s"), "{text}");
    let found: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("setup-rate.json")).unwrap())
            .unwrap();
    let f = &found[0];
    assert!(f["error"].is_null(), "{f}");
    let ndr = f["ndr"].as_u64().unwrap();
    assert!(ndr >= 5_000, "{f}");
    let trials = f["trials"].as_array().unwrap();
    let at = |r: u64| trials.iter().filter(move |t| t["rate"].as_u64() == Some(r));
    if !f["at_ceiling"].as_bool().unwrap() {
        assert!(
            at(ndr).count() >= 2,
            "the rate found was not validated: {f}"
        );
    }
    assert!(
        at(ndr).all(|t| t["lost"] == 0 && t["sent"] == 20_000),
        "{f}"
    );
    // The search stops only once a faster rate has failed (or the ceiling passed).
    assert!(
        f["at_ceiling"].as_bool().unwrap()
            || trials
                .iter()
                .any(|t| t["rate"].as_u64().unwrap() > ndr && t["lost"].as_u64().unwrap() > 0),
        "{f}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The paired lab end to end: every round measures every (variant, test)
/// once, in an order that differs between rounds; each ratio in the
/// results is the geometric mean of the per-round ratios of the samples
/// themselves; the tables, the forest plots and the noise guard's table
/// show them; nothing is left behind.
#[test]
fn rounds_are_shuffled_paired_and_reported() {
    let _one = serial();
    let dir = out_dir("rounds");
    let (o, pid) = run(
        &[
            "--variants",
            "none,kernel-vxlan,tunlab-ebpf-vxlan",
            "--tests",
            "tcp_stream-65536B-1i,udp_stream-1024B-1i",
            "--rounds",
            "4",
            "--seconds",
            "1",
            "--seed",
            "29",
        ],
        &dir,
    );
    let text = succeeded(&o, "rounds");
    let r = results(&dir);
    assert_eq!(r["plan"]["seed"], 29);
    assert_eq!(r["plan"]["baseline"], "kernel-vxlan");
    // (round, seq, variant, test) of every kept sample.
    let mut taken = Vec::new();
    for v in r["variants"].as_array().unwrap() {
        assert_eq!(v["status"], "ok", "{}", v["reason"]);
        for t in v["tests"].as_array().unwrap() {
            assert!(t["error"].is_null(), "{}", t["error"]);
            let samples = t["samples"].as_array().unwrap();
            let rounds: Vec<u64> = samples
                .iter()
                .map(|s| s["round"].as_u64().unwrap())
                .collect();
            assert_eq!(rounds, vec![0, 1, 2, 3], "{} {}", v["variant"], t["test"]);
            for s in samples {
                assert!(s["noise"]["per_cpu_busy_pct"].as_array().is_some(), "{s}");
                taken.push((
                    s["round"].as_u64().unwrap(),
                    s["seq"].as_u64().unwrap(),
                    v["variant"].as_str().unwrap().to_string(),
                    t["test"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    // Rounds follow each other: every sample of round k before round k+1.
    taken.sort_by_key(|x| x.1);
    let rounds: Vec<u64> = taken.iter().map(|x| x.0).collect();
    assert!(rounds.windows(2).all(|w| w[0] <= w[1]), "{rounds:?}");
    // And the order within rounds is shuffled: not the same every round.
    let order = |k: u64| -> Vec<(String, String)> {
        taken
            .iter()
            .filter(|x| x.0 == k)
            .map(|x| (x.2.clone(), x.3.clone()))
            .collect()
    };
    assert!(
        (1..4).any(|k| order(k) != order(0)),
        "every round in the same order: {:?}",
        order(0)
    );
    // The ratio is the geometric mean of the per-round ratios.
    let cell = |variant: &str, test: &str| -> serde_json::Value {
        let v = r["variants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["variant"] == variant)
            .unwrap();
        v["tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["test"] == test)
            .unwrap()
            .clone()
    };
    let primary = |variant: &str, test: &str, field: &str| -> Vec<f64> {
        let t = cell(variant, test);
        let mut s: Vec<&serde_json::Value> = t["samples"].as_array().unwrap().iter().collect();
        s.sort_by_key(|s| s["round"].as_u64());
        s.iter().map(|s| s[field].as_f64().unwrap()).collect()
    };
    for (test, field) in [
        ("tcp_stream-65536B-1i", "gbit_s"),
        ("udp_stream-1024B-1i", "rx_pps"),
    ] {
        let (b, x) = (
            primary("kernel-vxlan", test, field),
            primary("tunlab-ebpf-vxlan", test, field),
        );
        let logs: Vec<f64> = x.iter().zip(&b).map(|(x, b)| (x / b).ln()).collect();
        let want = (logs.iter().sum::<f64>() / 4.0).exp();
        let t = cell("tunlab-ebpf-vxlan", test);
        let got = t["ratio"]["ratio"].as_f64().unwrap();
        assert!((got / want - 1.0).abs() < 1e-9, "{test}: {got} vs {want}");
        assert_eq!(t["ratio"]["rounds"], 4);
        assert!(
            t["ratio"]["lo"].as_f64().unwrap() <= got && got <= t["ratio"]["hi"].as_f64().unwrap()
        );
    }
    // The tables say it with verdict words; the report draws it.
    assert!(
        text.contains("ratio to kernel-vxlan, paired by round"),
        "{text}"
    );
    assert!(text.contains("noise guard"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("tcp_stream-65536B-1i") && l.contains('['))
        .unwrap_or("");
    assert!(
        ["faster", "slower", "same"].iter().any(|w| row.contains(w)),
        "{row}"
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Ratios to the baseline"), "{html}");
    assert!(dir.join("charts/tcp_stream-65536B-1i-ratio.png").exists());
    assert!(dir
        .join("charts/tcp_stream-65536B-1i-demand-ratio.svg")
        .exists());
    // `tunlab report` can pair against another variant of the run.
    let o = tunlab()
        .args(["report", "--baseline", "none", "--out"])
        .arg(dir.join("again"))
        .arg(dir.join("results.json"))
        .output()
        .unwrap();
    let again = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && again.contains("ratio to none, paired by round"),
        "{again}"
    );
    assert!(
        leftovers(pid, &dir).is_empty(),
        "{:?}",
        leftovers(pid, &dir)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tunlab bench --article stt-gre --quick` as the README shows it (with
/// three rounds to keep CI short): the article's four variants and two
/// tests, every finding judged, the pages written.
#[test]
fn an_article_is_run_and_its_findings_judged() {
    let _one = serial();
    let dir = out_dir("article");
    let (o, pid) = run(&["--article", "stt-gre", "--quick", "--rounds", "3"], &dir);
    let text = succeeded(&o, "--article stt-gre");
    let art = dir.join("stt-gre");
    let r = results(&art);
    let variants: Vec<&str> = r["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["variant"].as_str().unwrap())
        .collect();
    assert_eq!(
        variants,
        ["none", "tunlab-stt", "tunlab-gre", "tunlab-ebpf-gre"]
    );
    for v in r["variants"].as_array().unwrap() {
        assert_eq!(v["status"], "ok", "{v}");
        for t in v["tests"].as_array().unwrap() {
            assert_eq!(t["samples"].as_array().unwrap().len(), 3, "{t}");
        }
    }
    let f: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(art.join("findings.json")).unwrap()).unwrap();
    let checked = f["checked"].as_array().unwrap();
    let ids: std::collections::BTreeSet<&str> = checked
        .iter()
        .map(|c| c["finding"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids.into_iter().collect::<Vec<_>>(),
        ["sg1", "sg2", "sg3", "sg4", "sg5"]
    );
    // Open vSwitch's pairs belong to the full profile; every other check
    // measured: a ratio with its interval and a verdict.
    let (full_only, checked): (Vec<_>, Vec<_>) = checked.iter().partition(|c| {
        c["outcome"] == "not_run"
            && c["here"]
                .as_str()
                .unwrap()
                .ends_with("is not in this profile's plan")
    });
    assert_eq!(full_only.len(), 2, "{full_only:?}");
    for c in checked {
        let outcome = c["outcome"].as_str().unwrap();
        assert!(["holds", "does_not_hold"].contains(&outcome), "{c}");
        // "Does not hold" is either ruled out (clear of the line) or not
        // shown, and the row says which.
        let not_shown = c["here"].as_str().unwrap().contains("not shown");
        assert_eq!(c["clear"].as_bool().unwrap(), !not_shown, "{c}");
        if not_shown {
            assert_eq!(outcome, "does_not_hold", "{c}");
        }
        let x = &c["ratio"];
        assert!(
            x["lo"].as_f64().unwrap() <= x["ratio"].as_f64().unwrap(),
            "{c}"
        );
        assert!(
            x["ratio"].as_f64().unwrap() <= x["hi"].as_f64().unwrap(),
            "{c}"
        );
        assert_eq!(x["rounds"].as_u64().unwrap() % 3, 0, "{c}");
        assert!(text.contains(c["here"].as_str().unwrap()), "{c}\n{text}");
    }
    assert!(
        text.contains("stt-gre: \"The Overhead of Software Tunneling\""),
        "{text}"
    );
    assert!(text.contains("every article:"), "{text}");
    let page = std::fs::read_to_string(art.join("article.html")).unwrap();
    assert!(
        page.contains("Broadcom") && page.contains("<svg"),
        "article.html"
    );
    // The charts the article drew, on its axes, as PNG files too.
    assert!(page.contains("Throughput: one flow, and four pairs both ways"));
    let png = art.join("article-charts/1-throughput-one-flow-and-four-pairs-both-ways.png");
    let bytes = std::fs::read(&png).unwrap_or_default();
    assert!(bytes.starts_with(b"\x89PNG"), "{}", png.display());
    assert!(png.with_extension("svg").is_file(), "{}", png.display());
    assert!(std::fs::read_to_string(dir.join("findings.md"))
        .unwrap()
        .contains("| sg1 |"));
    assert!(dir.join("articles.html").is_file());
    assert!(
        leftovers(pid, &dir).is_empty(),
        "{:?}",
        leftovers(pid, &dir)
    );
    // A name that is not an article is refused before anything runs.
    let (o, _) = run(&["--article", "stt"], &out_dir("article-bad"));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("'stt' is not an article; valid: geneve-vs-vxlan"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
