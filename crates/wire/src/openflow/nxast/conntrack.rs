//! NXAST_CT and NXAST_NAT (their layouts in `nxast`'s table, with how
//! `encode_NAT` writes a nat and what may nest in a ct): their flags and
//! numbers, a ct's zone and a nat's addresses, the readers, the writers
//! and [`ct_only`].

use super::{bad, finish, start_nx, zeros, OxmHeader, NXAST_CT, NXAST_NAT, OXM_EXPERIMENTER};
use crate::error::{need, Layer, Result};
use crate::openflow::{Action, NXM_1};
use crate::{be16, be32};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// NXAST_CT's flags (`enum nx_conntrack_flags`): commit the connection;
/// force (with commit only) ends a committed connection of the other
/// direction first. Open vSwitch 3.1 has no others (and does not check
/// the rest are zero, though the header says they must be: here they
/// are refused, so that none is dropped unread).
pub const NX_CT_F_COMMIT: u16 = 1 << 0;
pub const NX_CT_F_FORCE: u16 = 1 << 1;
/// NXAST_CT's `recirc_table` for "no recirculation" (OFPTT_ALL).
pub const NX_CT_RECIRC_NONE: u8 = 0xff;
/// NXAST_CT's `alg` values Open vSwitch parses (`alg=ftp`, `alg=tftp`):
/// the protocols' well-known ports.
pub const IPPORT_FTP: u16 = 21;
pub const IPPORT_TFTP: u16 = 69;

/// NXAST_NAT's flags (`enum nx_nat_flags`): src and dst exclude each
/// other, and so do hash and random.
pub const NX_NAT_F_SRC: u16 = 1 << 0;
pub const NX_NAT_F_DST: u16 = 1 << 1;
pub const NX_NAT_F_PERSISTENT: u16 = 1 << 2;
pub const NX_NAT_F_PROTO_HASH: u16 = 1 << 3;
pub const NX_NAT_F_PROTO_RANDOM: u16 = 1 << 4;
pub const NX_NAT_F_MASK: u16 = 0x1f;
/// NXAST_NAT's `range_present` bits (`enum nx_nat_range`), in the order
/// their fields follow.
pub const NX_NAT_RANGE_IPV4_MIN: u16 = 1 << 0;
pub const NX_NAT_RANGE_IPV4_MAX: u16 = 1 << 1;
pub const NX_NAT_RANGE_IPV6_MIN: u16 = 1 << 2;
pub const NX_NAT_RANGE_IPV6_MAX: u16 = 1 << 3;
pub const NX_NAT_RANGE_PROTO_MIN: u16 = 1 << 4;
pub const NX_NAT_RANGE_PROTO_MAX: u16 = 1 << 5;

/// The conntrack fields a ct's nested actions may set (NXM only, in
/// every version: Open vSwitch gives them no OXM header).
pub const NXM_NX_CT_MARK: OxmHeader = OxmHeader::new(NXM_1, 107, 4);
pub const NXM_NX_CT_LABEL: OxmHeader = OxmHeader::new(NXM_1, 108, 16);

/// A ct's zone (NXAST_CT's zone_src and the two bytes after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CtZone {
    /// `zone=N` (zone_src 0, zone_imm N; 0 is the default zone, which
    /// `ct(...)` without a zone means).
    Imm(u16),
    /// `zone=FIELD[ofs..ofs+n_bits-1]`: the zone is those bits of the
    /// packet's field `src` (a 4-byte NXM or OXM header, never an
    /// experimenter's). `n_bits` is 16 (Open vSwitch refuses any other),
    /// `ofs` has 10 bits on the wire. A `src` whose 32 bits are zero
    /// cannot be written (it reads back as `Imm`).
    Field {
        src: OxmHeader,
        ofs: u16,
        n_bits: u16,
    },
}

/// NXAST_NAT's address range: its first address and, when the action
/// has one (NX_NAT_RANGE_IPV4_MAX / _IPV6_MAX), its last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatAddrs {
    V4 {
        min: Ipv4Addr,
        max: Option<Ipv4Addr>,
    },
    V6 {
        min: Ipv6Addr,
        max: Option<Ipv6Addr>,
    },
}

impl NatAddrs {
    /// The range's first and last address (the first again when it has
    /// no last).
    pub fn range(&self) -> (IpAddr, IpAddr) {
        match *self {
            NatAddrs::V4 { min, max } => (min.into(), max.unwrap_or(min).into()),
            NatAddrs::V6 { min, max } => (min.into(), max.unwrap_or(min).into()),
        }
    }
}

/// Whether Open vSwitch takes action `a` only inside a ct, and inside a
/// ct only such actions (`ofpacts_verify_nested`): a nat, or a set_field,
/// load or move whose destination is ct_mark or ct_label
/// ([`NXM_NX_CT_MARK`], [`NXM_NX_CT_LABEL`]). Open vSwitch refuses, after
/// decoding, one of these outside a ct (OFPBAC_BAD_SET_ARGUMENT: "cannot
/// set CT fields outside of ct action", "Cannot have NAT action outside
/// of \"ct\" action") and any other action inside a ct
/// (OFPBAC_BAD_ARGUMENT); the readers here do not, the caller does, with
/// those codes.
pub fn ct_only(a: &Action<'_>) -> bool {
    let ct_field = |class: u16, field: u8| {
        class == NXM_1 && (field == NXM_NX_CT_MARK.field || field == NXM_NX_CT_LABEL.field)
    };
    match a {
        Action::Nat { .. } => true,
        Action::SetField(o) | Action::RegLoad2(o) => ct_field(o.class, o.field),
        Action::RegLoad { dst, .. } | Action::Move { dst, .. } => ct_field(dst.class, dst.field),
        _ => false,
    }
}

