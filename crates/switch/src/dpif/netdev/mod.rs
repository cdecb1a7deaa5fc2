//! The userspace datapath: one running node (or one worker's share of it)
//! that moves packets itself, and the slow path under the kernel datapath.
//!
//! One thread, run to completion: poll every port's descriptor, then move
//! each ready descriptor's packets in a batch through extract → classify →
//! actions → output. Outputs to a tunnel are collected and sent with one
//! `sendmmsg` per socket per round.
//!
//! One module per port kind, each with how it opens, receives and sends:
//! [`tap`] (tenant TAPs, and the kernel datapath's upcall TAPs), [`udp`]
//! (Geneve and VXLAN over UDP sockets, IPv4 and IPv6 underlay, with GSO
//! and software GRO), [`gre`] (GRE and NVGRE over a raw IP socket, IPv4
//! underlay), [`stt`] (a raw TCP socket, IPv4 underlay; an nftables rule
//! keeps the host's TCP from resetting STT segments) and [`qinq`] (a
//! packet socket on an underlay interface: frames leave with the tags the
//! flows pushed; only S-tagged frames come in). [`socket`] holds what the
//! tunnel sockets share (receive batches, send queues), [`pmtu`] the
//! answer to a frame too big for its tunnel.

mod gre;
mod pmtu;
mod qinq;
mod socket;
mod stt;
mod tap;
mod udp;

pub use tap::{from_tap, fuzz_upcall, open_tap};

use crate::config::{Config, FromFlow, Port, PortKind, PortMap, TunnelPort};
use crate::dpif::provider::{Counted, Dpif, PortEnv, Revalidation, Upcalls};
use crate::port::{remote_and_key, StartError};
use crate::profile::{Profile, Stage};
use crate::stats::{NodeStats, PortSnapshot, PortStats};
use qinq::QinqIo;
use socket::SockState;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use stt::SttTso;
use tunlab_dp::{extract, extract_tunnel, Classifier, FlowKey, Op, Pipeline, TlvMap, TunnelSet};
use tunlab_netio::tap::VNET_HDR_LEN;
use tunlab_netio::{Poller, RstGuard, Tap};
use tunlab_wire::gso::{Coalescer, TcpSuper};
use tunlab_wire::stt::Reassembler;
use tunlab_wire::tunnel::{TunnelKind, TunnelMetadata};
use tunlab_wire::{geneve, vlan, PacketBuf};
use udp::{GSO_BATCH, GSO_HDR_ROOM};

/// A TCP super-frame travelling through the node: its segment size, and
/// whether its TCP checksum is partial (a tenant's, pseudo-header sum
/// only) or complete (joined here from checked segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gso {
    pub mss: u16,
    pub partial: bool,
}

/// How many packets a frame stands for in the port counters: a TCP
/// super-frame counts the segments its MSS cuts it into (what the
/// tenant's wire would carry, and what the kernel datapath counts from
/// `gso_segs`), anything else one. So a port's counts add up whether
/// the frame crossed whole, joined or cut.
fn segments(frame: &[u8], gso: Option<Gso>) -> u64 {
    gso.and_then(|g| TcpSuper::parse(frame, g.mss).ok())
        .map_or(1, |s| s.segments() as u64)
}

enum Io {
    /// A tenant TAP: one descriptor per queue.
    Tap(Vec<Tap>),
    /// 802.1ad on an underlay interface.
    Qinq(QinqIo),
    Tunnel {
        cfg: TunnelPort,
        sock: usize,
    },
}

struct PortState {
    name: String,
    ofport: u32,
    io: Io,
    stats: PortStats,
    /// Frames received per TAP queue.
    queue_rx: Vec<u64>,
    /// A tenant TAP's ingress policer (this worker's share of its rate).
    police: Option<crate::port::TokenBucket>,
}

/// Headroom kept in front of every frame: the largest tunnel header or
/// virtio-net header plus room for two VLAN tags.
const HEADROOM: usize = 8 + geneve::MAX_OPTIONS_LEN + 2 * vlan::TAG_LEN + VNET_HDR_LEN;
const FRAME_MAX: usize = 65536;

