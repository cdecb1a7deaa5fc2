//! Open vSwitch's fields (its `meta-flow`): every field a rule can match or
//! an action can read and write, with its names (ovs-ofctl's, and the NXM
//! and OXM names that actions' subfields use), its code points on the
//! wire, its width, where it lives in the [`FlowKey`], what it needs beside
//! it in a match (its prerequisites), and how it is written.
//!
//! One table serves the text parser, the printer and the OpenFlow codec,
//! so that a field means the same through `tunlab ctl` and OpenFlow. The
//! facts are OVS's (`ovs-fields(7)`, `meta-flow.h`); tunlab holds the
//! subset OVN 23.03 writes and the tunnel fields, and tun_metadataN of up
//! to 4 bytes.

use crate::key::{f, FieldPos, FlowKey};

/// Where a field's value lives in the flow key: up to 64 bits in one
/// word, or 128 bits over two (hi, lo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Bits(FieldPos),
    Wide(FieldPos, FieldPos),
}

impl Place {
    /// The stored value (not shifted: see `Field`'s `shift`).
    #[inline]
    pub fn get(self, k: &FlowKey) -> u128 {
        match self {
            Place::Bits(p) => k.get(p) as u128,
            Place::Wide(hi, lo) => ((k.get(hi) as u128) << 64) | k.get(lo) as u128,
        }
    }

    /// Store `v` (its bits past the width are dropped).
    #[inline]
    pub fn set(self, k: &mut FlowKey, v: u128) {
        match self {
            Place::Bits(p) => k.set(p, v as u64),
            Place::Wide(hi, lo) => {
                k.set(hi, (v >> 64) as u64);
                k.set(lo, v as u64);
            }
        }
    }

    /// Width in bits.
    pub const fn bits(self) -> u32 {
        match self {
            Place::Bits(p) => p.bits as u32,
            Place::Wide(hi, lo) => hi.bits as u32 + lo.bits as u32,
        }
    }
}

/// How a field's value is written and read as text (OVS's `mf_string`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fmt {
    Decimal,
    Hex,
    Ethernet,
    Ipv4,
    Ipv6,
    /// An OpenFlow port: a number, a reserved name (`LOCAL`) or a port's
    /// name.
    Port,
    /// Conntrack state flags: `+trk-new`, `trk|est`.
    CtState,
    /// `no`, `yes`, `first`, `later`, `not_later`.
    Frag,
    /// TCP flags: `+syn-ack`, `syn|ack`.
    TcpFlags,
}

/// What a match on a field needs beside it (OVS's `mf_prereqs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prereq {
    None,
    /// ARP or RARP.
    Arp,
    /// A VLAN tag (vlan_pcp).
    VlanVid,
    Ipv4,
    Ipv6,
    /// IPv4 or IPv6.
    IpAny,
    Tcp,
    Udp,
    Sctp,
    Icmpv4,
    Icmpv6,
    /// A packet conntrack has associated with a connection.
    CtValid,
    /// An ICMPv6 neighbour solicitation or advertisement (code 0).
    Nd,
    NdSolicit,
    NdAdvert,
    /// The text forms that stand for several fields: `tp_src` (TCP, UDP
    /// or SCTP), `nw_src` (IPv4 or ARP), `nw_proto` (IP or ARP),
    /// `icmp_type` (ICMPv4 or ICMPv6).
    L4,
    Ipv4OrArp,
    IpOrArp,
    IcmpAny,
}

impl Prereq {
    /// Whether a match (`value` under `mask`) meets this prerequisite, as
    /// OVS judges it: on the match's values, so that a field left
    /// wildcarded counts as 0.
    pub fn met(self, value: &FlowKey, mask: &FlowKey) -> bool {
        let dl_type = value.get(f::DL_TYPE);
        let proto = value.get(f::NW_PROTO);
        let (v4, v6) = (dl_type == 0x0800, dl_type == 0x86dd);
        let ip = v4 || v6;
        let arp = dl_type == 0x0806 || dl_type == 0x8035;
        let nd =
            |t: u64| v6 && proto == 58 && value.get(f::TP_DST) == 0 && value.get(f::TP_SRC) == t;
        match self {
            Prereq::None => true,
            Prereq::Arp => arp,
            Prereq::VlanVid => value.get(f::VLAN_TCI) & 0x1000 != 0,
            Prereq::Ipv4 => v4,
            Prereq::Ipv6 => v6,
            Prereq::IpAny => ip,
            Prereq::Tcp => ip && proto == 6,
            Prereq::Udp => ip && proto == 17,
            Prereq::Sctp => ip && proto == 132,
            Prereq::Icmpv4 => v4 && proto == 1,
            Prereq::Icmpv6 => v6 && proto == 58,
            Prereq::CtValid => {
                // ovs-fields(7): a match that says the packet belongs to a
                // connection (new, est, rel, rpl, snat, dnat) or that it
                // was tracked and is not invalid.
                let st = value.get(f::CT_STATE);
                st & 0xcf != 0
                    || (st & 0x20 != 0 && mask.get(f::CT_STATE) & 0x10 != 0 && st & 0x10 == 0)
            }
            Prereq::Nd => nd(135) || nd(136),
            Prereq::NdSolicit => nd(135),
            Prereq::NdAdvert => nd(136),
            Prereq::L4 => ip && matches!(proto, 6 | 17 | 132),
            Prereq::Ipv4OrArp => v4 || arp,
            Prereq::IpOrArp => ip || arp,
            Prereq::IcmpAny => (v4 && proto == 1) || (v6 && proto == 58),
        }
    }

