//! The field table: each of OVS's fields tunlab holds, in the order of
//! OVS's `meta-flow.h`.

use super::*;
use crate::key::{f, reg, tun_metadata, xreg, FieldPos};

/// A field with the common defaults: bitwise maskable, hex, no
/// prerequisite, writable, no code points.
const fn field(name: &'static str, place: Place, bytes: u8) -> Field {
    Field {
        name,
        alias: "",
        place,
        bytes,
        shift: 0,
        maskable: true,
        fmt: Fmt::Hex,
        prereq: Prereq::None,
        writable: true,
        nxm: None,
        oxm: None,
    }
}

impl Field {
    pub(super) const fn alias(mut self, alias: &'static str) -> Field {
        self.alias = alias;
        self
    }
    pub(super) const fn fmt(mut self, fmt: Fmt) -> Field {
        self.fmt = fmt;
        self
    }
    pub(super) const fn pre(mut self, prereq: Prereq) -> Field {
        self.prereq = prereq;
        self
    }
    pub(super) const fn shift(mut self, shift: u8) -> Field {
        self.shift = shift;
        self
    }
    /// Matched whole or not at all.
    pub(super) const fn exact(mut self) -> Field {
        self.maskable = false;
        self
    }
    pub(super) const fn read_only(mut self) -> Field {
        self.writable = false;
        self
    }
    pub(super) const fn nxm(mut self, class: u16, field: u8, name: &'static str) -> Field {
        self.nxm = Some(Code { class, field, name });
        self
    }
    pub(super) const fn oxm(mut self, class: u16, field: u8, name: &'static str) -> Field {
        self.oxm = Some(Code { class, field, name });
        self
    }
}

use Place::{Bits, Wide};

pub static DP_HASH: Field =
    field("dp_hash", Bits(f::DP_HASH), 4)
        .read_only()
        .nxm(NXM_NX, 35, "NXM_NX_DP_HASH");
pub static RECIRC_ID: Field = field("recirc_id", Bits(f::RECIRC_ID), 4)
    .fmt(Fmt::Decimal)
    .exact()
    .read_only()
    .nxm(NXM_NX, 36, "NXM_NX_RECIRC_ID");
pub static CONJ_ID: Field = field("conj_id", Bits(f::CONJ_ID), 4)
    .fmt(Fmt::Decimal)
    .exact()
    .read_only()
    .nxm(NXM_NX, 37, "NXM_NX_CONJ_ID");
pub static TUN_ID: Field = field("tun_id", Bits(f::TUN_ID), 8)
    .alias("tunnel_id")
    .nxm(NXM_NX, 16, "NXM_NX_TUN_ID")
    .oxm(OXM_BASIC, 38, "OXM_OF_TUNNEL_ID");
pub static TUN_SRC: Field =
    field("tun_src", Bits(f::TUN_SRC), 4)
        .fmt(Fmt::Ipv4)
        .nxm(NXM_NX, 31, "NXM_NX_TUN_IPV4_SRC");
pub static TUN_DST: Field =
    field("tun_dst", Bits(f::TUN_DST), 4)
        .fmt(Fmt::Ipv4)
        .nxm(NXM_NX, 32, "NXM_NX_TUN_IPV4_DST");
pub static TUN_IPV6_SRC: Field = field(
    "tun_ipv6_src",
    Wide(f::TUN_IPV6_SRC_HI, f::TUN_IPV6_SRC_LO),
    16,
)
.fmt(Fmt::Ipv6)
.nxm(NXM_NX, 109, "NXM_NX_TUN_IPV6_SRC");
pub static TUN_IPV6_DST: Field = field(
    "tun_ipv6_dst",
    Wide(f::TUN_IPV6_DST_HI, f::TUN_IPV6_DST_LO),
    16,
)
.fmt(Fmt::Ipv6)
.nxm(NXM_NX, 110, "NXM_NX_TUN_IPV6_DST");
pub static TUN_METADATA0: Field =
    field("tun_metadata0", Bits(tun_metadata(0)), 4).nxm(NXM_NX, 40, "NXM_NX_TUN_METADATA0");
