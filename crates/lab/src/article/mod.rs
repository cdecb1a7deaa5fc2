//! The five reference articles as experiments: each one's question, its
//! testbed, the lab plan that rebuilds its experiment here, and its
//! findings written as checks on what the lab measures
//! (`tunlab bench --article NAME`).
//!
//! A finding is a sentence with the article's figures and one or more
//! checks. A ratio check pairs two cells of a run round by round (as the
//! lab pairs every variant with its baseline) and asks whether the
//! ratio's 95 % interval lies on the article's side of a line: wholly
//! there, the finding **holds here**; otherwise it **does not hold here**,
//! ruled out (the interval wholly on the other side) or not shown (the
//! interval reaches the line; see [`Verdict`]). A check
//! on hardware this machine lacks says what would test it. [`catalog`]
//! holds the five articles, [`page`] prints and draws the findings.

pub mod catalog;
pub mod page;
#[cfg(test)]
mod tests;

use crate::plan::Plan;
use crate::results::{Results, TestResult};
use crate::sample::{Kind, Sample, Test};
use crate::stats::Ratio;
use crate::variant::Variant;
use serde::Serialize;

/// One of the reference articles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Article {
    GeneveVsVxlan,
    VxlanOffload,
    TrexGenevePvp,
    Qinq,
    SttGre,
}

impl Article {
    pub const ALL: [Article; 5] = [
        Article::GeneveVsVxlan,
        Article::VxlanOffload,
        Article::TrexGenevePvp,
        Article::Qinq,
        Article::SttGre,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Article::GeneveVsVxlan => "geneve-vs-vxlan",
            Article::VxlanOffload => "vxlan-offload",
            Article::TrexGenevePvp => "trex-geneve-pvp",
            Article::Qinq => "qinq",
            Article::SttGre => "stt-gre",
        }
    }

    /// `--article NAME[,NAME…]` or `all`, in the order given.
    pub fn parse_list(s: &str) -> Result<Vec<Article>, String> {
        let mut out = Vec::new();
        for name in s.split(',').map(str::trim) {
            if name == "all" {
                out.extend(Article::ALL);
                continue;
            }
            let a = Article::ALL
                .into_iter()
                .find(|a| a.name() == name)
                .ok_or_else(|| {
                    format!(
                        "'{name}' is not an article; valid: {}, all",
                        Article::ALL.map(Article::name).join(", ")
                    )
                })?;
            out.push(a);
        }
        out.dedup();
        Ok(out)
    }

    /// The article as data: see [`catalog`].
    pub fn spec(self) -> Spec {
        catalog::spec(self)
    }
}

/// An article's testbed, as it describes it.
#[derive(Debug, Clone, Serialize)]
pub struct Testbed {
    pub machines: &'static str,
    pub network: &'static str,
    pub software: &'static str,
    pub method: &'static str,
}

/// How an article's experiment is run here.
#[derive(Debug, Clone)]
pub enum Experiment {
    /// The lab with a plan per profile (`quick`, `full`).
    Lab(fn(&str) -> Plan),
    /// `tunlab bench --pvp` (the generator's zero-loss search through a
    /// node, on each datapath).
    Pvp,
}

/// One article: what it asked, on what, and what it found.
#[derive(Debug, Clone)]
pub struct Spec {
    pub article: Article,
    pub title: &'static str,
    pub date: &'static str,
    /// The file under shared/reference.
    pub file: &'static str,
    pub question: &'static str,
    pub testbed: Testbed,
    /// The article's systems and what stands for each here.
    pub stands_for: Vec<(&'static str, &'static str)>,
    pub experiment: Experiment,
    pub findings: Vec<Finding>,
    /// Differences between the article's testbed and this one that
    /// decide a verdict.
    pub gaps: Vec<&'static str>,
    /// The charts the article drew, redrawn with a lab run's data.
    pub charts: Vec<Axes>,
}

/// One of the charts an article drew: its title, the figure on its axis
/// and the tests along it. Redrawn here as the article drew it, a group
/// per test (its scenario or message size) and a bar per variant (its
/// systems), with this run's samples ([`page::charts`]).
#[derive(Debug, Clone, Copy)]
pub struct Axes {
    pub title: &'static str,
    pub metric: Metric,
    pub tests: Sel,
}

