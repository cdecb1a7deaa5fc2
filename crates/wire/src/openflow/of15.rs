//! OpenFlow 1.5 (1.5.1; Open vSwitch's `include/openflow/openflow-1.5.h`)
//! where it differs from 1.3, as `ovs-ofctl -O OpenFlow15` and OVN's
//! ovn-controller speak it to Open vSwitch 3.1: statistics as OXS TLVs
//! (§ 7.2.4) in flow descriptions (`dump-flows`), the aggregate reply and
//! FLOW_REMOVED; bundles (§ 7.3.9, which `ovs-ofctl --bundle` and
//! ovn-controller use to change many rules at once); PACKET_OUT with a
//! match for its pipeline fields; ports with properties (1.4's form,
//! kept in 1.5).
//!
//! What 1.5 lays out as 1.3 does (the common header, FLOW_MOD, the match,
//! actions and instructions, multipart framing, the flow statistics
//! request) is read and written by the 1.3 code; [`multipart_replies_in`]
//! writes the multipart replies at 1.5's version.
//!
//! ```text
//! ofp_stats:        reserved (2) | length (2) | OXS TLVs | pad to 8
//! OXS TLV:          class (2) | field (7 bits) reserved (1 bit) | length (1) | value
//! flow_desc:        length (2) | pad (2) | table (1) | pad (1) | priority (2)
//!                   | idle_timeout (2) | hard_timeout (2) | flags (2)
//!                   | importance (2) | cookie (8) | match | stats | instructions
//! flow_removed:     header | table (1) | reason (1) | priority (2)
//!                   | idle_timeout (2) | hard_timeout (2) | cookie (8) | match | stats
//! bundle_control:   header | bundle_id (4) | type (2) | flags (2) | properties
//! bundle_add:       header | bundle_id (4) | pad (2) | flags (2) | message
//!                   | (with properties: pad to 8, properties)
//! packet_out:       header | buffer_id (4) | actions_len (2) | pad (2) | match
//!                   | actions | frame
//! port (1.4):       port_no (4) | length (2) | pad (2) | hw_addr (6) | pad (2)
//!                   | name (16) | config (4) | state (4) | properties
//! ```
//!
//! Every parser here reads any bytes without panicking: what does not fit
//! the layout is an error naming the field and its offset in the message
//! (or in the slice given, plus `base`).
//!
//! [`multipart_replies_in`]: super::multipart_replies_in

use super::{actions, header, oxms, put_apply_actions_in, put_duration, put_match};
use super::{Action, Message, Oxm, PortDesc, HEADER_LEN, MAX_LEN, OF15};
use crate::error::{need, Error, Layer, Result};
use crate::{be16, be32};

/// Message types new since 1.3 (1.5 § 7.1).
pub const BUNDLE_CONTROL: u8 = 33;
pub const BUNDLE_ADD_MESSAGE: u8 = 34;

/// Multipart types whose bodies 1.5 changed: the flow description (the
/// number 1.3's flow statistics had; `ovs-ofctl -O OpenFlow15 dump-flows`
/// asks for it) and 1.5's new flow statistics.
pub const MP_FLOW_DESC: u16 = 1;
pub const MP_FLOW_STATS15: u16 = 17;

/// OXS's class for OpenFlow's basic statistics, and its fields.
pub const OXS_BASIC: u16 = 0x8002;
pub const OXS_DURATION: u8 = 0;
pub const OXS_IDLE_TIME: u8 = 1;
pub const OXS_FLOW_COUNT: u8 = 3;
pub const OXS_PACKET_COUNT: u8 = 4;
pub const OXS_BYTE_COUNT: u8 = 5;

/// Bundle control types (1.5 § 7.3.9.1): each reply is its request + 1.
pub const BCT_OPEN_REQUEST: u16 = 0;
pub const BCT_OPEN_REPLY: u16 = 1;
pub const BCT_CLOSE_REQUEST: u16 = 2;
pub const BCT_CLOSE_REPLY: u16 = 3;
pub const BCT_COMMIT_REQUEST: u16 = 4;
pub const BCT_COMMIT_REPLY: u16 = 5;
pub const BCT_DISCARD_REQUEST: u16 = 6;
pub const BCT_DISCARD_REPLY: u16 = 7;
/// Bundle flags: apply all or nothing; apply in the order added.
pub const BF_ATOMIC: u16 = 1;
pub const BF_ORDERED: u16 = 2;

/// The bundle error type (1.5 § 7.5.4.18) and its codes.
pub const ET_BUNDLE_FAILED: u16 = 17;
pub const BFC_UNKNOWN: u16 = 0;
pub const BFC_EPERM: u16 = 1;
pub const BFC_BAD_ID: u16 = 2;
pub const BFC_BUNDLE_EXIST: u16 = 3;
pub const BFC_BUNDLE_CLOSED: u16 = 4;
pub const BFC_OUT_OF_BUNDLES: u16 = 5;
pub const BFC_BAD_TYPE: u16 = 6;
pub const BFC_BAD_FLAGS: u16 = 7;
pub const BFC_MSG_BAD_LEN: u16 = 8;
pub const BFC_MSG_BAD_XID: u16 = 9;
pub const BFC_MSG_UNSUP: u16 = 10;
pub const BFC_MSG_CONFLICT: u16 = 11;
pub const BFC_MSG_TOO_MANY: u16 = 12;
pub const BFC_MSG_FAILED: u16 = 13;
pub const BFC_TIMEOUT: u16 = 14;
pub const BFC_BUNDLE_IN_PROGRESS: u16 = 15;

/// The port description property holding an Ethernet port's features
/// (1.4 § 7.2.1.1), and its length.
pub const PDPT_ETHERNET: u16 = 0;
const PORT14_LEN: usize = 40;
const PDPT_ETHERNET_LEN: usize = 32;

/// PORT_STATUS's type (the same number as 1.3's).
const PORT_STATUS: u8 = 12;

fn bad(field: &'static str, offset: usize, reason: &'static str) -> Error {
    Error::invalid(Layer::OpenFlow, field, offset, reason)
}

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from(be32(b, at)) << 32 | u64::from(be32(b, at + 4))
}

/// Write a 16-bit length at `at`.
fn put_len(out: &mut [u8], at: usize, len: usize) {
    out[at..at + 2].copy_from_slice(&(len.min(MAX_LEN) as u16).to_be_bytes());
}

/// Flow statistics as 1.5 carries them (`struct ofp_stats`, § 7.2.4):
/// each present field is one OXS TLV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OxsStats {
    /// Time since the flow was added, in nanoseconds.
    pub duration_ns: Option<u64>,
    /// Time since the flow last matched a packet, in nanoseconds.
    pub idle_ns: Option<u64>,
    /// How many flows an aggregate counts.
    pub flow_count: Option<u32>,
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
}

