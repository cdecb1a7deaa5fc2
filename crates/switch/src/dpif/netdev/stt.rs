//! STT ports (draft-davie-stt): a raw TCP socket per local address and
//! port (IPv4 underlay), frames reassembled from their segments, and TCP
//! super-frames sent whole through a packet socket on the underlay
//! interface so that the kernel segments them as TCP. An nftables rule
//! keeps the host's TCP from resetting STT segments.

use super::{port_error, segments, Gso, Netdev, Target, HEADROOM};
use crate::config::{Port, TunnelPort};
use crate::dpif::provider::Upcall;
use crate::port::StartError;
use crate::profile::Stage;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;
use tunlab_dp::TunnelSet;
use tunlab_netio::{PacketSocket, RstGuard, Underlay};
use tunlab_wire::stt::{self, Reassembled, Reassembler};
use tunlab_wire::tunnel::{self, Decap, PopConfig, TunnelKind};
use tunlab_wire::{virtio_net, vlan, PacketBuf};

/// STT frames reassembled at once (64 KiB each), and how long a partial
/// frame may wait for its other segments.
const STT_REASM_SLOTS: usize = 8;
const STT_REASM_TIMEOUT_NS: u64 = 1_000_000_000;

/// Where STT super-frames to one remote leave: the underlay interface's
/// packet socket and the two MAC addresses.
pub(super) struct SttTso {
    remote: std::net::Ipv4Addr,
    sock: PacketSocket,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
}

impl Netdev {
    /// The raw TCP socket on the port's local address and STT port, opened
    /// by the first STT port on it with its reset guard and reassembler.
    pub(super) fn open_stt(&mut self, p: &Port, t: &TunnelPort) -> Result<usize, StartError> {
        let perr = port_error(p);
        let IpAddr::V4(local4) = t.local_ip else {
            return Err(perr(
                "STT over an IPv6 underlay is not built yet; use an IPv4 local_ip".into(),
            ));
        };
        let local = SocketAddr::new(t.local_ip, t.dst_port);
        let sock = match self.socket_at(local, TunnelKind::Stt) {
            Some(i) => i,
            None => {
                let under = Underlay::raw_ipv4(local4, 6)
                    .map_err(|e| perr(format!("cannot open a raw TCP socket on {local4}: {e}")))?;
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
                self.share_by_cpu(p, "raw STT", |g, m| under.share_by_cpu(g, m))?;
                self.add_socket(TunnelKind::Stt, true, local, under)
            }
        };
        Ok(sock)
    }

    /// the STT port (the socket also sees the host's other TCP). A whole
    /// frame goes on at once; a segment waits in the reassembler for the
    /// rest of its frame.
    pub(super) fn receive_stt(
        &mut self,
        of: &mut dyn Upcall,
        si: usize,
        m: usize,
        frame: &mut PacketBuf<Vec<u8>>,
    ) {
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
        let Some(in_port) = self.tunnel_in_port(si, src, None) else {
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
        // Ports to one remote that differ only in context ID: it decides.
        let in_port = self.keyed_in_port(si, src, in_port);
        let pi = self.by_ofport[&in_port];
        self.ports[pi].stats.rx_packets += segments(frame.data(), gso);
        self.ports[pi].stats.rx_frames += 1;
        self.ports[pi].stats.rx_bytes += frame.len() as u64;
        self.forward(of, in_port, frame, true, gso);
    }

    /// Send a tenant frame as one STT frame: in one TCP segment if it fits
    /// the underlay, else (no DF) in segments that the receiver reassembles
    /// (§ 3.3); a DF or IPv6 packet too big gets the ICMP error instead.
    pub(super) fn output_stt(&mut self, to: &Target, in_port: u32, frame: &mut PacketBuf<Vec<u8>>) {
        let Target {
            pi,
            sock: si,
            cfg,
            remote,
            key,
        } = *to;
        let local = cfg.local_ip;
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
            let buf = s.queue(remote, 0, 0);
            buf.extend_from_slice(&h);
            buf.extend_from_slice(part);
        }
        let _ = frame.pull(stt::HEADER_LEN);
        let p = &mut self.ports[pi];
        if ok {
            p.stats.tx_packets += 1;
            p.stats.tx_frames += 1;
            p.stats.tx_bytes += tenant_len;
        } else {
            p.stats.tx_errors += 1;
        }
    }

    /// Send a super-frame through an STT port whole: one STT frame (up to
    /// 64 KB, checksum partial, the segment size in the STT header) behind
    /// one outer TCP header, written to the underlay interface's packet
    /// socket with a virtio-net header that asks the kernel to segment it
    /// as TCP. Returns false, having sent nothing, when the per-segment
    /// path must do (IPv6, no partial checksum, remote not yet in the
    /// neighbour table, frame too long).
    pub(super) fn output_stt_tso(
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
                p.stats.tx_packets += segments(frame.data(), Some(g));
                p.stats.tx_frames += 1;
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

/// The outer TCP header STT segments carry (no options).
const fn tcp_len() -> usize {
    20
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
}
