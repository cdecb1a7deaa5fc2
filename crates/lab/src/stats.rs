//! The lab's statistics: a set of samples summarised (mean, spread), and
//! the paired comparison the verdicts come from: in every round each
//! variant and the baseline are measured once, close together in time,
//! so each round gives one ratio in which the machine's drift (a noisy
//! neighbour, steal, heat) cancels; the ratios' geometric mean and its
//! 95 % interval (Student's t on the log ratios, the parametric form of
//! Kalibera and Jones's ratio intervals) say whether a variant is higher,
//! lower or the same.

use serde::{Deserialize, Serialize};

/// Mean, spread and extremes of one set of samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n - 1).
    pub stddev: f64,
    /// Standard deviation in percent of the mean.
    pub cv_pct: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    pub fn of(xs: &[f64]) -> Summary {
        let n = xs.len();
        if n == 0 {
            return Summary {
                n,
                mean: 0.0,
                stddev: 0.0,
                cv_pct: 0.0,
                min: 0.0,
                max: 0.0,
            };
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let stddev = var.sqrt();
        Summary {
            n,
            mean,
            stddev,
            cv_pct: if mean.abs() > 0.0 {
                100.0 * stddev / mean.abs()
            } else {
                0.0
            },
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// When a run has measured enough: at least `min_rounds` rounds, then more
/// while a variant's interval against the baseline is wider than
/// `±max_ci_pct`, up to `max_rounds`, within `budget_s` when set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// Rounds every (variant, test) gets at least (results of runs made
    /// before rounds existed called these samples per set).
    #[serde(alias = "samples")]
    pub min_rounds: usize,
    /// More rounds, for the tests that need them, up to this many.
    #[serde(default = "default_max_rounds")]
    pub max_rounds: usize,
    /// A ratio's 95 % interval must lie within ± this share of it (%).
    #[serde(alias = "max_cv_pct")]
    pub max_ci_pct: f64,
    /// No round is begun that would end after this many seconds of the
    /// run (the quick profile's promise to finish in minutes). None: the
    /// rule alone.
    #[serde(default)]
    pub budget_s: Option<u64>,
}

fn default_max_rounds() -> usize {
    1
}

impl Rule {
    /// At least `min` rounds, then until every interval is within ±5 %,
    /// at most `max`.
    pub fn rounds(min: usize, max: usize) -> Rule {
        let min = min.max(1);
        Rule {
            min_rounds: min,
            max_rounds: max.max(min),
            max_ci_pct: 5.0,
            budget_s: None,
        }
    }
}

/// Two-sided 95 % critical values of Student's t for 1..=30 degrees of
/// freedom.
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Student's t at 95 %, two-sided, for `df` degrees of freedom (rounded
/// down: the interval errs wide).
pub fn t95(df: f64) -> f64 {
    let d = df.floor().max(1.0) as usize;
    match d {
        1..=30 => T95[d - 1],
        31..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

/// What a ratio's interval says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval is above 1.
    Higher,
    /// The whole interval is below 1.
    Lower,
    /// The interval holds 1: no difference the rounds can tell.
    Same,
}

/// A variant's figure against the baseline's, from rounds in which both
/// were measured (one ratio per round).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// Paired rounds.
    pub rounds: usize,
    /// The ratios' geometric mean: the figure the interval is around.
    pub ratio: f64,
    /// Its 95 % confidence interval.
    pub lo: f64,
    pub hi: f64,
    /// The ratios' median, for reference.
    pub median: f64,
}

impl Ratio {
    /// The interval from per-round ratios: Student's t on their logs
    /// (a ratio's noise is multiplicative). None with fewer than two
    /// usable ratios (positive and finite).
    pub fn of(ratios: &[f64]) -> Option<Ratio> {
        let mut logs: Vec<f64> = ratios
            .iter()
            .filter(|r| r.is_finite() && **r > 0.0)
            .map(|r| r.ln())
            .collect();
        let n = logs.len();
        if n < 2 {
            return None;
        }
        let mean = logs.iter().sum::<f64>() / n as f64;
        let var = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t95((n - 1) as f64) * (var / n as f64).sqrt();
        logs.sort_by(f64::total_cmp);
        let median = if n % 2 == 1 {
            logs[n / 2]
        } else {
            (logs[n / 2 - 1] + logs[n / 2]) / 2.0
        };
        Some(Ratio {
            rounds: n,
            ratio: mean.exp(),
            lo: (mean - half).exp(),
            hi: (mean + half).exp(),
            median: median.exp(),
        })
    }

    /// The interval's half width in percent of the ratio (the wider side).
    pub fn half_width_pct(&self) -> f64 {
        100.0 * f64::max(self.hi / self.ratio - 1.0, 1.0 - self.lo / self.ratio)
    }

    pub fn verdict(&self) -> Verdict {
        if self.lo > 1.0 {
            Verdict::Higher
        } else if self.hi < 1.0 {
            Verdict::Lower
        } else {
            Verdict::Same
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_matches_hand_computation() {
        let s = Summary::of(&[10.0, 12.0, 14.0]);
        assert_eq!(s.n, 3);
        assert!((s.mean - 12.0).abs() < 1e-12);
        assert!((s.stddev - 2.0).abs() < 1e-12);
        assert!((s.cv_pct - 100.0 * 2.0 / 12.0).abs() < 1e-9);
        assert_eq!((s.min, s.max), (10.0, 14.0));
        assert_eq!(Summary::of(&[]).n, 0);
        assert_eq!(Summary::of(&[5.0]).stddev, 0.0);
    }

    /// A small seeded generator for the synthetic trials.
    fn normal(rng: &mut fastrand::Rng) -> f64 {
        // Box-Muller.
        let (u, v) = (rng.f64().max(1e-12), rng.f64());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    #[test]
    fn a_ratio_interval_is_the_t_interval_of_the_logs() {
        // ln ratios 0, 0.1, 0.2: mean 0.1, sd 0.1, half 4.303 * 0.1 / sqrt 3.
        let r = Ratio::of(&[1.0, 0.1f64.exp(), 0.2f64.exp()]).unwrap();
        assert_eq!(r.rounds, 3);
        let half = 4.303 * 0.1 / 3f64.sqrt();
        assert!((r.ratio - 0.1f64.exp()).abs() < 1e-12);
        assert!((r.lo - (0.1 - half).exp()).abs() < 1e-12);
        assert!((r.hi - (0.1 + half).exp()).abs() < 1e-12);
        assert!((r.median - 0.1f64.exp()).abs() < 1e-12);
        assert_eq!(r.verdict(), Verdict::Same);
        // Too few, or unusable, ratios give none.
        assert_eq!(Ratio::of(&[1.1]), None);
        assert_eq!(Ratio::of(&[1.1, 0.0, f64::NAN]), None);
        // Steady ratios: a narrow interval and a verdict.
        let up = Ratio::of(&[1.20, 1.21, 1.19, 1.20]).unwrap();
        assert_eq!(up.verdict(), Verdict::Higher);
        assert!(up.half_width_pct() < 2.0, "{up:?}");
        assert_eq!(
            Ratio::of(&[0.8, 0.81, 0.79]).unwrap().verdict(),
            Verdict::Lower
        );
    }

    #[test]
    fn intervals_cover_the_true_ratio_at_the_stated_rate() {
        // 4,000 seeded trials of 6 rounds each, 8 % multiplicative noise
        // on each round's ratio: the 95 % interval must hold the true
        // ratio in 95 % of them (binomial sd 0.34 %: 93.5..96.5 is wide).
        let mut rng = fastrand::Rng::with_seed(29);
        let truth: f64 = 1.13;
        let trials = 4000;
        let mut held = 0;
        for _ in 0..trials {
            let ratios: Vec<f64> = (0..6)
                .map(|_| truth * (0.08 * normal(&mut rng)).exp())
                .collect();
            let r = Ratio::of(&ratios).unwrap();
            if r.lo <= truth && truth <= r.hi {
                held += 1;
            }
        }
        let rate = held as f64 / trials as f64;
        assert!((0.935..=0.965).contains(&rate), "coverage {rate}");
    }

    #[test]
    fn t_grows_for_few_degrees_of_freedom() {
        assert_eq!(t95(1.0), 12.706);
        assert_eq!(t95(5.9), 2.571);
        assert_eq!(t95(45.0), 2.0);
        assert_eq!(t95(1e6), 1.96);
        assert_eq!(t95(0.0), 12.706);
    }
}
