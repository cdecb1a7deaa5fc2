//! A rule's match on the wire, both ways, through the field table
//! (`tunlab_dp::field`): OXM (OpenFlow 1.2+) and NXM (OpenFlow 1.0 with
//! Nicira's extensions) TLVs read straight into the typed [`Match`], and a
//! match written as the TLVs Open vSwitch writes for it, in its order
//! (`nx_put_raw`) and with the header it picks per version (the OXM one
//! where the field has one, else NXM; OpenFlow 1.5's packet registers
//! instead of reg0..reg15). Nothing goes through text.

use super::Field;
use tunlab_dp::field::{self, Field as Mf, NXM_NX, NXM_OF, REGS, TUN_METADATA, XREGS};
use tunlab_dp::key::f;
use tunlab_dp::Match;
use tunlab_wire::openflow::{self as of, Oxm};

/// How a match is written: NXM (OpenFlow 1.0), or OXM for an OpenFlow
/// version (1.3, 1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Nxm,
    Oxm(u8),
}

/// Bad match codes OVS sends (OpenFlow 1.3 § 7.4.4).
pub const BMC_BAD_WILDCARDS: u16 = 5;
pub const BMC_BAD_VALUE: u16 = 7;
pub const BMC_BAD_MASK: u16 = 8;
pub const BMC_DUP_FIELD: u16 = 10;

/// Nicira's cookie-in-the-match field (1.0 with NXM picks rules by it).
const NXM_NX_COOKIE: u8 = 30;

/// A match read off the wire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pulled {
    pub m: Match,
    /// The cookie it picks rules by, if it carried Nicira's cookie field:
    /// (value, mask).
    pub cookie: Option<(u64, u64)>,
}

