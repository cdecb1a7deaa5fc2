//! The switch's one API: typed calls on a running [`Switch`] that the
//! control socket's text requests ([`crate::ctl`]), OpenFlow
//! ([`crate::mgmt`]) and programs all make, so that a rule means the same
//! whichever door it came in by. Each call reaches the workers by message;
//! a change to the rules reaches every worker's copy of the flow table
//! and revalidates the caching datapath.

use crate::config::PortMap;
use crate::dpif::provider::Dpif;
pub use crate::ofproto::openflow::flow_mod::FlowChange;
use crate::stats::NodeStats;
use crate::workers::{Switch, WorkerError};
use tunlab_ctl::{PortRow, Stats};
use tunlab_dp::{Action, FlowRule, Selector};

/// Why a call on the switch failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A worker has stopped or did not answer.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// The request is about something this node does not have.
    #[error("{0}")]
    Refused(String),
}

/// A rule with its counters summed over the workers.
#[derive(Debug, Clone)]
pub struct FlowEntry {
    pub flow: FlowRule,
    /// Nanoseconds since it was added, and since a packet last hit it.
    pub age_ns: u64,
    pub idle_ns: u64,
    pub packets: u64,
    pub bytes: u64,
}

impl Switch {
    /// Names and numbers of the ports, for rules that name ports.
    pub fn port_map(&self) -> Result<PortMap, ApiError> {
        Ok(self.on(0, |n| n.ofproto.port_map())?)
    }

    /// Add `rules` to every worker's flow table (a rule with the same
    /// match and priority as one there replaces it), then revalidate
    /// once. Returns how many replaced existing rules.
    pub fn add_flows(&self, rules: Vec<FlowRule>) -> Result<usize, ApiError> {
        let rules = std::sync::Arc::new(rules);
        let replaced = self.on_all(move |n| {
            let now = n.ofproto.uptime_ns();
            let replaced = rules
                .iter()
                .filter(|r| n.ofproto.classifier.add((*r).clone(), now))
                .count();
            n.revalidate();
            replaced
        })?;
        Ok(replaced.first().copied().unwrap_or(0))
    }

    /// Make `changes` in order, all in one step on each worker (no packet
    /// sees some of them and not the others: an OpenFlow bundle's commit),
    /// then revalidate once.
    pub fn change_flows(&self, changes: Vec<FlowChange>) -> Result<(), ApiError> {
        let changes = std::sync::Arc::new(changes);
        self.on_all(move |n| {
            let now = n.ofproto.uptime_ns();
            let c = &mut n.ofproto.classifier;
            for ch in changes.iter() {
                match ch {
                    FlowChange::Add(rule) => {
                        c.add(rule.clone(), now);
                    }
                    FlowChange::Modify { sel, actions } => {
                        c.modify(sel, actions, None);
                    }
                    FlowChange::Delete(sel) => {
                        c.delete_where(sel);
                    }
                }
            }
            n.revalidate();
        })?;
        Ok(())
    }

    /// Delete the rules `sel` picks; how many.
    pub fn del_flows(&self, sel: Selector) -> Result<usize, ApiError> {
        let deleted = self.on_all(move |n| {
            let deleted = n.ofproto.classifier.delete_where(&sel);
            n.revalidate();
            deleted
        })?;
        Ok(deleted.first().copied().unwrap_or(0))
    }

    /// Give the rules `sel` picks `actions`; how many.
    pub fn mod_flows(&self, sel: Selector, actions: Vec<Action>) -> Result<usize, ApiError> {
        let changed = self.on_all(move |n| {
            let changed = n.ofproto.classifier.modify(&sel, &actions, None);
            n.revalidate();
            changed
        })?;
        Ok(changed.first().copied().unwrap_or(0))
    }

    /// Remove port `name` from every worker while running.
    pub fn del_port(&self, name: &str) -> Result<(), ApiError> {
        let name = name.to_string();
        let mut answers = self.on_all(move |n| n.remove_port(&name))?;
        answers.swap_remove(0).map_err(ApiError::Refused)
    }

