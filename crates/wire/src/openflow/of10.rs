//! OpenFlow 1.0 as `ovs-ofctl` speaks it by default (1.0 § 5; Open
//! vSwitch's Nicira extensions): the fixed 40-byte `ofp_match` of a plain
//! FLOW_MOD, Nicira's NXT_FLOW_MOD with an NXM match (the same TLV layout
//! as OXM, under classes 0x0000 and 0x0001), 1.0's actions with Nicira's
//! vendor actions, and the statistics `dump-flows` and `dump-aggregate`
//! ask for (NXST_FLOW, NXST_AGGREGATE), ports and their descriptions.
//!
//! Actions are read into the same [`Action`] as 1.3's (ports widened to
//! 32 bits, VLAN edits as set_field, NXAST_REG_LOAD of a whole field as
//! set_field), so one path turns either version's flow_mod into a rule.

use super::NXAST_RESUBMIT_TABLE;
use super::{header, oxms, Action, FlowMod, Message, Oxm, HEADER_LEN, NX_VENDOR, OF10, OXM_BASIC};
use super::{nxast, put_match, EXPERIMENTER_ACTION, NXAST_REG_LOAD, NXAST_REG_LOAD2};
use crate::error::{need, Error, Layer, Result};
use crate::{be16, be32};

pub const STATS_REQUEST10: u8 = 16;
pub const STATS_REPLY10: u8 = 17;
/// Statistics types of 1.0 (and OVS's port description).
pub const ST10_DESC: u16 = 0;
pub const ST10_TABLE: u16 = 3;
pub const ST10_PORT: u16 = 4;
pub const ST10_PORT_DESC: u16 = 13;
pub const ST10_VENDOR: u16 = 0xffff;
/// Nicira's statistics subtypes and flow_mod subtype.
pub const NXST_FLOW: u32 = 0;
pub const NXST_AGGREGATE: u32 = 1;
pub const NXT_FLOW_MOD: u32 = 13;
/// 1.0 action types.
pub const AT10_OUTPUT: u16 = 0;
pub const AT10_SET_VLAN_VID: u16 = 1;
pub const AT10_SET_VLAN_PCP: u16 = 2;
pub const AT10_STRIP_VLAN: u16 = 3;
/// Nicira action subtypes beyond resubmit.
pub const NXAST_SET_TUNNEL: u16 = 2;
pub const NXAST_SET_TUNNEL64: u16 = 9;
/// NXM classes: OpenFlow 1.0's fields and Nicira's.
pub const NXM_0: u16 = 0x0000;

/// 1.0's 16-bit reserved ports (0xff00 up) as 1.3's 32-bit ones.
pub fn port_from10(p: u16) -> u32 {
    if p >= 0xff00 {
        0xffff_0000 | u32::from(p)
    } else {
        u32::from(p)
    }
}

/// A 1.3 port number in 1.0's 16 bits (reserved ports keep their low
/// bits; ports beyond 16 bits cannot be written and become "none").
pub fn port_to10(p: u32) -> u16 {
    if p >= 0xffff_ff00 {
        p as u16
    } else {
        u16::try_from(p).unwrap_or(0xffff)
    }
}

/// `ofp_match` of 1.0 (§ 5.2.3), read: each field with whether it is
/// matched (its wildcard bit clear); nw_src/nw_dst as prefix lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Match10 {
    pub in_port: Option<u16>,
    pub dl_src: Option<[u8; 6]>,
    pub dl_dst: Option<[u8; 6]>,
    /// 0xffff: no tag.
    pub dl_vlan: Option<u16>,
    pub dl_vlan_pcp: Option<u8>,
    pub dl_type: Option<u16>,
    pub nw_tos: Option<u8>,
    pub nw_proto: Option<u8>,
    /// Address and prefix length (1..=32).
    pub nw_src: Option<([u8; 4], u8)>,
    pub nw_dst: Option<([u8; 4], u8)>,
    pub tp_src: Option<u16>,
    pub tp_dst: Option<u16>,
}

/// The 40 bytes of a 1.0 match.
pub const MATCH10_LEN: usize = 40;