/// Read OXM or NXM TLVs into a match, as OVS's `nx_pull_match` does: a
/// field tunlab does not hold is a bad field, a value of the wrong length
/// a bad length, a mask on a field matched only whole a bad mask, a value
/// with bits its mask wildcards bad wildcards, a field twice a duplicate,
/// and a field whose prerequisite the match lacks a bad prerequisite.
pub fn pull_match(oxms: &[Oxm<'_>]) -> Result<Pulled, (u16, u16)> {
    let bad = |code| (of::ET_BAD_MATCH, code);
    let mut out = Pulled::default();
    let mut seen: Vec<(u16, u8)> = Vec::new();
    let mut prereqs = Vec::new();
    for o in oxms {
        if seen.contains(&(o.class, o.field)) {
            return Err(bad(BMC_DUP_FIELD));
        }
        seen.push((o.class, o.field));
        if (o.class, o.field) == (NXM_NX, NXM_NX_COOKIE) {
            let v = be_u128(o.value, 8).ok_or(bad(of::BMC_BAD_LEN))? as u64;
            let m = match o.mask {
                Some(m) => be_u128(m, 8).ok_or(bad(of::BMC_BAD_LEN))? as u64,
                None => u64::MAX,
            };
            out.cookie = Some((v, m));
            continue;
        }
        let fl = field::by_code(o.class, o.field).ok_or(bad(of::BMC_BAD_FIELD))?;
        let (v, m) = pull_value(fl, o)?;
        fl.set_match(&mut out.m.value, &mut out.m.mask, v, m);
        prereqs.push(fl.prereq);
    }
    if out.m.mask.get(f::TUN_SRC) != 0 || out.m.mask.get(f::TUN_DST) != 0 {
        out.m.value.set(f::TUN_FAMILY, 4);
        out.m.mask.set(f::TUN_FAMILY, f::TUN_FAMILY.max());
    } else if field::TUN_IPV6_SRC.get(&out.m.mask) != 0 || field::TUN_IPV6_DST.get(&out.m.mask) != 0
    {
        out.m.value.set(f::TUN_FAMILY, 6);
        out.m.mask.set(f::TUN_FAMILY, f::TUN_FAMILY.max());
    }
    if prereqs.iter().any(|p| !p.met(&out.m.value, &out.m.mask)) {
        return Err(bad(of::BMC_BAD_PREREQ));
    }
    Ok(out)
}

/// One TLV's value and mask in the field's own terms.
fn pull_value(fl: &'static Mf, o: &Oxm<'_>) -> Result<(u128, u128), (u16, u16)> {
    let bad = |code| (of::ET_BAD_MATCH, code);
    // NXM's in_port is OpenFlow 1.0's 16-bit port.
    let nxm_in_port = fl.name == "in_port" && o.class == NXM_OF;
    let bytes = if nxm_in_port { 2 } else { fl.bytes as usize };
    // tun_metadataN's length is the TLV map's: tunlab's hold up to 4.
    let tun_md = fl.name.starts_with("tun_metadata");
    let fits = |b: &[u8]| b.len() == bytes || (tun_md && !b.is_empty() && b.len() <= bytes);
    if !fits(o.value) || o.mask.is_some_and(|m| !fits(m) || m.len() != o.value.len()) {
        return Err(bad(of::BMC_BAD_LEN));
    }
    let mut v = be_u128(o.value, o.value.len()).ok_or(bad(of::BMC_BAD_LEN))?;
    if nxm_in_port {
        v = u128::from(of::port_from10(v as u16));
    }
    let ones = fl.all_ones();
    let m = match o.mask {
        Some(mb) => be_u128(mb, mb.len()).ok_or(bad(of::BMC_BAD_LEN))?,
        None => ones,
    };
    // A field's value in OpenFlow terms may be narrower than its storage
    // (icmp_type is a byte kept in 16-bit tp_src): an exact match is all
    // of the storage, as OVS's is.
    let m = if m == fl.max_value() { ones } else { m };
    if !fl.maskable && m != ones {
        return Err(bad(BMC_BAD_MASK));
    }
    if v & !m != 0 {
        return Err(bad(BMC_BAD_WILDCARDS));
    }
    if v & !fl.max_value() != 0 || m & !ones != 0 {
        return Err(bad(BMC_BAD_VALUE));
    }
    Ok((v, m))
}

/// `b` as a big-endian number if it is `len` bytes of at most 16.
fn be_u128(b: &[u8], len: usize) -> Option<u128> {
    (b.len() == len && len <= 16).then(|| b.iter().fold(0u128, |a, &x| (a << 8) | u128::from(x)))
}

/// The TLVs of a match, built in order.
struct Put<'a> {
    m: &'a Match,
    enc: Encoding,
    out: Vec<Field>,
}

impl Put<'_> {
    /// The header OVS picks for `fl` in this encoding: OXM's where the
    /// field has one (and the encoding is OXM, or the field has no NXM
    /// header), else NXM's.
    fn header(&self, fl: &Mf) -> Option<(u16, u8)> {
        let c = match self.enc {
            Encoding::Oxm(_) => fl.oxm.or(fl.nxm),
            Encoding::Nxm => fl.nxm.or(fl.oxm),
        }?;
        Some((c.class, c.field))
    }

    /// Field `name` if the match constrains any of it: `v` and `m` in the
    /// field's terms, `bytes` on the wire; masked only where not exact.
    fn raw(&mut self, fl: &Mf, v: u128, m: u128, bytes: usize) {
        let Some((class, code)) = self.header(fl) else {
            return;
        };
        if m == 0 {
            return;
        }
        let full = if bytes >= 16 {
            u128::MAX
        } else {
            (1u128 << (bytes * 8)) - 1
        };
        let be = |x: u128| x.to_be_bytes()[16 - bytes..].to_vec();
        let exact = m & full == full || m == fl.all_ones() || m == fl.max_value();
        self.out.push(Field {
            class,
            field: code,
            value: be(v & full),
            mask: (!exact).then(|| be(m & full)),
        });
    }

    /// Field `fl` as the match holds it.
    fn put(&mut self, fl: &Mf) {
        let (v, m) = self.get(fl);
        self.raw(fl, v, m, fl.bytes as usize);
    }

    fn get(&self, fl: &Mf) -> (u128, u128) {
        (fl.get(&self.m.value), fl.get(&self.m.mask))
    }
}

