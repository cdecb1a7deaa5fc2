//! One packet worker's share of a node: its switch (ofproto, with its own
//! copy of the flow table) over its userspace datapath (netdev, with its
//! share of the ports' queues and sockets). Worker 0's ofproto also holds
//! the caching datapath when the node runs over one. The workers' threads
//! ([`crate::workers`]) each run one, and the control side reaches it by
//! message.

use crate::config::{Config, Port};
use crate::dpif::netdev::Netdev;
use crate::dpif::provider::{Dpif, PortEnv, Upcalls};
use crate::ofproto::Ofproto;
use crate::port::StartError;
use crate::stats::NodeStats;
use std::collections::HashMap;
use tunlab_dp::{Action, Continuation, Match, TlvMap};
use tunlab_netio::Tap;

/// One worker: ofproto over the userspace datapath.
#[derive(Debug)]
pub struct Node {
    pub ofproto: Ofproto,
    pub netdev: Netdev,
}

impl Node {
    /// Worker `worker` of `workers`: its switch with the rules loaded, and
    /// its share of every port (`taps`: each TAP port's queues for this
    /// worker, taken out).
    pub fn start_worker(
        cfg: &Config,
        worker: usize,
        workers: usize,
        taps: &mut HashMap<String, Vec<Tap>>,
    ) -> Result<Node, StartError> {
        Ok(Node {
            ofproto: Ofproto::new(cfg),
            netdev: Netdev::open(cfg, worker, workers, taps)?,
        })
    }

    /// This worker's number (0 when the node has one).
    pub fn worker(&self) -> usize {
        self.netdev.worker()
    }

    /// Wait up to `timeout_ms` for packets (or for `extra` to become
    /// readable) and move everything ready; see [`Netdev::poll_once`].
    pub fn poll_once(
        &mut self,
        timeout_ms: i32,
        extra: Option<std::os::fd::BorrowedFd<'_>>,
    ) -> std::io::Result<(usize, bool)> {
        self.netdev.poll_once(&mut self.ofproto, timeout_ms, extra)
    }

    /// Periodic work between packets: the rules are credited with what
    /// cached flows carried, and the underlay's MTU may have changed (an
    /// operator, a failover): the slow path's too-big answers and the
    /// caching datapath's templates follow it.
    pub fn housekeeping(&mut self) {
        self.credit_cached();
        let mtu = match self.ofproto.dpif.as_mut() {
            Some(d) => {
                d.rebalance();
                d.refresh_mtu()
            }
            None => self.netdev.underlay_device_mtu(),
        };
        if let Some(mtu) = mtu {
            self.netdev.set_underlay_mtu(mtu);
        }
    }

    /// Add a port while running (`tunlab ctl add-port`): refused, with
    /// nothing changed, when its name or number is taken.
    pub fn add_port(&mut self, p: &Port, taps: Option<Vec<Tap>>) -> Result<(), StartError> {
        self.ofproto.check_new_port(p)?;
        self.netdev.add_port(p, taps)?;
        self.ofproto.port_added(p);
        Ok(())
    }

    /// Add a port while running over a caching datapath: its side first
    /// (a veth port's pair, a system or QinQ port's upcall TAP and
    /// programs, a tunnel port's decapsulation), then the userspace
    /// datapath's share, then a new generation. Returns false, having done
    /// nothing, when there is no such datapath or it does not serve this
    /// kind.
    pub fn add_datapath_port(
        &mut self,
        p: &Port,
        offloads: bool,
        underlay_mtu: u16,
    ) -> Result<bool, StartError> {
        self.ofproto.check_new_port(p)?;
        let mut ports = self.ofproto.port_cfgs().to_vec();
        let Some(d) = self.ofproto.dpif.as_mut() else {
            return Ok(false);
        };
        ports.push(p.clone());
        let env = PortEnv {
            offloads,
            underlay_mtu,
            ports: &ports,
        };
        let taps = match d.port_add(p, env)? {
            Some(Upcalls::Devices(t)) => Some(t),
            Some(Upcalls::Socket) => None,
            None => return Ok(false),
        };
        if let Err(e) = self.add_port(p, taps) {
            if let Some(d) = self.ofproto.dpif.as_mut() {
                d.port_del(p.ofport, Some(p));
            }
            return Err(e);
        }
        self.revalidate();
        Ok(true)
    }

    /// Remove a port by name while running (`tunlab ctl del-port`): its
    /// device or socket closes, its counters go; rules that name it stay,
    /// as in OVS, and match nothing.
    pub fn remove_port(&mut self, name: &str) -> Result<(), String> {
        let ofport = self.netdev.remove_port(name)?;
        self.ofproto.port_removed(name, ofport);
        self.revalidate();
        Ok(())
    }

    /// Map Geneve options anew (OpenFlow's TLV table mod): the datapath
    /// reads and writes options so, and the cached flows are checked.
    pub fn set_tlv(&mut self, tlv: TlvMap) {
        self.credit_cached();
        self.netdev.set_tlv(tlv);
        let _ = Dpif::revalidate(&mut self.netdev, &self.ofproto.classifier, &tlv);
        self.ofproto.set_tlv(tlv);
    }

    /// The rules, the TLV map or the ports changed: the flows cached in
    /// either datapath answer to the new ones before this returns.
    pub fn revalidate(&mut self) {
        let tlv = self.ofproto.tlv();
        // The userspace datapath's flush cannot fail.
        let _ = Dpif::revalidate(&mut self.netdev, &self.ofproto.classifier, &tlv);
        self.ofproto.revalidate();
    }

    /// Credit the rules with what the userspace datapath's cached flows
    /// carried since the last time. Called before every control request
    /// this worker runs (a change of the rules, a dump of their counters,
    /// an expiry check) and between packets twice a second.
    pub fn credit_cached(&mut self) {
        let counted = self.netdev.flows.take_counted();
        if !counted.is_empty() {
            self.ofproto.credit(counted);
        }
    }

    /// OpenFlow's PACKET_OUT: `data` as if it came in on `in_port` (a
    /// controller's 0xfffffffd when none), with `actions` applied.
    pub fn packet_out(&mut self, in_port: u32, data: &[u8], actions: &[Action]) {
        let Some(mut frame) = self.netdev.frame_for(data) else {
            return;
        };
        let mut ops = Vec::new();
        if self
            .ofproto
            .packet_out(in_port, frame.data(), actions, &mut ops)
        {
            self.netdev
                .execute(&mut self.ofproto, in_port, &mut frame, &ops);
        }
    }

    /// NXT_RESUME: `data` carries on through the translation `cont`
    /// froze, with the packet_in's `metadata`.
    pub fn resume(&mut self, data: &[u8], metadata: &Match, cont: &Continuation) {
        let Some(mut frame) = self.netdev.frame_for(data) else {
            return;
        };
        let in_port = metadata.value.get(tunlab_dp::key::f::IN_PORT) as u32;
        let mut ops = Vec::new();
        if self.ofproto.resume(frame.data(), metadata, cont, &mut ops) {
            self.netdev
                .execute(&mut self.ofproto, in_port, &mut frame, &ops);
        }
    }

    /// Everything `tunlab ctl stats` reports of this worker: the
    /// datapath's ports and drops, ofproto's drops and cache.
    pub fn snapshot(&self) -> NodeStats {
        let mut s = self.netdev.snapshot();
        for (why, n) in &self.ofproto.drops {
            *s.drops.entry(why).or_insert(0) += n;
        }
        s.cache = self.ofproto.cache_stats();
        s
    }
}
