//! ofproto: the OpenFlow switch above the datapaths, as Open vSwitch's
//! ofproto layer. One per packet worker (each worker holds its own copy of
//! the flow table, so that a packet never takes a lock):
//!
//! - the flow table: the classifier, its tables and the action pipeline
//!   (with MAC learning for `normal` and the exact-match cache);
//! - the Geneve TLV map (`tun_metadataN`);
//! - the ports' configuration, for rules that name ports;
//! - the upcall: a packet a datapath could not forward by itself is
//!   classified here ([`Upcall`]), and the decision is offered to the
//!   caching datapath under it (worker 0 holds it) as a cached flow;
//! - revalidation of that cache when the rules, the TLV map or the ports
//!   change, and the rules' counters credited with what cached flows
//!   carried;
//! - PACKET_IN for `controller` actions ([`openflow`] encodes them).
//!
//! It moves no packet itself: the datapaths do ([`crate::dpif`]).

pub mod openflow;

use crate::config::{Config, Port, PortMap};
use crate::dpif::provider::{Counted, Dpif, Revalidation, Upcall};
use crate::port::StartError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tunlab_dp::{
    extract, extract_tunnel, Action, Classifier, Continuation, FlowKey, Match, Op, PacketIn,
    Pipeline, TlvMap,
};
use tunlab_wire::tunnel::TunnelMetadata;

/// A packet_in on its way from a worker to the management server: what
/// the `controller` action said, and the frame as it was then.
#[derive(Debug)]
pub struct QueuedPacketIn {
    pub pin: Box<PacketIn>,
    pub frame: Vec<u8>,
}

/// How many packet_ins may wait for the management server; more are
/// dropped (counted), as a worker never waits for a controller.
pub const PACKET_IN_QUEUE: usize = 1024;

/// A worker's end of the packet_in queue: a bounded channel, and a byte
/// on a datagram socket that wakes the management server's poll.
#[derive(Debug, Clone)]
pub struct PacketInSender {
    pub tx: std::sync::mpsc::SyncSender<QueuedPacketIn>,
    pub wake: Arc<std::os::unix::net::UnixDatagram>,
}

impl PacketInSender {
    /// Queue `q`; false if the queue is full or its reader gone.
    pub fn send(&self, q: QueuedPacketIn) -> bool {
        if self.tx.try_send(q).is_err() {
            return false;
        }
        // A full wake socket means the reader is already woken.
        let _ = self.wake.send(&[0]);
        true
    }
}

/// One worker's OpenFlow switch.
pub struct Ofproto {
    pub name: String,
    pub classifier: Classifier,
    pipeline: Pipeline,
    tlv: TlvMap,
    /// The ports' configuration (names and numbers for rules).
    port_cfgs: Vec<Port>,
    started: Instant,
    /// The last upcall's flow key (a tunnelled frame's PACKET_IN carries
    /// its tunnel fields).
    key: FlowKey,
    /// The caching datapath under this switch, when it runs over one
    /// (worker 0 only): its flows are filled from the upcalls' decisions.
    pub dpif: Option<Box<dyn Dpif>>,
    /// OVS's flow-restore-wait, shared with the switch: while set, the
    /// caching datapath's flows are neither revalidated nor added to, and
    /// what misses them is dropped (counted as flow_restore_wait).
    pub restore_wait: Arc<AtomicBool>,
    /// Where PACKET_INs go: the management server's end reads them and
    /// sends them to the controllers (none: `controller` drops).
    pub packet_in: Option<PacketInSender>,
    /// What this layer dropped, by reason (a datapath counts its own).
    pub drops: HashMap<&'static str, u64>,
    /// Moves at every [`Ofproto::revalidate`] (the rules, the TLV map or
    /// the ports changed): the userspace datapath's cached decisions of an
    /// older epoch are misses.
    epoch: u64,
    /// No rule uses `normal`: a decision is a function of the flow key.
    cacheable: bool,
}

impl std::fmt::Debug for Ofproto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ofproto")
            .field("name", &self.name)
            .field("rules", &self.classifier.len())
            .finish_non_exhaustive()
    }
}

impl Ofproto {
    /// The switch of configuration `cfg`, with its rules loaded.
    pub fn new(cfg: &Config) -> Ofproto {
        let mut classifier = Classifier::new();
        for f in &cfg.flows {
            classifier.add(f.clone(), 0);
        }
        let cacheable = decided_by_key(&classifier);
        Ofproto {
            name: cfg.name.clone(),
            classifier,
            pipeline: Pipeline::new(),
            tlv: cfg.tlv,
            port_cfgs: cfg.ports.clone(),
            started: Instant::now(),
            key: FlowKey::default(),
            dpif: None,
            restore_wait: Arc::new(AtomicBool::new(false)),
            packet_in: None,
            drops: HashMap::new(),
            epoch: 0,
            cacheable,
        }
    }