impl Spec {
    /// The full version's least duration by its plan: its samples (or
    /// trials) alone at the fewest rounds; set-up, the tools' start and
    /// retaken samples come on top.
    pub fn full_least(&self) -> String {
        match &self.experiment {
            Experiment::Lab(plan_of) => {
                let p = plan_of("full");
                let per_round: u64 = p.tests.iter().map(|t| u64::from(p.seconds_of(t))).sum();
                let s = per_round * p.variants.len() as u64 * p.rule.min_rounds as u64;
                format!(
                    "at least {} min of samples ({} variants × {} tests, {} s a sample, {} rounds), up to {} min at {} rounds while a check reaches its line, is clear of it by less than its half-width, or is wider than ±{} % (its cells alone; --budget caps it)",
                    s.div_ceil(60),
                    p.variants.len(),
                    p.tests.len(),
                    p.seconds,
                    p.rule.min_rounds,
                    (s * p.rule.max_rounds as u64 / p.rule.min_rounds.max(1) as u64).div_ceil(60),
                    p.rule.max_rounds,
                    p.rule.max_ci_pct,
                )
            }
            // `tunlab bench --pvp --profile full`: six sizes, each a 30-s
            // trial at the top rate and a 30-s validation at the least,
            // on two datapaths; the search's trials come between.
            Experiment::Pvp => "at least 12 min of trials (6 frame sizes × a 30-s top-rate trial and a 30-s validation × 2 datapaths), plus the search's 30-s trials between".into(),
        }
    }
}

/// A finding: the article's claim in a sentence (with its figures) and
/// the checks that test it here.
#[derive(Debug, Clone)]
pub struct Finding {
    pub id: &'static str,
    pub says: &'static str,
    pub checks: Vec<Check>,
    /// The difference between the article's testbed and this one that
    /// bears on this finding, said beside a verdict that is not "holds".
    pub gap: Option<&'static str>,
}

/// What a check compares.
#[derive(Debug, Clone)]
pub enum Check {
    Ratio(RatioCheck),
    Pvp(PvpCheck),
    /// Needs hardware (or software) this machine does not have.
    NotHere {
        needs: &'static str,
    },
}

/// Which figure of a sample a ratio is taken of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// The test's own figure: Gbit/s, trans/s, or CPU % at a fixed rate.
    Primary,
    /// Service demand: CPU µs per KB moved.
    Demand,
    /// The whole machine's CPU busy, %.
    Cpu,
}

impl Metric {
    fn of(self, test: &Test, s: &Sample) -> Option<f64> {
        let x = match self {
            Metric::Primary => test.primary(s),
            Metric::Demand => s.service_demand_us_per_kb?,
            Metric::Cpu => s.cpu.system_pct,
        };
        (x.is_finite() && x > 0.0).then_some(x)
    }

    fn name(self, test: &Test) -> &'static str {
        match self {
            Metric::Primary => test.unit(),
            Metric::Demand => "CPU µs/KB",
            Metric::Cpu => "CPU %",
        }
    }
}

/// Which of a variant's tests a check reads.
#[derive(Debug, Clone, Copy)]
pub enum Sel {
    /// These tests by name.
    Named(&'static [&'static str]),
    /// Every test of these kinds without a fixed rate.
    Kinds(&'static [Kind]),
    /// Every fixed-rate (CPU) test.
    FixedRate,
}

impl Sel {
    fn takes(self, t: &TestResult) -> bool {
        match self {
            Sel::Named(names) => names.contains(&t.test.as_str()),
            Sel::Kinds(kinds) => t.spec.rate_gbit.is_none() && kinds.contains(&t.spec.kind),
            Sel::FixedRate => t.spec.rate_gbit.is_some(),
        }
    }
}

/// Where the article's figure must lie, as a ratio.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Claim {
    /// Above this line ("almost twice": 1.8).
    Above(f64),
    /// Below this line ("a quarter": 0.35).
    Below(f64),
    /// More than 1, by the article's ratio (e.g. 12.8 % more: 1.128).
    /// Does not hold when the interval lies below 1, or below the
    /// article's ratio: a gain of the article's size is ruled out here.
    Gain(f64),
    /// Less than 1, by the article's ratio (e.g. 0.88): the mirror of
    /// [`Claim::Gain`].
    Saving(f64),
}

impl Claim {
    pub fn text(self) -> String {
        match self {
            Claim::Above(x) => format!("> {x:.2}x"),
            Claim::Below(x) => format!("< {x:.2}x"),
            Claim::Gain(a) => format!("> 1.00x (the article: {a:.2}x)"),
            Claim::Saving(a) => format!("< 1.00x (the article: {a:.2}x)"),
        }
    }

