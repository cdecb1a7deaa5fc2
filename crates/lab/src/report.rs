//! Tables in the articles' shape: one row per test, one column per
//! variant, then each variant's percent difference against a reference
//! with the average across tests (as the Geneve-vs-VXLAN article shows it).

use crate::run::{Results, TestResult, VariantResult};
use crate::stats::Summary;
use std::fmt::Write;

fn cell(t: Option<&TestResult>) -> String {
    match t {
        None => "—".into(),
        Some(t) if t.error.is_some() => "FAILED".into(),
        Some(t) => {
            let s = t.summary;
            let v = fmt_value(s.mean);
            let mark = match (t.settled, t.budget_spent) {
                (true, _) => "",
                (false, false) => " unsettled",
                (false, true) => " unsettled (budget)",
            };
            // At a fixed rate, say what rate was reached: CPU at a lower
            // rate is no comparison.
            let at = match t.spec.rate_gbit {
                Some(_) => {
                    let g: Vec<f64> = t.samples.iter().filter_map(|s| s.gbit_s).collect();
                    format!(" at {:.2}G", Summary::of(&g).mean)
                }
                None => String::new(),
            };
            format!("{v} ±{:.1}%{mark}{at}", s.cv_pct)
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
    if let Some(base) = baseline.and_then(|b| ran.iter().find(|v| v.variant == b)) {
        let others: Vec<&&VariantResult> =
            ran.iter().filter(|v| v.variant != base.variant).collect();
        let mut head = vec!["test".to_string()];
        head.extend(others.iter().map(|v| v.variant.clone()));
        let mut sums = vec![(0.0, 0usize); others.len()];
        let mut rows = Vec::new();
        for t in &tests {
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
        out.push(Table {
            title: format!(
                "percent difference against {} (higher is better; for CPU % at a fixed rate and a first packet's delay, lower is)",
                base.variant
            ),
            head,
            rows,
        });
    }
    out.push(per_test(
        r,
        if r.hosts.is_empty() {
            "CPU: whole machine in % of all CPUs / datapath processes in % of one CPU; service demand in µs per KB".into()
        } else {
            "CPU: both hosts together in % of all their CPUs / datapath processes in % of one CPU; service demand in µs per KB".into()
        },
        &tests,
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
            &tests,
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
    let rr = tests_where(&ran, &tests, |k| k.is_rr());
    if !rr.is_empty() {
        out.push(per_test(
            r,
            "round-trip latency in µs: mean / p50 / p99 (sockperf)".into(),
            &rr,
            |t| {
                let f = |g: fn(&crate::traffic::Sample) -> Option<f64>| {
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
    let fp = tests_where(&ran, &tests, |k| k == crate::traffic::Kind::FirstPacket);
    if !fp.is_empty() {
        out.push(per_test(
            r,
            "a new flow's first packet, one-way delay in µs (flow caches emptied before each probe): first p50 / p99, then the next packet's p50 / p99".into(),
            &fp,
            |t| {
                let f = |g: fn(&crate::first_packet::FirstPacket) -> f64| {
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
    keep: impl Fn(crate::traffic::Kind) -> bool,
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
    for p in problems(r) {
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