impl Match10 {
    /// Read the match at the start of `b` (at least 40 bytes).
    pub fn parse(b: &[u8]) -> Match10 {
        let wc = be32(b, 0);
        let on = |bit: u32| wc & (1 << bit) == 0;
        let arr6 = |at: usize| {
            let mut a = [0u8; 6];
            a.copy_from_slice(&b[at..at + 6]);
            a
        };
        let arr4 = |at: usize| [b[at], b[at + 1], b[at + 2], b[at + 3]];
        // A prefix from the count of wildcarded low bits (32 or more: all).
        let prefix = |shift: u32, at: usize| {
            let wild = (wc >> shift) & 0x3f;
            (wild < 32).then(|| (arr4(at), (32 - wild) as u8))
        };
        Match10 {
            in_port: on(0).then(|| be16(b, 4)),
            dl_src: on(2).then(|| arr6(6)),
            dl_dst: on(3).then(|| arr6(12)),
            dl_vlan: on(1).then(|| be16(b, 18)),
            dl_vlan_pcp: on(20).then(|| b[20]),
            dl_type: on(4).then(|| be16(b, 22)),
            nw_tos: on(21).then(|| b[24]),
            nw_proto: on(5).then(|| b[25]),
            nw_src: prefix(8, 28),
            nw_dst: prefix(14, 32),
            tp_src: on(6).then(|| be16(b, 36)),
            tp_dst: on(7).then(|| be16(b, 38)),
        }
    }
}

fn bad(field: &'static str, offset: usize, reason: &'static str) -> Error {
    Error::invalid(Layer::OpenFlow, field, offset, reason)
}

/// 1.0's actions of `b` (at `base` in the message), as [`Action`]s.
pub fn actions10(b: &[u8], base: usize) -> Result<Vec<Action<'_>>> {
    actions10_at(b, base, 0)
}

/// [`actions10`] of a list nested `depth` clones deep.
fn actions10_at(b: &[u8], base: usize, depth: usize) -> Result<Vec<Action<'_>>> {
    nxast::check_depth(depth, base)?;
    super::each_action(b, base, |typ, a, at| {
        let vendor = typ == EXPERIMENTER_ACTION && be32(a, 4) == NX_VENDOR;
        Ok(match typ {
            AT10_OUTPUT => Action::Output {
                port: port_from10(be16(a, 4)),
                max_len: be16(a, 6),
            },
            AT10_SET_VLAN_VID => Action::SetField(Oxm {
                class: OXM_BASIC,
                field: 6,
                value: &a[4..6],
                mask: None,
            }),
            AT10_SET_VLAN_PCP => Action::SetField(Oxm {
                class: OXM_BASIC,
                field: 7,
                value: &a[4..5],
                mask: None,
            }),
            AT10_STRIP_VLAN => Action::PopVlan,
            _ if vendor => nx_action(a, at, depth)?,
            t => Action::Other { typ: t },
        })
    })
}

/// A Nicira vendor action (vendor checked). Beyond what the `nxast`
/// reader takes in every version, 1.0 keeps its own readings:
/// set_tunnel(64) and a REG_LOAD of a whole field are set_fields, and so
/// is REG_LOAD2.
fn nx_action(a: &[u8], base: usize, depth: usize) -> Result<Action<'_>> {
    let len = a.len();
    if len < 16 {
        // Refused there, as too short for its header.
        return nxast::read_nx(a, base, |_, _| Ok(Vec::new()));
    }
    let sub = be16(a, 8);
    Ok(match sub {
        NXAST_SET_TUNNEL => Action::SetField(Oxm {
            class: OXM_BASIC,
            field: 38,
            value: &a[12..16],
            mask: None,
        }),
        NXAST_SET_TUNNEL64 if len >= 24 => Action::SetField(Oxm {
            class: OXM_BASIC,
            field: 38,
            value: &a[16..24],
            mask: None,
        }),
        // A load of a whole field is a set_field; of part of one, a
        // RegLoad.
        NXAST_REG_LOAD if len >= 24 => {
            let ofs_nbits = be16(a, 10);
            let dst = be32(a, 12);
            let field_len = (dst & 0xff) as usize;
            let (ofs, nbits) = (ofs_nbits >> 6, (ofs_nbits & 0x3f) + 1);
            if ofs != 0
                || usize::from(nbits) != field_len * 8
                || field_len == 0
                || field_len > 8
                || dst & 0x100 != 0
                || (dst >> 16) as u16 == nxast::OXM_EXPERIMENTER
            {
                return nxast::read_nx(a, base, |_, _| Ok(Vec::new()));
            }
            Action::SetField(Oxm {
                class: (dst >> 16) as u16,
                field: ((dst >> 9) & 0x7f) as u8,
                value: &a[24 - field_len..24],
                mask: None,
            })
        }
        NXAST_REG_LOAD2 => match nxast::read_nx(a, base, |_, _| Ok(Vec::new()))? {
            Action::RegLoad2(o) => Action::SetField(o),
            other => other,
        },
        _ => nxast::read_nx(a, base, |inner, at| actions10_at(inner, at, depth + 1))?,
    })
}

