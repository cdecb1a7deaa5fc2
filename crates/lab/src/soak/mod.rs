//! `tunlab soak`: the lab's two hypervisors under mixed traffic for a long
//! time — the generator's UDP flows and iperf3 TCP streams — with a flow
//! rule changed every second, sampling each node's memory, descriptors,
//! BPF maps, cached flows and counters every second. At the end it checks
//! what an operator would: every frame sent was received or counted in a
//! drop reason, no TCP interval went without data, memory and descriptors
//! stayed flat, every flow change was accepted, and the teardown left no
//! map behind. Writes `soak.json`, `soak.html` and the curves as charts.

use crate::tenantgen::TenantGen;
use crate::topology::Topology;
use crate::traffic::INTERRUPTED;
use crate::variant::{self, TENANT};
use crate::LabError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tunlab_ctl::Stats;

pub mod checks;
pub mod data;
pub mod report;

use checks::{checks, drop_counts, parse_gen, parse_intervals};
use data::GEN_PORT;
pub use data::*;

const IPERF_PORT: &str = "5301";

/// Run the soak; `tunlab` is the binary (switch and generator), `out` the
/// folder for the results.
pub fn run(plan: &Plan, tunlab: &Path, out: &Path) -> Result<Soak, LabError> {
    if plan.variant.tunlab_kind().is_none() {
        return Err(LabError::Usage {
            what: "--variant",
            msg: format!(
                "{}: the soak runs tunlab's switch (a tunlab-* variant)",
                plan.variant.name()
            ),
        });
    }
    if let Some(m) = plan.variant.missing() {
        return Err(LabError::Setup(m));
    }
    if !variant::on_path("iperf3") {
        return Err(LabError::Setup("iperf3 is not installed".into()));
    }
    let dir = crate::results::run_dir(out)?;
    let maps_before = system_bpf_maps();
    let mut soak = {
        let topo = Topology::build(0)?;
        let running = crate::running::setup(plan.variant, &topo, tunlab, &dir, None, None)?;
        drive(plan, &topo, &running, tunlab, &dir)?
        // The switches stop and the namespaces go here.
    };
    // The kernel frees a map after its last reference goes, in deferred
    // work: give it a few seconds.
    let mut maps_after = system_bpf_maps();
    let settle = Instant::now();
    while maps_after > maps_before && settle.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(200));
        maps_after = system_bpf_maps();
    }
    if let (Some(b), Some(a)) = (maps_before, maps_after) {
        soak.checks.push(Check {
            what: "teardown left no BPF map".into(),
            held: a <= b,
            detail: format!(
                "{b} maps on the system before, {a} after ({:.1} s after the stop)",
                settle.elapsed().as_secs_f64()
            ),
        });
    }
    Ok(soak)
}

/// Traffic, flow changes and sampling on a running pair of nodes.
fn drive(
    plan: &Plan,
    topo: &Topology,
    running: &crate::running::Running,
    tunlab: &Path,
    dir: &Path,
) -> Result<Soak, LabError> {
    let secs = plan.duration.as_secs_f64();
    let ctls: Vec<PathBuf> = (0..2).map(|i| PathBuf::from(topo.ctl_path(i))).collect();
    // Before any traffic: what the underlay carried while the nodes came
    // up (one node may send before the other listens) is not the soak's.
    let baseline = node_stats(&ctls);
    let server = Daemon::new(topo.t[1].spawn(&["iperf3", "-s", "-1", "-p", IPERF_PORT])?);
    std::thread::sleep(Duration::from_millis(300));
    let t_arg = format!("{}", secs.ceil() as u64);
    let client = Daemon::new(topo.t[0].spawn(&[
        "iperf3",
        "-c",
        TENANT[1],
        "-p",
        IPERF_PORT,
        "-t",
        &t_arg,
        "-i",
        "1",
        "-P",
        &plan.streams.to_string(),
        "-b",
        &format!("{}M", plan.stream_mbps),
        "--json",
    ])?);
    let gen_json = dir.join("soak-gen.json");
    let tg = TenantGen::new(
        topo,
        &running.tenant_if,
        tunlab,
        10000..=10000 + plan.gen_flows - 1,
        GEN_PORT,
    )?;
    let argv = tg.argv(plan.gen_pps, ["--duration", &format!("{secs}")], &gen_json);
    let gen = Daemon::new(topo.t[0].spawn(&argv.iter().map(String::as_str).collect::<Vec<_>>())?);

    let start = Instant::now();
    let churn = churn(plan, running, &ctls);
    let interrupted = churn.interrupted;
    let (gen_out, tcp_out) = if interrupted {
        (None, None)
    } else {
        (
            gen.wait(Duration::from_secs(60)),
            client.wait(Duration::from_secs(60)),
        )
    };
    drop(server);
    // The counters are read once the traffic has ended and the last
    // frames have landed, so that each port's sums can be compared.
    std::thread::sleep(Duration::from_millis(500));
    let final_stats = node_stats(&ctls);
    let gen = match (&gen_out, std::fs::read_to_string(&gen_json)) {
        (Some((true, _, _)), Ok(j)) => parse_gen(&j).map_err(LabError::Setup)?,
        (Some((ok, _, err)), _) => {
            return Err(LabError::Setup(format!(
                "the generator {}: {}",
                if *ok { "wrote no results" } else { "failed" },
                tail(err)
            )))
        }
        (None, _) => GenTotals::default(),
    };
    let tcp = match &tcp_out {
        Some((_, out, _)) => parse_intervals(out).map_err(LabError::Setup)?,
        None => TcpTotals::default(),
    };
    let drops: Vec<BTreeMap<String, u64>> = final_stats.iter().map(drop_counts).collect();
    let mut soak = Soak {
        variant: plan.variant.name().into(),
        duration_s: start.elapsed().as_secs_f64(),
        gen_pps: plan.gen_pps,
        gen_flows: plan.gen_flows,
        streams: plan.streams,
        stream_mbps: plan.stream_mbps,
        change: plan.change.name().into(),
        flow_changes: churn.changes,
        flow_change_errors: churn.errors,
        gen,
        tcp,
        drops,
        baseline_stats: baseline,
        final_stats,
        samples: churn.samples,
        checks: Vec::new(),
        interrupted,
    };
    if !interrupted {
        soak.checks = checks(&soak);
    }
    Ok(soak)
}

