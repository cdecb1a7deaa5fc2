//! A flow_mod's (or packet_out's) actions read straight into the rule's
//! typed actions, as OVS's `ofpacts_pull_openflow_actions` then
//! `ofpacts_check` do: each field an action names looked up in the field
//! table, its bit range checked, and the fields it writes or reads held to
//! the prerequisites the rule's match gives (`MATCH_INCONSISTENT`
//! otherwise). What tunlab cannot carry is refused with the error OVS
//! would send for an action it lacks.

use super::{PORT_ALL, PORT_CONTROLLER, PORT_FLOOD, PORT_IN_PORT, PORT_NORMAL, PORT_TABLE};
use tunlab_dp::field::{self, Field as Mf, Prereq, SubField};
use tunlab_dp::flow::{Ct, CtZone, Nat, NatKind};
use tunlab_dp::key::f;
use tunlab_dp::{Action as Act, Match, PacketInReason};
use tunlab_wire::openflow::{self as of, Action, Oxm, OxmHeader};

/// Bad action codes (OpenFlow 1.3 § 7.4.5) beyond the wire crate's.
pub const BAC_BAD_OUT_PORT: u16 = 4;
pub const BAC_BAD_ARGUMENT: u16 = 5;
pub const BAC_MATCH_INCONSISTENT: u16 = 10;
pub const BAC_BAD_SET_TYPE: u16 = 13;
pub const BAC_BAD_SET_LEN: u16 = 14;
pub const BAC_BAD_SET_ARGUMENT: u16 = 15;

/// OpenFlow 1.0's number for "the input port" that Nicira's resubmit
/// carries.
const OF10_IN_PORT: u16 = 0xfff8;

fn bad(code: u16) -> (u16, u16) {
    (of::ET_BAD_ACTION, code)
}

/// How deep clones may nest (OVS limits its translation the same way).
const MAX_NESTING: usize = 16;