pub static TUN_METADATA1: Field =
    field("tun_metadata1", Bits(tun_metadata(1)), 4).nxm(NXM_NX, 41, "NXM_NX_TUN_METADATA1");
pub static TUN_METADATA2: Field =
    field("tun_metadata2", Bits(tun_metadata(2)), 4).nxm(NXM_NX, 42, "NXM_NX_TUN_METADATA2");
pub static TUN_METADATA3: Field =
    field("tun_metadata3", Bits(tun_metadata(3)), 4).nxm(NXM_NX, 43, "NXM_NX_TUN_METADATA3");
pub static TUN_METADATA4: Field =
    field("tun_metadata4", Bits(tun_metadata(4)), 4).nxm(NXM_NX, 44, "NXM_NX_TUN_METADATA4");
pub static TUN_METADATA5: Field =
    field("tun_metadata5", Bits(tun_metadata(5)), 4).nxm(NXM_NX, 45, "NXM_NX_TUN_METADATA5");
pub static TUN_METADATA6: Field =
    field("tun_metadata6", Bits(tun_metadata(6)), 4).nxm(NXM_NX, 46, "NXM_NX_TUN_METADATA6");
pub static TUN_METADATA7: Field =
    field("tun_metadata7", Bits(tun_metadata(7)), 4).nxm(NXM_NX, 47, "NXM_NX_TUN_METADATA7");
pub static METADATA: Field =
    field("metadata", Bits(f::METADATA), 8).oxm(OXM_BASIC, 2, "OXM_OF_METADATA");
pub static IN_PORT: Field = field("in_port", Bits(f::IN_PORT), 4)
    .fmt(Fmt::Port)
    .exact()
    .nxm(NXM_OF, 0, "NXM_OF_IN_PORT")
    .oxm(OXM_BASIC, 0, "OXM_OF_IN_PORT");
pub static PKT_MARK: Field =
    field("pkt_mark", Bits(f::PKT_MARK), 4).nxm(NXM_NX, 33, "NXM_NX_PKT_MARK");
pub static CT_STATE: Field = field("ct_state", Bits(f::CT_STATE), 4)
    .fmt(Fmt::CtState)
    .read_only()
    .nxm(NXM_NX, 105, "NXM_NX_CT_STATE");
pub static CT_ZONE: Field = field("ct_zone", Bits(f::CT_ZONE), 2)
    .exact()
    .read_only()
    .nxm(NXM_NX, 106, "NXM_NX_CT_ZONE");
pub static CT_MARK: Field =
    field("ct_mark", Bits(f::CT_MARK), 4).nxm(NXM_NX, 107, "NXM_NX_CT_MARK");
pub static CT_LABEL: Field =
    field("ct_label", Wide(f::CT_LABEL_HI, f::CT_LABEL_LO), 16).nxm(NXM_NX, 108, "NXM_NX_CT_LABEL");
pub static CT_NW_PROTO: Field = field("ct_nw_proto", Bits(f::CT_NW_PROTO), 1)
    .fmt(Fmt::Decimal)
    .pre(Prereq::CtValid)
    .exact()
    .read_only()
    .nxm(NXM_NX, 119, "NXM_NX_CT_NW_PROTO");
pub static CT_NW_SRC: Field = field("ct_nw_src", Bits(f::CT_NW_SRC), 4)
    .fmt(Fmt::Ipv4)
    .pre(Prereq::CtValid)
    .read_only()
    .nxm(NXM_NX, 120, "NXM_NX_CT_NW_SRC");
pub static CT_NW_DST: Field = field("ct_nw_dst", Bits(f::CT_NW_DST), 4)
    .fmt(Fmt::Ipv4)
    .pre(Prereq::CtValid)
    .read_only()
    .nxm(NXM_NX, 121, "NXM_NX_CT_NW_DST");
