//! The userspace datapath (Open vSwitch's dpif-netdev): one worker's
//! share of a node's ports, moving packets itself; the slow path under the
//! kernel datapath.
//!
//! One thread, run to completion: poll every port's descriptor, then move
//! each ready descriptor's packets in a batch: decapsulate, hand each
//! frame up to the switch above ([`Upcall`]: ofproto classifies it and
//! returns the steps), carry out the steps, output. Outputs to a tunnel are collected and sent with one
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

mod dpif;
pub mod flow_cache;
mod gre;
mod pmtu;
mod ports;
mod qinq;
mod socket;
mod stt;
mod tap;
mod udp;

pub use tap::{from_tap, fuzz_upcall, open_tap};

use crate::config::{Config, FromFlow, Port, PortKind, TunnelPort};
use crate::dpif::provider::{Dpif, Upcall};
use crate::port::{remote_and_key, StartError};
use crate::profile::{Profile, Stage};
use crate::stats::{NodeStats, PortSnapshot, PortStats};
use flow_cache::FlowCache;
use qinq::QinqIo;
use socket::SockState;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Instant;
use stt::SttTso;
use tunlab_dp::{extract, extract_tunnel, FlowKey, Op, TlvMap, TunnelSet};
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

/// Rewrite header field `field` of `frame` to `value` (the pipeline's
/// set_field, move and dec_ttl, committed), fixing the checksums; the
/// drop reason if the frame does not have it.
fn rewrite(
    frame: &mut [u8],
    field: &tunlab_dp::field::Field,
    value: u128,
    partial: bool,
) -> Result<(), &'static str> {
    use tunlab_wire::rewrite::{self as rw, HeaderField as H};
    let h = match field.name {
        "eth_src" => H::EthSrc,
        "eth_dst" => H::EthDst,
        "ip_src" => H::Ipv4Src,
        "ip_dst" => H::Ipv4Dst,
        "ipv6_src" => H::Ipv6Src,
        "ipv6_dst" => H::Ipv6Dst,
        "ipv6_label" => H::Ipv6Label,
        "nw_ttl" => H::NwTtl,
        "nw_tos" => H::NwTos,
        "nw_ecn" => H::NwEcn,
        "arp_op" => H::ArpOp,
        "arp_sha" => H::ArpSha,
        "arp_spa" => H::ArpSpa,
        "arp_tha" => H::ArpTha,
        "arp_tpa" => H::ArpTpa,
        "tcp_src" => H::TpSrc,
        "tcp_dst" => H::TpDst,
        "icmp_type" | "icmpv6_type" => H::IcmpType,
        "icmp_code" | "icmpv6_code" => H::IcmpCode,
        "nd_target" => H::NdTarget,
        "nd_sll" => H::NdSll,
        "nd_tll" => H::NdTll,
        _ => return Err("header_rewrite_unknown_field"),
    };
    let csum = if partial {
        rw::L4Csum::Partial
    } else {
        rw::L4Csum::Complete
    };
    rw::rewrite(frame, h, value, csum).map_err(|_| "header_rewrite_failed")
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

/// Every key bit: the mask of an exact-match flow.
const EXACT: FlowKey = FlowKey {
    w: [u64::MAX; tunlab_dp::key::WORDS],
};

/// Headroom kept in front of every frame: the largest tunnel header or
/// virtio-net header plus room for two VLAN tags.
const HEADROOM: usize = 8 + geneve::MAX_OPTIONS_LEN + 2 * vlan::TAG_LEN + VNET_HDR_LEN;
const FRAME_MAX: usize = 65536;

/// One worker's userspace datapath: its TAP queues, its sockets, its
/// share of each port's counters.
pub struct Netdev {
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
    /// The Geneve TLV map, as ofproto last set it (options are read and
    /// written by it).
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
    /// Decided flows, when this datapath caches them (see
    /// [`Netdev::cache_flows`]).
    pub flows: FlowCache,
    /// Cache decisions: on when this is the node's datapath; off under
    /// the kernel datapath, whose misses must all reach ofproto so that
    /// the kernel's cache learns them.
    pub cache_flows: bool,
    key: FlowKey,
    /// The epoch of the decision being made (None: not cached).
    epoch: Option<u64>,
}

impl std::fmt::Debug for Netdev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Netdev")
            .field("name", &self.name)
            .field("ports", &self.ports.len())
            .finish()
    }
}

impl Netdev {
    /// Worker `worker` of `workers`: open its share of every port. `taps`
    /// holds each TAP port's queues for this worker ([`open_tap`] opened
    /// them for all workers); they are taken out.
    pub fn open(
        cfg: &Config,
        worker: usize,
        workers: usize,
        taps: &mut HashMap<String, Vec<Tap>>,
    ) -> Result<Netdev, StartError> {
        let mut node = Netdev {
            worker,
            workers: workers.max(1),
            name: cfg.name.clone(),
            underlay_mtu: cfg.underlay_mtu as usize,
            configured_mtu: cfg.underlay_mtu as usize,
            underlay_devs: None,
            tlv: cfg.tlv,
            ports: Vec::new(),
            by_ofport: HashMap::new(),
            socks: Vec::new(),
            drops: HashMap::new(),
            outer_fragmented: HashMap::new(),
            started: Instant::now(),
            ops: Vec::new(),
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
            flows: FlowCache::default(),
            cache_flows: true,
            key: FlowKey::default(),
            epoch: None,
        };
        node.port_cfgs = cfg.ports.clone();
        for p in &cfg.ports {
            node.open_port(p, taps.remove(&p.name))?;
        }
        Ok(node)
    }

