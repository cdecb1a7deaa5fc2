//! One `tunlab bench`, start to end: the plan's variants set up side by
//! side ([`crate::bed`]), rounds of shuffled samples until the ratios
//! against the baseline are narrow enough ([`crate::rounds`]), each
//! sample watched by the noise guard ([`crate::measure`]), then the
//! paired statistics into `results.json` ([`crate::results`]). On real
//! hosts the variants take turns (one at a time on the hosts' NICs) and
//! their rounds are paired by number.

use crate::bed::{self, Bed, Site};
use crate::guard::Guard;
use crate::measure::{self, How};
use crate::plan::Plan;
use crate::results::{self, Results, TestResult};
use crate::rounds::{self, Cell, Scheduler};
use crate::sample::Sample;
use crate::stats::Summary;
use crate::traffic::INTERRUPTED;
use crate::variant;
use crate::LabError;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The run's time budget: a round is begun only if, at the pace of the
/// samples so far, it ends in time, with [`RESERVE_S`] left to tear
/// down and write the report.
#[derive(Debug)]
struct Budget {
    limit_s: Option<f64>,
    started: Instant,
    samples: usize,
    sample_s: f64,
    /// The pace assumed before any sample was taken.
    guess_s: f64,
}

const RESERVE_S: f64 = 8.0;

impl Budget {
    fn new(limit_s: Option<u64>, started: Instant, seconds: u32) -> Budget {
        Budget {
            limit_s: limit_s.map(|b| b as f64),
            started,
            samples: 0,
            sample_s: 0.0,
            guess_s: seconds as f64 + 1.0,
        }
    }

    fn pace(&self) -> f64 {
        if self.samples == 0 {
            self.guess_s
        } else {
            self.sample_s / self.samples as f64
        }
    }

    /// Does a round of `n` samples end within the limit?
    fn fits(&self, n: usize) -> bool {
        self.limit_s.is_none_or(|limit| {
            self.started.elapsed().as_secs_f64() + n as f64 * self.pace() + RESERVE_S <= limit
        })
    }

    /// May one more sample be taken now (a retake)?
    fn allows_one(&self) -> bool {
        self.fits(1)
    }

    fn spent(&mut self, secs: f64) {
        self.samples += 1;
        self.sample_s += secs;
    }
}

/// What a cell gathered over the rounds.
#[derive(Debug, Default)]
struct Record {
    kept: Vec<Sample>,
    retaken: Vec<Sample>,
    error: Option<String>,
}

/// A caller's own rule for the rounds past the first: given what they
/// gathered so far (as results, not yet paired), the (variant, test name)
/// cells its open questions still need. An empty list ends the rounds.
/// An article's findings are such questions ([`crate::article`]).
pub type Focus<'a> = &'a dyn Fn(&Results) -> Vec<(variant::Variant, String)>;

/// The cells still needed, by a caller's rule, from the records so far.
type Open<'a> = &'a dyn Fn(&[Vec<Record>]) -> Vec<Cell>;

/// The rounds' records, and the caller's question of them.
struct Gather<'a> {
    records: &'a mut [Vec<Record>],
    /// The cells still needed, by the caller's rule; None: the baseline
    /// rule.
    open: Option<Open<'a>>,
}