impl Action<'_> {
    /// The action as OpenFlow 1.0 (with Nicira's actions) writes it, as
    /// Open vSwitch does: VLAN set_fields as SET_VLAN_VID/PCP, other
    /// set_fields as NXAST_REG_LOAD (a masked one, one per run of mask
    /// bits), push_vlan as nothing (in 1.0 it is a side effect of setting
    /// a VLAN field), dec_ttl as NXAST_DEC_TTL, the other Nicira actions
    /// as in every version (a clone's actions in 1.0's forms). `Other`
    /// writes nothing.
    pub fn emit10(&self, out: &mut Vec<u8>) {
        let put = |out: &mut Vec<u8>, typ: u16, body: &[u8]| {
            let len = (4 + body.len()).div_ceil(8) * 8;
            out.extend_from_slice(&typ.to_be_bytes());
            out.extend_from_slice(&(len as u16).to_be_bytes());
            out.extend_from_slice(body);
            out.resize(out.len() + len - 4 - body.len(), 0);
        };
        let nx = |out: &mut Vec<u8>, sub: u16, rest: &[u8]| {
            let mut body = NX_VENDOR.to_be_bytes().to_vec();
            body.extend_from_slice(&sub.to_be_bytes());
            body.extend_from_slice(rest);
            put(out, EXPERIMENTER_ACTION, &body);
        };
        match self {
            &Action::Output { port, max_len } => {
                let mut b = port_to10(port).to_be_bytes().to_vec();
                b.extend_from_slice(&max_len.to_be_bytes());
                put(out, AT10_OUTPUT, &b);
            }
            Action::PushVlan { .. } => {}
            Action::PopVlan => put(out, AT10_STRIP_VLAN, &[0; 4]),
            Action::SetField(o)
                if o.mask.is_none()
                    && o.class == OXM_BASIC
                    && o.field == 6
                    && o.value.len() == 2 =>
            {
                let vid = be16(o.value, 0) & 0x0fff;
                let mut b = vid.to_be_bytes().to_vec();
                b.extend_from_slice(&[0, 0]);
                put(out, AT10_SET_VLAN_VID, &b);
            }
            Action::SetField(o)
                if o.mask.is_none()
                    && o.class == OXM_BASIC
                    && o.field == 7
                    && o.value.len() == 1 =>
            {
                put(out, AT10_SET_VLAN_PCP, &[o.value[0], 0, 0, 0]);
            }
            // A masked set_field: loads of its mask's bits (or REG_LOAD2).
            Action::SetField(o) if o.mask.is_some() => nxast::put_set_field(out, o, OF10),
            // tun_metadata is of variable length: NXAST_REG_LOAD2 with the
            // OXM TLV, as OVS writes it (ovs-ofctl prints set_field); so is
            // an experimenter's field, which REG_LOAD cannot name.
            Action::SetField(o)
                if (o.class == super::NXM_1 && (40..104).contains(&o.field))
                    || o.class == nxast::OXM_EXPERIMENTER =>
            {
                let mut b = Vec::new();
                o.emit(&mut b);
                nx(out, NXAST_REG_LOAD2, &b);
            }
            Action::SetField(o)
                if !o.value.is_empty()
                    && (o.value.len() <= 8 || o.value.len().is_multiple_of(8)) =>
            {
                // NXAST_REG_LOAD: every bit of the field, 64 at a time from
                // the lowest (an IPv6 address takes two); the tunnel id as
                // NXM_NX_TUN_ID (its NXM name).
                let (class, field) = if (o.class, o.field) == (OXM_BASIC, 38) {
                    (super::NXM_1, 16)
                } else {
                    (o.class, o.field)
                };
                let len = o.value.len();
                let dst = u32::from(class) << 16 | u32::from(field) << 9 | len as u32;
                let chunks = len.div_ceil(8);
                for i in 0..chunks {
                    let end = len - 8 * i;
                    let start = end.saturating_sub(8);
                    let bits = (end - start) * 8;
                    let ofs_nbits = ((64 * i) << 6 | (bits - 1)) as u16;
                    let mut b = ofs_nbits.to_be_bytes().to_vec();
                    b.extend_from_slice(&dst.to_be_bytes());
                    let mut v = [0u8; 8];
                    v[8 - (end - start)..].copy_from_slice(&o.value[start..end]);
                    b.extend_from_slice(&v);
                    nx(out, NXAST_REG_LOAD, &b);
                }
            }
            Action::SetField(_) | Action::Other { .. } => {}
            &Action::NxResubmit { port, table } => {
                let mut b = port.to_be_bytes().to_vec();
                b.extend_from_slice(&[table, 0, 0, 0]);
                nx(out, NXAST_RESUBMIT_TABLE, &b);
            }
            Action::Clone(acts) => nxast::put_clone(out, |out| {
                for a in acts {
                    a.emit10(out);
                }
            }),
            a => a.emit_any(OF10, out),
        }
    }
}