/// NXAST_CT, whole, at `at` (at least 16 bytes), its actions read by
/// `nested`: what `decode_NXAST_RAW_CT` refuses (force without commit,
/// a zone field that is not 16 bits of its field, actions other than a
/// plain nat without commit), and also unknown flags and padding that
/// is not zero, which it lets by.
pub(super) fn read_ct<'a>(
    a: &'a [u8],
    at: usize,
    nested: impl FnOnce(&'a [u8], usize) -> Result<Vec<Action<'a>>>,
) -> Result<Action<'a>> {
    const W: &str = "NXAST_CT";
    if a.len() < 24 {
        return Err(bad(W, at + 2, "shorter than its 24 bytes"));
    }
    let flags = be16(a, 10);
    if flags & !(NX_CT_F_COMMIT | NX_CT_F_FORCE) != 0 {
        return Err(bad(W, at + 10, "flags other than commit and force"));
    }
    if flags & NX_CT_F_FORCE != 0 && flags & NX_CT_F_COMMIT == 0 {
        return Err(bad(W, at + 10, "force without commit"));
    }
    let zone = match be32(a, 12) {
        0 => CtZone::Imm(be16(a, 16)),
        h => {
            let src = OxmHeader::from_u32(h);
            if src.class == OXM_EXPERIMENTER {
                return Err(bad(W, at + 12, "an experimenter header does not fit"));
            }
            let ofs_nbits = be16(a, 16);
            let (ofs, n_bits) = (ofs_nbits >> 6, (ofs_nbits & 0x3f) + 1);
            if n_bits != 16 {
                return Err(bad(W, at + 16, "zone is not 16 bits"));
            }
            if usize::from(ofs) + 16 > src.value_len() * 8 {
                return Err(bad(W, at + 16, "zone bits beyond the field's end"));
            }
            CtZone::Field { src, ofs, n_bits }
        }
    };
    zeros(&a[19..22], at + 19, W)?;
    let actions = nested(&a[24..], at + 24)?;
    if flags & NX_CT_F_COMMIT == 0 {
        let plain_nat = |x: &Action<'_>| {
            matches!(
                x,
                Action::Nat {
                    flags: 0,
                    addrs: None,
                    ports: None
                }
            )
        };
        if let Some(i) = actions.iter().position(|x| !plain_nat(x)) {
            // The reader checked the lengths: walk them to the i-th.
            let mut k = 24;
            for _ in 0..i {
                k += usize::from(be16(a, k + 2));
            }
            return Err(bad(
                W,
                at + k,
                "an action other than a plain nat without commit",
            ));
        }
    }
    Ok(Action::Ct {
        flags,
        zone,
        recirc_table: a[18],
        alg: be16(a, 22),
        actions,
    })
}

