//! An article's findings as a terminal table, a Markdown section (for
//! docs/) and an HTML page: the article's setup beside this run's, the
//! findings with their verdicts, the gaps between then and now, and this
//! run's charts on the article's axes (throughput, CPU, transactions).

use super::{usable, Axes, Checked, Outcome, Spec, PLAN_LEAVES_OUT};
use crate::chart::{esc, Bar, Chart, Figure, Row};
use crate::html::Named;
use crate::report::{self, grid};
use crate::results::{Results, TestResult, VariantResult};
use std::fmt::Write;

/// This machine and run, in the article's terms.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Here {
    pub machine: String,
    pub network: String,
    pub software: String,
    pub method: String,
}

impl Here {
    /// From a lab run: its environment, the underlay's offloads, its
    /// plan.
    pub fn of_run(r: &Results) -> Here {
        let e = &r.environment;
        // The underlay's tunnel segmentation offloads, per variant where
        // they differ (kernel-vxlan-sw turns them off).
        let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
        for v in &r.variants {
            let Some((_, on)) = v.offloads.iter().find(|(i, _)| i == "h1:under") else {
                continue;
            };
            let tnl: Vec<&str> = on
                .split(',')
                .filter(|x| x.contains("tnl") || x.contains("gre-"))
                .collect();
            let set = if tnl.is_empty() {
                "none".to_string()
            } else {
                tnl.join(", ")
            };
            match groups.iter_mut().find(|(s, _)| *s == set) {
                Some((_, vs)) => vs.push(&v.variant),
                None => groups.push((set, vec![&v.variant])),
            }
        }
        let under = match &groups[..] {
            [] => String::new(),
            [(set, _)] => format!("; underlay tunnel offloads on: {set}"),
            many => format!(
                "; underlay tunnel offloads on: {}",
                many.iter()
                    .map(|(set, vs)| format!("{set} ({})", vs.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        Here {
            machine: format!("{} vCPUs, {}", e.cpus, e.cpu_model),
            network: format!(
                "a veth pair between two host namespaces, MTU {}{under}",
                e.underlay_mtu
            ),
            software: format!(
                "kernel {}, tunlab {}, {}, {}",
                e.kernel, e.tunlab, e.iperf3, e.ovs
            ),
            method: r.plan.method(),
        }
    }

    /// For a PVP run, which has no results.json of the lab's.
    pub fn of_machine(method: &str) -> Here {
        let e = crate::results::environment();
        Here {
            machine: format!("{} vCPUs, {}", e.cpus, e.cpu_model),
            network: "veth pairs in namespaces: generator, node, tenant reflector".into(),
            software: format!("kernel {}, tunlab {}", e.kernel, e.tunlab),
            method: method.into(),
        }
    }
}

/// Counts of each verdict.
pub fn tally(checked: &[Checked]) -> String {
    let n = |o: Outcome| checked.iter().filter(|c| c.outcome == o).count();
    let mut parts = Vec::new();
    for o in [
        Outcome::Holds,
        Outcome::DoesNotHold,
        Outcome::CannotTest,
        Outcome::NotRun,
    ] {
        if n(o) > 0 {
            parts.push(format!("{}: {}", o.text(), n(o)));
        }
    }
    let near = checked.iter().filter(|c| !c.settled).count();
    if near > 0 {
        parts.push(format!(
            "near their lines (a second run may differ): {near}"
        ));
    }
    parts.join(", ")
}

/// The gaps of the findings some check of which did not hold: (id, gap).
pub fn deciding_gaps<'a>(spec: &'a Spec, checked: &[Checked]) -> Vec<(&'a str, &'a str)> {
    spec.findings
        .iter()
        .filter(|f| {
            checked
                .iter()
                .any(|c| c.finding == f.id && c.outcome == Outcome::DoesNotHold)
        })
        .filter_map(|f| Some((f.id, f.gap?)))
        .collect()
}

/// "qinq: "QinQ Performance" (2017)".
fn headline(spec: &Spec) -> String {
    format!(
        "{}: \"{}\" ({})",
        spec.article.name(),
        spec.title,
        spec.date
    )
}

/// The findings for the terminal: each finding's sentence, then one row
/// per check.
pub fn text(spec: &Spec, checked: &[Checked]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}\n{}\n", headline(spec), spec.question);
    for f in &spec.findings {
        let _ = writeln!(o, "  {}  {}", f.id, f.says);
    }
    o.push('\n');
    let mut rows = vec![vec![
        "finding".to_string(),
        "compared here".into(),
        "the article's side".into(),
        "here".into(),
        "verdict".into(),
    ]];
    // Measured checks in the table; the others as notes under it.
    let mut notes = Vec::new();
    let (mut other_profile, mut left_out) = (0, Vec::new());
    for c in checked {
        match c.outcome {
            Outcome::CannotTest => notes.push(format!(
                "  {}: cannot be tested here: {}",
                c.finding, c.here
            )),
            Outcome::NotRun => match c.here.strip_suffix(PLAN_LEAVES_OUT) {
                Some(v) => {
                    other_profile += 1;
                    if !left_out.contains(&v) {
                        left_out.push(v);
                    }
                }
                None => notes.push(format!(
                    "  {}: {}: not in this run ({})",
                    c.finding, c.compared, c.here
                )),
            },
            _ => rows.push(vec![
                c.finding.into(),
                c.compared.clone(),
                c.claim.clone(),
                c.here.clone(),
                c.outcome.text().into(),
            ]),
        }
    }
    o.push_str(&grid(&rows));
    for n in notes {
        let _ = writeln!(o, "{n}");
    }
    if other_profile > 0 {
        let _ = writeln!(
            o,
            "  {other_profile} more checks read variants this profile leaves out ({}): --profile full runs them",
            left_out.join(", ")
        );
    }
    for (id, gap) in deciding_gaps(spec, checked) {
        let _ = writeln!(o, "  {id}: here, {gap}");
    }
    let _ = writeln!(o, "{}: {}", spec.article.name(), tally(checked));
    o
}

/// A Markdown section for docs/.
pub fn markdown(spec: &Spec, checked: &[Checked], here: &Here, command: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "## {}\n\n{}\n\n`{command}`\n",
        headline(spec),
        spec.question
    );
    let _ = writeln!(o, "| | the article | here |\n|---|---|---|");
    for (k, a, h) in setup_rows(spec, here) {
        let _ = writeln!(o, "| {k} | {} | {} |", cell(&a), cell(&h));
    }
    let _ = writeln!(
        o,
        "\nThe full version (`--profile full`): {}.",
        spec.full_least()
    );
    o.push_str("\nThe findings:\n\n");
    for f in &spec.findings {
        let _ = writeln!(o, "- **{}** {}", f.id, f.says);
    }
    let _ = writeln!(
        o,
        "\n| finding | compared here | the article's side | here | verdict |\n|---|---|---|---|---|"
    );
    let mut left_out = 0;
    for c in checked {
        if c.outcome == Outcome::NotRun && c.here.ends_with(PLAN_LEAVES_OUT) {
            left_out += 1;
            continue;
        }
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | **{}** |",
            c.finding,
            cell(&c.compared),
            cell(&c.claim),
            cell(&c.here),
            c.outcome.text()
        );
    }
    if left_out > 0 {
        let _ = writeln!(
            o,
            "\n{left_out} more checks read variants this profile leaves out: `--profile full` runs them."
        );
    }
    let deciding = deciding_gaps(spec, checked);
    if !deciding.is_empty() {
        o.push_str("\nWhat bears on the verdicts that are not \"holds\":\n\n");
        for (id, gap) in deciding {
            let _ = writeln!(o, "- {id}: {gap}");
        }
    }
    o.push_str("\nGaps between then and now:\n\n");
    for g in &spec.gaps {
        let _ = writeln!(o, "- {g}");
    }
    o
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn setup_rows(spec: &Spec, here: &Here) -> Vec<(&'static str, String, String)> {
    let t = &spec.testbed;
    vec![
        ("machines", t.machines.into(), here.machine.clone()),
        ("network", t.network.into(), here.network.clone()),
        ("software", t.software.into(), here.software.clone()),
        ("method", t.method.into(), here.method.clone()),
        (
            "systems",
            spec.stands_for
                .iter()
                .map(|(a, _)| *a)
                .collect::<Vec<_>>()
                .join("; "),
            spec.stands_for
                .iter()
                .map(|(a, h)| format!("{a} → {h}"))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    ]
}

fn class(o: Outcome) -> &'static str {
    match o {
        Outcome::Holds => "holds",
        Outcome::DoesNotHold => "not",
        Outcome::CannotTest | Outcome::NotRun => "na",
    }
}

const STYLE: &str =
    "td.holds{background:#d8f0d0}td.not{background:#f6d5d1}td.na{color:#777}td{text-align:left}";

/// The article's page: setup side by side, the findings, the gaps, and
/// this run's charts (a lab run's) on the article's axes.
pub fn html(spec: &Spec, checked: &[Checked], here: &Here, run: Option<&Results>) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>tunlab: {0}</title><style>{1}{STYLE}</style></head><body><h1>{0}: “{2}” ({3})</h1><p>{4}</p>",
        esc(spec.article.name()),
        crate::html::STYLE,
        esc(spec.title),
        esc(spec.date),
        esc(spec.question)
    );
    o.push_str("<h2>The article's setup and this run's</h2><table><thead><tr><th></th><th>the article</th><th>here</th></tr></thead><tbody>");
    for (k, a, h) in setup_rows(spec, here) {
        let _ = write!(
            o,
            "<tr><td class=\"name\">{k}</td><td>{}</td><td>{}</td></tr>",
            esc(&a),
            esc(&h)
        );
    }
    let _ = write!(
        o,
        "</tbody></table><p>The full version (<code>--profile full</code>): {}.</p>",
        esc(&spec.full_least())
    );
    let _ = write!(
        o,
        "<h2>Findings</h2><p>{}</p><table><thead><tr><th>finding</th><th>the article</th><th>compared here</th><th>the article's side</th><th>here (ratio, 95 % interval)</th><th>verdict</th></tr></thead><tbody>",
        esc(&tally(checked))
    );
    for c in checked {
        let says = spec
            .findings
            .iter()
            .find(|f| f.id == c.finding)
            .map_or("", |f| f.says);
        let _ = write!(
            o,
            "<tr><td class=\"name\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
            esc(c.finding),
            esc(says),
            esc(&c.compared),
            esc(&c.claim),
            esc(&c.here),
            class(c.outcome),
            esc(c.outcome.text())
        );
    }
    o.push_str("</tbody></table>");
    let deciding = deciding_gaps(spec, checked);
    if !deciding.is_empty() {
        o.push_str("<h3>What bears on the verdicts that are not “holds”</h3><ul>");
        for (id, gap) in deciding {
            let _ = write!(o, "<li><b>{}</b>: {}</li>", esc(id), esc(gap));
        }
        o.push_str("</ul>");
    }
    o.push_str("<h2>Gaps between then and now</h2><ul>");
    for g in &spec.gaps {
        let _ = write!(o, "<li>{}</li>", esc(g));
    }
    o.push_str("</ul>");
    if let Some(r) = run {
        o.push_str("<h2>The article's charts, with this run's figures</h2><div class=\"charts\">");
        for c in charts(spec, r) {
            o.push_str(&c.svg());
        }
        o.push_str("</div><p>Every test's own charts, tables and samples: <a href=\"report.html\">report.html</a>, <a href=\"results.json\">results.json</a>.</p>");
    }
    o.push_str("</body></html>");
    o
}

