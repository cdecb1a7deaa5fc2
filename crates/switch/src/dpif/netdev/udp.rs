//! Geneve and VXLAN ports over UDP sockets (IPv4 and IPv6 underlay).
//! Each port sends from several source sockets, one per inner flow hash,
//! so the outer source port spreads flows; TCP super-frames leave through
//! UDP GSO and received segments are joined (software GRO).

use super::{port_error, Gso, IntoSocket, Netdev, Target, HEADROOM};
use crate::config::{Port, TunnelPort};
use crate::dpif::provider::Upcall;
use crate::port::{geneve_options, StartError};
use crate::profile::Stage;
use std::net::SocketAddr;
use tunlab_dp::TunnelSet;
use tunlab_netio::Underlay;
use tunlab_wire::gso::TcpSuper;
use tunlab_wire::tunnel::{self, TunnelKind};
use tunlab_wire::{geneve, PacketBuf, Vni};

/// Source ports (sockets) per Geneve/VXLAN port and worker.
const SOURCE_PORTS: usize = 8;
/// Segments per UDP GSO send, and the room for one segment's tunnel and
/// inner headers in the header arena.
pub(super) const GSO_BATCH: usize = tunlab_netio::udp::GSO_MAX_SEGMENTS;
pub(super) const GSO_HDR_ROOM: usize = 8 + geneve::MAX_OPTIONS_LEN + tunlab_wire::gso::MAX_HDR;

impl Netdev {
    /// A Geneve or VXLAN port's socket: the one bound to its local address
    /// and port if another port has it (same tunnel type and checksum
    /// setting), else a new one with its source-port sockets.
    pub(super) fn open_udp(&mut self, p: &Port, t: &TunnelPort) -> Result<usize, StartError> {
        let perr = port_error(p);
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
        Ok(sock)
    }

    /// Datagram `m` of socket `si`'s batch (several, if the kernel's GRO
    /// joined them): each is decapsulated and, with offloads on, TCP
    /// segments of one flow are joined (software GRO) and go on as one
    /// frame; anything else goes on as it is, after what was joined before
    /// it.
    pub(super) fn receive_udp(
        &mut self,
        of: &mut dyn Upcall,
        si: usize,
        m: usize,
        frame: &mut PacketBuf<Vec<u8>>,
    ) {
        let (kind, local, known) = (self.socks[si].kind, self.socks[si].local, self.tlv);
        let Some((data, stride, from)) = self.socks[si].rx.get(m) else {
            return;
        };
        let Some(from) = from else { return };
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
            let Some(in_port) = self.tunnel_in_port(si, from.ip(), Some(self.meta.tun_id)) else {
                self.drop("unknown_remote");
                continue;
            };
            let pi = self.by_ofport[&in_port];
            self.ports[pi].stats.rx_packets += 1;
            self.ports[pi].stats.rx_frames += 1;
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
                self.flush_joined(of);
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
            self.forward(of, in_port, frame, true, None);
        }
    }

    /// Send on the frame joined from received segments, if any.
    pub(super) fn flush_joined(&mut self, of: &mut dyn Upcall) {
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
        self.forward(of, in_port, &mut pb, true, gso);
        self.meta = current;
        self.gro.restore(pb.into_inner());
    }

    /// Queue a frame for a Geneve or VXLAN port, with the options the flow
    /// set; a frame too big for the underlay gets the PMTU answer.
    pub(super) fn output_udp(
        &mut self,
        to: &Target,
        tun: &TunnelSet,
        in_port: u32,
        frame: &mut PacketBuf<Vec<u8>>,
    ) {
        let Target {
            pi,
            sock,
            cfg,
            remote,
            key,
        } = *to;
        let opts = geneve_options(cfg.kind, &self.tlv, tun);
        // Path MTU: outer IP + UDP + tunnel header + the frame must
        // fit the underlay.
        let outer = if remote.is_ipv4() { 20 } else { 40 } + 8 + 8 + opts.len();
        if outer + frame.len() > self.underlay_mtu {
            let room = self.underlay_mtu.saturating_sub(outer + 14);
            if self.too_big(in_port, frame, room, cfg.kind) {
                return;
            }
        }
        // The tunnel header is written in place in the queued datagram.
        let vni = Vni::from_masked(key as u32);
        let from = source_index(frame.data(), self.socks[sock].srcs.len());
        let s = &mut self.socks[sock];
        let buf = s.queue(remote, cfg.dst_port, from);
        buf.resize(8 + opts.len(), 0);
        match tunnel::udp_tunnel_header(cfg.kind, vni, opts.as_bytes(), buf) {
            Ok(n) => {
                buf.truncate(n);
                buf.extend_from_slice(frame.data());
                self.ports[pi].stats.tx_packets += 1;
                self.ports[pi].stats.tx_frames += 1;
                self.ports[pi].stats.tx_bytes += frame.len() as u64;
            }
            Err(_) => {
                s.tx_used -= 1;
                self.ports[pi].stats.tx_errors += 1;
            }
        }
    }
    /// Send a super-frame through a Geneve or VXLAN port as UDP GSO sends
    /// of up to 64 datagrams each: per segment, the tunnel header, the
    /// segment's own inner headers (written here) and its payload (where
    /// the tenant put it), handed to the kernel as one iovec. Returns
    /// false, having sent nothing, if the frame needs the per-segment
    /// path (no destination, not plain TCP, or segments too big for the
    /// underlay, which that path answers with ICMP or fragments).
    pub(super) fn output_udp_gso(
        &mut self,
        pi: usize,
        frame: &PacketBuf<Vec<u8>>,
        tun: &TunnelSet,
        g: Gso,
    ) -> bool {
        let Some(Target {
            sock: si,
            cfg,
            remote,
            key,
            ..
        }) = self.tunnel_target(pi, tun)
        else {
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
        // One super-frame written, through UDP GSO.
        p.stats.tx_frames += u64::from(sent > 0);
        p.stats.tx_bytes += (frame.len() as u64).saturating_sub(hl as u64 * lost);
        true
    }
}

/// Which of `n` source-port sockets carries a frame's flow.
fn source_index(frame: &[u8], n: usize) -> u8 {
    if n == 0 {
        return 0;
    }
    let h = tunlab_wire::flowhash::hash_frame(frame) as u64;
    ((h * n as u64) >> 32) as u8
}
