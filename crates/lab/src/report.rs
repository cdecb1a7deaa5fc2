//! Tables in the articles' shape: one row per test, one column per
//! variant: the figures, then each variant's ratio to the baseline with
//! its 95 % interval and a verdict (paired by round), its CPU per KB
//! moved likewise, CPU, latency, and what the noise guard saw. Results of
//! runs made before rounds existed get the percent difference of means.

use crate::results::{Results, TestResult, VariantResult};
use crate::sample::Test;
use crate::stats::{Ratio, Summary, Verdict};
use std::fmt::Write;

fn cell(t: Option<&TestResult>) -> String {
    match t {
        None => "—".into(),
        Some(t) if t.error.is_some() => "FAILED".into(),
        Some(t) => {
            let s = t.summary;
            let v = fmt_value(s.mean);
            // At a fixed rate, say what rate was reached: CPU at a lower
            // rate is no comparison.
            let at = match t.spec.rate_gbit {
                Some(_) => {
                    let g: Vec<f64> = t.samples.iter().filter_map(|s| s.gbit_s).collect();
                    format!(" at {:.2}G", Summary::of(&g).mean)
                }
                None => String::new(),
            };
            format!("{v} ±{:.1}%{at}", s.cv_pct)
        }
    }
}

fn fmt_value(x: f64) -> String {
    if x >= 1e5 {
        format!("{:.0}k", x / 1e3)
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

pub fn find<'a>(v: &'a VariantResult, test: &str) -> Option<&'a TestResult> {
    v.tests.iter().find(|t| t.test == test)
}

/// A table: a header row and rows of cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub title: String,
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// The variants that ran, and the tests in the order first seen.
pub fn ran(r: &Results) -> Vec<&VariantResult> {
    r.variants.iter().filter(|v| v.status == "ok").collect()
}

pub fn test_names(r: &Results) -> Vec<&str> {
    let mut t: Vec<&str> = Vec::new();
    for v in ran(r) {
        for x in &v.tests {
            if !t.contains(&x.test.as_str()) {
                t.push(&x.test);
            }
        }
    }
    t
}

fn per_test(
    r: &Results,
    title: String,
    tests: &[&str],
    cell: impl Fn(&TestResult) -> String,
) -> Table {
    let ran = ran(r);
    let mut head = vec!["test".to_string()];
    head.extend(ran.iter().map(|v| v.variant.clone()));
    let rows = tests
        .iter()
        .map(|t| {
            let mut row = vec![t.to_string()];
            row.extend(ran.iter().map(|v| match find(v, t) {
                None => "—".into(),
                Some(x) if x.error.is_some() => "FAILED".into(),
                Some(x) => cell(x),
            }));
            row
        })
        .collect();
    Table { title, head, rows }
}

/// Every table of a run: the primary figures side by side, the percent
/// difference against `baseline`, CPU, and latency of the
/// request/response tests.
pub fn build(r: &Results, baseline: Option<&str>) -> Vec<Table> {
    let r = &paired(r, baseline);
    let tests = test_names(r);
    let ran = ran(r);
    let mut out = Vec::new();
    let mut main = per_test(
        r,
        "mean of the kept samples, ± standard deviation in % of the mean".into(),
        &tests,
        |t| cell(Some(t)),
    );
    main.head.insert(1, "unit".into());
    for (row, t) in main.rows.iter_mut().zip(&tests) {
        let unit = ran
            .iter()
            .find_map(|v| find(v, t))
            .map_or("", |x| x.unit.as_str());
        row.insert(1, unit.into());
    }
    out.push(main);
    if r.variants
        .iter()
        .any(|v| v.tests.iter().any(|t| t.ratio.is_some()))
    {
        out.extend(ratio_tables(r, baseline.unwrap_or_default(), &tests));
    } else {
        out.extend(percent_table(baseline, &ran, &tests));
    }
    out.extend(cpu_tables(r, &tests));
    out.extend(latency_tables(r, &ran, &tests));
    if ran.iter().any(|v| {
        v.tests
            .iter()
            .any(|t| t.samples.iter().any(|s| s.noise.is_some()))
    }) {
        out.push(noise_table(r));
    }
    out
}