/// The charts the article drew ([`Spec::charts`]) with `r`'s samples: a
/// group per test the chart reads, in the order the run took them, and a
/// bar per variant that ran; a chart none of whose tests ran is left out.
pub fn charts(spec: &Spec, r: &Results) -> Vec<Chart> {
    let ran = report::ran(r);
    let tests = report::test_names(r);
    spec.charts
        .iter()
        .filter_map(|a| {
            let rows: Vec<(Row, &str)> = tests.iter().filter_map(|t| group(a, t, &ran)).collect();
            let unit = rows.first()?.1;
            Some(Chart {
                title: a.title.into(),
                unit: unit.into(),
                series: ran.iter().map(|v| v.variant.clone()).collect(),
                rows: rows.into_iter().map(|(row, _)| row).collect(),
            })
        })
        .collect()
}

/// Test `t`'s group of bars on the chart `a`, and its unit; None when
/// the chart does not read `t` or no variant measured it.
fn group(a: &Axes, t: &str, ran: &[&VariantResult]) -> Option<(Row, &'static str)> {
    let cells: Vec<Option<&TestResult>> = ran
        .iter()
        .map(|v| report::find(v, t).filter(|x| usable(x)))
        .collect();
    let any = cells.iter().flatten().next()?;
    if !a.tests.takes(any) {
        return None;
    }
    let bar = |c: &TestResult| {
        let samples: Vec<f64> = c
            .samples
            .iter()
            .filter_map(|s| a.metric.of(&c.spec, s))
            .collect();
        (!samples.is_empty()).then_some(Bar { samples })
    };
    let row = Row {
        label: t.to_string(),
        bars: cells.iter().map(|c| c.and_then(bar)).collect(),
        note: None,
        flag: None,
        color: "#4e79a7",
    };
    Some((row, a.metric.name(&any.spec)))
}