    /// Nanoseconds since start: the datapath's notion of time.
    fn now(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
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

    /// This datapath's part of `tunlab ctl stats` (ports, its drops), for
    /// summing over workers.
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
            cache: (0, 0),
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
        of: &mut dyn Upcall,
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
                            n += self.drain_tap(of, pi, q)?;
                        }
                        i += 1;
                    }
                }
                Io::Qinq(_) => {
                    if self.poll_set.readable(i) {
                        n += self.drain_qinq(of, pi)?;
                    }
                    i += 1;
                }
                Io::Tunnel { .. } => {}
            }
        }
        for si in 0..self.socks.len() {
            if self.poll_set.readable(i) {
                n += self.drain_socket(of, si)?;
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

    /// Hand a frame up to be classified and carry out the steps.
    fn forward(
        &mut self,
        of: &mut dyn Upcall,
        in_port: u32,
        frame: &mut PacketBuf<Vec<u8>>,
        tunnelled: bool,
        gso: Option<Gso>,
    ) {
        if frame.len() < 14 {
            // A tunnel header with (almost) nothing behind it, or a runt
            // from a tenant: no Ethernet frame to switch.
            self.drop("short_frame");
            return;
        }
        let t = self.profile.start();
        let mut ops = std::mem::take(&mut self.ops);
        ops.clear();
        self.epoch = of.cache_epoch().filter(|_| self.cache_flows);
        if let Some(epoch) = self.epoch {
            extract(frame.data(), in_port, &mut self.key);
            if tunnelled {
                extract_tunnel(&self.meta, &self.tlv, &mut self.key);
            }
            if let Some(cached) = self.flows.lookup(&self.key, epoch, frame.len() as u64) {
                ops.extend_from_slice(cached);
                self.profile.add(Stage::Classify, t, 1);
                self.apply(of, &ops, in_port, tunnelled, frame, gso);
                self.ops = ops;
                return;
            }
        }
        let r = of.upcall(
            in_port,
            frame.data(),
            tunnelled.then_some(&self.meta),
            &mut ops,
        );
        if let (Some(_), Ok(())) = (self.epoch, r) {
            let (key, tlv) = (self.key, self.tlv);
            Dpif::flow_put(self, &key, &EXACT, Ok(&ops), &tlv);
        }
        self.profile.add(Stage::Classify, t, 1);
        match r {
            Ok(()) => self.apply(of, &ops, in_port, tunnelled, frame, gso),
            Err(why) => self.drop(why),
        }
        self.ops = ops;
    }

    /// Carry out the pipeline's steps on `frame`, which came in on
    /// `in_port`.
    fn apply(
        &mut self,
        of: &mut dyn Upcall,
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
                Op::SetField { field, value } => {
                    let partial = gso.is_some_and(|g| g.partial);
                    if let Err(why) = rewrite(frame.data_mut(), field, value, partial) {
                        self.drop(why);
                        break;
                    }
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
                // Only a trace makes these (the datapaths do not track
                // connections yet): never here.
                // No connection state to clear: nothing tracked it.
                Op::CtClear => {}
                Op::Ct(_) | Op::Recirc(_) => {
                    self.drop("conntrack_not_built");
                    break;
                }
                Op::Controller(ref pin) => {
                    if let Err(why) = of.controller(in_port, tunnelled, pin, frame.data()) {
                        self.drop(why);
                    }
                }
            }
        }
    }

    /// Ofproto mapped Geneve options anew: read and write them so.
    pub fn set_tlv(&mut self, tlv: TlvMap) {
        self.tlv = tlv;
    }

    /// A frame for OpenFlow's PACKET_OUT (with the headroom every frame
    /// has), or `None` (counted) when `data` is no Ethernet frame we carry.
    pub fn frame_for(&mut self, data: &[u8]) -> Option<PacketBuf<Vec<u8>>> {
        let mut frame = PacketBuf::new(vec![0u8; HEADROOM + data.len() + 64], HEADROOM);
        if data.len() < 14 || data.len() > FRAME_MAX || frame.extend(data).is_err() {
            self.drop("packet_out_bad_length");
            return None;
        }
        Some(frame)
    }

    /// Carry out `ops` on `frame` (from `in_port`) and send at once
    /// (dpif's execute: PACKET_OUT).
    pub fn execute(
        &mut self,
        of: &mut dyn Upcall,
        in_port: u32,
        frame: &mut PacketBuf<Vec<u8>>,
        ops: &[Op],
    ) {
        self.apply(of, ops, in_port, false, frame, None);
        self.flush_sends();
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
