//! One running node: ports opened, flows loaded, and the packet loop.
//!
//! One thread, run to completion: poll every port's descriptor, then move
//! each ready descriptor's packets in a batch through extract → classify →
//! actions → output. Outputs to a tunnel are collected and sent with one
//! `sendmmsg` per socket per round.
//!
//! Built so far: tenant TAP ports, Geneve/VXLAN tunnel ports over UDP
//! sockets (IPv4 and IPv6 underlay), GRE/NVGRE ports over a raw IP socket
//! (IPv4 underlay), STT ports over a raw TCP socket (IPv4 underlay; an
//! nftables rule keeps the host's TCP from resetting STT segments), and
//! QinQ ports over a packet socket on an underlay interface (frames leave
//! with the tags the flows pushed; only S-tagged frames come in).

use crate::config::{Config, FromFlow, Port, PortKind, PortMap, TunnelPort};
use crate::profile::{Profile, Stage};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Instant;
use tunlab_dp::{extract, extract_tunnel, Classifier, FlowKey, Op, Pipeline, TlvMap, TunnelSet};
use tunlab_netio::tap::{offload, VNET_HDR_LEN};
use tunlab_netio::{netns, PacketSocket, Poller, RecvBatch, RstGuard, Tap, TapOptions, Underlay};
use tunlab_wire::geneve::{self, OptType, OptionRepr, OptionsBuf};
use tunlab_wire::gso::{Coalescer, TcpSuper};
use tunlab_wire::stt::{self, Reassembled, Reassembler};
use tunlab_wire::tunnel::{self, Decap, PopConfig, TunnelKind, TunnelMetadata};
use tunlab_wire::{checksum, virtio_net, vlan, PacketBuf, Vni};

/// Why the node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("port '{port}': {msg}")]
    Port { port: String, msg: String },
}

/// Per-port counters (`tunlab ctl stats` shows them).
#[derive(Debug, Clone, Copy, Default)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
}

/// One port's counters at one moment.
#[derive(Debug, Clone)]
pub struct PortSnapshot {
    pub name: String,
    pub ofport: u32,
    pub kind: &'static str,
    pub stats: PortStats,
    /// Frames received per TAP queue (this worker's queues).
    pub queue_rx: Vec<u64>,
}

/// A node's (or one worker's) counters at one moment.
#[derive(Debug, Clone, Default)]
pub struct NodeStats {
    pub ports: Vec<PortSnapshot>,
    pub drops: HashMap<&'static str, u64>,
    pub outer_fragmented: HashMap<&'static str, u64>,
    /// Exact-match cache hits and misses.
    pub cache: (u64, u64),
}

impl NodeStats {
    /// The sum of the workers' counters, worker by worker in order. A TAP
    /// queue's number is `worker + workers * i` for a worker's i-th queue
    /// (as [`open_tap`] deals them), so the per-queue counts are dealt
    /// back in that order.
    pub fn sum(workers: &[NodeStats]) -> NodeStats {
        let Some(first) = workers.first() else {
            return NodeStats::default();
        };
        let mut total = NodeStats {
            ports: first.ports.clone(),
            ..NodeStats::default()
        };
        for (pi, p) in total.ports.iter_mut().enumerate() {
            p.stats = PortStats::default();
            let per: Vec<&[u64]> = workers
                .iter()
                .map(|w| w.ports.get(pi).map_or(&[][..], |q| &q.queue_rx[..]))
                .collect();
            let n: usize = per.iter().map(|q| q.len()).sum();
            p.queue_rx = (0..n)
                .map(|j| per[j % per.len()].get(j / per.len()).copied().unwrap_or(0))
                .collect();
        }
        for w in workers {
            for (pi, p) in w.ports.iter().enumerate() {
                if let Some(t) = total.ports.get_mut(pi) {
                    t.stats.rx_packets += p.stats.rx_packets;
                    t.stats.rx_bytes += p.stats.rx_bytes;
                    t.stats.tx_packets += p.stats.tx_packets;
                    t.stats.tx_bytes += p.stats.tx_bytes;
                    t.stats.tx_errors += p.stats.tx_errors;
                }
            }
            for (k, v) in &w.drops {
                *total.drops.entry(k).or_insert(0) += v;
            }
            for (k, v) in &w.outer_fragmented {
                *total.outer_fragmented.entry(k).or_insert(0) += v;
            }
            total.cache.0 += w.cache.0;
            total.cache.1 += w.cache.1;
        }
        total
    }
}

/// A TCP super-frame travelling through the node: its segment size, and
/// whether its TCP checksum is partial (a tenant's, pseudo-header sum
/// only) or complete (joined here from checked segments).
#[derive(Debug, Clone, Copy)]
pub struct Gso {
    pub mss: u16,
    pub partial: bool,
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

/// Where a QinQ port's frames come and go, S-tag in place either way.
enum QinqIo {
    /// A packet socket on the underlay interface (userspace datapath).
    Socket(PacketSocket),
    /// The kernel datapath's upcall TAP for that interface: its misses
    /// come up here, and what is written here leaves by the underlay.
    Upcall(Tap),
}

impl QinqIo {
    fn recv(&self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        match self {
            QinqIo::Socket(s) => s.recv(buf),
            QinqIo::Upcall(t) => t.recv(buf),
        }
    }

    fn send(&self, frame: &[u8]) -> std::io::Result<()> {
        match self {
            QinqIo::Socket(s) => s.send(frame),
            QinqIo::Upcall(t) => t.send(frame).map(drop),
        }
    }

    fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::{AsFd, AsRawFd};
        match self {
            QinqIo::Socket(s) => s.as_fd().as_raw_fd(),
            QinqIo::Upcall(t) => t.as_fd().as_raw_fd(),
        }
    }
}

struct PortState {
    name: String,
    ofport: u32,
    io: Io,
    stats: PortStats,
    /// Frames received per TAP queue.
    queue_rx: Vec<u64>,
}

struct SockState {
    kind: TunnelKind,
    /// Outer UDP checksum on (kernel-computed) or off (zero).
    csum: bool,
    local: SocketAddr,
    under: Underlay,
    /// Geneve and VXLAN send from these (each bound to its own ephemeral
    /// port), picked by a hash of the inner flow: the outer UDP source
    /// port gives the underlay's ECMP and the receiver's RSS a flow to
    /// spread (RFC 7348 § 5, RFC 8926 § 3.3), and one flow always leaves
    /// from one port, in order. Empty: send from `under`.
    srcs: Vec<Underlay>,
    rx: RecvBatch,
    /// Datagrams to send this round: bytes, destination and which of
    /// `srcs` sends them.
    tx: Vec<(Vec<u8>, SocketAddr, u8)>,
    tx_used: usize,
}

/// Source ports (sockets) per Geneve/VXLAN port and worker.
const SOURCE_PORTS: usize = 8;

/// Headroom kept in front of every frame: the largest tunnel header or
/// virtio-net header plus room for two VLAN tags.
const HEADROOM: usize = 8 + geneve::MAX_OPTIONS_LEN + 2 * vlan::TAG_LEN + VNET_HDR_LEN;
const FRAME_MAX: usize = 65536;
/// STT frames reassembled at once (64 KiB each), and how long a partial
/// frame may wait for its other segments.
const STT_REASM_SLOTS: usize = 8;
const STT_REASM_TIMEOUT_NS: u64 = 1_000_000_000;
/// Segments per UDP GSO send, and the room for one segment's tunnel and
/// inner headers in the header arena.
const GSO_BATCH: usize = tunlab_netio::udp::GSO_MAX_SEGMENTS;
const GSO_HDR_ROOM: usize = 8 + geneve::MAX_OPTIONS_LEN + tunlab_wire::gso::MAX_HDR;

/// A running node, or one worker's share of it: its TAP queues, its
/// sockets, its copy of the flow table and caches.
pub struct Node {
    pub name: String,
    /// This worker's number, and how many there are.
    worker: usize,
    workers: usize,
    underlay_mtu: usize,
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
    /// The kernel datapath, when this node runs one (worker 0 only): its
    /// flow cache is filled from this node's decisions.
    pub kernel: Option<crate::kernel::Kernel>,
}