pub static CT_IPV6_SRC: Field = field(
    "ct_ipv6_src",
    Wide(f::CT_IPV6_SRC_HI, f::CT_IPV6_SRC_LO),
    16,
)
.fmt(Fmt::Ipv6)
.pre(Prereq::CtValid)
.read_only()
.nxm(NXM_NX, 122, "NXM_NX_CT_IPV6_SRC");
pub static CT_IPV6_DST: Field = field(
    "ct_ipv6_dst",
    Wide(f::CT_IPV6_DST_HI, f::CT_IPV6_DST_LO),
    16,
)
.fmt(Fmt::Ipv6)
.pre(Prereq::CtValid)
.read_only()
.nxm(NXM_NX, 123, "NXM_NX_CT_IPV6_DST");
pub static CT_TP_SRC: Field = field("ct_tp_src", Bits(f::CT_TP_SRC), 2)
    .fmt(Fmt::Decimal)
    .pre(Prereq::CtValid)
    .read_only()
    .nxm(NXM_NX, 124, "NXM_NX_CT_TP_SRC");
pub static CT_TP_DST: Field = field("ct_tp_dst", Bits(f::CT_TP_DST), 2)
    .fmt(Fmt::Decimal)
    .pre(Prereq::CtValid)
    .read_only()
    .nxm(NXM_NX, 125, "NXM_NX_CT_TP_DST");
pub static REG0: Field = field("reg0", Bits(reg(0)), 4).nxm(NXM_NX, 0, "NXM_NX_REG0");
pub static REG1: Field = field("reg1", Bits(reg(1)), 4).nxm(NXM_NX, 1, "NXM_NX_REG1");
pub static REG2: Field = field("reg2", Bits(reg(2)), 4).nxm(NXM_NX, 2, "NXM_NX_REG2");
pub static REG3: Field = field("reg3", Bits(reg(3)), 4).nxm(NXM_NX, 3, "NXM_NX_REG3");
pub static REG4: Field = field("reg4", Bits(reg(4)), 4).nxm(NXM_NX, 4, "NXM_NX_REG4");
pub static REG5: Field = field("reg5", Bits(reg(5)), 4).nxm(NXM_NX, 5, "NXM_NX_REG5");
pub static REG6: Field = field("reg6", Bits(reg(6)), 4).nxm(NXM_NX, 6, "NXM_NX_REG6");
pub static REG7: Field = field("reg7", Bits(reg(7)), 4).nxm(NXM_NX, 7, "NXM_NX_REG7");
pub static REG8: Field = field("reg8", Bits(reg(8)), 4).nxm(NXM_NX, 8, "NXM_NX_REG8");
pub static REG9: Field = field("reg9", Bits(reg(9)), 4).nxm(NXM_NX, 9, "NXM_NX_REG9");
pub static REG10: Field = field("reg10", Bits(reg(10)), 4).nxm(NXM_NX, 10, "NXM_NX_REG10");
pub static REG11: Field = field("reg11", Bits(reg(11)), 4).nxm(NXM_NX, 11, "NXM_NX_REG11");
pub static REG12: Field = field("reg12", Bits(reg(12)), 4).nxm(NXM_NX, 12, "NXM_NX_REG12");
pub static REG13: Field = field("reg13", Bits(reg(13)), 4).nxm(NXM_NX, 13, "NXM_NX_REG13");
pub static REG14: Field = field("reg14", Bits(reg(14)), 4).nxm(NXM_NX, 14, "NXM_NX_REG14");
pub static REG15: Field = field("reg15", Bits(reg(15)), 4).nxm(NXM_NX, 15, "NXM_NX_REG15");
pub static XREG0: Field = field("xreg0", Bits(xreg(0)), 8).oxm(OXM_PKT_REGS, 0, "OXM_OF_PKT_REG0");
pub static XREG1: Field = field("xreg1", Bits(xreg(1)), 8).oxm(OXM_PKT_REGS, 1, "OXM_OF_PKT_REG1");
pub static XREG2: Field = field("xreg2", Bits(xreg(2)), 8).oxm(OXM_PKT_REGS, 2, "OXM_OF_PKT_REG2");
pub static XREG3: Field = field("xreg3", Bits(xreg(3)), 8).oxm(OXM_PKT_REGS, 3, "OXM_OF_PKT_REG3");
pub static XREG4: Field = field("xreg4", Bits(xreg(4)), 8).oxm(OXM_PKT_REGS, 4, "OXM_OF_PKT_REG4");
pub static XREG5: Field = field("xreg5", Bits(xreg(5)), 8).oxm(OXM_PKT_REGS, 5, "OXM_OF_PKT_REG5");
pub static XREG6: Field = field("xreg6", Bits(xreg(6)), 8).oxm(OXM_PKT_REGS, 6, "OXM_OF_PKT_REG6");
pub static XREG7: Field = field("xreg7", Bits(xreg(7)), 8).oxm(OXM_PKT_REGS, 7, "OXM_OF_PKT_REG7");
pub static XXREG0: Field =
    field("xxreg0", Wide(xreg(0), xreg(1)), 16).nxm(NXM_NX, 111, "NXM_NX_XXREG0");