/// The article's charts as files: `N-title` (the title up to its
/// parenthesis, in lower case with dashes), numbered in the page's order,
/// for [`crate::html::write_charts`].
pub fn chart_files(spec: &Spec, r: &Results) -> Vec<Named> {
    charts(spec, r)
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let title = c.title.split('(').next().unwrap_or_default().to_lowercase();
            let words: Vec<&str> = title
                .split(|ch: char| !ch.is_ascii_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect();
            Named {
                file: format!("{}-{}", i + 1, words.join("-")),
                section: "article",
                chart: Figure::Bars(c),
            }
        })
        .collect()
}

/// The index of a run of several articles: one line each with its tally
/// and a link to its page.
pub fn index(done: &[(Spec, Vec<Checked>)]) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>tunlab: the articles</title><style>{}</style></head><body><h1>The reference articles, run here</h1><table><thead><tr><th>article</th><th>title</th><th>verdicts</th></tr></thead><tbody>",
        crate::html::STYLE
    );
    for (s, c) in done {
        let _ = write!(
            o,
            "<tr><td class=\"name\"><a href=\"{0}/article.html\">{0}</a></td><td>{1}</td><td>{2}</td></tr>",
            esc(s.article.name()),
            esc(s.title),
            esc(&tally(c))
        );
    }
    o.push_str("</tbody></table></body></html>");
    o
}
