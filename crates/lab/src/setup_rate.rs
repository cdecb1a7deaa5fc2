//! The flow set-up rate (`tunlab bench --setup-rate`): how many new flows
//! a second a caching datapath's slow path takes without losing any,
//! tunlab's kernel datapath and Open vSwitch's userspace datapath side by
//! side in one run.
//!
//! Both get the same rules: forward by in_port, plus a rule on a UDP
//! source port no frame carries, at a higher priority, so that every
//! megaflow holds the source port (as a rule on L4 ports does in OVS) and
//! each of the generator's flows is a flow of its own in the cache. A
//! trial empties both nodes' caches (`del-flows --datapath`,
//! `dpctl/del-flows`), then sends each of N flows' first frame once, at
//! a fixed rate of new flows, from one tenant to the other, and counts
//! what arrives. The rate is found by binary search (RFC 2544's, on new
//! flows instead of frames): the highest with no frame lost, which must
//! pass a second time (a validation trial) to count.

use crate::soak::checks::parse_gen;
use crate::tenantgen::TenantGen;
use crate::topology::Topology;
use crate::traffic::INTERRUPTED;
use crate::variant::Variant;
use crate::LabError;
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::Ordering;

/// The rules both datapaths get.
pub const RULES: [&str; 3] = [
    "priority=100,in_port=2 actions=output:1",
    "priority=100,in_port=1 actions=output:2",
    "priority=200,udp,tp_src=1 actions=drop",
];

/// One trial: a rate of new flows and what it lost.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    pub rate: u64,
    pub sent: u64,
    pub lost: u64,
}

/// One variant's search.
#[derive(Debug, Clone, Serialize)]
pub struct Found {
    pub variant: String,
    /// The highest rate without loss (0: none passed).
    pub ndr: u64,
    /// Whether the highest rate tried passed (the true rate may be more).
    pub at_ceiling: bool,
    pub trials: Vec<Trial>,
    pub error: Option<String>,
}

/// The search's bounds and resolution.
#[derive(Debug, Clone)]
pub struct Plan {
    pub variants: Vec<Variant>,
    /// New flows per trial.
    pub flows: u32,
    pub min_rate: u64,
    pub max_rate: u64,
    /// Stop when the failing and passing rates are this close (%).
    pub granularity_pct: f64,
}

/// Run the search on each variant in turn.
pub fn run(plan: &Plan, tunlab: &Path, out: &Path) -> Result<Vec<Found>, LabError> {
    let dir = crate::results::run_dir(out)?;
    let mut all = Vec::new();
    for (n, &v) in plan.variants.iter().enumerate() {
        if INTERRUPTED.load(Ordering::SeqCst) {
            break;
        }
        let mut f = Found {
            variant: v.name().into(),
            ndr: 0,
            at_ceiling: false,
            trials: Vec::new(),
            error: None,
        };
        if let Some(m) = v.missing() {
            f.error = Some(m);
            all.push(f);
            continue;
        }
        if let Err(e) = search(plan, v, n, tunlab, &dir, &mut f) {
            f.error = Some(e.to_string());
        }
        all.push(f);
    }
    Ok(all)
}