/// Where STT super-frames to one remote leave: the underlay interface's
/// packet socket and the two MAC addresses.
struct SttTso {
    remote: std::net::Ipv4Addr,
    sock: PacketSocket,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
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
            kernel: None,
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
        let perr = |msg: String| StartError::Port {
            port: p.name.clone(),
            msg,
        };
        // With several workers, every worker's raw or packet socket gets
        // a copy of each packet from the kernel; a filter keeps each
        // packet in the socket of the worker on whose CPU it arrived (as
        // the UDP sockets' reuse-port group does), so each is read once.
        let (group, member) = (self.workers as u32, self.worker as u32);
        let share = |r: std::io::Result<()>, what: &str| {
            r.map_err(|e| perr(format!("cannot share the {what} socket among workers: {e}")))
        };
        let io = match &p.kind {
            PortKind::Tap { .. } | PortKind::Veth { .. } => match taps {
                Some(t) if !t.is_empty() => Io::Tap(t),
                _ => return Err(perr("no TAP queue for this worker".into())),
            },
            PortKind::Tunnel(t) if matches!(t.kind, TunnelKind::Geneve | TunnelKind::Vxlan) => {
                let local = SocketAddr::new(t.local_ip, t.dst_port);
                let sock = match self.socks.iter().position(|s| s.local == local) {
                    Some(i) if self.socks[i].kind == t.kind && self.socks[i].csum == t.csum => i,
                    Some(i) if self.socks[i].kind == t.kind => {
                        return Err(perr(format!("{local} is shared with a port whose csum setting differs; one UDP socket has one setting")))
                    }
                    Some(i) => {
                        return Err(perr(format!(
                            "{local} already carries {}; one UDP port carries one tunnel type",
                            self.socks[i].kind.name()
                        )))
                    }
                    None => {
                        let under = if self.workers > 1 {
                            // One socket per worker on the same address;
                            // a datagram goes to the worker on the CPU
                            // that received it.
                            let u = Underlay::bind_shared(local)
                                .map_err(|e| perr(format!("cannot bind {local}: {e}")))?;
                            if self.worker == 0 {
                                u.steer_by_cpu(self.workers as u32).map_err(|e| {
                                    perr(format!("cannot steer {local} by CPU: {e}"))
                                })?;
                            }
                            u
                        } else {
                            Underlay::bind(local).map_err(|e| perr(format!("cannot bind {local}: {e}")))?
                        };
                        under
                            .set_tx_checksum(t.csum)
                            .map_err(|e| perr(format!("cannot set the outer UDP checksum {}: {e}", if t.csum { "on" } else { "off" })))?;
                        // Geneve may fragment its outer packet; VXLAN never
                        // sends one too big (RFC 7348 § 4.3), so keeps DF.
                        if t.kind == TunnelKind::Geneve {
                            under.allow_fragmentation().map_err(|e| perr(format!("cannot clear DF: {e}")))?;
                        }
                        let mut srcs = Vec::with_capacity(SOURCE_PORTS);
                        for _ in 0..SOURCE_PORTS {
                            let from = SocketAddr::new(t.local_ip, 0);
                            let u = Underlay::bind(from)
                                .map_err(|e| perr(format!("cannot bind a source port on {from}: {e}")))?;
                            u.set_tx_checksum(t.csum)
                                .map_err(|e| perr(format!("cannot set the outer UDP checksum: {e}")))?;
                            if t.kind == TunnelKind::Geneve {
                                u.allow_fragmentation()
                                    .map_err(|e| perr(format!("cannot clear DF: {e}")))?;
                            }
                            srcs.push(u);
                        }
                        let si = self.add_socket(t.kind, t.csum, local, under);
                        self.socks[si].srcs = srcs;
                        si
                    }
                };
                Io::Tunnel { cfg: *t, sock }
            }
            PortKind::Tunnel(t) if matches!(t.kind, TunnelKind::Gre | TunnelKind::Nvgre) => {
                let IpAddr::V4(local4) = t.local_ip else {
                    return Err(perr(
                        "GRE over an IPv6 underlay is not built yet; use an IPv4 local_ip".into(),
                    ));
                };
                // One raw socket for IP protocol 47 per local address,
                // shared by GRE and NVGRE ports.
                let local = SocketAddr::new(t.local_ip, 0);
                let sock = match self
                    .socks
                    .iter()
                    .position(|s| s.local == local && s.kind == TunnelKind::Gre)
                {
                    Some(i) => i,
                    None => {
                        let under = Underlay::raw_ipv4(local4, 47).map_err(|e| {
                            perr(format!("cannot open a raw GRE socket on {local4}: {e}"))
                        })?;
                        under
                            .allow_fragmentation()
                            .map_err(|e| perr(format!("cannot clear DF: {e}")))?;
                        if group > 1 {
                            share(under.share_by_cpu(group, member), "raw GRE")?;
                        }
                        self.add_socket(TunnelKind::Gre, false, local, under)
                    }
                };
                Io::Tunnel { cfg: *t, sock }
            }
            PortKind::Tunnel(t) => {
                // STT: a raw TCP socket per local address and port.
                let IpAddr::V4(local4) = t.local_ip else {
                    return Err(perr(
                        "STT over an IPv6 underlay is not built yet; use an IPv4 local_ip".into(),
                    ));
                };
                let local = SocketAddr::new(t.local_ip, t.dst_port);
                let sock = match self
                    .socks
                    .iter()
                    .position(|s| s.local == local && s.kind == TunnelKind::Stt)
                {
                    Some(i) => i,
                    None => {
                        let under = Underlay::raw_ipv4(local4, 6).map_err(|e| {
                            perr(format!("cannot open a raw TCP socket on {local4}: {e}"))
                        })?;
                        // One guard per node (worker 0's); a reassembler
                        // per worker: an STT frame's segments arrive on
                        // one CPU, so at one worker.
                        if self.worker == 0 {
                            let guard = RstGuard::install(&self.name, t.dst_port)
                                .map_err(|e| perr(e.to_string()))?;
                            self.rst_guards.push(guard);
                        }
                        self.stt_reasm
                            .get_or_insert_with(|| Reassembler::new(STT_REASM_SLOTS));
                        if group > 1 {
                            share(under.share_by_cpu(group, member), "raw STT")?;
                        }
                        self.add_socket(TunnelKind::Stt, true, local, under)
                    }
                };
                Io::Tunnel { cfg: *t, sock }
            }
            // On the kernel datapath the port's upcall TAP comes opened.
            PortKind::QinQ { .. } if taps.as_ref().is_some_and(|t| t.len() == 1) => {
                Io::Qinq(QinqIo::Upcall(
                    taps.into_iter()
                        .flatten()
                        .next()
                        .ok_or_else(|| perr("no upcall TAP".into()))?,
                ))
            }
            PortKind::QinQ { underlay } => {
                let q = PacketSocket::open(underlay)
                    .map_err(|e| perr(format!("cannot open a packet socket on {underlay}: {e}")))?;
                if group > 1 {
                    share(q.share_by_cpu(group, member), "QinQ packet")?;
                }
                Io::Qinq(QinqIo::Socket(q))
            }
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
        });
        Ok(())
    }

    /// Add a port while running (`tunlab ctl add-port`): refused if its
    /// name or number is taken; nothing else changes.
    pub fn add_port(&mut self, p: &Port, taps: Option<Vec<Tap>>) -> Result<(), StartError> {
        self.check_new_port(p)?;
        self.port_cfgs.push(p.clone());
        if let Err(e) = self.open_port(p, taps) {
            self.port_cfgs.pop();
            return Err(e);
        }
        Ok(())
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
        if let Some(k) = self.kernel.as_mut() {
            let cfg = self.port_cfgs.iter().find(|p| p.name == name);
            k.remove_port(gone.ofport, cfg);
        }
        self.port_cfgs.retain(|p| p.name != name);
        self.kernel_changed();
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

    /// The flow table, the TLV map or the ports changed: the kernel
    /// datapath's cache moves to a new generation before this returns.
    pub fn kernel_changed(&mut self) {
        if let Some(k) = self.kernel.as_mut() {
            if let Err(e) = k.revalidate(&self.classifier, &self.tlv) {
                // Stale entries must not forward: without a new
                // generation the kernel path cannot be trusted.
                eprintln!("tunlab switch: kernel datapath revalidation failed: {e}");
                *self.drops.entry("kernel_revalidation_failed").or_default() += 1;
            }
        }
    }

    /// Names and numbers of the ports, for flow rules that name ports.
    pub fn port_map(&self) -> PortMap {
        PortMap(
            self.ports
                .iter()
                .map(|p| (p.name.clone(), p.ofport))
                .collect(),
        )
    }

    /// Keep a new underlay socket with its batch buffers; returns its index.
    fn add_socket(
        &mut self,
        kind: TunnelKind,
        csum: bool,
        local: SocketAddr,
        under: Underlay,
    ) -> usize {
        self.socks.push(SockState {
            kind,
            csum,
            local,
            under,
            srcs: Vec::new(),
            rx: RecvBatch::new(32, FRAME_MAX),
            tx: Vec::new(),
            tx_used: 0,
        });
        self.socks.len() - 1
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
                Io::Tap(_) => "tap",
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

    fn drain_tap(&mut self, pi: usize, q: usize) -> std::io::Result<usize> {
        let mut n = 0;
        while n < 64 {
            // Read straight into the frame buffer, the virtio-net header
            // in the last bytes of the headroom: a 64 KB super-frame is
            // not copied again here.
            let mut buf =
                std::mem::replace(&mut self.frame, PacketBuf::new(Vec::new(), 0)).into_inner();
            let at = HEADROOM - VNET_HDR_LEN;
            let t = self.profile.start();
            let got = match &self.ports[pi].io {
                Io::Tap(qs) => qs[q].recv(&mut buf[at..]),
                _ => Ok(None),
            };
            let got = match got {
                Ok(g) => g,
                Err(e) => {
                    self.frame = PacketBuf::new(buf, HEADROOM);
                    return Err(e);
                }
            };
            let Some(len) = got else {
                self.frame = PacketBuf::new(buf, HEADROOM);
                break;
            };
            self.profile.add(Stage::Receive, t, 1);
            n += 1;
            if let Some(c) = self.ports[pi].queue_rx.get_mut(q) {
                *c += 1;
            }
            let vh = match virtio_net::Header::new_checked(&buf[at..at + len]) {
                Ok(h) => virtio_net::Repr::parse(&h),
                Err(_) => {
                    self.drop("short_frame");
                    self.frame = PacketBuf::new(buf, HEADROOM);
                    continue;
                }
            };
            // `recv` wrote `len` bytes from `at`, and `len` covers the
            // virtio-net header, so the frame's range is within `buf`.
            let Some(mut frame) = PacketBuf::with_range(buf, HEADROOM, at + len) else {
                self.drop("short_frame");
                self.frame = PacketBuf::new(vec![0u8; HEADROOM + FRAME_MAX + 64], HEADROOM);
                continue;
            };
            let ofport = self.ports[pi].ofport;
            self.ports[pi].stats.rx_packets += 1;
            self.ports[pi].stats.rx_bytes += frame.len() as u64;
            match vh.gso_type {
                virtio_net::GsoType::TcpV4 | virtio_net::GsoType::TcpV6 => {
                    // A super-frame: its checksum stays partial, each
                    // segment gets its own when it is cut.
                    let gso = Gso {
                        mss: vh.gso_size,
                        partial: vh.needs_csum(),
                    };
                    self.forward(ofport, &mut frame, false, Some(gso));
                }
                virtio_net::GsoType::None => {
                    if vh.needs_csum()
                        && !finish_partial_csum(
                            frame.data_mut(),
                            vh.csum_start as usize,
                            vh.csum_offset as usize,
                        )
                    {
                        self.drop("bad_csum_offsets");
                    } else {
                        self.forward(ofport, &mut frame, false, None);
                    }
                }
                // UDP segmentation was not offered to the TAP.
                _ => self.drop("unexpected_gso"),
            }
            self.frame = frame;
        }
        Ok(n)
    }

    /// Frames from a QinQ port's underlay interface: only those whose
    /// outermost tag is an 802.1ad S-tag are the overlay's; the rest is the
    /// host's own underlay traffic (ARP, IP) and is left alone.
    fn drain_qinq(&mut self, pi: usize) -> std::io::Result<usize> {
        let mut n = 0;
        while n < 64 {
            let got = match &self.ports[pi].io {
                Io::Qinq(q) => q.recv(&mut self.tap_buf)?,
                _ => None,
            };
            let Some(len) = got else { break };
            n += 1;
            if len < 18 || self.tap_buf[12..14] != [0x88, 0xa8] {
                continue;
            }
            let ofport = self.ports[pi].ofport;
            self.ports[pi].stats.rx_packets += 1;
            self.ports[pi].stats.rx_bytes += len as u64;
            let mut frame = std::mem::replace(&mut self.frame, PacketBuf::new(Vec::new(), 0));
            frame.reset(HEADROOM);
            let _ = frame.extend(&self.tap_buf[..len]);
            self.forward(ofport, &mut frame, false, None);
            self.frame = frame;
        }
        Ok(n)
    }

    fn drain_socket(&mut self, si: usize) -> std::io::Result<usize> {
        let t = self.profile.start();
        let s = &mut self.socks[si];
        let got = s.under.recv_batch(&mut s.rx)?;
        self.profile.add(Stage::Receive, t, got as u64);
        let kind = s.kind;
        let local = s.local;
        let known = self.tlv;
        let mut frame = std::mem::replace(&mut self.frame, PacketBuf::new(Vec::new(), 0));
        for m in 0..got {
            if kind == TunnelKind::Gre {
                self.receive_gre(si, m, &mut frame);
                continue;
            }
            if kind == TunnelKind::Stt {
                self.receive_stt(si, m, &mut frame);
                continue;
            }
            let Some((data, stride, from)) = self.socks[si].rx.get(m) else {
                continue;
            };
            let Some(from) = from else { continue };
            // On a wildcard-bound socket, the address it was sent to.
            let local = match self.socks[si].rx.dst(m) {
                Some(ip) => SocketAddr::new(ip, local.port()),
                None => local,
            };
            let stride = if stride == 0 {
                data.len()
            } else {
                stride as usize
            };
            // GRO may have coalesced several datagrams: each is a packet.
            let count = data.len().div_ceil(stride.max(1));
            for c in 0..count {
                let Some((data, _, _)) = self.socks[si].rx.get(m) else {
                    break;
                };
                let dg = &data[c * stride..((c + 1) * stride).min(data.len())];
                let t = self.profile.start();
                let r = tunnel::pop_udp_payload(
                    kind,
                    dg,
                    from,
                    local,
                    |cl, t| known.knows(cl, t) || tunnel::ovn_only(cl, t),
                    &mut self.meta,
                );
                let at = match r {
                    Ok(at) => at,
                    Err(e) => {
                        self.drop(match e.kind {
                            tunlab_wire::ErrorKind::UnknownCriticalOption { .. } => {
                                "unknown_critical_option"
                            }
                            _ => "malformed_tunnel_header",
                        });
                        continue;
                    }
                };
                self.profile.add(Stage::Decap, t, 1);
                let Some(in_port) = self.tunnel_in_port(si, from.ip()) else {
                    self.drop("unknown_remote");
                    continue;
                };
                let pi = self.by_ofport[&in_port];
                self.ports[pi].stats.rx_packets += 1;
                self.ports[pi].stats.rx_bytes += (dg.len() - at) as u64;
                // TCP segments of one flow are joined (software GRO) and
                // go on as one frame; anything else goes on as it is,
                // after what was joined before it.
                if self.offloads {
                    let same = self
                        .gro_from
                        .as_ref()
                        .is_none_or(|(p, m)| *p == in_port && *m == self.meta);
                    let t = self.profile.start();
                    if same && self.gro.push(&dg[at..]) {
                        if self.gro.segments() == 1 {
                            self.gro_from = Some((in_port, self.meta));
                        }
                        self.profile.add(Stage::Decap, t, 0);
                        continue;
                    }
                    self.flush_joined();
                    let Some((data, _, _)) = self.socks[si].rx.get(m) else {
                        break;
                    };
                    let dg = &data[c * stride..((c + 1) * stride).min(data.len())];
                    let t = self.profile.start();
                    if self.gro.push(&dg[at..]) {
                        if self.gro.segments() == 1 {
                            self.gro_from = Some((in_port, self.meta));
                        }
                        self.profile.add(Stage::Decap, t, 0);
                        continue;
                    }
                }
                let Some((data, _, _)) = self.socks[si].rx.get(m) else {
                    break;
                };
                let dg = &data[c * stride..((c + 1) * stride).min(data.len())];
                frame.reset(HEADROOM);
                let _ = frame.extend(&dg[at..]);
                self.forward(in_port, &mut frame, true, None);
            }
        }
        self.flush_joined();
        self.frame = frame;
        Ok(got)
    }

    /// Send on the frame joined from received segments, if any.
    fn flush_joined(&mut self) {
        let Some((in_port, meta)) = self.gro_from.take() else {
            return;
        };
        let Some(c) = self.gro.finish() else {
            return;
        };
        let (len, segs) = (c.frame.len(), c.segments);
        let gso = (segs > 1).then_some(Gso {
            mss: c.mss,
            partial: false,
        });
        let head = self.gro.headroom();
        let Some(mut pb) = PacketBuf::with_range(self.gro.take_buffer(), head, head + len) else {
            return;
        };
        // The joined frame goes on with its own segments' metadata; the
        // datagram being read keeps its own (it may start the next frame).
        let current = std::mem::replace(&mut self.meta, meta);
        self.forward(in_port, &mut pb, true, gso);
        self.meta = current;
        self.gro.restore(pb.into_inner());
    }

    /// One IPv4 packet from the raw GRE socket: the receiving port (by outer
    /// source) decides whether the key is GRE's or NVGRE's.
    fn receive_gre(&mut self, si: usize, m: usize, frame: &mut PacketBuf<Vec<u8>>) {
        let Some((data, _, _)) = self.socks[si].rx.get(m) else {
            return;
        };
        if data.len() < 20 {
            self.drop("malformed_tunnel_header");
            return;
        }
        let src = IpAddr::V4(std::net::Ipv4Addr::new(
            data[12], data[13], data[14], data[15],
        ));
        let Some(in_port) = self.tunnel_in_port(si, src) else {
            self.drop("unknown_remote");
            return;
        };
        let pi = self.by_ofport[&in_port];
        let nvgre =
            matches!(&self.ports[pi].io, Io::Tunnel { cfg, .. } if cfg.kind == TunnelKind::Nvgre);
        let Some((data, _, _)) = self.socks[si].rx.get(m) else {
            return;
        };
        let at = match tunnel::pop_gre_ipv4(data, nvgre, true, &mut self.meta) {
            Ok(at) => at,
            Err(_) => {
                self.drop("malformed_tunnel_header");
                return;
            }
        };
        frame.reset(HEADROOM);
        let _ = frame.extend(&data[at..]);
        self.ports[pi].stats.rx_packets += 1;
        self.ports[pi].stats.rx_bytes += frame.len() as u64;
        self.forward(in_port, frame, true, None);
    }

    /// One IPv4 packet from the raw TCP socket: an STT segment if it is for
    /// the STT port (the socket also sees the host's other TCP). A whole
    /// frame goes on at once; a segment waits in the reassembler for the
    /// rest of its frame.
    fn receive_stt(&mut self, si: usize, m: usize, frame: &mut PacketBuf<Vec<u8>>) {
        let port = self.socks[si].local.port();
        let Some((data, _, _)) = self.socks[si].rx.get(m) else {
            return;
        };
        if data.len() < 20 || data[9] != 6 {
            return;
        }
        let ihl = ((data[0] & 0x0f) as usize) * 4;
        if data.len() < ihl + 4 || u16::from_be_bytes([data[ihl + 2], data[ihl + 3]]) != port {
            return;
        }
        let src = IpAddr::V4(std::net::Ipv4Addr::new(
            data[12], data[13], data[14], data[15],
        ));
        let Some(in_port) = self.tunnel_in_port(si, src) else {
            self.drop("unknown_remote");
            return;
        };
        // Behind a stand-in Ethernet header, the packet is what `pop`
        // reads: one decapsulation path for whole frames and segments.
        frame.reset(HEADROOM);
        let _ = frame.extend(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00]);
        let _ = frame.extend(data);
        // A packet longer than the underlay MTU was never on a wire in one
        // piece: the local kernel put it together (a veth peer's TSO
        // super-packet, or GRO) and its TCP checksum is partial, the
        // segments' checksums having been checked or never needed.
        let cfg = PopConfig {
            stt_port: port,
            verify_csum: frame.len() - 14 <= self.underlay_mtu,
            ..PopConfig::default()
        };
        let known = self.tlv;
        let r = tunnel::pop(
            frame,
            &cfg,
            |cl, t| known.knows(cl, t) || tunnel::ovn_only(cl, t),
            &mut self.meta,
        );
        let mut gso = None;
        match r {
            Ok(Decap::Frame) => {
                if let Ok(h) = frame.push(stt::HEADER_LEN) {
                    gso = stt_gso(h);
                    let _ = frame.pull(stt::HEADER_LEN);
                }
            }
            Ok(Decap::SttSegment { key, seq }) => {
                let now = self.now();
                let Some(reasm) = self.stt_reasm.as_mut() else {
                    return;
                };
                reasm.expire(now, STT_REASM_TIMEOUT_NS);
                // The segment is copied out of the frame buffer, which the
                // whole frame then fills.
                self.stt_seg.clear();
                self.stt_seg.extend_from_slice(frame.data());
                let whole = match reasm.push(key, seq, &self.stt_seg, now) {
                    Ok(Reassembled::Complete(f)) => f,
                    Ok(Reassembled::Pending) => return,
                    Err(_) => {
                        self.drop("bad_stt_segment");
                        return;
                    }
                };
                let Ok(hl) = tunnel::stt_frame(whole, &mut self.meta) else {
                    self.drop("malformed_tunnel_header");
                    return;
                };
                gso = stt_gso(whole);
                // `whole` lives in the reassembler; the frame buffer is free.
                frame.reset(HEADROOM);
                let _ = frame.extend(&whole[hl..]);
            }
            Err(e) => {
                self.drop(match e.kind {
                    tunlab_wire::ErrorKind::Checksum { .. } => "bad_outer_checksum",
                    _ => "malformed_tunnel_header",
                });
                return;
            }
        }
        // STT carries the tenant's 802.1Q tag out of band: put it back.
        if let Some(tci) = self.meta.outer_vlan.take() {
            if vlan::push(frame, tunlab_wire::ethernet::EtherType::Vlan, tci).is_err() {
                self.drop("vlan_push_failed");
                return;
            }
        }
        let pi = self.by_ofport[&in_port];
        self.ports[pi].stats.rx_packets += 1;
        self.ports[pi].stats.rx_bytes += frame.len() as u64;
        self.forward(in_port, frame, true, gso);
    }

    /// The tunnel port a packet from `remote` on socket `si` belongs to:
    /// one whose fixed remote is `remote`, else one with `remote_ip = "flow"`.
    fn tunnel_in_port(&self, si: usize, remote: IpAddr) -> Option<u32> {
        let mut flow_port = None;
        for p in &self.ports {
            if let Io::Tunnel { cfg, sock } = &p.io {
                if *sock != si {
                    continue;
                }
                match cfg.remote_ip {
                    FromFlow::Fixed(r) if r == remote => return Some(p.ofport),
                    FromFlow::Flow => flow_port = flow_port.or(Some(p.ofport)),
                    _ => {}
                }
            }
        }
        flow_port
    }

    /// Classify a frame and carry out the actions.
    fn forward(
        &mut self,
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
        if let Some(k) = self.kernel.as_mut() {
            k.offer(&self.key, r.map(|()| &ops[..]), &self.tlv);
        }
        match r {
            Ok(()) => {
                for op in &ops {
                    match *op {
                        Op::PushVlan(tpid) => {
                            let tci = vlan_tci(frame.data());
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
                        Op::SetVlanVid(v) => set_tci(frame.data_mut(), |t| (t & 0xf000) | v),
                        Op::SetVlanPcp(p) => {
                            set_tci(frame.data_mut(), |t| (t & 0x1fff) | ((p as u16) << 13))
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
                    }
                }
            }
            Err(why) => self.drop(why.name()),
        }
        self.ops = ops;
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
        if matches!(self.ports[pi].io, Io::Qinq(_)) && frame.len() > self.underlay_mtu + 14 {
            // The tags count against the underlay MTU; the tenant hears
            // about what is left for its IP packet.
            let (tags, plain) = untagged(frame.data());
            let room = self.underlay_mtu.saturating_sub(tags);
            let plain = PacketBuf::with_range(plain.clone(), 0, plain.len());
            if !plain.is_some_and(|pb| self.send_icmp_too_big(in_port, &pb, room)) {
                self.drop("too_big");
            }
            return;
        }
        let tap_hdr = if matches!(self.ports[pi].io, Io::Tap(_)) {
            match tap_vnet_header(frame.data(), gso) {
                Ok(vh) => Some(vh),
                Err(why) => {
                    self.drop(why);
                    return;
                }
            }
        } else {
            None
        };
        let tlv = self.tlv;
        let p = &mut self.ports[pi];
        match &p.io {
            Io::Qinq(q) => {
                if q.send(frame.data()).is_ok() {
                    p.stats.tx_packets += 1;
                    p.stats.tx_bytes += frame.len() as u64;
                } else {
                    p.stats.tx_errors += 1;
                }
            }
            Io::Tap(qs) => {
                // Any queue reaches the tenant; one per flow keeps order.
                let t = match qs.len() {
                    1 => &qs[0],
                    n => &qs[tunlab_wire::flowhash::hash_frame(frame.data()) as usize % n],
                };
                let len = frame.len();
                let vh = tap_hdr.unwrap_or(virtio_net::Repr::NONE);
                let ok = match frame.push(VNET_HDR_LEN) {
                    Ok(d) => {
                        vh.emit(d);
                        d[10..VNET_HDR_LEN].fill(0);
                        let ts = self.profile.start();
                        let r = t.send(d);
                        self.profile.add(Stage::Transmit, ts, 1);
                        let _ = frame.pull(VNET_HDR_LEN);
                        r.is_ok()
                    }
                    Err(_) => false,
                };
                if ok {
                    p.stats.tx_packets += 1;
                    p.stats.tx_bytes += len as u64;
                } else {
                    p.stats.tx_errors += 1;
                }
            }
            Io::Tunnel { cfg, sock } => {
                // Copies: the port may need `self` again (ICMP replies).
                let (cfg, sock) = (*cfg, *sock);
                let Some((remote, key)) = remote_and_key(&cfg, tun) else {
                    self.drop("no_tun_dst");
                    return;
                };
                if cfg.kind == TunnelKind::Stt {
                    let (local, sock) = (cfg.local_ip, sock);
                    self.output_stt(pi, sock, local, remote, key, in_port, frame);
                    return;
                }
                if matches!(cfg.kind, TunnelKind::Gre | TunnelKind::Nvgre) {
                    let nvgre = cfg.kind == TunnelKind::Nvgre;
                    let key32 = match (cfg.key, tun.id) {
                        (FromFlow::Fixed(0), None) if !nvgre => None,
                        _ => Some(key as u32),
                    };
                    let mut hdr = [0u8; 16];
                    let flow_id = tunlab_wire::flowhash::hash_frame(frame.data()) as u8;
                    let Ok(n) = tunnel::gre_header(nvgre, key32, cfg.csum, flow_id, &mut hdr)
                    else {
                        self.ports[pi].stats.tx_errors += 1;
                        return;
                    };
                    if 20 + n + frame.len() > self.underlay_mtu {
                        let room = self.underlay_mtu.saturating_sub(20 + n + 14);
                        if self.too_big(in_port, frame, room, cfg.kind) {
                            return;
                        }
                    }
                    let csum = cfg.csum && !nvgre;
                    let s = &mut self.socks[sock];
                    if s.tx_used == s.tx.len() {
                        s.tx.push((Vec::with_capacity(FRAME_MAX), remote.into_socket(0), 0));
                    }
                    let (buf, dst, _) = &mut s.tx[s.tx_used];
                    *dst = remote.into_socket(0);
                    buf.clear();
                    buf.extend_from_slice(&hdr[..n]);
                    buf.extend_from_slice(frame.data());
                    if csum {
                        tunlab_wire::gre::fill_checksum(buf);
                    }
                    s.tx_used += 1;
                    self.ports[pi].stats.tx_packets += 1;
                    self.ports[pi].stats.tx_bytes += frame.len() as u64;
                    return;
                }
                let opts = geneve_options(cfg.kind, &tlv, tun);
                // Path MTU: outer IP + UDP + tunnel header + the frame must
                // fit the underlay.
                let outer = if remote.is_ipv4() { 20 } else { 40 } + 8 + 8 + opts.len();
                if outer + frame.len() > self.underlay_mtu {
                    let room = self.underlay_mtu.saturating_sub(outer + 14);
                    if self.too_big(in_port, frame, room, cfg.kind) {
                        return;
                    }
                }
                let from = source_index(frame.data(), self.socks[sock].srcs.len());
                let s = &mut self.socks[sock];
                if s.tx_used == s.tx.len() {
                    s.tx.push((
                        Vec::with_capacity(FRAME_MAX),
                        remote.into_socket(cfg.dst_port),
                        0,
                    ));
                }
                let (buf, dst, src) = &mut s.tx[s.tx_used];
                *dst = remote.into_socket(cfg.dst_port);
                *src = from;
                buf.clear();
                buf.resize(8 + opts.len(), 0);
                let vni = Vni::from_masked(key as u32);
                match tunnel::udp_tunnel_header(cfg.kind, vni, opts.as_bytes(), buf) {
                    Ok(n) => {
                        buf.truncate(n);
                        buf.extend_from_slice(frame.data());
                        s.tx_used += 1;
                        self.ports[pi].stats.tx_packets += 1;
                        self.ports[pi].stats.tx_bytes += frame.len() as u64;
                    }
                    Err(_) => self.ports[pi].stats.tx_errors += 1,
                }
            }
        }
    }

    /// Send a tenant frame as one STT frame: in one TCP segment if it fits
    /// the underlay, else (no DF) in segments that the receiver reassembles
    /// (§ 3.3); a DF or IPv6 packet too big gets the ICMP error instead.
    #[allow(clippy::too_many_arguments)]
    fn output_stt(
        &mut self,
        pi: usize,
        si: usize,
        local: IpAddr,
        remote: IpAddr,
        key: u64,
        in_port: u32,
        frame: &mut PacketBuf<Vec<u8>>,
    ) {
        // Outer IPv4 and TCP headers are on every segment.
        let seg_room = self.underlay_mtu.saturating_sub(20 + tcp_len());
        let frame_len = stt::HEADER_LEN + frame.len();
        if frame_len > seg_room {
            let room = seg_room.saturating_sub(stt::HEADER_LEN + 14);
            if self.send_icmp_too_big(in_port, frame, room) {
                return;
            }
        }
        if frame_len > stt::MAX_FRAME || seg_room == 0 {
            self.ports[pi].stats.tx_errors += 1;
            return;
        }
        let sport = stt_source_port(frame.data());
        let tenant_len = frame.len() as u64;
        let packet_id = self.stt_packet_id;
        self.stt_packet_id = self.stt_packet_id.wrapping_add(1);
        let dport = self.socks[si].local.port();
        let Ok(d) = frame.push(stt::HEADER_LEN) else {
            self.ports[pi].stats.tx_errors += 1;
            return;
        };
        stt::Repr {
            context_id: key,
            ..stt::Repr::default()
        }
        .emit(d);
        let s = &mut self.socks[si];
        let mut ok = true;
        for (off, len) in stt::segments(frame_len, seg_room) {
            let part = &frame.data()[off..off + len];
            let Ok(h) = tunnel::stt_segment_header(
                local, remote, sport, dport, frame_len, off, packet_id, part,
            ) else {
                ok = false;
                break;
            };
            if s.tx_used == s.tx.len() {
                s.tx.push((Vec::with_capacity(FRAME_MAX), remote.into_socket(0), 0));
            }
            let (buf, dst, _) = &mut s.tx[s.tx_used];
            *dst = remote.into_socket(0);
            buf.clear();
            buf.extend_from_slice(&h);
            buf.extend_from_slice(part);
            s.tx_used += 1;
        }
        let _ = frame.pull(stt::HEADER_LEN);
        let p = &mut self.ports[pi];
        if ok {
            p.stats.tx_packets += 1;
            p.stats.tx_bytes += tenant_len;
        } else {
            p.stats.tx_errors += 1;
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
    fn tunnel_target(
        &self,
        pi: usize,
        tun: &TunnelSet,
    ) -> Option<(TunnelPort, usize, IpAddr, u64)> {
        let Io::Tunnel { cfg, sock } = &self.ports[pi].io else {
            return None;
        };
        let (remote, key) = remote_and_key(cfg, tun)?;
        Some((*cfg, *sock, remote, key))
    }

    /// Send a super-frame through a Geneve or VXLAN port as UDP GSO sends
    /// of up to 64 datagrams each: per segment, the tunnel header, the
    /// segment's own inner headers (written here) and its payload (where
    /// the tenant put it), handed to the kernel as one iovec. Returns
    /// false, having sent nothing, if the frame needs the per-segment
    /// path (no destination, not plain TCP, or segments too big for the
    /// underlay, which that path answers with ICMP or fragments).
    fn output_udp_gso(
        &mut self,
        pi: usize,
        frame: &PacketBuf<Vec<u8>>,
        tun: &TunnelSet,
        g: Gso,
    ) -> bool {
        let Some((cfg, si, remote, key)) = self.tunnel_target(pi, tun) else {
            return false;
        };
        // Linux refuses UDP GSO on a socket that sends no UDP checksum.
        if !self.socks[si].csum {
            return false;
        }
        let Ok(sup) = TcpSuper::parse(frame.data(), g.mss) else {
            return false;
        };
        let opts = geneve_options(cfg.kind, &self.tlv, tun);
        let mut th = [0u8; 8 + geneve::MAX_OPTIONS_LEN];
        let Ok(tl) = tunnel::udp_tunnel_header(
            cfg.kind,
            Vni::from_masked(key as u32),
            opts.as_bytes(),
            &mut th,
        ) else {
            return false;
        };
        let dgram = tl + sup.hdr_len() + sup.mss;
        let outer = if remote.is_ipv4() { 20 } else { 40 } + 8;
        if outer + dgram > self.underlay_mtu || dgram > u16::MAX as usize {
            return false;
        }
        // Datagrams queued before this frame leave before it.
        self.flush_socket(si);
        let per = GSO_BATCH.min(65535 / dgram).max(1);
        let dst = remote.into_socket(cfg.dst_port);
        let from = source_index(frame.data(), self.socks[si].srcs.len()) as usize;
        let data = frame.data();
        let hl = sup.hdr_len();
        let n = sup.segments();
        let (mut sent, mut lost) = (0u64, 0u64);
        let mut ranges = [(0usize, 0usize); GSO_BATCH];
        let mut i = 0;
        while i < n {
            let k = per.min(n - i);
            let t = self.profile.start();
            for (j, r) in ranges.iter_mut().enumerate().take(k) {
                let h = &mut self.gso_hdrs[j * GSO_HDR_ROOM..(j + 1) * GSO_HDR_ROOM];
                let seg = sup.segment(data, i + j, h);
                *r = (seg.start, seg.end);
            }
            let mut iov = [std::io::IoSlice::new(&[]); 3 * GSO_BATCH];
            for j in 0..k {
                iov[3 * j] = std::io::IoSlice::new(&th[..tl]);
                iov[3 * j + 1] =
                    std::io::IoSlice::new(&self.gso_hdrs[j * GSO_HDR_ROOM..j * GSO_HDR_ROOM + hl]);
                iov[3 * j + 2] = std::io::IoSlice::new(&data[ranges[j].0..ranges[j].1]);
            }
            self.profile.add(Stage::Encap, t, k as u64);
            let t = self.profile.start();
            let s = &self.socks[si];
            match s.srcs.get(from).unwrap_or(&s.under).send_segmented(
                &iov[..3 * k],
                dst,
                dgram as u16,
            ) {
                Ok(true) => sent += k as u64,
                _ => lost += k as u64,
            }
            self.profile.add(Stage::Transmit, t, k as u64);
            i += k;
        }
        if lost > 0 {
            *self.drops.entry("underlay_tx_full").or_insert(0) += lost;
        }
        let p = &mut self.ports[pi];
        p.stats.tx_packets += sent;
        p.stats.tx_bytes += (frame.len() as u64).saturating_sub(hl as u64 * lost);
        true
    }

    /// Send a super-frame through an STT port whole: one STT frame (up to
    /// 64 KB, checksum partial, the segment size in the STT header) behind
    /// one outer TCP header, written to the underlay interface's packet
    /// socket with a virtio-net header that asks the kernel to segment it
    /// as TCP. Returns false, having sent nothing, when the per-segment
    /// path must do (IPv6, no partial checksum, remote not yet in the
    /// neighbour table, frame too long).
    fn output_stt_tso(
        &mut self,
        pi: usize,
        frame: &PacketBuf<Vec<u8>>,
        tun: &TunnelSet,
        g: Gso,
    ) -> bool {
        let Some((cfg, si, remote, key)) = self.tunnel_target(pi, tun) else {
            return false;
        };
        let (IpAddr::V4(r4), IpAddr::V4(l4)) = (remote, cfg.local_ip) else {
            return false;
        };
        if !g.partial {
            return false;
        }
        let Ok(l) = tunlab_wire::gso::TcpLayout::parse(frame.data()) else {
            return false;
        };
        if l.l4 > u8::MAX as usize || l.v6 {
            return false;
        }
        let Some(ti) = self.stt_tso_for(r4) else {
            return false;
        };
        let sport = stt_source_port(frame.data());
        let packet_id = self.stt_packet_id;
        let r = stt::Repr {
            flags: stt::flags::CSUM_PARTIAL | stt::flags::IPV4 | stt::flags::TCP,
            l4_offset: l.l4 as u8,
            mss: g.mss,
            context_id: key,
            ..stt::Repr::default()
        };
        let t = &self.stt_tso[ti];
        let o = stt::TsoOuter {
            src_mac: t.src_mac,
            dst_mac: t.dst_mac,
            src: l4.octets(),
            dst: r4.octets(),
            src_port: sport,
            dst_port: self.socks[si].local.port(),
            packet_id,
        };
        let mut h = [0u8; 10 + stt::TSO_HDR_LEN];
        if stt::tso_headers(&o, &r, frame.len(), &mut h[10..]).is_none() {
            return false;
        }
        let seg = self.underlay_mtu.saturating_sub(40);
        virtio_net::Repr {
            flags: virtio_net::F_NEEDS_CSUM,
            gso_type: virtio_net::GsoType::TcpV4,
            gso_ecn: false,
            hdr_len: 54,
            gso_size: seg as u16,
            csum_start: 34,
            csum_offset: 16,
        }
        .emit(&mut h[..10]);
        self.stt_packet_id = self.stt_packet_id.wrapping_add(1);
        let tm = self.profile.start();
        let sent = t.sock.send_vectored(&[
            std::io::IoSlice::new(&h),
            std::io::IoSlice::new(frame.data()),
        ]);
        let segs = (stt::HEADER_LEN + frame.len()).div_ceil(seg.max(1)) as u64;
        self.profile.add(Stage::Transmit, tm, segs);
        match sent {
            Ok(true) => {
                let p = &mut self.ports[pi];
                p.stats.tx_packets += segs;
                p.stats.tx_bytes += frame.len() as u64;
            }
            Ok(false) => *self.drops.entry("underlay_tx_full").or_insert(0) += segs,
            Err(_) => self.ports[pi].stats.tx_errors += 1,
        }
        true
    }

    /// The packet socket and MACs towards STT remote `r`: opened the
    /// first time the kernel's neighbour table knows `r` (frames sent
    /// segment by segment before that make the kernel resolve it); looked
    /// up at most every 100 ms while it does not.
    fn stt_tso_for(&mut self, r: std::net::Ipv4Addr) -> Option<usize> {
        if let Some(i) = self.stt_tso.iter().position(|t| t.remote == r) {
            return Some(i);
        }
        if self
            .stt_tso_looked
            .is_some_and(|t| t.elapsed() < std::time::Duration::from_millis(100))
        {
            return None;
        }
        self.stt_tso_looked = Some(Instant::now());
        let arp = std::fs::read_to_string("/proc/net/arp").ok()?;
        let (dev, dst_mac) = neighbour(&arp, r)?;
        let src_mac = parse_mac(
            std::fs::read_to_string(format!("/sys/class/net/{dev}/address"))
                .ok()?
                .trim(),
        )?;
        let sock = PacketSocket::open_send_only(&dev).ok()?;
        sock.enable_vnet_hdr().ok()?;
        self.stt_tso.push(SttTso {
            remote: r,
            sock,
            src_mac,
            dst_mac,
        });
        Some(self.stt_tso.len() - 1)
    }

    /// If `frame` is IPv4 with DF, or IPv6, answer its sender with the ICMP
    /// error that says the tunnel leaves `room` bytes, out of the tenant
    /// port it came in; returns whether it did.
    fn send_icmp_too_big(&mut self, in_port: u32, frame: &PacketBuf<Vec<u8>>, room: usize) -> bool {
        let Some(reply) = icmp_too_big(frame.data(), room as u16) else {
            return false;
        };
        self.drop("too_big_icmp_sent");
        let mut r = PacketBuf::new(vec![0u8; HEADROOM + reply.len()], HEADROOM);
        let _ = r.extend(&reply);
        if let Some(&pi) = self.by_ofport.get(&in_port) {
            if matches!(self.ports[pi].io, Io::Tap(_)) {
                self.output(in_port, in_port, &mut r, &TunnelSet::default(), None);
            }
        }
        true
    }

    /// A frame too big for the tunnel: for IPv4 with DF and for IPv6, send
    /// the sender an ICMP "fragmentation needed" / "packet too big" with the
    /// MTU the tunnel leaves (`room`), from the original destination's
    /// address (as Linux's bridged VXLAN does), out of the port it came in.
    /// Otherwise Geneve and GRE send it anyway and the kernel fragments the
    /// outer packet (their sockets do not set DF), while VXLAN, whose outer
    /// header must not be fragmented (RFC 7348 § 4.3), drops it. Returns
    /// whether the frame was dealt with here (answered or dropped).
    fn too_big(
        &mut self,
        in_port: u32,
        frame: &mut PacketBuf<Vec<u8>>,
        room: usize,
        kind: TunnelKind,
    ) -> bool {
        if self.send_icmp_too_big(in_port, frame, room) {
            return true;
        }
        if kind == TunnelKind::Vxlan {
            self.drop("too_big_vxlan");
            return true;
        }
        *self.outer_fragmented.entry(kind.name()).or_insert(0) += 1;
        false
    }

    fn flush_sends(&mut self) {
        for si in 0..self.socks.len() {
            self.flush_socket(si);
        }
    }

    /// Send what socket `si` has queued.
    fn flush_socket(&mut self, si: usize) {
        {
            let s = &mut self.socks[si];
            if s.tx_used == 0 {
                return;
            }
            let t = self.profile.start();
            let mut sent = 0;
            // One batch per source port (a flow's datagrams keep their order).
            for k in 0..s.srcs.len().max(1) {
                let mut msgs = s.tx[..s.tx_used]
                    .iter()
                    .filter(|(_, _, src)| *src as usize == k)
                    .map(|(b, a, _)| (&b[..], *a))
                    .peekable();
                if msgs.peek().is_none() {
                    continue;
                }
                let from = s.srcs.get(k).unwrap_or(&s.under);
                sent += from.send_batch(msgs).unwrap_or(0);
            }
            self.profile.add(Stage::Transmit, t, s.tx_used as u64);
            let lost = s.tx_used - sent;
            s.tx_used = 0;
            if lost > 0 {
                *self.drops.entry("underlay_tx_full").or_insert(0) += lost as u64;
            }
        }
    }
}

/// Create a TAP port's device with its queues for `workers` workers
/// (at least one queue each; the kernel spreads the tenant's flows over
/// the queues by hash), then move it to its namespace, set its MTU and
/// address and bring it up. Every queue must exist before the move: the
/// device can only be opened by name in this namespace. Returns the
/// queues per worker, worker `i` holding queues `i, i + workers, ...`.
/// A tenant-facing TAP's options. Checksum and TSO offload: the tenant's
/// kernel hands over TCP super-frames of up to 64 KB with the checksum
/// partial, and takes joined ones back (`offloads = false`: checksum only).
pub fn tenant_tap_options(offloads: bool) -> TapOptions {
    TapOptions {
        vnet_hdr: true,
        multi_queue: true,
        offload: if offloads {
            offload::CSUM | offload::TSO4 | offload::TSO6 | offload::TSO_ECN
        } else {
            offload::CSUM
        },
    }
}

pub fn open_tap(
    p: &Port,
    offloads: bool,
    underlay_mtu: u16,
    ports: &[Port],
    workers: usize,
) -> Result<Vec<Vec<Tap>>, StartError> {
    let perr = |msg: String| StartError::Port {
        port: p.name.clone(),
        msg,
    };
    let PortKind::Tap {
        netns: ns,
        address,
        mtu,
        queues,
    } = &p.kind
    else {
        return Err(perr("not a tap port".into()));
    };
    let opts = tenant_tap_options(offloads);
    let workers = workers.max(1);
    let total = (*queues as usize).max(workers);
    let mut per: Vec<Vec<Tap>> = (0..workers).map(|_| Vec::new()).collect();
    for q in 0..total {
        per[q % workers].push(Tap::open(&p.name, opts).map_err(|e| perr(e.to_string()))?);
    }
    let tunnel_mtu = default_tenant_mtu(underlay_mtu, ports);
    let mtu = mtu.unwrap_or(tunnel_mtu).to_string();
    let ip = |args: &[&str]| -> Result<(), StartError> {
        let r = match ns {
            Some(n) => netns::ip(n, args),
            None => netns::run(&[&["ip"][..], args].concat()),
        };
        r.map(|_| ()).map_err(|e| perr(e.to_string()))
    };
    if let Some(n) = ns {
        netns::run(&["ip", "link", "set", &p.name, "netns", n]).map_err(|e| perr(e.to_string()))?;
    }
    ip(&["link", "set", &p.name, "mtu", &mtu])?;
    if let Some(a) = address {
        ip(&["addr", "add", a, "dev", &p.name])?;
    }
    ip(&["link", "set", &p.name, "up"])?;
    Ok(per)
}

/// The virtio-net header for a frame written to a tenant TAP: a
/// super-frame's segmentation, or a checksum left partial.
fn tap_vnet_header(frame: &[u8], gso: Option<Gso>) -> Result<virtio_net::Repr, &'static str> {
    let Some(g) = gso else {
        return Ok(match partial_checksum(frame) {
            Some((start, offset)) => virtio_net::Repr {
                flags: virtio_net::F_NEEDS_CSUM,
                csum_start: start,
                csum_offset: offset,
                ..virtio_net::Repr::NONE
            },
            None => virtio_net::Repr::NONE,
        });
    };
    let l = tunlab_wire::gso::TcpLayout::parse(frame)?;
    Ok(virtio_net::Repr {
        // A tenant's partial checksum stays partial; a joined frame's is
        // complete, and the receiving tenant's kernel checks it.
        flags: if g.partial {
            virtio_net::F_NEEDS_CSUM
        } else {
            0
        },
        gso_type: if l.v6 {
            virtio_net::GsoType::TcpV6
        } else {
            virtio_net::GsoType::TcpV4
        },
        gso_ecn: false,
        hdr_len: l.hdr_len as u16,
        gso_size: g.mss,
        csum_start: l.l4 as u16,
        csum_offset: 16,
    })
}

/// The outer TCP source port of an STT frame: from the inner flow's hash,
/// so that receivers can spread flows (RSS) as with UDP tunnels.
/// Which of `n` source-port sockets carries a frame's flow.
fn source_index(frame: &[u8], n: usize) -> u8 {
    if n == 0 {
        return 0;
    }
    let h = tunlab_wire::flowhash::hash_frame(frame) as u64;
    ((h * n as u64) >> 32) as u8
}

fn stt_source_port(frame: &[u8]) -> u16 {
    tunlab_wire::flowhash::source_port(tunlab_wire::flowhash::hash_frame(frame), 49152, 65535)
}

/// A received STT frame that says its TCP checksum is partial and gives
/// a segment size is a super-frame: it goes on as one (its checksum
/// partial, as a virtio-net NEEDS_CSUM header says to a tenant).
fn stt_gso(stt_hdr: &[u8]) -> Option<Gso> {
    let h = stt::Packet::new_checked(stt_hdr).ok()?;
    let want = stt::flags::CSUM_PARTIAL | stt::flags::TCP;
    (h.flags() & want == want && h.mss() > 0).then_some(Gso {
        mss: h.mss(),
        partial: true,
    })
}

/// The interface and MAC of `ip` in `/proc/net/arp`'s text, if the entry
/// is complete (flags 0x2).
fn neighbour(arp: &str, ip: std::net::Ipv4Addr) -> Option<(String, [u8; 6])> {
    let want = ip.to_string();
    arp.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let flags = u32::from_str_radix(f.get(2)?.trim_start_matches("0x"), 16).ok()?;
        (f.len() >= 6 && f[0] == want && flags & 2 != 0)
            .then(|| Some((f[5].to_string(), parse_mac(f[3])?)))
            .flatten()
    })
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut m {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

/// The Geneve options a frame leaving through a `kind` port carries: one
/// per `tun_metadataN` the flow set, as the TLV map says.
pub(crate) fn geneve_options(kind: TunnelKind, tlv: &TlvMap, tun: &TunnelSet) -> OptionsBuf {
    let mut opts = OptionsBuf::new();
    if kind == TunnelKind::Geneve {
        for (n, v) in tun.metadata.iter().enumerate() {
            if let (Some(v), Some((class, typ, _))) = (v, tlv.option(n)) {
                let _ = opts.push(OptionRepr {
                    class,
                    opt_type: OptType(typ),
                    data: &v.to_be_bytes(),
                });
            }
        }
    }
    opts
}

/// Where a tunnel port sends a frame and with which key: the port's own
/// settings, or what the flow set (`set_field:...->tun_dst`, `tun_id`).
pub(crate) fn remote_and_key(cfg: &TunnelPort, tun: &TunnelSet) -> Option<(IpAddr, u64)> {
    let remote = match (cfg.remote_ip, tun.dst) {
        (FromFlow::Fixed(ip), _) => ip,
        (FromFlow::Flow, Some(ip)) => ip,
        (FromFlow::Flow, None) => return None,
    };
    let key = match (cfg.key, tun.id) {
        (_, Some(id)) => id,
        (FromFlow::Fixed(k), None) => k,
        (FromFlow::Flow, None) => 0,
    };
    Some((remote, key))
}

/// The outer TCP header STT segments carry (no options).
const fn tcp_len() -> usize {
    20
}

trait IntoSocket {
    fn into_socket(self, port: u16) -> SocketAddr;
}

impl IntoSocket for IpAddr {
    fn into_socket(self, port: u16) -> SocketAddr {
        SocketAddr::new(self, port)
    }
}

/// The default tenant MTU: the underlay MTU minus the largest tunnel
/// overhead among the node's tunnel ports (outer IP, UDP and tunnel header,
/// plus the inner Ethernet header the tenant MTU does not count; for QinQ
/// the 4-byte S-tag, which a packet socket does not let past the MTU).
pub fn default_tenant_mtu(underlay_mtu: u16, ports: &[Port]) -> u16 {
    let mut worst = 0usize;
    for p in ports {
        if let PortKind::QinQ { .. } = &p.kind {
            worst = worst.max(vlan::TAG_LEN);
        }
        if let PortKind::Tunnel(t) = &p.kind {
            let ip = if t.local_ip.is_ipv4() { 20 } else { 40 };
            let hdr = match t.kind {
                TunnelKind::Geneve => 8 + 8 + 8, // UDP, Geneve, one 4-byte option
                TunnelKind::Vxlan => 8 + 8,
                TunnelKind::Gre => 4 + 4 + if t.csum { 4 } else { 0 },
                TunnelKind::Nvgre => 8,
                TunnelKind::Stt => 20 + 18,
            };
            worst = worst.max(ip + hdr + 14);
        }
    }
    underlay_mtu.saturating_sub(worst as u16)
}

/// Build the ICMP error for a frame too big for the tunnel: IPv4 with DF
/// gets "fragmentation needed" (RFC 1191), IPv6 "packet too big"
/// (RFC 4443); the reply is addressed back to the sender from the
/// original destination. `None` for anything else (no DF, not IP, or an
/// ICMP error itself).
fn icmp_too_big(frame: &[u8], mtu: u16) -> Option<Vec<u8>> {
    use tunlab_wire::ethernet::{EtherType, MacAddr};
    use tunlab_wire::ipv4::IpProtocol;
    use tunlab_wire::{icmp, ipv4, ipv6};
    if frame.len() < 14 {
        return None;
    }
    let (dst_mac, src_mac) = (
        MacAddr::from_bytes(&frame[6..12]),
        MacAddr::from_bytes(&frame[0..6]),
    );
    let et = u16::from_be_bytes([frame[12], frame[13]]);
    let ip = &frame[14..];
    let mut out = vec![0u8; 14];
    match et {
        0x0800 => {
            let p = ipv4::Packet::new_checked(ip).ok()?;
            if !p.dont_frag()
                || (p.protocol() == IpProtocol::Icmp
                    && p.payload().first().is_some_and(|t| *t != 8 && *t != 0))
            {
                return None;
            }
            let mut msg = vec![0u8; icmp::HEADER_LEN + icmp::V4_QUOTE_MAX];
            let n = icmp::emit_frag_needed(p.packet(), mtu, &mut msg).ok()?;
            let mut hdr = [0u8; 20];
            ipv4::Repr {
                src: p.dst(),
                dst: p.src(),
                protocol: IpProtocol::Icmp,
                payload_len: n,
                tos: 0,
                ident: 0,
                dont_frag: false,
                ttl: 64,
            }
            .emit(&mut hdr);
            tunlab_wire::ethernet::Repr {
                dst: dst_mac,
                src: src_mac,
                ethertype: EtherType::Ipv4,
            }
            .emit(&mut out);
            out.extend_from_slice(&hdr);
            out.extend_from_slice(&msg[..n]);
        }
        0x86dd => {
            let p = ipv6::Packet::new_checked(ip).ok()?;
            if p.next_header() == IpProtocol::Icmpv6
                && p.payload().first().is_some_and(|t| *t < 128)
            {
                return None;
            }
            let whole = &ip[..ipv6::HEADER_LEN + p.payload_len() as usize];
            let len = icmp::ptb_len(whole.len());
            let pseudo = checksum::pseudo_v6(p.dst().octets(), p.src().octets(), 58, len as u32);
            let mut msg = vec![0u8; len];
            icmp::emit_packet_too_big(whole, mtu as u32, pseudo, &mut msg).ok()?;
            let mut hdr = [0u8; 40];
            ipv6::Repr {
                src: p.dst(),
                dst: p.src(),
                next_header: IpProtocol::Icmpv6,
                payload_len: len,
                traffic_class: 0,
                flow_label: 0,
                hop_limit: 64,
            }
            .emit(&mut hdr);
            tunlab_wire::ethernet::Repr {
                dst: dst_mac,
                src: src_mac,
                ethertype: EtherType::Ipv6,
            }
            .emit(&mut out);
            out.extend_from_slice(&hdr);
            out.extend_from_slice(&msg);
        }
        _ => return None,
    }
    Some(out)
}

/// The frame without its 802.1Q/802.1ad tags, and how many bytes of tags
/// it had.
fn untagged(frame: &[u8]) -> (usize, Vec<u8>) {
    let mut at = 12;
    while frame.len() >= at + 4
        && matches!(
            u16::from_be_bytes([frame[at], frame[at + 1]]),
            0x8100 | 0x88a8
        )
    {
        at += 4;
    }
    let mut out = frame[..12.min(frame.len())].to_vec();
    out.extend_from_slice(frame.get(at..).unwrap_or(&[]));
    (at - 12, out)
}

/// The outermost tag's TCI, or 0 if untagged (a new tag inherits it).
fn vlan_tci(frame: &[u8]) -> u16 {
    if frame.len() >= 16 && matches!(u16::from_be_bytes([frame[12], frame[13]]), 0x8100 | 0x88a8) {
        u16::from_be_bytes([frame[14], frame[15]])
    } else {
        0
    }
}

fn set_tci(frame: &mut [u8], f: impl Fn(u16) -> u16) {
    if frame.len() >= 16 && matches!(u16::from_be_bytes([frame[12], frame[13]]), 0x8100 | 0x88a8) {
        let t = f(u16::from_be_bytes([frame[14], frame[15]]));
        frame[14..16].copy_from_slice(&t.to_be_bytes());
    }
}

/// Is this frame's TCP or UDP checksum left partial, as a Linux sender
/// leaves it for offload (the field holds the folded pseudo-header sum)?
/// Such frames arrive through tunnels from kernels whose packets crossed
/// only veths, where no NIC ever finished the checksum. Returns where the
/// checksum starts and where it is stored, for a virtio-net NEEDS_CSUM
/// header so that the receiving kernel finishes it. A complete checksum
/// that happens to equal the pseudo-header sum (1 in 65536) is also marked;
/// for local delivery the kernel then trusts it, as it would any partial one.
fn partial_checksum(frame: &[u8]) -> Option<(u16, u16)> {
    if frame.len() < 14 {
        return None;
    }
    let mut et = u16::from_be_bytes([frame[12], frame[13]]);
    let mut at = 14;
    while matches!(et, 0x8100 | 0x88a8) && frame.len() >= at + 4 {
        et = u16::from_be_bytes([frame[at + 2], frame[at + 3]]);
        at += 4;
    }
    let ip = &frame[at..];
    let (l4, proto, pseudo_of) = match et {
        0x0800 if ip.len() >= 20 => {
            let ihl = ((ip[0] & 0x0f) as usize) * 4;
            let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0
                || ihl < 20
                || total < ihl
                || total > ip.len()
            {
                return None; // fragments and odd headers: leave as they are
            }
            let len = total - ihl;
            let src = [ip[12], ip[13], ip[14], ip[15]];
            let dst = [ip[16], ip[17], ip[18], ip[19]];
            (
                at + ihl,
                ip[9],
                checksum::pseudo_v4(src, dst, ip[9], len as u16),
            )
        }
        0x86dd if ip.len() >= 40 => {
            let len = u16::from_be_bytes([ip[4], ip[5]]) as u32;
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&ip[8..24]);
            dst.copy_from_slice(&ip[24..40]);
            (at + 40, ip[6], checksum::pseudo_v6(src, dst, ip[6], len))
        }
        _ => return None,
    };
    let offset = match proto {
        6 => 16,
        17 => 6,
        _ => return None,
    };
    if frame.len() < l4 + offset + 2 {
        return None;
    }
    let field = u16::from_be_bytes([frame[l4 + offset], frame[l4 + offset + 1]]);
    if proto == 17 && field == 0 {
        return None; // no UDP checksum at all
    }
    (field == checksum::fold(pseudo_of)).then_some((l4 as u16, offset as u16))
}

/// Complete a checksum the kernel left partial (virtio-net NEEDS_CSUM):
/// the field already holds the pseudo-header sum; fold in the bytes from
/// `start`. Returns false if the offsets do not fit the frame.
fn finish_partial_csum(frame: &mut [u8], start: usize, offset: usize) -> bool {
    let at = start + offset;
    if start > frame.len() || at + 2 > frame.len() {
        return false;
    }
    let c = checksum::finish(checksum::sum(0, &frame[start..]));
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbour_table_is_read() {
        let arp =
            "IP address       HW type     Flags       HW address            Mask     Device\n\
                   172.30.0.2       0x1         0x2         aa:bb:cc:00:11:22     *        under\n\
                   172.30.0.3       0x1         0x0         00:00:00:00:00:00     *        under\n";
        assert_eq!(
            neighbour(arp, "172.30.0.2".parse().unwrap()),
            Some(("under".to_string(), [0xaa, 0xbb, 0xcc, 0, 0x11, 0x22]))
        );
        assert_eq!(
            neighbour(arp, "172.30.0.3".parse().unwrap()),
            None,
            "incomplete"
        );
        assert_eq!(neighbour(arp, "172.30.0.9".parse().unwrap()), None);
        assert_eq!(parse_mac("aa:bb:cc:00:11"), None);
        assert_eq!(parse_mac("aa:bb:cc:00:11:22:33"), None);
    }

    #[test]
    fn partial_checksum_is_completed() {
        // A UDP header over 4 bytes of payload with the pseudo-header sum
        // pre-filled, as the kernel leaves it: the result must verify.
        let src = [10, 0, 0, 1];
        let dst = [10, 0, 0, 2];
        let mut seg = vec![0x13, 0x88, 0x17, 0x70, 0, 12, 0, 0, 1, 2, 3, 4];
        let pseudo = checksum::fold(checksum::pseudo_v4(src, dst, 17, 12));
        seg[6..8].copy_from_slice(&pseudo.to_be_bytes());
        assert!(finish_partial_csum(&mut seg, 0, 6));
        assert!(tunlab_wire::udp::Packet::new_checked(&seg[..])
            .unwrap()
            .verify_checksum(checksum::pseudo_v4(src, dst, 17, 12)));
        assert!(!finish_partial_csum(&mut seg, 20, 6));
    }

    #[test]
    fn partial_checksums_are_recognised() {
        // Ethernet + IPv4 + UDP(4 bytes of payload).
        let mut f = vec![0u8; 14 + 20 + 12];
        f[12] = 0x08;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&32u16.to_be_bytes());
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[38..40].copy_from_slice(&12u16.to_be_bytes());
        f[42..46].copy_from_slice(&[1, 2, 3, 4]);
        let pseudo = checksum::fold(checksum::pseudo_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, 12));
        f[40..42].copy_from_slice(&pseudo.to_be_bytes());
        assert_eq!(partial_checksum(&f), Some((34, 6)));
        // Finished, the checksum is no longer taken for partial.
        assert!(finish_partial_csum(&mut f, 34, 6));
        assert_eq!(partial_checksum(&f), None);
        f[40..42].copy_from_slice(&[0, 0]);
        assert_eq!(partial_checksum(&f), None, "UDP without checksum");
        for n in 0..f.len() {
            let _ = partial_checksum(&f[..n]);
        }
    }

    #[test]
    fn workers_counters_are_summed_and_queues_dealt_back() {
        let worker = |q: Vec<u64>, rx: u64, drop: u64| NodeStats {
            ports: vec![PortSnapshot {
                name: "tap0".into(),
                ofport: 1,
                kind: "tap",
                stats: PortStats {
                    rx_packets: rx,
                    ..PortStats::default()
                },
                queue_rx: q,
            }],
            drops: [("too_big", drop)].into_iter().collect(),
            outer_fragmented: HashMap::new(),
            cache: (rx, 1),
        };
        // Three queues over two workers: worker 0 holds queues 0 and 2.
        let t = NodeStats::sum(&[worker(vec![10, 30], 40, 1), worker(vec![20], 20, 2)]);
        assert_eq!(t.ports[0].queue_rx, vec![10, 20, 30]);
        assert_eq!(t.ports[0].stats.rx_packets, 60);
        assert_eq!(t.drops["too_big"], 3);
        assert_eq!(t.cache, (60, 2));
        assert!(NodeStats::sum(&[]).ports.is_empty());
    }

    #[test]
    fn too_big_replies() {
        // IPv4 UDP with DF, 1451 bytes of IP.
        let mut f = vec![0u8; 14 + 1451];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12] = 0x08;
        let ip = tunlab_wire::ipv4::Repr {
            src: "192.168.7.1".parse().unwrap(),
            dst: "192.168.7.2".parse().unwrap(),
            protocol: tunlab_wire::ipv4::IpProtocol::Udp,
            payload_len: 1431,
            tos: 0,
            ident: 9,
            dont_frag: true,
            ttl: 64,
        };
        ip.emit(&mut f[14..]);
        let r = icmp_too_big(&f, 1450).unwrap();
        assert_eq!(&r[0..6], &f[6..12], "back to the sender's MAC");
        let p = tunlab_wire::ipv4::Packet::new_checked(&r[14..]).unwrap();
        assert_eq!(
            (p.src().to_string(), p.dst().to_string()),
            ("192.168.7.2".into(), "192.168.7.1".into())
        );
        assert!(p.verify_checksum());
        let m = tunlab_wire::icmp::Packet::new_checked(p.payload()).unwrap();
        assert_eq!((m.msg_type(), m.code(), m.v4_next_hop_mtu()), (3, 4, 1450));
        assert!(m.verify_checksum_v4());
        // Without DF: no ICMP.
        f[20] = 0;
        assert!(icmp_too_big(&f, 1450).is_none());
    }

    #[test]
    fn tenant_mtu_leaves_room_for_the_tunnel() {
        let text = "[switch]\nname='x'\n[[port]]\nname='g'\nofport=1\ntype='geneve'\nlocal_ip='10.0.0.1'\nremote_ip='flow'\n";
        let cfg = crate::config::parse(text, "t").unwrap();
        // 1500 - (IPv4 20 + UDP 8 + Geneve 8 + option 8 + inner Ethernet 14)
        assert_eq!(default_tenant_mtu(cfg.underlay_mtu, &cfg.ports), 1442);
    }
}
