//! The report files of a run: a self-contained HTML page (tables, charts
//! as inline SVG, the environment) and each chart as SVG and PNG for
//! pasting elsewhere. `tunlab report results.json` makes them again from
//! the JSON alone.

use crate::chart::{esc, family_color, Bar, Chart, Figure, Forest, ForestRow, Row};
use crate::report::{self, find, ran, test_names, Table};
use crate::results::{Results, TestResult};
use crate::sample::Sample;
use crate::LabError;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// A chart and the file name (without extension) it is saved under.
#[derive(Debug, Clone)]
pub struct Named {
    pub file: String,
    pub section: &'static str,
    pub chart: Figure,
}

fn file_stem(test: &str, what: &str) -> String {
    let t: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{t}-{what}")
}

fn what_of(unit: &str) -> &'static str {
    match unit {
        "Gbit/s" => "throughput",
        "trans/s" => "transactions per second",
        "pps" => "datagrams received per second",
        "CPU %" => "CPU at a fixed rate (whole machine)",
        _ => "figure",
    }
}

/// One chart per test of its primary figure, and one per test of CPU
/// (whole machine and the datapath processes).
pub fn charts(r: &Results) -> Vec<Named> {
    let ran = ran(r);
    let mut out = Vec::new();
    // One row per variant that ran; a failed test is a note, not a bar;
    // `flag`: say which tests did not settle.
    let series = |t: &str, flag: bool, f: &dyn Fn(&TestResult) -> Vec<Option<Bar>>| -> Vec<Row> {
        ran.iter()
            .map(|v| {
                let x = find(v, t);
                let (bars, note) = match x {
                    None => (vec![None], Some("not run".to_string())),
                    Some(x) if x.error.is_some() => (vec![None], Some("FAILED".to_string())),
                    Some(x) => (f(x), None),
                };
                let flag = match x {
                    Some(x) if flag && !x.settled && x.error.is_none() => {
                        Some("unsettled".to_string())
                    }
                    _ => None,
                };
                Row {
                    label: v.variant.clone(),
                    bars,
                    note,
                    flag,
                    color: family_color(&v.variant),
                }
            })
            .collect()
    };
    for t in test_names(r) {
        let Some(any) = ran.iter().find_map(|v| find(v, t)) else {
            continue;
        };
        let spec = any.spec;
        let unit = any.unit.clone();
        out.push(Named {
            file: file_stem(t, "primary"),
            section: "figures",
            chart: Figure::Bars(Chart {
                title: format!("{t}: {}", what_of(&unit)),
                unit: unit.clone(),
                series: vec![unit.clone()],
                rows: series(t, true, &|x| {
                    vec![Some(Bar {
                        samples: x.samples.iter().map(|s| spec.primary(s)).collect(),
                    })]
                }),
            }),
        });
        let pick = |x: &TestResult, g: fn(&Sample) -> f64| Bar {
            samples: x.samples.iter().map(g).collect(),
        };
        out.push(Named {
            file: file_stem(t, "cpu"),
            section: "cpu",
            chart: Figure::Bars(Chart {
                title: format!("{t}: CPU"),
                unit: "CPU %".into(),
                series: vec![
                    "whole machine, % of all CPUs".into(),
                    "datapath processes, % of one CPU (kernel: none)".into(),
                ],
                rows: series(t, false, &|x| {
                    let dp = pick(x, |s| s.cpu.datapath_pct);
                    // The kernel datapaths have no process of their own.
                    let has_process = dp.samples.iter().any(|v| *v > 0.0);
                    vec![
                        Some(pick(x, |s| s.cpu.system_pct)),
                        has_process.then_some(dp),
                    ]
                }),
            }),
        });
    }
    out
}

