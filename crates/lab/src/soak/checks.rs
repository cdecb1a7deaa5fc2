//! What the soak checks at the end, as an operator would: every frame
//! counted, no silent TCP interval, memory and descriptors flat, every
//! flow change accepted, per-port sums that add up.

use super::data::*;
use std::collections::BTreeMap;
use tunlab_ctl::{PortRow, Stats};

/// A port toward the underlay (a tunnel or QinQ), not a tenant.
pub fn is_underlay(p: &PortRow) -> bool {
    !matches!(p.kind.as_str(), "tap" | "veth" | "system")
}

/// Drops by reason: the slow path's `dropped WHY` and the kernel
/// datapath's drop counters, non-zero ones only.
pub fn drop_counts(stats: &Stats) -> BTreeMap<String, u64> {
    stats
        .flat()
        .into_iter()
        .filter(|(k, v)| {
            *v > 0
                && (k.starts_with("dropped ")
                    || k.starts_with("kernel_drop_")
                    || k == "kernel_err_adjust"
                    || k == "kernel_too_big")
        })
        .collect()
}

/// The generator's totals from its `--json` file.
pub fn parse_gen(json: &str) -> Result<GenTotals, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("the generator's JSON: {e}"))?;
    let m = &v["rows"][0]["measured"];
    let get = |k: &str| {
        m[k].as_u64()
            .ok_or_else(|| format!("the generator's JSON has no rows[0].measured.{k}"))
    };
    Ok(GenTotals {
        sent: get("tx_packets")?,
        received: get("rx_packets")?,
        lost: get("lost")?,
        duplicates: get("duplicates")?,
    })
}

/// iperf3's `--json` intervals: how many, which carried no data, the mean
/// and the lowest rate, the retransmissions in all and in each.
pub fn parse_intervals(json: &str) -> Result<TcpTotals, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("iperf3's JSON: {e}"))?;
    if let Some(e) = v["error"].as_str() {
        return Err(format!("iperf3: {e}"));
    }
    let intervals = v["intervals"]
        .as_array()
        .ok_or("iperf3's JSON has no intervals")?;
    let rates: Vec<f64> = intervals
        .iter()
        .map(|i| i["sum"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e9)
        .collect();
    let sum = &v["end"]["sum_sent"];
    Ok(TcpTotals {
        intervals: rates.len(),
        empty_intervals: rates
            .iter()
            .enumerate()
            .filter(|(_, r)| **r <= 0.0)
            .map(|(i, _)| i)
            .collect(),
        mean_gbps: sum["bits_per_second"].as_f64().unwrap_or(0.0) / 1e9,
        min_interval_gbps: rates.iter().copied().fold(f64::INFINITY, f64::min),
        retransmits: sum["retransmits"].as_u64().unwrap_or(0),
        retransmits_by_interval: intervals
            .iter()
            .map(|i| i["sum"]["retransmits"].as_u64().unwrap_or(0))
            .collect(),
    })
}

