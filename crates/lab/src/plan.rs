//! What a bench runs: the variants, the tests, the baseline the ratios
//! are taken against, how long a sample lasts, and when the rounds stop.
//! The two profiles are here; the command line edits a profile's plan.

use crate::guard::Limits;
use crate::sample::{Kind, Test};
use crate::stats::Rule;
use crate::variant::Variant;
use crate::LabError;
use serde::{Deserialize, Serialize};

/// What to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub profile: String,
    pub variants: Vec<Variant>,
    pub tests: Vec<Test>,
    /// Seconds of one sample (a fixed-rate CPU test takes at least
    /// [`MIN_CPU_WINDOW_S`]).
    pub seconds: u32,
    pub rule: Rule,
    /// The variant every other is paired with, round by round (absent in
    /// results of runs made before rounds existed).
    #[serde(default)]
    pub baseline: Option<Variant>,
    /// The seed of each round's shuffled order (a run can be replayed in
    /// the same order).
    #[serde(default)]
    pub seed: u64,
    /// When the noise guard marks a sample.
    #[serde(default)]
    pub guard: Limits,
    /// Packet threads per tunlab node; `None`: the switch's default.
    #[serde(default)]
    pub workers: Option<u16>,
    /// tunlab's `spin_us`; `None`: the switch's default.
    #[serde(default)]
    pub spin_us: Option<u64>,
    /// CPUs the client and server tenants' tools run on; `None`: wherever
    /// the scheduler puts them.
    #[serde(default)]
    pub tenant_cpus: Option<[u16; 2]>,
}

fn t(kind: Kind, size: usize, instances: usize) -> Test {
    Test {
        kind,
        size,
        instances,
        rate_gbit: None,
    }
}

/// The quick profile's promise: done within five minutes here, set-up
/// and tear-down included. No round is begun that would end after it;
/// cells whose interval is still wider than the rule's are named.
pub const QUICK_BUDGET_S: u64 = 270;

/// CPU at a fixed rate is read over windows at least this long: a 2-s
/// window's CPU figure moved by a tenth with one scheduler tick's luck.
pub const MIN_CPU_WINDOW_S: u32 = 10;

impl Plan {
    /// The settings this run asked for instead of the defaults ("" if
    /// none), e.g. "tunlab nodes: workers = 2, spin_us = 0".
    pub fn settings(&self) -> String {
        let mut out = Vec::new();
        if let Some([c, s]) = self.tenant_cpus {
            out.push(format!(
                "tenants' tools pinned: client to CPU {c}, server to CPU {s}"
            ));
        }
        let mut v = Vec::new();
        if let Some(w) = self.workers {
            v.push(format!("workers = {w}"));
        }
        if let Some(s) = self.spin_us {
            v.push(format!("spin_us = {s}"));
        }
        if !v.is_empty() {
            out.push(format!("tunlab nodes: {}", v.join(", ")));
        }
        out.join("; ")
    }

    /// How the run measures, in a sentence.
    pub fn method(&self) -> String {
        let r = &self.rule;
        let base = match self.baseline {
            Some(b) if self.baseline_index().is_some() => format!(
                "; each round pairs every variant with {}: the ratios' 95 % interval must lie within ±{}%",
                b.name(),
                r.max_ci_pct
            ),
            _ => "; no baseline among the variants, so no ratios".into(),
        };
        format!(
            "{} variants × {} tests side by side, in rounds of shuffled samples of {} s ({} s for CPU at a fixed rate): at least {} rounds, at most {}{}{}; a sample taken while something outside the lab used over {}% of the machine, or steal was over {}%, is taken again",
            self.variants.len(),
            self.tests.len(),
            self.seconds,
            self.seconds.max(MIN_CPU_WINDOW_S),
            r.min_rounds,
            r.max_rounds.max(r.min_rounds),
            base,
            r.budget_s
                .map(|b| format!(", within {b} s for the whole run"))
                .unwrap_or_default(),
            self.guard.outside_pct,
            self.guard.steal_pct,
        )
    }

    /// How long one sample of `test` lasts.
    pub fn seconds_of(&self, test: &Test) -> u32 {
        if test.rate_gbit.is_some() {
            self.seconds.max(MIN_CPU_WINDOW_S)
        } else {
            self.seconds
        }
    }

    /// The index of the baseline among the variants, if it is one of
    /// them.
    pub fn baseline_index(&self) -> Option<usize> {
        let b = self.baseline?;
        self.variants.iter().position(|v| *v == b)
    }

    /// What every profile shares: against kernel VXLAN, the guard's
    /// default limits, the switch's own settings.
    pub(crate) fn base(name: &str) -> Plan {
        Plan {
            profile: name.into(),
            variants: Vec::new(),
            tests: Vec::new(),
            seconds: 1,
            rule: Rule::rounds(5, 20),
            baseline: Some(Variant::KernelVxlan),
            seed: 0,
            guard: Limits::default(),
            workers: None,
            spin_us: None,
            tenant_cpus: None,
        }
    }

