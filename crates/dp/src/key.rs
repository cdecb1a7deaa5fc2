//! The flow key: every field a rule can match, packed into 64-bit words so
//! that a masked match is a few AND/compare operations (OVS's miniflow idea,
//! simplified: a fixed layout, and each rule remembers which words its mask
//! touches).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Number of 64-bit words in a key: 15 for the fixed fields, 4 for
/// tun_metadata0..7.
pub const WORDS: usize = 19;

/// Where a field lives: word, bit shift, width in bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldPos {
    pub word: u8,
    pub shift: u8,
    pub bits: u8,
}

impl FieldPos {
    const fn new(word: u8, shift: u8, bits: u8) -> FieldPos {
        FieldPos { word, shift, bits }
    }
    #[inline]
    pub const fn mask(self) -> u64 {
        if self.bits == 64 {
            u64::MAX
        } else {
            ((1u64 << self.bits) - 1) << self.shift
        }
    }
    #[inline]
    pub const fn max(self) -> u64 {
        if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }
}

/// The matchable fields, named as in ovs-ofctl(8).
pub mod f {
    use super::FieldPos;
    pub const IN_PORT: FieldPos = FieldPos::new(0, 0, 32);
    pub const DL_TYPE: FieldPos = FieldPos::new(0, 32, 16);
    /// 802.1Q TCI of the outermost tag, with OVS's convention that the CFI
    /// bit (0x1000) means "a tag is present".
    pub const VLAN_TCI: FieldPos = FieldPos::new(0, 48, 16);
    pub const DL_SRC: FieldPos = FieldPos::new(1, 0, 48);
    pub const NW_PROTO: FieldPos = FieldPos::new(1, 48, 8);
    pub const NW_TOS: FieldPos = FieldPos::new(1, 56, 8);
    pub const DL_DST: FieldPos = FieldPos::new(2, 0, 48);
    pub const TP_SRC: FieldPos = FieldPos::new(2, 48, 16);
    pub const NW_SRC: FieldPos = FieldPos::new(3, 0, 32);
    pub const NW_DST: FieldPos = FieldPos::new(3, 32, 32);
    pub const TP_DST: FieldPos = FieldPos::new(4, 0, 16);
    /// Which tunnel port family the packet came in on is in_port; this is
    /// the outer IP family of the tunnel (4 or 6), 0 for none.
    pub const TUN_FAMILY: FieldPos = FieldPos::new(4, 16, 8);
    pub const TUN_ID: FieldPos = FieldPos::new(5, 0, 64);
    pub const TUN_SRC: FieldPos = FieldPos::new(6, 0, 32);
    pub const TUN_DST: FieldPos = FieldPos::new(6, 32, 32);
    pub const IPV6_SRC_HI: FieldPos = FieldPos::new(7, 0, 64);
    pub const IPV6_SRC_LO: FieldPos = FieldPos::new(8, 0, 64);
    pub const IPV6_DST_HI: FieldPos = FieldPos::new(9, 0, 64);
    pub const IPV6_DST_LO: FieldPos = FieldPos::new(10, 0, 64);
    pub const TUN_IPV6_SRC_HI: FieldPos = FieldPos::new(11, 0, 64);
    pub const TUN_IPV6_SRC_LO: FieldPos = FieldPos::new(12, 0, 64);
    pub const TUN_IPV6_DST_HI: FieldPos = FieldPos::new(13, 0, 64);
    pub const TUN_IPV6_DST_LO: FieldPos = FieldPos::new(14, 0, 64);
    /// The first of the four words holding tun_metadata0..7.
    pub const TUN_METADATA_WORD0: u8 = 15;
}

/// tun_metadata0..7: Geneve options mapped by the TLV map, up to 32 bits
/// each (OVN's option is 32 bits).
pub const TUN_METADATA_FIELDS: usize = 8;

/// A packet's flow key, or a rule's match value or mask, in the same layout.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    pub w: [u64; WORDS],
}

impl std::fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nz: Vec<String> = self
            .w
            .iter()
            .enumerate()
            .filter(|(_, w)| **w != 0)
            .map(|(i, w)| format!("w{i}={w:#x}"))
            .collect();
        write!(f, "FlowKey[{}]", nz.join(" "))
    }
}

/// Position of tun_metadataN: two to a word from word 15.
pub const fn tun_metadata(n: usize) -> FieldPos {
    FieldPos::new(
        (f::TUN_METADATA_WORD0 as usize + n / 2) as u8,
        ((n % 2) * 32) as u8,
        32,
    )
}