    /// Nanoseconds since start: the flow table's notion of time.
    fn now(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// Nanoseconds since the node started (for `duration=` in dumps).
    pub fn uptime_ns(&self) -> u64 {
        self.now()
    }

    fn drop(&mut self, why: &'static str) {
        *self.drops.entry(why).or_insert(0) += 1;
    }

    /// Exact-match cache hits and misses.
    pub fn cache_stats(&self) -> (u64, u64) {
        (self.pipeline.emc.hits, self.pipeline.emc.misses)
    }

    /// Names and numbers of the ports, for flow rules that name ports.
    pub fn port_map(&self) -> PortMap {
        PortMap::of(&self.port_cfgs)
    }

    /// The ports' configuration.
    pub fn port_cfgs(&self) -> &[Port] {
        &self.port_cfgs
    }

    /// Refuse a port whose name or number is taken.
    pub fn check_new_port(&self, p: &Port) -> Result<(), StartError> {
        match self
            .port_cfgs
            .iter()
            .find(|o| o.name == p.name || o.ofport == p.ofport)
        {
            Some(o) => Err(StartError::Port {
                port: p.name.clone(),
                msg: format!("clashes with port '{}' (ofport {})", o.name, o.ofport),
            }),
            None => Ok(()),
        }
    }

    /// Port `p` joined (its datapaths serve it already).
    pub fn port_added(&mut self, p: &Port) {
        self.port_cfgs.push(p.clone());
    }

    /// Port `name` left: the caching datapath lets go of it; rules that
    /// name it stay, as in OVS, and match nothing.
    pub fn port_removed(&mut self, name: &str, ofport: u32) {
        if let Some(d) = self.dpif.as_mut() {
            let cfg = self.port_cfgs.iter().find(|p| p.name == name);
            d.port_del(ofport, cfg);
        }
        self.port_cfgs.retain(|p| p.name != name);
    }

    /// The Geneve options mapped to tun_metadata fields.
    pub fn tlv(&self) -> TlvMap {
        self.tlv
    }

    /// Map Geneve options anew (OpenFlow's TLV table mod); the cached
    /// flows are checked against the new map.
    pub fn set_tlv(&mut self, tlv: TlvMap) {
        self.tlv = tlv;
        self.revalidate();
    }

    /// The flow table, the TLV map or the ports changed: the caching
    /// datapath's flows are revalidated before this returns.
    pub fn revalidate(&mut self) {
        self.epoch += 1;
        self.cacheable = decided_by_key(&self.classifier);
        let now = self.now();
        let Some(d) = self.dpif.as_mut() else {
            return;
        };
        if self.restore_wait.load(Ordering::Relaxed) {
            // Rules are still coming in: checked once they all are.
            return;
        }
        let checked: Result<(), String> = match d.revalidate(&self.classifier, &self.tlv) {
            Ok(Revalidation::NewGeneration) => return,
            // Adopted flows: each one's key through the pipeline as a
            // packet would go (no rule counts it), kept where the actions
            // are unchanged.
            Ok(Revalidation::EachFlow { adopted }) => {
                let (pipeline, classifier) = (&mut self.pipeline, &mut self.classifier);
                let mut ops = Vec::new();
                let r = d.revalidate_each(
                    &mut |key| {
                        let (r, wc) = pipeline.decide_megaflow(classifier, key, now, &mut ops);
                        (r.map(|()| ops.clone()), wc)
                    },
                    &self.tlv,
                );
                match r {
                    Ok(w) => {
                        if adopted {
                            crate::tl_log!(
                                Info,
                                "adopted_flows_revalidated",
                                format!(
                                    "tunlab switch {}: revalidated the adopted flows: kept {}, replaced {}, rebuilt {}, deleted {}",
                                    self.name, w.kept, w.replaced, w.rebuilt, w.deleted
                                );
                                node = self.name,
                                kept = w.kept,
                                replaced = w.replaced,
                                rebuilt = w.rebuilt,
                                deleted = w.deleted
                            );
                        }
                        return;
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        if let Err(e) = checked {
            // Stale entries must not forward: without a new generation
            // the cache cannot be trusted.
            crate::tl_log!(
                Error,
                "revalidation_failed",
                format!("tunlab switch: {} datapath revalidation failed: {e}", d.kind());
                datapath = d.kind()
            );
            self.drop("kernel_revalidation_failed");
        }
    }

    /// Credit the rules with what the caching datapath's flows carried
    /// since the revalidator last looked (as OVS's revalidators push
    /// datapath flow stats to rules): each flow's key is looked up again,
    /// and every rule on its way counts its packets and bytes as used now.
    pub fn credit_cached(&mut self, counted: Counted) {
        let Some(d) = self.dpif.as_mut() else {
            return;
        };
        let keys = d.flow_counts(counted);
        self.credit(keys);
    }

    /// Credit the rules with what the userspace datapath's cached flows
    /// carried: each key is looked up again, and every rule on its way
    /// counts its packets and bytes as used now.
    pub fn credit(&mut self, counted: Vec<(FlowKey, u64, u64)>) {
        let now = self.now();
        for (key, packets, bytes) in counted {
            self.pipeline
                .credit(&mut self.classifier, &key, packets, bytes, now);
        }
    }

    /// OpenFlow's PACKET_OUT: the steps `actions` mean for `frame` (as if
    /// it came in on `in_port`), into `ops`. False: dropped (counted by
    /// reason), nothing to carry out.
    pub fn packet_out(
        &mut self,
        in_port: u32,
        frame: &[u8],
        actions: &[Action],
        ops: &mut Vec<Op>,
    ) -> bool {
        let mut key = FlowKey::default();
        extract(frame, in_port, &mut key);
        let now = self.now();
        let r = self.pipeline.execute(
            &mut self.classifier,
            &key,
            actions,
            frame.len() as u64,
            now,
            ops,
        );
        match r {
            Ok(()) => true,
            Err(why) => {
                self.drop(why.name());
                false
            }
        }
    }
}

impl Ofproto {
    /// NXT_RESUME: carry on the translation `cont` froze, for `frame` as
    /// the controller sent it back, with the metadata (`in_port`,
    /// registers, ...) it gave; the steps into `ops`. False: dropped
    /// (counted by reason).
    pub fn resume(
        &mut self,
        frame: &[u8],
        metadata: &Match,
        cont: &Continuation,
        ops: &mut Vec<Op>,
    ) -> bool {
        let mut key = FlowKey::default();
        let in_port = metadata.value.get(tunlab_dp::key::f::IN_PORT) as u32;
        extract(frame, in_port, &mut key);
        for (k, (v, m)) in key
            .w
            .iter_mut()
            .zip(metadata.value.w.iter().zip(&metadata.mask.w))
        {
            *k = (*k & !m) | (v & m);
        }
        let now = self.now();
        let r = self.pipeline.resume(
            &mut self.classifier,
            &key,
            cont,
            frame.len() as u64,
            now,
            ops,
        );
        match r {
            Ok(()) => true,
            Err(why) => {
                self.drop(why.name());
                false
            }
        }
    }
}

/// Whether what the rules decide for a packet is a function of its flow
/// key alone: not when a rule uses `normal`, whose MAC learning makes
/// every packet count.
impl Ofproto {
    /// `ofproto/trace` of the packet `key` describes, through this
    /// worker's tables, with a pipeline of its own (nothing counted, no
    /// MAC learnt).
    pub fn trace(&mut self, key: &FlowKey, bridge: &str, ct_next: &[u64]) -> String {
        let now = self.now();
        tunlab_dp::Pipeline::new()
            .trace_ct(&mut self.classifier, key, now, ct_next)
            .render(bridge)
    }
}

fn decided_by_key(rules: &Classifier) -> bool {
    !rules.any_action(|a| matches!(a, Action::Normal))
}

impl Upcall for Ofproto {
    fn upcall(
        &mut self,
        in_port: u32,
        frame: &[u8],
        tunnel: Option<&TunnelMetadata>,
        ops: &mut Vec<Op>,
    ) -> Result<(), &'static str> {
        if self.dpif.is_some() && self.restore_wait.load(Ordering::Relaxed) {
            // As OVS does while its flows are restored: the datapath's
            // misses are not handled yet.
            return Err("flow_restore_wait");
        }
        extract(frame, in_port, &mut self.key);
        if let Some(meta) = tunnel {
            extract_tunnel(meta, &self.tlv, &mut self.key);
        }
        let now = self.now();
        let (c, key, bytes) = (&mut self.classifier, &self.key, frame.len() as u64);
        let Some(d) = self.dpif.as_mut() else {
            return self
                .pipeline
                .process(c, key, bytes, now, ops)
                .map_err(|why| why.name());
        };
        // The caching datapath learns the flow under the key bits the
        // decision depended on.
        let (r, mask) = self.pipeline.process_megaflow(c, key, bytes, now, ops);
        d.flow_put(key, &mask, r.map(|()| &ops[..]), &self.tlv);
        r.map_err(|why| why.name())
    }

    fn cache_epoch(&self) -> Option<u64> {
        self.cacheable
            .then_some(self.epoch + self.classifier.generation())
    }

    fn controller(
        &mut self,
        _in_port: u32,
        _tunnelled: bool,
        pin: &PacketIn,
        frame: &[u8],
    ) -> Result<(), &'static str> {
        // The pipeline's key holds the tunnel the packet came out of; the
        // management server writes each connection's message.
        let q = QueuedPacketIn {
            pin: Box::new(pin.clone()),
            frame: frame.to_vec(),
        };
        match &self.packet_in {
            Some(tx) if tx.send(q) => Ok(()),
            Some(_) => Err("controller_queue_full"),
            None => Err("no_controller"),
        }
    }
}