    /// What to add to a rule that lacks this prerequisite.
    pub fn hint(self) -> &'static str {
        match self {
            Prereq::None => "",
            Prereq::Arp => "needs 'arp,' in the rule",
            Prereq::VlanVid => "needs a VLAN tag matched (dl_vlan= or vlan_vid=)",
            Prereq::Ipv4 => "needs 'ip,' in the rule",
            Prereq::Ipv6 => "needs 'ipv6,' in the rule",
            Prereq::IpAny => "needs an IP match first (add 'ip,' or 'ipv6,' to the rule)",
            Prereq::Tcp => "needs 'tcp,' (or 'tcp6,') in the rule",
            Prereq::Udp => "needs 'udp,' (or 'udp6,') in the rule",
            Prereq::Sctp => "needs 'sctp,' (or 'sctp6,') in the rule",
            Prereq::Icmpv4 => "needs 'icmp,' in the rule",
            Prereq::Icmpv6 => "needs 'icmp6,' in the rule",
            Prereq::CtValid => {
                "needs a tracked, valid connection matched (such as ct_state=+trk+est or +trk-inv)"
            }
            Prereq::Nd => "needs an ND match: 'icmp6,icmp_type=135,icmp_code=0' (or 136)",
            Prereq::NdSolicit => {
                "needs 'icmp6,icmp_type=135,icmp_code=0' (a neighbour solicitation)"
            }
            Prereq::NdAdvert => {
                "needs 'icmp6,icmp_type=136,icmp_code=0' (a neighbour advertisement)"
            }
            Prereq::L4 => "needs a transport match first (add 'tcp,' or 'udp,' to the rule)",
            Prereq::Ipv4OrArp => "needs an IP match first (add 'ip,' or 'arp,' to the rule)",
            Prereq::IpOrArp => "needs an IP match first (add 'ip,' or 'arp,' to the rule)",
            Prereq::IcmpAny => "needs 'icmp,' or 'icmp6,' in the rule",
        }
    }
}

/// A field's code point in NXM or OXM, with the name actions use for it
/// (`NXM_NX_REG13[0..15]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    pub class: u16,
    pub field: u8,
    pub name: &'static str,
}

/// NXM's class for OpenFlow 1.0's fields, Nicira's class, OpenFlow's basic
/// class, and the packet registers' class (OpenFlow 1.5's xregN).
pub const NXM_OF: u16 = 0x0000;
pub const NXM_NX: u16 = 0x0001;
pub const OXM_BASIC: u16 = 0x8000;
pub const OXM_PKT_REGS: u16 = 0x8001;

/// One field.
#[derive(Debug, PartialEq, Eq)]
pub struct Field {
    /// The name ovs-ofctl prints and parses, and an older one it also
    /// parses ("" for none).
    pub name: &'static str,
    pub alias: &'static str,
    pub place: Place,
    /// Bytes on the wire (the value is right-aligned in them).
    pub bytes: u8,
    /// The field's value is the stored value shifted left this far
    /// (nw_tos: the DSCP bits in place, as the TOS byte has them).
    pub shift: u8,
    /// Whether any subset of bits can be matched, or only all or none.
    pub maskable: bool,
    pub fmt: Fmt,
    pub prereq: Prereq,
    /// Whether set_field, move and load may write it.
    pub writable: bool,
    pub nxm: Option<Code>,
    pub oxm: Option<Code>,
}

impl Field {
    /// The field's value in `k`.
    #[inline]
    pub fn get(&self, k: &FlowKey) -> u128 {
        self.place.get(k) << self.shift
    }

    /// Set the field to `v` in `k`.
    #[inline]
    pub fn set(&self, k: &mut FlowKey, v: u128) {
        self.place.set(k, v >> self.shift)
    }