/// What the soak's seconds did: a flow change and a sample each.
#[derive(Default)]
struct Churn {
    samples: Vec<Sample>,
    changes: u64,
    errors: Vec<String>,
    interrupted: bool,
}

/// Every second until the soak's end (or an interrupt): change a rule on
/// the first node, sample both nodes, show the progress.
fn churn(plan: &Plan, running: &crate::running::Running, ctls: &[PathBuf]) -> Churn {
    let bar = indicatif::ProgressBar::new(plan.duration.as_secs());
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} s of soak, ETA {eta} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let start = Instant::now();
    let mut c = Churn::default();
    // `mask`: it matches one generator flow by its source port, so while
    // it is in, every UDP flow's cached entry holds its source port (one
    // entry per flow, as a megaflow mask does), and out, they fold into
    // one. `actions`: the rules keep their shape. `above`: every flow of
    // the port is rebuilt under a new mask. `none`: a quiet period.
    let rule = plan.change.rule();
    while start.elapsed() < plan.duration {
        if INTERRUPTED.load(Ordering::SeqCst) {
            c.interrupted = true;
            break;
        }
        let tick = Instant::now();
        // The flow change: a rule added with the same output as the rule
        // under it, then taken away again; each one makes the node
        // revalidate every cached flow.
        if let Some(rule) = &rule {
            let req = if c.changes.is_multiple_of(2) {
                format!("add-flow {rule} actions=output:1")
            } else {
                format!("del-flows --strict {rule}")
            };
            match tunlab_ctl::request(&ctls[0], &req) {
                Ok((true, _)) => {}
                Ok((false, why)) => c.errors.push(format!("{req}: {}", why.trim())),
                Err(e) => c.errors.push(format!("{req}: {e}")),
            }
            c.changes += 1;
        }
        c.samples.push(Sample {
            t_s: start.elapsed().as_secs_f64(),
            nodes: running
                .pids
                .iter()
                .zip(ctls)
                .map(|(pid, ctl)| node_sample(*pid, ctl))
                .collect(),
        });
        bar.set_position(start.elapsed().as_secs().min(plan.duration.as_secs()));
        if let Some(s) = c.samples.last() {
            bar.set_message(format!(
                "RSS {} / {} MiB",
                s.nodes.first().map_or(0, |n| n.rss_kib / 1024),
                s.nodes.get(1).map_or(0, |n| n.rss_kib / 1024)
            ));
        }
        std::thread::sleep(Duration::from_secs(1).saturating_sub(tick.elapsed()));
    }
    bar.finish_and_clear();
    c
}

/// `tunlab ctl stats` of each node (empty for a node that did not answer:
/// its port checks then fail).
fn node_stats(ctls: &[PathBuf]) -> Vec<Stats> {
    ctls.iter()
        .map(|c| tunlab_ctl::stats(c).unwrap_or_default())
        .collect()
}

/// A child whose output is read as it comes (a full pipe would stop it)
/// and which is killed and reaped when dropped.
struct Daemon {
    child: Option<Child>,
    readers: Vec<std::thread::JoinHandle<String>>,
}

