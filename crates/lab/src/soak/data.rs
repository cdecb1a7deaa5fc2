//! What a soak is asked to do and what it found: the plan, each second's
//! sample, the totals, the checks.

use crate::variant::Variant;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;
use tunlab_ctl::Stats;

pub(super) const GEN_PORT: u16 = 9;

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub variant: Variant,
    pub duration: Duration,
    /// The generator's rate, frames/s, and how many flows it spreads over.
    pub gen_pps: u64,
    pub gen_flows: u32,
    /// iperf3 streams, each limited to this many Mbit/s (so that the
    /// generator's frames are not lost to a full CPU the switch does not
    /// count).
    pub streams: u32,
    pub stream_mbps: u32,
    pub change: FlowChange,
}

/// The flow change made every second, on h1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowChange {
    /// A rule matching one generator flow by its UDP ports, added and
    /// taken away: a rule of a new shape each time (on the kernel
    /// datapath, a mask of its own; the flows it cannot reach stay
    /// cached).
    Mask,
    /// A rule of the shape the rules already have (in_port), with the
    /// same output as the rule under it: revalidated flow by flow, every
    /// cached flow kept.
    Actions,
    /// A rule of a new shape above the rules (a UDP port no flow uses):
    /// every cached flow of the port now depends on a field its mask left
    /// out, and is rebuilt under a new mask before its old entry goes.
    Above,
    /// No change: the quiet period the others are compared with.
    None,
}

impl FlowChange {
    pub fn parse(s: &str) -> Result<FlowChange, String> {
        match s {
            "mask" => Ok(FlowChange::Mask),
            "actions" => Ok(FlowChange::Actions),
            "above" => Ok(FlowChange::Above),
            "none" => Ok(FlowChange::None),
            _ => Err(format!(
                "'{s}' is not a flow change (mask, actions, above, none)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FlowChange::Mask => "mask",
            FlowChange::Actions => "actions",
            FlowChange::Above => "above",
            FlowChange::None => "none",
        }
    }

    /// The rule it adds and deletes (without actions); none for `none`.
    pub(super) fn rule(self) -> Option<String> {
        match self {
            FlowChange::Mask => Some(format!(
                "priority=200,in_port=2,udp,tp_src=10000,tp_dst={GEN_PORT}"
            )),
            FlowChange::Actions => Some("priority=200,in_port=2".into()),
            FlowChange::Above => Some(format!(
                "priority=40000,in_port=2,udp,tp_dst={}",
                GEN_PORT - 2
            )),
            FlowChange::None => None,
        }
    }
}

/// One node at one moment.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NodeSample {
    pub rss_kib: u64,
    pub fds: u64,
    pub bpf_map_fds: u64,
    /// Flows in the kernel cache at the revalidator's last sweep.
    pub cached_flows: Option<u64>,
    /// Every counter of `tunlab ctl stats` that is one number.
    pub counters: BTreeMap<String, u64>,
}

/// Both nodes at one moment.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub t_s: f64,
    pub nodes: Vec<NodeSample>,
}

/// One check at the end: what, whether it held, the figures behind it.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub what: String,
    pub held: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct GenTotals {
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub duplicates: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TcpTotals {
    pub intervals: usize,
    pub empty_intervals: Vec<usize>,
    pub mean_gbps: f64,
    pub min_interval_gbps: f64,
    pub retransmits: u64,
    /// Each 1-s interval's retransmissions (iperf3's sum over streams).
    pub retransmits_by_interval: Vec<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Soak {
    pub variant: String,
    pub duration_s: f64,
    pub gen_pps: u64,
    pub gen_flows: u32,
    pub streams: u32,
    pub stream_mbps: u32,
    /// Which flow change (`mask`, `actions`).
    pub change: String,
    pub flow_changes: u64,
    pub flow_change_errors: Vec<String>,
    pub gen: GenTotals,
    pub tcp: TcpTotals,
    /// Drops by reason per node at the end (`dropped WHY: N` and the
    /// kernel's drop counters).
    pub drops: Vec<BTreeMap<String, u64>>,
    /// `tunlab ctl stats` of each node before the traffic and at the end
    /// (empty where a node did not answer).
    pub baseline_stats: Vec<Stats>,
    pub final_stats: Vec<Stats>,
    pub samples: Vec<Sample>,
    pub checks: Vec<Check>,
    pub interrupted: bool,
}

impl Soak {
    pub fn passed(&self) -> bool {
        !self.interrupted && self.checks.iter().all(|c| c.held)
    }
}