/// A running node, or one worker's share of it: its TAP queues, its
/// sockets, its copy of the flow table and caches.
pub struct Node {
    pub name: String,
    /// This worker's number, and how many there are.
    worker: usize,
    workers: usize,
    underlay_mtu: usize,
    /// The configured underlay MTU: `underlay_mtu` follows the devices
    /// down from it, never above it.
    configured_mtu: usize,
    /// The devices under this node's tunnel ports (those with a fixed
    /// local address), found again after a port change; the userspace
    /// datapath reads their MTU (a caching datapath reads its own).
    underlay_devs: Option<Vec<String>>,
    pub classifier: Classifier,
    pipeline: Pipeline,
    tlv: TlvMap,
    ports: Vec<PortState>,
    by_ofport: HashMap<u32, usize>,
    socks: Vec<SockState>,
    /// Drops by reason.
    pub drops: HashMap<&'static str, u64>,
    /// Frames sent in fragmented outer packets, by tunnel kind.
    pub outer_fragmented: HashMap<&'static str, u64>,
    started: Instant,
    ops: Vec<Op>,
    key: FlowKey,
    meta: TunnelMetadata,
    frame: PacketBuf<Vec<u8>>,
    tap_buf: Vec<u8>,
    /// STT: reassembly (allocated with the first STT port), the next
    /// packet ID, and the rules that silence the host's TCP resets.
    stt_reasm: Option<Reassembler>,
    stt_packet_id: u32,
    stt_seg: Vec<u8>,
    rst_guards: Vec<RstGuard>,
    /// The ports' configuration, for the default tenant MTU.
    port_cfgs: Vec<Port>,
    /// Received TCP segments being joined into one frame for a tenant,
    /// with the port and tunnel metadata they all came with.
    gro: Coalescer,
    gro_from: Option<(u32, TunnelMetadata)>,
    /// Per-segment header runs of a super-frame being sent.
    gso_hdrs: Vec<u8>,
    /// One segment of a super-frame cut for a port without a fast path.
    seg_frame: PacketBuf<Vec<u8>>,
    /// Send super-frames whole to the tenant and through UDP GSO (false:
    /// segment everything here, the way before TSO; for comparison).
    pub offloads: bool,
    /// Time per stage (`tunlab ctl cycles on`).
    pub profile: Profile,
    /// Microseconds to keep polling without sleeping after traffic.
    pub spin_us: u64,
    /// STT super-frames leave through a packet socket on the underlay
    /// interface towards each remote (found in the neighbour table), so
    /// that the kernel segments them as TCP; when the last look-up failed.
    stt_tso: Vec<SttTso>,
    stt_tso_looked: Option<Instant>,
    /// The descriptors polled each round.
    poll_set: Poller,
    /// The caching datapath under this slow path, when it runs over one
    /// (worker 0 only): its flows are filled from this node's decisions.
    pub dpif: Option<Box<dyn Dpif>>,
    /// OVS's flow-restore-wait, shared with the switch: while set, the
    /// caching datapath's flows are neither revalidated nor added to, and
    /// what misses them is dropped (counted as flow_restore_wait).
    pub restore_wait: Arc<AtomicBool>,
    /// Where PACKET_INs go: the management server's end reads them and
    /// sends them to the controllers (none: `controller` drops).
    pub packet_in: Option<std::os::unix::net::UnixDatagram>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("name", &self.name)
            .field("ports", &self.ports.len())
            .finish()
    }
}