/// `acts` as the rule's actions; `m` is the rule's match (`None`: a
/// packet_out's, checked per packet), `packet_out` whether `output:table`
/// is allowed.
pub fn from_wire(
    acts: &[Action<'_>],
    m: Option<&Match>,
    packet_out: bool,
) -> Result<Vec<Act>, (u16, u16)> {
    from_wire_at(acts, m, packet_out, 0)
}

fn from_wire_at(
    acts: &[Action<'_>],
    m: Option<&Match>,
    packet_out: bool,
    depth: usize,
) -> Result<Vec<Act>, (u16, u16)> {
    let mut out = Vec::with_capacity(acts.len());
    for a in acts {
        out.push(match a {
            Action::Output { port, max_len } => output(*port, *max_len, packet_out)?,
            Action::PushVlan { ethertype } => match *ethertype {
                0x8100 | 0x88a8 => Act::PushVlan(*ethertype),
                _ => return Err(bad(BAC_BAD_ARGUMENT)),
            },
            Action::PopVlan => Act::PopVlan,
            Action::NxResubmit { port, table } => Act::Resubmit {
                port: (*port != OF10_IN_PORT).then(|| of::port_from10(*port)),
                table: (*table != 0xff).then_some(*table),
            },
            Action::SetField(o) | Action::RegLoad2(o) => set_field(o, m)?,
            Action::RegLoad { .. } | Action::Move { .. } => load_or_move(a, m, Dst::Rule)?,
            Action::StackPush { field, ofs, n_bits } => {
                let sf = subfield(field, u32::from(*ofs), u32::from(*n_bits))?;
                reads(sf.field, m)?;
                Act::Push(sf)
            }
            Action::StackPop { field, ofs, n_bits } => {
                let sf = subfield(field, u32::from(*ofs), u32::from(*n_bits))?;
                writes(sf.field, m)?;
                Act::Pop(sf)
            }
            Action::Note(b) => Act::Note(b.to_vec()),
            Action::DecTtl => Act::DecTtl,
            Action::DecTtlCntIds { ids } => Act::DecTtlIds(of::cnt_ids(ids).collect()),
            Action::CtClear => Act::CtClear,
            Action::Conjunction {
                id,
                clause,
                n_clauses,
            } => Act::Conjunction {
                id: *id,
                clause: *clause,
                n_clauses: *n_clauses,
            },
            Action::Controller {
                max_len,
                id,
                reason,
                userdata,
                pause,
            } => Act::Controller {
                max_len: *max_len,
                reason: PacketInReason::from_u8(*reason).ok_or(bad(BAC_BAD_ARGUMENT))?,
                id: *id,
                userdata: userdata.to_vec(),
                pause: *pause,
            },
            Action::Ct {
                flags,
                zone,
                recirc_table,
                alg,
                actions,
            } => ct(*flags, zone, *recirc_table, *alg, actions, m)?,
            // Only inside a ct (OVS's rule and code).
            Action::Nat { .. } => return Err(bad(BAC_BAD_SET_ARGUMENT)),
            Action::Clone(inner) if depth < MAX_NESTING => {
                Act::Clone(from_wire_at(inner, m, packet_out, depth + 1)?)
            }
            // dec_ttl with controller ids, ct_clear, conntrack, the rest of
            // Nicira's: not built yet.
            Action::NxOther { .. } => return Err((of::ET_BAD_ACTION, BAC_BAD_EXP_TYPE)),
            _ => return Err(bad(of::BAC_BAD_TYPE)),
        });
    }
    // OVS's rule: conjunction actions stand alone (a note aside).
    let conj = out
        .iter()
        .filter(|a| matches!(a, Act::Conjunction { .. }))
        .count();
    if conj > 0 && conj != out.iter().filter(|a| !matches!(a, Act::Note(_))).count() {
        return Err(bad(BAC_BAD_ARGUMENT));
    }
    Ok(out)
}

/// NXAST_CT: its zone's field checked, its nested actions a `nat` and
/// writes of ct_mark and ct_label (anything else: OVS's BAD_ARGUMENT), and
/// the rule's match an IP one (OVS's `check_CT`: MATCH_INCONSISTENT).
fn ct(
    flags: u16,
    zone: &of::CtZone,
    recirc_table: u8,
    alg: u16,
    actions: &[Action<'_>],
    m: Option<&Match>,
) -> Result<Act, (u16, u16)> {
    if let Some(m) = m {
        let ip = m.mask.get(f::DL_TYPE) != 0 && matches!(m.value.get(f::DL_TYPE), 0x0800 | 0x86dd);
        if !ip {
            return Err(bad(BAC_MATCH_INCONSISTENT));
        }
    }
    let zone = match *zone {
        of::CtZone::Imm(z) => CtZone::Imm(z),
        of::CtZone::Field { src, ofs, n_bits } => {
            let sf = subfield(&src, u32::from(ofs), u32::from(n_bits))?;
            reads(sf.field, m)?;
            CtZone::Field(sf)
        }
    };
    let mut out = Ct {
        commit: flags & of::NX_CT_F_COMMIT != 0,
        force: flags & of::NX_CT_F_FORCE != 0,
        table: (recirc_table != of::NX_CT_RECIRC_NONE).then_some(recirc_table),
        zone,
        alg,
        nat: None,
        exec: Vec::new(),
    };
    for a in actions {
        match a {
            Action::Nat {
                flags,
                addrs,
                ports,
            } if out.nat.is_none() => {
                out.nat = Some(Nat {
                    kind: if flags & of::NX_NAT_F_SRC != 0 {
                        Some(NatKind::Src)
                    } else if flags & of::NX_NAT_F_DST != 0 {
                        Some(NatKind::Dst)
                    } else {
                        None
                    },
                    addrs: addrs.as_ref().map(|a| a.range()),
                    ports: ports.map(|(lo, hi)| (lo, hi.unwrap_or(lo))),
                    persistent: flags & of::NX_NAT_F_PERSISTENT != 0,
                    hash: flags & of::NX_NAT_F_PROTO_HASH != 0,
                    random: flags & of::NX_NAT_F_PROTO_RANDOM != 0,
                })
            }
            a if of::ct_only(a) => out.exec.push(ct_exec(a, m)?),
            _ => return Err(bad(BAC_BAD_ARGUMENT)),
        }
    }
    Ok(Act::Ct(Box::new(out)))
}

/// What an action may write: a rule's actions the pipeline's and the
/// packet's fields, a ct's `exec` the connection's ct_mark and ct_label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dst {
    Rule,
    CtExec,
}

fn ct_field(fl: &Mf) -> bool {
    matches!(fl.name, "ct_mark" | "ct_label")
}

fn may_write(fl: &Mf, m: Option<&Match>, to: Dst) -> Result<(), (u16, u16)> {
    match to {
        Dst::Rule => writes(fl, m),
        Dst::CtExec if ct_field(fl) => Ok(()),
        Dst::CtExec => Err(bad(BAC_BAD_SET_TYPE)),
    }
}

/// NXAST_REG_LOAD (a masked set_field, printed as `load:`) or a move
/// (NXAST_REG_MOVE, OFPAT_COPY_FIELD), their fields and widths checked.
fn load_or_move(a: &Action<'_>, m: Option<&Match>, to: Dst) -> Result<Act, (u16, u16)> {
    Ok(match a {
        Action::RegLoad {
            ofs,
            n_bits,
            dst,
            value,
        } => {
            let sf = subfield(dst, u32::from(*ofs), u32::from(*n_bits))?;
            may_write(sf.field, m, to)?;
            let v = u128::from(*value);
            if sf.n_bits < 128 && v >> sf.n_bits != 0 {
                return Err(bad(BAC_BAD_SET_ARGUMENT));
            }
            Act::SetField {
                field: sf.field,
                value: v << sf.ofs,
                mask: sf.mask(),
                load: true,
            }
        }
        Action::Move {
            n_bits,
            src_ofs,
            dst_ofs,
            src,
            dst,
        } => {
            let n = u32::from(*n_bits);
            let src = subfield(src, u32::from(*src_ofs), n)?;
            let dst = subfield(dst, u32::from(*dst_ofs), n)?;
            reads(src.field, m)?;
            may_write(dst.field, m, to)?;
            Act::Move { src, dst }
        }
        _ => return Err(bad(BAC_BAD_ARGUMENT)),
    })
}

/// A write of ct_mark or ct_label inside a ct's `exec`.
fn ct_exec(a: &Action<'_>, m: Option<&Match>) -> Result<Act, (u16, u16)> {
    Ok(match a {
        Action::SetField(o) | Action::RegLoad2(o) => {
            let fl = field::by_code(o.class, o.field)
                .filter(|fl| ct_field(fl))
                .ok_or(bad(BAC_BAD_SET_TYPE))?;
            if o.value.len() != usize::from(fl.bytes)
                || o.mask.is_some_and(|mk| mk.len() != o.value.len())
            {
                return Err(bad(BAC_BAD_SET_LEN));
            }
            let v = be(o.value).ok_or(bad(BAC_BAD_SET_LEN))?;
            let mask = match o.mask {
                Some(mk) => be(mk).ok_or(bad(BAC_BAD_SET_LEN))?,
                None => fl.all_ones(),
            };
            Act::SetField {
                field: fl,
                value: v & mask,
                mask,
                load: false,
            }
        }
        Action::RegLoad { .. } | Action::Move { .. } => load_or_move(a, m, Dst::CtExec)?,
        _ => return Err(bad(BAC_BAD_ARGUMENT)),
    })
}

/// A Nicira action subtype tunlab does not carry (OpenFlow's
/// OFPBAC_BAD_EXPERIMENTER_TYPE).
pub const BAC_BAD_EXP_TYPE: u16 = 3;

fn output(port: u32, max_len: u16, packet_out: bool) -> Result<Act, (u16, u16)> {
    Ok(match port {
        PORT_NORMAL => Act::Normal,
        PORT_IN_PORT => Act::InPort,
        PORT_FLOOD | PORT_ALL => Act::Flood,
        PORT_CONTROLLER => Act::controller(max_len),
        // A packet_out's "through the flow table".
        PORT_TABLE if packet_out => Act::Resubmit {
            port: None,
            table: Some(0),
        },
        p if p < 0xffff_ff00 => Act::Output(p),
        _ => return Err(bad(BAC_BAD_OUT_PORT)),
    })
}

/// The subfield a Nicira action's header, offset and width name.
fn subfield(h: &OxmHeader, ofs: u32, n_bits: u32) -> Result<SubField, (u16, u16)> {
    let fl = field::by_code(h.class, h.field).ok_or(bad(BAC_BAD_SET_TYPE))?;
    if n_bits == 0 || ofs + n_bits > fl.n_bits() {
        return Err(bad(BAC_BAD_SET_LEN));
    }
    Ok(SubField {
        field: fl,
        ofs,
        n_bits,
    })
}

/// What the pipeline writes (see the flow parser's rule): the pipeline's
/// fields, tun_id and tun_metadataN, the packet's headers.
fn writable(fl: &Mf) -> bool {
    let tunnel_ok = fl.name == "tun_id" || fl.name.starts_with("tun_metadata");
    fl.writable
        && (tunnel_ok || !fl.name.starts_with("tun_"))
        && !fl.name.starts_with("ct_")
        && !fl.name.starts_with("vlan")
        && !matches!(fl.name, "pkt_mark" | "tcp_flags" | "ip_frag")
}

fn writes(fl: &Mf, m: Option<&Match>) -> Result<(), (u16, u16)> {
    if !writable(fl) {
        return Err(bad(BAC_BAD_SET_TYPE));
    }
    reads(fl, m)
}

/// A field an action names needs its prerequisites in the rule's match.
fn reads(fl: &Mf, m: Option<&Match>) -> Result<(), (u16, u16)> {
    match m {
        Some(m) if fl.prereq != Prereq::None && !fl.prereq.met(&m.value, &m.mask) => {
            Err(bad(BAC_MATCH_INCONSISTENT))
        }
        _ => Ok(()),
    }
}

fn be(b: &[u8]) -> Option<u128> {
    (b.len() <= 16).then(|| b.iter().fold(0u128, |a, &x| (a << 8) | u128::from(x)))
}

/// OFPAT_SET_FIELD (or NXAST_REG_LOAD2): the VLAN's and the tunnel's own
/// actions, every other writable field a typed set_field.
fn set_field(o: &Oxm<'_>, m: Option<&Match>) -> Result<Act, (u16, u16)> {
    let fl = field::by_code(o.class, o.field).ok_or(bad(BAC_BAD_SET_TYPE))?;
    // NXM_OF_IN_PORT: 16 bits in 1.0's numbering (OVS's `in_port`).
    if (o.class, o.field) == (of::NXM_0, 0) {
        let p = <[u8; 2]>::try_from(o.value).map_err(|_| bad(BAC_BAD_SET_LEN))?;
        if o.mask.is_some() {
            return Err(bad(BAC_BAD_SET_LEN));
        }
        return Ok(Act::SetField {
            field: fl,
            value: u128::from(of::port_from10(u16::from_be_bytes(p))),
            mask: fl.all_ones(),
            load: false,
        });
    }
    let v = be(o.value).ok_or(bad(BAC_BAD_SET_LEN))?;
    let tun_md = field::TUN_METADATA
        .iter()
        .position(|&t| std::ptr::eq(t, fl));
    let len_ok = o.value.len() == usize::from(fl.bytes) || (tun_md.is_some() && o.value.len() <= 4);
    if !len_ok || o.mask.is_some_and(|mk| mk.len() != o.value.len()) {
        return Err(bad(BAC_BAD_SET_LEN));
    }
    let mask = match o.mask {
        Some(mk) => be(mk).ok_or(bad(BAC_BAD_SET_LEN))?,
        None => fl.all_ones(),
    };
    let exact = o.mask.is_none() || mask == fl.max_value() || mask == fl.all_ones();
    let ip = |b: &[u8]| -> Result<std::net::IpAddr, (u16, u16)> {
        Ok(match b.len() {
            4 => std::net::IpAddr::from(<[u8; 4]>::try_from(b).map_err(|_| bad(BAC_BAD_SET_LEN))?),
            16 => {
                std::net::IpAddr::from(<[u8; 16]>::try_from(b).map_err(|_| bad(BAC_BAD_SET_LEN))?)
            }
            _ => return Err(bad(BAC_BAD_SET_LEN)),
        })
    };
    if let (Some(n), true) = (tun_md, exact) {
        return Ok(Act::SetTunMetadata(n as u8, v as u32));
    }
    Ok(match fl.name {
        "vlan_vid" if exact => Act::ModVlanVid((v & 0xfff) as u16),
        "vlan_pcp" if exact => Act::ModVlanPcp((v & 7) as u8),
        "tun_dst" | "tun_ipv6_dst" if exact => Act::SetTunDst(ip(o.value)?),
        "tun_src" | "tun_ipv6_src" if exact => Act::SetTunSrc(ip(o.value)?),
        "tun_id" if exact => Act::SetTunId(v as u64),
        _ => {
            writes(fl, m)?;
            if v & !fl.max_value() != 0 || (fl.shift > 0 && v & !fl.all_ones() != 0) {
                return Err(bad(BAC_BAD_SET_ARGUMENT));
            }
            Act::SetField {
                field: fl,
                value: v & mask,
                mask: mask & fl.all_ones(),
                load: false,
            }
        }
    })
}
