//! The flow key: every field a rule can match, packed into 64-bit words so
//! that a masked match is a few AND/compare operations (OVS's miniflow idea,
//! simplified: a fixed layout, and each rule remembers which words its mask
//! touches).
//!
//! The words come in three parts, as OVS's `struct flow` does:
//!
//! - words 0 to [`DP_WORDS`]: the packet fields the kernel datapath
//!   extracts too (`struct tl_key` in `crates/ebpf/bpf/common.h` is these
//!   words, in this layout);
//! - words [`DP_WORDS`] to [`PACKET_WORDS`]: packet fields only the
//!   userspace extractor fills (ARP hardware addresses, ND, TTL,
//!   fragments, TCP flags, the IPv6 flow label); a megaflow that reads
//!   them cannot be cached in the kernel;
//! - words [`PACKET_WORDS`] to [`WORDS`]: the pipeline's own state, zero
//!   when a packet enters (metadata, registers, conj_id) or set by
//!   conntrack and recirculation (ct_*, recirc_id, dp_hash). No datapath
//!   flow matches them: a translation that reads a register reads what
//!   the translation itself wrote.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Number of 64-bit words in a key.
pub const WORDS: usize = 44;
/// The words the kernel datapath extracts: 15 for the fixed fields, 4 for
/// tun_metadata0..7.
pub const DP_WORDS: usize = 19;
/// The words that hold packet fields; the rest is pipeline state.
pub const PACKET_WORDS: usize = 24;

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

    /// The DSCP and ECN bits of NW_TOS (OVS's nw_tos keeps the DSCP bits
    /// in place, ip_dscp shifts them down, nw_ecn is the rest).
    pub const NW_DSCP: FieldPos = FieldPos::new(1, 58, 6);
    pub const NW_ECN: FieldPos = FieldPos::new(1, 56, 2);
    /// ICMP type and code, where OVS keeps them: in tp_src and tp_dst.
    pub const ICMP_TYPE: FieldPos = FieldPos::new(2, 48, 8);
    pub const ICMP_CODE: FieldPos = FieldPos::new(4, 0, 8);

    // Packet fields the kernel datapath does not extract.
    /// ARP's sender hardware address; ND's source link-layer address.
    pub const ARP_SHA: FieldPos = FieldPos::new(19, 0, 48);
    /// The IPv4 TTL or IPv6 hop limit.
    pub const NW_TTL: FieldPos = FieldPos::new(19, 48, 8);
    /// OVS's fragment bits: [`FRAG_ANY`](super::FRAG_ANY) a fragment,
    /// [`FRAG_LATER`](super::FRAG_LATER) one past the first.
    pub const NW_FRAG: FieldPos = FieldPos::new(19, 56, 2);
    /// ARP's target hardware address; ND's target link-layer address.
    pub const ARP_THA: FieldPos = FieldPos::new(20, 0, 48);
    /// TCP's flags (12 bits: the 9 defined and 3 reserved).
    pub const TCP_FLAGS: FieldPos = FieldPos::new(20, 48, 12);
    pub const ND_TARGET_HI: FieldPos = FieldPos::new(21, 0, 64);
    pub const ND_TARGET_LO: FieldPos = FieldPos::new(22, 0, 64);
    pub const IPV6_LABEL: FieldPos = FieldPos::new(23, 0, 20);
    /// The skb's mark.
    pub const PKT_MARK: FieldPos = FieldPos::new(23, 32, 32);

    // The pipeline's state: zero when a packet enters.
    pub const METADATA: FieldPos = FieldPos::new(24, 0, 64);
    /// The first of the eight words holding reg0..reg15, two to a word
    /// (xreg0..xreg7), the even register in the high half as OVS's xregN
    /// is reg(2N):reg(2N+1).
    pub const REG_WORD0: u8 = 25;
    pub const CONJ_ID: FieldPos = FieldPos::new(33, 0, 32);

    // Conntrack and recirculation.
    pub const CT_STATE: FieldPos = FieldPos::new(34, 0, 32);
    pub const CT_MARK: FieldPos = FieldPos::new(34, 32, 32);
    pub const CT_ZONE: FieldPos = FieldPos::new(35, 0, 16);
    pub const CT_NW_PROTO: FieldPos = FieldPos::new(35, 16, 8);
    pub const CT_TP_SRC: FieldPos = FieldPos::new(35, 32, 16);
    pub const CT_TP_DST: FieldPos = FieldPos::new(35, 48, 16);
    pub const CT_LABEL_HI: FieldPos = FieldPos::new(36, 0, 64);
    pub const CT_LABEL_LO: FieldPos = FieldPos::new(37, 0, 64);
    pub const CT_NW_SRC: FieldPos = FieldPos::new(38, 0, 32);
    pub const CT_NW_DST: FieldPos = FieldPos::new(38, 32, 32);
    pub const CT_IPV6_SRC_HI: FieldPos = FieldPos::new(39, 0, 64);
    pub const CT_IPV6_SRC_LO: FieldPos = FieldPos::new(40, 0, 64);
    pub const CT_IPV6_DST_HI: FieldPos = FieldPos::new(41, 0, 64);
    pub const CT_IPV6_DST_LO: FieldPos = FieldPos::new(42, 0, 64);
    pub const RECIRC_ID: FieldPos = FieldPos::new(43, 0, 32);
    pub const DP_HASH: FieldPos = FieldPos::new(43, 32, 32);
}

