//! One `tunlab bench`: for each variant a fresh topology, the variant set
//! up on it, every test sampled under the pbench rule, everything torn
//! down; then `results.json` and the tables.

use crate::host::Host;
use crate::stats::{settle, Rule, Summary};
use crate::traffic::{run_sample, Kind, Peers, Sample, Test, INTERRUPTED};
use crate::variant::{self, Topology, Variant};
use crate::LabError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// What to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub profile: String,
    pub variants: Vec<Variant>,
    pub tests: Vec<Test>,
    pub seconds: u32,
    pub rule: Rule,
    /// Packet threads per tunlab node; `None`: the switch's default.
    #[serde(default)]
    pub workers: Option<u16>,
    /// tunlab's `spin_us`; `None`: the switch's default.
    #[serde(default)]
    pub spin_us: Option<u64>,
    /// CPUs the client and server tenants' tools run on; `None`: wherever
    /// the scheduler puts them.
    #[serde(default)]
    pub tenant_cpus: Option<[u16; 2]>,
}

fn t(kind: Kind, size: usize, instances: usize) -> Test {
    Test {
        kind,
        size,
        instances,
        rate_gbit: None,
    }
}

/// The quick profile's promise: done within five minutes here. Reruns
/// (pbench's rule) stop when they would break it; such tests are marked
/// unsettled, never dropped.
pub const QUICK_BUDGET_S: u64 = 270;

impl Plan {
    /// The settings this run asked for instead of the defaults ("" if
    /// none), e.g. "tunlab nodes: workers = 2, spin_us = 0".
    pub fn settings(&self) -> String {
        let mut out = Vec::new();
        if let Some([c, s]) = self.tenant_cpus {
            out.push(format!(
                "tenants' tools pinned: client to CPU {c}, server to CPU {s}"
            ));
        }
        let mut v = Vec::new();
        if let Some(w) = self.workers {
            v.push(format!("workers = {w}"));
        }
        if let Some(s) = self.spin_us {
            v.push(format!("spin_us = {s}"));
        }
        if !v.is_empty() {
            out.push(format!("tunlab nodes: {}", v.join(", ")));
        }
        out.join("; ")
    }

    /// `quick`: a representative subset that finishes in about five
    /// minutes here; `full`: the whole matrix of the articles and of
    /// pbench-uperf.
    pub fn profile(name: &str) -> Result<Plan, LabError> {
        match name {
            // All nine variants and four tests took 14 minutes here (sets on
            // this shared machine often need reruns): quick keeps one
            // variant per family and the three headline tests.
            "quick" => Ok(Plan {
                profile: name.into(),
                variants: vec![
                    Variant::None,
                    Variant::KernelVxlan,
                    Variant::TunlabGeneveOvn,
                    Variant::TunlabEbpfGeneveOvn,
                    Variant::TunlabVxlan,
                    Variant::TunlabStt,
                    Variant::TunlabQinq,
                    Variant::OvsGeneveOvn,
                ],
                tests: vec![
                    t(Kind::TcpStream, 16384, 1),
                    // 64 KB writes: the kernel's sender is no longer bound
                    // by its own writes and shows its ceiling.
                    t(Kind::TcpStream, 65536, 1),
                    t(Kind::TcpRr, 64, 1),
                    Test {
                        rate_gbit: Some(2.0),
                        ..t(Kind::TcpStream, 16384, 1)
                    },
                ],
                seconds: 2,
                workers: None,
                spin_us: None,
                tenant_cpus: None,
                rule: Rule {
                    budget_s: Some(QUICK_BUDGET_S),
                    ..Rule::pbench(3)
                },
            }),
            "full" => {
                let mut tests = Vec::new();
                for kind in Kind::ALL.into_iter().filter(|k| *k != Kind::FirstPacket) {
                    for size in [64, 1024, 16384] {
                        for n in [1, 8, 64] {
                            tests.push(t(kind, size, n));
                        }
                    }
                }
                tests.push(Test {
                    rate_gbit: Some(2.0),
                    ..t(Kind::TcpStream, 16384, 1)
                });
                tests.push(t(Kind::FirstPacket, 64, 1));
                Ok(Plan {
                    profile: name.into(),
                    variants: Variant::ALL.to_vec(),
                    tests,
                    seconds: 10,
                    workers: None,
                    spin_us: None,
                    tenant_cpus: None,
                    rule: Rule::pbench(5),
                })
            }
            other => Err(LabError::Usage {
                what: "--profile",
                msg: format!("'{other}' is not a profile; valid: quick, full"),
            }),
        }
    }
}

