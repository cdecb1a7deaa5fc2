//! Tenant TAP ports: created with their queues (one or more per worker)
//! and moved into the tenant's namespace; frames come and go with a
//! virtio-net header, so TCP super-frames and partial checksums cross
//! whole. The kernel datapath's upcall TAPs are read the same way.

use super::{port_error, segments, Gso, Io, Netdev, FRAME_MAX, HEADROOM};
use crate::config::{Port, PortKind};
use crate::dpif::provider::Upcall;
use crate::port::{default_tenant_mtu, tenant_tap_options, StartError};
use crate::profile::Stage;
use tunlab_netio::tap::VNET_HDR_LEN;
use tunlab_netio::{netns, Tap};
use tunlab_wire::{virtio_net, PacketBuf};

impl Netdev {
    /// Frames from a tenant (or, on the kernel datapath, its misses):
    /// a TCP super-frame stays whole, a partial checksum is completed.
    pub(super) fn drain_tap(
        &mut self,
        of: &mut dyn Upcall,
        pi: usize,
        q: usize,
    ) -> std::io::Result<usize> {
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
            let gso = from_tap(&mut buf[at..at + len]);
            // `recv` wrote `len` bytes from `at`, and `len` covers the
            // virtio-net header, so the frame's range is within `buf`.
            let (gso, mut frame) = match (gso, PacketBuf::with_range(buf, HEADROOM, at + len)) {
                (Ok(gso), Some(frame)) => (gso, frame),
                (Err(why), Some(frame)) => {
                    self.drop(why);
                    self.frame = frame;
                    continue;
                }
                (_, None) => {
                    self.drop("short_frame");
                    self.frame = PacketBuf::new(vec![0u8; HEADROOM + FRAME_MAX + 64], HEADROOM);
                    continue;
                }
            };
            let ofport = self.ports[pi].ofport;
            self.ports[pi].stats.rx_packets += segments(frame.data(), gso);
            self.ports[pi].stats.rx_frames += 1;
            self.ports[pi].stats.rx_bytes += frame.len() as u64;
            if self.ports[pi].police.is_some() {
                let (now, len) = (self.now(), frame.len() as u64);
                if !self.ports[pi]
                    .police
                    .as_mut()
                    .is_some_and(|b| b.take(len, now))
                {
                    self.drop("policed");
                    self.frame = frame;
                    continue;
                }
            }
            self.forward(of, ofport, &mut frame, false, gso);
            self.frame = frame;
        }
        Ok(n)
    }

    /// Write a frame to a tenant TAP with its virtio-net header (a
    /// super-frame's segmentation, or a checksum left partial).
    pub(super) fn output_tap(
        &mut self,
        pi: usize,
        frame: &mut PacketBuf<Vec<u8>>,
        gso: Option<Gso>,
    ) {
        let vh = match tap_vnet_header(frame.data(), gso) {
            Ok(vh) => vh,
            Err(why) => {
                self.drop(why);
                return;
            }
        };
        let p = &mut self.ports[pi];
        let Io::Tap(qs) = &p.io else { return };
        // Any queue reaches the tenant; one per flow keeps order.
        let t = match qs.len() {
            1 => &qs[0],
            n => &qs[tunlab_wire::flowhash::hash_frame(frame.data()) as usize % n],
        };
        let (len, segs) = (frame.len(), segments(frame.data(), gso));
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
            p.stats.tx_packets += segs;
            p.stats.tx_frames += 1;
            p.stats.tx_bytes += len as u64;
        } else {
            p.stats.tx_errors += 1;
        }
    }
}

/// Create a TAP port's device with its queues for `workers` workers
/// (at least one queue each; the kernel spreads the tenant's flows over
/// the queues by hash), then move it to its namespace, set its MTU and
/// address and bring it up. Every queue must exist before the move: the
/// device can only be opened by name in this namespace. Returns the
/// queues per worker, worker `i` holding queues `i, i + workers, ...`.
pub fn open_tap(
    p: &Port,
    offloads: bool,
    underlay_mtu: u16,
    ports: &[Port],
    workers: usize,
) -> Result<Vec<Vec<Tap>>, StartError> {
    let perr = port_error(p);
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

/// What the switch makes of bytes read from a TAP (a tenant's, or the
/// kernel datapath's upcall TAP): the virtio-net header in front says
/// whether the frame behind it is a TCP super-frame, which goes on whole
/// (its checksum partial, each segment gets its own when it is cut), or
/// carries a checksum left partial, which is completed here. An error is
/// the drop reason.
pub fn from_tap(buf: &mut [u8]) -> Result<Option<Gso>, &'static str> {
    if buf.len() < VNET_HDR_LEN {
        return Err("short_frame");
    }
    let vh = match virtio_net::Header::new_checked(&buf[..]) {
        Ok(h) => virtio_net::Repr::parse(&h),
        Err(_) => return Err("short_frame"),
    };
    let frame = &mut buf[VNET_HDR_LEN..];
    match vh.gso_type {
        virtio_net::GsoType::TcpV4 | virtio_net::GsoType::TcpV6 => Ok(Some(Gso {
            mss: vh.gso_size,
            partial: vh.needs_csum(),
        })),
        virtio_net::GsoType::None => {
            if vh.needs_csum()
                && !virtio_net::complete_csum(
                    frame,
                    vh.csum_start as usize,
                    vh.csum_offset as usize,
                )
            {
                return Err("bad_csum_offsets");
            }
            Ok(None)
        }
        // UDP segmentation was not offered to the TAP.
        _ => Err("unexpected_gso"),
    }
}

