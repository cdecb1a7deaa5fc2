//! The userspace datapath as a [`Dpif`]: its flow cache
//! ([`super::flow_cache`]) is filled, listed, flushed and counted through
//! the same calls as the kernel datapath's.
//!
//! As in OVS's dpif-netdev, the thread that moved the packet puts the
//! flow itself once the upcall has decided ([`super::Netdev`]'s
//! `forward`), and ports are opened by the node, each worker its share of
//! their queues and sockets, rather than through [`Dpif::port_add`].

use super::Netdev;
use crate::config::Port;
use crate::dpif::provider::{Dpif, PortEnv, Revalidation, Upcalls};
use crate::port::StartError;
use tunlab_dp::{Classifier, DropReason, FlowKey, Op, TlvMap};

impl Dpif for Netdev {
    fn kind(&self) -> &'static str {
        "netdev"
    }

    /// Ports are the node's to open (`Netdev::open`, `Node::add_port`):
    /// this datapath takes no port through this call.
    fn port_add(&mut self, _p: &Port, _env: PortEnv<'_>) -> Result<Option<Upcalls>, StartError> {
        Ok(None)
    }

    fn port_del(&mut self, _ofport: u32, _cfg: Option<&Port>) {}

    /// Every cached flow goes (what they carried waits to be credited);
    /// the next packets miss and are decided under the new rules.
    fn revalidate(&mut self, _rules: &Classifier, _tlv: &TlvMap) -> Result<Revalidation, String> {
        self.flows.flush();
        Ok(Revalidation::NewGeneration)
    }

    fn flow_flush(&mut self) -> Result<(), String> {
        self.flows.flush();
        Ok(())
    }

    /// Cache the decision under the epoch the upcall was made in, for
    /// the whole key (an exact-match cache is narrower than any mask);
    /// drops are not cached (their reasons are counted per packet up
    /// there).
    fn flow_put(
        &mut self,
        key: &FlowKey,
        _mask: &FlowKey,
        decision: Result<&[Op], DropReason>,
        _tlv: &TlvMap,
    ) {
        if let (Some(epoch), Ok(ops)) = (self.epoch, decision) {
            self.flows.put(key, epoch, ops);
        }
    }

    fn flow_dump(&self) -> Result<String, String> {
        Ok(self
            .epoch
            .map(|e| self.flows.dump(e, self.worker))
            .unwrap_or_default())
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let c = &self.flows;
        vec![
            ("netdev_flow_hits".into(), c.hits),
            ("netdev_flow_misses".into(), c.misses),
            ("netdev_flows_installed".into(), c.installed),
            ("netdev_flows_not_cached".into(), c.refused),
            ("netdev_flow_evictions".into(), c.evictions),
            (
                "netdev_flows".into(),
                self.epoch.map_or(0, |e| c.len(e) as u64),
            ),
        ]
    }
}