/// The match of `m` as TLVs, in Open vSwitch's order: metadata, in_port,
/// Ethernet, VLAN, L3 and L4 (or ARP), the tunnel, registers, the packet
/// mark, conntrack, metadata.
pub fn put_match(m: &Match, enc: Encoding) -> Vec<Field> {
    let mut p = Put {
        m,
        enc,
        out: Vec::new(),
    };
    p.put(&field::DP_HASH);
    p.put(&field::RECIRC_ID);
    p.put(&field::CONJ_ID);
    let (port, port_m) = p.get(&field::IN_PORT);
    if port_m != 0 {
        match enc {
            Encoding::Oxm(_) => p.raw(&field::IN_PORT, port, u128::MAX, 4),
            Encoding::Nxm => {
                let p10 = of::port_to10(port as u32);
                p.out.push(Field {
                    class: NXM_OF,
                    field: 0,
                    value: p10.to_be_bytes().to_vec(),
                    mask: None,
                });
            }
        }
    }
    p.put(&field::ETH_SRC);
    p.put(&field::ETH_DST);
    p.put(&field::ETH_TYPE);
    put_vlan(&mut p);
    let et = m.value.get(f::DL_TYPE);
    if et == 0x0800 || et == 0x86dd {
        put_ip(&mut p, et == 0x0800);
    } else if et == 0x0806 || et == 0x8035 {
        p.put(&field::ARP_OP);
        p.put(&field::ARP_SPA);
        p.put(&field::ARP_TPA);
        p.put(&field::ARP_SHA);
        p.put(&field::ARP_THA);
    }
    p.put(&field::TUN_ID);
    p.put(&field::TUN_SRC);
    p.put(&field::TUN_DST);
    p.put(&field::TUN_IPV6_SRC);
    p.put(&field::TUN_IPV6_DST);
    for fl in TUN_METADATA {
        p.put(fl);
    }
    let regs: &[&Mf] = if matches!(enc, Encoding::Oxm(v) if v >= of::OF15) {
        &XREGS
    } else {
        &REGS
    };
    for fl in regs {
        p.put(fl);
    }
    p.put(&field::PKT_MARK);
    p.put(&field::CT_STATE);
    p.put(&field::CT_ZONE);
    p.put(&field::CT_MARK);
    p.put(&field::CT_LABEL);
    p.put(&field::CT_NW_SRC);
    p.put(&field::CT_IPV6_SRC);
    p.put(&field::CT_NW_DST);
    p.put(&field::CT_IPV6_DST);
    if m.value.get(f::CT_NW_PROTO) != 0 {
        p.put(&field::CT_NW_PROTO);
        p.put(&field::CT_TP_SRC);
        p.put(&field::CT_TP_DST);
    }
    p.put(&field::METADATA);
    p.out
}

/// The VLAN: in OXM the VID with its present bit and the priority; in
/// NXM the TCI whole.
fn put_vlan(p: &mut Put<'_>) {
    let (tci, mask) = (
        p.m.value.get(f::VLAN_TCI) as u128,
        p.m.mask.get(f::VLAN_TCI) as u128,
    );
    match p.enc {
        Encoding::Nxm => p.put(&field::VLAN_TCI),
        Encoding::Oxm(_) => {
            let (vid, vm) = (tci & 0x1fff, mask & 0x1fff);
            p.raw(&field::VLAN_VID, vid, vm, 2);
            if vid != 0 && mask & 0xe000 != 0 {
                p.raw(&field::VLAN_PCP, tci >> 13, u128::MAX, 1);
            }
        }
    }
}