/// Each variant's percent difference against the baseline, test by test
/// (a run without paired rounds); none without a baseline that ran.
fn percent_table(baseline: Option<&str>, ran: &[&VariantResult], tests: &[&str]) -> Option<Table> {
    let base = baseline.and_then(|b| ran.iter().find(|v| v.variant == b))?;
    let others: Vec<&&VariantResult> = ran.iter().filter(|v| v.variant != base.variant).collect();
    let mut head = vec!["test".to_string()];
    head.extend(others.iter().map(|v| v.variant.clone()));
    let mut sums = vec![(0.0, 0usize); others.len()];
    let mut rows = Vec::new();
    for t in tests {
        let mut row = vec![t.to_string()];
        for (k, v) in others.iter().enumerate() {
            match diff(find(base, t), find(v, t)) {
                Some(d) => {
                    sums[k].0 += d;
                    sums[k].1 += 1;
                    row.push(format!("{d:+.1}%"));
                }
                None => row.push("—".into()),
            }
        }
        rows.push(row);
    }
    let mut avg = vec!["average".to_string()];
    avg.extend(sums.iter().map(|(s, n)| {
        if *n > 0 {
            format!("{:+.1}%", s / *n as f64)
        } else {
            "—".into()
        }
    }));
    rows.push(avg);
    Some(Table {
            title: format!(
                "percent difference against {} (higher is better; for CPU % at a fixed rate and a first packet's delay, lower is)",
                base.variant
            ),
            head,
            rows,
        })
}

/// CPU: the whole machine's (or both hosts'), the datapath's, service
/// demand; on real hosts each host's own.
fn cpu_tables(r: &Results, tests: &[&str]) -> Vec<Table> {
    let mut out = Vec::new();
    out.push(per_test(
        r,
        if r.hosts.is_empty() {
            "CPU: whole machine in % of all CPUs / datapath processes in % of one CPU; service demand in µs per KB".into()
        } else {
            "CPU: both hosts together in % of all their CPUs / datapath processes in % of one CPU; service demand in µs per KB".into()
        },
        tests,
        |t| {
            let m = Summary::of(&t.samples.iter().map(|s| s.cpu.system_pct).collect::<Vec<_>>());
            let d = Summary::of(&t.samples.iter().map(|s| s.cpu.datapath_pct).collect::<Vec<_>>());
            let sd: Vec<f64> = t.samples.iter().filter_map(|s| s.service_demand_us_per_kb).collect();
            let mut c = format!("{:.1} / {:.0}", m.mean, d.mean);
            if !sd.is_empty() {
                c.push_str(&format!(" / {:.2}", Summary::of(&sd).mean));
            }
            c
        },
    ));
    // On real hosts: each host's own CPU (the articles' "CPU on each
    // host"), as each host's /proc counted it.
    if !r.hosts.is_empty() {
        let names: Vec<String> = r.hosts.iter().map(|h| h.dest.clone()).collect();
        out.push(per_test(
            r,
            format!(
                "CPU on each host: {} (whole host in % of its CPUs / datapath processes in % of one CPU)",
                names.join(" | ")
            ),
            tests,
            |t| {
                names
                    .iter()
                    .map(|n| {
                        let of = |f: fn(&crate::cpu::Usage) -> f64| {
                            let xs: Vec<f64> = t
                                .samples
                                .iter()
                                .flat_map(|s| s.hosts_cpu.iter())
                                .filter(|h| &h.host == n)
                                .map(|h| f(&h.usage))
                                .collect();
                            Summary::of(&xs).mean
                        };
                        format!("{:.1} / {:.0}", of(|u| u.system_pct), of(|u| u.datapath_pct))
                    })
                    .collect::<Vec<_>>()
                    .join(" | ")
            },
        ));
    }
    out
}

/// Request/response latency and first-packet delay, for the tests that
/// measured them.
fn latency_tables(r: &Results, ran: &[&VariantResult], tests: &[&str]) -> Vec<Table> {
    let mut out = Vec::new();
    let rr = tests_where(ran, tests, |k| k.is_rr());
    if !rr.is_empty() {
        out.push(per_test(
            r,
            "round-trip latency in µs: mean / p50 / p99 (tunlab rr)".into(),
            &rr,
            |t| {
                let f = |g: fn(&crate::sample::Sample) -> Option<f64>| {
                    mean_of(t.samples.iter().filter_map(g).collect())
                };
                format!(
                    "{} / {} / {}",
                    f(|s| s.rtt_mean_us),
                    f(|s| s.rtt_p50_us),
                    f(|s| s.rtt_p99_us)
                )
            },
        ));
    }
    let fp = tests_where(ran, tests, |k| k == crate::sample::Kind::FirstPacket);
    if !fp.is_empty() {
        out.push(per_test(
            r,
            "a new flow's first packet, one-way delay in µs (flow caches emptied before each probe): first p50 / p99, then the next packet's p50 / p99".into(),
            &fp,
            |t| {
                let f = |g: fn(&crate::sample::FirstPacket) -> f64| {
                    mean_of(
                        t.samples
                            .iter()
                            .filter_map(|s| s.first_packet.as_ref().map(g))
                            .collect(),
                    )
                };
                format!(
                    "{} / {} | {} / {}",
                    f(|x| x.first_p50_us),
                    f(|x| x.first_p99_us),
                    f(|x| x.next_p50_us),
                    f(|x| x.next_p99_us)
                )
            },
        ));
    }
    out
}