/// NXAST_NAT, whole, at `at` (at least 16 bytes): what
/// `decode_NXAST_RAW_NAT` refuses (unknown or exclusive flags, a last
/// without a first, both families, ports without addresses, a first of
/// zero, a last below the first, a range field past the action's end),
/// and also unknown range bits and padding that is not zero, which it
/// lets by.
pub(super) fn read_nat(a: &[u8], at: usize) -> Result<Action<'static>> {
    const W: &str = "NXAST_NAT";
    zeros(&a[10..12], at + 10, W)?;
    let flags = be16(a, 12);
    if flags & !NX_NAT_F_MASK != 0 {
        return Err(bad(W, at + 12, "unknown flags"));
    }
    if flags & NX_NAT_F_SRC != 0 && flags & NX_NAT_F_DST != 0 {
        return Err(bad(W, at + 12, "both src and dst"));
    }
    if flags & NX_NAT_F_PROTO_HASH != 0 && flags & NX_NAT_F_PROTO_RANDOM != 0 {
        return Err(bad(W, at + 12, "both hash and random"));
    }
    let present = be16(a, 14);
    let has = |bit: u16| present & bit != 0;
    let refuse = |reason| Err(bad(W, at + 14, reason));
    if present & !0x3f != 0 {
        return refuse("unknown range_present bits");
    }
    let (v4, v6) = (
        NX_NAT_RANGE_IPV4_MIN | NX_NAT_RANGE_IPV4_MAX,
        NX_NAT_RANGE_IPV6_MIN | NX_NAT_RANGE_IPV6_MAX,
    );
    if present & v4 != 0 && present & v6 != 0 {
        return refuse("both IPv4 and IPv6 ranges");
    }
    if (has(NX_NAT_RANGE_IPV4_MAX) && !has(NX_NAT_RANGE_IPV4_MIN))
        || (has(NX_NAT_RANGE_IPV6_MAX) && !has(NX_NAT_RANGE_IPV6_MIN))
        || (has(NX_NAT_RANGE_PROTO_MAX) && !has(NX_NAT_RANGE_PROTO_MIN))
    {
        return refuse("a range's last without its first");
    }
    if has(NX_NAT_RANGE_PROTO_MIN) && present & (v4 | v6) == 0 {
        return refuse("ports without addresses");
    }
    // The present fields, one after another.
    let mut k = 16;
    let mut take = |n: usize| -> Result<(usize, &[u8])> {
        need(Layer::OpenFlow, W, a, k, n).map_err(|e| e.at(at))?;
        k += n;
        Ok((at + k - n, &a[k - n..k]))
    };
    let zero = |o| Err(bad(W, o, "range starts at zero"));
    let below = |o| Err(bad(W, o, "range's last below its first"));
    let addrs = if has(NX_NAT_RANGE_IPV4_MIN) {
        let (o, b) = take(4)?;
        let min = Ipv4Addr::from(be32(b, 0));
        if min.is_unspecified() {
            return zero(o);
        }
        let max = if has(NX_NAT_RANGE_IPV4_MAX) {
            let (o, b) = take(4)?;
            let max = Ipv4Addr::from(be32(b, 0));
            if max < min {
                return below(o);
            }
            Some(max)
        } else {
            None
        };
        Some(NatAddrs::V4 { min, max })
    } else if has(NX_NAT_RANGE_IPV6_MIN) {
        let v6 = |b: &[u8]| Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap_or([0; 16]));
        let (o, b) = take(16)?;
        let min = v6(b);
        if min.is_unspecified() {
            return zero(o);
        }
        let max = if has(NX_NAT_RANGE_IPV6_MAX) {
            let (o, b) = take(16)?;
            let max = v6(b);
            if max.octets() < min.octets() {
                return below(o);
            }
            Some(max)
        } else {
            None
        };
        Some(NatAddrs::V6 { min, max })
    } else {
        None
    };
    let ports = if has(NX_NAT_RANGE_PROTO_MIN) {
        let (o, b) = take(2)?;
        let min = be16(b, 0);
        if min == 0 {
            return zero(o);
        }
        let max = if has(NX_NAT_RANGE_PROTO_MAX) {
            let (o, b) = take(2)?;
            let max = be16(b, 0);
            if max < min {
                return below(o);
            }
            Some(max)
        } else {
            None
        };
        Some((min, max))
    } else {
        None
    };
    zeros(&a[k..], at + k, W)?;
    Ok(Action::Nat {
        flags,
        addrs,
        ports,
    })
}

/// NXAST_CT holding what `nested` writes (its actions, in the ct's
/// version), as `encode_CT` writes it.
pub(in crate::openflow) fn put_ct(
    out: &mut Vec<u8>,
    flags: u16,
    zone: &CtZone,
    recirc_table: u8,
    alg: u16,
    nested: impl FnOnce(&mut Vec<u8>),
) {
    let s = start_nx(out, NXAST_CT);
    out.extend_from_slice(&flags.to_be_bytes());
    let (src, second) = match *zone {
        CtZone::Imm(z) => (0, z),
        CtZone::Field { src, ofs, n_bits } => {
            let n = n_bits.wrapping_sub(1) & 0x3f;
            (src.to_u32(), ofs << 6 | n)
        }
    };
    out.extend_from_slice(&src.to_be_bytes());
    out.extend_from_slice(&second.to_be_bytes());
    out.extend_from_slice(&[recirc_table, 0, 0, 0]);
    out.extend_from_slice(&alg.to_be_bytes());
    nested(out);
    finish(out, s);
}

