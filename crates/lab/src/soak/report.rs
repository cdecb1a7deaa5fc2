//! The soak's curves and its page (`soak.json`, `soak.html`, charts).

use super::data::*;
use crate::chart::{self, LineChart};
use crate::LabError;
use std::path::{Path, PathBuf};

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