pub static XXREG1: Field =
    field("xxreg1", Wide(xreg(2), xreg(3)), 16).nxm(NXM_NX, 112, "NXM_NX_XXREG1");
pub static XXREG2: Field =
    field("xxreg2", Wide(xreg(4), xreg(5)), 16).nxm(NXM_NX, 113, "NXM_NX_XXREG2");
pub static XXREG3: Field =
    field("xxreg3", Wide(xreg(6), xreg(7)), 16).nxm(NXM_NX, 114, "NXM_NX_XXREG3");
pub static ETH_SRC: Field = field("eth_src", Bits(f::DL_SRC), 6)
    .alias("dl_src")
    .fmt(Fmt::Ethernet)
    .nxm(NXM_OF, 2, "NXM_OF_ETH_SRC")
    .oxm(OXM_BASIC, 4, "OXM_OF_ETH_SRC");
pub static ETH_DST: Field = field("eth_dst", Bits(f::DL_DST), 6)
    .alias("dl_dst")
    .fmt(Fmt::Ethernet)
    .nxm(NXM_OF, 1, "NXM_OF_ETH_DST")
    .oxm(OXM_BASIC, 3, "OXM_OF_ETH_DST");
pub static ETH_TYPE: Field = field("eth_type", Bits(f::DL_TYPE), 2)
    .alias("dl_type")
    .exact()
    .read_only()
    .nxm(NXM_OF, 3, "NXM_OF_ETH_TYPE")
    .oxm(OXM_BASIC, 5, "OXM_OF_ETH_TYPE");
pub static VLAN_TCI: Field =
    field("vlan_tci", Bits(f::VLAN_TCI), 2).nxm(NXM_OF, 4, "NXM_OF_VLAN_TCI");
pub static VLAN_VID: Field = field(
    "vlan_vid",
    Bits(FieldPos {
        word: 0,
        shift: 48,
        bits: 13,
    }),
    2,
)
.fmt(Fmt::Decimal)
.oxm(OXM_BASIC, 6, "OXM_OF_VLAN_VID");
pub static VLAN_PCP: Field = field(
    "vlan_pcp",
    Bits(FieldPos {
        word: 0,
        shift: 61,
        bits: 3,
    }),
    1,
)
.fmt(Fmt::Decimal)
.pre(Prereq::VlanVid)
.exact()
.oxm(OXM_BASIC, 7, "OXM_OF_VLAN_PCP");
pub static IP_SRC: Field = field("ip_src", Bits(f::NW_SRC), 4)
    .alias("nw_src")
    .fmt(Fmt::Ipv4)
    .pre(Prereq::Ipv4)
    .nxm(NXM_OF, 7, "NXM_OF_IP_SRC")
    .oxm(OXM_BASIC, 11, "OXM_OF_IPV4_SRC");
pub static IP_DST: Field = field("ip_dst", Bits(f::NW_DST), 4)
    .alias("nw_dst")
    .fmt(Fmt::Ipv4)
    .pre(Prereq::Ipv4)
    .nxm(NXM_OF, 8, "NXM_OF_IP_DST")
    .oxm(OXM_BASIC, 12, "OXM_OF_IPV4_DST");