/// OVS's `nw_frag` bits (FLOW_NW_FRAG_ANY, FLOW_NW_FRAG_LATER).
pub const FRAG_ANY: u64 = 1;
pub const FRAG_LATER: u64 = 2;

/// Number of 32-bit registers (reg0..reg15).
pub const REGS: usize = 16;

/// Position of regN: two to a word from [`f::REG_WORD0`], the even one high.
pub const fn reg(n: usize) -> FieldPos {
    FieldPos::new(
        (f::REG_WORD0 as usize + n / 2) as u8,
        if n.is_multiple_of(2) { 32 } else { 0 },
        32,
    )
}

/// Position of xregN (reg(2N):reg(2N+1)), a whole word.
pub const fn xreg(n: usize) -> FieldPos {
    FieldPos::new((f::REG_WORD0 as usize + n) as u8, 0, 64)
}

/// tun_metadata0..7: Geneve options mapped by the TLV map, up to 32 bits
/// each (OVN's option is 32 bits).
pub const TUN_METADATA_FIELDS: usize = 8;

/// A packet's flow key, or a rule's match value or mask, in the same layout.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub w: [u64; WORDS],
}

impl Default for FlowKey {
    fn default() -> FlowKey {
        FlowKey { w: [0; WORDS] }
    }
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
        all.extend([
            ("arp_sha", f::ARP_SHA),
            ("nw_ttl", f::NW_TTL),
            ("nw_frag", f::NW_FRAG),
            ("arp_tha", f::ARP_THA),
            ("tcp_flags", f::TCP_FLAGS),
            ("nd_target_hi", f::ND_TARGET_HI),
            ("nd_target_lo", f::ND_TARGET_LO),
            ("ipv6_label", f::IPV6_LABEL),
            ("pkt_mark", f::PKT_MARK),
            ("metadata", f::METADATA),
            ("conj_id", f::CONJ_ID),
            ("ct_state", f::CT_STATE),
            ("ct_mark", f::CT_MARK),
            ("ct_zone", f::CT_ZONE),
            ("ct_nw_proto", f::CT_NW_PROTO),
            ("ct_tp_src", f::CT_TP_SRC),
            ("ct_tp_dst", f::CT_TP_DST),
            ("ct_label_hi", f::CT_LABEL_HI),
            ("ct_label_lo", f::CT_LABEL_LO),
            ("ct_nw_src", f::CT_NW_SRC),
            ("ct_nw_dst", f::CT_NW_DST),
            ("ct_ipv6_src_hi", f::CT_IPV6_SRC_HI),
            ("ct_ipv6_src_lo", f::CT_IPV6_SRC_LO),
            ("ct_ipv6_dst_hi", f::CT_IPV6_DST_HI),
            ("ct_ipv6_dst_lo", f::CT_IPV6_DST_LO),
            ("recirc_id", f::RECIRC_ID),
            ("dp_hash", f::DP_HASH),
        ]);
        for n in 0..REGS {
            all.push(("reg", reg(n)));
        }
        // The parts that fall within another field by design.
        let within = [
            (f::NW_DSCP, f::NW_TOS),
            (f::NW_ECN, f::NW_TOS),
            (f::ICMP_TYPE, f::TP_SRC),
            (f::ICMP_CODE, f::TP_DST),
        ];
        for (part, whole) in within {
            assert_eq!(part.word, whole.word);
            assert_eq!(part.mask() & !whole.mask(), 0);
        }
        for (i, r) in (0..8).map(|n| (n, xreg(n))) {
            assert_eq!(r.mask(), reg(2 * i).mask() | reg(2 * i + 1).mask());
        }
        let words: std::collections::BTreeSet<u8> = all.iter().map(|(_, p)| p.word).collect();
        assert_eq!(words.len(), WORDS, "every word is used");
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
