//! `tunlab soak`: the lab's two hypervisors under mixed traffic for a long
//! time — the generator's UDP flows and iperf3 TCP streams — with a flow
//! rule changed every second, sampling each node's memory, descriptors,
//! BPF maps, cached flows and counters every second. At the end it checks
//! what an operator would: every frame sent was received or counted in a
//! drop reason, no TCP interval went without data, memory and descriptors
//! stayed flat, every flow change was accepted, and the teardown left no
//! map behind. Writes `soak.json`, `soak.html` and the curves as charts.

use crate::chart::{self, LineChart};
use crate::tenantgen::TenantGen;
use crate::traffic::INTERRUPTED;
use crate::variant::{self, Topology, Variant, TENANT};
use crate::LabError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tunlab_ctl::{PortRow, Stats};

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub variant: Variant,
    pub duration: Duration,
    /// The generator's rate, frames/s, and how many flows it spreads over.
    pub gen_pps: u64,
    pub gen_flows: u32,
    /// iperf3 streams, each limited to this many Mbit/s (so that the
    /// generator's frames are not lost to a full CPU the switch does not
    /// count).
    pub streams: u32,
    pub stream_mbps: u32,
    pub change: FlowChange,
}

/// The flow change made every second, on h1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowChange {
    /// A rule matching one generator flow by its UDP ports, added and
    /// taken away: the megaflow mask widens and narrows each time, so
    /// every cached flow is a miss after each change.
    Mask,
    /// A rule of the shape the rules already have (in_port), with the
    /// same output as the rule under it: revalidated flow by flow, every
    /// cached flow kept.
    Actions,
}

impl FlowChange {
    pub fn parse(s: &str) -> Result<FlowChange, String> {
        match s {
            "mask" => Ok(FlowChange::Mask),
            "actions" => Ok(FlowChange::Actions),
            _ => Err(format!("'{s}' is not a flow change (mask, actions)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FlowChange::Mask => "mask",
            FlowChange::Actions => "actions",
        }
    }

    /// The rule it adds and deletes (without actions).
    fn rule(self) -> String {
        match self {
            FlowChange::Mask => {
                format!("priority=200,in_port=2,udp,tp_src=10000,tp_dst={GEN_PORT}")
            }
            FlowChange::Actions => "priority=200,in_port=2".into(),
        }
    }
}

/// One node at one moment.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NodeSample {
    pub rss_kib: u64,
    pub fds: u64,
    pub bpf_map_fds: u64,
    /// Flows in the kernel cache at the revalidator's last sweep.
    pub cached_flows: Option<u64>,
    /// Every counter of `tunlab ctl stats` that is one number.
    pub counters: BTreeMap<String, u64>,
}

/// Both nodes at one moment.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub t_s: f64,
    pub nodes: Vec<NodeSample>,
}

