//! Packets from a [`Stack`]: flows from the ranges and lists, values per
//! packet, then the bytes, with what scapy would compute filled in
//! (lengths, checksums, next-protocol fields, the ports tunnels imply).
//!
//! Frame sizes count the 4-byte FCS, as TRex and RFC 2544 do: a 64-byte
//! frame is 60 bytes handed to the kernel. The `pad` layer (or, without
//! one, the end of the packet) takes the zeros that make up the size, and
//! the enclosing lengths and checksums include them.

use crate::layer::{Dflt, Gen, Kind, Layer, Stack};
use tunlab_wire::checksum;

/// Bytes of Ethernet FCS counted in a frame size but not built.
pub const FCS: usize = 4;

/// The simple IMIX: 7 frames of 64 bytes, 4 of 594, 1 of 1518.
pub const IMIX: [(usize, usize); 3] = [(64, 7), (594, 4), (1518, 1)];

/// Frame sizes of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sizes {
    /// The packet as described (no padding beyond its layers).
    Natural,
    Fixed(usize),
    Imix,
}

impl Sizes {
    /// `64`, `1500`, `imix`; frames of 64 to 9000 bytes.
    pub fn parse(s: &str) -> Result<Sizes, String> {
        if s.eq_ignore_ascii_case("imix") {
            return Ok(Sizes::Imix);
        }
        match s.parse::<usize>() {
            Ok(n) if (64..=9000).contains(&n) => Ok(Sizes::Fixed(n)),
            _ => Err(format!(
                "--size: '{s}' is not a frame size: 64 to 9000 bytes (FCS included) or imix"
            )),
        }
    }

    /// The frame size of packet number `n` (None: natural).
    pub fn of(&self, n: u64) -> Option<usize> {
        match self {
            Sizes::Natural => None,
            Sizes::Fixed(s) => Some(*s),
            Sizes::Imix => {
                let total: usize = IMIX.iter().map(|x| x.1).sum();
                let mut k = (n % total as u64) as usize;
                for (size, weight) in IMIX {
                    if k < weight {
                        return Some(size);
                    }
                    k -= weight;
                }
                Some(IMIX[0].0)
            }
        }
    }

    fn smallest(&self) -> Option<usize> {
        match self {
            Sizes::Natural => None,
            Sizes::Fixed(s) => Some(*s),
            Sizes::Imix => IMIX.iter().map(|x| x.0).min(),
        }
    }
}

/// A small fast PRNG (xorshift64*) for `random` fields: reproducible from
/// the run's seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The largest number of flows one description may make.
pub const MAX_FLOWS: u128 = 1 << 24;

/// Builds the packets of one description.
#[derive(Debug, Clone)]
pub struct Builder {
    stack: Stack,
    sizes: Sizes,
    flows: u128,
}

fn header_len(l: &Layer) -> usize {
    match l.kind {
        Kind::Ether => 14,
        Kind::Dot1Q | Kind::Dot1AD => 4,
        Kind::IP => 20,
        Kind::IPv6 => 40,
        Kind::UDP | Kind::VXLAN | Kind::NVGRE => 8,
        Kind::TCP => 20,
        Kind::GENEVE => 8 + l.opts.iter().map(|o| 4 + o.data.len()).sum::<usize>(),
        Kind::GRE => {
            let (c, k, s) = gre_present(l);
            4 + 4 * (c as usize + k as usize + s as usize)
        }
        Kind::STT => 20 + 18 + 2,
        Kind::Raw => l.bytes.len(),
        Kind::Pad => 0,
    }
}

/// GRE's optional fields: present if their flag is given as 1, or, with
/// no flag given, if the field itself is (friendlier than scapy, which
/// drops a key given without key_present=1). The same for every flow: the
/// header's length must not change.
fn gre_present(l: &Layer) -> (bool, bool, bool) {
    let p = |flag: &str, field: &str| match l.get(flag) {
        Some(Gen::Fixed(x)) => *x == 1,
        Some(_) => true,
        None => l.get(field).is_some(),
    };
    (
        p("chksum_present", "chksum"),
        p("key_present", "key"),
        p("seqnum_present", "sequence_number"),
    )
}

fn put16(b: &mut [u8], at: usize, v: u128) {
    b[at..at + 2].copy_from_slice(&(v as u16).to_be_bytes());
}
fn put32(b: &mut [u8], at: usize, v: u128) {
    b[at..at + 4].copy_from_slice(&(v as u32).to_be_bytes());
}