    /// Every bit the field's value can hold.
    pub fn all_ones(&self) -> u128 {
        let bits = self.place.bits();
        let ones = if bits == 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        ones << self.shift
    }

    /// The largest value the field takes: its bits, within its bytes on
    /// the wire (icmp_type is one byte kept in 16-bit tp_src, and a match
    /// on it matches all 16, as OVS's does).
    pub fn max_value(&self) -> u128 {
        let bytes = if self.bytes >= 16 {
            u128::MAX
        } else {
            (1u128 << (self.bytes as u32 * 8)) - 1
        };
        self.all_ones() & bytes
    }

    /// Width in bits of the value (with its shift: nw_tos is 8 bits).
    pub fn n_bits(&self) -> u32 {
        self.place.bits() + self.shift as u32
    }

    /// The name actions use for it: the NXM name where it has one
    /// (`NXM_NX_REG0`), else the OXM name (`OXM_OF_METADATA`).
    pub fn code_name(&self) -> &'static str {
        self.nxm.or(self.oxm).map_or(self.name, |c| c.name)
    }

    /// Match `v` under mask `m` on this field (both in the field's own
    /// terms; bits the field cannot hold are dropped).
    pub fn set_match(&self, value: &mut FlowKey, mask: &mut FlowKey, v: u128, m: u128) {
        let ones = self.all_ones();
        let (v, m) = (v & m & ones, m & ones);
        // Keep what other fields sharing the storage matched.
        let old_m = self.get(mask);
        let old_v = self.get(value);
        self.set(mask, (old_m & !ones) | m);
        self.set(value, (old_v & !ones) | v);
    }
}

mod table;
pub use table::*;

/// The field named `name`: its ovs-ofctl name, its older name, or its NXM
/// or OXM name (as actions' subfields write it).
pub fn by_name(name: &str) -> Option<&'static Field> {
    FIELDS.iter().copied().find(|fl| {
        fl.name == name
            || (!fl.alias.is_empty() && fl.alias == name)
            || fl.nxm.is_some_and(|c| c.name == name)
            || fl.oxm.is_some_and(|c| c.name == name)
    })
}

/// The field with NXM or OXM code point (`class`, `field`).
pub fn by_code(class: u16, field: u8) -> Option<&'static Field> {
    FIELDS.iter().copied().find(|fl| {
        [fl.nxm, fl.oxm]
            .iter()
            .flatten()
            .any(|c| c.class == class && c.field == field)
    })
}

/// Conntrack state bits (`ct_state`), as OVS names them.
pub const CT_STATE_FLAGS: &[(u32, &str)] = &[
    (0x01, "new"),
    (0x02, "est"),
    (0x04, "rel"),
    (0x08, "rpl"),
    (0x10, "inv"),
    (0x20, "trk"),
    (0x40, "snat"),
    (0x80, "dnat"),
];

/// TCP flag bits (`tcp_flags`), as OVS names them.
pub const TCP_FLAG_NAMES: &[(u32, &str)] = &[
    (0x001, "fin"),
    (0x002, "syn"),
    (0x004, "rst"),
    (0x008, "psh"),
    (0x010, "ack"),
    (0x020, "urg"),
    (0x040, "ece"),
    (0x080, "cwr"),
    (0x100, "ns"),
    (0x200, "[200]"),
    (0x400, "[400]"),
    (0x800, "[800]"),
];

/// OVS's fragment bits: any fragment, a fragment past the first.
pub const FRAG_ANY: u128 = crate::key::FRAG_ANY as u128;
pub const FRAG_LATER: u128 = crate::key::FRAG_LATER as u128;

/// The registers, extended registers and tun_metadataN, in order.
pub static REGS: [&Field; crate::key::REGS] = [
    &REG0, &REG1, &REG2, &REG3, &REG4, &REG5, &REG6, &REG7, &REG8, &REG9, &REG10, &REG11, &REG12,
    &REG13, &REG14, &REG15,
];
pub static XREGS: [&Field; 8] = [
    &XREG0, &XREG1, &XREG2, &XREG3, &XREG4, &XREG5, &XREG6, &XREG7,
];
pub static TUN_METADATA: [&Field; crate::key::TUN_METADATA_FIELDS] = [
    &TUN_METADATA0,
    &TUN_METADATA1,
    &TUN_METADATA2,
    &TUN_METADATA3,
    &TUN_METADATA4,
    &TUN_METADATA5,
    &TUN_METADATA6,
    &TUN_METADATA7,
];
/// The conntrack fields, which `ct_clear` zeroes.
pub static CT_FIELDS: [&Field; 11] = [
    &CT_STATE,
    &CT_ZONE,
    &CT_MARK,
    &CT_LABEL,
    &CT_NW_PROTO,
    &CT_NW_SRC,
    &CT_NW_DST,
    &CT_IPV6_SRC,
    &CT_IPV6_DST,
    &CT_TP_SRC,
    &CT_TP_DST,
];

