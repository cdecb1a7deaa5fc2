//! The sampling rule of pbench-uperf: take a set of samples; if their
//! standard deviation exceeds a share of their mean (5 %), throw the set
//! away and take a new one, up to a number of attempts (6); a test that
//! never settles is reported as failed, with its last set kept.

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

/// How many samples per set, the spread allowed, and how many sets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub samples: usize,
    pub max_cv_pct: f64,
    pub max_attempts: usize,
    /// Reruns stop once a run's time budget is spent (seconds; the quick
    /// profile's promise to finish in minutes). None: the rule alone.
    #[serde(default)]
    pub budget_s: Option<u64>,
}

impl Rule {
    /// pbench-uperf's defaults with `samples` per set.
    pub fn pbench(samples: usize) -> Rule {
        Rule {
            samples: samples.max(1),
            max_cv_pct: 5.0,
            max_attempts: 6,
            budget_s: None,
        }
    }
}

/// What came of sampling one test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settled<T> {
    /// The last set taken (the one the figures come from).
    pub samples: Vec<T>,
    /// Sets taken in all (1 if the first settled).
    pub attempts: usize,
    /// The last set's spread was within the rule.
    pub settled: bool,
    /// Reruns were cut short because the run's time budget was spent.
    pub budget_spent: bool,
    /// A sample failed (the tool crashed or timed out): the message.
    pub error: Option<String>,
}

/// Take sets of samples with `one(attempt, index)` until the primary
/// figure's spread is within the rule or the attempts run out; before each
/// rerun `may_rerun()` is asked (the time budget). A failing sample ends
/// the test at once with its error.
pub fn settle<T>(
    rule: Rule,
    primary: impl Fn(&T) -> f64,
    mut may_rerun: impl FnMut() -> bool,
    mut one: impl FnMut(usize, usize) -> Result<T, String>,
) -> Settled<T> {
    let mut last = Vec::new();
    for attempt in 1..=rule.max_attempts.max(1) {
        if attempt > 1 && !may_rerun() {
            return Settled {
                samples: last,
                attempts: attempt - 1,
                settled: false,
                budget_spent: true,
                error: None,
            };
        }
        let mut set = Vec::with_capacity(rule.samples);
        for i in 0..rule.samples {
            match one(attempt, i) {
                Ok(s) => set.push(s),
                Err(e) => {
                    return Settled {
                        samples: set,
                        attempts: attempt,
                        settled: false,
                        budget_spent: false,
                        error: Some(e),
                    }
                }
            }
        }
        let xs: Vec<f64> = set.iter().map(&primary).collect();
        let ok = Summary::of(&xs).cv_pct <= rule.max_cv_pct;
        last = set;
        if ok {
            return Settled {
                samples: last,
                attempts: attempt,
                settled: true,
                budget_spent: false,
                error: None,
            };
        }
    }
    Settled {
        samples: last,
        attempts: rule.max_attempts.max(1),
        settled: false,
        budget_spent: false,
        error: None,
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

    #[test]
    fn a_steady_set_settles_at_once() {
        let r = settle(
            Rule::pbench(3),
            |x: &f64| *x,
            || true,
            |_, i| Ok(100.0 + i as f64),
        );
        assert!(r.settled);
        assert_eq!(r.attempts, 1);
        assert_eq!(r.samples, vec![100.0, 101.0, 102.0]);
    }

    #[test]
    fn a_noisy_set_is_rerun_until_it_settles() {
        // Attempts 1 and 2 swing by 50 %; attempt 3 is steady.
        let r = settle(
            Rule::pbench(3),
            |x: &f64| *x,
            || true,
            |a, i| {
                Ok(if a < 3 {
                    [50.0, 100.0, 150.0][i]
                } else {
                    100.0
                })
            },
        );
        assert!(r.settled);
        assert_eq!(r.attempts, 3);
        assert_eq!(r.samples, vec![100.0; 3]);
    }

    #[test]
    fn a_set_that_never_settles_fails_after_six_attempts() {
        let mut calls = 0;
        let r = settle(
            Rule::pbench(3),
            |x: &f64| *x,
            || true,
            |_, i| {
                calls += 1;
                Ok([50.0, 100.0, 150.0][i])
            },
        );
        assert!(!r.settled);
        assert_eq!(r.attempts, 6);
        assert_eq!(calls, 18);
        assert_eq!(r.error, None);
    }

    #[test]
    fn a_failing_sample_fails_the_test_with_its_message() {
        let r = settle(
            Rule::pbench(3),
            |x: &f64| *x,
            || true,
            |_, i| {
                if i == 1 {
                    Err("iperf3 exited with 1".to_string())
                } else {
                    Ok(1.0)
                }
            },
        );
        assert!(!r.settled);
        assert_eq!(r.error.as_deref(), Some("iperf3 exited with 1"));
        assert_eq!(r.samples, vec![1.0]);
    }

    #[test]
    fn reruns_stop_when_the_budget_is_spent() {
        // A noisy set; the budget allows one rerun.
        let mut reruns_allowed = 1;
        let r = settle(
            Rule::pbench(3),
            |x: &f64| *x,
            || {
                reruns_allowed -= 1;
                reruns_allowed >= 0
            },
            |_, i| Ok([50.0, 100.0, 150.0][i]),
        );
        assert!(!r.settled);
        assert!(r.budget_spent);
        assert_eq!(r.attempts, 2);
        assert_eq!(r.samples.len(), 3);
    }
}