/// A plain 1.0 FLOW_MOD: the flow_mod's fields (its match left empty)
/// and the 1.0 match.
pub fn parse_flow_mod10<'a>(m: &Message<'a>) -> Result<(FlowMod<'a>, Match10)> {
    const AT: usize = HEADER_LEN + MATCH10_LEN;
    let b = m.bytes();
    need(Layer::OpenFlow, "1.0 flow_mod", b, 0, AT + 24)?;
    let fm = FlowMod {
        cookie: u64::from(be32(b, AT)) << 32 | u64::from(be32(b, AT + 4)),
        cookie_mask: 0,
        // With Nicira's flow_mod_table_id turned on, the command's high
        // byte is the table (0 otherwise).
        table_id: (be16(b, AT + 8) >> 8) as u8,
        command: be16(b, AT + 8) as u8,
        idle_timeout: be16(b, AT + 10),
        hard_timeout: be16(b, AT + 12),
        priority: be16(b, AT + 14),
        buffer_id: be32(b, AT + 16),
        out_port: port_from10(be16(b, AT + 20)),
        out_group: 0xffff_ffff,
        flags: be16(b, AT + 22),
        matches: Vec::new(),
        actions: actions10(&b[AT + 24..], AT + 24)?,
        other_instructions: Vec::new(),
    };
    Ok((fm, Match10::parse(&b[HEADER_LEN..])))
}

/// Nicira's NXT_FLOW_MOD (`body` follows the vendor and subtype): NXM
/// match, 1.0 actions.
pub fn parse_nx_flow_mod(body: &[u8]) -> Result<FlowMod<'_>> {
    const BASE: usize = HEADER_LEN + 8;
    need(Layer::OpenFlow, "nx flow_mod", body, 0, 32).map_err(|e| e.at(BASE))?;
    let match_len = be16(body, 24) as usize;
    need(Layer::OpenFlow, "nx match", body, 32, match_len).map_err(|e| e.at(BASE))?;
    let acts_at = 32 + match_len.div_ceil(8) * 8;
    let acts = if acts_at <= body.len() {
        actions10(&body[acts_at..], BASE + acts_at)?
    } else {
        return Err(bad(
            "nx match length",
            BASE + 24,
            "padding runs past the message",
        ));
    };
    let command = be16(body, 8);
    Ok(FlowMod {
        cookie: u64::from(be32(body, 0)) << 32 | u64::from(be32(body, 4)),
        cookie_mask: 0,
        // The high byte names the table once a client enabled
        // NXT_FLOW_MOD_TABLE_ID; ovs-ofctl leaves it 0.
        table_id: (command >> 8) as u8,
        command: command as u8,
        idle_timeout: be16(body, 10),
        hard_timeout: be16(body, 12),
        priority: be16(body, 14),
        buffer_id: be32(body, 16),
        out_port: port_from10(be16(body, 20)),
        out_group: 0xffff_ffff,
        flags: be16(body, 22),
        matches: oxms(&body[32..32 + match_len], BASE + 32)?,
        actions: acts,
        other_instructions: Vec::new(),
    })
}