/// One check at the end: what, whether it held, the figures behind it.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub what: String,
    pub held: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct GenTotals {
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub duplicates: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TcpTotals {
    pub intervals: usize,
    pub empty_intervals: Vec<usize>,
    pub mean_gbps: f64,
    pub min_interval_gbps: f64,
    pub retransmits: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Soak {
    pub variant: String,
    pub duration_s: f64,
    pub gen_pps: u64,
    pub gen_flows: u32,
    pub streams: u32,
    pub stream_mbps: u32,
    /// Which flow change (`mask`, `actions`).
    pub change: String,
    pub flow_changes: u64,
    pub flow_change_errors: Vec<String>,
    pub gen: GenTotals,
    pub tcp: TcpTotals,
    /// Drops by reason per node at the end (`dropped WHY: N` and the
    /// kernel's drop counters).
    pub drops: Vec<BTreeMap<String, u64>>,
    /// `tunlab ctl stats` of each node before the traffic and at the end
    /// (empty where a node did not answer).
    pub baseline_stats: Vec<Stats>,
    pub final_stats: Vec<Stats>,
    pub samples: Vec<Sample>,
    pub checks: Vec<Check>,
    pub interrupted: bool,
}

impl Soak {
    pub fn passed(&self) -> bool {
        !self.interrupted && self.checks.iter().all(|c| c.held)
    }
}

const GEN_PORT: u16 = 9;
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
    let dir = variant::run_dir(out)?;
    let maps_before = system_bpf_maps();
    let mut soak = {
        let topo = Topology::build(0)?;
        let running = variant::setup(plan.variant, &topo, tunlab, &dir, None, None)?;
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
    running: &variant::Running,
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

    let bar = indicatif::ProgressBar::new(plan.duration.as_secs());
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} s of soak, ETA {eta} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut changes = 0u64;
    let mut change_errors = Vec::new();
    let mut interrupted = false;
    // `mask`: it matches one generator flow by its source port, so while
    // it is in, every UDP flow's cached entry holds its source port (one
    // entry per flow, as a megaflow mask does), and out, they fold into
    // one. `actions`: the rules keep their shape.
    let rule = plan.change.rule();
    while start.elapsed() < plan.duration {
        if INTERRUPTED.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        let tick = Instant::now();
        // The flow change: a rule for a generator flow, added with the
        // same output as the rule under it, then taken away again; each
        // one makes the node revalidate every cached flow.
        let req = if changes.is_multiple_of(2) {
            format!("add-flow {rule} actions=output:1")
        } else {
            format!("del-flows --strict {rule}")
        };
        match tunlab_ctl::request(&ctls[0], &req) {
            Ok((true, _)) => {}
            Ok((false, why)) => change_errors.push(format!("{req}: {}", why.trim())),
            Err(e) => change_errors.push(format!("{req}: {e}")),
        }
        changes += 1;
        samples.push(Sample {
            t_s: start.elapsed().as_secs_f64(),
            nodes: running
                .pids
                .iter()
                .zip(&ctls)
                .map(|(pid, ctl)| node_sample(*pid, ctl))
                .collect(),
        });
        bar.set_position(start.elapsed().as_secs().min(plan.duration.as_secs()));
        if let Some(s) = samples.last() {
            bar.set_message(format!(
                "RSS {} / {} MiB",
                s.nodes.first().map_or(0, |n| n.rss_kib / 1024),
                s.nodes.get(1).map_or(0, |n| n.rss_kib / 1024)
            ));
        }
        std::thread::sleep(Duration::from_secs(1).saturating_sub(tick.elapsed()));
    }
    bar.finish_and_clear();
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
    let drops: Vec<BTreeMap<String, u64>> = final_stats.iter().map(|s| drop_counts(s)).collect();
    let mut soak = Soak {
        variant: plan.variant.name().into(),
        duration_s: start.elapsed().as_secs_f64(),
        gen_pps: plan.gen_pps,
        gen_flows: plan.gen_flows,
        streams: plan.streams,
        stream_mbps: plan.stream_mbps,
        change: plan.change.name().into(),
        flow_changes: changes,
        flow_change_errors: change_errors,
        gen,
        tcp,
        drops,
        baseline_stats: baseline,
        final_stats,
        samples,
        checks: Vec::new(),
        interrupted,
    };
    if !interrupted {
        soak.checks = checks(&soak);
    }
    Ok(soak)
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

/// A port toward the underlay (a tunnel or QinQ), not a tenant.
pub fn is_underlay(p: &PortRow) -> bool {
    !matches!(p.kind.as_str(), "tap" | "veth" | "system")
}

/// Drops by reason: the slow path's `dropped WHY` and the kernel
/// datapath's drop counters, non-zero ones only.
pub fn drop_counts(stats: &Stats) -> BTreeMap<String, u64> {
    stats
        .flat()
        .into_iter()
        .filter(|(k, v)| {
            *v > 0
                && (k.starts_with("dropped ")
                    || k.starts_with("kernel_drop_")
                    || k == "kernel_err_adjust"
                    || k == "kernel_too_big")
        })
        .collect()
}

/// The generator's totals from its `--json` file.
pub fn parse_gen(json: &str) -> Result<GenTotals, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("the generator's JSON: {e}"))?;
    let m = &v["rows"][0]["measured"];
    let get = |k: &str| {
        m[k].as_u64()
            .ok_or_else(|| format!("the generator's JSON has no rows[0].measured.{k}"))
    };
    Ok(GenTotals {
        sent: get("tx_packets")?,
        received: get("rx_packets")?,
        lost: get("lost")?,
        duplicates: get("duplicates")?,
    })
}