/// Run the plan; `tunlab` is the binary the switch variants run, `out` the
/// results folder, `remote` the real hosts to run on (else namespaces
/// here), `focus` the caller's rule for rounds past the first (else the
/// plan's baseline rule). A real host lost mid-run stops the run; what
/// was measured is still written, with the reason in `stopped`.
pub fn run(
    plan: &Plan,
    tunlab: &Path,
    out: &Path,
    remote: Option<&crate::remote::Remote>,
    focus: Option<Focus>,
) -> Result<Results, LabError> {
    if remote.is_none() {
        if let Some(m) = results::missing_tools() {
            return Err(LabError::Setup(m));
        }
    }
    let started = Instant::now();
    let dir = crate::results::run_dir(out)?;
    let site = Site {
        tunlab,
        dir: &dir,
        remote,
    };
    let mut results = Results {
        plan: plan.clone(),
        environment: results::environment(),
        topology: remote.map_or(TOPOLOGY.into(), remote_topology),
        variants: plan.variants.iter().map(|v| bed::entry(*v)).collect(),
        interrupted: false,
        hosts: remote.map(|r| r.found.to_vec()).unwrap_or_default(),
        stopped: None,
    };
    let (nv, nt) = (plan.variants.len(), plan.tests.len());
    let mut records: Vec<Vec<Record>> = (0..nv)
        .map(|_| (0..nt).map(|_| Record::default()).collect())
        .collect();
    let mut guard = Guard::new(plan.guard);
    let mut budget = Budget::new(plan.rule.budget_s, started, plan.seconds);
    let bar = progress_bar((plan.rule.min_rounds * nv * nt) as u64);
    // Here every variant is up at once; on real hosts one at a time.
    let phases: Vec<Vec<usize>> = match remote {
        None => vec![(0..nv).collect()],
        Some(_) => (0..nv).map(|n| vec![n]).collect(),
    };
    let mut budget_spent = false;
    for phase in phases {
        if INTERRUPTED.load(Ordering::SeqCst) {
            results.interrupted = true;
            break;
        }
        let bed = match bed::set_up(
            plan,
            &phase,
            &site,
            &mut guard,
            &mut results.variants,
            |m| bar.set_message(m.to_string()),
        ) {
            Ok(b) => b,
            Err(e) => match remote.and_then(|r| r.lost()) {
                Some(why) => {
                    results.stopped = Some(format!("lost a host: {why}"));
                    break;
                }
                None => return Err(e),
            },
        };
        // What the caller's rule reads: this run's variants as set up.
        let skeleton = results.clone();
        let open = |recs: &[Vec<Record>]| -> Vec<Cell> {
            let Some(f) = focus else { return Vec::new() };
            let so_far = snapshot(plan, &skeleton, recs);
            f(&so_far)
                .into_iter()
                .filter_map(|(v, test)| {
                    let v = plan.variants.iter().position(|x| *x == v)?;
                    let t = plan.tests.iter().position(|x| x.name() == test)?;
                    Some(Cell { v, t })
                })
                .collect()
        };
        let gather = Gather {
            records: &mut records,
            open: focus.map(|_| &open as Open),
        };
        let done = rounds_on(
            plan,
            &bed,
            remote.is_none(),
            &mut guard,
            &mut budget,
            &bar,
            gather,
        );
        budget_spent |= done.budget_spent;
        if INTERRUPTED.load(Ordering::SeqCst) {
            results.interrupted = true;
        }
        if let Some(why) = remote.and_then(|r| if done.failed { r.lost() } else { None }) {
            results.stopped = Some(format!("lost a host: {why}"));
        }
        bar.set_message("tearing down");
        drop(bed);
        if results.interrupted || results.stopped.is_some() {
            break;
        }
    }
    bar.finish_and_clear();
    if let Some(r) = remote {
        r.finish();
    }
    assemble(plan, &mut results, records, budget_spent, &dir);
    let path = dir.join("results.json");
    let json =
        serde_json::to_string_pretty(&results).map_err(|e| LabError::Setup(e.to_string()))?;
    std::fs::write(&path, json).map_err(|err| LabError::Io {
        path: path.display().to_string(),
        err,
    })?;
    Ok(results)
}