pub static IPV6_SRC: Field = field("ipv6_src", Wide(f::IPV6_SRC_HI, f::IPV6_SRC_LO), 16)
    .fmt(Fmt::Ipv6)
    .pre(Prereq::Ipv6)
    .nxm(NXM_NX, 19, "NXM_NX_IPV6_SRC")
    .oxm(OXM_BASIC, 26, "OXM_OF_IPV6_SRC");
pub static IPV6_DST: Field = field("ipv6_dst", Wide(f::IPV6_DST_HI, f::IPV6_DST_LO), 16)
    .fmt(Fmt::Ipv6)
    .pre(Prereq::Ipv6)
    .nxm(NXM_NX, 20, "NXM_NX_IPV6_DST")
    .oxm(OXM_BASIC, 27, "OXM_OF_IPV6_DST");
pub static IPV6_LABEL: Field = field("ipv6_label", Bits(f::IPV6_LABEL), 4)
    .pre(Prereq::Ipv6)
    .nxm(NXM_NX, 27, "NXM_NX_IPV6_LABEL")
    .oxm(OXM_BASIC, 28, "OXM_OF_IPV6_FLABEL");
pub static NW_PROTO: Field = field("nw_proto", Bits(f::NW_PROTO), 1)
    .alias("ip_proto")
    .fmt(Fmt::Decimal)
    .pre(Prereq::IpAny)
    .exact()
    .read_only()
    .nxm(NXM_OF, 6, "NXM_OF_IP_PROTO")
    .oxm(OXM_BASIC, 10, "OXM_OF_IP_PROTO");
pub static NW_TOS: Field = field("nw_tos", Bits(f::NW_DSCP), 1)
    .fmt(Fmt::Decimal)
    .pre(Prereq::IpAny)
    .shift(2)
    .exact()
    .nxm(NXM_OF, 5, "NXM_OF_IP_TOS");
pub static IP_DSCP: Field = field("ip_dscp", Bits(f::NW_DSCP), 1)
    .fmt(Fmt::Decimal)
    .pre(Prereq::IpAny)
    .exact()
    .oxm(OXM_BASIC, 8, "OXM_OF_IP_DSCP");
pub static NW_ECN: Field = field("nw_ecn", Bits(f::NW_ECN), 1)
    .alias("ip_ecn")
    .fmt(Fmt::Decimal)
    .pre(Prereq::IpAny)
    .exact()
    .nxm(NXM_NX, 28, "NXM_NX_IP_ECN")
    .oxm(OXM_BASIC, 9, "OXM_OF_IP_ECN");
pub static NW_TTL: Field = field("nw_ttl", Bits(f::NW_TTL), 1)
    .fmt(Fmt::Decimal)
    .pre(Prereq::IpAny)
    .exact()
    .nxm(NXM_NX, 29, "NXM_NX_IP_TTL");
pub static IP_FRAG: Field = field("ip_frag", Bits(f::NW_FRAG), 1)
    .alias("nw_frag")
    .fmt(Fmt::Frag)
    .pre(Prereq::IpAny)
    .read_only()
    .nxm(NXM_NX, 26, "NXM_NX_IP_FRAG");
pub static ARP_OP: Field = field("arp_op", Bits(f::NW_PROTO), 2)
    .fmt(Fmt::Decimal)
    .pre(Prereq::Arp)
    .exact()
    .nxm(NXM_OF, 15, "NXM_OF_ARP_OP")
    .oxm(OXM_BASIC, 21, "OXM_OF_ARP_OP");
pub static ARP_SPA: Field = field("arp_spa", Bits(f::NW_SRC), 4)
    .fmt(Fmt::Ipv4)
    .pre(Prereq::Arp)
    .nxm(NXM_OF, 16, "NXM_OF_ARP_SPA")
    .oxm(OXM_BASIC, 22, "OXM_OF_ARP_SPA");
pub static ARP_TPA: Field = field("arp_tpa", Bits(f::NW_DST), 4)
    .fmt(Fmt::Ipv4)
    .pre(Prereq::Arp)
    .nxm(NXM_OF, 17, "NXM_OF_ARP_TPA")
    .oxm(OXM_BASIC, 23, "OXM_OF_ARP_TPA");