    /// `quick`: tunlab's flagship datapaths against the kernel and Open
    /// vSwitch, three tests, in about five minutes here; `full`: the
    /// whole matrix of the articles and of pbench-uperf.
    pub fn profile(name: &str) -> Result<Plan, LabError> {
        match name {
            "quick" => Ok(Plan {
                // The eBPF datapath per family where it exists (Geneve
                // with OVN's option, VXLAN, QinQ), the userspace datapath
                // where only it carries the encapsulation (STT) and once
                // for comparison (Geneve+OVN), the kernel's VXLAN, no
                // tunnel, and Open vSwitch.
                variants: vec![
                    Variant::None,
                    Variant::KernelVxlan,
                    Variant::TunlabEbpfGeneveOvn,
                    Variant::TunlabEbpfVxlan,
                    Variant::TunlabEbpfQinq,
                    Variant::TunlabStt,
                    Variant::TunlabGeneveOvn,
                    Variant::OvsGeneveOvn,
                ],
                // CPU cost comes from the streams' service demand (CPU
                // per KB, paired like the rest): a fixed-rate CPU test
                // needs 10-s windows, eight of them a round, more than
                // five minutes allow. The full profile has it.
                tests: vec![
                    t(Kind::TcpStream, 16384, 1),
                    // 64 KB writes: the kernel's sender is no longer bound
                    // by its own writes and shows its ceiling.
                    t(Kind::TcpStream, 65536, 1),
                    t(Kind::TcpRr, 64, 1),
                ],
                seconds: 1,
                rule: Rule {
                    budget_s: Some(QUICK_BUDGET_S),
                    ..Rule::rounds(5, 40)
                },
                ..Plan::base(name)
            }),
            "full" => {
                let mut tests = Vec::new();
                for kind in Kind::ALL.into_iter().filter(|k| *k != Kind::FirstPacket) {
                    for size in [64, 1024, 16384] {
                        for n in [1, 8, 64] {
                            tests.push(t(kind, size, n));
                        }
                    }
                }
                tests.push(Test {
                    rate_gbit: Some(2.0),
                    ..t(Kind::TcpStream, 16384, 1)
                });
                tests.push(t(Kind::FirstPacket, 64, 1));
                Ok(Plan {
                    variants: Variant::ALL.to_vec(),
                    tests,
                    seconds: 5,
                    rule: Rule::rounds(5, 20),
                    ..Plan::base(name)
                })
            }
            other => Err(LabError::Usage {
                what: "--profile",
                msg: format!("'{other}' is not a profile; valid: quick, full"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_named_only_when_asked_for() {
        let mut p = Plan::profile("quick").unwrap();
        assert_eq!(p.settings(), "");
        p.workers = Some(2);
        p.spin_us = Some(0);
        assert_eq!(p.settings(), "tunlab nodes: workers = 2, spin_us = 0");
        p.tenant_cpus = Some([0, 1]);
        assert_eq!(
            p.settings(),
            "tenants' tools pinned: client to CPU 0, server to CPU 1; tunlab nodes: workers = 2, spin_us = 0"
        );
    }

    #[test]
    fn plans_of_older_runs_still_load() {
        // A plan as runs before rounds wrote it.
        let old = r#"{"profile":"quick","variants":["none","kernel-vxlan"],
            "tests":[{"kind":"tcp_stream","size":16384,"instances":1,"rate_gbit":null}],
            "seconds":2,"rule":{"samples":3,"max_cv_pct":5.0,"max_attempts":6,"budget_s":270}}"#;
        let p: Plan = serde_json::from_str(old).unwrap();
        assert_eq!(p.rule.min_rounds, 3);
        assert_eq!(p.rule.max_ci_pct, 5.0);
        assert_eq!(p.baseline, None);
        assert_eq!(p.baseline_index(), None);
        assert_eq!(p.workers, None);
        assert_eq!(p.tenant_cpus, None);
    }

    #[test]
    fn the_quick_profile_keeps_the_flagship_and_its_rivals() {
        let p = Plan::profile("quick").unwrap();
        assert_eq!(p.baseline_index(), Some(1));
        for v in [
            Variant::TunlabEbpfGeneveOvn,
            Variant::TunlabEbpfVxlan,
            Variant::TunlabEbpfQinq,
            Variant::TunlabStt,
            Variant::OvsGeneveOvn,
            Variant::None,
        ] {
            assert!(p.variants.contains(&v), "{v:?}");
        }
        // A fixed-rate CPU window is never shorter than 10 s.
        let full = Plan::profile("full").unwrap();
        let cpu = full.tests.iter().find(|t| t.rate_gbit.is_some()).unwrap();
        assert_eq!(full.seconds_of(cpu), MIN_CPU_WINDOW_S);
        assert!(Plan::profile("fast").is_err());
    }
}