impl FlowKey {
    /// This key under `mask`: the bits the mask keeps.
    pub fn masked(&self, mask: &FlowKey) -> FlowKey {
        let mut out = *self;
        for (w, m) in out.w.iter_mut().zip(mask.w) {
            *w &= m;
        }
        out
    }
    /// Whether this mask keeps every bit `other` does.
    pub fn covers(&self, other: &FlowKey) -> bool {
        self.w.iter().zip(other.w).all(|(m, o)| o & !m == 0)
    }
    #[inline]
    pub fn get(&self, p: FieldPos) -> u64 {
        (self.w[p.word as usize] & p.mask()) >> p.shift
    }
    #[inline]
    pub fn set(&mut self, p: FieldPos, v: u64) {
        let w = &mut self.w[p.word as usize];
        *w = (*w & !p.mask()) | ((v << p.shift) & p.mask());
    }
    pub fn mac(b: [u8; 6]) -> u64 {
        u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
    }
    pub fn set_ip6(&mut self, hi: FieldPos, lo: FieldPos, a: Ipv6Addr) {
        let v = u128::from(a);
        self.set(hi, (v >> 64) as u64);
        self.set(lo, v as u64);
    }
    pub fn ip6(&self, hi: FieldPos, lo: FieldPos) -> Ipv6Addr {
        Ipv6Addr::from(((self.get(hi) as u128) << 64) | self.get(lo) as u128)
    }
    /// The outer source address of the tunnel the packet came from.
    pub fn tun_src(&self) -> Option<IpAddr> {
        match self.get(f::TUN_FAMILY) {
            4 => Some(IpAddr::V4(Ipv4Addr::from(self.get(f::TUN_SRC) as u32))),
            6 => Some(IpAddr::V6(self.ip6(f::TUN_IPV6_SRC_HI, f::TUN_IPV6_SRC_LO))),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_do_not_overlap() {
        let mut all: Vec<(&str, FieldPos)> = vec![
            ("in_port", f::IN_PORT),
            ("dl_type", f::DL_TYPE),
            ("vlan_tci", f::VLAN_TCI),
            ("dl_src", f::DL_SRC),
            ("nw_proto", f::NW_PROTO),
            ("nw_tos", f::NW_TOS),
            ("dl_dst", f::DL_DST),
            ("tp_src", f::TP_SRC),
            ("nw_src", f::NW_SRC),
            ("nw_dst", f::NW_DST),
            ("tp_dst", f::TP_DST),
            ("tun_family", f::TUN_FAMILY),
            ("tun_id", f::TUN_ID),
            ("tun_src", f::TUN_SRC),
            ("tun_dst", f::TUN_DST),
            ("ipv6_src_hi", f::IPV6_SRC_HI),
            ("ipv6_src_lo", f::IPV6_SRC_LO),
            ("ipv6_dst_hi", f::IPV6_DST_HI),
            ("ipv6_dst_lo", f::IPV6_DST_LO),
            ("tun_ipv6_src_hi", f::TUN_IPV6_SRC_HI),
            ("tun_ipv6_src_lo", f::TUN_IPV6_SRC_LO),
            ("tun_ipv6_dst_hi", f::TUN_IPV6_DST_HI),
            ("tun_ipv6_dst_lo", f::TUN_IPV6_DST_LO),
        ];
        for n in 0..TUN_METADATA_FIELDS {
            all.push(("tun_metadata", tun_metadata(n)));
        }
        for (i, (a, pa)) in all.iter().enumerate() {
            assert!((pa.word as usize) < WORDS, "{a}");
            for (b, pb) in &all[i + 1..] {
                assert!(
                    pa.word != pb.word || pa.mask() & pb.mask() == 0,
                    "{a} overlaps {b}"
                );
            }
        }
    }

    #[test]
    fn set_get() {
        let mut k = FlowKey::default();
        k.set(
            f::DL_SRC,
            FlowKey::mac([0xfa, 0x16, 0x3e, 0x40, 0x4d, 0x7d]),
        );
        k.set(f::TP_SRC, 0xffff);
        k.set(tun_metadata(7), 0x0003_0002);
        assert_eq!(k.get(f::DL_SRC), 0xfa16_3e40_4d7d);
        assert_eq!(k.get(f::TP_SRC), 0xffff);
        assert_eq!(k.get(tun_metadata(7)), 0x0003_0002);
        assert_eq!(k.get(tun_metadata(6)), 0);
    }
}