/// A 1.0 statistics request: its type and body.
pub fn parse_stats10<'a>(m: &Message<'a>) -> Result<(u16, &'a [u8])> {
    let b = m.body();
    need(Layer::OpenFlow, "stats request", b, 0, 4).map_err(|e| e.at(HEADER_LEN))?;
    Ok((be16(b, 0), &b[4..]))
}

/// Nicira's flow or aggregate statistics request (a vendor stats body):
/// subtype, out_port, table and NXM match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NxStatsRequest<'a> {
    pub subtype: u32,
    pub out_port: u32,
    pub table_id: u8,
    pub matches: Vec<Oxm<'a>>,
}

/// Read the body of a vendor stats request (after the stats type and
/// flags); `None` when it is another vendor's.
pub fn parse_nx_stats_request(body: &[u8]) -> Result<Option<NxStatsRequest<'_>>> {
    const BASE: usize = HEADER_LEN + 4;
    need(Layer::OpenFlow, "vendor stats", body, 0, 12).map_err(|e| e.at(BASE))?;
    if be32(body, 0) != NX_VENDOR {
        return Ok(None);
    }
    let subtype = be32(body, 4);
    need(Layer::OpenFlow, "nx stats request", body, 0, 20).map_err(|e| e.at(BASE))?;
    let match_len = be16(body, 14) as usize;
    need(Layer::OpenFlow, "nx match", body, 20, match_len).map_err(|e| e.at(BASE))?;
    Ok(Some(NxStatsRequest {
        subtype,
        out_port: port_from10(be16(body, 12)),
        table_id: body[16],
        matches: oxms(&body[20..20 + match_len], BASE + 20)?,
    }))
}