/// NXAST_NAT as `encode_NAT` writes it: each range field that is there
/// and not zero, the ports only with addresses, padded to 8.
pub(in crate::openflow) fn put_nat(
    out: &mut Vec<u8>,
    flags: u16,
    addrs: Option<&NatAddrs>,
    ports: Option<(u16, Option<u16>)>,
) {
    let s = start_nx(out, NXAST_NAT);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    let mut present = 0;
    let mut put = |out: &mut Vec<u8>, bit: u16, b: &[u8]| {
        if b.iter().any(|&x| x != 0) {
            out.extend_from_slice(b);
            present |= bit;
        }
    };
    match addrs {
        Some(&NatAddrs::V4 { min, max }) => {
            put(out, NX_NAT_RANGE_IPV4_MIN, &min.octets());
            if let Some(max) = max {
                put(out, NX_NAT_RANGE_IPV4_MAX, &max.octets());
            }
        }
        Some(&NatAddrs::V6 { min, max }) => {
            put(out, NX_NAT_RANGE_IPV6_MIN, &min.octets());
            if let Some(max) = max {
                put(out, NX_NAT_RANGE_IPV6_MAX, &max.octets());
            }
        }
        None => {}
    }
    if let (Some(_), Some((min, max))) = (addrs, ports) {
        put(out, NX_NAT_RANGE_PROTO_MIN, &min.to_be_bytes());
        if let Some(max) = max {
            put(out, NX_NAT_RANGE_PROTO_MAX, &max.to_be_bytes());
        }
    }
    finish(out, s);
    out[s + 14..s + 16].copy_from_slice(&present.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use crate::openflow::*;
    use proptest::prelude::*;

    const REG12: OxmHeader = h(0x0001_1804);
    const REG13: OxmHeader = h(0x0001_1a04);

    fn v4(min: [u8; 4], max: Option<[u8; 4]>) -> Option<NatAddrs> {
        Some(NatAddrs::V4 {
            min: min.into(),
            max: max.map(Into::into),
        })
    }

    fn v6(min: &str, max: Option<&str>) -> Option<NatAddrs> {
        Some(NatAddrs::V6 {
            min: min.parse().unwrap(),
            max: max.map(|m| m.parse().unwrap()),
        })
    }

    /// The actions of a capture of any version (1.0's NXT_FLOW_MOD too).
    fn read_any(b: &[u8]) -> Vec<Action<'_>> {
        let m = Message::new_checked(b).unwrap();
        if b[0] == OF10 {
            return match parse_nx(&m) {
                Some(nx) => parse_nx_flow_mod(nx.body).unwrap().actions,
                None => parse_flow_mod10(&m).unwrap().0.actions,
            };
        }
        read(b).actions
    }

    /// `acts` written at version `v` are the capture's actions, byte for
    /// byte (its whole message from 1.3 on).
    fn writes_any(v: u8, flow: &str, acts: &[Action<'_>]) {
        let b = ovs(v, flow);
        if b[0] == OF10 {
            let mut out = Vec::new();
            for a in acts {
                a.emit_in(OF10, &mut out);
            }
            assert_eq!(hex(&out), hex(&b[b.len() - out.len()..]), "{flow} at 1.0");
        } else {
            writes(v, flow, acts);
        }
    }

    /// Every capture of a ct: it reads (1.0's NXT_FLOW_MOD with 1.0's
    /// reader), its first action is a ct (`Action::Ct`, no longer
    /// `NxOther`), and what it reads as writes back Open vSwitch's bytes
    /// in its version; every OVN form is among them, in each version.
    #[test]
    fn every_ct_capture_reads_and_writes_back() {
        let all = ct_captures();
        assert_eq!(all.len(), 3 * 33);
        for (v, f, hx) in &all {
            let b = unhex(hx);
            assert_eq!(
                b[0],
                [OF10, OF13, OF15][[10, 13, 15].iter().position(|x| x == v).unwrap()]
            );
            let acts = read_any(&b);
            assert!(matches!(acts[0], Action::Ct { .. }), "{f} at {v}: {acts:?}");
            writes_any(*v, f, &acts);
            // Each rule in each version.
            for w in [10, 13, 15] {
                assert!(all.iter().any(|(x, g, _)| *x == w && g == f), "{f} at {w}");
            }
        }
        // The one ct the older captures had reads as a ct too.
        let f = "ip,actions=ct(commit,zone=NXM_NX_REG13[0..15])";
        for v in [13, 15] {
            golden(v, f, &[ct(COMMIT, zf(REG13, 0), NONE, 0, vec![])]);
        }
        assert_eq!(nxast_name(NXAST_CT), Some("NXAST_CT"));
        assert_eq!(nxast_name(NXAST_NAT), Some("NXAST_NAT"));
    }

    /// OVN's cts, read into their parts in 1.3 and 1.5 (and 1.0): the
    /// zone a register's low 16 bits, a recirculation table, a plain or
    /// a src/dst nat first among the nested actions, then exec's loads,
    /// set_fields and moves of ct_mark and ct_label in the version's
    /// forms: a masked OFPAT_SET_FIELD and COPY_FIELD in 1.5,
    /// NXAST_REG_LOAD and REG_MOVE before.
    #[test]
    fn ovn_cts_golden() {
        let f = "ip,actions=ct(table=15,zone=NXM_NX_REG13[0..15],nat)";
        for v in [10, 13, 15] {
            let want = [ct(0, zf(REG13, 0), 15, 0, vec![NAT])];
            assert_eq!(read_any(&ovs(v, f)), want, "{v}");
            writes_any(v, f, &want);
        }
        let b = ovs(15, f);
        assert_eq!(
            hex(&b[b.len() - 40..]),
            concat!(
                "ffff002800002320002300000001",
                "1a04000f0f0000000000",
                "ffff0010000023200024000000000000"
            )
        );
        prints(&b, "actions=ct(table=15,zone=NXM_NX_REG13[0..15],nat)");

        let f = "ip,actions=ct(table=24,zone=NXM_NX_REG12[0..15],nat)";
        golden(13, f, &[ct(0, zf(REG12, 0), 24, 0, vec![NAT])]);

        let src = nat(NX_NAT_F_SRC, None, None);
        let f = "ip,actions=ct(commit,zone=NXM_NX_REG13[0..15],nat(src),exec(set_field:0/0x1->ct_mark))";
        let mark15 = sf(NXM_1, 107, &[0; 4], Some(&[0, 0, 0, 1]));
        let want15 = [ct(
            COMMIT,
            zf(REG13, 0),
            NONE,
            0,
            vec![src.clone(), mark15.clone()],
        )];
        golden(15, f, &want15);
        let want13 = [ct(
            COMMIT,
            zf(REG13, 0),
            NONE,
            0,
            vec![src.clone(), load(0, 1, NXM_NX_CT_MARK, 0)],
        )];
        golden(13, f, &want13);
        // Each writes the other's bytes in the other's version.
        writes(13, f, &want15);
        writes(15, f, &want13);
        assert_eq!(read_any(&ovs(10, f)), want13);
        prints(&ovs(13, f), "exec(load:0->NXM_NX_CT_MARK[0])");

        let f = "ip,actions=ct(commit,zone=NXM_NX_REG13[0..15],nat(src),exec(set_field:0/0x1->ct_mark,move:NXM_NX_XXREG0[0..31]->NXM_NX_CT_LABEL[96..127]))";
        let mv_label = mv(32, 0, 96, XXREG0, NXM_NX_CT_LABEL);
        golden(
            15,
            f,
            &[ct(
                COMMIT,
                zf(REG13, 0),
                NONE,
                0,
                vec![src.clone(), mark15, mv_label.clone()],
            )],
        );
        golden(
            13,
            f,
            &[ct(
                COMMIT,
                zf(REG13, 0),
                NONE,
                0,
                vec![src.clone(), load(0, 1, NXM_NX_CT_MARK, 0), mv_label],
            )],
        );

        // The load balancer's group bucket (OVN writes it in a group; the
        // same action in a flow here).
        let f = "ip,actions=ct(commit,table=21,zone=NXM_NX_REG13[0..15],nat(dst=10.0.2.11:80),exec(set_field:0x2/0x2->ct_mark))";
        let dst = nat(NX_NAT_F_DST, v4([10, 0, 2, 11], None), Some((80, None)));
        let want15 = [ct(
            COMMIT,
            zf(REG13, 0),
            21,
            0,
            vec![
                dst.clone(),
                sf(NXM_1, 107, &[0, 0, 0, 2], Some(&[0, 0, 0, 2])),
            ],
        )];
        golden(15, f, &want15);
        let want13 = [ct(
            COMMIT,
            zf(REG13, 0),
            21,
            0,
            vec![dst, load(1, 1, NXM_NX_CT_MARK, 1)],
        )];
        golden(13, f, &want13);
        writes(13, f, &want15);
        writes_any(10, f, &want13);
        prints(&ovs(15, f), &f["ip,actions=".len()..]);

        // SNAT to one address: only its first is on the wire.
        let f = "ip,actions=ct(commit,zone=NXM_NX_REG12[0..15],nat(src=10.0.100.100))";
        for v in [13, 15] {
            golden(
                v,
                f,
                &[ct(
                    COMMIT,
                    zf(REG12, 0),
                    NONE,
                    0,
                    vec![nat(NX_NAT_F_SRC, v4([10, 0, 100, 100], None), None)],
                )],
            );
        }
    }

    /// The other forms: immediate zones, force and the helpers, ranges of
    /// addresses and ports with their flags, IPv6, an empty ct; the same
    /// bytes in every version when nothing nested differs.
    #[test]
    fn ct_and_nat_forms_golden() {
        let cases = [
            (
                "ip,actions=ct(zone=5)",
                ct(0, CtZone::Imm(5), NONE, 0, vec![]),
            ),
            ("ip,actions=ct()", ct(0, CtZone::Imm(0), NONE, 0, vec![])),
            (
                "ip,actions=ct(nat)",
                ct(0, CtZone::Imm(0), NONE, 0, vec![NAT]),
            ),
            (
                "ip,actions=ct(zone=65535,table=254)",
                ct(0, CtZone::Imm(0xffff), 254, 0, vec![]),
            ),
            (
                "tcp,actions=ct(commit,force,zone=1,alg=ftp)",
                ct(
                    COMMIT | NX_CT_F_FORCE,
                    CtZone::Imm(1),
                    NONE,
                    IPPORT_FTP,
                    vec![],
                ),
            ),
            (
                "udp,actions=ct(commit,alg=tftp)",
                ct(COMMIT, CtZone::Imm(0), NONE, IPPORT_TFTP, vec![]),
            ),
            (
                "ip,actions=ct(commit,nat(src=10.0.0.1-10.0.0.9:1000-2000,persistent,hash))",
                ct(
                    COMMIT,
                    CtZone::Imm(0),
                    NONE,
                    0,
                    vec![nat(
                        NX_NAT_F_SRC | NX_NAT_F_PERSISTENT | NX_NAT_F_PROTO_HASH,
                        v4([10, 0, 0, 1], Some([10, 0, 0, 9])),
                        Some((1000, Some(2000))),
                    )],
                ),
            ),
            (
                "ipv6,actions=ct(commit,nat(dst=[fd00::1]:80,random))",
                ct(
                    COMMIT,
                    CtZone::Imm(0),
                    NONE,
                    0,
                    vec![nat(
                        NX_NAT_F_DST | NX_NAT_F_PROTO_RANDOM,
                        v6("fd00::1", None),
                        Some((80, None)),
                    )],
                ),
            ),
            (
                "ipv6,actions=ct(commit,nat(dst=fd00::1-fd00::9))",
                ct(
                    COMMIT,
                    CtZone::Imm(0),
                    NONE,
                    0,
                    vec![nat(NX_NAT_F_DST, v6("fd00::1", Some("fd00::9")), None)],
                ),
            ),
            // A last equal to the first is written when given: all four.
            (
                "ip,actions=ct(commit,nat(src=10.0.0.1-10.0.0.1:80-80))",
                ct(
                    COMMIT,
                    CtZone::Imm(0),
                    NONE,
                    0,
                    vec![nat(
                        NX_NAT_F_SRC,
                        v4([10, 0, 0, 1], Some([10, 0, 0, 1])),
                        Some((80, Some(80))),
                    )],
                ),
            ),
            (
                "ip,actions=ct(commit,zone=5,exec(move:NXM_NX_REG0[]->NXM_NX_CT_LABEL[0..31]))",
                ct(
                    COMMIT,
                    CtZone::Imm(5),
                    NONE,
                    0,
                    vec![mv(32, 0, 0, REG0, NXM_NX_CT_LABEL)],
                ),
            ),
            // Set_fields of the whole field: OFPAT_SET_FIELD in 1.3 too.
            (
                "ip,actions=ct(commit,exec(set_field:0x1->ct_label))",
                ct(
                    COMMIT,
                    CtZone::Imm(0),
                    NONE,
                    0,
                    vec![sf(
                        NXM_1,
                        108,
                        &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                        None,
                    )],
                ),
            ),
            // A zone named by its OXM name goes out by its NXM header
            // (NXM_OF_TCP_SRC) in every version; a field with only an OXM
            // header (xreg0) by that.
            (
                "tcp,actions=ct(zone=OXM_OF_TCP_SRC[])",
                ct(0, zf(h(0x0000_1202), 0), NONE, 0, vec![]),
            ),
            (
                "ip,actions=ct(zone=OXM_OF_PKT_REG0[16..31])",
                ct(0, zf(h(0x8001_0008), 16), NONE, 0, vec![]),
            ),
            (
                "ip,actions=ct(zone=NXM_NX_REG13[16..31],table=0)",
                ct(0, zf(REG13, 16), 0, 0, vec![]),
            ),
        ];
        for (f, a) in &cases {
            for v in [13, 15] {
                golden(v, f, std::slice::from_ref(a));
            }
            writes_any(10, f, std::slice::from_ref(a));
        }
        let range = "ip,actions=ct(commit,nat(src=10.0.0.1-10.0.0.1:80-80))";
        for (v, f, text) in [
            (
                15,
                "ip,actions=ct(commit,nat(src=10.0.0.1-10.0.0.9:1000-2000,persistent,hash))",
                "ct(commit,nat(src=10.0.0.1-10.0.0.9:1000-2000,persistent,hash))",
            ),
            (
                13,
                "ipv6,actions=ct(commit,nat(dst=[fd00::1]:80,random))",
                "ct(commit,nat(dst=[fd00::1]:80,random))",
            ),
            // Open vSwitch prints a last that equals the first as nothing.
            (13, range, "ct(commit,nat(src=10.0.0.1:80))"),
            (
                15,
                "tcp,actions=ct(zone=OXM_OF_TCP_SRC[])",
                "ct(zone=NXM_OF_TCP_SRC[])",
            ),
        ] {
            prints(&ovs(v, f), text);
        }
        let b = ovs(13, range);
        assert_eq!(
            hex(&b[b.len() - 32..]),
            "ffff0020000023200024000000010033 0a0000010a0000010050005000000000".replace(' ', "")
        );
        // Without the lasts only the firsts go out (range_present 0x11),
        // as for OVN's `nat(dst=10.0.2.11:80)`.
        let mut out = Vec::new();
        nat(NX_NAT_F_SRC, v4([10, 0, 0, 1], None), Some((80, None))).emit(&mut out);
        assert_eq!(
            hex(&out),
            "ffff0018000023200024000000010011 0a00000100500000".replace(' ', "")
        );
        // A zero field is left out, and ports without addresses too, as
        // encode_NAT does.
        out.clear();
        nat(
            NX_NAT_F_SRC,
            v4([0; 4], Some([10, 0, 0, 2])),
            Some((0, Some(9))),
        )
        .emit(&mut out);
        assert_eq!(
            hex(&out),
            "ffff0018000023200024000000010022 0a00000200090000".replace(' ', "")
        );
        out.clear();
        nat(NX_NAT_F_SRC, None, Some((80, None))).emit(&mut out);
        assert_eq!(hex(&out), "ffff0010000023200024000000010000");
        assert_eq!(
            v4([10, 0, 0, 1], None).unwrap().range(),
            ([10, 0, 0, 1].into(), [10, 0, 0, 1].into())
        );
    }

    /// A load of ct_mark: NXAST_REG_LOAD of the whole field before 1.5, a
    /// set_field of it in 1.5 (and in 1.0 a load of a whole field reads
    /// as the set_field it is).
    #[test]
    fn ct_exec_loads_take_the_versions_forms() {
        let f = "ip,actions=ct(commit,exec(load:0x1->NXM_NX_CT_MARK[]))";
        let l = [ct(
            COMMIT,
            CtZone::Imm(0),
            NONE,
            0,
            vec![load(0, 32, NXM_NX_CT_MARK, 1)],
        )];
        let set = [ct(
            COMMIT,
            CtZone::Imm(0),
            NONE,
            0,
            vec![sf(NXM_1, 107, &[0, 0, 0, 1], None)],
        )];
        golden(13, f, &l);
        golden(15, f, &set);
        writes(15, f, &l);
        assert_eq!(read_any(&ovs(10, f)), set);
        writes_any(10, f, &l);
        let f = "ip,actions=ct(commit,exec(set_field:0x1/0x1->ct_label,set_field:0x5->ct_mark))";
        let mut one = [0u8; 16];
        one[15] = 1;
        let want = [ct(
            COMMIT,
            CtZone::Imm(0),
            NONE,
            0,
            vec![
                sf(NXM_1, 108, &one, Some(&one)),
                sf(NXM_1, 107, &[0, 0, 0, 5], None),
            ],
        )];
        for v in [13, 15] {
            writes(v, f, &want);
        }
        golden(15, f, &want);
        writes_any(10, f, &want);
        // A ct and the actions after it.
        let f = "ip,actions=ct(commit,zone=NXM_NX_REG13[0..15],nat(src),exec(set_field:0/0x1->ct_mark)),resubmit(,27)";
        let b = ovs(15, f);
        let acts = read(&b).actions;
        assert_eq!(acts.len(), 2);
        assert_eq!(
            acts[1],
            Action::NxResubmit {
                port: 0xfff8,
                table: 27
            }
        );
    }

    /// Open vSwitch's nesting rule, for the caller: nat and writes of
    /// ct_mark and ct_label only inside a ct, nothing else there.
    #[test]
    fn what_only_a_ct_holds() {
        let mut one = [0u8; 16];
        one[15] = 1;
        assert!(ct_only(&NAT));
        assert!(ct_only(&load(0, 1, NXM_NX_CT_MARK, 0)));
        assert!(ct_only(&sf(NXM_1, 108, &one, None)));
        assert!(ct_only(&Action::RegLoad2(Oxm {
            class: NXM_1,
            field: 107,
            value: &[0, 0, 0, 1],
            mask: None
        })));
        assert!(ct_only(&mv(32, 0, 96, XXREG0, NXM_NX_CT_LABEL)));
        // Reading ct_mark is not writing it; other fields are not ct's.
        assert!(!ct_only(&mv(32, 0, 0, NXM_NX_CT_MARK, REG0)));
        assert!(!ct_only(&load(0, 1, REG0, 0)));
        assert!(!ct_only(&Action::StackPop {
            field: NXM_NX_CT_MARK,
            ofs: 0,
            n_bits: 32
        }));
        assert!(!ct_only(&ct(0, CtZone::Imm(0), NONE, 0, vec![])));
        assert!(!ct_only(&Action::CtClear));
        // Every capture's ct holds only such actions.
        for (_, f, hx) in ct_captures() {
            let b = unhex(hx);
            let Action::Ct { actions, .. } = &read_any(&b)[0] else {
                panic!("{f}")
            };
            assert!(actions.iter().all(ct_only), "{f}");
        }
        // A nat outside a ct reads (the caller refuses it).
        let b = unhex("ffff0010000023200024000000010000");
        assert_eq!(actions(&b, 0).unwrap(), vec![nat(NX_NAT_F_SRC, None, None)]);
    }

    /// What decode_NXAST_RAW_CT and decode_NXAST_RAW_NAT refuse (and
    /// padding and unknown bits, which they let by), refused here by
    /// name at the offending byte.
    #[test]
    fn bad_ct_and_nat_are_refused_where_they_are() {
        let refused = |hx: &str, name: &str, offset: usize| {
            let b = unhex(&hx.replace(' ', ""));
            let e = actions(&b, 100).unwrap_err();
            assert!(e.to_string().contains(name), "{hx}: {e}");
            assert_eq!(e.offset, 100 + offset, "{hx}: {e}");
            // 1.0's reader says the same.
            let e = actions10(&b, 100).unwrap_err();
            assert!(e.to_string().contains(name), "{hx}: {e}");
        };
        const CT: &str = "ffff001800002320 0023";
        // Shorter than 24.
        refused("ffff001000002320 0023 0000 00000000", "NXAST_CT", 2);
        // Flags: unknown, force without commit.
        refused(
            &format!("{CT} 0004 00000000 0005ff000000 0000"),
            "flags other than commit",
            10,
        );
        refused(
            &format!("{CT} 0002 00000000 0005ff000000 0000"),
            "force without commit",
            10,
        );
        // Zone: not 16 bits, past the field's end, an experimenter's.
        refused(
            &format!("{CT} 0000 00011a04 0007ff000000 0000"),
            "zone is not 16 bits",
            16,
        );
        refused(
            &format!("{CT} 0000 00011a04 050fff000000 0000"),
            "beyond the field",
            16,
        );
        refused(
            &format!("{CT} 0000 00011a00 000fff000000 0000"),
            "beyond the field",
            16,
        );
        refused(
            &format!("{CT} 0000 ffff0c08 000fff000000 0000"),
            "experimenter",
            12,
        );
        // Padding.
        refused(
            &format!("{CT} 0000 00000000 0005ff000100 0000"),
            "padding",
            20,
        );
        // Without commit, only plain nats may nest: nat(src), a load.
        refused(
            "ffff002800002320 0023 0000 00000000 0000ff000000 0000 ffff001000002320 0024 0000 0001 0000",
            "other than a plain nat without commit",
            24,
        );
        refused(
            concat!(
                "ffff004000002320 0023 0000 00000000 0000ff000000 0000",
                " ffff001000002320 0024 0000 0000 0000",
                " ffff001800002320 0007 0000 0001d604 0000000000000001"
            ),
            "other than a plain nat without commit",
            40,
        );
        // A nested error keeps its place: a REG_LOAD of too many bits.
        refused(
            concat!(
                "ffff003000002320 0023 0001 00000000 0000ff000000 0000",
                " ffff001800002320 0007 0000 0001d604 0000000000000003"
            ),
            "NXAST_REG_LOAD",
            24 + 16,
        );
        // A nested list cut short.
        refused(
            "ffff002000002320 0023 0001 00000000 0000ff000000 0000 ffff001000002320",
            "action",
            24,
        );

        const NAT: &str = "ffff001000002320 0024";
        refused(&format!("{NAT} 0001 0001 0000"), "NXAST_NAT", 11);
        refused(&format!("{NAT} 0000 0020 0000"), "unknown flags", 12);
        refused(&format!("{NAT} 0000 0003 0000"), "both src and dst", 12);
        refused(&format!("{NAT} 0000 0019 0000"), "both hash and random", 12);
        refused(
            &format!("{NAT} 0000 0001 0040"),
            "unknown range_present bits",
            14,
        );
        refused(
            &format!("{NAT} 0000 0001 0002"),
            "last without its first",
            14,
        );
        refused(
            &format!("{NAT} 0000 0001 0008"),
            "last without its first",
            14,
        );
        refused(
            &format!("{NAT} 0000 0001 0020"),
            "last without its first",
            14,
        );
        refused(&format!("{NAT} 0000 0001 0005"), "both IPv4 and IPv6", 14);
        refused(&format!("{NAT} 0000 0001 0009"), "both IPv4 and IPv6", 14);
        refused(
            &format!("{NAT} 0000 0001 0010"),
            "ports without addresses",
            14,
        );
        // Present but past the action's end.
        refused(
            &format!("{NAT} 0000 0001 0001"),
            "NXAST_NAT: needs 4 bytes",
            16,
        );
        refused(
            "ffff001800002320 0024 0000 0001 0003 0a000001 00000000",
            "last below its first",
            20,
        );
        refused(
            "ffff001800002320 0024 0000 0001 0004 0a000001 00000000",
            "needs 16",
            16,
        );
        refused(
            "ffff001800002320 0024 0000 0001 0001 00000000 00000000",
            "range starts at zero",
            16,
        );
        refused(
            "ffff001800002320 0024 0000 0001 0003 0a000002 0a000001",
            "last below its first",
            20,
        );
        refused(
            "ffff001800002320 0024 0000 0001 0031 0a000001 0050 0040",
            "last below its first",
            22,
        );
        refused(
            "ffff001800002320 0024 0000 0001 0011 0a000001 0000 0000",
            "range starts at zero",
            20,
        );
        refused(
            concat!(
                "ffff003000002320 0024 0000 0001 000c",
                " fd000000000000000000000000000009 fd000000000000000000000000000001"
            ),
            "last below its first",
            32,
        );
        // Padding after the fields.
        refused(
            "ffff001800002320 0024 0000 0001 0001 0a000001 00000001",
            "padding",
            23,
        );
        // A nat whose fields come to 8 bytes more than needed is fine
        // (Open vSwitch reads a longer action alike) and writes shorter.
        let b = unhex(
            "ffff0018000023200024000000010000 0000000000000000"
                .replace(' ', "")
                .as_str(),
        );
        assert_eq!(actions(&b, 0).unwrap(), vec![nat(NX_NAT_F_SRC, None, None)]);
    }

    /// Cts nest as deep as clones may, and no deeper.
    #[test]
    fn ct_nesting_depth() {
        let nest = |depth: usize| {
            let mut a = NAT;
            for _ in 0..depth {
                a = ct(COMMIT, CtZone::Imm(1), NONE, 0, vec![a]);
            }
            let mut out = Vec::new();
            a.emit(&mut out);
            out
        };
        assert!(actions(&nest(MAX_ACTION_DEPTH), 0).is_ok());
        let e = actions(&nest(MAX_ACTION_DEPTH + 1), 0).unwrap_err();
        assert!(e.to_string().contains("nested more than 100 deep"), "{e}");
        assert_eq!(e.offset, 24 * (MAX_ACTION_DEPTH + 1));
        assert!(actions10(&nest(MAX_ACTION_DEPTH + 1), 0).is_err());
    }

    proptest! {
        /// Any bytes behind a Nicira CT or NAT header, at any length the
        /// header claims: read or refused by name, never a panic; what
        /// reads writes back (1.3 and 1.5) to bytes that read the same.
        #[test]
        fn any_ct_or_nat_body_reads_or_is_refused(
            sub in prop::sample::select(vec![NXAST_CT, NXAST_NAT]),
            body in proptest::collection::vec(any::<u8>(), 0..120),
            cut in 0usize..8,
        ) {
            let mut b = unhex("ffff000000002320");
            b.extend_from_slice(&sub.to_be_bytes());
            b.extend_from_slice(&body);
            let n = b.len() / 8 * 8;
            b.truncate(n.max(8));
            b.resize(b.len().max(8), 0);
            let len = (b.len() as u16).saturating_sub(8 * (cut as u16 % 2));
            b[2..4].copy_from_slice(&len.max(8).to_be_bytes());
            for r in [actions(&b, 0), actions10(&b, 0)] {
                match r {
                    Err(e) => prop_assert!(e.offset <= b.len(), "{e}"),
                    Ok(acts) => {
                        for v in [OF13, OF15] {
                            let mut out = Vec::new();
                            for a in &acts {
                                a.emit_in(v, &mut out);
                            }
                            let back = actions(&out, 0).map_err(|e| TestCaseError::fail(format!("{e} in {}", hex(&out))))?;
                            let mut again = Vec::new();
                            for a in &back {
                                a.emit_in(v, &mut again);
                            }
                            prop_assert_eq!(hex(&again), hex(&out));
                        }
                    }
                }
            }
        }
    }
}