fn search(
    plan: &Plan,
    v: Variant,
    n: usize,
    tunlab: &Path,
    dir: &Path,
    f: &mut Found,
) -> Result<(), LabError> {
    let topo = Topology::build(n)?;
    let running = crate::running::setup(v, &topo, tunlab, dir, None, None)?;
    running.set_rules(&RULES).map_err(LabError::Setup)?;
    let tg = TenantGen::new(
        &topo,
        &running.tenant_if,
        tunlab,
        1024..=1024 + plan.flows - 1,
        9,
    )?;
    let json = dir.join(format!("setup-rate-{}.json", v.name()));
    let count = plan.flows.to_string();
    let mut trial = |rate: u64| -> Result<bool, LabError> {
        running.flush().map_err(LabError::Setup)?;
        let argv = tg.argv(rate, ["--count", &count], &json);
        topo.t[0].run(&argv.iter().map(String::as_str).collect::<Vec<_>>())?;
        let text = std::fs::read_to_string(&json).map_err(|err| LabError::Io {
            path: json.display().to_string(),
            err,
        })?;
        let g = parse_gen(&text).map_err(LabError::Setup)?;
        f.trials.push(Trial {
            rate,
            sent: g.sent,
            lost: g.lost,
        });
        Ok(g.sent > 0 && g.lost == 0)
    };
    // The ceiling first: if it passes, the search is over.
    if trial(plan.max_rate)? {
        f.ndr = plan.max_rate;
        f.at_ceiling = true;
        return Ok(());
    }
    let (mut lo, mut hi) = (0u64, plan.max_rate);
    let mut rate = plan.min_rate.max(1);
    let mut passed: Vec<u64> = Vec::new();
    loop {
        if INTERRUPTED.load(Ordering::SeqCst) {
            return Err(LabError::Interrupted);
        }
        if trial(rate)? {
            lo = rate;
            passed.push(rate);
        } else {
            hi = rate;
        }
        let settled = (hi - lo) as f64 <= hi as f64 * plan.granularity_pct / 100.0;
        let next = if lo == 0 {
            plan.min_rate
        } else {
            (lo + hi) / 2
        };
        if lo == 0 && hi <= plan.min_rate {
            // Even the floor loses.
            break;
        }
        if settled || next == lo || next == hi {
            // Validation: the rate found must pass again; if it does not,
            // it is a failing rate and the search goes on below it.
            if lo == 0 || trial(lo)? {
                break;
            }
            hi = lo;
            lo = passed
                .iter()
                .copied()
                .filter(|&r| r < hi)
                .max()
                .unwrap_or(0);
            rate = if lo == 0 {
                plan.min_rate
            } else {
                (lo + hi) / 2
            };
            if rate == lo {
                break;
            }
            continue;
        }
        rate = next;
    }
    f.ndr = lo;
    Ok(())
}

/// The table: per variant the rate found and, against the first variant,
/// the ratio.
pub fn table(found: &[Found], flows: u32) -> String {
    let mut s = format!(
        "flow set-up rate: {flows} new flows per trial, caches emptied before each, highest rate with no frame lost\n\n{:<22} {:>16} {:>8} {:>7}\n",
        "variant", "new flows/s", "trials", "ratio"
    );
    let base = found
        .iter()
        .find(|f| f.error.is_none() && f.ndr > 0)
        .map(|f| f.ndr);
    for f in found {
        match &f.error {
            Some(e) => s.push_str(&format!("{:<22} FAILED: {e}\n", f.variant)),
            None => {
                let ratio = base.map_or("-".to_string(), |b| {
                    format!("{:.2}x", f.ndr as f64 / b as f64)
                });
                s.push_str(&format!(
                    "{:<22} {:>16} {:>8} {:>7}\n",
                    f.variant,
                    if f.at_ceiling {
                        format!(">= {}", f.ndr)
                    } else {
                        f.ndr.to_string()
                    },
                    f.trials.len(),
                    ratio
                ));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_ceilings_failures_and_ratios() {
        let f = |v: &str, ndr, ceil, err: Option<&str>| Found {
            variant: v.into(),
            ndr,
            at_ceiling: ceil,
            trials: vec![],
            error: err.map(String::from),
        };
        let t = table(
            &[
                f("tunlab-ebpf-geneve", 60000, false, None),
                f("ovs-geneve", 90000, false, None),
                f("ovs-vxlan", 400000, true, None),
                f("ovs-gre", 0, false, Some("not installed")),
            ],
            1000,
        );
        assert!(t.contains("60000"), "{t}");
        assert!(t.contains("1.50x"), "{t}");
        assert!(t.contains(">= 400000"), "{t}");
        assert!(
            t.contains("ovs-gre                FAILED: not installed"),
            "{t}"
        );
    }
}