/// One NXST_FLOW entry: the flow's NXM match and 1.0 actions.
#[allow(clippy::too_many_arguments)]
pub fn nx_flow_stats_entry(
    table_id: u8,
    duration_ns: u64,
    priority: u16,
    idle_timeout: u16,
    hard_timeout: u16,
    idle_age_s: u16,
    cookie: u64,
    packets: u64,
    bytes: u64,
    matches: &[Oxm<'_>],
    actions: &[Action<'_>],
) -> Vec<u8> {
    let mut e = vec![0, 0, table_id, 0];
    let secs = duration_ns / 1_000_000_000;
    super::put_duration(&mut e, duration_ns);
    e.extend_from_slice(&priority.to_be_bytes());
    e.extend_from_slice(&idle_timeout.to_be_bytes());
    e.extend_from_slice(&hard_timeout.to_be_bytes());
    let at_match_len = e.len();
    e.extend_from_slice(&[0, 0]); // match_len, below
    let age = (secs.min(0xfffe) as u16).saturating_add(1);
    e.extend_from_slice(&idle_age_s.saturating_add(1).to_be_bytes());
    e.extend_from_slice(&age.to_be_bytes()); // hard_age
    for v in [cookie, packets, bytes] {
        e.extend_from_slice(&v.to_be_bytes());
    }
    // The NXM match is OXM's TLVs without OXM's 4-byte match header.
    let mut m = Vec::new();
    put_match(&mut m, matches);
    let fields_len = usize::from(be16(&m, 2)) - 4;
    e.extend_from_slice(&m[4..4 + fields_len]);
    e.resize(e.len().div_ceil(8) * 8, 0);
    e[at_match_len..at_match_len + 2].copy_from_slice(&(fields_len as u16).to_be_bytes());
    for a in actions {
        a.emit10(&mut e);
    }
    let len = (e.len() as u16).to_be_bytes();
    e[..2].copy_from_slice(&len);
    e
}

/// 1.0 statistics replies of `typ` carrying `entries`, split at 64 KiB
/// (REPLY_MORE on all but the last); for vendor statistics `vendor_head`
/// is the vendor, subtype and pad that lead each reply's body.
pub fn stats10_replies(
    xid: u32,
    typ: u16,
    vendor_head: &[u8],
    entries: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let start = |out: &mut Vec<u8>| {
        out.extend_from_slice(&header(OF10, STATS_REPLY10, 0, xid));
        out.extend_from_slice(&typ.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(vendor_head);
    };
    let finish = |mut out: Vec<u8>, more: bool| {
        let len = (out.len() as u16).to_be_bytes();
        out[2..4].copy_from_slice(&len);
        if more {
            out[HEADER_LEN + 2..HEADER_LEN + 4].copy_from_slice(&1u16.to_be_bytes());
        }
        out
    };
    let mut msgs = Vec::new();
    let mut cur = Vec::new();
    start(&mut cur);
    let empty = cur.len();
    for e in entries {
        if cur.len() > empty && cur.len() + e.len() > super::MAX_LEN {
            msgs.push(finish(std::mem::take(&mut cur), true));
            start(&mut cur);
        }
        cur.extend_from_slice(e);
    }
    msgs.push(finish(cur, false));
    msgs
}

/// The vendor, subtype and pad that lead a Nicira stats reply's body.
pub fn nx_stats_head(subtype: u32) -> Vec<u8> {
    let mut h = NX_VENDOR.to_be_bytes().to_vec();
    h.extend_from_slice(&subtype.to_be_bytes());
    h.extend_from_slice(&[0; 4]);
    h
}

/// A 1.0 port statistics entry (§ 5.3.5, 104 bytes).
pub fn port_stats10(port_no: u16, counters: [u64; 8]) -> Vec<u8> {
    let mut b = port_no.to_be_bytes().to_vec();
    b.extend_from_slice(&[0; 6]);
    for v in counters {
        b.extend_from_slice(&v.to_be_bytes());
    }
    // frame, overrun and CRC errors, collisions: not counted.
    for _ in 0..4 {
        b.extend_from_slice(&u64::MAX.to_be_bytes());
    }
    b
}

/// A 1.0 `ofp_phy_port` (§ 5.2.1, 48 bytes).
pub fn phy_port10(port_no: u16, hw_addr: [u8; 6], name: &str, config: u32, state: u32) -> Vec<u8> {
    let mut b = port_no.to_be_bytes().to_vec();
    b.extend_from_slice(&hw_addr);
    let n = name.as_bytes();
    let k = n.len().min(15);
    b.extend_from_slice(&n[..k]);
    b.resize(b.len() + 16 - k, 0);
    for v in [config, state, 0, 0, 0, 0] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::{parse_nx, NXM_1};

    fn unhex(s: &str) -> Vec<u8> {
        crate::from_hex(s).unwrap()
    }

    /// What `ovs-ofctl add-flow` (1.0, its default) sent for
    /// `priority=7,in_port=3,dl_src=00:00:00:00:00:01,dl_vlan=7,ip,
    /// nw_src=10.0.0.0/8,nw_tos=32,tcp,tp_dst=80
    /// actions=mod_vlan_vid:9,strip_vlan,output:4` (captured here).
    #[test]
    fn a_plain_flow_mod_reads() {
        let b = unhex("010e006000000006001818480003000000000001000000000000000700000800200600000a000000000000000000005000000000000000000000000000000007ffffffffffff0000000100080009000000030008000000000000000800040000");
        let m = Message::new_checked(&b).unwrap();
        let (fm, m10) = parse_flow_mod10(&m).unwrap();
        assert_eq!((fm.command, fm.priority, fm.buffer_id), (0, 7, 0xffff_ffff));
        assert_eq!(m10.in_port, Some(3));
        assert_eq!(m10.dl_src, Some([0, 0, 0, 0, 0, 1]));
        assert_eq!(
            (m10.dl_dst, m10.dl_vlan, m10.dl_vlan_pcp),
            (None, Some(7), None)
        );
        assert_eq!(
            (m10.dl_type, m10.nw_tos, m10.nw_proto),
            (Some(0x0800), Some(32), Some(6))
        );
        assert_eq!((m10.nw_src, m10.nw_dst), (Some(([10, 0, 0, 0], 8)), None));
        assert_eq!((m10.tp_src, m10.tp_dst), (None, Some(80)));
        assert_eq!(
            fm.actions,
            vec![
                Action::SetField(Oxm {
                    class: OXM_BASIC,
                    field: 6,
                    value: &[0, 9],
                    mask: None
                }),
                Action::PopVlan,
                Action::Output {
                    port: 4,
                    max_len: 0
                },
            ]
        );
        // The same actions written back are OVS's bytes.
        let mut out = Vec::new();
        for a in &fm.actions {
            a.emit10(&mut out);
        }
        assert_eq!(out, b[b.len() - 24..]);
    }

    /// Its NXT_FLOW_MOD for `priority=8,tun_id=0x5,in_port=1
    /// actions=set_tunnel64:0x1122334455,set_field:0x9->tun_id,
    /// set_field:10.0.0.9->tun_src,resubmit(,2),controller:128,normal`.
    #[test]
    fn a_nicira_flow_mod_reads() {
        let b = unhex("010400b000000008000023200000000d00000000000000000000000000000008ffffffffffff00000012000000000000000000020001000120080000000000000005000000000000ffff00180000232000090000000000000000001122334455ffff0018000023200007003f000120080000000000000009ffff0018000023200007001f00013e04000000000a000009ffff001000002320000efff80200000000000008fffd008000000008fffa0000");
        let m = Message::new_checked(&b).unwrap();
        let nx = parse_nx(&m).unwrap();
        assert_eq!(nx.subtype, NXT_FLOW_MOD);
        let fm = parse_nx_flow_mod(nx.body).unwrap();
        assert_eq!((fm.command, fm.priority, fm.table_id), (0, 8, 0));
        assert_eq!(fm.matches.len(), 2);
        assert_eq!(
            (
                fm.matches[0].class,
                fm.matches[0].field,
                fm.matches[0].value
            ),
            (NXM_0, 0, &[0u8, 1][..])
        );
        assert_eq!((fm.matches[1].class, fm.matches[1].field), (NXM_1, 16));
        let want_ports = [
            Action::NxResubmit {
                port: 0xfff8,
                table: 2,
            },
            Action::Output {
                port: 0xffff_fffd,
                max_len: 128,
            },
            Action::Output {
                port: 0xffff_fffa,
                max_len: 0,
            },
        ];
        assert_eq!(&fm.actions[3..], &want_ports[..]);
        match &fm.actions[0] {
            Action::SetField(o) => assert_eq!(
                (o.field, o.value),
                (38, &[0, 0, 0, 0x11, 0x22, 0x33, 0x44, 0x55][..])
            ),
            a => panic!("{a:?}"),
        }
        match &fm.actions[2] {
            Action::SetField(o) => {
                assert_eq!((o.class, o.field, o.value), (NXM_1, 31, &[10, 0, 0, 9][..]))
            }
            a => panic!("{a:?}"),
        }
        // REG_LOAD of tun_id and tun_src, resubmit, controller, normal
        // written back are OVS's bytes.
        let mut out = Vec::new();
        for a in &fm.actions[1..] {
            a.emit10(&mut out);
        }
        let acts_at = b.len() - out.len();
        assert_eq!(out, b[acts_at..]);
    }

    /// Its NXST_FLOW request for `dump-flows` with no match.
    #[test]
    fn the_dump_flows_request_reads() {
        let b = unhex("0110002000000004ffff0000000023200000000000000000ffff0000ff000000");
        let m = Message::new_checked(&b).unwrap();
        let (typ, body) = parse_stats10(&m).unwrap();
        assert_eq!(typ, ST10_VENDOR);
        let r = parse_nx_stats_request(body).unwrap().unwrap();
        assert_eq!(
            (r.subtype, r.out_port, r.table_id, r.matches.len()),
            (NXST_FLOW, 0xffff_ffff, 0xff, 0)
        );
        for n in 0..body.len() {
            let _ = parse_nx_stats_request(&body[..n]);
        }
    }

    /// The reply entry OVS 3.1 sent for `in_port=2
    /// actions=set_field:10.222.0.6->tun_dst,output:1` 19 ms after it was
    /// added (captured), rebuilt byte for byte.
    #[test]
    fn a_flow_entry_matches_ovs_bytes() {
        let ovs = unhex("00580000000000000121eac08000000000000006000100010000000000000000000000000000000000000000000000000000000200020000ffff0018000023200007001f00014004000000000ade00060000000800010000");
        let port = [0u8, 2];
        let ip = [10, 222, 0, 6];
        let e = nx_flow_stats_entry(
            0,
            0x0121_eac0,
            0x8000,
            0,
            0,
            0,
            0,
            0,
            0,
            &[Oxm {
                class: NXM_0,
                field: 0,
                value: &port,
                mask: None,
            }],
            &[
                Action::SetField(Oxm {
                    class: NXM_1,
                    field: 32,
                    value: &ip,
                    mask: None,
                }),
                Action::Output {
                    port: 1,
                    max_len: 0,
                },
            ],
        );
        assert_eq!(e, ovs);
    }
}