impl Builder {
    /// Check that the frames fit the layers and that the flows are not
    /// too many.
    pub fn new(stack: Stack, sizes: Sizes) -> Result<Builder, String> {
        let flows = stack
            .layers
            .iter()
            .flat_map(|l| l.vals.iter().flatten())
            .try_fold(1u128, |acc, g| acc.checked_mul(g.flows()))
            .filter(|n| *n <= MAX_FLOWS)
            .ok_or_else(|| {
                format!("the ranges and lists make more than {MAX_FLOWS} flows; narrow them")
            })?;
        let b = Builder {
            stack,
            sizes,
            flows,
        };
        if let Some(s) = b.sizes.smallest() {
            let min = b.min_frame();
            if s < min {
                return Err(format!(
                    "frame size {s} is smaller than the headers: at least {min} bytes ({} of layers + {FCS} FCS)",
                    min - FCS
                ));
            }
        }
        Ok(b)
    }

    /// Flows: the product of every range's and list's length.
    pub fn flows(&self) -> u128 {
        self.flows
    }

    /// The smallest frame these layers fit in, FCS included.
    pub fn min_frame(&self) -> usize {
        self.stack.layers.iter().map(header_len).sum::<usize>() + FCS
    }

    pub fn sizes(&self) -> &Sizes {
        &self.sizes
    }

    /// Whether any field is `random` (drawn anew per packet).
    pub fn has_random(&self) -> bool {
        self.stack
            .layers
            .iter()
            .flat_map(|l| l.vals.iter().flatten())
            .any(|g| matches!(g, Gen::Random))
    }