/// Samples after the warm-up (the first tenth, at least 10 s, at most
/// 60 s), split into an early and a late third.
fn thirds(s: &[Sample]) -> Option<(&[Sample], &[Sample])> {
    let end = s.last()?.t_s;
    let warm = (end / 10.0).clamp(10.0, 60.0);
    let from = s.iter().position(|x| x.t_s >= warm)?;
    let s = &s[from..];
    let k = s.len() / 3;
    (k >= 2).then(|| (&s[..k], &s[s.len() - k..]))
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The end-of-run checks.
pub fn checks(s: &Soak) -> Vec<Check> {
    let mut c = Vec::new();
    let g = &s.gen;
    let counted: u64 = s.drops.iter().flat_map(|d| d.values()).sum();
    c.push(Check {
        what: "generator: sent = received + lost".into(),
        held: g.sent > 0 && g.sent == g.received + g.lost,
        detail: format!("sent {}, received {}, lost {}", g.sent, g.received, g.lost),
    });
    c.push(Check {
        what: "every lost frame is counted in a drop reason".into(),
        held: g.lost <= counted,
        detail: format!("lost {}, drops counted on the two nodes {counted}", g.lost),
    });
    c.extend(port_checks(&s.baseline_stats, &s.final_stats));
    let t = &s.tcp;
    c.push(Check {
        what: "iperf3: every 1-s interval carried data".into(),
        held: t.intervals > 0 && t.empty_intervals.is_empty(),
        detail: format!(
            "{} intervals, mean {:.3} Gbit/s, lowest interval {:.3} Gbit/s, {} retransmits, empty: {:?}",
            t.intervals, t.mean_gbps, t.min_interval_gbps, t.retransmits, t.empty_intervals
        ),
    });
    c.push(Check {
        what: "every flow change was accepted".into(),
        // A quiet period (`--change none`) makes none, and none is refused.
        held: (s.flow_changes > 0 || s.change == "none") && s.flow_change_errors.is_empty(),
        detail: format!(
            "{} changes, {} refused{}",
            s.flow_changes,
            s.flow_change_errors.len(),
            s.flow_change_errors
                .first()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default()
        ),
    });
    let nodes = s.samples.first().map_or(0, |x| x.nodes.len());
    match thirds(&s.samples) {
        None => c.push(Check {
            what: "memory and descriptors flat".into(),
            held: false,
            detail: format!("too few samples ({}) to compare", s.samples.len()),
        }),
        Some((early, late)) => {
            for i in 0..nodes {
                let col = |part: &[Sample], f: fn(&NodeSample) -> u64| -> Vec<u64> {
                    part.iter().filter_map(|x| x.nodes.get(i)).map(f).collect()
                };
                let (a, b) = (
                    median(col(early, |n| n.rss_kib)),
                    median(col(late, |n| n.rss_kib)),
                );
                // 5 % and 1 MiB of slack: allocator noise, not growth.
                c.push(Check {
                    what: format!("h{}: resident memory flat", i + 1),
                    held: b <= a + a / 20 + 1024,
                    detail: format!(
                        "median {:.1} MiB early, {:.1} MiB late ({:+.1} %)",
                        a as f64 / 1024.0,
                        b as f64 / 1024.0,
                        (b as f64 / a.max(1) as f64 - 1.0) * 100.0
                    ),
                });
                let min = |v: Vec<u64>| v.into_iter().min().unwrap_or(0);
                let (fa, fb) = (min(col(early, |n| n.fds)), min(col(late, |n| n.fds)));
                let (ma, mb) = (
                    min(col(early, |n| n.bpf_map_fds)),
                    min(col(late, |n| n.bpf_map_fds)),
                );
                c.push(Check {
                    what: format!("h{}: no descriptor or map growth", i + 1),
                    held: fb <= fa && mb <= ma,
                    detail: format!("descriptors {fa} → {fb}, BPF map descriptors {ma} → {mb} (fewest early → late)"),
                });
            }
        }
    }
    c
}

/// The per-port sums at the end, in packets (a super-frame counts its
/// segments): on each node, what came in on its ports went out on its
/// ports or was dropped (the kernel's per-port drops and the slow path's
/// drops by reason); between the nodes, what one sent into the underlay
/// the other received from it since `baseline` (before the traffic).
pub fn port_checks(baseline: &[Stats], final_stats: &[Stats]) -> Vec<Check> {
    let nodes: Vec<&Vec<PortRow>> = final_stats.iter().map(|s| &s.ports).collect();
    let before: Vec<&Vec<PortRow>> = baseline.iter().map(|s| &s.ports).collect();
    let mut c = Vec::new();
    for (i, (ports, stats)) in nodes.iter().zip(final_stats).enumerate() {
        let rx: u64 = ports.iter().map(|p| p.rx_packets).sum();
        let tx: u64 = ports.iter().map(|p| p.tx_packets).sum();
        let kernel: u64 = ports.iter().map(|p| p.rx_dropped).sum();
        let slow: u64 = stats.drops.values().sum();
        let per: Vec<String> = ports
            .iter()
            .map(|p| format!("{} rx {} tx {}", p.name, p.rx_packets, p.tx_packets))
            .collect();
        c.push(Check {
            what: format!("h{}: per port, received = sent + dropped", i + 1),
            held: !ports.is_empty() && rx == tx + kernel + slow,
            detail: format!(
                "{}; received {rx}, sent {tx}, dropped {kernel} by the kernel and {slow} by the slow path ({:+})",
                per.join(", "),
                rx as i128 - (tx + kernel + slow) as i128
            ),
        });
    }
    let under = |n: Option<&&Vec<PortRow>>, f: fn(&PortRow) -> u64| -> u64 {
        n.into_iter()
            .flat_map(|v| v.iter())
            .filter(|p| is_underlay(p))
            .map(f)
            .sum()
    };
    if nodes.len() == 2 {
        for (from, to) in [(0, 1), (1, 0)] {
            let sent = under(nodes.get(from), |p| p.tx_packets)
                .saturating_sub(under(before.get(from), |p| p.tx_packets));
            let got = under(nodes.get(to), |p| p.rx_packets)
                .saturating_sub(under(before.get(to), |p| p.rx_packets));
            let (from, to) = (from + 1, to + 1);
            c.push(Check {
                what: format!("underlay: h{from} sent = h{to} received"),
                held: sent > 0 && sent == got,
                detail: format!(
                    "since the traffic started, h{from}'s underlay ports sent {sent}, h{to}'s received {got}"
                ),
            });
        }
    }
    c
}