    /// The line across which the verdict turns: the article's figure
    /// for `Above` and `Below`, no change (1.0) for `Gain` and `Saving`.
    pub fn line(self) -> f64 {
        match self {
            Claim::Above(x) | Claim::Below(x) => x,
            Claim::Gain(_) | Claim::Saving(_) => 1.0,
        }
    }

    /// The interval reaches the line: another run could turn the verdict.
    pub fn reached(self, r: &Ratio) -> bool {
        r.lo <= self.line() && self.line() <= r.hi
    }

    /// The interval clears the line by its own half-width (the ratio is
    /// two half-widths from it, on logs): a second run as precise would
    /// turn the verdict only with an estimate off by a half-width the
    /// wrong way, about one run in forty. Just clear, it would in one of
    /// two.
    pub fn settled(self, r: &Ratio) -> bool {
        let half = (r.hi.ln() - r.lo.ln()) / 2.0;
        (r.ratio.ln() - self.line().ln()).abs() >= 2.0 * half
    }

    /// The verdict of an interval [lo, hi], and whether the interval lies
    /// clear of the line (see [`Verdict`]).
    fn judge(self, lo: f64, hi: f64) -> Verdict {
        let l = self.line();
        let (past, short) = match self {
            Claim::Above(_) => (lo > l, hi < l),
            Claim::Below(_) => (hi < l, lo > l),
            Claim::Gain(a) => (lo > l, hi < l || hi < a),
            Claim::Saving(a) => (hi < l, lo > l || lo > a),
        };
        Verdict {
            outcome: if past {
                Outcome::Holds
            } else {
                Outcome::DoesNotHold
            },
            clear: past || short,
        }
    }
}

/// A ratio check's verdict. The finding is the article's claim, so it
/// **holds here** only when the whole interval is on the article's side
/// of its line: the run has shown it at 95 %. Otherwise it **does not
/// hold here**, in one of two ways: the interval lies wholly on the other
/// side (`clear`: the article's claim is ruled out here), or it reaches
/// the line (not `clear`: the claim is not shown, and the figure says by
/// how much). The rounds go on for the checks whose intervals reach the
/// lines their verdicts turn on, then for those clear by less than a
/// half-width ([`open_cells`]); the verdict at the end is given either way, so that
/// every finding gets one and two runs differ only where a truth lies
/// within an interval's width past the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub outcome: Outcome,
    pub clear: bool,
}

/// `a`'s figure over `b`'s, paired by round; over several tests, a
/// round's ratio is the geometric mean of its tests' (each of `a`'s tests
/// against the same test of `b`, or against `b_test` when given).
#[derive(Debug, Clone)]
pub struct RatioCheck {
    pub a: Variant,
    pub b: Variant,
    pub tests: Sel,
    pub b_test: Option<&'static str>,
    pub metric: Metric,
    pub claim: Claim,
}

/// Checks on the PVP zero-loss searches (`pvp-ebpf.json`,
/// `pvp-userspace.json`): points found by a search, not intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PvpCheck {
    /// Every frame size passes with no loss at the generator's top rate
    /// (the eBPF node): the node is not what limits.
    NoLossAtTop,
    /// From the smallest frame to the largest the bit rate holds (within
    /// a quarter): frames per second fall as frames grow, as on a link
    /// that limits by bits (the eBPF node).
    BitRateHolds,
    /// The software generator's top rate with the smallest frame is below
    /// this many Mfps.
    GeneratorBelowMfps(u32),
    /// The userspace node's zero-loss rate is below the eBPF node's at
    /// every frame size.
    UserspaceBelowKernel,
}

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Holds,
    DoesNotHold,
    CannotTest,
    /// What the check reads was not measured in this run (another profile
    /// measures it).
    NotRun,
}