/// One forest plot per test of each variant's ratio to `base`, and one
/// of its CPU per KB moved where the test has it.
pub fn forests(r: &Results, base: &str) -> Vec<Named> {
    let r = &report::paired(r, Some(base));
    let others: Vec<_> = ran(r).into_iter().filter(|v| v.variant != base).collect();
    let max = r.plan.rule.max_ci_pct;
    let mut out = Vec::new();
    for t in test_names(r) {
        let Some(any) = others.iter().find_map(|v| find(v, t)) else {
            continue;
        };
        let spec = any.spec;
        let unit = any.unit.clone();
        for demand in [false, true] {
            if demand && spec.rate_gbit.is_some() {
                continue;
            }
            let rows: Vec<ForestRow> = others
                .iter()
                .map(|v| {
                    let x = find(v, t);
                    let ratio = x.and_then(|x| {
                        if demand {
                            x.demand_ratio.as_ref()
                        } else {
                            x.ratio.as_ref()
                        }
                    });
                    let (text, bad) = match (x, ratio) {
                        (Some(x), _) if x.error.is_some() => ("FAILED".to_string(), true),
                        (_, None) => ("—".to_string(), false),
                        (_, Some(q)) => {
                            let word = if demand {
                                report::demand_word(q.verdict())
                            } else {
                                report::verdict_word(&spec, q.verdict())
                            };
                            let wide = q.half_width_pct() > max;
                            let mut s = format!("{} {word}", report::ratio_text(q));
                            if wide {
                                s.push_str(&format!(" ±{:.0}%", q.half_width_pct()));
                            }
                            (s, wide)
                        }
                    };
                    ForestRow {
                        label: v.variant.clone(),
                        ratio: ratio.map(|q| (q.ratio, q.lo, q.hi)),
                        text,
                        bad,
                        color: family_color(&v.variant),
                    }
                })
                .collect();
            if rows.iter().all(|r| r.ratio.is_none()) {
                continue;
            }
            let (file, title, axis) = if demand {
                (
                    file_stem(t, "demand-ratio"),
                    format!("{t}: CPU per KB moved, ratio to {base}"),
                    format!("service demand (CPU µs per KB), ratio to {base}"),
                )
            } else {
                (
                    file_stem(t, "ratio"),
                    format!("{t}: {}, ratio to {base}", what_of(&unit)),
                    format!("{unit}, ratio to {base}"),
                )
            };
            out.push(Named {
                file,
                section: "ratios",
                chart: Figure::Forest(Forest {
                    title,
                    axis,
                    band_pct: max,
                    rows,
                }),
            });
        }
    }
    out
}

/// Every chart of the report: the forest plots against `baseline`
/// first, then the figures and CPU per test.
pub fn all_charts(r: &Results, baseline: Option<&str>) -> Vec<Named> {
    let mut out = baseline.map(|b| forests(r, b)).unwrap_or_default();
    out.extend(charts(r));
    out
}

