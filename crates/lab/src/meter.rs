//! What measures a sample's CPU: this machine's `/proc` (the whole
//! machine and the datapath processes), or each real host's over SSH.

use crate::cpu::{Snapshot, Usage};
use crate::sample::HostCpu;

/// What measures a sample's CPU: this machine's `/proc` with the datapath
/// processes' pids, or each real host's over SSH with the pids there.
#[derive(Debug, Clone)]
pub enum Meter<'a> {
    Local(&'a [u32]),
    Remote(&'a [std::sync::Mutex<crate::remote::CpuProbe>]),
}

/// A [`Meter`]'s reading at the start of a sample.
#[derive(Debug, Clone)]
pub enum Mark {
    Local(Snapshot),
    Remote(Vec<crate::remote::CpuMark>),
}

impl Meter<'_> {
    pub fn mark(&self) -> Result<Mark, String> {
        match self {
            Meter::Local(pids) => Ok(Mark::Local(Snapshot::take(pids))),
            Meter::Remote(probes) => probes
                .iter()
                .map(|p| {
                    p.lock()
                        .map_err(|_| "a CPU probe panicked".to_string())?
                        .mark()
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<_, _>>()
                .map(Mark::Remote),
        }
    }

    /// CPU since `m`: the whole (both real hosts summed), and each host's.
    pub fn usage(&self, m: &Mark) -> Result<(Usage, Vec<HostCpu>), String> {
        match (self, m) {
            (Meter::Remote(probes), Mark::Remote(before)) => {
                let mut each = Vec::new();
                let (mut busy, mut total) = (0u64, 0u64);
                for (p, b) in probes.iter().zip(before) {
                    let mut p = p.lock().map_err(|_| "a CPU probe panicked".to_string())?;
                    let now = p.mark().map_err(|e| e.to_string())?;
                    busy += now.busy.saturating_sub(b.busy);
                    total += now.total.saturating_sub(b.total);
                    each.push(HostCpu {
                        host: p.dest().to_string(),
                        usage: b.usage(&now),
                    });
                }
                let sum = Usage {
                    system_pct: 100.0 * busy as f64 / total.max(1) as f64,
                    system_busy_s: each.iter().map(|h| h.usage.system_busy_s).sum(),
                    datapath_pct: each.iter().map(|h| h.usage.datapath_pct).sum(),
                    cpus: each.iter().map(|h| h.usage.cpus).sum(),
                };
                Ok((sum, each))
            }
            (_, Mark::Local(s)) => Ok((s.usage(), Vec::new())),
            (Meter::Local(_), Mark::Remote(_)) => Err("a local meter read a remote mark".into()),
        }
    }
}
