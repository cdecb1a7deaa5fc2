//! The IP layers and what rides on them: IPv4 and IPv6 (super-frames and
//! jumbograms too), then UDP, TCP, GRE and ICMP, and the tunnels found by
//! port.

use super::{hex, icmp_note, ip_flags_note, tcp_flags_note, Layer, Step, Tunnel, Walk};
use tunlab_wire::ipv4::IpProtocol;
use tunlab_wire::{checksum, icmp, ipv4, ipv6, stt, tcp, udp};

impl Walk<'_> {
    pub(super) fn ipv4(&mut self, at: usize) -> Step {
        // A super-frame (BIG TCP, or GSO before segmentation) has total
        // length 0: its length is the capture's. The header is read with
        // its length field set to the header's own, so that the checked
        // parser takes it; the field and checksum shown are the frame's.
        let b = &self.frame[at..];
        let ihl = b.first().map_or(0, |v| usize::from(v & 0x0f) * 4);
        let super_frame = b.len() > ihl && ihl >= 20 && b[0] >> 4 == 4 && b[2..4] == [0, 0];
        let patched;
        let view = if super_frame {
            let mut h = b[..ihl].to_vec();
            h[2..4].copy_from_slice(&(ihl as u16).to_be_bytes());
            patched = h;
            &patched[..]
        } else {
            b
        };
        let p = ipv4::Packet::new_checked(view).map_err(|x| x.at(at))?;
        let checksum_ok = if super_frame {
            checksum::verify(&b[..ihl])
        } else {
            p.verify_checksum()
        };
        let total = if super_frame { 0 } else { p.total_len() };
        let mut l = Layer::new("IP", at);
        let flags =
            ((p.reserved_flag() as u8) << 2) | ((p.dont_frag() as u8) << 1) | p.more_frags() as u8;
        l.int("version", 4u8)
            .int("ihl", (p.header_len() / 4) as u8)
            .int("tos", p.tos())
            .note(format!("DSCP {}, ECN {}", p.dscp(), p.ecn()))
            .int("len", total);
        if super_frame {
            l.note(format!(
                "a super-frame (BIG TCP or GSO): {} bytes, as captured",
                b.len()
            ));
        }
        l.int("id", p.ident())
            .int("flags", flags)
            .note(ip_flags_note(flags))
            .int("frag", p.frag_offset() / 8)
            .note(format!("{} bytes", p.frag_offset()))
            .int("ttl", p.ttl())
            .int("proto", u8::from(p.protocol()))
            .note(p.protocol().name())
            .checksum("chksum", p.checksum(), Some(checksum_ok))
            .text("src", p.src())
            .text("dst", p.dst());
        if !p.options().is_empty() {
            l.text("options", hex(p.options()));
        }
        self.layers.push(l);
        let end = if super_frame {
            self.frame.len()
        } else {
            at + p.total_len() as usize
        };
        let l4 = at + p.header_len();
        let fragmented = p.more_frags() || p.frag_offset() != 0;
        let pseudo = checksum::pseudo_v4(
            p.src().octets(),
            p.dst().octets(),
            u8::from(p.protocol()),
            0,
        );
        let r = if fragmented && p.frag_offset() != 0 {
            self.raw(l4, end);
            Ok(())
        } else {
            self.l4(p.protocol(), l4, end, pseudo, super_frame)
        };
        self.padding(end);
        r
    }

    pub(super) fn ipv6(&mut self, at: usize) -> Step {
        let p = ipv6::Packet::new_checked(&self.frame[at..]).map_err(|x| x.at(at))?;
        let mut l = Layer::new("IPv6", at);
        l.int("version", 6u8)
            .int("tc", p.traffic_class())
            .int("fl", p.flow_label())
            .int("plen", p.payload_len())
            .int("nh", u8::from(p.next_header()))
            .note(p.next_header().name())
            .int("hlim", p.hop_limit())
            .text("src", p.src())
            .text("dst", p.dst());
        // In place before the hop-by-hop layer that may follow it; its
        // length's note is known only once that is read.
        let this = self.layers.len();
        self.layers.push(l);
        let oversize = p.payload_len() == 0 && self.frame.len() > at + ipv6::HEADER_LEN;
        let (next, l4, end) = if oversize && self.frame.len() > at + ipv6::HEADER_LEN {
            // A jumbogram (RFC 2675: its length in a hop-by-hop option) or
            // a GSO super-frame (the capture's length).
            let (next, l4, jumbo) =
                self.hop_by_hop(u8::from(p.next_header()), at + ipv6::HEADER_LEN)?;
            let captured = self.frame.len();
            // A jumbo length shorter than the hop-by-hop header itself
            // leaves nothing after it (never a slice that ends before it
            // starts).
            let end = jumbo.map_or(captured, |j| {
                (at + ipv6::HEADER_LEN + j as usize).clamp(l4, captured)
            });
            let what = match jumbo {
                Some(j) => format!("a jumbogram of {j} bytes (RFC 2675)"),
                None => format!("a super-frame (GSO): {} bytes, as captured", captured - at),
            };
            if let Some(f) = self.layers[this]
                .fields
                .iter_mut()
                .find(|f| f.name == "plen")
            {
                f.note = Some(what);
            }
            (next, l4, end)
        } else {
            let end = at + ipv6::HEADER_LEN + p.payload_len() as usize;
            (p.next_header(), at + ipv6::HEADER_LEN, end)
        };
        let pseudo = checksum::pseudo_v6(p.src().octets(), p.dst().octets(), u8::from(next), 0);
        let r = self.l4(next, l4, end, pseudo, oversize);
        self.padding(end);
        r
    }

    /// `oversize`: the IP layer is a super-frame or a jumbogram, whose
    /// length is not in its length field.
    fn l4(
        &mut self,
        proto: IpProtocol,
        at: usize,
        end: usize,
        pseudo: u64,
        oversize: bool,
    ) -> Step {
        let b = &self.frame[at..end];
        match proto {
            IpProtocol::Udp => self.udp(at, end, pseudo, oversize),
            IpProtocol::Tcp => {
                let t = tcp::Packet::new_checked(b).map_err(|x| x.at(at))?;
                let mut l = Layer::new("TCP", at);
                let is_stt = self.ports.tcp(t.dst_port(), t.src_port()) == Some(Tunnel::Stt);
                l.int("sport", t.src_port())
                    .int("dport", t.dst_port())
                    .note(if is_stt { "stt" } else { "" })
                    .int("seq", t.seq());
                if is_stt {
                    let (len, off) = stt::split_seq(t.seq());
                    l.note(format!("STT frame length {len}, offset {off}"));
                }
                l.int("ack", t.ack());
                if is_stt {
                    l.note("STT packet ID");
                }
                l.int("dataofs", (t.header_len() / 4) as u8)
                    .int("reserved", t.reserved())
                    .int("flags", t.flags())
                    .note(tcp_flags_note(t.flags()))
                    .int("window", t.window())
                    .checksum(
                        "chksum",
                        t.checksum(),
                        Some(t.verify_checksum(pseudo + b.len() as u64)),
                    )
                    .int("urgptr", t.urgent());
                if !t.options().is_empty() {
                    l.text("options", hex(t.options()));
                }
                self.layers.push(l);
                let p = at + t.header_len();
                if is_stt {
                    self.stt(p, end, t.seq())
                } else {
                    self.raw(p, end);
                    Ok(())
                }
            }
            IpProtocol::Gre => self.gre(at, end),
            IpProtocol::Icmp | IpProtocol::Icmpv6 => {
                let v6 = proto == IpProtocol::Icmpv6;
                let i = icmp::Packet::new_checked(b).map_err(|x| x.at(at))?;
                let mut l = Layer::new(if v6 { "ICMPv6" } else { "ICMP" }, at);
                let ok = if v6 {
                    i.verify_checksum_v6(pseudo + b.len() as u64)
                } else {
                    i.verify_checksum_v4()
                };
                l.int("type", i.msg_type())
                    .note(icmp_note(v6, i.msg_type(), i.code()))
                    .int("code", i.code())
                    .checksum("chksum", i.checksum(), Some(ok));
                match (v6, i.msg_type()) {
                    (false, icmp::V4_DEST_UNREACHABLE) if i.code() == icmp::V4_CODE_FRAG_NEEDED => {
                        l.int("nexthopmtu", i.v4_next_hop_mtu());
                    }
                    (true, icmp::V6_PACKET_TOO_BIG) => {
                        l.int("mtu", i.v6_mtu());
                    }
                    (false, icmp::V4_ECHO_REQUEST | icmp::V4_ECHO_REPLY)
                    | (true, icmp::V6_ECHO_REQUEST | icmp::V6_ECHO_REPLY) => {
                        l.int("id", i.echo_ident()).int("seq", i.echo_seq());
                    }
                    _ => {
                        l.int("unused", i.rest_of_header());
                    }
                }
                self.layers.push(l);
                self.raw(at + icmp::HEADER_LEN, end);
                Ok(())
            }
            IpProtocol::Unknown(_) => {
                self.raw(at, end);
                Ok(())
            }
        }
    }

    /// UDP, and the tunnel its port names.
    fn udp(&mut self, at: usize, end: usize, pseudo: u64, oversize: bool) -> Step {
        let b = &self.frame[at..end];
        // UDP in a jumbogram (RFC 2675, section 4) or a UDP GSO
        // super-frame has length 0: its length is the IP layer's.
        // The header is read with its own length patched in, as
        // IPv4's super-frames are.
        let from_ip = oversize && b.len() >= udp::HEADER_LEN && b[4..6] == [0, 0];
        let patched;
        let view = if from_ip {
            let mut h = b[..udp::HEADER_LEN].to_vec();
            h[4..6].copy_from_slice(&(udp::HEADER_LEN as u16).to_be_bytes());
            patched = h;
            &patched[..]
        } else {
            b
        };
        let u = udp::Packet::new_checked(view).map_err(|x| x.at(at))?;
        let len = if from_ip {
            b.len()
        } else {
            usize::from(u.len())
        };
        let mut l = Layer::new("UDP", at);
        let ok = (u.checksum() != 0)
            .then(|| checksum::fold(checksum::sum(pseudo + len as u64, &b[..len])) == 0xffff);
        let tunnel = self.ports.udp(u.dst_port(), u.src_port());
        l.int("sport", u.src_port())
            .int("dport", u.dst_port())
            .note(tunnel.map_or("", Tunnel::name))
            .int("len", if from_ip { 0 } else { u.len() });
        if from_ip {
            l.note(format!("{len} bytes, the IP layer's (RFC 2675)"));
        }
        l.checksum("chksum", u.checksum(), ok);
        if u.checksum() == 0 {
            l.note("none");
        }
        self.layers.push(l);
        let t = at + udp::HEADER_LEN;
        let end = at + len;
        match tunnel {
            Some(Tunnel::Geneve) => self.geneve(t, end),
            Some(Tunnel::Vxlan) => self.vxlan(t, end),
            _ => {
                self.raw(t, end);
                Ok(())
            }
        }
    }
}
