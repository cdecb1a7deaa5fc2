//! Path MTU: a frame too big for its tunnel is answered with the ICMP
//! error that names the room left (IPv4 with DF, IPv6), or the outer
//! packet is fragmented where the tunnel type allows it.

use super::{Io, Netdev, HEADROOM};
use tunlab_dp::TunnelSet;
use tunlab_wire::tunnel::TunnelKind;
use tunlab_wire::{icmp, PacketBuf};

impl Netdev {
    /// If `frame` is IPv4 with DF, or IPv6, answer its sender with the ICMP
    /// error that says the tunnel leaves `room` bytes, out of the tenant
    /// port it came in; returns whether it did.
    pub(super) fn send_icmp_too_big(
        &mut self,
        in_port: u32,
        frame: &PacketBuf<Vec<u8>>,
        room: usize,
    ) -> bool {
        let Some(reply) = icmp::too_big_reply(frame.data(), room as u16) else {
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
    pub(super) fn too_big(
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
}