/// Part of a field, as actions name it: `NXM_NX_REG13[0..15]`, `reg0[]`,
/// `NXM_OF_VLAN_TCI[0..11]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubField {
    pub field: &'static Field,
    /// The lowest bit, and how many bits from it.
    pub ofs: u32,
    pub n_bits: u32,
}

/// Why a subfield does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubFieldError {
    #[error("'{0}' is not a field (a name such as reg0 or NXM_NX_REG0, then [], [N] or [A..B])")]
    UnknownField(String),
    #[error("'{0}': expected [], [N] or [LOW..HIGH] after the field's name")]
    BadRange(String),
    #[error("'{text}': bits {low}..{high} are outside the field's {width} bits")]
    OutOfRange {
        text: String,
        low: u32,
        high: u32,
        width: u32,
    },
}

impl SubField {
    /// The whole field.
    pub fn whole(field: &'static Field) -> SubField {
        SubField {
            field,
            ofs: 0,
            n_bits: field.n_bits(),
        }
    }

    /// Read `NAME[]`, `NAME[N]`, `NAME[LOW..HIGH]` (NAME in any of the
    /// field's names), or a bare name for the whole field.
    pub fn parse(text: &str) -> Result<SubField, SubFieldError> {
        let text = text.trim();
        let (name, range) = match text.find('[') {
            Some(i) => (&text[..i], Some(&text[i..])),
            None => (text, None),
        };
        let field = by_name(name).ok_or_else(|| SubFieldError::UnknownField(text.to_string()))?;
        let width = field.n_bits();
        let Some(range) = range else {
            return Ok(SubField::whole(field));
        };
        let inner = range
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or_else(|| SubFieldError::BadRange(text.to_string()))?;
        if inner.is_empty() {
            return Ok(SubField::whole(field));
        }
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| SubFieldError::BadRange(text.to_string()))
        };
        let (low, high) = match inner.split_once("..") {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(inner)?;
                (n, n)
            }
        };
        if low > high || high >= width {
            return Err(SubFieldError::OutOfRange {
                text: text.to_string(),
                low,
                high,
                width,
            });
        }
        Ok(SubField {
            field,
            ofs: low,
            n_bits: high - low + 1,
        })
    }

    /// The bits of the field this subfield covers, in the field's terms.
    pub fn mask(&self) -> u128 {
        let ones = if self.n_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << self.n_bits) - 1
        };
        ones << self.ofs
    }

    /// Its value in `k`, right-aligned.
    pub fn get(&self, k: &FlowKey) -> u128 {
        (self.field.get(k) & self.mask()) >> self.ofs
    }

    /// Write `v` (right-aligned) into its bits of `k`.
    pub fn set(&self, k: &mut FlowKey, v: u128) {
        let old = self.field.get(k);
        let m = self.mask();
        self.field.set(k, (old & !m) | ((v << self.ofs) & m));
    }
}