/// The tests (in `tests`' order) whose kind passes `keep`.
fn tests_where<'a>(
    ran: &[&VariantResult],
    tests: &[&'a str],
    keep: impl Fn(crate::sample::Kind) -> bool,
) -> Vec<&'a str> {
    tests
        .iter()
        .copied()
        .filter(|t| {
            ran.iter()
                .find_map(|v| find(v, t))
                .is_some_and(|x| keep(x.spec.kind))
        })
        .collect()
}

/// The mean of some samples' figure, rounded, or a dash for none.
fn mean_of(v: Vec<f64>) -> String {
    if v.is_empty() {
        "—".to_string()
    } else {
        format!("{:.0}", Summary::of(&v).mean)
    }
}

/// What did not run or failed, one line each.
pub fn problems(r: &Results) -> Vec<String> {
    let mut out = Vec::new();
    for v in r.variants.iter().filter(|v| v.status != "ok") {
        out.push(format!(
            "{} {}: {}",
            v.variant,
            v.status,
            v.reason.as_deref().unwrap_or("")
        ));
    }
    for v in ran(r) {
        for t in v.tests.iter().filter(|t| t.error.is_some()) {
            out.push(format!(
                "{} {} FAILED: {}",
                v.variant,
                t.test,
                t.error
                    .as_deref()
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("")
            ));
        }
    }
    out
}

/// The tables as terminal text; `baseline` names the reference variant.
pub fn tables(r: &Results, baseline: Option<&str>) -> String {
    let mut out = String::new();
    for (i, t) in build(r, baseline).iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "{}", t.title);
        let mut rows = vec![t.head.clone()];
        rows.extend(t.rows.iter().cloned());
        out.push_str(&grid(&rows));
    }
    for p in problems(r).into_iter().chain(unsettled(r, baseline)) {
        let _ = writeln!(out, "{p}");
    }
    out
}

fn diff(base: Option<&TestResult>, other: Option<&TestResult>) -> Option<f64> {
    let (b, o) = (base?, other?);
    if b.error.is_some() || o.error.is_some() || b.summary.mean == 0.0 {
        return None;
    }
    Some(100.0 * (o.summary.mean - b.summary.mean) / b.summary.mean)
}

/// Columns padded to their widest cell.
pub fn grid(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| format!("{s:<w$}", w = width[c]))
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
        if i == 0 {
            let _ = writeln!(
                out,
                "{}",
                width
                    .iter()
                    .map(|w| "-".repeat(*w))
                    .collect::<Vec<_>>()
                    .join("  ")
            );
        }
    }
    out
}

/// `r` with every test's ratios taken against `baseline` (the run's own,
/// or any other variant of the run).
pub fn paired(r: &Results, baseline: Option<&str>) -> Results {
    let mut p = r.clone();
    let budget = r
        .variants
        .iter()
        .any(|v| v.tests.iter().any(|t| t.budget_spent));
    crate::results::pair_all(&mut p, baseline, r.plan.rule, budget);
    p
}

/// Whether lower figures of `test` are the better ones (CPU at a fixed
/// rate, a first packet's delay).
pub fn lower_is_better(test: &Test) -> bool {
    test.rate_gbit.is_some() || test.kind == crate::sample::Kind::FirstPacket
}

/// The verdict in the words of `test`'s figure.
pub fn verdict_word(test: &Test, v: Verdict) -> &'static str {
    match (v, test.rate_gbit.is_some(), lower_is_better(test)) {
        (Verdict::Same, _, _) => "same",
        (Verdict::Higher, true, _) => "more CPU",
        (Verdict::Lower, true, _) => "less CPU",
        (Verdict::Higher, false, false) | (Verdict::Lower, false, true) => "faster",
        (Verdict::Higher, false, true) | (Verdict::Lower, false, false) => "slower",
    }
}

/// A service demand ratio's verdict.
pub fn demand_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Same => "same",
        Verdict::Higher => "more CPU",
        Verdict::Lower => "less CPU",
    }
}

/// "1.04 [0.99, 1.09]".
pub fn ratio_text(r: &Ratio) -> String {
    format!("{:.2} [{:.2}, {:.2}]", r.ratio, r.lo, r.hi)
}