impl Node {
    /// Worker `worker` of `workers`: open its share of every port and load
    /// the flows. `taps` holds each TAP port's queues for this worker
    /// ([`open_tap`] opened them for all workers); they are taken out.
    pub fn start_worker(
        cfg: &Config,
        worker: usize,
        workers: usize,
        taps: &mut HashMap<String, Vec<Tap>>,
    ) -> Result<Node, StartError> {
        let mut node = Node {
            worker,
            workers: workers.max(1),
            name: cfg.name.clone(),
            underlay_mtu: cfg.underlay_mtu as usize,
            configured_mtu: cfg.underlay_mtu as usize,
            underlay_devs: None,
            classifier: Classifier::new(),
            pipeline: Pipeline::new(),
            tlv: cfg.tlv,
            ports: Vec::new(),
            by_ofport: HashMap::new(),
            socks: Vec::new(),
            drops: HashMap::new(),
            outer_fragmented: HashMap::new(),
            started: Instant::now(),
            ops: Vec::new(),
            key: FlowKey::default(),
            meta: TunnelMetadata::default(),
            // Room for a whole IP packet behind a stand-in Ethernet header (STT).
            frame: PacketBuf::new(vec![0u8; HEADROOM + FRAME_MAX + 64], HEADROOM),
            tap_buf: vec![0u8; VNET_HDR_LEN + FRAME_MAX],
            stt_reasm: None,
            stt_packet_id: 0,
            stt_seg: Vec::with_capacity(FRAME_MAX),
            rst_guards: Vec::new(),
            port_cfgs: Vec::new(),
            gro: Coalescer::with_headroom(HEADROOM),
            gro_from: None,
            gso_hdrs: vec![0u8; GSO_BATCH * GSO_HDR_ROOM],
            seg_frame: PacketBuf::new(vec![0u8; HEADROOM + FRAME_MAX], HEADROOM),
            offloads: cfg.offloads,
            profile: Profile::default(),
            spin_us: cfg.spin_us,
            stt_tso: Vec::new(),
            stt_tso_looked: None,
            poll_set: Poller::new(),
            dpif: None,
            restore_wait: Arc::new(AtomicBool::new(false)),
            packet_in: None,
        };
        node.port_cfgs = cfg.ports.clone();
        for p in &cfg.ports {
            node.open_port(p, taps.remove(&p.name))?;
        }
        for f in &cfg.flows {
            node.classifier.add(f.clone(), 0);
        }
        Ok(node)
    }

    /// Open this worker's share of one port's device or socket and make it
    /// part of the node; a TAP port's queues come opened (`taps`).
    fn open_port(&mut self, p: &Port, taps: Option<Vec<Tap>>) -> Result<(), StartError> {
        let io = match &p.kind {
            PortKind::Tap { .. } | PortKind::Veth { .. } | PortKind::System => match taps {
                Some(t) if !t.is_empty() => Io::Tap(t),
                _ => return Err(port_error(p)("no TAP queue for this worker".into())),
            },
            PortKind::Tunnel(t) => {
                let sock = match t.kind {
                    TunnelKind::Geneve | TunnelKind::Vxlan => self.open_udp(p, t)?,
                    TunnelKind::Gre | TunnelKind::Nvgre => self.open_gre(p, t)?,
                    TunnelKind::Stt => self.open_stt(p, t)?,
                };
                Io::Tunnel { cfg: *t, sock }
            }
            PortKind::QinQ { underlay } => Io::Qinq(self.open_qinq(p, underlay, taps)?),
        };
        self.by_ofport.insert(p.ofport, self.ports.len());
        let queues = match &io {
            Io::Tap(qs) => qs.len(),
            _ => 0,
        };
        self.ports.push(PortState {
            name: p.name.clone(),
            ofport: p.ofport,
            io,
            stats: PortStats::default(),
            queue_rx: vec![0; queues],
            // Kernel-datapath tenants are policed in the kernel; a TAP
            // port here, each worker taking its share of the rate.
            police: match (&p.kind, p.police) {
                (PortKind::Tap { .. }, Some(pol)) => {
                    let (rate, burst) = pol.bytes();
                    let w = self.workers.max(1) as u64;
                    Some(crate::port::TokenBucket::new(rate / w, burst / w))
                }
                _ => None,
            },
        });
        Ok(())
    }

    /// With several workers, every worker's raw or packet socket gets a
    /// copy of each packet from the kernel; `share(group, member)` installs
    /// the filter that keeps each packet in the socket of the worker on
    /// whose CPU it arrived (as the UDP sockets' reuse-port group does), so
    /// each is read once. Nothing to do with one worker.
    fn share_by_cpu(
        &self,
        p: &Port,
        what: &str,
        share: impl FnOnce(u32, u32) -> std::io::Result<()>,
    ) -> Result<(), StartError> {
        if self.workers <= 1 {
            return Ok(());
        }
        share(self.workers as u32, self.worker as u32).map_err(|e| {
            port_error(p)(format!("cannot share the {what} socket among workers: {e}"))
        })
    }
    /// name or number is taken; nothing else changes.
    pub fn add_port(&mut self, p: &Port, taps: Option<Vec<Tap>>) -> Result<(), StartError> {
        self.check_new_port(p)?;
        self.port_cfgs.push(p.clone());
        self.underlay_devs = None;
        if let Err(e) = self.open_port(p, taps) {
            self.port_cfgs.pop();
            return Err(e);
        }
        Ok(())
    }