    /// Each field's value for `flow`: the first varying field changes
    /// fastest; `random` fields draw from `rng`.
    fn values(&self, mut flow: u128, rng: &mut Rng) -> Vec<Vec<Option<u128>>> {
        self.stack
            .layers
            .iter()
            .map(|l| {
                l.kind
                    .fields()
                    .iter()
                    .zip(&l.vals)
                    .map(|(def, g)| match g {
                        None => match def.default {
                            Dflt::V(v) => Some(v),
                            Dflt::Auto => None,
                        },
                        Some(Gen::Fixed(v)) => Some(*v),
                        Some(Gen::Range(lo, hi)) => {
                            let n = hi - lo + 1;
                            let d = flow % n;
                            flow /= n;
                            Some(lo + d)
                        }
                        Some(Gen::List(v)) => {
                            let n = v.len() as u128;
                            let d = flow % n;
                            flow /= n;
                            Some(v[d as usize])
                        }
                        Some(Gen::Random) => {
                            let bits = match def.ty {
                                crate::layer::Ty::Int(b) => b,
                                crate::layer::Ty::Mac => 48,
                                crate::layer::Ty::Ip4 => 32,
                                _ => 16,
                            };
                            let r = ((rng.next_u64() as u128) << 64) | rng.next_u64() as u128;
                            Some(if bits >= 128 {
                                r
                            } else {
                                r & ((1u128 << bits) - 1)
                            })
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// Build packet number `n` of flow `flow % flows` into `out` (cleared
    /// first).
    pub fn build(&self, flow: u128, n: u64, rng: &mut Rng, out: &mut Vec<u8>) {
        let layers = &self.stack.layers;
        let vals = self.values(flow % self.flows, rng);
        let (offs, total) = self.layout(n);
        out.clear();
        out.resize(total, 0);
        // Headers, outermost first.
        for (i, l) in layers.iter().enumerate() {
            let next = layers.get(i + 1).map(|x| x.kind);
            self.write(l, &vals[i], next, &mut out[offs[i]..]);
        }
        // Lengths and checksums, innermost first, so that the outer ones
        // cover the final inner bytes.
        for i in (0..layers.len()).rev() {
            self.finish(i, &vals[i], &offs, out);
        }
    }

    /// Where each layer of packet `n` starts, and the packet's length
    /// (FCS not included). The padding sits at the `pad` layer, or at the
    /// end.
    fn layout(&self, n: u64) -> (Vec<usize>, usize) {
        let layers = &self.stack.layers;
        let natural: usize = layers.iter().map(header_len).sum();
        let pad = self
            .sizes
            .of(n)
            .map_or(0, |s| (s - FCS).saturating_sub(natural));
        let pad_at = layers
            .iter()
            .position(|l| l.kind == Kind::Pad)
            .unwrap_or(layers.len());
        let mut offs = Vec::with_capacity(layers.len());
        let mut at = 0;
        for (i, l) in layers.iter().enumerate() {
            if i == pad_at {
                at += pad;
            }
            offs.push(at);
            at += header_len(l);
        }
        (offs, natural + pad)
    }

    /// Bytes at the end of packet `n` that belong to no header (padding
    /// and `Raw` loads): room for the receive signature.
    pub fn tail_room(&self, n: u64) -> usize {
        let (offs, total) = self.layout(n);
        let end = self
            .stack
            .layers
            .iter()
            .zip(&offs)
            .filter(|(l, _)| !matches!(l.kind, Kind::Raw | Kind::Pad))
            .map(|(l, at)| at + header_len(l))
            .max()
            .unwrap_or(0);
        total - end
    }

    fn write(&self, l: &Layer, v: &[Option<u128>], next: Option<Kind>, b: &mut [u8]) {
        let val = |k: usize| v[k].unwrap_or(0);
        let ethertype = |k: usize, none: u128| v[k].unwrap_or(ethertype_of(next, none));
        let ipproto = |k: usize, none: u128| {
            v[k].unwrap_or(match next {
                Some(Kind::UDP) => 17,
                Some(Kind::TCP) | Some(Kind::STT) => 6,
                Some(Kind::GRE) | Some(Kind::NVGRE) => 47,
                _ => none,
            })
        };
        match l.kind {
            Kind::Ether => {
                b[..6].copy_from_slice(&(val(0) as u64).to_be_bytes()[2..]);
                b[6..12].copy_from_slice(&(val(1) as u64).to_be_bytes()[2..]);
                put16(b, 12, ethertype(2, 0x9000));
            }
            Kind::Dot1Q | Kind::Dot1AD => {
                put16(b, 0, (val(0) << 13) | (val(1) << 12) | val(2));
                put16(b, 2, ethertype(3, 0));
            }
            Kind::IP => {
                b[0] = ((val(0) << 4) | val(1)) as u8;
                b[1] = val(2) as u8;
                put16(b, 4, val(4));
                put16(b, 6, (val(5) << 13) | val(6));
                b[8] = val(7) as u8;
                b[9] = ipproto(8, 0) as u8;
                put32(b, 12, val(10));
                put32(b, 16, val(11));
            }
            Kind::IPv6 => {
                put32(b, 0, (val(0) << 28) | (val(1) << 20) | val(2));
                b[6] = ipproto(4, 59) as u8;
                b[7] = val(5) as u8;
                b[8..24].copy_from_slice(&val(6).to_be_bytes());
                b[24..40].copy_from_slice(&val(7).to_be_bytes());
            }
            Kind::UDP => {
                let (sp, dp) = match next {
                    Some(Kind::GENEVE) => (53, 6081),
                    Some(Kind::VXLAN) => (4789, 4789),
                    _ => (53, 53),
                };
                put16(b, 0, v[0].unwrap_or(sp));
                put16(b, 2, v[1].unwrap_or(dp));
            }
            Kind::TCP => {
                put16(b, 0, val(0));
                put16(b, 2, val(1));
                put32(b, 4, val(2));
                put32(b, 8, val(3));
                put16(b, 12, (val(4) << 12) | (val(5) << 9) | val(6));
                put16(b, 14, val(7));
                put16(b, 18, val(9));
            }
            Kind::GENEVE | Kind::VXLAN | Kind::GRE | Kind::NVGRE | Kind::STT => {
                write_tunnel(l, v, next, b)
            }
            Kind::Raw => b[..l.bytes.len()].copy_from_slice(&l.bytes),
            Kind::Pad => {}
        }
    }

    /// Fill the computed fields of layer `i` once everything inside it is
    /// in place.
    fn finish(&self, i: usize, v: &[Option<u128>], offs: &[usize], out: &mut [u8]) {
        let l = &self.stack.layers[i];
        let at = offs[i];
        let len = out.len() - at;
        // The pseudo-header sum of the nearest enclosing IP layer.
        let pseudo = |proto: u8, out: &[u8]| -> u64 {
            let j = (0..i)
                .rev()
                .find(|&j| matches!(self.stack.layers[j].kind, Kind::IP | Kind::IPv6));
            match j.map(|j| (self.stack.layers[j].kind, offs[j])) {
                Some((Kind::IP, o)) => {
                    let h = &out[o..];
                    checksum::pseudo_v4(
                        [h[12], h[13], h[14], h[15]],
                        [h[16], h[17], h[18], h[19]],
                        proto,
                        len as u16,
                    )
                }
                Some((_, o)) => {
                    let h = &out[o..];
                    let mut s = [0u8; 16];
                    let mut d = [0u8; 16];
                    s.copy_from_slice(&h[8..24]);
                    d.copy_from_slice(&h[24..40]);
                    checksum::pseudo_v6(s, d, proto, len as u32)
                }
                None => 0,
            }
        };
        let l4sum = |proto: u8, csum_at: usize, out: &mut [u8]| {
            let p = pseudo(proto, out);
            let b = &mut out[at..];
            put16(b, csum_at, 0);
            let mut c = checksum::finish(checksum::sum(p, b));
            if c == 0 {
                c = 0xffff;
            }
            put16(b, csum_at, c as u128);
        };
        match l.kind {
            Kind::IP => {
                let b = &mut out[at..];
                put16(b, 2, v[3].unwrap_or(len as u128));
                if let Some(c) = v[9] {
                    put16(b, 10, c);
                } else {
                    put16(b, 10, 0);
                    let c = checksum::checksum(&b[..20]);
                    put16(b, 10, c as u128);
                }
            }
            Kind::IPv6 => put16(&mut out[at..], 4, v[3].unwrap_or((len - 40) as u128)),
            Kind::UDP => {
                put16(&mut out[at..], 4, v[2].unwrap_or(len as u128));
                match v[3] {
                    Some(c) => put16(&mut out[at..], 6, c),
                    None => l4sum(17, 6, out),
                }
            }
            Kind::TCP => match v[8] {
                Some(c) => put16(&mut out[at..], 16, c),
                None => l4sum(6, 16, out),
            },
            Kind::STT => {
                put32(&mut out[at..], 4, ((len - 20) as u128) << 16);
                l4sum(6, 16, out);
            }
            Kind::GRE => {
                let b = &mut out[at..];
                if b[0] & 0x80 != 0 && v[5].is_none() {
                    put16(b, 4, 0);
                    let c = checksum::checksum(b);
                    put16(b, 4, c as u128);
                }
            }
            _ => {}
        }
    }
}

/// The Ethernet type that announces layer `next` (`none` if nothing does).
fn ethertype_of(next: Option<Kind>, none: u128) -> u128 {
    match next {
        Some(Kind::Dot1Q) => 0x8100,
        Some(Kind::Dot1AD) => 0x88a8,
        Some(Kind::IP) => 0x0800,
        Some(Kind::IPv6) => 0x86dd,
        Some(Kind::Ether) => 0x6558,
        _ => none,
    }
}

/// A tunnel header's fields (Geneve with its options, VXLAN, GRE with
/// its optional fields, NVGRE, STT's TCP-like header and its own).
fn write_tunnel(l: &Layer, v: &[Option<u128>], next: Option<Kind>, b: &mut [u8]) {
    let val = |k: usize| v[k].unwrap_or(0);
    let ethertype = |k: usize, none: u128| v[k].unwrap_or(ethertype_of(next, none));
    match l.kind {
        Kind::GENEVE => {
            let optlen = l.opts.iter().map(|o| 4 + o.data.len()).sum::<usize>() / 4;
            b[0] = ((val(0) << 6) | v[1].unwrap_or(optlen as u128)) as u8;
            b[1] = ((val(2) << 7) | (val(3) << 6) | val(4)) as u8;
            put16(b, 2, ethertype(5, 0));
            put32(b, 4, (val(6) << 8) | val(7));
            let mut at = 8;
            for o in &l.opts {
                put16(b, at, o.class as u128);
                b[at + 2] = o.typ;
                b[at + 3] = o.len & 0x1f;
                b[at + 4..at + 4 + o.data.len()].copy_from_slice(&o.data);
                at += 4 + o.data.len();
            }
        }
        Kind::VXLAN => {
            put32(b, 0, (val(0) << 24) | val(1));
            put32(b, 4, (val(2) << 8) | val(3));
        }
        Kind::GRE => {
            let (c, k, s) = gre_present(l);
            let bits = ((c as u128) << 15) | ((k as u128) << 13) | ((s as u128) << 12);
            put16(b, 0, bits | val(3));
            put16(b, 2, ethertype(4, 0));
            let mut at = 4;
            if c {
                put16(b, at, v[5].unwrap_or(0));
                at += 4;
            }
            if k {
                put32(b, at, val(6));
                at += 4;
            }
            if s {
                put32(b, at, val(7));
            }
        }
        Kind::NVGRE => {
            put16(b, 0, 0x2000);
            put16(b, 2, 0x6558);
            put32(b, 4, (val(0) << 8) | val(1));
        }
        Kind::STT => {
            // The TCP-like header: seq = STT frame length << 16 | offset
            // 0 (a whole frame), ack = packet ID, PSH|ACK.
            put16(b, 0, val(0));
            put16(b, 2, val(1));
            put32(b, 8, val(2));
            put16(b, 12, (5 << 12) | 0x18);
            put16(b, 14, val(3));
            let s = &mut b[20..];
            s[0] = val(4) as u8;
            s[1] = val(5) as u8;
            s[2] = val(6) as u8;
            put16(s, 4, val(7));
            put16(s, 6, (val(8) << 13) | (val(9) << 12) | val(10));
            s[8..16].copy_from_slice(&(val(11) as u64).to_be_bytes());
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(text: &str, sizes: Sizes, flow: u128) -> Vec<u8> {
        let b = Builder::new(Stack::parse(text).unwrap(), sizes).unwrap();
        let mut out = Vec::new();
        b.build(flow, 0, &mut Rng::new(1), &mut out);
        out
    }

    #[test]
    fn lengths_checksums_and_implied_fields_are_filled() {
        let p = build(
            "Ether()/IP(src=10.0.0.1,dst=10.0.0.2)/UDP()/VXLAN(vni=5)/Ether()",
            Sizes::Natural,
            0,
        );
        assert_eq!(p.len(), 14 + 20 + 8 + 8 + 14);
        assert_eq!(&p[12..14], &[0x08, 0x00]);
        assert_eq!(p[23], 17);
        assert_eq!(u16::from_be_bytes([p[16], p[17]]), 50);
        assert!(checksum::verify(&p[14..34]));
        assert_eq!(&p[34..38], &[0x12, 0xb5, 0x12, 0xb5]);
        assert_eq!(u16::from_be_bytes([p[38], p[39]]), 30);
        let pseudo = checksum::pseudo_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, 30);
        assert_eq!(checksum::fold(checksum::sum(pseudo, &p[34..])), 0xffff);
        assert_eq!(&p[42..50], &[0x08, 0, 0, 0, 0, 0, 5, 0]);
    }

    #[test]
    fn frame_sizes_pad_inside_and_refuse_what_cannot_fit() {
        let text = "Ether()/IP()/UDP()/GENEVE(opt=ovn(ingress=1,egress=2))/Ether()/IP()/UDP()/pad";
        let p = build(text, Sizes::Fixed(128), 0);
        assert_eq!(p.len(), 124);
        // The inner UDP length covers the padding.
        let inner_udp = 14 + 20 + 8 + 16 + 14 + 20;
        assert_eq!(
            u16::from_be_bytes([p[inner_udp + 4], p[inner_udp + 5]]),
            124 - inner_udp as u16
        );
        let e = Builder::new(Stack::parse(text).unwrap(), Sizes::Fixed(64)).unwrap_err();
        assert!(
            e.contains("at least 104 bytes (100 of layers + 4 FCS)"),
            "{e}"
        );
        assert_eq!(
            Sizes::parse("63").unwrap_err(),
            "--size: '63' is not a frame size: 64 to 9000 bytes (FCS included) or imix"
        );
    }

    #[test]
    fn ranges_make_exactly_the_flows_written() {
        let b = Builder::new(
            Stack::parse("Ether()/IP(src=10.0.0.1-10.0.0.3)/UDP(dport=[80,443])").unwrap(),
            Sizes::Natural,
        )
        .unwrap();
        assert_eq!(b.flows(), 6);
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for f in 0..12 {
            b.build(f, f as u64, &mut Rng::new(1), &mut out);
            seen.insert((out[29], u16::from_be_bytes([out[36], out[37]])));
        }
        let want: std::collections::BTreeSet<_> = [1, 2, 3]
            .iter()
            .flat_map(|s| [(*s, 80), (*s, 443)])
            .collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn imix_cycles_seven_four_one() {
        let sizes: Vec<usize> = (0..12).filter_map(|n| Sizes::Imix.of(n)).collect();
        assert_eq!(sizes.iter().filter(|s| **s == 64).count(), 7);
        assert_eq!(sizes.iter().filter(|s| **s == 594).count(), 4);
        assert_eq!(sizes.iter().filter(|s| **s == 1518).count(), 1);
    }
}