/// The OXS TLV header of a basic field with a `len`-byte value.
fn put_oxs_header(out: &mut Vec<u8>, field: u8, len: u8) {
    out.extend_from_slice(&OXS_BASIC.to_be_bytes());
    out.push(field << 1);
    out.push(len);
}

/// Append `s` as `struct ofp_stats` to `out`, padded to 8 (the length
/// says the bytes before the padding). The fields go in the order Open
/// vSwitch 3.1 writes them: duration, idle time, packets, bytes, flow
/// count (1.5 fixes no order).
pub fn put_oxs_stats(out: &mut Vec<u8>, s: &OxsStats) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    for (field, ns) in [(OXS_DURATION, s.duration_ns), (OXS_IDLE_TIME, s.idle_ns)] {
        if let Some(ns) = ns {
            put_oxs_header(out, field, 8);
            put_duration(out, ns);
        }
    }
    for (field, n) in [(OXS_PACKET_COUNT, s.packets), (OXS_BYTE_COUNT, s.bytes)] {
        if let Some(n) = n {
            put_oxs_header(out, field, 8);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
    if let Some(n) = s.flow_count {
        put_oxs_header(out, OXS_FLOW_COUNT, 4);
        out.extend_from_slice(&n.to_be_bytes());
    }
    let len = out.len() - start;
    put_len(out, start + 2, len);
    out.resize(start + len.div_ceil(8) * 8, 0);
}

/// `s` as `struct ofp_stats`, padded to 8.
pub fn oxs_stats(s: &OxsStats) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    put_oxs_stats(&mut out, s);
    out
}

/// Read the `struct ofp_stats` at the start of `b` (at `base` in the
/// message) and the bytes it takes with its padding. Fields of other
/// classes or unknown fields are skipped; a known field of the wrong
/// length is refused.
pub fn parse_oxs_stats(b: &[u8], base: usize) -> Result<(OxsStats, usize)> {
    need(Layer::OpenFlow, "stats header", b, 0, 4).map_err(|e| e.at(base))?;
    let len = be16(b, 2) as usize;
    if len < 4 {
        return Err(bad(
            "stats length",
            base + 2,
            "shorter than its 4-byte header",
        ));
    }
    let padded = len.div_ceil(8) * 8;
    need(Layer::OpenFlow, "stats", b, 0, padded).map_err(|e| e.at(base))?;
    let mut s = OxsStats::default();
    let mut at = 4;
    while at < len {
        need(Layer::OpenFlow, "oxs header", &b[..len], at, 4).map_err(|e| e.at(base))?;
        let class = be16(b, at);
        let field = b[at + 2] >> 1;
        let flen = b[at + 3] as usize;
        need(Layer::OpenFlow, "oxs value", &b[..len], at + 4, flen).map_err(|e| e.at(base))?;
        let v = &b[at + 4..at + 4 + flen];
        if class == OXS_BASIC {
            let want = match field {
                OXS_DURATION | OXS_IDLE_TIME | OXS_PACKET_COUNT | OXS_BYTE_COUNT => 8,
                OXS_FLOW_COUNT => 4,
                _ => flen,
            };
            if flen != want {
                return Err(bad("oxs length", base + at + 3, "not the field's size"));
            }
            let time = || u64::from(be32(v, 0)) * 1_000_000_000 + u64::from(be32(v, 4));
            match field {
                OXS_DURATION => s.duration_ns = Some(time()),
                OXS_IDLE_TIME => s.idle_ns = Some(time()),
                OXS_FLOW_COUNT => s.flow_count = Some(be32(v, 0)),
                OXS_PACKET_COUNT => s.packets = Some(be64(v, 0)),
                OXS_BYTE_COUNT => s.bytes = Some(be64(v, 0)),
                _ => {}
            }
        }
        at += 4 + flen;
    }
    Ok((s, padded))
}

/// The OXM match (type 1) at `at` in `b`: its fields, and where what
/// follows its padding starts. Offsets in errors are `b`'s.
fn read_match(b: &[u8], at: usize) -> Result<(Vec<Oxm<'_>>, usize)> {
    need(Layer::OpenFlow, "match header", b, at, 4)?;
    if be16(b, at) != 1 {
        return Err(bad("match type", at, "not OXM (1)"));
    }
    let len = be16(b, at + 2) as usize;
    if len < 4 {
        return Err(bad(
            "match length",
            at + 2,
            "shorter than its 4-byte header",
        ));
    }
    let padded = len.div_ceil(8) * 8;
    need(Layer::OpenFlow, "match", b, at, padded)?;
    Ok((oxms(&b[at + 4..at + len], at + 4)?, at + padded))
}

/// One flow's description (1.5 § 7.3.5.2, OFPMP_FLOW_DESC), the entry
/// of the reply `ovs-ofctl -O OpenFlow15 dump-flows` reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowDesc15<'a> {
    pub table_id: u8,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    /// Eviction precedence (1.4 on).
    pub importance: u16,
    pub cookie: u64,
    /// Time since the flow was added, in nanoseconds.
    pub duration_ns: u64,
    /// Time since it last matched a packet, in nanoseconds.
    pub idle_ns: u64,
    pub packets: u64,
    pub bytes: u64,
    pub matches: Vec<Oxm<'a>>,
    /// The apply-actions instruction's actions (none: drop).
    pub actions: Vec<Action<'a>>,
}

impl FlowDesc15<'_> {
    /// The entry: its fixed part, the match, the statistics (duration,
    /// idle time, packets, bytes), the apply-actions instruction (its
    /// actions in 1.5's forms).
    pub fn emit(&self) -> Vec<u8> {
        let mut e = Vec::with_capacity(160);
        e.extend_from_slice(&[0, 0, 0, 0, self.table_id, 0]);
        for v in [
            self.priority,
            self.idle_timeout,
            self.hard_timeout,
            self.flags,
            self.importance,
        ] {
            e.extend_from_slice(&v.to_be_bytes());
        }
        e.extend_from_slice(&self.cookie.to_be_bytes());
        put_match(&mut e, &self.matches);
        put_oxs_stats(
            &mut e,
            &OxsStats {
                duration_ns: Some(self.duration_ns),
                idle_ns: Some(self.idle_ns),
                flow_count: None,
                packets: Some(self.packets),
                bytes: Some(self.bytes),
            },
        );
        put_apply_actions_in(OF15, &mut e, &self.actions);
        let len = e.len();
        put_len(&mut e, 0, len);
        e
    }
}