impl std::fmt::Display for SubField {
    /// As OVS writes it: `NXM_NX_REG13[0..15]`, `NXM_NX_REG0[]` for the
    /// whole field, `NXM_NX_REG0[5]` for one bit.
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.field.code_name();
        if self.ofs == 0 && self.n_bits == self.field.n_bits() {
            write!(out, "{name}[]")
        } else if self.n_bits == 1 {
            write!(out, "{name}[{}]", self.ofs)
        } else {
            write!(out, "{name}[{}..{}]", self.ofs, self.ofs + self.n_bits - 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_are_unique() {
        let mut names = std::collections::HashSet::new();
        let mut codes = std::collections::HashSet::new();
        for &fl in FIELDS {
            for n in [fl.name, fl.alias]
                .into_iter()
                .chain(fl.nxm.map(|c| c.name))
                .chain(fl.oxm.map(|c| c.name))
                .filter(|n| !n.is_empty())
            {
                assert!(names.insert(n), "{n} twice");
            }
            for c in [fl.nxm, fl.oxm].into_iter().flatten() {
                assert!(codes.insert((c.class, c.field)), "{} twice", c.name);
            }
            // Only the ICMP fields are kept wider than they are (in tp_src
            // and tp_dst, as OVS keeps them).
            assert!(
                fl.n_bits() <= fl.bytes as u32 * 8 || fl.name.starts_with("icmp"),
                "{} holds more than its bytes",
                fl.name
            );
        }
    }

    #[test]
    fn every_field_has_a_code_point() {
        for &fl in FIELDS {
            assert!(fl.nxm.is_some() || fl.oxm.is_some(), "{}", fl.name);
        }
    }

    #[test]
    fn every_field_reads_back_what_it_wrote() {
        for &fl in FIELDS {
            let mut k = FlowKey::default();
            let v = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128 & fl.all_ones();
            fl.set(&mut k, v);
            assert_eq!(fl.get(&k), v, "{}", fl.name);
            assert_eq!(by_name(fl.name), Some(fl));
        }
    }

    #[test]
    fn registers_are_views_of_the_extended_registers() {
        // ovs-fields(7): xreg0 is reg0 (high) and reg1 (low); xxreg0 is
        // reg0..reg3, reg0 the most significant.
        let mut k = FlowKey::default();
        by_name("xxreg0")
            .unwrap()
            .set(&mut k, 0x1111_1111_2222_2222_3333_3333_4444_4444);
        assert_eq!(by_name("reg0").unwrap().get(&k), 0x1111_1111);
        assert_eq!(by_name("reg3").unwrap().get(&k), 0x4444_4444);
        assert_eq!(by_name("xreg1").unwrap().get(&k), 0x3333_3333_4444_4444);
        assert_eq!(
            by_name("OXM_OF_PKT_REG0").unwrap().get(&k),
            0x1111_1111_2222_2222
        );
    }

    #[test]
    fn fields_that_share_storage() {
        let mut k = FlowKey::default();
        by_name("nw_tos").unwrap().set(&mut k, 0xb8);
        assert_eq!(by_name("ip_dscp").unwrap().get(&k), 46);
        by_name("nw_ecn").unwrap().set(&mut k, 3);
        assert_eq!(k.get(f::NW_TOS), 0xbb);
        assert_eq!(by_name("nw_tos").unwrap().get(&k), 0xb8);
        by_name("icmp_type").unwrap().set(&mut k, 135);
        assert_eq!(by_name("icmpv6_type").unwrap().get(&k), 135);
        assert_eq!(k.get(f::TP_SRC), 135);
        by_name("vlan_tci").unwrap().set(&mut k, 0x3005);
        assert_eq!(by_name("vlan_vid").unwrap().get(&k), 0x1005);
        assert_eq!(by_name("vlan_pcp").unwrap().get(&k), 1);
    }

    #[test]
    fn subfields_parse_and_print_as_ovs_writes_them() {
        for (text, printed) in [
            ("NXM_NX_REG13[0..15]", "NXM_NX_REG13[0..15]"),
            ("reg13[0..15]", "NXM_NX_REG13[0..15]"),
            (
                "NXM_NX_TUN_METADATA0[16..30]",
                "NXM_NX_TUN_METADATA0[16..30]",
            ),
            ("OXM_OF_METADATA[0..23]", "OXM_OF_METADATA[0..23]"),
            ("NXM_NX_REG0[]", "NXM_NX_REG0[]"),
            ("reg0", "NXM_NX_REG0[]"),
            ("NXM_NX_REG10[7]", "NXM_NX_REG10[7]"),
            ("xxreg0[96..127]", "NXM_NX_XXREG0[96..127]"),
            ("OXM_OF_PKT_REG4", "OXM_OF_PKT_REG4[]"),
            ("eth_src", "NXM_OF_ETH_SRC[]"),
        ] {
            let sf = SubField::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(sf.to_string(), printed);
        }
        assert!(matches!(
            SubField::parse("NXM_NX_REG0[0..32]"),
            Err(SubFieldError::OutOfRange { .. })
        ));
        assert!(matches!(
            SubField::parse("NXM_NX_REG99[]"),
            Err(SubFieldError::UnknownField(_))
        ));
        assert!(matches!(
            SubField::parse("reg0[3..1]"),
            Err(SubFieldError::OutOfRange { .. })
        ));
        assert!(matches!(
            SubField::parse("reg0[x]"),
            Err(SubFieldError::BadRange(_))
        ));
    }

    #[test]
    fn subfield_writes_only_its_bits() {
        let sf = SubField::parse("NXM_NX_REG14[0..14]").unwrap();
        let mut k = FlowKey::default();
        by_name("reg14").unwrap().set(&mut k, 0xffff_ffff);
        sf.set(&mut k, 0x1234);
        assert_eq!(by_name("reg14").unwrap().get(&k), 0xffff_9234);
        assert_eq!(sf.get(&k), 0x1234);
    }
}
