//! `tunlab compare a.json b.json`: what changed between two runs (two
//! revisions, two machines). A change counts only when it is larger than
//! the noise: Welch's t-test on the two sets of samples at 95 %
//! confidence, which weighs the difference of the means against both
//! sets' spread and sizes.

use crate::report::grid;
use crate::results::Results;
use crate::stats::{t95, Summary};
use std::fmt::Write;

/// One test of one variant present in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub variant: String,
    pub test: String,
    pub unit: String,
    pub a: Summary,
    pub b: Summary,
    /// (b - a) / a in percent.
    pub change_pct: f64,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The difference is larger than the noise (t-test, 95 %).
    Changed,
    WithinNoise,
    /// Fewer than two samples on a side: no spread to judge by.
    CannotTell,
    /// Failed in one of the runs.
    Failed,
}

impl Verdict {
    fn text(self) -> &'static str {
        match self {
            Verdict::Changed => "CHANGED",
            Verdict::WithinNoise => "within noise",
            Verdict::CannotTell => "too few samples",
            Verdict::Failed => "FAILED in a run",
        }
    }
}

/// Welch's t-test: is the difference of the means of `a` and `b` larger
/// than their spread explains?
pub fn welch(a: &Summary, b: &Summary) -> Verdict {
    if a.n < 2 || b.n < 2 {
        return Verdict::CannotTell;
    }
    let (va, vb) = (a.stddev.powi(2) / a.n as f64, b.stddev.powi(2) / b.n as f64);
    let se2 = va + vb;
    if se2 == 0.0 {
        return if a.mean == b.mean {
            Verdict::WithinNoise
        } else {
            Verdict::Changed
        };
    }
    let t = (b.mean - a.mean).abs() / se2.sqrt();
    let df = se2.powi(2) / (va.powi(2) / (a.n - 1) as f64 + vb.powi(2) / (b.n - 1) as f64);
    if t > t95(df) {
        Verdict::Changed
    } else {
        Verdict::WithinNoise
    }
}

/// Every (variant, test) the two runs share, and what exists in only one.
pub fn compare(a: &Results, b: &Results) -> (Vec<Change>, Vec<String>) {
    let mut out = Vec::new();
    let mut only = Vec::new();
    for va in &a.variants {
        let Some(vb) = b.variants.iter().find(|v| v.variant == va.variant) else {
            only.push(format!("{} only in the first run", va.variant));
            continue;
        };
        for ta in &va.tests {
            let Some(tb) = vb.tests.iter().find(|t| t.test == ta.test) else {
                only.push(format!("{} {} only in the first run", va.variant, ta.test));
                continue;
            };
            let verdict = if ta.error.is_some() || tb.error.is_some() {
                Verdict::Failed
            } else {
                welch(&ta.summary, &tb.summary)
            };
            out.push(Change {
                variant: va.variant.clone(),
                test: ta.test.clone(),
                unit: ta.unit.clone(),
                a: ta.summary,
                b: tb.summary,
                change_pct: if ta.summary.mean != 0.0 {
                    100.0 * (tb.summary.mean - ta.summary.mean) / ta.summary.mean
                } else {
                    0.0
                },
                verdict,
            });
        }
        for tb in &vb.tests {
            if !va.tests.iter().any(|t| t.test == tb.test) {
                only.push(format!("{} {} only in the second run", vb.variant, tb.test));
            }
        }
    }
    for vb in &b.variants {
        if !a.variants.iter().any(|v| v.variant == vb.variant) {
            only.push(format!("{} only in the second run", vb.variant));
        }
    }
    (out, only)
}

/// The comparison as terminal text.
pub fn text(a: &Results, b: &Results) -> String {
    let mut o = String::new();
    let (ea, eb) = (&a.environment, &b.environment);
    for (what, x, y) in [
        ("kernel", &ea.kernel, &eb.kernel),
        ("CPU", &ea.cpu_model, &eb.cpu_model),
        ("tunlab", &ea.tunlab, &eb.tunlab),
        ("iperf3", &ea.iperf3, &eb.iperf3),
        ("sockperf", &ea.sockperf, &eb.sockperf),
        ("Open vSwitch", &ea.ovs, &eb.ovs),
    ] {
        if x != y {
            let _ = writeln!(o, "environment differs: {what}: {x} -> {y}");
        }
    }
    if ea.cpus != eb.cpus {
        let _ = writeln!(o, "environment differs: CPUs: {} -> {}", ea.cpus, eb.cpus);
    }
    let (changes, only) = compare(a, b);
    let mut rows = vec![[
        "variant", "test", "unit", "first", "second", "change", "verdict",
    ]
    .map(String::from)
    .to_vec()];
    let cell = |s: &Summary| format!("{} ±{:.1}%", crate::chart::short(s.mean), s.cv_pct);
    for c in &changes {
        rows.push(vec![
            c.variant.clone(),
            c.test.clone(),
            c.unit.clone(),
            cell(&c.a),
            cell(&c.b),
            format!("{:+.1}%", c.change_pct),
            c.verdict.text().into(),
        ]);
    }
    o.push_str(&grid(&rows));
    let n = changes
        .iter()
        .filter(|c| c.verdict == Verdict::Changed)
        .count();
    let _ = writeln!(
        o,
        "{n} of {} changed beyond the noise (Welch's t-test, 95 %); ± is the standard deviation in % of the mean",
        changes.len()
    );
    for x in only {
        let _ = writeln!(o, "{x}");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welch_separates_a_real_change_from_noise() {
        // 10 % apart with 1 % spread: changed.
        let a = Summary::of(&[100.0, 101.0, 99.0, 100.5, 99.5]);
        let b = Summary::of(&[110.0, 111.0, 109.0, 110.5, 109.5]);
        assert_eq!(welch(&a, &b), Verdict::Changed);
        // 3 % apart with 10 % spread: within noise.
        let c = Summary::of(&[90.0, 110.0, 100.0, 95.0, 105.0]);
        let d = Summary::of(&[93.0, 113.0, 103.0, 98.0, 108.0]);
        assert_eq!(welch(&c, &d), Verdict::WithinNoise);
        assert_eq!(welch(&Summary::of(&[1.0]), &d), Verdict::CannotTell);
        let same = Summary::of(&[5.0, 5.0]);
        assert_eq!(welch(&same, &same), Verdict::WithinNoise);
        assert_eq!(welch(&same, &Summary::of(&[6.0, 6.0])), Verdict::Changed);
    }

    #[test]
    fn welch_matches_hand_computed_cases() {
        // sd 1, n 3 each, means 2 apart: t = 2 / sqrt(2/3) = 2.449, df 4,
        // critical 2.776: within noise.
        let a = Summary::of(&[9.0, 10.0, 11.0]);
        let b = Summary::of(&[11.0, 12.0, 13.0]);
        assert_eq!(welch(&a, &b), Verdict::WithinNoise);
        // variance 0.625, n 5 each, means 2 apart: t = 2 / sqrt(2 * 0.625
        // / 5) = 4, df 8, critical 2.306: changed.
        let a = Summary::of(&[9.0, 9.5, 10.0, 10.5, 11.0]);
        let b = Summary::of(&[11.0, 11.5, 12.0, 12.5, 13.0]);
        assert_eq!(welch(&a, &b), Verdict::Changed);
        assert_eq!(t95(4.9), 2.776);
        assert_eq!(t95(500.0), 1.960);
    }
}