/// Read the flow description at the start of `b` (at `base` in the
/// message) and the bytes it takes (a controller's view: tests and tools
/// use it). Statistics it lacks read as 0; instructions other than
/// apply-actions are skipped.
pub fn parse_flow_desc15(b: &[u8], base: usize) -> Result<(FlowDesc15<'_>, usize)> {
    const FIXED: usize = 24;
    need(Layer::OpenFlow, "flow_desc", b, 0, FIXED + 4).map_err(|e| e.at(base))?;
    let len = be16(b, 0) as usize;
    if len < FIXED + 4 {
        return Err(bad("flow_desc length", base, "shorter than its fixed part"));
    }
    need(Layer::OpenFlow, "flow_desc", b, 0, len).map_err(|e| e.at(base))?;
    let b = &b[..len];
    let (matches, at) = read_match(b, FIXED).map_err(|e| e.at(base))?;
    let (stats, n) = parse_oxs_stats(&b[at..], base + at)?;
    let mut at = at + n;
    let mut acts = Vec::new();
    while at < len {
        need(Layer::OpenFlow, "instruction header", b, at, 4).map_err(|e| e.at(base))?;
        let typ = be16(b, at);
        let ilen = be16(b, at + 2) as usize;
        if ilen < 8 || !ilen.is_multiple_of(8) {
            return Err(bad(
                "instruction length",
                base + at + 2,
                "not a multiple of 8 of at least 8",
            ));
        }
        need(Layer::OpenFlow, "instruction", b, at, ilen).map_err(|e| e.at(base))?;
        if typ == super::IT_APPLY_ACTIONS {
            acts.extend(actions(&b[at + 8..at + ilen], base + at + 8)?);
        }
        at += ilen;
    }
    let d = FlowDesc15 {
        table_id: b[4],
        priority: be16(b, 6),
        idle_timeout: be16(b, 8),
        hard_timeout: be16(b, 10),
        flags: be16(b, 12),
        importance: be16(b, 14),
        cookie: be64(b, 16),
        duration_ns: stats.duration_ns.unwrap_or(0),
        idle_ns: stats.idle_ns.unwrap_or(0),
        packets: stats.packets.unwrap_or(0),
        bytes: stats.bytes.unwrap_or(0),
        matches,
        actions: acts,
    };
    Ok((d, len))
}

/// The aggregate reply's body in 1.5 (OFPMP_AGGREGATE_STATS): statistics
/// with the flow count, packets and bytes.
pub fn aggregate_body15(packets: u64, bytes: u64, flows: u32) -> Vec<u8> {
    oxs_stats(&OxsStats {
        flow_count: Some(flows),
        packets: Some(packets),
        bytes: Some(bytes),
        ..OxsStats::default()
    })
}

/// A rule that went, as 1.5's FLOW_REMOVED tells the controllers
/// (`struct ofp15_flow_removed`, § 7.4.2): the fixed part, the match,
/// then statistics (duration, idle time if given, packets, bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRemoved15<'a> {
    pub table_id: u8,
    /// 0 idle timeout, 1 hard timeout, 2 deleted, 3 group deleted,
    /// 4 meter deleted, 5 evicted.
    pub reason: u8,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub cookie: u64,
    pub duration_ns: u64,
    /// Time since it last matched a packet, in nanoseconds; `None`
    /// leaves the field out, as Open vSwitch 3.1 does.
    pub idle_ns: Option<u64>,
    pub packets: u64,
    pub bytes: u64,
    pub matches: Vec<Oxm<'a>>,
}

impl FlowRemoved15<'_> {
    /// The message, with xid 0 (asynchronous).
    pub fn emit(&self) -> Vec<u8> {
        let mut m = header(OF15, super::FLOW_REMOVED, 0, 0).to_vec();
        m.push(self.table_id);
        m.push(self.reason);
        for v in [self.priority, self.idle_timeout, self.hard_timeout] {
            m.extend_from_slice(&v.to_be_bytes());
        }
        m.extend_from_slice(&self.cookie.to_be_bytes());
        put_match(&mut m, &self.matches);
        put_oxs_stats(
            &mut m,
            &OxsStats {
                duration_ns: Some(self.duration_ns),
                idle_ns: self.idle_ns,
                flow_count: None,
                packets: Some(self.packets),
                bytes: Some(self.bytes),
            },
        );
        let len = m.len();
        put_len(&mut m, 2, len);
        m
    }
}

/// Walk the properties `b` (at `base` in the message): each a type and
/// a length of at least 4, padded to 8, the padding there too (as Open
/// vSwitch asks). Their contents are not read (bundle properties are
/// experimenters' only).
fn check_properties(b: &[u8], base: usize) -> Result<()> {
    let mut at = 0;
    while at < b.len() {
        need(Layer::OpenFlow, "property header", b, at, 4).map_err(|e| e.at(base))?;
        let len = be16(b, at + 2) as usize;
        if len < 4 || at + len.div_ceil(8) * 8 > b.len() {
            return Err(bad(
                "property length",
                base + at + 2,
                "shorter than its header or, padded to 8, past the message's end",
            ));
        }
        at += len.div_ceil(8) * 8;
    }
    Ok(())
}

/// A BUNDLE_CONTROL message, read (§ 7.3.9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleControl {
    pub bundle_id: u32,
    /// One of `BCT_*`.
    pub typ: u16,
    /// `BF_ATOMIC`, `BF_ORDERED`.
    pub flags: u16,
}

/// Read a BUNDLE_CONTROL; its properties are checked for length and
/// otherwise ignored. Offsets in errors are the message's.
pub fn parse_bundle_control(m: &Message<'_>) -> Result<BundleControl> {
    const PROPS_AT: usize = HEADER_LEN + 8;
    let b = m.bytes();
    need(Layer::OpenFlow, "bundle_control", b, 0, PROPS_AT)?;
    check_properties(&b[PROPS_AT..], PROPS_AT)?;
    Ok(BundleControl {
        bundle_id: be32(b, HEADER_LEN),
        typ: be16(b, HEADER_LEN + 4),
        flags: be16(b, HEADER_LEN + 6),
    })
}

/// A BUNDLE_CONTROL at `version` without properties: the reply to a
/// request (`typ` its type + 1), or a request.
pub fn bundle_control_reply(
    version: u8,
    xid: u32,
    bundle_id: u32,
    typ: u16,
    flags: u16,
) -> Vec<u8> {
    let mut m = header(version, BUNDLE_CONTROL, HEADER_LEN + 8, xid).to_vec();
    m.extend_from_slice(&bundle_id.to_be_bytes());
    m.extend_from_slice(&typ.to_be_bytes());
    m.extend_from_slice(&flags.to_be_bytes());
    m
}

/// A BUNDLE_ADD_MESSAGE, read (§ 7.3.9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleAdd<'a> {
    pub bundle_id: u32,
    pub flags: u16,
    /// The message added: a whole OpenFlow message, its header's length
    /// exactly its own (read it with [`Message::new_checked`]).
    pub message: &'a [u8],
}