/// One test's results on one variant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestResult {
    pub test: String,
    pub spec: Test,
    pub unit: String,
    /// The primary figure over the kept samples.
    pub summary: Summary,
    pub samples: Vec<Sample>,
    pub attempts: usize,
    pub settled: bool,
    /// Reruns stopped because the profile's time budget was spent.
    #[serde(default)]
    pub budget_spent: bool,
    pub error: Option<String>,
}

/// One variant's results, or why it did not run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VariantResult {
    pub variant: String,
    /// ok, skipped (software missing) or failed (set-up failed).
    pub status: String,
    pub reason: Option<String>,
    pub tenant_mtu: u16,
    pub notes: Vec<String>,
    /// `ethtool -k` of the interfaces involved: host1 underlay, tenant 1.
    pub offloads: Vec<(String, String)>,
    pub tests: Vec<TestResult>,
}

/// Where and with what the run happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Environment {
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub underlay_mtu: u16,
    pub tunlab: String,
    pub iperf3: String,
    pub sockperf: String,
    /// `ovs-vswitchd --version` (absent in results of older runs).
    #[serde(default)]
    pub ovs: String,
}

/// Everything a run produced (`results.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub plan: Plan,
    pub environment: Environment,
    pub topology: String,
    pub variants: Vec<VariantResult>,
    pub interrupted: bool,
    /// On real hosts: each host's environment as the check found it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<crate::remote::Preflight>,
    /// Why the run stopped before its end (a host lost), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

impl Results {
    /// Read a `results.json`; the error names the file and, for bad JSON,
    /// the line and column.
    pub fn load(path: &Path) -> Result<Results, LabError> {
        let text = std::fs::read_to_string(path).map_err(|err| LabError::Io {
            path: path.display().to_string(),
            err,
        })?;
        serde_json::from_str(&text).map_err(|e| {
            LabError::Setup(format!(
                "{}: not a tunlab results file: {e}",
                path.display()
            ))
        })
    }
}

pub const TOPOLOGY: &str = "\
 netns t1 (tenant)    netns h1 (host)                      netns h2 (host)    netns t2 (tenant)
 192.168.30.1 ─────── [datapath] ─ under 172.30.0.1 ═══ 172.30.0.2 under ─ [datapath] ─────── 192.168.30.2
                                    veth, MTU 1500";