/// Fuzz body (`fuzz/fuzz_targets/upcall.rs`): any bytes as read from an
/// upcall TAP go through [`from_tap`] and, when kept, the flow key
/// extraction the slow path runs next and, for a super-frame, the cut
/// into segments. Nothing may panic; a super-frame keeps the header's
/// segment size.
pub fn fuzz_upcall(data: &[u8]) {
    let mut buf = data.to_vec();
    let Ok(gso) = from_tap(&mut buf) else {
        return;
    };
    let frame = &buf[VNET_HDR_LEN..];
    let mut key = tunlab_dp::FlowKey::default();
    tunlab_dp::extract(frame, 1, &mut key);
    if let Some(g) = gso {
        assert_eq!(
            Some(g.mss),
            data.get(4..6).map(|b| u16::from_le_bytes([b[0], b[1]]))
        );
        if let Ok(sup) = tunlab_wire::gso::TcpSuper::parse(frame, g.mss) {
            let mut h = [0u8; tunlab_wire::gso::MAX_HDR];
            for i in 0..sup.segments().min(64) {
                let r = sup.segment(frame, i, &mut h);
                assert!(r.end <= frame.len());
            }
        }
    }
}

/// The virtio-net header for a frame written to a tenant TAP: a
/// super-frame's segmentation, or a checksum left partial.
fn tap_vnet_header(frame: &[u8], gso: Option<Gso>) -> Result<virtio_net::Repr, &'static str> {
    let Some(g) = gso else {
        return Ok(match virtio_net::partial_csum(frame) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet + an IPv4 header (10.0.0.1 to 10.0.0.2) for `payload_len`
    /// bytes of `protocol`.
    fn eth_ipv4(protocol: tunlab_wire::ipv4::IpProtocol, payload_len: usize) -> Vec<u8> {
        let mut b = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let ip = tunlab_wire::ipv4::Repr {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            protocol,
            payload_len,
            tos: 0,
            ident: 1,
            dont_frag: true,
            ttl: 64,
        };
        let mut h = [0u8; 20];
        ip.emit(&mut h);
        b.extend_from_slice(&h);
        b
    }

    /// A virtio-net header (12 bytes) in front of Ethernet + IPv4 + UDP
    /// with 4 bytes of payload, the UDP checksum field holding `csum`.
    fn udp_frame(vh: virtio_net::Repr, csum: u16) -> Vec<u8> {
        let mut b = vec![0u8; VNET_HDR_LEN];
        vh.emit(&mut b[..virtio_net::HEADER_LEN]);
        b.extend(eth_ipv4(tunlab_wire::ipv4::IpProtocol::Udp, 12));
        b.extend_from_slice(&[0x13, 0x88, 0x17, 0x70, 0, 12]);
        b.extend_from_slice(&csum.to_be_bytes());
        b.extend_from_slice(&[1, 2, 3, 4]);
        b
    }

    /// Ethernet + IPv4 + TCP (no options) with `payload` bytes.
    fn tcp_frame(payload: usize) -> Vec<u8> {
        let mut f = eth_ipv4(tunlab_wire::ipv4::IpProtocol::Tcp, 20 + payload);
        let mut tcp = [0u8; 20];
        tcp[12] = 5 << 4;
        tcp[13] = 0x10;
        f.extend_from_slice(&tcp);
        f.resize(f.len() + payload, 7);
        f
    }

    #[test]
    fn a_super_frame_counts_its_segments() {
        let gso = |mss| Some(Gso { mss, partial: true });
        // 3 full segments and a short one; exactly 2; none but the headers.
        assert_eq!(segments(&tcp_frame(3 * 1448 + 100), gso(1448)), 4);
        assert_eq!(segments(&tcp_frame(2 * 1000), gso(1000)), 2);
        assert_eq!(segments(&tcp_frame(0), gso(1448)), 1);
        // Not a super-frame, or not one that can be cut: one packet.
        assert_eq!(segments(&tcp_frame(5000), None), 1);
        assert_eq!(segments(&tcp_frame(5000), gso(0)), 1);
        assert_eq!(segments(&[0u8; 20], gso(1448)), 1);
    }

    #[test]
    fn what_comes_up_from_a_tap() {
        use tunlab_wire::checksum;
        let pseudo = checksum::pseudo_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, 12);
        let partial = virtio_net::Repr {
            flags: virtio_net::F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 6,
            ..virtio_net::Repr::NONE
        };
        // A partial checksum is completed where the header says.
        let mut b = udp_frame(partial, checksum::fold(pseudo));
        assert_eq!(from_tap(&mut b).unwrap(), None);
        let udp = tunlab_wire::udp::Packet::new_checked(&b[VNET_HDR_LEN + 34..]).unwrap();
        assert!(udp.verify_checksum(pseudo));
        // A TCP super-frame goes on whole with its segment size.
        let sup = virtio_net::Repr {
            gso_type: virtio_net::GsoType::TcpV4,
            gso_size: 1448,
            hdr_len: 54,
            ..partial
        };
        let g = from_tap(&mut udp_frame(sup, 0)).unwrap().unwrap();
        assert_eq!((g.mss, g.partial), (1448, true));
        // Offsets past the frame, UDP segmentation never offered, runts.
        let bad = virtio_net::Repr {
            csum_start: 60,
            ..partial
        };
        assert_eq!(from_tap(&mut udp_frame(bad, 0)), Err("bad_csum_offsets"));
        let ufo = virtio_net::Repr {
            gso_type: virtio_net::GsoType::Udp,
            ..partial
        };
        assert_eq!(from_tap(&mut udp_frame(ufo, 0)), Err("unexpected_gso"));
        for n in 0..VNET_HDR_LEN {
            assert_eq!(from_tap(&mut vec![0u8; n]), Err("short_frame"));
        }
    }
}