pub static ARP_SHA: Field = field("arp_sha", Bits(f::ARP_SHA), 6)
    .fmt(Fmt::Ethernet)
    .pre(Prereq::Arp)
    .nxm(NXM_NX, 17, "NXM_NX_ARP_SHA")
    .oxm(OXM_BASIC, 24, "OXM_OF_ARP_SHA");
pub static ARP_THA: Field = field("arp_tha", Bits(f::ARP_THA), 6)
    .fmt(Fmt::Ethernet)
    .pre(Prereq::Arp)
    .nxm(NXM_NX, 18, "NXM_NX_ARP_THA")
    .oxm(OXM_BASIC, 25, "OXM_OF_ARP_THA");
pub static TCP_SRC: Field = field("tcp_src", Bits(f::TP_SRC), 2)
    .alias("tp_src")
    .fmt(Fmt::Decimal)
    .pre(Prereq::Tcp)
    .nxm(NXM_OF, 9, "NXM_OF_TCP_SRC")
    .oxm(OXM_BASIC, 13, "OXM_OF_TCP_SRC");
pub static TCP_DST: Field = field("tcp_dst", Bits(f::TP_DST), 2)
    .alias("tp_dst")
    .fmt(Fmt::Decimal)
    .pre(Prereq::Tcp)
    .nxm(NXM_OF, 10, "NXM_OF_TCP_DST")
    .oxm(OXM_BASIC, 14, "OXM_OF_TCP_DST");
pub static TCP_FLAGS: Field = field("tcp_flags", Bits(f::TCP_FLAGS), 2)
    .fmt(Fmt::TcpFlags)
    .pre(Prereq::Tcp)
    .read_only()
    .nxm(NXM_NX, 34, "NXM_NX_TCP_FLAGS")
    .oxm(OXM_BASIC, 42, "OXM_OF_TCP_FLAGS");
pub static UDP_SRC: Field = field("udp_src", Bits(f::TP_SRC), 2)
    .fmt(Fmt::Decimal)
    .pre(Prereq::Udp)
    .nxm(NXM_OF, 11, "NXM_OF_UDP_SRC")
    .oxm(OXM_BASIC, 15, "OXM_OF_UDP_SRC");
pub static UDP_DST: Field = field("udp_dst", Bits(f::TP_DST), 2)
    .fmt(Fmt::Decimal)
    .pre(Prereq::Udp)
    .nxm(NXM_OF, 12, "NXM_OF_UDP_DST")
    .oxm(OXM_BASIC, 16, "OXM_OF_UDP_DST");
pub static SCTP_SRC: Field = field("sctp_src", Bits(f::TP_SRC), 2)
    .fmt(Fmt::Decimal)
    .pre(Prereq::Sctp)
    .oxm(OXM_BASIC, 17, "OXM_OF_SCTP_SRC");
pub static SCTP_DST: Field = field("sctp_dst", Bits(f::TP_DST), 2)
    .fmt(Fmt::Decimal)
    .pre(Prereq::Sctp)
    .oxm(OXM_BASIC, 18, "OXM_OF_SCTP_DST");
pub static ICMP_TYPE: Field = field("icmp_type", Bits(f::TP_SRC), 1)
    .fmt(Fmt::Decimal)
    .pre(Prereq::Icmpv4)
    .exact()
    .nxm(NXM_OF, 13, "NXM_OF_ICMP_TYPE")
    .oxm(OXM_BASIC, 19, "OXM_OF_ICMPV4_TYPE");
pub static ICMP_CODE: Field = field("icmp_code", Bits(f::TP_DST), 1)
    .fmt(Fmt::Decimal)
    .pre(Prereq::Icmpv4)
    .exact()
    .nxm(NXM_OF, 14, "NXM_OF_ICMP_CODE")
    .oxm(OXM_BASIC, 20, "OXM_OF_ICMPV4_CODE");