/// iperf3's `--json` intervals: how many, which carried no data, the mean
/// and the lowest rate.
pub fn parse_intervals(json: &str) -> Result<TcpTotals, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("iperf3's JSON: {e}"))?;
    if let Some(e) = v["error"].as_str() {
        return Err(format!("iperf3: {e}"));
    }
    let intervals = v["intervals"]
        .as_array()
        .ok_or("iperf3's JSON has no intervals")?;
    let rates: Vec<f64> = intervals
        .iter()
        .map(|i| i["sum"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e9)
        .collect();
    let sum = &v["end"]["sum_sent"];
    Ok(TcpTotals {
        intervals: rates.len(),
        empty_intervals: rates
            .iter()
            .enumerate()
            .filter(|(_, r)| **r <= 0.0)
            .map(|(i, _)| i)
            .collect(),
        mean_gbps: sum["bits_per_second"].as_f64().unwrap_or(0.0) / 1e9,
        min_interval_gbps: rates.iter().copied().fold(f64::INFINITY, f64::min),
        retransmits: sum["retransmits"].as_u64().unwrap_or(0),
    })
}

/// Samples after the warm-up (the first tenth, at least 10 s, at most
/// 60 s), split into an early and a late third.
fn thirds(s: &[Sample]) -> Option<(&[Sample], &[Sample])> {
    let end = s.last()?.t_s;
    let warm = (end / 10.0).clamp(10.0, 60.0);
    let from = s.iter().position(|x| x.t_s >= warm)?;
    let s = &s[from..];
    let k = s.len() / 3;
    (k >= 2).then(|| (&s[..k], &s[s.len() - k..]))
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The end-of-run checks.
pub fn checks(s: &Soak) -> Vec<Check> {
    let mut c = Vec::new();
    let g = &s.gen;
    let counted: u64 = s.drops.iter().flat_map(|d| d.values()).sum();
    c.push(Check {
        what: "generator: sent = received + lost".into(),
        held: g.sent > 0 && g.sent == g.received + g.lost,
        detail: format!("sent {}, received {}, lost {}", g.sent, g.received, g.lost),
    });
    c.push(Check {
        what: "every lost frame is counted in a drop reason".into(),
        held: g.lost <= counted,
        detail: format!("lost {}, drops counted on the two nodes {counted}", g.lost),
    });
    c.extend(port_checks(&s.baseline_stats, &s.final_stats));
    let t = &s.tcp;
    c.push(Check {
        what: "iperf3: every 1-s interval carried data".into(),
        held: t.intervals > 0 && t.empty_intervals.is_empty(),
        detail: format!(
            "{} intervals, mean {:.3} Gbit/s, lowest interval {:.3} Gbit/s, {} retransmits, empty: {:?}",
            t.intervals, t.mean_gbps, t.min_interval_gbps, t.retransmits, t.empty_intervals
        ),
    });
    c.push(Check {
        what: "every flow change was accepted".into(),
        held: s.flow_changes > 0 && s.flow_change_errors.is_empty(),
        detail: format!(
            "{} changes, {} refused{}",
            s.flow_changes,
            s.flow_change_errors.len(),
            s.flow_change_errors
                .first()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default()
        ),
    });
    let nodes = s.samples.first().map_or(0, |x| x.nodes.len());
    match thirds(&s.samples) {
        None => c.push(Check {
            what: "memory and descriptors flat".into(),
            held: false,
            detail: format!("too few samples ({}) to compare", s.samples.len()),
        }),
        Some((early, late)) => {
            for i in 0..nodes {
                let col = |part: &[Sample], f: fn(&NodeSample) -> u64| -> Vec<u64> {
                    part.iter().filter_map(|x| x.nodes.get(i)).map(f).collect()
                };
                let (a, b) = (
                    median(col(early, |n| n.rss_kib)),
                    median(col(late, |n| n.rss_kib)),
                );
                // 5 % and 1 MiB of slack: allocator noise, not growth.
                c.push(Check {
                    what: format!("h{}: resident memory flat", i + 1),
                    held: b <= a + a / 20 + 1024,
                    detail: format!(
                        "median {:.1} MiB early, {:.1} MiB late ({:+.1} %)",
                        a as f64 / 1024.0,
                        b as f64 / 1024.0,
                        (b as f64 / a.max(1) as f64 - 1.0) * 100.0
                    ),
                });
                let min = |v: Vec<u64>| v.into_iter().min().unwrap_or(0);
                let (fa, fb) = (min(col(early, |n| n.fds)), min(col(late, |n| n.fds)));
                let (ma, mb) = (
                    min(col(early, |n| n.bpf_map_fds)),
                    min(col(late, |n| n.bpf_map_fds)),
                );
                c.push(Check {
                    what: format!("h{}: no descriptor or map growth", i + 1),
                    held: fb <= fa && mb <= ma,
                    detail: format!("descriptors {fa} → {fb}, BPF map descriptors {ma} → {mb} (fewest early → late)"),
                });
            }
        }
    }
    c
}

/// The per-port sums at the end, in packets (a super-frame counts its
/// segments): on each node, what came in on its ports went out on its
/// ports or was dropped (the kernel's per-port drops and the slow path's
/// drops by reason); between the nodes, what one sent into the underlay
/// the other received from it since `baseline` (before the traffic).
pub fn port_checks(baseline: &[Stats], final_stats: &[Stats]) -> Vec<Check> {
    let nodes: Vec<&Vec<PortRow>> = final_stats.iter().map(|s| &s.ports).collect();
    let before: Vec<&Vec<PortRow>> = baseline.iter().map(|s| &s.ports).collect();
    let mut c = Vec::new();
    for (i, (ports, stats)) in nodes.iter().zip(final_stats).enumerate() {
        let rx: u64 = ports.iter().map(|p| p.rx_packets).sum();
        let tx: u64 = ports.iter().map(|p| p.tx_packets).sum();
        let kernel: u64 = ports.iter().map(|p| p.rx_dropped).sum();
        let slow: u64 = stats.drops.values().sum();
        let per: Vec<String> = ports
            .iter()
            .map(|p| format!("{} rx {} tx {}", p.name, p.rx_packets, p.tx_packets))
            .collect();
        c.push(Check {
            what: format!("h{}: per port, received = sent + dropped", i + 1),
            held: !ports.is_empty() && rx == tx + kernel + slow,
            detail: format!(
                "{}; received {rx}, sent {tx}, dropped {kernel} by the kernel and {slow} by the slow path ({:+})",
                per.join(", "),
                rx as i128 - (tx + kernel + slow) as i128
            ),
        });
    }
    let under = |n: Option<&&Vec<PortRow>>, f: fn(&PortRow) -> u64| -> u64 {
        n.into_iter()
            .flat_map(|v| v.iter())
            .filter(|p| is_underlay(p))
            .map(f)
            .sum()
    };
    if nodes.len() == 2 {
        for (from, to) in [(0, 1), (1, 0)] {
            let sent = under(nodes.get(from), |p| p.tx_packets)
                .saturating_sub(under(before.get(from), |p| p.tx_packets));
            let got = under(nodes.get(to), |p| p.rx_packets)
                .saturating_sub(under(before.get(to), |p| p.rx_packets));
            let (from, to) = (from + 1, to + 1);
            c.push(Check {
                what: format!("underlay: h{from} sent = h{to} received"),
                held: sent > 0 && sent == got,
                detail: format!(
                    "since the traffic started, h{from}'s underlay ports sent {sent}, h{to}'s received {got}"
                ),
            });
        }
    }
    c
}

/// The curves: memory, descriptors, cached flows, and per-second counter
/// rates of both nodes.
pub fn charts(s: &Soak) -> Vec<(String, LineChart)> {
    let nodes = s.samples.first().map_or(0, |x| x.nodes.len());
    let series = |f: &dyn Fn(&NodeSample) -> Option<f64>| -> Vec<(String, Vec<(f64, f64)>)> {
        (0..nodes)
            .map(|i| {
                (
                    format!("h{}", i + 1),
                    s.samples
                        .iter()
                        .filter_map(|x| Some((x.t_s, f(x.nodes.get(i)?)?)))
                        .collect(),
                )
            })
            .collect()
    };
    let chart = |title: &str, unit: &str, series| LineChart {
        title: title.into(),
        unit: unit.into(),
        x_unit: "seconds into the soak".into(),
        series,
    };
    let mut out = vec![
        (
            "soak-rss".to_string(),
            chart(
                "Resident memory of each switch",
                "MiB",
                series(&|n| Some(n.rss_kib as f64 / 1024.0)),
            ),
        ),
        (
            "soak-fds".to_string(),
            chart(
                "Open descriptors of each switch",
                "descriptors",
                series(&|n| Some(n.fds as f64)),
            ),
        ),
    ];
    if s.samples
        .iter()
        .any(|x| x.nodes.iter().any(|n| n.cached_flows.is_some()))
    {
        out.push((
            "soak-flows".into(),
            chart(
                "Flows in the kernel cache (at each revalidator sweep)",
                "flows",
                series(&|n| n.cached_flows.map(|v| v as f64)),
            ),
        ));
    }
    // Counter rates: per second, from consecutive samples.
    let rate = |i: usize, key: &str| -> Vec<(f64, f64)> {
        s.samples
            .windows(2)
            .filter_map(|w| {
                let a = w[0].nodes.get(i)?.counters.get(key)?;
                let b = w[1].nodes.get(i)?.counters.get(key)?;
                let dt = w[1].t_s - w[0].t_s;
                (dt > 0.0).then(|| (w[1].t_s, b.saturating_sub(*a) as f64 / dt))
            })
            .collect()
    };
    for (title, keys) in [
        ("kernel flow-cache hits per second", &["kernel_hit"][..]),
        (
            "kernel misses, stale hits and upcalls per second",
            &["kernel_miss", "kernel_stale", "kernel_upcall"][..],
        ),
    ] {
        for i in 0..nodes {
            let series: Vec<_> = keys
                .iter()
                .map(|k| (k.trim_start_matches("kernel_").to_string(), rate(i, k)))
                .filter(|(_, p)| !p.is_empty())
                .collect();
            if !series.is_empty() {
                out.push((
                    format!("soak-{}-h{}", keys[0].trim_start_matches("kernel_"), i + 1),
                    chart(&format!("h{}: {title}", i + 1), "per second", series),
                ));
            }
        }
    }
    out
}

/// Write `soak.json`, `soak.html` and `charts/soak-*.svg|png` into `dir`.
pub fn write(s: &Soak, dir: &Path) -> Result<(), LabError> {
    let put = |p: PathBuf, b: &[u8]| {
        std::fs::write(&p, b).map_err(|err| LabError::Io {
            path: p.display().to_string(),
            err,
        })
    };
    let charts_dir = dir.join("charts");
    std::fs::create_dir_all(&charts_dir).map_err(|err| LabError::Io {
        path: charts_dir.display().to_string(),
        err,
    })?;
    let json = serde_json::to_string_pretty(s).map_err(|e| LabError::Setup(e.to_string()))?;
    put(dir.join("soak.json"), json.as_bytes())?;
    let mut html = String::from(
        "<!doctype html><meta charset=\"utf-8\"><title>tunlab soak</title>\
         <style>body{font-family:sans-serif;max-width:60em;margin:1em auto}\
         td,th{padding:2px 8px;text-align:left}.no{color:#c0392b}.yes{color:#2e7d32}</style>",
    );
    html.push_str(&format!(
        "<h1>Soak: {} for {:.0} s</h1><p>The generator at {} frames/s over {} UDP flows, {} iperf3 \
         stream(s) of {} Mbit/s, a flow rule added or deleted every second ({} changes).</p>\
         <h2>Checks</h2><table><tr><th>check</th><th>held</th><th>figures</th></tr>",
        chart::esc(&s.variant),
        s.duration_s,
        s.gen_pps,
        s.gen_flows,
        s.streams,
        s.stream_mbps,
        s.flow_changes
    ));
    for c in &s.checks {
        html.push_str(&format!(
            "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
            chart::esc(&c.what),
            if c.held { "yes" } else { "no" },
            if c.held { "yes" } else { "NO" },
            chart::esc(&c.detail)
        ));
    }
    html.push_str("</table><h2>Drops by reason</h2><table>");
    for (i, d) in s.drops.iter().enumerate() {
        let list: Vec<String> = d.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let list = if list.is_empty() {
            "none".to_string()
        } else {
            list.join(", ")
        };
        html.push_str(&format!(
            "<tr><td>h{}</td><td>{}</td></tr>",
            i + 1,
            chart::esc(&list)
        ));
    }
    html.push_str("</table><h2>Curves</h2>");
    for (file, c) in charts(s) {
        let svg = c.svg();
        put(charts_dir.join(format!("{file}.svg")), svg.as_bytes())?;
        if let Ok(png) = chart::png(&svg) {
            put(charts_dir.join(format!("{file}.png")), &png)?;
        }
        html.push_str(&svg);
    }
    html.push_str("<h2>Counters at the end</h2>");
    for (i, st) in s.final_stats.iter().enumerate() {
        html.push_str(&format!(
            "<h3>h{}</h3><pre>{}</pre>",
            i + 1,
            chart::esc(&st.text())
        ));
    }
    put(dir.join("soak.html"), html.as_bytes())
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
    use super::*;

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
        assert_eq!(held(&h1, &Stats::default())[1], false);
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