/// Read a BUNDLE_ADD_MESSAGE: the inner message must hold a header whose
/// length fits in what follows; properties after it (past padding to 8)
/// are checked for length and otherwise ignored. The inner message's
/// version, type and xid are the caller's to judge (BFC_MSG_BAD_XID,
/// BFC_MSG_UNSUP). Offsets in errors are the message's.
pub fn parse_bundle_add<'a>(m: &Message<'a>) -> Result<BundleAdd<'a>> {
    const INNER_AT: usize = HEADER_LEN + 8;
    let b = m.bytes();
    need(Layer::OpenFlow, "bundle_add", b, 0, INNER_AT + HEADER_LEN)?;
    let inner_len = be16(b, INNER_AT + 2) as usize;
    if inner_len < HEADER_LEN {
        return Err(bad(
            "bundled message length",
            INNER_AT + 2,
            "shorter than the 8-byte header",
        ));
    }
    need(Layer::OpenFlow, "bundled message", b, INNER_AT, inner_len)?;
    let end = INNER_AT + inner_len;
    // Properties, if any, start at the next multiple of 8.
    let props_at = (INNER_AT + inner_len.div_ceil(8) * 8).min(b.len());
    check_properties(&b[props_at..], props_at)?;
    Ok(BundleAdd {
        bundle_id: be32(b, HEADER_LEN),
        flags: be16(b, HEADER_LEN + 6),
        message: &b[INNER_AT..end],
    })
}

/// A BUNDLE_ADD_MESSAGE at `version` adding `message` (a whole message;
/// 1.5 asks that its xid be the outer one's) to bundle `bundle_id`.
pub fn bundle_add(version: u8, xid: u32, bundle_id: u32, flags: u16, message: &[u8]) -> Vec<u8> {
    let mut m = header(version, BUNDLE_ADD_MESSAGE, 0, xid).to_vec();
    m.extend_from_slice(&bundle_id.to_be_bytes());
    m.extend_from_slice(&[0, 0]);
    m.extend_from_slice(&flags.to_be_bytes());
    m.extend_from_slice(message);
    let len = m.len();
    put_len(&mut m, 2, len);
    m
}

/// A PACKET_OUT of 1.5, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketOut15<'a> {
    pub buffer_id: u32,
    /// The pipeline fields the packet starts with: in_port at least.
    pub matches: Vec<Oxm<'a>>,
    pub actions: Vec<Action<'a>>,
    pub frame: &'a [u8],
}

impl PacketOut15<'_> {
    /// The in_port its match says (OXM_OF_IN_PORT), if it says one.
    pub fn in_port(&self) -> Option<u32> {
        self.matches
            .iter()
            .find(|o| o.class == super::OXM_BASIC && o.field == 0 && o.mask.is_none())
            .and_then(|o| <[u8; 4]>::try_from(o.value).ok())
            .map(u32::from_be_bytes)
    }
}

/// Read a PACKET_OUT of 1.5; offsets in errors are the message's.
pub fn parse_packet_out15<'a>(m: &Message<'a>) -> Result<PacketOut15<'a>> {
    const MATCH_AT: usize = HEADER_LEN + 8;
    let b = m.bytes();
    need(Layer::OpenFlow, "packet_out", b, 0, MATCH_AT)?;
    let alen = be16(b, HEADER_LEN + 4) as usize;
    let (matches, at) = read_match(b, MATCH_AT)?;
    need(Layer::OpenFlow, "packet_out actions", b, at, alen)?;
    Ok(PacketOut15 {
        buffer_id: be32(b, HEADER_LEN),
        matches,
        actions: actions(&b[at..at + alen], at)?,
        frame: &b[at + alen..],
    })
}

/// A PACKET_OUT of 1.5 of `frame`, unbuffered, with `fields` (in_port
/// and any other pipeline field) and `acts`.
pub fn packet_out15(xid: u32, fields: &[Oxm<'_>], acts: &[Action<'_>], frame: &[u8]) -> Vec<u8> {
    let mut m = header(OF15, super::PACKET_OUT, 0, xid).to_vec();
    m.extend_from_slice(&super::NO_BUFFER.to_be_bytes());
    m.extend_from_slice(&[0; 4]);
    put_match(&mut m, fields);
    let start = m.len();
    for a in acts {
        a.emit_in(OF15, &mut m);
    }
    let alen = m.len() - start;
    put_len(&mut m, HEADER_LEN + 4, alen);
    m.extend_from_slice(frame);
    let len = m.len();
    put_len(&mut m, 2, len);
    m
}

impl PortDesc<'_> {
    /// The port as 1.4 and 1.5 describe it (`struct ofp14_port`): the
    /// fixed part, then the Ethernet property with its features and
    /// speeds. The entry of a PORT_DESC reply and the body of
    /// [`port_status15`].
    pub fn emit14(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(PORT14_LEN + PDPT_ETHERNET_LEN);
        b.extend_from_slice(&self.port_no.to_be_bytes());
        b.extend_from_slice(&((PORT14_LEN + PDPT_ETHERNET_LEN) as u16).to_be_bytes());
        b.extend_from_slice(&[0; 2]);
        b.extend_from_slice(&self.hw_addr);
        b.extend_from_slice(&[0; 2]);
        let name = self.name.as_bytes();
        let k = name.len().min(15);
        b.extend_from_slice(&name[..k]);
        b.resize(b.len() + 16 - k, 0);
        b.extend_from_slice(&self.config.to_be_bytes());
        b.extend_from_slice(&self.state.to_be_bytes());
        b.extend_from_slice(&PDPT_ETHERNET.to_be_bytes());
        b.extend_from_slice(&(PDPT_ETHERNET_LEN as u16).to_be_bytes());
        b.extend_from_slice(&[0; 4]);
        // curr, advertised, supported, peer, curr_speed, max_speed.
        for v in [self.curr, 0, 0, 0, self.curr_speed, self.max_speed] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        b
    }
}

