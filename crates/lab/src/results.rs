//! What a bench produced (`results.json`): the plan, the machine, and
//! for each variant its status and every test's samples, with the paired
//! ratios against the baseline. `tunlab report` and `tunlab compare` read
//! it back; files of older runs (sequential sets, no rounds) still load.

use crate::plan::Plan;
use crate::sample::{Sample, Test};
use crate::stats::{Ratio, Rule, Summary};
use crate::variant;
use crate::LabError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One test's results on one variant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestResult {
    pub test: String,
    pub spec: Test,
    pub unit: String,
    /// The primary figure over the kept samples (one a round).
    pub summary: Summary,
    /// The kept samples, each with its round.
    pub samples: Vec<Sample>,
    /// Rounds this test took part in (older runs: sets taken).
    pub attempts: usize,
    /// The interval against the baseline is within the rule (the
    /// baseline itself: every other variant's is; older runs: the set's
    /// spread was).
    pub settled: bool,
    /// Rounds stopped because the run's time budget was spent.
    #[serde(default)]
    pub budget_spent: bool,
    pub error: Option<String>,
    /// The primary figure against the baseline's, paired by round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<Ratio>,
    /// Service demand (CPU per KB moved) against the baseline's, paired
    /// by round (the CPU cost of the throughput and RR tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand_ratio: Option<Ratio>,
    /// Samples the noise guard marked and that were taken again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retaken: Vec<Sample>,
}

impl TestResult {
    /// Kept samples the guard marked (retakes ran out or were not
    /// allowed).
    pub fn marked(&self) -> usize {
        self.samples
            .iter()
            .filter(|s| s.noise.as_ref().is_some_and(|n| n.marked.is_some()))
            .count()
    }
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
        ("ping", "iputils-ping"),
        ("ss", "iproute2"),
    ] {
        if !variant::on_path(bin) {
            return Some(format!("{bin} not found: apt-get install {pkg}"));
        }
    }
    None
}

impl TestResult {
    /// This test's ratios against the same test of the baseline, paired
    /// by round: the primary figure, and the service demand.
    pub fn paired_with(&self, base: &TestResult) -> (Option<Ratio>, Option<Ratio>) {
        let spec = self.spec;
        let primary = |s: &Sample| Some(spec.primary(s)).filter(|x| *x > 0.0);
        let demand = |s: &Sample| s.service_demand_us_per_kb.filter(|x| *x > 0.0);
        (
            paired(&base.samples, &self.samples, primary),
            paired(&base.samples, &self.samples, demand),
        )
    }
}

/// Ratios of `f` between samples of `other` and `base` taken in the same
/// round.
fn paired(base: &[Sample], other: &[Sample], f: impl Fn(&Sample) -> Option<f64>) -> Option<Ratio> {
    let ratios: Vec<f64> = other
        .iter()
        .filter_map(|o| {
            let r = o.round?;
            let b = base.iter().find(|b| b.round == Some(r))?;
            Some(f(o)? / f(b)?)
        })
        .collect();
    Ratio::of(&ratios)
}

/// Fill in every test's ratios against `base` (a variant name) and
/// whether it settled under `rule`; `budget_spent`: the rounds were cut
/// by the budget (said of the tests that did not settle).
pub fn pair_all(r: &mut Results, base: Option<&str>, rule: Rule, budget_spent: bool) {
    let base_tests: Vec<TestResult> = base
        .and_then(|b| {
            r.variants
                .iter()
                .find(|v| v.variant == b && v.status == "ok")
        })
        .map(|v| v.tests.clone())
        .unwrap_or_default();
    let is_base = |name: &str| base == Some(name);
    for v in r.variants.iter_mut().filter(|v| !is_base(&v.variant)) {
        for t in &mut v.tests {
            let b = base_tests
                .iter()
                .find(|b| b.test == t.test && b.error.is_none());
            match b {
                Some(b) if t.error.is_none() => {
                    (t.ratio, t.demand_ratio) = t.paired_with(b);
                    t.settled = t
                        .ratio
                        .as_ref()
                        .is_some_and(|x| x.half_width_pct() <= rule.max_ci_pct);
                }
                _ => t.settled = t.error.is_none() && t.samples.len() >= rule.min_rounds,
            }
            t.budget_spent = budget_spent && !t.settled;
        }
    }
    // The baseline's test settled when every other variant's did.
    let settled_of = |name: &str, r: &Results| {
        r.variants
            .iter()
            .filter(|v| !is_base(&v.variant) && v.status == "ok")
            .flat_map(|v| {
                v.tests
                    .iter()
                    .filter(|t| t.test == name && t.error.is_none())
            })
            .all(|t| t.settled)
    };
    let flags: Vec<(String, bool)> = base_tests
        .iter()
        .map(|t| (t.test.clone(), t.error.is_none() && settled_of(&t.test, r)))
        .collect();
    if let Some(v) = r.variants.iter_mut().find(|v| is_base(&v.variant)) {
        for t in &mut v.tests {
            let s = flags.iter().any(|(n, s)| *n == t.test && *s);
            t.settled = s;
            t.budget_spent = budget_spent && !s;
        }
    }
}
/// A per-run folder for configuration files and failed tools' output.
pub fn run_dir(out: &std::path::Path) -> Result<std::path::PathBuf, LabError> {
    std::fs::create_dir_all(out).map_err(|err| LabError::Io {
        path: out.display().to_string(),
        err,
    })?;
    Ok(out.to_path_buf())
}
