//! The zero-loss (NDR) and partial-drop-rate (PDR) search: RFC 2544's
//! binary search, in the form trafficgen's `binary-search.py` made common
//! for virtual switches. Pure: it asks a trial function for results, so it
//! is tested against a synthetic device.
//!
//! 1. A first trial at the highest rate the generator can send. If it
//!    passes, that rate is the answer (the device keeps up with the
//!    generator) and the result says so.
//! 2. Otherwise bisect between the highest rate that passed (0 at first)
//!    and the lowest that failed, until they are within `granularity` % of
//!    each other.
//! 3. Validate the highest passing rate with a longer trial. If validation
//!    fails, that rate counts as failed and the search goes on below it.
//!
//! A trial passes when its loss is at most `loss_pct` % of what was sent
//! and the generator really sent at the rate asked (within 2 %): a trial
//! the generator could not keep up with says nothing about the device.

use serde::Serialize;
use std::time::Duration;

/// The search's settings. Defaults are trafficgen's: 30 s trials, 30 s
/// validation; the tolerance is its 5 % search granularity.
#[derive(Debug, Clone)]
pub struct Settings {
    pub trial: Duration,
    pub validation: Duration,
    /// Stop when the failing rate is within this % of the passing one.
    pub granularity_pct: f64,
    /// The loss allowed, % of sent frames: 0 for NDR.
    pub loss_pct: f64,
    /// The most trials before giving up (the search halves its interval
    /// each time, so 30 reach 1e-9 of the start).
    pub max_trials: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            trial: Duration::from_secs(30),
            validation: Duration::from_secs(30),
            granularity_pct: 5.0,
            loss_pct: 0.0,
            max_trials: 30,
        }
    }
}

/// Which step a trial belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Max,
    Search,
    Validation,
}

/// What a trial measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Outcome {
    pub tx: u64,
    pub rx: u64,
    /// The rate achieved, frames per second.
    pub tx_pps: f64,
}

impl Outcome {
    pub fn loss_pct(&self) -> f64 {
        if self.tx == 0 {
            return 100.0;
        }
        100.0 * self.tx.saturating_sub(self.rx) as f64 / self.tx as f64
    }
}

/// One trial as the search saw it.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub phase: Phase,
    /// The rate asked, frames per second (`None`: as fast as possible).
    pub rate_pps: Option<f64>,
    pub outcome: Outcome,
    pub passed: bool,
    pub why: String,
}

/// The search's answer.
#[derive(Debug, Clone, Serialize)]
pub struct Found {
    /// The highest rate that passed validation (frames/s); `None` if no
    /// rate passed.
    pub rate_pps: Option<f64>,
    /// True when the first, fastest trial passed: the device was not the
    /// limit, the generator was.
    pub generator_limited: bool,
    pub steps: Vec<Step>,
}

fn judge(phase: Phase, rate: Option<f64>, o: Outcome, s: &Settings) -> Step {
    let loss = o.loss_pct();
    let (passed, why) = if o.tx == 0 {
        (false, "nothing was sent".to_string())
    } else if matches!(rate, Some(r) if o.tx_pps < 0.98 * r) {
        (
            false,
            format!(
                "the generator sent {:.0} fps of the {:.0} asked",
                o.tx_pps,
                rate.unwrap_or(0.0)
            ),
        )
    } else if loss > s.loss_pct {
        (false, format!("loss {loss:.4} % > {} %", s.loss_pct))
    } else {
        (true, format!("loss {loss:.4} % <= {} %", s.loss_pct))
    };
    Step {
        phase,
        rate_pps: rate,
        outcome: o,
        passed,
        why,
    }
}