/// IPv4's or IPv6's fields, then the transport's named by the protocol.
fn put_ip(p: &mut Put<'_>, v4: bool) {
    if v4 {
        p.put(&field::IP_SRC);
        p.put(&field::IP_DST);
    } else {
        p.put(&field::IPV6_SRC);
        p.put(&field::IPV6_DST);
    }
    let (frag, frag_m) = p.get(&field::IP_FRAG);
    p.raw(
        &field::IP_FRAG,
        frag,
        if frag_m == 3 { 0xff } else { frag_m },
        1,
    );
    let tos_m = p.m.mask.get(f::NW_TOS) as u128;
    let tos = p.m.value.get(f::NW_TOS) as u128;
    if tos_m & 0xfc != 0 {
        match p.enc {
            Encoding::Oxm(_) => p.raw(&field::IP_DSCP, tos >> 2, u128::MAX, 1),
            Encoding::Nxm => p.raw(&field::NW_TOS, tos & 0xfc, u128::MAX, 1),
        }
    }
    if tos_m & 0x03 != 0 {
        p.raw(&field::NW_ECN, tos & 3, u128::MAX, 1);
    }
    p.put(&field::NW_TTL);
    p.put(&field::IPV6_LABEL);
    let (proto, proto_m) = p.get(&field::NW_PROTO);
    if proto_m == 0 {
        return;
    }
    p.put(&field::NW_PROTO);
    let (s, d) = (p.get(&field::TCP_SRC), p.get(&field::TCP_DST));
    match proto {
        6 => {
            p.raw(&field::TCP_SRC, s.0, s.1, 2);
            p.raw(&field::TCP_DST, d.0, d.1, 2);
            p.put(&field::TCP_FLAGS);
        }
        17 => {
            p.raw(&field::UDP_SRC, s.0, s.1, 2);
            p.raw(&field::UDP_DST, d.0, d.1, 2);
        }
        132 => {
            p.raw(&field::SCTP_SRC, s.0, s.1, 2);
            p.raw(&field::SCTP_DST, d.0, d.1, 2);
        }
        1 if v4 => {
            p.raw(&field::ICMP_TYPE, s.0, s.1, 1);
            p.raw(&field::ICMP_CODE, d.0, d.1, 1);
        }
        58 if !v4 => {
            p.raw(&field::ICMPV6_TYPE, s.0, s.1, 1);
            p.raw(&field::ICMPV6_CODE, d.0, d.1, 1);
            let nd = d.0 == 0 && (s.0 == 135 || s.0 == 136);
            if nd {
                p.put(&field::ND_TARGET);
                if s.0 == 135 {
                    p.put(&field::ND_SLL);
                } else {
                    p.put(&field::ND_TLL);
                }
            }
        }
        _ => {}
    }
}