impl Outcome {
    pub fn text(self) -> &'static str {
        match self {
            Outcome::Holds => "holds here",
            Outcome::DoesNotHold => "does not hold here",
            Outcome::CannotTest => "cannot be tested here",
            Outcome::NotRun => "not in this run",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    pub finding: &'static str,
    /// What was compared, e.g. "tunlab-ebpf-qinq / kernel-vxlan-sw, Gbit/s,
    /// tcp_stream-16384B-1i".
    pub compared: String,
    /// The line the figure must be on the article's side of.
    pub claim: String,
    /// The figure here, e.g. "1.12x [1.05, 1.19]".
    pub here: String,
    pub ratio: Option<Ratio>,
    pub outcome: Outcome,
    /// A ratio check's interval lies clear of its line (the rounds
    /// decided it); false when a "does not hold" means "not shown": the
    /// interval reaches the line. True for the other kinds of check.
    pub clear: bool,
    /// A ratio check clears the line its verdict turns on by its own
    /// half-width ([`Claim::settled`]); false: a second run may well
    /// give the other verdict, and the row says so. True for the other
    /// kinds of check.
    pub settled: bool,
}

/// The end of a check's text when its variant is not in the profile's
/// plan (the variant's name comes before it).
pub const PLAN_LEAVES_OUT: &str = " is not in this profile's plan";

/// What an article's run measured.
#[derive(Debug, Clone, Copy)]
pub enum Measured<'a> {
    Lab(&'a Results),
    /// The PVP searches' rows with the node on each datapath.
    Pvp {
        ebpf: &'a [PvpRow],
        userspace: &'a [PvpRow],
    },
}

/// Every check of `spec` against what its run measured.
pub fn judge(spec: &Spec, m: Measured) -> Vec<Checked> {
    let mut out = Vec::new();
    for f in &spec.findings {
        for c in &f.checks {
            out.push(match (c, m) {
                (Check::NotHere { needs }, _) => not_here(f.id, needs),
                (Check::Ratio(rc), Measured::Lab(r)) => judge_ratio(f.id, rc, r),
                (Check::Pvp(p), Measured::Pvp { ebpf, userspace }) => {
                    pvp_check(f.id, *p, ebpf, userspace)
                }
                (Check::Ratio(rc), _) => not_run(
                    f.id,
                    format!("{} / {}", rc.a.name(), rc.b.name()),
                    "needs a lab run".into(),
                ),
                (Check::Pvp(p), _) => not_run(f.id, format!("{p:?}"), "needs a PVP run".into()),
            });
        }
    }
    out
}

fn not_here(finding: &'static str, needs: &str) -> Checked {
    Checked {
        finding,
        compared: "-".into(),
        claim: "-".into(),
        here: format!("needs {needs}"),
        ratio: None,
        outcome: Outcome::CannotTest,
        clear: true,
        settled: true,
    }
}

fn not_run(finding: &'static str, compared: String, why: String) -> Checked {
    Checked {
        finding,
        compared,
        claim: "-".into(),
        here: why,
        ratio: None,
        outcome: Outcome::NotRun,
        clear: true,
        settled: true,
    }
}

fn tests_of(r: &Results, v: Variant) -> Option<&[TestResult]> {
    r.variants
        .iter()
        .find(|x| x.variant == v.name() && x.status == "ok")
        .map(|x| x.tests.as_slice())
}

/// A cell whose samples a check may read: one without an error, or one
/// whose rounds Ctrl-C ended (the samples taken before it stand).
fn usable(t: &TestResult) -> bool {
    t.error.as_deref().is_none_or(|e| e == "interrupted")
}

/// A ratio check: per-round ratios of every selected test, pooled.
pub fn judge_ratio(finding: &'static str, c: &RatioCheck, r: &Results) -> Checked {
    let mut compared = format!("{} / {}", c.a.name(), c.b.name());
    for v in [c.a, c.b] {
        if !r.plan.variants.contains(&v) {
            let why = format!("{}{PLAN_LEAVES_OUT}", v.name());
            return not_run(finding, compared, why);
        }
    }
    let (Some(at), Some(bt)) = (tests_of(r, c.a), tests_of(r, c.b)) else {
        return not_run(
            finding,
            compared,
            "a variant did not run (see the report)".into(),
        );
    };
    // Each test's ratio per round; a round's ratio is their geometric
    // mean (the effect over the article's scenarios, as it averaged
    // them), taken only from rounds in which every test has one.
    let mut by_test: Vec<std::collections::BTreeMap<usize, f64>> = Vec::new();
    let mut names = Vec::new();
    let mut unit = "";
    for t in at.iter().filter(|t| c.tests.takes(t) && usable(t)) {
        let other = c.b_test.unwrap_or(&t.test);
        let Some(b) = bt.iter().find(|b| b.test == other && usable(b)) else {
            continue;
        };
        // a's sample against b's of the same round, each read with its
        // own test's figure.
        by_test.push(
            t.samples
                .iter()
                .filter_map(|s| {
                    let round = s.round?;
                    let x = c.metric.of(&t.spec, s)?;
                    let base = b.samples.iter().find(|y| y.round == Some(round))?;
                    let r = x / c.metric.of(&b.spec, base)?;
                    r.is_finite().then_some((round, r.ln()))
                })
                .collect(),
        );
        unit = c.metric.name(&t.spec);
        names.push(match c.b_test {
            Some(bt) => format!("{} / {bt}", t.test),
            None => t.test.clone(),
        });
    }
    let ratios: Vec<f64> = by_test
        .first()
        .map(|first| {
            first
                .keys()
                .filter_map(|round| {
                    let logs: Option<Vec<f64>> =
                        by_test.iter().map(|m| m.get(round).copied()).collect();
                    let logs = logs?;
                    Some((logs.iter().sum::<f64>() / logs.len() as f64).exp())
                })
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        return not_run(finding, compared, "its tests were not in this run".into());
    }
    compared = format!("{compared}, {unit}, {}", names.join(" + "));
    let Some(ratio) = Ratio::of(&ratios) else {
        return not_run(finding, compared, "fewer than two paired rounds".into());
    };
    let v = c.claim.judge(ratio.lo, ratio.hi);
    let mut here = format!("{:.2}x [{:.2}, {:.2}]", ratio.ratio, ratio.lo, ratio.hi);
    let settled = c.claim.settled(&ratio);
    if !v.clear {
        here.push_str(" (not shown: the interval reaches the line)");
    } else if !settled {
        here.push_str(" (near the line: a second run may differ)");
    }
    Checked {
        finding,
        compared,
        claim: c.claim.text(),
        here,
        outcome: v.outcome,
        clear: v.clear,
        settled,
        ratio: Some(ratio),
    }
}

/// The cells the rounds past the first go to ([`crate::run::Focus`]),
/// by what they have gathered so far (`r`): those of the ratio checks of
/// `spec` whose intervals still reach the lines their verdicts turn on
/// ([`Claim::line`]), so that the rounds go to the article's open
/// questions rather than to ratios against the plan's baseline that no
/// finding reads. When no interval reaches its line, those of the checks
/// not yet settled ([`Claim::settled`]: clear by less than a half-width,
/// so that a second run would as likely turn the verdict as not) or
/// wider than the run's precision (`±max_ci_pct`). Empty ends the
/// rounds: never on the round that happened to clear the last line,
/// which would favour whichever verdict came first (optional stopping),
/// but by margin and precision, the budget or the most rounds.
pub fn open_cells(spec: &Spec, r: &Results) -> Vec<(Variant, String)> {
    let precision = r.plan.rule.max_ci_pct;
    let cells = |open: &dyn Fn(Claim, &Ratio) -> bool| {
        let mut cells = Vec::new();
        for f in &spec.findings {
            for c in &f.checks {
                let Check::Ratio(rc) = c else { continue };
                let Some(x) = judge_ratio(f.id, rc, r).ratio else {
                    continue;
                };
                if !open(rc.claim, &x) {
                    continue;
                }
                let (Some(at), Some(bt)) = (tests_of(r, rc.a), tests_of(r, rc.b)) else {
                    continue;
                };
                for t in at.iter().filter(|t| rc.tests.takes(t) && usable(t)) {
                    let other = rc.b_test.unwrap_or(&t.test);
                    if bt.iter().any(|b| b.test == other && usable(b)) {
                        cells.push((rc.a, t.test.clone()));
                        cells.push((rc.b, other.to_string()));
                    }
                }
            }
        }
        cells.sort_by(|x, y| (x.0.name(), &x.1).cmp(&(y.0.name(), &y.1)));
        cells.dedup();
        cells
    };
    let reached = cells(&|c, x| c.reached(x));
    if !reached.is_empty() {
        return reached;
    }
    cells(&|c, x| !c.settled(x) || x.half_width_pct() > precision)
}

/// One frame size of a PVP search, as `tunlab gen --json` writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct PvpRow {
    pub frame: u32,
    /// The zero-loss rate, frames/s (`None`: no rate passed).
    pub rate_fps: Option<f64>,
    /// No loss at the generator's top rate.
    pub generator_limited: bool,
    /// The generator's top rate (its first, unpaced trial), frames/s.
    pub top_fps: Option<f64>,
}

/// The rows of a `tunlab gen --json` file.
pub fn pvp_rows(json: &serde_json::Value) -> Result<Vec<PvpRow>, String> {
    let rows = json["rows"].as_array().ok_or("no \"rows\"")?;
    rows.iter()
        .map(|r| {
            let frame = r["frame_size"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .or_else(|| r["frame_size"].as_u64().map(|x| x as u32))
                .ok_or_else(|| format!("a row without a frame size: {r}"))?;
            let top = r["search"]["steps"].as_array().and_then(|s| {
                s.iter()
                    .find(|x| x["phase"] == "max")
                    .and_then(|x| x["outcome"]["tx_pps"].as_f64())
            });
            Ok(PvpRow {
                frame,
                rate_fps: r["search"]["rate_pps"].as_f64(),
                generator_limited: r["search"]["generator_limited"].as_bool().unwrap_or(false),
                top_fps: top,
            })
        })
        .collect()
}

fn kfps(x: Option<f64>) -> String {
    x.map_or("none".into(), |x| format!("{:.0} kfps", x / 1e3))
}

fn pvp_check(finding: &'static str, p: PvpCheck, k: &[PvpRow], u: &[PvpRow]) -> Checked {
    let done = |compared: &str, claim: &str, here: String, ok: Option<bool>| Checked {
        finding,
        compared: compared.into(),
        claim: claim.into(),
        here,
        ratio: None,
        outcome: match ok {
            Some(true) => Outcome::Holds,
            Some(false) => Outcome::DoesNotHold,
            None => Outcome::NotRun,
        },
        clear: true,
        settled: true,
    };
    let (first, last) = (k.first(), k.last());
    match p {
        PvpCheck::NoLossAtTop => {
            let here = k
                .iter()
                .map(|r| format!("{} B: {} of {}", r.frame, kfps(r.rate_fps), kfps(r.top_fps)))
                .collect::<Vec<_>>()
                .join("; ");
            let ok = (!k.is_empty()).then(|| k.iter().all(|r| r.generator_limited));
            done(
                "tunlab-ebpf node: zero-loss rate / generator's top rate",
                "every size at the top",
                here,
                ok,
            )
        }
        PvpCheck::BitRateHolds => {
            let (Some(a), Some(b)) = (first, last) else {
                return done("-", "-", "no PVP rows".into(), None);
            };
            let gbit = |r: &PvpRow| r.rate_fps.map(|x| x * f64::from(r.frame) * 8.0 / 1e9);
            let here = format!(
                "{} B: {} = {:.2} Gbit/s; {} B: {} = {:.2} Gbit/s",
                a.frame,
                kfps(a.rate_fps),
                gbit(a).unwrap_or(0.0),
                b.frame,
                kfps(b.rate_fps),
                gbit(b).unwrap_or(0.0)
            );
            let ok = match (gbit(a), gbit(b)) {
                (Some(ga), Some(gb)) if a.frame < b.frame && ga > 0.0 => {
                    Some((0.75..=1.0 / 0.75).contains(&(gb / ga)))
                }
                _ => None,
            };
            done(
                "tunlab-ebpf node: zero-loss Gbit/s, largest frame / smallest",
                "within 0.75x..1.33x",
                here,
                ok,
            )
        }
        PvpCheck::GeneratorBelowMfps(m) => {
            let top = first.and_then(|r| r.top_fps);
            let here = format!(
                "{} at {} B",
                top.map_or("none".into(), |x| format!("{:.2} Mfps", x / 1e6)),
                first.map_or(0, |r| r.frame)
            );
            done(
                "tunlab gen's top rate, smallest frame",
                &format!("< {m} Mfps"),
                here,
                top.map(|x| x < f64::from(m) * 1e6),
            )
        }
        PvpCheck::UserspaceBelowKernel => {
            let pairs: Vec<(u32, Option<f64>, Option<f64>)> = k
                .iter()
                .filter_map(|a| {
                    let b = u.iter().find(|b| b.frame == a.frame)?;
                    Some((a.frame, b.rate_fps, a.rate_fps))
                })
                .collect();
            let here = pairs
                .iter()
                .map(|(f, us, kr)| format!("{f} B: {} vs {}", kfps(*us), kfps(*kr)))
                .collect::<Vec<_>>()
                .join("; ");
            let ok = (!pairs.is_empty()).then(|| {
                pairs
                    .iter()
                    .all(|(_, us, kr)| us.unwrap_or(0.0) < kr.unwrap_or(0.0))
            });
            done(
                "zero-loss rate: tunlab userspace node vs tunlab-ebpf node",
                "userspace below at every size",
                here,
                ok,
            )
        }
    }
}
