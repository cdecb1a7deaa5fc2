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
            let mark = if t.settled { "" } else { " unsettled" };
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

fn find<'a>(v: &'a VariantResult, test: &str) -> Option<&'a TestResult> {
    v.tests.iter().find(|t| t.test == test)
}

/// The side-by-side tables; `baseline` names the reference variant.
pub fn tables(r: &Results, baseline: Option<&str>) -> String {
    let mut out = String::new();
    let ran: Vec<&VariantResult> = r.variants.iter().filter(|v| v.status == "ok").collect();
    let tests: Vec<&str> = {
        let mut t: Vec<&str> = Vec::new();
        for v in &ran {
            for x in &v.tests {
                if !t.contains(&x.test.as_str()) {
                    t.push(&x.test);
                }
            }
        }
        t
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut head = vec!["test".to_string(), "unit".to_string()];
    head.extend(ran.iter().map(|v| v.variant.clone()));
    rows.push(head);
    for t in &tests {
        let unit = ran
            .iter()
            .find_map(|v| find(v, t))
            .map_or("", |x| x.unit.as_str());
        let mut row = vec![t.to_string(), unit.to_string()];
        row.extend(ran.iter().map(|v| cell(find(v, t))));
        rows.push(row);
    }
    out.push_str(&grid(&rows));
    if let Some(base) = baseline.and_then(|b| ran.iter().find(|v| v.variant == b)) {
        let _ = writeln!(out, "\npercent difference against {} (higher is better; for CPU % at a fixed rate, lower is)", base.variant);
        let mut rows = vec![{
            let mut h = vec!["test".to_string()];
            h.extend(
                ran.iter()
                    .filter(|v| v.variant != base.variant)
                    .map(|v| v.variant.clone()),
            );
            h
        }];
        let others: Vec<&&VariantResult> =
            ran.iter().filter(|v| v.variant != base.variant).collect();
        let mut sums = vec![(0.0, 0usize); others.len()];
        for t in &tests {
            let mut row = vec![t.to_string()];
            for (k, v) in others.iter().enumerate() {
                match (diff(find(base, t), find(v, t)), find(v, t)) {
                    (Some(d), _) => {
                        sums[k].0 += d;
                        sums[k].1 += 1;
                        row.push(format!("{d:+.1}%"));
                    }
                    _ => row.push("—".into()),
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
        out.push_str(&grid(&rows));
    }
    for v in r.variants.iter().filter(|v| v.status != "ok") {
        let _ = writeln!(
            out,
            "{} {}: {}",
            v.variant,
            v.status,
            v.reason.as_deref().unwrap_or("")
        );
    }
    for v in &ran {
        for t in v.tests.iter().filter(|t| t.error.is_some()) {
            let _ = writeln!(
                out,
                "{} {} FAILED: {}",
                v.variant,
                t.test,
                t.error
                    .as_deref()
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("")
            );
        }
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
fn grid(rows: &[Vec<String>]) -> String {
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