fn progress_bar(len: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} samples {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

/// How a phase's rounds ended.
#[derive(Debug, Default)]
struct Ended {
    budget_spent: bool,
    /// A sample failed (on real hosts: maybe a host lost).
    failed: bool,
}

/// The rounds on the variants of `bed`, paired against the plan's
/// baseline when `paired` (all variants up together).
fn rounds_on(
    plan: &Plan,
    bed: &Bed,
    paired: bool,
    guard: &mut Guard,
    budget: &mut Budget,
    bar: &indicatif::ProgressBar,
    gather: Gather,
) -> Ended {
    let nt = plan.tests.len();
    let base = if paired { plan.baseline_index() } else { None };
    let mut s = Scheduler::new(
        plan.variants.len(),
        &bed.up(),
        nt,
        base,
        plan.rule,
        plan.seed,
    );
    let mut ended = Ended::default();
    let mut planned = (plan.rule.min_rounds * bed.up().len() * nt) as u64;
    let budget = std::cell::RefCell::new(budget);
    let records = std::cell::RefCell::new(gather.records);
    rounds::drive(
        &mut s,
        |n| {
            let fits = budget.borrow().fits(n);
            if fits && bar.position() + n as u64 > planned {
                planned = bar.position() + n as u64;
                bar.set_length(planned);
            }
            fits
        },
        |round, Cell { v, t }| {
            let st = bed.get(v)?;
            let test = &plan.tests[t];
            bar.set_message(format!(
                "round {}: {} {}",
                round + 1,
                plan.variants[v].name(),
                test.name()
            ));
            let how = How {
                seconds: plan.seconds_of(test),
                cpus: plan.tenant_cpus,
                round,
            };
            let t0 = Instant::now();
            let taken = measure::take(st, test, how, guard, || budget.borrow().allows_one());
            budget.borrow_mut().spent(t0.elapsed().as_secs_f64());
            bar.inc(1);
            let mut records = records.borrow_mut();
            let rec = &mut records[v][t];
            match taken {
                Ok(x) => {
                    let primary = test.primary(&x.kept);
                    rec.kept.push(x.kept);
                    rec.retaken.extend(x.retaken);
                    Some(primary)
                }
                Err(e) => {
                    rec.error = Some(e);
                    ended.failed = true;
                    None
                }
            }
        },
        || INTERRUPTED.load(Ordering::SeqCst),
        || gather.open.map(|f| f(&records.borrow())),
    );
    ended.budget_spent = s.budget_spent;
    ended
}

/// Where a failed test's tool output goes in the results folder.
fn failure_log(v: &variant::Variant, test: &str) -> String {
    format!("{}-{test}.failed.txt", v.name())
}

/// Every test's result from what the rounds gathered: the summary of the
/// kept samples, the ratios against the baseline paired by round, and
/// whether each interval met the rule.
fn assemble(
    plan: &Plan,
    results: &mut Results,
    records: Vec<Vec<Record>>,
    budget_spent: bool,
    dir: &Path,
) {
    for (n, recs) in records.into_iter().enumerate() {
        let vr = &mut results.variants[n];
        if vr.status != "ok" {
            continue;
        }
        for (t, rec) in recs.into_iter().enumerate() {
            let test = plan.tests[t];
            if let Some(e) = &rec.error {
                let _ = std::fs::write(dir.join(failure_log(&plan.variants[n], &test.name())), e);
            }
            vr.tests.push(test_result(test, rec));
        }
    }
    let base = plan.baseline.map(|b| b.name());
    results::pair_all(results, base, plan.rule, budget_spent);
}

/// A cell's result from its record, before pairing.
fn test_result(test: crate::sample::Test, rec: Record) -> TestResult {
    let xs: Vec<f64> = rec.kept.iter().map(|s| test.primary(s)).collect();
    TestResult {
        test: test.name(),
        spec: test,
        unit: test.unit().into(),
        summary: Summary::of(&xs),
        attempts: rec.kept.len(),
        samples: rec.kept,
        settled: false,
        budget_spent: false,
        error: rec.error,
        ratio: None,
        demand_ratio: None,
        retaken: rec.retaken,
    }
}

/// The results so far, mid-run, for a [`Focus`]: `skeleton`'s variants
/// with the samples their cells kept (not paired, no retakes).
fn snapshot(plan: &Plan, skeleton: &Results, records: &[Vec<Record>]) -> Results {
    let mut r = skeleton.clone();
    for (vr, recs) in r.variants.iter_mut().zip(records) {
        if vr.status != "ok" {
            continue;
        }
        vr.tests = plan
            .tests
            .iter()
            .zip(recs)
            .map(|(test, rec)| {
                let copy = Record {
                    kept: rec.kept.clone(),
                    retaken: Vec::new(),
                    error: rec.error.clone(),
                };
                test_result(*test, copy)
            })
            .collect();
    }
    r
}

pub const TOPOLOGY: &str = "\
 netns t1 (tenant)    netns h1 (host)                      netns h2 (host)    netns t2 (tenant)
 192.168.30.1 ─────── [datapath] ─ under 172.30.0.1 ═══ 172.30.0.2 under ─ [datapath] ─────── 192.168.30.2
                                    veth, MTU 1500";

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

/// `tunlab bench --hosts … --plan`: every command the run would send to
/// each host, printed in order, none run (the hosts were only checked).
pub fn print_plan(
    plan: &Plan,
    tunlab: &Path,
    out: &Path,
    r: &crate::remote::Remote,
) -> Result<(), LabError> {
    let dir = crate::results::run_dir(out)?;
    for (n, &v) in plan.variants.iter().enumerate() {
        println!("\n# {}", v.name());
        if let Some(m) = bed::missing_remote(v, r) {
            println!("# skipped: {m}");
            continue;
        }
        let topo = crate::topology::Topology::on_hosts(r, n)?;
        let running = crate::running::setup(v, &topo, tunlab, &dir, plan.workers, plan.spin_us)?;
        for test in &plan.tests {
            println!(
                "# {}: each of {} samples runs these, and reads /proc/stat and the datapath's /proc/PID/stat on both hosts around it",
                test.name(),
                plan.rule.min_rounds
            );
            let port = "PORT";
            let ip = variant::TENANT[1];
            let srv = crate::traffic::server_args(test, ip, port, &r.tunlab[1]);
            let cli = crate::traffic::client_args(test, ip, port, plan.seconds, &r.tunlab[0]);
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

/// The default results folder: `tunlab-results/<unix time>`.
pub fn default_out() -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    PathBuf::from("tunlab-results").join(secs.to_string())
}