/// The body of the `nx_match` fuzz target: any bytes read as OXM TLVs
/// either make no match (an error, never a panic) or a match that, written
/// back in every encoding, reads back as itself.
#[doc(hidden)]
pub fn fuzz_pull(data: &[u8]) {
    let Ok(oxms) = of::oxms(data, 0) else {
        return;
    };
    let Ok(pulled) = pull_match(&oxms) else {
        return;
    };
    for enc in [
        Encoding::Nxm,
        Encoding::Oxm(of::OF13),
        Encoding::Oxm(of::OF15),
    ] {
        let fields = put_match(&pulled.m, enc);
        let again: Vec<Oxm<'_>> = fields.iter().map(Field::oxm).collect();
        let back = pull_match(&again).expect("a written match reads back");
        assert_eq!(back.m, pulled.m, "{enc:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunlab_dp::{parse_flow, NumericPorts};

    fn roundtrip(text: &str) {
        let m = parse_flow(&format!("{text} actions=drop"), &NumericPorts)
            .unwrap_or_else(|e| panic!("{e}"))
            .m;
        for enc in [
            Encoding::Nxm,
            Encoding::Oxm(of::OF13),
            Encoding::Oxm(of::OF15),
        ] {
            let fields = put_match(&m, enc);
            let oxms: Vec<Oxm<'_>> = fields.iter().map(Field::oxm).collect();
            assert_eq!(pull_match(&oxms).map(|p| p.m), Ok(m), "{text} {enc:?}");
        }
    }

    #[test]
    fn ovns_fields_survive_every_encoding() {
        for text in [
            "ct_state=-new-est+rel-inv+trk,ct_mark=0/0x1,ip,metadata=0x2",
            "ip,reg0=0x2002/0x2002,reg15=0x3,metadata=0x1",
            "icmp6,reg14=0x2,metadata=0x2,nw_ttl=225,icmp_type=136,icmp_code=0,nd_target=fe80::1,nd_tll=00:00:00:00:00:01",
            "icmp6,metadata=0x1,icmp_type=135,icmp_code=0,nd_sll=0a:00:00:00:00:01",
            "arp,metadata=0x1,arp_spa=10.0.0.1,arp_tpa=10.0.2.14,arp_op=1,arp_sha=0a:00:00:00:00:01",
            "ip,metadata=0x3,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,nw_dst=224.0.0.0/4,nw_ttl=1,nw_frag=not_later",
            "tcp6,metadata=0x2,tcp_flags=+syn-ack,ipv6_label=0x12345",
            "conj_id=7,pkt_mark=0x5/0xff,ct_zone=3,ct_label=0x1/0x1",
            "ip,ct_state=+trk+est,ct_nw_src=10.0.0.1,ct_nw_proto=6,ct_tp_dst=80",
            "sctp,tp_dst=5000,nw_tos=184,nw_ecn=1",
            "in_port=LOCAL,vlan_tci=0x1005/0x1fff",
        ] {
            roundtrip(text);
        }
    }

    #[test]
    fn ovs_refusals() {
        let v = [0u8; 4];
        let one = |class, field, value: &[u8], mask: Option<&[u8]>| {
            let o = [Oxm {
                class,
                field,
                value,
                mask,
            }];
            pull_match(&o).map(|p| p.m)
        };
        // nw_ttl is matched whole.
        assert_eq!(
            one(NXM_NX, 29, &[5], Some(&[0xf0])),
            Err((of::ET_BAD_MATCH, BMC_BAD_MASK))
        );
        // reg0 holds four bytes.
        assert_eq!(
            one(NXM_NX, 0, &v[..2], None),
            Err((of::ET_BAD_MATCH, of::BMC_BAD_LEN))
        );
        // A value bit its mask wildcards.
        assert_eq!(
            one(NXM_NX, 0, &[0, 0, 0, 3], Some(&[0, 0, 0, 1])),
            Err((of::ET_BAD_MATCH, BMC_BAD_WILDCARDS))
        );
        // No such field.
        assert_eq!(
            one(NXM_NX, 99, &v, None),
            Err((of::ET_BAD_MATCH, of::BMC_BAD_FIELD))
        );
        // ct_nw_src without a tracked connection matched.
        assert_eq!(
            one(NXM_NX, 120, &v, None),
            Err((of::ET_BAD_MATCH, of::BMC_BAD_PREREQ))
        );
        let twice = [
            Oxm {
                class: NXM_NX,
                field: 0,
                value: &v,
                mask: None,
            },
            Oxm {
                class: NXM_NX,
                field: 0,
                value: &v,
                mask: None,
            },
        ];
        assert_eq!(
            pull_match(&twice).map(|p| p.m),
            Err((of::ET_BAD_MATCH, BMC_DUP_FIELD))
        );
    }

    #[test]
    fn garbage_never_panics() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            let n = (x % 48) as usize;
            let bytes: Vec<u8> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Mostly the classes and fields that exist.
                    match x % 5 {
                        0 => 0x80,
                        1 => 0x01,
                        2 => 0x00,
                        _ => x as u8,
                    }
                })
                .collect();
            fuzz_pull(&bytes);
        }
    }
}