    /// Run `f` on the node's flow-caching datapath: the kernel's (worker
    /// 0 holds it) when the node runs over it, else every worker's
    /// userspace datapath in turn; the answers in that order.
    pub fn on_dpif<R: Send + 'static>(
        &self,
        f: impl Fn(&mut dyn Dpif) -> Result<R, String> + Send + Clone + 'static,
    ) -> Result<Vec<R>, ApiError> {
        let g = f.clone();
        let kernel = self.on(0, move |n| n.ofproto.dpif.as_mut().map(|d| g(d.as_mut())))?;
        let answers = match kernel {
            Some(r) => vec![r],
            None => self.on_all(move |n| f(&mut n.netdev))?,
        };
        answers
            .into_iter()
            .collect::<Result<Vec<R>, String>>()
            .map_err(ApiError::Refused)
    }

    /// Every rule, table by table in lookup order, as `dump-flows` lists
    /// them: the rules as worker 0 has them, counters summed over workers
    /// (every worker got the same rules in the same order).
    pub fn flows(&self) -> Result<Vec<FlowEntry>, ApiError> {
        let per = self.on_all(|n| {
            let now = n.ofproto.uptime_ns();
            n.ofproto
                .classifier
                .rules()
                .map(|r| (r.packets, r.bytes, now.saturating_sub(r.used)))
                .collect::<Vec<_>>()
        })?;
        let rules = self.on(0, move |n| {
            let now = n.ofproto.uptime_ns();
            n.ofproto
                .classifier
                .rules()
                .map(|r| (r.flow.clone(), now.saturating_sub(r.added)))
                .collect::<Vec<_>>()
        })?;
        Ok(rules
            .into_iter()
            .enumerate()
            .map(|(i, (flow, age_ns))| {
                let (packets, bytes, idle_ns) = per
                    .iter()
                    .filter_map(|w| w.get(i))
                    .fold((0, 0, u64::MAX), |(p, b, idle), (wp, wb, wi)| {
                        (p + wp, b + wb, idle.min(*wi))
                    });
                FlowEntry {
                    flow,
                    age_ns,
                    idle_ns: idle_ns.min(age_ns),
                    packets,
                    bytes,
                }
            })
            .collect())
    }

    /// The node's statistics: every port's counters, the slow path's drops
    /// and cache, the caching datapath's counters and its revalidator's.
    pub fn stats(&self) -> Result<Stats, ApiError> {
        let (ports, st) = self.port_rows()?;
        let mut datapath = self
            .on(0, |n| n.ofproto.dpif.as_ref().map(|d| d.stats()))?
            .unwrap_or_default();
        // The userspace datapath's flow cache, summed over the workers
        // (named in the first worker's order), when it caches.
        let netdev = self.on_all(|n| n.netdev.cache_flows.then(|| n.netdev.stats()))?;
        for w in netdev.into_iter().flatten() {
            for (name, v) in w {
                match datapath.iter_mut().find(|(n, _)| *n == name) {
                    Some(row) => row.1 += v,
                    None => datapath.push((name, v)),
                }
            }
        }
        let revalidator = self.revalidator_stats().map(|r| tunlab_ctl::Revalidator {
            sweeps: r.sweeps,
            idle_deleted: r.idle_deleted,
            stale_deleted: r.stale_deleted,
            evicted: r.evicted,
            last_seen: r.last_seen,
            last_sweep_ms: r.last_sweep.as_secs_f64() * 1e3,
        });
        let named = |m: &std::collections::HashMap<&'static str, u64>| {
            m.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
        };
        Ok(Stats {
            ports,
            drops: named(&st.drops),
            outer_fragmented: named(&st.outer_fragmented),
            cache_hits: st.cache.0,
            cache_misses: st.cache.1,
            datapath,
            revalidator,
            openflow_refused: self
                .openflow_refused
                .iter()
                .map(|(k, v)| ((*k).to_string(), *v))
                .collect(),
        })
    }

    /// Every port's counters: the slow path's summed over workers, plus
    /// what the caching datapath forwarded itself.
    pub fn ports(&self) -> Result<Vec<PortRow>, ApiError> {
        self.port_rows().map(|(rows, _)| rows)
    }

    /// Every port's counters, and the node's summed statistics.
    pub(crate) fn port_rows(&self) -> Result<(Vec<PortRow>, NodeStats), ApiError> {
        let st = NodeStats::sum(&self.on_all(|n| n.snapshot())?);
        let fast: std::collections::HashMap<u32, crate::dpif::provider::PortCounters> = self
            .on(0, |n| n.ofproto.dpif.as_ref().map(|d| d.port_stats()))?
            .unwrap_or_default()
            .into_iter()
            .collect();
        let rows = st
            .ports
            .iter()
            .map(|p| {
                let k = fast.get(&p.ofport).copied().unwrap_or_default();
                let s = p.stats;
                PortRow {
                    name: p.name.clone(),
                    ofport: p.ofport,
                    kind: p.kind.to_string(),
                    rx_packets: s.rx_packets + k.rx_packets,
                    rx_bytes: s.rx_bytes + k.rx_bytes,
                    tx_packets: s.tx_packets + k.tx_packets,
                    tx_bytes: s.tx_bytes + k.tx_bytes,
                    tx_errors: s.tx_errors,
                    rx_dropped: k.rx_dropped,
                    slow_rx_packets: s.rx_packets,
                    slow_tx_packets: s.tx_packets,
                    rx_frames: s.rx_frames,
                    tx_frames: s.tx_frames,
                    queue_rx: p.queue_rx.clone(),
                }
            })
            .collect();
        Ok((rows, st))
    }
}