impl Daemon {
    fn new(mut child: Child) -> Daemon {
        use std::io::Read;
        let mut readers = Vec::new();
        let out = child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn Read + Send>);
        let err = child
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn Read + Send>);
        for mut r in [out, err].into_iter().flatten() {
            readers.push(std::thread::spawn(move || {
                let mut s = String::new();
                let _ = r.read_to_string(&mut s);
                s
            }));
        }
        Daemon {
            child: Some(child),
            readers,
        }
    }

    /// Wait up to `limit` for it to exit: (exited with success, its
    /// stdout, its stderr). None when it had to be killed.
    fn wait(mut self, limit: Duration) -> Option<(bool, String, String)> {
        let mut c = self.child.take()?;
        let end = Instant::now() + limit;
        let status = loop {
            if let Ok(Some(status)) = c.try_wait() {
                break status;
            }
            if Instant::now() >= end {
                let _ = c.kill();
                let _ = c.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let mut texts = self.readers.drain(..).map(|r| r.join().unwrap_or_default());
        let out = texts.next().unwrap_or_default();
        let err = texts.next().unwrap_or_default();
        Some((status.success(), out, err))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}

/// How many BPF maps the whole system has (`bpftool map show`), if
/// bpftool runs.
fn system_bpf_maps() -> Option<usize> {
    let out = std::process::Command::new("bpftool")
        .args(["map", "show", "-j"])
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v.as_array().map(Vec::len)
}

fn node_sample(pid: u32, ctl: &Path) -> NodeSample {
    let mut n = NodeSample {
        rss_kib: std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0),
        ..NodeSample::default()
    };
    if let Ok(d) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for e in d.flatten() {
            n.fds += 1;
            if std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == "anon_inode:bpf-map") {
                n.bpf_map_fds += 1;
            }
        }
    }
    if let Ok(stats) = tunlab_ctl::stats(ctl) {
        n.counters = stats.flat();
        n.cached_flows = stats.revalidator.map(|r| r.last_seen);
    }
    n
}

/// A duration as `180`, `180s`, `3m` or `1h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, mult) = match s.trim() {
        v if v.ends_with('h') => (&v[..v.len() - 1], 3600.0),
        v if v.ends_with('m') => (&v[..v.len() - 1], 60.0),
        v if v.ends_with('s') => (&v[..v.len() - 1], 1.0),
        v => (v, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n * mult >= 30.0 && n * mult <= 86_400.0 => {
            Ok(Duration::from_secs_f64(n * mult))
        }
        Ok(_) => Err(format!(
            "'{s}' is not between 30 s and 24 h (a shorter run has too few samples to judge drift)"
        )),
        Err(_) => Err(format!("'{s}' is not a duration (180, 180s, 3m, 1h)")),
    }
}