/// A ratio cell: interval, verdict, and the rule's mark when the
/// interval is wider than it allows.
fn ratio_cell(
    t: &TestResult,
    r: Option<&Ratio>,
    word: impl Fn(Verdict) -> &'static str,
    max_pct: f64,
) -> String {
    match r {
        None if t.error.is_some() => "FAILED".into(),
        None => "—".into(),
        Some(r) => {
            let mut c = format!("{} {}", ratio_text(r), word(r.verdict()));
            if r.half_width_pct() > max_pct {
                c.push_str(&format!(" unsettled ±{:.1}%", r.half_width_pct()));
            }
            c
        }
    }
}

/// The paired tables: each variant's figure, and its CPU per KB moved,
/// against the baseline's.
fn ratio_tables(r: &Results, base: &str, tests: &[&str]) -> Vec<Table> {
    let others: Vec<&VariantResult> = ran(r).into_iter().filter(|v| v.variant != base).collect();
    let mut head = vec!["test".to_string()];
    head.extend(others.iter().map(|v| v.variant.clone()));
    let max = r.plan.rule.max_ci_pct;
    let rows = |pick: &dyn Fn(&TestResult) -> Option<String>| -> Vec<Vec<String>> {
        tests
            .iter()
            .filter(|t| others.iter().any(|v| find(v, t).and_then(pick).is_some()))
            .map(|t| {
                let mut row = vec![t.to_string()];
                row.extend(
                    others
                        .iter()
                        .map(|v| find(v, t).and_then(pick).unwrap_or_else(|| "—".into())),
                );
                row
            })
            .collect()
    };
    let main = rows(&|t| {
        Some(ratio_cell(
            t,
            t.ratio.as_ref(),
            |v| verdict_word(&t.spec, v),
            max,
        ))
    });
    let demand = rows(&|t| {
        t.demand_ratio
            .as_ref()
            .filter(|_| t.spec.rate_gbit.is_none())
            .map(|d| ratio_cell(t, Some(d), demand_word, max))
    });
    let mut out = vec![Table {
        title: format!(
            "ratio to {base}, paired by round: geometric mean [95 % interval] and verdict; 'unsettled': the interval is wider than ±{max}%"
        ),
        head: head.clone(),
        rows: main,
    }];
    if !demand.is_empty() {
        out.push(Table {
            title: format!(
                "CPU per KB moved (service demand), ratio to {base}, paired by round: below 1 costs less CPU"
            ),
            head,
            rows: demand,
        });
    }
    out
}

/// What the noise guard saw, per variant.
fn noise_table(r: &Results) -> Table {
    let mut rows = Vec::new();
    for v in ran(r) {
        let kept: Vec<&crate::sample::Sample> = v.tests.iter().flat_map(|t| &t.samples).collect();
        let all = || {
            v.tests
                .iter()
                .flat_map(|t| t.samples.iter().chain(&t.retaken))
                .filter_map(|s| s.noise.as_ref())
        };
        let marked: usize = v.tests.iter().map(|t| t.marked()).sum();
        let retaken: usize = v.tests.iter().map(|t| t.retaken.len()).sum();
        let steal = all().map(|n| n.steal_pct).fold(0.0, f64::max);
        let outside = all().map(|n| n.outside_pct).fold(0.0, f64::max);
        let busiest = all()
            .flat_map(|n| n.top.first())
            .max_by(|a, b| a.cpu_pct.total_cmp(&b.cpu_pct))
            .map(|b| format!("{} ({:.0}% of a CPU)", b.comm, b.cpu_pct))
            .unwrap_or_else(|| "—".into());
        rows.push(vec![
            v.variant.clone(),
            kept.len().to_string(),
            marked.to_string(),
            retaken.to_string(),
            format!("{steal:.1}"),
            format!("{outside:.1}"),
            busiest,
        ]);
    }
    Table {
        title: format!(
            "noise guard: a sample is marked when processes outside the lab used over {}% of the machine or steal was over {}%, and taken again",
            r.plan.guard.outside_pct, r.plan.guard.steal_pct
        ),
        head: [
            "variant",
            "samples kept",
            "kept though marked",
            "retaken",
            "steal % (max)",
            "outside CPU % (max)",
            "busiest outside process (max)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }
}

/// The cells whose interval is wider than the rule, one line each.
pub fn unsettled(r: &Results, baseline: Option<&str>) -> Vec<String> {
    let p = paired(r, baseline);
    let max = r.plan.rule.max_ci_pct;
    let mut out = Vec::new();
    for v in ran(&p) {
        for t in v.tests.iter().filter(|t| t.error.is_none()) {
            if let Some(x) = t.ratio.as_ref().filter(|x| x.half_width_pct() > max) {
                out.push(format!(
                    "{} {}: interval ±{:.1}% after {} rounds, wider than ±{max}%{}",
                    v.variant,
                    t.test,
                    x.half_width_pct(),
                    x.rounds,
                    if t.budget_spent {
                        " (the budget ended the rounds)"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    out
}