/// Search with `trial(rate, duration, phase)`, where a `None` rate means
/// as fast as possible. `on_step` sees each step as it is decided.
pub fn search<E>(
    s: &Settings,
    mut trial: impl FnMut(Option<f64>, Duration, Phase) -> Result<Outcome, E>,
    mut on_step: impl FnMut(&Step),
) -> Result<Found, E> {
    let mut steps = Vec::new();
    let mut record = |st: Step, steps: &mut Vec<Step>| {
        on_step(&st);
        let passed = st.passed;
        steps.push(st);
        passed
    };
    let first = trial(None, s.trial, Phase::Max)?;
    let top = first.tx_pps;
    if record(judge(Phase::Max, None, first, s), &mut steps) {
        return Ok(Found {
            rate_pps: Some(top),
            generator_limited: true,
            steps,
        });
    }
    // Rates that passed a search trial, and the lowest that failed.
    let mut passes: Vec<f64> = Vec::new();
    let mut fail = top;
    while steps.len() < s.max_trials {
        let pass = passes.iter().copied().fold(0.0, f64::max);
        if pass > 0.0 && fail - pass <= fail * s.granularity_pct / 100.0 {
            let o = trial(Some(pass), s.validation, Phase::Validation)?;
            if record(judge(Phase::Validation, Some(pass), o, s), &mut steps) {
                return Ok(Found {
                    rate_pps: Some(pass),
                    generator_limited: false,
                    steps,
                });
            }
            passes.retain(|&p| p < pass);
            fail = pass;
            continue;
        }
        let rate = (pass + fail) / 2.0;
        if rate < 1.0 {
            break;
        }
        let o = trial(Some(rate), s.trial, Phase::Search)?;
        if record(judge(Phase::Search, Some(rate), o, s), &mut steps) {
            passes.push(rate);
        } else {
            fail = rate;
        }
    }
    Ok(Found {
        rate_pps: None,
        generator_limited: false,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device that forwards up to `knee` frames/s and drops the excess,
    /// behind a generator that sends at most `gen_max`.
    fn device(
        knee: f64,
        gen_max: f64,
    ) -> impl FnMut(Option<f64>, Duration, Phase) -> Result<Outcome, ()> {
        move |rate, d, _| {
            let pps = rate.unwrap_or(gen_max).min(gen_max);
            let tx = (pps * d.as_secs_f64()) as u64;
            let rx = tx.min((knee * d.as_secs_f64()) as u64);
            Ok(Outcome {
                tx,
                rx,
                tx_pps: pps,
            })
        }
    }

    fn quick() -> Settings {
        Settings {
            trial: Duration::from_secs(1),
            validation: Duration::from_secs(2),
            ..Settings::default()
        }
    }

    #[test]
    fn converges_below_the_knee_within_the_granularity() {
        for knee in [1.0e3, 123_456.0, 700_000.0, 999_000.0] {
            let f = search(&quick(), device(knee, 1.0e6), |_| {}).unwrap();
            let r = f.rate_pps.unwrap();
            assert!(r <= knee && r >= knee * 0.95, "knee {knee}: found {r}");
            assert!(!f.generator_limited);
            let last = f.steps.last().unwrap();
            assert_eq!(last.phase, Phase::Validation);
            assert!(last.passed);
        }
    }

    #[test]
    fn a_device_faster_than_the_generator_is_said_to_be() {
        let f = search(&quick(), device(2.0e6, 1.0e6), |_| {}).unwrap();
        assert_eq!(f.rate_pps, Some(1.0e6));
        assert!(f.generator_limited);
        assert_eq!(f.steps.len(), 1);
    }

    #[test]
    fn pdr_accepts_the_loss_it_is_given() {
        // Loss at rate r is (r - knee) / r: 0.1 % loss is allowed up to
        // knee / 0.999.
        let s = Settings {
            loss_pct: 0.1,
            granularity_pct: 0.01,
            ..quick()
        };
        let f = search(&s, device(500_000.0, 1.0e6), |_| {}).unwrap();
        let r = f.rate_pps.unwrap();
        assert!(r > 500_000.0 && r <= 500_000.0 / 0.999, "{r}");
    }

    #[test]
    fn a_failed_validation_searches_lower() {
        // Search trials (1 s) pass up to 800k; the device tires on longer
        // trials (validation, 2 s) above 600k.
        let mut dev = |rate: Option<f64>, d: Duration, _| -> Result<Outcome, ()> {
            let pps = rate.unwrap_or(1.0e6);
            let knee = if d.as_secs() >= 2 {
                600_000.0
            } else {
                800_000.0
            };
            let tx = (pps * d.as_secs_f64()) as u64;
            Ok(Outcome {
                tx,
                rx: tx.min((knee * d.as_secs_f64()) as u64),
                tx_pps: pps,
            })
        };
        let f = search(&quick(), &mut dev, |_| {}).unwrap();
        let r = f.rate_pps.unwrap();
        assert!((600_000.0 * 0.95..=600_000.0).contains(&r), "{r}");
        assert!(f
            .steps
            .iter()
            .any(|s| s.phase == Phase::Validation && !s.passed));
    }

    #[test]
    fn a_generator_that_cannot_reach_the_rate_fails_the_trial() {
        let st = judge(
            Phase::Search,
            Some(1000.0),
            Outcome {
                tx: 900,
                rx: 900,
                tx_pps: 900.0,
            },
            &quick(),
        );
        assert!(!st.passed && st.why.contains("sent 900"), "{}", st.why);
    }

    #[test]
    fn a_device_that_drops_everything_has_no_rate() {
        let f = search(&quick(), device(0.0, 1.0e6), |_| {}).unwrap();
        assert_eq!(f.rate_pps, None);
        assert!(f.steps.len() <= quick().max_trials);
    }
}