pub static ICMPV6_TYPE: Field = field("icmpv6_type", Bits(f::TP_SRC), 1)
    .fmt(Fmt::Decimal)
    .pre(Prereq::Icmpv6)
    .exact()
    .nxm(NXM_NX, 21, "NXM_NX_ICMPV6_TYPE")
    .oxm(OXM_BASIC, 29, "OXM_OF_ICMPV6_TYPE");
pub static ICMPV6_CODE: Field = field("icmpv6_code", Bits(f::TP_DST), 1)
    .fmt(Fmt::Decimal)
    .pre(Prereq::Icmpv6)
    .exact()
    .nxm(NXM_NX, 22, "NXM_NX_ICMPV6_CODE")
    .oxm(OXM_BASIC, 30, "OXM_OF_ICMPV6_CODE");
pub static ND_TARGET: Field = field("nd_target", Wide(f::ND_TARGET_HI, f::ND_TARGET_LO), 16)
    .fmt(Fmt::Ipv6)
    .pre(Prereq::Nd)
    .nxm(NXM_NX, 23, "NXM_NX_ND_TARGET")
    .oxm(OXM_BASIC, 31, "OXM_OF_IPV6_ND_TARGET");
pub static ND_SLL: Field = field("nd_sll", Bits(f::ARP_SHA), 6)
    .fmt(Fmt::Ethernet)
    .pre(Prereq::NdSolicit)
    .nxm(NXM_NX, 24, "NXM_NX_ND_SLL")
    .oxm(OXM_BASIC, 32, "OXM_OF_IPV6_ND_SLL");
pub static ND_TLL: Field = field("nd_tll", Bits(f::ARP_THA), 6)
    .fmt(Fmt::Ethernet)
    .pre(Prereq::NdAdvert)
    .nxm(NXM_NX, 25, "NXM_NX_ND_TLL")
    .oxm(OXM_BASIC, 33, "OXM_OF_IPV6_ND_TLL");

/// Every field, in the order of OVS's `meta-flow.h`.
pub static FIELDS: &[&Field] = &[
    &DP_HASH,
    &RECIRC_ID,
    &CONJ_ID,
    &TUN_ID,
    &TUN_SRC,
    &TUN_DST,
    &TUN_IPV6_SRC,
    &TUN_IPV6_DST,
    &TUN_METADATA0,
    &TUN_METADATA1,
    &TUN_METADATA2,
    &TUN_METADATA3,
    &TUN_METADATA4,
    &TUN_METADATA5,
    &TUN_METADATA6,
    &TUN_METADATA7,
    &METADATA,
    &IN_PORT,
    &PKT_MARK,
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
    &REG0,
    &REG1,
    &REG2,
    &REG3,
    &REG4,
    &REG5,
    &REG6,
    &REG7,
    &REG8,
    &REG9,
    &REG10,
    &REG11,
    &REG12,
    &REG13,
    &REG14,
    &REG15,
    &XREG0,
    &XREG1,
    &XREG2,
    &XREG3,
    &XREG4,
    &XREG5,
    &XREG6,
    &XREG7,
    &XXREG0,
    &XXREG1,
    &XXREG2,
    &XXREG3,
    &ETH_SRC,
    &ETH_DST,
    &ETH_TYPE,
    &VLAN_TCI,
    &VLAN_VID,
    &VLAN_PCP,
    &IP_SRC,
    &IP_DST,
    &IPV6_SRC,
    &IPV6_DST,
    &IPV6_LABEL,
    &NW_PROTO,
    &NW_TOS,
    &IP_DSCP,
    &NW_ECN,
    &NW_TTL,
    &IP_FRAG,
    &ARP_OP,
    &ARP_SPA,
    &ARP_TPA,
    &ARP_SHA,
    &ARP_THA,
    &TCP_SRC,
    &TCP_DST,
    &TCP_FLAGS,
    &UDP_SRC,
    &UDP_DST,
    &SCTP_SRC,
    &SCTP_DST,
    &ICMP_TYPE,
    &ICMP_CODE,
    &ICMPV6_TYPE,
    &ICMPV6_CODE,
    &ND_TARGET,
    &ND_SLL,
    &ND_TLL,
];