fn first_line(args: &[&str]) -> String {
    std::process::Command::new(args[0])
        .args(&args[1..])
        .output()
        .ok()
        .map(|o| {
            let s = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&s)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_else(|| "not found".into())
}

pub fn environment() -> Environment {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    Environment {
        kernel: first_line(&["uname", "-r"]),
        cpu_model: cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .unwrap_or("unknown")
            .trim()
            .to_string(),
        cpus: crate::cpu::cpus(),
        underlay_mtu: variant::UNDERLAY_MTU,
        tunlab: env!("CARGO_PKG_VERSION").to_string(),
        iperf3: first_line(&["iperf3", "--version"]),
        sockperf: first_line(&["sockperf", "--version"]),
        ovs: first_line(&["ovs-vswitchd", "--version"]),
    }
}

/// Tools every variant needs, with the install command.
pub fn missing_tools() -> Option<String> {
    for (bin, pkg) in [
        ("iperf3", "iperf3"),
        ("sockperf", "sockperf"),
        ("ping", "iputils-ping"),
        ("ss", "iproute2"),
    ] {
        if !variant::on_path(bin) {
            return Some(format!("{bin} not found: apt-get install {pkg}"));
        }
    }
    None
}

fn offloads(h: &Host, dev: &str) -> String {
    h.run(&["ethtool", "-k", dev])
        .map(|s| {
            s.lines()
                .filter(|l| l.contains(": on"))
                .map(|l| l.split(':').next().unwrap_or("").trim().to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_else(|e| format!("ethtool failed: {e}"))
}

/// The quick profile's time budget, shared fairly: every test gets the
/// same share of the time the first sets leave over, and what a test does
/// not use passes on to the next, so the first noisy test cannot spend
/// the reruns of all the others.
struct Budget {
    limit_s: Option<f64>,
    started: std::time::Instant,
    /// Seconds spent on reruns so far.
    rerun_s: std::cell::Cell<f64>,
}

impl Budget {
    /// May a set be rerun, given `done` of `total` first-set samples taken
    /// and `tests_begun` of `tests` begun (this one included)?
    fn allows(
        &self,
        samples: usize,
        done: u64,
        total: u64,
        tests_begun: usize,
        tests: usize,
    ) -> bool {
        let Some(limit) = self.limit_s else {
            return true;
        };
        let elapsed = self.started.elapsed().as_secs_f64();
        // Seconds per first-set sample so far, set-up included.
        let pace = (elapsed - self.rerun_s.get()).max(0.0) / done.max(1) as f64;
        let set = samples as f64 * pace;
        let spare = limit - total as f64 * pace;
        let share = spare * tests_begun as f64 / tests.max(1) as f64;
        let fits = elapsed + total.saturating_sub(done) as f64 * pace + set <= limit;
        fits && self.rerun_s.get() + set <= share
    }
}

/// `ethtool -k` of every interface of the four namespaces (underlay
/// veths, tenant veths or TAPs, bridges, VXLAN devices, OVS ports), as
/// `ns:interface`.
fn every_offload(topo: &Topology) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (role, h) in [
        ("h1", &topo.h[0]),
        ("h2", &topo.h[1]),
        ("t1", &topo.t[0]),
        ("t2", &topo.t[1]),
    ] {
        let links = h.run(&["ip", "-o", "link", "show"]).unwrap_or_default();
        // "7: under@if6: <BROADCAST,...>": the name ends at '@' or ':'.
        for name in links
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n))
            .filter(|n| *n != "lo")
        {
            out.push((format!("{role}:{name}"), offloads(h, name)));
        }
    }
    out
}

/// The topology line of a run on real hosts.
pub fn remote_topology(r: &crate::remote::Remote) -> String {
    format!(
        " netns t1 (tenant) on {a}    {a} ({ad} {au})  ═══  {b} ({bd} {bu})    netns t2 (tenant) on {b}\n {t1} ─ [datapath] ─ underlay ═══ underlay ─ [datapath] ─ {t2}",
        a = r.ssh[0].dest,
        b = r.ssh[1].dest,
        ad = r.found[0].underlay_dev,
        bd = r.found[1].underlay_dev,
        au = r.underlay[0],
        bu = r.underlay[1],
        t1 = variant::TENANT[0],
        t2 = variant::TENANT[1],
    )
}

/// Why a variant cannot run on these real hosts, if it cannot.
fn missing_remote(v: Variant, r: &crate::remote::Remote) -> Option<String> {
    if matches!(v, Variant::OvsBridge | Variant::OvsQinq) {
        return Some(
            "Open vSwitch would need the host's underlay NIC itself as its port; not taken on real hosts".into(),
        );
    }
    if v.is_ovs() {
        if r.ovs_underlay.is_none() {
            return Some("Open vSwitch's userspace tunnels need underlay addresses of their own on its br-phy bridge (the hosts' NICs keep theirs): give --ovs-underlay IP1,IP2".into());
        }
        for f in &r.found {
            if let Some((_, install)) = f.missing.iter().find(|(t, _)| t == "ovs-vswitchd") {
                return Some(format!("{}: ovs-vswitchd not found: {install}", f.dest));
            }
        }
    }
    // What the variant needs on both hosts beyond the tools every one
    // needs: a tool, or a kernel feature.
    let mut needs = Vec::new();
    match v {
        Variant::TunlabStt => needs.push("nft"),
        Variant::KernelVxlan => needs.push("kernel vxlan"),
        v if v.is_ebpf() => needs.push("kernel bpf"),
        _ => {}
    }
    if v.tunlab_kind().is_some() && !v.is_ebpf() {
        needs.push("kernel tun");
    }
    for f in &r.found {
        for need in &needs {
            if let Some((what, install)) = f.missing.iter().find(|(t, _)| t == need) {
                return Some(format!("{}: {what} not found: {install}", f.dest));
            }
        }
    }
    None
}

/// `tunlab bench --hosts … --plan`: every command the run would send to
/// each host, printed in order, none run (the hosts were only checked).
pub fn print_plan(
    plan: &Plan,
    tunlab: &Path,
    out: &Path,
    r: &crate::remote::Remote,
) -> Result<(), LabError> {
    let dir = variant::run_dir(out)?;
    for (n, &v) in plan.variants.iter().enumerate() {
        println!("\n# {}", v.name());
        if let Some(m) = missing_remote(v, r) {
            println!("# skipped: {m}");
            continue;
        }
        let topo = Topology::on_hosts(r, n)?;
        let running = variant::setup(v, &topo, tunlab, &dir, plan.workers, plan.spin_us)?;
        for test in &plan.tests {
            println!(
                "# {}: each of {} samples runs these, and reads /proc/stat and the datapath's /proc/PID/stat on both hosts around it",
                test.name(),
                plan.rule.samples
            );
            let port = "PORT";
            let srv = crate::traffic::server_args(test, variant::TENANT[1], port);
            let cli = crate::traffic::client_args(test, variant::TENANT[1], port, plan.seconds);
            for (h, args) in [(&topo.t[1], srv), (&topo.t[0], cli)] {
                let mut v = vec!["ip", "netns", "exec", h.name()];
                v.extend(args.iter().map(String::as_str));
                if let Some(ssh) = h.ssh() {
                    ssh.print_plan(&v, 0);
                }
            }
        }
        drop(running);
        drop(topo);
    }
    r.finish();
    Ok(())
}

/// Run the plan; `tunlab` is the binary the switch variants run, `out` the
/// results folder, `remote` the real hosts to run on (else namespaces
/// here). A real host lost mid-run stops the run; what was measured is
/// still written, with the reason in `stopped`.
pub fn run(
    plan: &Plan,
    tunlab: &Path,
    out: &Path,
    remote: Option<&crate::remote::Remote>,
) -> Result<Results, LabError> {
    if remote.is_none() {
        if let Some(m) = missing_tools() {
            return Err(LabError::Setup(m));
        }
    }
    let dir = variant::run_dir(out)?;
    let budget = Budget {
        limit_s: plan.rule.budget_s.map(|b| b as f64),
        started: std::time::Instant::now(),
        rerun_s: std::cell::Cell::new(0.0),
    };
    let tests_total = plan.variants.len() * plan.tests.len();
    let mut tests_begun = 0;
    let total = (plan.variants.len() * plan.tests.len() * plan.rule.samples) as u64;
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} samples, ETA {eta} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let mut results = Results {
        plan: plan.clone(),
        environment: environment(),
        topology: remote.map_or(TOPOLOGY.into(), remote_topology),
        variants: Vec::new(),
        interrupted: false,
        hosts: remote.map(|r| r.found.to_vec()).unwrap_or_default(),
        stopped: None,
    };
    // A failure on real hosts may be a host gone: then the run stops.
    let lost = |results: &mut Results| -> bool {
        if let Some(why) = remote.and_then(|r| r.lost()) {
            results.stopped = Some(format!("lost a host: {why}"));
            return true;
        }
        false
    };
    for (n, &v) in plan.variants.iter().enumerate() {
        if INTERRUPTED.load(Ordering::SeqCst) {
            results.interrupted = true;
            break;
        }
        let mut vr = VariantResult {
            variant: v.name().into(),
            status: "ok".into(),
            reason: None,
            tenant_mtu: v.tenant_mtu(),
            notes: Vec::new(),
            offloads: Vec::new(),
            tests: Vec::new(),
        };
        let missing = match remote {
            Some(r) => missing_remote(v, r),
            None => v.missing(),
        };
        if let Some(m) = missing {
            vr.status = "skipped".into();
            vr.reason = Some(m);
            bar.inc((plan.tests.len() * plan.rule.samples) as u64);
            results.variants.push(vr);
            continue;
        }
        bar.set_message(format!("{}: setting up", v.name()));
        let topo = match remote {
            Some(r) => Topology::on_hosts(r, n),
            None => Topology::build(n),
        };
        let topo = match topo {
            Ok(t) => t,
            Err(e) if remote.is_some() => {
                vr.status = "failed".into();
                vr.reason = Some(format!("set-up: {e}"));
                results.variants.push(vr);
                if lost(&mut results) {
                    break;
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        let running = match variant::setup(v, &topo, tunlab, &dir, plan.workers, plan.spin_us) {
            Ok(r) => r,
            Err(e) => {
                if lost(&mut results) {
                    vr.status = "failed".into();
                    vr.reason = Some(format!("set-up: {e}"));
                    results.variants.push(vr);
                    break;
                }
                vr.status = "failed".into();
                vr.reason = Some(format!("set-up: {e}"));
                bar.inc((plan.tests.len() * plan.rule.samples) as u64);
                results.variants.push(vr);
                continue;
            }
        };
        vr.notes = running.notes.clone();
        vr.offloads = every_offload(&topo);
        let peers = Peers {
            client: &topo.t[0],
            server: &topo.t[1],
            server_ip: variant::TENANT[1],
            server_if: &running.tenant_if,
            cpus: plan.tenant_cpus,
        };
        for test in &plan.tests {
            tests_begun += 1;
            let name = test.name();
            bar.set_message(format!("{} {name}", v.name()));
            let s = settle(
                plan.rule,
                |s| test.primary(s),
                || {
                    budget.allows(
                        plan.rule.samples,
                        bar.position(),
                        total,
                        tests_begun,
                        tests_total,
                    )
                },
                |attempt, _| {
                    if attempt > 1 {
                        bar.set_message(format!(
                            "{} {name} (rerun {attempt}: spread over {}%)",
                            v.name(),
                            plan.rule.max_cv_pct
                        ));
                    }
                    let t0 = std::time::Instant::now();
                    let r = match test.kind {
                        Kind::FirstPacket => crate::first_packet::run_sample(
                            peers,
                            test,
                            plan.seconds,
                            &running.meter(),
                            &|| running.flush(),
                        ),
                        _ => run_sample(peers, test, plan.seconds, &running.meter()),
                    };
                    if attempt > 1 {
                        let spent = budget.rerun_s.get() + t0.elapsed().as_secs_f64();
                        budget.rerun_s.set(spent);
                    }
                    bar.inc(if attempt == 1 { 1 } else { 0 });
                    r
                },
            );
            if s.samples.len() < plan.rule.samples {
                bar.inc((plan.rule.samples - s.samples.len()) as u64);
            }
            if let Some(e) = &s.error {
                let log = dir.join(format!("{}-{name}.failed.txt", v.name()));
                let _ = std::fs::write(&log, e);
            }
            let xs: Vec<f64> = s.samples.iter().map(|x| test.primary(x)).collect();
            vr.tests.push(TestResult {
                test: name,
                spec: *test,
                unit: test.unit().into(),
                summary: Summary::of(&xs),
                samples: s.samples,
                attempts: s.attempts,
                settled: s.settled,
                budget_spent: s.budget_spent,
                error: s.error,
            });
            if INTERRUPTED.load(Ordering::SeqCst) {
                results.interrupted = true;
                break;
            }
            let failed = vr.tests.last().is_some_and(|t| t.error.is_some());
            if failed && lost(&mut results) {
                break;
            }
        }
        drop(running);
        drop(topo);
        results.variants.push(vr);
        if results.stopped.is_some() {
            break;
        }
    }
    bar.finish_and_clear();
    if let Some(r) = remote {
        r.finish();
    }
    let path = dir.join("results.json");
    let json =
        serde_json::to_string_pretty(&results).map_err(|e| LabError::Setup(e.to_string()))?;
    std::fs::write(&path, json).map_err(|err| LabError::Io {
        path: path.display().to_string(),
        err,
    })?;
    Ok(results)
}

/// The default results folder: `tunlab-results/<unix time>`.
pub fn default_out() -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    PathBuf::from("tunlab-results").join(secs.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn settings_are_named_only_when_asked_for() {
        let mut p = Plan::profile("quick").unwrap();
        assert_eq!(p.settings(), "");
        p.workers = Some(2);
        p.spin_us = Some(0);
        assert_eq!(p.settings(), "tunlab nodes: workers = 2, spin_us = 0");
        p.tenant_cpus = Some([0, 1]);
        assert_eq!(
            p.settings(),
            "tenants' tools pinned: client to CPU 0, server to CPU 1; tunlab nodes: workers = 2, spin_us = 0"
        );
        // Results written before these settings existed still load.
        let old = serde_json::to_value(Plan::profile("quick").unwrap()).unwrap();
        let mut old = old.as_object().unwrap().clone();
        old.remove("workers");
        old.remove("spin_us");
        old.remove("tenant_cpus");
        let back: Plan = serde_json::from_value(serde_json::Value::Object(old)).unwrap();
        assert_eq!(back.workers, None);
        assert_eq!(back.tenant_cpus, None);
    }

    fn budget(limit: Option<f64>, elapsed: u64, rerun: f64) -> Budget {
        Budget {
            limit_s: limit,
            started: Instant::now() - Duration::from_secs(elapsed),
            rerun_s: std::cell::Cell::new(rerun),
        }
    }

    #[test]
    fn the_budget_shares_the_spare_time_between_tests() {
        // 30 s for 10 of 20 first-set samples: 3 s each, 60 s for all, 40 s
        // spare of 100; a rerun set of 3 samples costs 9 s.
        let b = budget(Some(100.0), 30, 0.0);
        // Half the tests begun: 20 s of reruns are theirs.
        assert!(b.allows(3, 10, 20, 5, 10));
        // The first of ten tests: its share is 4 s, less than a set.
        assert!(!b.allows(3, 10, 20, 1, 10));
        // Without a limit: the pbench rule alone.
        assert!(budget(None, 30, 0.0).allows(3, 10, 20, 1, 10));
    }

    #[test]
    fn reruns_stop_when_the_first_sets_would_not_fit() {
        // 90 s for 10 of 20 samples (9 s each): the other ten need 90 s
        // more, past the 100 s limit, so no rerun at all.
        assert!(!budget(Some(100.0), 90, 0.0).allows(3, 10, 20, 10, 10));
        // 30 s in, 15 of them reruns: pace (30 - 15) / 10 = 1.5 s, spare
        // 100 - 30 = 70 s, half of it (35 s) is the begun tests' share; a
        // 4.5 s set fits.
        let b = budget(Some(100.0), 30, 15.0);
        assert!(b.allows(3, 10, 20, 5, 10));
        // 50 s in, 33 of them reruns: pace 1.7 s, share (100 - 34) / 2 =
        // 33 s, already spent: no more.
        let b = budget(Some(100.0), 50, 33.0);
        assert!(!b.allows(3, 10, 20, 5, 10));
    }
}
