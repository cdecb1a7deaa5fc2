//! IPv6's hop-by-hop options header, read for the one option a decoder
//! of super-frames needs: Jumbo Payload (RFC 2675), which carries the
//! length of a packet too long for the 16-bit payload length.

use super::{Layer, Walk};
use tunlab_wire::ipv4::IpProtocol;

/// The Jumbo Payload option's type.
const JUMBO: u8 = 0xc2;

impl Walk<'_> {
    /// When `next` (the IPv6 header's next header) is hop-by-hop (0),
    /// read that header at `at` into a layer: what follows it, where, and
    /// the jumbo payload length if it has one. Otherwise `next` and `at`
    /// as they are. A header cut short is left to be shown as raw bytes.
    pub(super) fn hop_by_hop(
        &mut self,
        next: u8,
        at: usize,
    ) -> Result<(IpProtocol, usize, Option<u32>), tunlab_wire::Error> {
        let b = self.frame;
        if next != 0 || b.len() < at + 2 {
            return Ok((IpProtocol::from(next), at, None));
        }
        let len = (usize::from(b[at + 1]) + 1) * 8;
        if b.len() < at + len {
            return Ok((IpProtocol::Unknown(0), at, None));
        }
        let mut jumbo = None;
        let mut i = at + 2;
        while i < at + len {
            match b[i] {
                0 => i += 1, // Pad1
                t => {
                    let Some(&olen) = b.get(i + 1) else { break };
                    let data = i + 2..i + 2 + usize::from(olen);
                    if t == JUMBO && olen == 4 && data.end <= at + len {
                        let d = &b[data.clone()];
                        jumbo = Some(u32::from_be_bytes([d[0], d[1], d[2], d[3]]));
                    }
                    i = data.end;
                }
            }
        }
        let mut l = Layer::new("IPv6 Hop-by-Hop", at);
        l.int("nh", b[at])
            .note(IpProtocol::from(b[at]).name())
            .int("len", b[at + 1])
            .note(format!("{len} bytes"));
        if let Some(j) = jumbo {
            l.int("jumbo", j).note("Jumbo Payload length");
        }
        self.layers.push(l);
        Ok((IpProtocol::from(b[at]), at + len, jumbo))
    }
}