fn html_table(t: &Table, out: &mut String) {
    let _ = write!(out, "<h3>{}</h3><table><thead><tr>", esc(&t.title));
    for h in &t.head {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for r in &t.rows {
        out.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let class = if c.contains("FAILED") || c.contains("unsettled") {
                " class=\"bad\""
            } else if i == 0 {
                " class=\"name\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", esc(c));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
}

pub(crate) const STYLE: &str = "body{font-family:'DejaVu Sans',Arial,sans-serif;margin:2em;color:#222;max-width:1200px}\
table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;font-size:13px}\
th{background:#f0f0f0}td.name{text-align:left;font-family:monospace}td.bad{color:#c0392b}\
pre{background:#f7f7f7;padding:0.8em;overflow-x:auto}h2{border-bottom:1px solid #ddd;padding-bottom:0.2em}\
.charts svg{margin:0.5em 0;display:block}";

/// The whole report as one HTML page, charts inline.
pub fn html(r: &Results, baseline: Option<&str>) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>tunlab bench: {0} profile</title><style>{STYLE}</style></head><body><h1>tunlab bench: {0} profile</h1>",
        esc(&r.plan.profile)
    );
    if r.interrupted {
        o.push_str(
            "<p class=\"bad\"><b>This run was interrupted: the results are partial.</b></p>",
        );
    }
    let _ = write!(
        o,
        "<pre>{}</pre><p>{}.</p>",
        esc(&r.topology),
        esc(&r.plan.method())
    );
    let settings = r.plan.settings();
    if !settings.is_empty() {
        let _ = write!(o, "<p>{}</p>", esc(&settings));
    }
    o.push_str("<h2>Tables</h2>");
    for t in report::build(r, baseline) {
        html_table(&t, &mut o);
    }
    let problems = report::problems(r);
    if !problems.is_empty() {
        o.push_str("<h3>Skipped and failed</h3><ul>");
        for p in problems {
            let _ = write!(o, "<li>{}</li>", esc(&p));
        }
        o.push_str("</ul>");
    }
    let charts = all_charts(r, baseline);
    for (section, title) in [
        ("ratios", "Ratios to the baseline, with their intervals"),
        ("figures", "Figures per test"),
        ("cpu", "CPU per test"),
    ] {
        if !charts.iter().any(|c| c.section == section) {
            continue;
        }
        let _ = write!(o, "<h2>{title}</h2><div class=\"charts\">");
        for c in charts.iter().filter(|c| c.section == section) {
            o.push_str(&c.chart.svg());
        }
        o.push_str("</div>");
    }
    o.push_str("<h2>Variants</h2><table><thead><tr><th>variant</th><th>status</th><th>tenant MTU</th><th>notes</th><th>offloads on (ethtool -k)</th></tr></thead><tbody>");
    for v in &r.variants {
        let _ = write!(
            o,
            "<tr><td class=\"name\">{}</td><td>{}</td><td>{}</td><td style=\"text-align:left\">{}</td><td style=\"text-align:left;font-size:11px\">{}</td></tr>",
            esc(&v.variant),
            esc(&match &v.reason {
                Some(x) => format!("{}: {x}", v.status),
                None => v.status.clone(),
            }),
            v.tenant_mtu,
            esc(&v.notes.join("; ")),
            esc(&v
                .offloads
                .iter()
                .map(|(k, x)| format!("{k}: {x}"))
                .collect::<Vec<_>>()
                .join(" | "))
        );
    }
    o.push_str("</tbody></table>");
    let e = &r.environment;
    o.push_str("<h2>Environment</h2><table><tbody>");
    for (k, v) in [
        ("kernel", e.kernel.clone()),
        ("CPU", format!("{} × {}", e.cpus, e.cpu_model)),
        ("underlay MTU", e.underlay_mtu.to_string()),
        ("tunlab", e.tunlab.clone()),
        ("iperf3", e.iperf3.clone()),
        ("sockperf", e.sockperf.clone()),
        ("Open vSwitch", e.ovs.clone()),
    ] {
        let _ = write!(
            o,
            "<tr><th>{k}</th><td style=\"text-align:left\">{}</td></tr>",
            esc(&v)
        );
    }
    o.push_str("</tbody></table></body></html>\n");
    o
}

/// What [`write`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    pub html: PathBuf,
    pub charts: usize,
    /// Charts whose PNG could not be made, with the reason.
    pub png_errors: Vec<String>,
}

fn put(path: &Path, bytes: &[u8]) -> Result<(), LabError> {
    std::fs::write(path, bytes).map_err(|err| LabError::Io {
        path: path.display().to_string(),
        err,
    })
}

/// Write `report.html` and `charts/*.svg|png` into `dir`.
pub fn write(r: &Results, baseline: Option<&str>, dir: &Path) -> Result<Written, LabError> {
    let charts = all_charts(r, baseline);
    let png_errors = write_charts(&dir.join("charts"), &charts)?;
    let html_path = dir.join("report.html");
    put(&html_path, html(r, baseline).as_bytes())?;
    Ok(Written {
        html: html_path,
        charts: charts.len(),
        png_errors,
    })
}

/// Write each chart into `dir` (made if missing) as `FILE.svg` and
/// `FILE.png`. A PNG that cannot be made is not an error: the returned
/// list says which and why.
pub fn write_charts(dir: &Path, charts: &[Named]) -> Result<Vec<String>, LabError> {
    std::fs::create_dir_all(dir).map_err(|err| LabError::Io {
        path: dir.display().to_string(),
        err,
    })?;
    let mut png_errors = Vec::new();
    for c in charts {
        let svg = c.chart.svg();
        put(&dir.join(format!("{}.svg", c.file)), svg.as_bytes())?;
        match crate::chart::png(&svg) {
            Ok(png) => put(&dir.join(format!("{}.png", c.file)), &png)?,
            Err(e) => png_errors.push(format!("{}.png: {e}", c.file)),
        }
    }
    Ok(png_errors)
}