#[cfg(test)]
mod tests {
    use super::checks::{is_underlay, port_checks};
    use super::*;
    use tunlab_ctl::PortRow;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("3m").unwrap(), Duration::from_secs(180));
        assert_eq!(parse_duration("180").unwrap(), Duration::from_secs(180));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("5s").unwrap_err().contains("between 30 s"));
        assert!(parse_duration("soon")
            .unwrap_err()
            .contains("not a duration"));
    }

    /// A node's statistics: ports as (name, kind, rx, tx, rx dropped by
    /// the kernel), the slow path's drops.
    fn node(ports: &[(&str, &str, u64, u64, u64)], drops: &[(&str, u64)]) -> Stats {
        Stats {
            ports: ports
                .iter()
                .enumerate()
                .map(|(i, &(name, kind, rx, tx, rx_dropped))| PortRow {
                    name: name.into(),
                    ofport: i as u32 + 1,
                    kind: kind.into(),
                    rx_packets: rx,
                    tx_packets: tx,
                    rx_dropped,
                    ..PortRow::default()
                })
                .collect(),
            drops: drops.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Stats::default()
        }
    }

    #[test]
    fn drops_by_reason_from_the_slow_path_and_the_kernel() {
        let mut st = node(&[("up", "geneve", 5, 7, 0)], &[("no_route", 3)]);
        st.datapath = vec![
            ("kernel_hit".into(), 1000),
            ("kernel_drop_action".into(), 0),
            ("kernel_too_big".into(), 4),
        ];
        assert_eq!(
            drop_counts(&st).into_iter().collect::<Vec<_>>(),
            vec![("dropped no_route".into(), 3), ("kernel_too_big".into(), 4)]
        );
    }

    #[test]
    fn port_sums() {
        // h1: 100 in from its tenant, 97 into the tunnel, 3 dropped;
        // h2: the 97 from the tunnel to its tenant, 40 back.
        let h1 = node(
            &[("t", "geneve", 40, 97, 0), ("a", "veth", 100, 40, 1)],
            &[("policed", 2)],
        );
        let h2 = node(&[("t", "geneve", 97, 40, 0), ("b", "veth", 40, 97, 0)], &[]);
        assert!(is_underlay(&h1.ports[0]) && !is_underlay(&h1.ports[1]));
        let held = |a: &Stats, b: &Stats| -> Vec<bool> {
            port_checks(&[], &[a.clone(), b.clone()])
                .iter()
                .map(|c| c.held)
                .collect()
        };
        assert_eq!(held(&h1, &h2), [true; 4]);
        // A frame lost uncounted on h2's way to its tenant.
        let lost = node(&[("t", "geneve", 97, 40, 0), ("b", "veth", 40, 96, 0)], &[]);
        assert_eq!(held(&h1, &lost), [true, false, true, true]);
        // The underlay lost one on the way to h2.
        let short = node(&[("t", "geneve", 96, 40, 0), ("b", "veth", 40, 96, 0)], &[]);
        assert_eq!(held(&h1, &short), [true, true, false, true]);
        // One lost on the underlay before the traffic (the far node not
        // yet listening): not the soak's.
        let h1_more = node(
            &[("t", "geneve", 40, 98, 0), ("a", "veth", 101, 40, 1)],
            &[("policed", 2)],
        );
        let base = [node(&[("t", "geneve", 0, 1, 0)], &[]), Stats::default()];
        let early: Vec<bool> = port_checks(&base, &[h1_more.clone(), h2.clone()])
            .iter()
            .map(|c| c.held)
            .collect();
        assert_eq!(early, [true; 4]);
        assert_eq!(held(&h1_more, &h2), [true, true, false, true]);
        // A node that did not answer has no ports: its check fails.
        assert!(!held(&h1, &Stats::default())[1]);
    }

    fn soak_with(rss: impl Fn(f64) -> u64, fds: impl Fn(f64) -> u64) -> Soak {
        Soak {
            variant: "tunlab-ebpf-geneve".into(),
            duration_s: 100.0,
            gen_pps: 1000,
            gen_flows: 10,
            streams: 1,
            stream_mbps: 100,
            change: "mask".into(),
            flow_changes: 100,
            flow_change_errors: vec![],
            gen: GenTotals {
                sent: 100,
                received: 97,
                lost: 3,
                duplicates: 0,
            },
            tcp: TcpTotals {
                intervals: 100,
                ..TcpTotals::default()
            },
            drops: vec![BTreeMap::from([("dropped no_route".to_string(), 3)])],
            baseline_stats: vec![],
            final_stats: vec![],
            samples: (0..100)
                .map(|t| Sample {
                    t_s: t as f64,
                    nodes: vec![NodeSample {
                        rss_kib: rss(t as f64),
                        fds: fds(t as f64),
                        ..NodeSample::default()
                    }],
                })
                .collect(),
            checks: vec![],
            interrupted: false,
        }
    }

    fn held(s: &Soak) -> Vec<(String, bool)> {
        checks(s).into_iter().map(|c| (c.what, c.held)).collect()
    }

    #[test]
    fn flat_curves_pass_and_growth_fails() {
        let flat = soak_with(|t| 20_000 + (t as u64 % 3) * 100, |_| 30);
        assert!(held(&flat).iter().all(|(_, h)| *h), "{:?}", held(&flat));
        let leaking = soak_with(|t| 20_000 + (t as u64) * 100, |t| 30 + t as u64 / 10);
        let h = held(&leaking);
        assert!(
            h.contains(&("h1: resident memory flat".into(), false)),
            "{h:?}"
        );
        assert!(
            h.contains(&("h1: no descriptor or map growth".into(), false)),
            "{h:?}"
        );
    }

    #[test]
    fn loss_must_be_counted() {
        let mut s = soak_with(|_| 1000, |_| 30);
        s.drops = vec![BTreeMap::from([("dropped no_route".to_string(), 2)])];
        let h = held(&s);
        assert!(h.contains(&("every lost frame is counted in a drop reason".into(), false)));
        s.tcp.empty_intervals = vec![7];
        assert!(held(&s).contains(&("iperf3: every 1-s interval carried data".into(), false)));
    }

    #[test]
    fn iperf3_intervals() {
        let j = r#"{"intervals":[{"sum":{"bits_per_second":1e9}},{"sum":{"bits_per_second":0}}],
                    "end":{"sum_sent":{"bits_per_second":5e8,"retransmits":2}}}"#;
        let t = parse_intervals(j).unwrap();
        assert_eq!(t.intervals, 2);
        assert_eq!(t.empty_intervals, vec![1]);
        assert_eq!(t.retransmits, 2);
        assert!(parse_intervals(r#"{"error":"unable to connect"}"#)
            .unwrap_err()
            .contains("unable to connect"));
    }
}