/// PORT_STATUS of 1.5 (§ 7.4.3): a port came (`PPR_ADD`), went
/// (`PPR_DELETE`) or changed (2); `port` is its [`PortDesc::emit14`].
/// Asynchronous: xid 0.
pub fn port_status15(reason: u8, port: &[u8]) -> Vec<u8> {
    let mut m = header(OF15, PORT_STATUS, HEADER_LEN + 8 + port.len(), 0).to_vec();
    m.push(reason);
    m.extend_from_slice(&[0; 7]);
    m.extend_from_slice(port);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::{
        multipart_replies_in, parse_flow_mod, parse_multipart, MP_AGGREGATE, MP_PORT_DESC, NXM_1,
        OXM_BASIC, PF_10GB_FD, PF_COPPER, PPR_ADD, PS_LIVE,
    };
    use proptest::prelude::*;

    fn unhex(s: &str) -> Vec<u8> {
        crate::from_hex(s).unwrap()
    }

    /// What `ovs-ofctl ofp-print` (Open vSwitch 3.1, the reference the
    /// golden vectors were checked with) prints for `msg`; `None` where
    /// it is not installed, and the vectors alone are checked.
    fn ofp_print(msg: &[u8]) -> Option<String> {
        let hex: String = msg.iter().map(|b| format!("{b:02x}")).collect();
        let out = std::process::Command::new("ovs-ofctl")
            .arg("ofp-print")
            .arg(hex)
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "ovs-ofctl ofp-print failed: {text}");
        assert!(!text.contains("decode error"), "{text}");
        Some(text)
    }

    /// `msg` prints as `lines` (each a whole line of the output) where
    /// ovs-ofctl is installed.
    fn prints_as(msg: &[u8], lines: &[&str]) {
        if let Some(text) = ofp_print(msg) {
            for l in lines {
                assert!(text.lines().any(|t| t == *l), "no line {l:?} in:\n{text}");
            }
        }
    }

    /// A copy of `m` cut to `n` bytes (never below a header), its length
    /// field saying so.
    fn cut(m: &[u8], n: usize) -> Vec<u8> {
        let mut t = m[..n.max(HEADER_LEN).min(m.len())].to_vec();
        let l = (t.len() as u16).to_be_bytes();
        t[2..4].copy_from_slice(&l);
        t
    }

    fn in_port(p: &[u8; 4]) -> Oxm<'_> {
        Oxm {
            class: OXM_BASIC,
            field: 0,
            value: p,
            mask: None,
        }
    }

    #[test]
    fn oxs_stats_are_tlvs_padded_to_8() {
        assert_eq!(oxs_stats(&OxsStats::default()), unhex("0000000400000000"));
        let all = OxsStats {
            duration_ns: Some(1_500_000_000),
            idle_ns: Some(7_000_000_000),
            flow_count: Some(2),
            packets: Some(42),
            bytes: Some(4200),
        };
        let b = oxs_stats(&all);
        assert_eq!(
            b,
            unhex(concat!(
                "0000003c",
                "80020008000000011dcd6500",
                "800202080000000700000000",
                "80020808000000000000002a",
                "80020a080000000000001068",
                "8002060400000002",
                "00000000"
            ))
        );
        assert_eq!(parse_oxs_stats(&b, 0).unwrap(), (all, 64));
        // A known field of the wrong size, a TLV past the length, a
        // length below the header, missing padding: refused.
        let e = parse_oxs_stats(&unhex("0000000c8002060800000002"), 0).unwrap_err();
        assert!(
            e.to_string().contains("padded") || e.to_string().contains("stats"),
            "{e}"
        );
        let e = parse_oxs_stats(&unhex("0000000c800206080000000200000000"), 16).unwrap_err();
        assert!(e.to_string().contains("oxs value"), "{e}");
        let e = parse_oxs_stats(&unhex("0000000c800206050000000200000000"), 16).unwrap_err();
        assert!(e.to_string().contains("oxs value"), "{e}");
        let e = parse_oxs_stats(&unhex("0000000c800208040000000200000000"), 16).unwrap_err();
        assert!(e.to_string().contains("oxs length"), "{e}");
        assert_eq!(e.offset, 16 + 7);
        assert!(parse_oxs_stats(&unhex("0000000300000000"), 0).is_err());
        // Other classes and unknown fields are skipped.
        let (s, n) = parse_oxs_stats(&unhex("0000000cffff0e040000000900000000"), 0).unwrap();
        assert_eq!((s, n), (OxsStats::default(), 16));
    }

    /// Open vSwitch 3.1's reply to `ovs-ofctl -O OpenFlow15 dump-flows`
    /// (captured with a relay in front of ovs-vswitchd): the default
    /// NORMAL rule, `actions=drop`, and `table=3,priority=100,
    /// cookie=0x1234,idle_timeout=60,in_port=2 actions=set_field:
    /// 10.222.0.6->tun_dst,output:1` after 0.020 s.
    const OVS_FLOW_DESC_REPLY: &str = "06130160000000020001000000000000007000000000000000000000000000000000000000000000000100040000000000000034800200080000000806bc3e4080020208000000080000000080020808000000000000000080020a08000000000000000000000000000400180000000000000010fffffffa00000000000000000058000000008000000000000000000000000000000000000001000400000000000000348002000800000000004c4b4080020208000000000000000080020808000000000000000080020a080000000000000000000000000088000003000064003c00000000000000000000000012340001000c80000004000000020000000000000034800200080000000001312d0080020208000000000000000080020808000000000000000080020a08000000000000000000000000000400280000000000190010000140040ade00060000000000000010000000010000000000000000";

    #[test]
    fn flow_descriptions_read_and_rebuild_ovs_bytes() {
        let b = unhex(OVS_FLOW_DESC_REPLY);
        let m = Message::new_checked(&b).unwrap();
        assert_eq!((m.version(), m.len()), (OF15, b.len()));
        let mp = parse_multipart(&m).unwrap();
        assert_eq!(mp.typ, MP_FLOW_DESC);
        let mut entries = Vec::new();
        let mut at = 0;
        while at < mp.body.len() {
            let (d, n) = parse_flow_desc15(&mp.body[at..], 16 + at).unwrap();
            assert_eq!(d.emit(), &mp.body[at..at + n], "{d:?}");
            entries.push(d);
            at += n;
        }
        assert_eq!(entries.len(), 3);
        assert_eq!(
            (
                entries[0].priority,
                entries[0].duration_ns,
                entries[0].idle_ns
            ),
            (0, 8_113_000_000, 8_000_000_000)
        );
        assert_eq!(
            entries[0].actions,
            vec![Action::Output {
                port: 0xffff_fffa,
                max_len: 0
            }]
        );
        assert!(entries[1].actions.is_empty());
        let ip = [10, 222, 0, 6];
        let port = 2u32.to_be_bytes();
        assert_eq!(
            entries[2],
            FlowDesc15 {
                table_id: 3,
                priority: 100,
                idle_timeout: 60,
                hard_timeout: 0,
                flags: 0,
                importance: 0,
                cookie: 0x1234,
                duration_ns: 20_000_000,
                idle_ns: 0,
                packets: 0,
                bytes: 0,
                matches: vec![in_port(&port)],
                actions: vec![
                    Action::SetField(Oxm {
                        class: NXM_1,
                        field: 32,
                        value: &ip,
                        mask: None
                    }),
                    Action::Output {
                        port: 1,
                        max_len: 0
                    },
                ],
            }
        );
        let all: Vec<Vec<u8>> = entries.iter().map(FlowDesc15::emit).collect();
        assert_eq!(multipart_replies_in(OF15, 2, MP_FLOW_DESC, &all), vec![b]);
    }

    /// A reply built here, as `ovs-ofctl -O OpenFlow15 dump-flows` would
    /// print it.
    #[test]
    fn a_flow_desc_reply_prints_what_was_put_in() {
        let port = 2u32.to_be_bytes();
        let ip = [10, 222, 0, 6];
        let d = FlowDesc15 {
            table_id: 3,
            priority: 100,
            idle_timeout: 60,
            hard_timeout: 0,
            flags: 0,
            importance: 0,
            cookie: 0x1234,
            duration_ns: 1_500_000_000,
            idle_ns: 7_250_000_000,
            packets: 42,
            bytes: 4200,
            matches: vec![in_port(&port)],
            actions: vec![
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
        };
        let drop = FlowDesc15 {
            table_id: 0,
            priority: 0x8000,
            idle_timeout: 0,
            cookie: 0,
            duration_ns: 0,
            idle_ns: 0,
            packets: 0,
            bytes: 0,
            matches: vec![],
            actions: vec![],
            ..d.clone()
        };
        let msgs = multipart_replies_in(OF15, 2, MP_FLOW_DESC, &[d.emit(), drop.emit()]);
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0], unhex("061300f00000000200010000000000000088000003000064003c00000000000000000000000012340001000c8000000400000002000000000000003480020008000000011dcd650080020208000000070ee6b28080020808000000000000002a80020a08000000000000106800000000000400280000000000190010000140040ade0006000000000000001000000001000000000000000000580000000080000000000000000000000000000000000000010004000000000000003480020008000000000000000080020208000000000000000080020808000000000000000080020a08000000000000000000000000"));
        prints_as(
            &msgs[0],
            &[
                "OFPST_FLOW reply (OF1.5) (xid=0x2):",
                " cookie=0x1234, duration=1.500s, table=3, n_packets=42, n_bytes=4200, idle_timeout=60, idle_age=7, priority=100,in_port=2 actions=set_field:10.222.0.6->tun_dst,output:1",
                " cookie=0x0, duration=0s, table=0, n_packets=0, n_bytes=0, idle_age=0, actions=drop",
            ],
        );
        // Each entry read back is what went in; cut anywhere, it fails.
        let mp = parse_multipart(&Message::new_checked(&msgs[0]).unwrap()).unwrap();
        let (first, n) = parse_flow_desc15(mp.body, 16).unwrap();
        assert_eq!(first, d);
        assert_eq!(parse_flow_desc15(&mp.body[n..], 16 + n).unwrap().0, drop);
        // Cut before its statistics end, it fails; cut after them, it
        // reads as fewer actions (96: a rule with no instructions).
        for k in 0..n {
            let mut e = mp.body[..k].to_vec();
            if k >= 2 {
                e[..2].copy_from_slice(&(k as u16).to_be_bytes());
            }
            let r = parse_flow_desc15(&e, 16);
            assert_eq!(r.is_ok(), k == 96, "cut to {k}: {r:?}");
        }
    }

    /// `ovs-ofctl -O OpenFlow15 dump-aggregate` against Open vSwitch 3.1
    /// with three rules: flow count last.
    #[test]
    fn the_aggregate_body_is_ovs_bytes() {
        let ovs = unhex("061300380000000200020000000000000000002480020808000000000000000080020a080000000000000000800206040000000300000000");
        assert_eq!(
            multipart_replies_in(OF15, 2, MP_AGGREGATE, &[aggregate_body15(0, 0, 3)]),
            vec![ovs.clone()]
        );
        let ours = multipart_replies_in(OF15, 3, MP_AGGREGATE, &[aggregate_body15(42, 4200, 2)]);
        assert_eq!(
            ours,
            vec![unhex(concat!(
                "0613003800000003",
                "0002000000000000",
                "00000024",
                "80020808000000000000002a",
                "80020a080000000000001068",
                "8002060400000002",
                "00000000"
            ))]
        );
        prints_as(
            &ovs,
            &["OFPST_AGGREGATE reply (OF1.5) (xid=0x2): packet_count=0 byte_count=0 flow_count=3"],
        );
        prints_as(
            &ours[0],
            &["OFPST_AGGREGATE reply (OF1.5) (xid=0x3): packet_count=42 byte_count=4200 flow_count=2"],
        );
        let mp = parse_multipart(&Message::new_checked(&ours[0]).unwrap()).unwrap();
        let (s, _) = parse_oxs_stats(mp.body, 16).unwrap();
        assert_eq!(
            (s.packets, s.bytes, s.flow_count),
            (Some(42), Some(4200), Some(2))
        );
    }

    /// Open vSwitch 3.1's FLOW_REMOVED for `table=1,priority=5,
    /// cookie=0x77,idle_timeout=1,send_flow_rem,in_port=2` (captured with
    /// `ovs-ofctl -O OpenFlow15 monitor`): no idle time in its stats.
    #[test]
    fn flow_removed_is_ovs_bytes() {
        let port = 2u32.to_be_bytes();
        let mut r = FlowRemoved15 {
            table_id: 1,
            reason: 0,
            priority: 5,
            idle_timeout: 1,
            hard_timeout: 0,
            cookie: 0x77,
            duration_ns: 1_021_000_000,
            idle_ns: None,
            packets: 0,
            bytes: 0,
            matches: vec![in_port(&port)],
        };
        let ovs = unhex("060b005000000000010000050001000000000000000000770001000c80000004000000020000000000000028800200080000000101406f4080020808000000000000000080020a080000000000000000");
        assert_eq!(r.emit(), ovs);
        prints_as(&ovs, &["OFPT_FLOW_REMOVED (OF1.5) (xid=0x0): priority=5,in_port=2 reason=idle table_id=1 cookie:0x77 duration1.021s idle1 pkts0 bytes0"]);
        r.idle_timeout = 2;
        r.duration_ns = 2_500_000_000;
        r.idle_ns = Some(2_000_000_000);
        r.packets = 9;
        r.bytes = 900;
        let ours = r.emit();
        assert_eq!(ours, unhex("060b006000000000010000050002000000000000000000770001000c8000000400000002000000000000003480020008000000021dcd650080020208000000020000000080020808000000000000000980020a08000000000000038400000000"));
        prints_as(&ours, &["OFPT_FLOW_REMOVED (OF1.5) (xid=0x0): priority=5,in_port=2 reason=idle table_id=1 cookie:0x77 duration2.500s idle2 pkts9 bytes900"]);
        let m = Message::new_checked(&ours).unwrap();
        assert_eq!(
            (m.msg_type(), m.len()),
            (super::super::FLOW_REMOVED, ours.len())
        );
    }

    /// `ovs-ofctl -O OpenFlow15 --bundle add-flow ... actions=drop`, as it
    /// sent them (captured with a listener here): open, add a flow_mod,
    /// commit; and Open vSwitch 3.1's replies, which say no flags.
    #[test]
    fn bundles_from_ovs_ofctl_read() {
        let open = unhex("06210010000000070000000000000003");
        let add = unhex("06220048000000060000000000000003060e003800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000400000000");
        let commit = unhex("06210010000000090000000000040003");
        let c = parse_bundle_control(&Message::new_checked(&open).unwrap()).unwrap();
        assert_eq!(
            c,
            BundleControl {
                bundle_id: 0,
                typ: BCT_OPEN_REQUEST,
                flags: BF_ATOMIC | BF_ORDERED
            }
        );
        let c = parse_bundle_control(&Message::new_checked(&commit).unwrap()).unwrap();
        assert_eq!((c.typ, c.flags), (BCT_COMMIT_REQUEST, 3));

        let m = Message::new_checked(&add).unwrap();
        assert_eq!(m.msg_type(), BUNDLE_ADD_MESSAGE);
        let a = parse_bundle_add(&m).unwrap();
        assert_eq!((a.bundle_id, a.flags, a.message.len()), (0, 3, 56));
        let inner = Message::new_checked(a.message).unwrap();
        assert_eq!(
            (inner.version(), inner.msg_type(), inner.xid()),
            (OF15, 14, m.xid())
        );
        let fm = parse_flow_mod(&inner).unwrap();
        assert!(fm.matches.is_empty() && fm.actions.is_empty());
        assert_eq!(bundle_add(OF15, 6, 0, 3, a.message), add);
        prints_as(
            &add,
            &[
                "OFPT_BUNDLE_ADD_MESSAGE (OF1.5) (xid=0x6):",
                " bundle_id=0 flags=atomic ordered",
                "OFPT_FLOW_MOD (OF1.5) (xid=0x6): ADD actions=drop",
            ],
        );

        let ovs_open_reply = unhex("06210010000000080000000000010000");
        assert_eq!(
            bundle_control_reply(OF15, 8, 0, BCT_OPEN_REPLY, 0),
            ovs_open_reply
        );
        prints_as(
            &ovs_open_reply,
            &[
                "OFPT_BUNDLE_CONTROL (OF1.5) (xid=0x8):",
                " bundle_id=0 type=OPEN_REPLY flags=0",
            ],
        );
        let ours = bundle_control_reply(OF15, 9, 0, BCT_COMMIT_REPLY, BF_ATOMIC | BF_ORDERED);
        assert_eq!(ours, unhex("06210010000000090000000000050003"));
        prints_as(
            &ours,
            &[" bundle_id=0 type=COMMIT_REPLY flags=atomic ordered"],
        );

        for msg in [&open, &add, &commit] {
            for n in 0..msg.len() {
                let t = cut(msg, n);
                let m = Message::new_checked(&t).unwrap();
                assert!(parse_bundle_control(&m).is_err() || n >= 16);
                let r = parse_bundle_add(&m);
                if msg == &add {
                    assert!(r.is_err(), "cut to {n}");
                }
            }
        }
    }

    /// Properties (an experimenter's, padded to 8) are stepped over; one
    /// whose padding is missing is refused, as Open vSwitch refuses it;
    /// an inner message that does not fit is refused.
    #[test]
    fn bundle_properties_and_inner_lengths_are_checked() {
        let ctl = unhex("06210020000000070000000100020003ffff000c000023200000000100000000");
        prints_as(
            &ctl,
            &[" bundle_id=0x1 type=CLOSE_REQUEST flags=atomic ordered"],
        );
        let c = parse_bundle_control(&Message::new_checked(&ctl).unwrap()).unwrap();
        assert_eq!((c.bundle_id, c.typ, c.flags), (1, BCT_CLOSE_REQUEST, 3));
        let e = parse_bundle_control(&Message::new_checked(&cut(&ctl, 28)).unwrap()).unwrap_err();
        assert!(e.to_string().contains("property length"), "{e}");
        assert_eq!(e.offset, 18);

        // A 1.5 PACKET_OUT of 82 bytes, padded to 88, then the property.
        let po = unhex("060d005200000006ffffffff001000000001000c80000004000000010000000000000010000000020000000000000000505400000001505400000002080045000014000100004006f96c0a0000010a000002");
        let add = unhex("06220078000000060000000100000001060d005200000006ffffffff001000000001000c80000004000000010000000000000010000000020000000000000000505400000001505400000002080045000014000100004006f96c0a0000010a000002000000000000ffff000c000023200000000100000000");
        prints_as(
            &add,
            &[
                " bundle_id=0x1 flags=atomic",
                "OFPT_PACKET_OUT (OF1.5) (xid=0x6): in_port=1 actions=output:2 data_len=34",
            ],
        );
        let a = parse_bundle_add(&Message::new_checked(&add).unwrap()).unwrap();
        assert_eq!((a.bundle_id, a.flags, a.message), (1, BF_ATOMIC, &po[..]));
        // Without properties, no padding.
        let bare = bundle_add(OF15, 6, 1, BF_ATOMIC, &po);
        assert_eq!(bare, cut(&add, 16 + po.len()));
        assert_eq!(
            parse_bundle_add(&Message::new_checked(&bare).unwrap()).unwrap(),
            a
        );

        let mut short = add.clone();
        short[16 + 3] = 7; // the inner length below its header
        let e = parse_bundle_add(&Message::new_checked(&short).unwrap()).unwrap_err();
        assert!(e.to_string().contains("bundled message length"), "{e}");
        assert_eq!(e.offset, 18);
        let mut long = add.clone();
        long[16 + 2..16 + 4].copy_from_slice(&0x0100u16.to_be_bytes());
        let e = parse_bundle_add(&Message::new_checked(&long).unwrap()).unwrap_err();
        assert!(e.to_string().contains("bundled message"), "{e}");
        let mut bad_prop = add.clone();
        bad_prop[104 + 3] = 2;
        let e = parse_bundle_add(&Message::new_checked(&bad_prop).unwrap()).unwrap_err();
        assert!(e.to_string().contains("property length"), "{e}");
        assert_eq!(e.offset, 106);
    }

    /// `ovs-ofctl -O OpenFlow15 packet-out ... 'in_port=1 packet=...
    /// actions=output:2'` as it sent it (captured with a listener here).
    #[test]
    fn packet_out_from_ovs_ofctl_reads_and_rebuilds() {
        let b = unhex("060d005200000006ffffffff001000000001000c80000004000000010000000000000010000000020000000000000000505400000001505400000002080045000014000100004006f96c0a0000010a000002");
        let frame = &b[48..];
        prints_as(
            &b,
            &["OFPT_PACKET_OUT (OF1.5) (xid=0x6): in_port=1 actions=output:2 data_len=34"],
        );
        let m = Message::new_checked(&b).unwrap();
        let p = parse_packet_out15(&m).unwrap();
        assert_eq!(p.buffer_id, super::super::NO_BUFFER);
        assert_eq!(p.in_port(), Some(1));
        assert_eq!(p.matches, vec![in_port(&[0, 0, 0, 1])]);
        assert_eq!(
            p.actions,
            vec![Action::Output {
                port: 2,
                max_len: 0
            }]
        );
        assert_eq!(p.frame, frame);
        assert_eq!(packet_out15(6, &p.matches, &p.actions, p.frame), b);
        // Cut before the frame, it fails; within it, it reads less.
        for n in 0..b.len() {
            let t = cut(&b, n);
            let r = parse_packet_out15(&Message::new_checked(&t).unwrap());
            assert_eq!(r.is_ok(), n >= 48, "cut to {n}");
        }
        // Actions past the end, a match that is not OXM: refused.
        let mut long = b.clone();
        long[13] = 0x60;
        assert!(parse_packet_out15(&Message::new_checked(&long).unwrap()).is_err());
        let mut not_oxm = b.clone();
        not_oxm[17] = 0;
        let e = parse_packet_out15(&Message::new_checked(&not_oxm).unwrap()).unwrap_err();
        assert!(e.to_string().contains("match type"), "{e}");
        assert_eq!(e.offset, 16);
    }

    /// Open vSwitch 3.1's PORT_STATUS when a dummy port p5 was added
    /// (captured with `ovs-ofctl -O OpenFlow15 monitor`).
    #[test]
    fn ports_are_ovs_bytes() {
        let ovs = unhex("060c00580000000000000000000000000000000500480000aa55aa55001300007035000000000000000000000000000000000000000000000000002000000000000000000000000000000000000000000000000000000000");
        let p5 = PortDesc {
            port_no: 5,
            hw_addr: [0xaa, 0x55, 0xaa, 0x55, 0x00, 0x13],
            name: "p5",
            config: 0,
            state: 0,
            curr: 0,
            curr_speed: 0,
            max_speed: 0,
        };
        assert_eq!(port_status15(PPR_ADD, &p5.emit14()), ovs);
        prints_as(
            &ovs,
            &["OFPT_PORT_STATUS (OF1.5) (xid=0x0): ADD: 5(p5): addr:aa:55:aa:55:00:13"],
        );

        let eth0 = PortDesc {
            port_no: 1,
            hw_addr: [0x50, 0x54, 0, 0, 0, 1],
            name: "eth0",
            config: 0,
            state: PS_LIVE,
            curr: PF_10GB_FD | PF_COPPER,
            curr_speed: 10_000_000,
            max_speed: 10_000_000,
        };
        let e = eth0.emit14();
        assert_eq!(e.len(), 72);
        let msgs = multipart_replies_in(OF15, 4, MP_PORT_DESC, std::slice::from_ref(&e));
        assert_eq!(msgs, vec![unhex("0613005800000004000d000000000000000000010048000050540000000100006574683000000000000000000000000000000000000000040000002000000000000008400000000000000000000000000098968000989680")]);
        let lines = [
            "OFPST_PORT_DESC reply (OF1.5) (xid=0x4):",
            " 1(eth0): addr:50:54:00:00:00:01",
            "     config:     0",
            "     state:      LIVE",
            "     current:    10GB-FD COPPER",
            "     speed: 10000 Mbps now, 10000 Mbps max",
        ];
        prints_as(&msgs[0], &lines);
        prints_as(
            &port_status15(2, &e),
            &[
                "OFPT_PORT_STATUS (OF1.5) (xid=0x0): MOD: 1(eth0): addr:50:54:00:00:00:01",
                "     current:    10GB-FD COPPER",
            ],
        );
        // Names end in NUL.
        let long = PortDesc {
            name: "a-name-longer-than-sixteen",
            ..eth0
        }
        .emit14();
        assert_eq!(&long[16..32], b"a-name-longer-t\0");
    }

    proptest! {
        /// Any body under any of 1.5's new layouts is read or refused,
        /// never a panic; what reads builds again to bytes that read the
        /// same.
        #[test]
        fn any_body_reads_or_is_refused(typ in prop_oneof![Just(BUNDLE_CONTROL), Just(BUNDLE_ADD_MESSAGE), Just(super::super::PACKET_OUT)],
                                        body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut b = header(OF15, typ, HEADER_LEN + body.len(), 1).to_vec();
            b.extend_from_slice(&body);
            let m = Message::new_checked(&b).unwrap();
            if let Ok(c) = parse_bundle_control(&m) {
                let again = bundle_control_reply(OF15, 1, c.bundle_id, c.typ, c.flags);
                prop_assert_eq!(parse_bundle_control(&Message::new_checked(&again).unwrap()).unwrap(), c);
            }
            if let Ok(a) = parse_bundle_add(&m) {
                prop_assert!(Message::new_checked(a.message).is_ok());
                let again = bundle_add(OF15, 1, a.bundle_id, a.flags, a.message);
                prop_assert_eq!(parse_bundle_add(&Message::new_checked(&again).unwrap()).unwrap(), a);
            }
            if let Ok(po) = parse_packet_out15(&m) {
                let again = packet_out15(1, &po.matches, &po.actions, po.frame);
                let po2 = parse_packet_out15(&Message::new_checked(&again).unwrap()).unwrap();
                prop_assert_eq!(po2.matches, po.matches);
                prop_assert_eq!(po2.actions, po.actions);
                prop_assert_eq!(po2.frame, po.frame);
            }
        }

        /// Any bytes as statistics or a flow description: read or
        /// refused, and what reads lies inside them.
        #[test]
        fn any_entry_reads_or_is_refused(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok((_, n)) = parse_oxs_stats(&b, 0) {
                prop_assert!(n <= b.len() && n % 8 == 0);
            }
            if let Ok((d, n)) = parse_flow_desc15(&b, 0) {
                prop_assert!(n <= b.len());
                let _ = d.emit();
            }
        }

        #[test]
        fn any_stats_round_trip(d in proptest::option::of(any::<u64>()), i in proptest::option::of(any::<u64>()),
                                f in proptest::option::of(any::<u32>()), p in proptest::option::of(any::<u64>()),
                                by in proptest::option::of(any::<u64>())) {
            // Durations keep whole seconds only up to 32 bits.
            let cap = |x: Option<u64>| x.map(|v| v % (u64::from(u32::MAX) * 1_000_000_000));
            let s = OxsStats { duration_ns: cap(d), idle_ns: cap(i), flow_count: f, packets: p, bytes: by };
            let b = oxs_stats(&s);
            prop_assert_eq!(b.len() % 8, 0);
            prop_assert_eq!(parse_oxs_stats(&b, 0).unwrap(), (s, b.len()));
        }
    }
}