    /// Add a port while running over a caching datapath: its side first
    /// (a veth port's pair, a system or QinQ port's upcall TAP and
    /// programs, a tunnel port's decapsulation), then this node's share,
    /// then a new generation. Returns false, having done nothing, when
    /// this node has no such datapath or it does not serve this kind.
    pub fn add_datapath_port(
        &mut self,
        p: &Port,
        offloads: bool,
        underlay_mtu: u16,
    ) -> Result<bool, StartError> {
        self.check_new_port(p)?;
        let Some(d) = self.dpif.as_mut() else {
            return Ok(false);
        };
        let mut ports = self.port_cfgs.clone();
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
            if let Some(d) = self.dpif.as_mut() {
                d.port_del(p.ofport, Some(p));
            }
            return Err(e);
        }
        self.revalidate();
        Ok(true)
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

    /// The ports' configuration (for the default MTU of a new TAP).
    pub fn port_cfgs(&self) -> &[Port] {
        &self.port_cfgs
    }

    /// Remove a port by name while running (`tunlab ctl del-port`): its
    /// device or socket closes (a TAP the switch created disappears), its
    /// counters go; rules that name it stay, as in OVS, and match nothing.
    pub fn remove_port(&mut self, name: &str) -> Result<(), String> {
        let Some(pi) = self.ports.iter().position(|p| p.name == name) else {
            return Err(format!("no port named '{name}'"));
        };
        let gone = self.ports.remove(pi);
        if let Some(d) = self.dpif.as_mut() {
            let cfg = self.port_cfgs.iter().find(|p| p.name == name);
            d.port_del(gone.ofport, cfg);
        }
        self.port_cfgs.retain(|p| p.name != name);
        self.underlay_devs = None;
        self.revalidate();
        if let Io::Tunnel { sock, .. } = gone.io {
            let shared = self
                .ports
                .iter()
                .any(|p| matches!(p.io, Io::Tunnel { sock: s, .. } if s == sock));
            if !shared {
                self.socks.remove(sock);
                for p in &mut self.ports {
                    if let Io::Tunnel { sock: s, .. } = &mut p.io {
                        if *s > sock {
                            *s -= 1;
                        }
                    }
                }
            }
        }
        self.by_ofport = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| (p.ofport, i))
            .collect();
        Ok(())
    }

    /// The flow table, the TLV map or the ports changed: the caching
    /// datapath's flows are revalidated before this returns.
    pub fn revalidate(&mut self) {
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
                        pipeline
                            .decide(classifier, key, now, &mut ops)
                            .map(|()| ops.clone())
                    },
                    &self.tlv,
                );
                match r {
                    Ok((kept, deleted)) => {
                        if adopted {
                            eprintln!(
                                "tunlab switch {}: revalidated the adopted flows: kept {kept}, deleted {deleted}",
                                self.name
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
            eprintln!(
                "tunlab switch: {} datapath revalidation failed: {e}",
                d.kind()
            );
            *self.drops.entry("kernel_revalidation_failed").or_default() += 1;
        }
    }

    /// Periodic work between packets: the underlay's MTU may have changed
    /// (an operator, a failover): the slow path's too-big answers and the
    /// kernel's templates follow it.
    pub fn housekeeping(&mut self) {
        let mtu = match self.dpif.as_mut() {
            Some(d) => d.refresh_mtu(),
            None => self.underlay_device_mtu(),
        };
        let Some(mtu) = mtu else {
            return;
        };
        let mtu = (mtu as usize).min(self.configured_mtu);
        if mtu != self.underlay_mtu {
            eprintln!(
                "tunlab switch {}: underlay MTU now {mtu} (was {})",
                self.name, self.underlay_mtu
            );
            self.underlay_mtu = mtu;
        }
    }

    /// The smallest MTU of the devices under the tunnel ports.
    fn underlay_device_mtu(&mut self) -> Option<u16> {
        let devs = self.underlay_devs.get_or_insert_with(|| {
            let mut d: Vec<String> = self
                .port_cfgs
                .iter()
                .filter_map(|p| match &p.kind {
                    PortKind::Tunnel(t) if !t.local_ip.is_unspecified() => {
                        crate::port::device_with(t.local_ip)
                    }
                    _ => None,
                })
                .collect();
            d.sort();
            d.dedup();
            d
        });
        devs.iter().filter_map(|d| crate::port::device_mtu(d)).min()
    }

    /// Names and numbers of the ports, for flow rules that name ports.
    pub fn port_map(&self) -> PortMap {
        PortMap::of(&self.port_cfgs)
    }

    /// Nanoseconds since start: the datapath's notion of time.
    fn now(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// Nanoseconds since the node started (for `duration=` in dumps).
    pub fn uptime_ns(&self) -> u64 {
        self.now()
    }

    /// Exact-match cache hits and misses.
    pub fn cache_stats(&self) -> (u64, u64) {
        (self.pipeline.emc.hits, self.pipeline.emc.misses)
    }

    fn drop(&mut self, why: &'static str) {
        *self.drops.entry(why).or_insert(0) += 1;
    }

    /// Frames received on each queue of a TAP port (empty for others).
    pub fn queue_rx(&self, name: &str) -> &[u64] {
        self.ports
            .iter()
            .find(|p| p.name == name)
            .map_or(&[], |p| &p.queue_rx[..])
    }

    /// This worker's number (0 when the node has one).
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// Everything `tunlab ctl stats` reports, for summing over workers.
    pub fn snapshot(&self) -> NodeStats {
        NodeStats {
            ports: self
                .ports()
                .map(|(name, ofport, kind, st)| PortSnapshot {
                    name: name.to_string(),
                    ofport,
                    kind,
                    stats: st,
                    queue_rx: self.queue_rx(name).to_vec(),
                })
                .collect(),
            drops: self.drops.clone(),
            outer_fragmented: self.outer_fragmented.clone(),
            cache: self.cache_stats(),
        }
    }

    /// Ports: name, ofport, kind, counters.
    pub fn ports(&self) -> impl Iterator<Item = (&str, u32, &'static str, PortStats)> {
        self.ports.iter().map(|p| {
            let kind = match &p.io {
                // Kernel-datapath tenants are served through their upcall
                // TAP; they are named for what they are.
                Io::Tap(_) => match self.port_cfgs.iter().find(|c| c.ofport == p.ofport) {
                    Some(Port {
                        kind: PortKind::Veth { .. },
                        ..
                    }) => "veth",
                    Some(Port {
                        kind: PortKind::System,
                        ..
                    }) => "system",
                    _ => "tap",
                },
                Io::Qinq(_) => "qinq",
                Io::Tunnel { cfg, .. } => cfg.kind.name(),
            };
            (p.name.as_str(), p.ofport, kind, p.stats)
        })
    }

    /// Wait up to `timeout_ms` for packets (or for `extra`, e.g. the control
    /// socket, to become readable), then move everything ready. Returns how
    /// many packets were received and whether `extra` is readable.
    pub fn poll_once(
        &mut self,
        timeout_ms: i32,
        extra: Option<std::os::fd::BorrowedFd<'_>>,
    ) -> std::io::Result<(usize, bool)> {
        // Refilled every round (a handful of descriptors), without
        // allocating: ports change at run time.
        let set = &mut self.poll_set;
        set.clear();
        for p in &self.ports {
            match &p.io {
                Io::Tap(qs) => {
                    for t in qs {
                        set.add(t.as_fd().as_raw_fd());
                    }
                }
                Io::Qinq(q) => set.add(q.raw_fd()),
                Io::Tunnel { .. } => {}
            }
        }
        for s in &self.socks {
            set.add(s.under.socket().as_raw_fd());
        }
        if let Some(e) = extra {
            set.add(e.as_raw_fd());
        }
        set.wait(timeout_ms)?;
        let mut n = 0;
        let mut i = 0;
        for pi in 0..self.ports.len() {
            match &self.ports[pi].io {
                Io::Tap(qs) => {
                    for q in 0..qs.len() {
                        if self.poll_set.readable(i) {
                            n += self.drain_tap(pi, q)?;
                        }
                        i += 1;
                    }
                }
                Io::Qinq(_) => {
                    if self.poll_set.readable(i) {
                        n += self.drain_qinq(pi)?;
                    }
                    i += 1;
                }
                Io::Tunnel { .. } => {}
            }
        }
        for si in 0..self.socks.len() {
            if self.poll_set.readable(i) {
                n += self.drain_socket(si)?;
            }
            i += 1;
        }
        self.flush_sends();
        let extra_ready = extra.is_some() && self.poll_set.readable(i);
        Ok((n, extra_ready))
    }
    /// The tunnel port a packet from `remote` on socket `si` belongs to:
    /// one whose fixed remote is `remote`, else one with `remote_ip =
    /// "flow"`; among those, one whose fixed key is the packet's `id`
    /// (VNI), when it is known, before one that takes any key.
    fn tunnel_in_port(&self, si: usize, remote: IpAddr, id: Option<u64>) -> Option<u32> {
        let mut best: Option<(u8, u32)> = None;
        for p in &self.ports {
            if let Io::Tunnel { cfg, sock } = &p.io {
                if *sock != si {
                    continue;
                }
                let by_remote = match cfg.remote_ip {
                    FromFlow::Fixed(r) if r == remote => 2,
                    FromFlow::Fixed(_) => continue,
                    FromFlow::Flow => 0,
                };
                let by_key = match (cfg.key, id) {
                    (FromFlow::Fixed(k), Some(i)) if k == i => 1,
                    _ => 0,
                };
                let score = by_remote + by_key;
                if best.is_none_or(|(s, _)| score > s) {
                    best = Some((score, p.ofport));
                }
            }
        }
        best.map(|(_, ofport)| ofport)
    }

    /// Once a tunnel header is read and its key known (`self.meta`): of the
    /// ports on socket `si` for `remote`, the one with that key and of the
    /// same kind as `first` (the port chosen by remote alone, whose kind
    /// said how to read the header); else `first`.
    fn keyed_in_port(&self, si: usize, remote: IpAddr, first: u32) -> u32 {
        let kind = |ofport: u32| {
            self.by_ofport
                .get(&ofport)
                .and_then(|&pi| match &self.ports[pi].io {
                    Io::Tunnel { cfg, .. } => Some(cfg.kind),
                    _ => None,
                })
        };
        // The usual case, one port per remote: its key is the frame's.
        let first_key = self
            .by_ofport
            .get(&first)
            .and_then(|&pi| match &self.ports[pi].io {
                Io::Tunnel { cfg, .. } => Some(cfg.key),
                _ => None,
            });
        if first_key == Some(FromFlow::Fixed(self.meta.tun_id)) {
            return first;
        }
        match self.tunnel_in_port(si, remote, Some(self.meta.tun_id)) {
            Some(p) if kind(p) == kind(first) => p,
            _ => first,
        }
    }

    /// Classify a frame and carry out the actions.
    fn forward(
        &mut self,
        in_port: u32,
        frame: &mut PacketBuf<Vec<u8>>,
        tunnelled: bool,
        gso: Option<Gso>,
    ) {
        if self.dpif.is_some() && self.restore_wait.load(Ordering::Relaxed) {
            // As OVS does while its flows are restored: the datapath's
            // misses are not handled yet.
            self.drop("flow_restore_wait");
            return;
        }
        if frame.len() < 14 {
            // A tunnel header with (almost) nothing behind it, or a runt
            // from a tenant: no Ethernet frame to switch.
            self.drop("short_frame");
            return;
        }
        let t = self.profile.start();
        extract(frame.data(), in_port, &mut self.key);
        if tunnelled {
            extract_tunnel(&self.meta, &self.tlv, &mut self.key);
        }
        let now = self.now();
        let mut ops = std::mem::take(&mut self.ops);
        let r = self.pipeline.process(
            &mut self.classifier,
            &self.key,
            frame.len() as u64,
            now,
            &mut ops,
        );
        self.profile.add(Stage::Classify, t, 1);
        if let Some(d) = self.dpif.as_mut() {
            d.flow_put(&self.key, r.map(|()| &ops[..]), &self.tlv);
        }
        match r {
            Ok(()) => self.apply(&ops, in_port, tunnelled, frame, gso),
            Err(why) => self.drop(why.name()),
        }
        self.ops = ops;
    }

    /// Carry out the pipeline's steps on `frame`, which came in on
    /// `in_port`.
    fn apply(
        &mut self,
        ops: &[Op],
        in_port: u32,
        tunnelled: bool,
        frame: &mut PacketBuf<Vec<u8>>,
        gso: Option<Gso>,
    ) {
        for op in ops {
            match *op {
                Op::PushVlan(tpid) => {
                    let tci = vlan::outer_tci(frame.data());
                    if vlan::push(frame, tpid.into(), vlan::Tci::from_u16(tci)).is_err() {
                        self.drop("vlan_push_failed");
                        break;
                    }
                }
                Op::PopVlan => {
                    if vlan::pop(frame).is_err() {
                        self.drop("no_vlan_tag");
                        break;
                    }
                }
                Op::SetVlanVid(v) => vlan::set_outer_tci(frame.data_mut(), |t| (t & 0xf000) | v),
                Op::SetVlanPcp(p) => {
                    vlan::set_outer_tci(frame.data_mut(), |t| (t & 0x1fff) | ((p as u16) << 13))
                }
                Op::Output { port, tun } => self.output(port, in_port, frame, &tun, gso),
                Op::Flood { except } => {
                    let targets: Vec<u32> = self
                        .ports
                        .iter()
                        .map(|p| p.ofport)
                        .filter(|&p| p != except)
                        .collect();
                    for p in targets {
                        self.output(p, in_port, frame, &TunnelSet::default(), gso);
                    }
                }
                Op::Controller {
                    max_len,
                    table,
                    cookie,
                    reason,
                } => {
                    let tun = tunnelled.then_some(&self.key);
                    let m = crate::ofproto::openflow::packet_in_message(
                        in_port,
                        tun,
                        max_len,
                        table,
                        cookie,
                        reason,
                        frame.data(),
                    );
                    match &self.packet_in {
                        Some(sock) if sock.send(&m).is_ok() => {}
                        Some(_) => self.drop("controller_queue_full"),
                        None => self.drop("no_controller"),
                    }
                }
            }
        }
    }

    /// Credit the rules with what the kernel's cached flows carried since
    /// the revalidator last looked (as OVS's revalidators push datapath
    /// flow stats to rules): each flow's key is looked up again, and every
    /// rule on its way counts its packets and bytes as used now.
    pub fn credit_cached(&mut self, counted: Counted) {
        let Some(d) = self.dpif.as_ref() else {
            return;
        };
        let keys = d.flow_counts(counted);
        let now = self.now();
        for (key, packets, bytes) in keys {
            self.pipeline
                .credit(&mut self.classifier, &key, packets, bytes, now);
        }
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

    /// OpenFlow's PACKET_OUT: `data` as if it came in on `in_port` (a
    /// controller's 0xfffffffd when none), with `actions` applied.
    pub fn packet_out(&mut self, in_port: u32, data: &[u8], actions: &[tunlab_dp::Action]) {
        if data.len() < 14 || data.len() > FRAME_MAX {
            self.drop("packet_out_bad_length");
            return;
        }
        let mut frame = PacketBuf::new(vec![0u8; HEADROOM + data.len() + 64], HEADROOM);
        if frame.extend(data).is_err() {
            self.drop("packet_out_bad_length");
            return;
        }
        let mut key = FlowKey::default();
        extract(frame.data(), in_port, &mut key);
        let now = self.now();
        let mut ops = Vec::new();
        let r = self.pipeline.execute(
            &mut self.classifier,
            &key,
            actions,
            frame.len() as u64,
            now,
            &mut ops,
        );
        match r {
            Ok(()) => {
                self.apply(&ops, in_port, false, &mut frame, None);
                self.flush_sends();
            }
            Err(why) => self.drop(why.name()),
        }
    }

    fn output(
        &mut self,
        port: u32,
        in_port: u32,
        frame: &mut PacketBuf<Vec<u8>>,
        tun: &TunnelSet,
        gso: Option<Gso>,
    ) {
        // A frame into a tunnel port's queue: all of it is encapsulation
        // (the queue is sent in `flush_socket`).
        let tunnel = self.profile.on()
            && gso.is_none()
            && self
                .by_ofport
                .get(&port)
                .is_some_and(|&pi| matches!(self.ports[pi].io, Io::Tunnel { .. }));
        let t = if tunnel { self.profile.start() } else { None };
        self.output_one(port, in_port, frame, tun, gso);
        self.profile.add(Stage::Encap, t, 1);
    }

    fn output_one(
        &mut self,
        port: u32,
        in_port: u32,
        frame: &mut PacketBuf<Vec<u8>>,
        tun: &TunnelSet,
        gso: Option<Gso>,
    ) {
        let Some(&pi) = self.by_ofport.get(&port) else {
            self.drop("no_such_port");
            return;
        };
        if let Some(g) = gso {
            // A super-frame goes whole to a tenant and through UDP GSO to
            // a Geneve or VXLAN port; everywhere else (and when it does
            // not fit those) it is cut here into segments first.
            let whole = match &self.ports[pi].io {
                Io::Tap(_) => self.offloads,
                Io::Tunnel { cfg, .. } if cfg.kind == TunnelKind::Stt => {
                    self.offloads && self.output_stt_tso(pi, frame, tun, g)
                }
                Io::Tunnel { cfg, .. } => {
                    self.offloads
                        && matches!(cfg.kind, TunnelKind::Geneve | TunnelKind::Vxlan)
                        && self.output_udp_gso(pi, frame, tun, g)
                }
                Io::Qinq(_) => false,
            };
            if !whole {
                self.output_cut(port, in_port, frame, tun, g);
                return;
            }
            if !matches!(self.ports[pi].io, Io::Tap(_)) {
                return;
            }
        }
        let kind = match &self.ports[pi].io {
            Io::Qinq(_) => return self.output_qinq(pi, in_port, frame),
            Io::Tap(_) => return self.output_tap(pi, frame, gso),
            Io::Tunnel { cfg, .. } => cfg.kind,
        };
        let Some(to) = self.tunnel_target(pi, tun) else {
            self.drop("no_tun_dst");
            return;
        };
        match kind {
            TunnelKind::Stt => self.output_stt(&to, in_port, frame),
            TunnelKind::Gre | TunnelKind::Nvgre => self.output_gre(&to, tun, in_port, frame),
            TunnelKind::Geneve | TunnelKind::Vxlan => self.output_udp(&to, tun, in_port, frame),
        }
    }

    /// Cut a super-frame into segments and output each.
    fn output_cut(
        &mut self,
        port: u32,
        in_port: u32,
        frame: &PacketBuf<Vec<u8>>,
        tun: &TunnelSet,
        g: Gso,
    ) {
        let sup = match TcpSuper::parse(frame.data(), g.mss) {
            Ok(s) => s,
            Err(why) => {
                self.drop(why);
                return;
            }
        };
        let mut seg = std::mem::replace(&mut self.seg_frame, PacketBuf::new(Vec::new(), 0));
        let mut h = [0u8; tunlab_wire::gso::MAX_HDR];
        for i in 0..sup.segments() {
            let r = sup.segment(frame.data(), i, &mut h);
            seg.reset(HEADROOM);
            let _ = seg.extend(&h[..sup.hdr_len()]);
            let _ = seg.extend(&frame.data()[r]);
            self.output(port, in_port, &mut seg, tun, None);
        }
        self.seg_frame = seg;
    }

    /// Tunnel port `pi`'s settings, socket, and where and with which key
    /// a frame leaves (`None` if `pi` is no tunnel or has no destination).
    fn tunnel_target(&self, pi: usize, tun: &TunnelSet) -> Option<Target> {
        let Io::Tunnel { cfg, sock } = &self.ports[pi].io else {
            return None;
        };
        let (remote, key) = remote_and_key(cfg, tun)?;
        Some(Target {
            pi,
            sock: *sock,
            cfg: *cfg,
            remote,
            key,
        })
    }
}

/// Where one frame leaves through a tunnel port: the port, its socket
/// and settings, and the remote and key the port or the flow chose.
struct Target {
    pi: usize,
    sock: usize,
    cfg: TunnelPort,
    remote: IpAddr,
    key: u64,
}

/// A function that makes errors about port `p`.
fn port_error(p: &Port) -> impl Fn(String) -> StartError + '_ {
    move |msg| StartError::Port {
        port: p.name.clone(),
        msg,
    }
}

trait IntoSocket {
    fn into_socket(self, port: u16) -> SocketAddr;
}

impl IntoSocket for IpAddr {
    fn into_socket(self, port: u16) -> SocketAddr {
        SocketAddr::new(self, port)
    }
}
