//! OpenFlow 1.3's multipart messages (§ 7.3.5): the requests `ovs-ofctl
//! dump-flows`, `dump-aggregate`, `dump-tables`, `dump-table-features`,
//! `dump-ports`, `dump-ports-desc` and `dump-desc` send, and the replies
//! that answer them, split over several messages (REPLY_MORE) where one
//! would pass 64 KiB.
//!
//! ```text
//! header (8) | type (2) | flags (2) | pad (4) | body...
//! ```

use super::{header, oxms, Action, Message, Oxm, HEADER_LEN, MAX_LEN, OF13};
use super::{put_apply_actions, put_match};
use crate::error::{need, Error, Layer, Result};
use crate::{be16, be32};

pub const MULTIPART_REQUEST: u8 = 18;
pub const MULTIPART_REPLY: u8 = 19;
/// Multipart types.
pub const MP_DESC: u16 = 0;
pub const MP_FLOW: u16 = 1;
pub const MP_AGGREGATE: u16 = 2;
pub const MP_TABLE: u16 = 3;
pub const MP_PORT_STATS: u16 = 4;
pub const MP_TABLE_FEATURES: u16 = 12;
pub const MP_PORT_DESC: u16 = 13;
/// More replies follow this one.
pub const MPF_REPLY_MORE: u16 = 1;
/// Where a multipart body starts in its message.
pub const MP_BODY_AT: usize = HEADER_LEN + 8;
/// "Any port", "any group", "all tables" in requests.
pub const PORT_ANY: u32 = 0xffff_ffff;
pub const GROUP_ANY: u32 = 0xffff_ffff;
pub const TABLE_ALL: u8 = 0xff;

/// A multipart request: its type, flags and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Multipart<'a> {
    pub typ: u16,
    pub flags: u16,
    pub body: &'a [u8],
}

/// Read a multipart request's type, flags and body.
pub fn parse_multipart<'a>(m: &Message<'a>) -> Result<Multipart<'a>> {
    let b = m.bytes();
    need(Layer::OpenFlow, "multipart header", b, 0, MP_BODY_AT)?;
    Ok(Multipart {
        typ: be16(b, HEADER_LEN),
        flags: be16(b, HEADER_LEN + 2),
        body: &b[MP_BODY_AT..],
    })
}

/// The replies of type `typ` to request `xid` carrying `entries` (whole
/// entries, never split), as few messages as fit in 64 KiB each; every
/// one but the last says REPLY_MORE. No entries: one empty reply.
/// OpenFlow 1.3's; [`multipart_replies_in`] writes any version's.
pub fn multipart_replies(xid: u32, typ: u16, entries: &[Vec<u8>]) -> Vec<Vec<u8>> {
    multipart_replies_in(OF13, xid, typ, entries)
}

/// [`multipart_replies`] at wire version `version` (1.3 and later lay
/// a multipart reply out alike; 1.5's flow descriptions and aggregate
/// body differ only inside the entries).
pub fn multipart_replies_in(version: u8, xid: u32, typ: u16, entries: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let start = |out: &mut Vec<u8>| {
        out.extend_from_slice(&header(version, MULTIPART_REPLY, MP_BODY_AT, xid));
        out.extend_from_slice(&typ.to_be_bytes());
        out.extend_from_slice(&[0; 6]);
    };
    let finish = |mut out: Vec<u8>, more: bool| {
        let len = (out.len() as u16).to_be_bytes();
        out[2..4].copy_from_slice(&len);
        if more {
            out[HEADER_LEN + 2..HEADER_LEN + 4].copy_from_slice(&MPF_REPLY_MORE.to_be_bytes());
        }
        out
    };
    let mut msgs = Vec::new();
    let mut cur = Vec::new();
    start(&mut cur);
    for e in entries {
        if cur.len() > MP_BODY_AT && cur.len() + e.len() > MAX_LEN {
            msgs.push(finish(std::mem::take(&mut cur), true));
            start(&mut cur);
        }
        cur.extend_from_slice(e);
    }
    msgs.push(finish(cur, false));
    msgs
}

/// A flow (or aggregate) statistics request's filter (§ 7.3.5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStatsRequest<'a> {
    pub table_id: u8,
    pub out_port: u32,
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub matches: Vec<Oxm<'a>>,
}

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from(be32(b, at)) << 32 | u64::from(be32(b, at + 4))
}

/// Read a flow or aggregate request's body; offsets in errors are the
/// message's.
pub fn parse_flow_stats_request(body: &[u8]) -> Result<FlowStatsRequest<'_>> {
    const MATCH_AT: usize = 32;
    let at = |e: Error| e.at(MP_BODY_AT);
    need(Layer::OpenFlow, "flow stats request", body, 0, MATCH_AT + 4).map_err(at)?;
    if be16(body, MATCH_AT) != 1 {
        return Err(Error::invalid(
            Layer::OpenFlow,
            "match type",
            MP_BODY_AT + MATCH_AT,
            "not OXM (1)",
        ));
    }
    let len = be16(body, MATCH_AT + 2) as usize;
    if len < 4 {
        return Err(Error::invalid(
            Layer::OpenFlow,
            "match length",
            MP_BODY_AT + MATCH_AT + 2,
            "shorter than its 4-byte header",
        ));
    }
    need(Layer::OpenFlow, "match", body, MATCH_AT, len).map_err(at)?;
    Ok(FlowStatsRequest {
        table_id: body[0],
        out_port: be32(body, 4),
        out_group: be32(body, 8),
        cookie: be64(body, 16),
        cookie_mask: be64(body, 24),
        matches: oxms(
            &body[MATCH_AT + 4..MATCH_AT + len],
            MP_BODY_AT + MATCH_AT + 4,
        )?,
    })
}

/// One flow's statistics entry (§ 7.3.5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStats<'a> {
    pub table_id: u8,
    /// Time since the flow was added, in nanoseconds.
    pub duration_ns: u64,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub cookie: u64,
    pub packets: u64,
    pub bytes: u64,
    pub matches: Vec<Oxm<'a>>,
    pub actions: Vec<Action<'a>>,
}

impl FlowStats<'_> {
    pub fn emit(&self) -> Vec<u8> {
        let mut e = Vec::with_capacity(128);
        e.extend_from_slice(&[0, 0, self.table_id, 0]);
        super::put_duration(&mut e, self.duration_ns);
        for v in [
            self.priority,
            self.idle_timeout,
            self.hard_timeout,
            self.flags,
        ] {
            e.extend_from_slice(&v.to_be_bytes());
        }
        e.extend_from_slice(&[0; 4]);
        for v in [self.cookie, self.packets, self.bytes] {
            e.extend_from_slice(&v.to_be_bytes());
        }
        put_match(&mut e, &self.matches);
        put_apply_actions(&mut e, &self.actions);
        let len = (e.len() as u16).to_be_bytes();
        e[..2].copy_from_slice(&len);
        e
    }
}

/// The aggregate reply's body (§ 7.3.5.3).
pub fn aggregate_body(packets: u64, bytes: u64, flows: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(24);
    b.extend_from_slice(&packets.to_be_bytes());
    b.extend_from_slice(&bytes.to_be_bytes());
    b.extend_from_slice(&flows.to_be_bytes());
    b.extend_from_slice(&[0; 4]);
    b
}

/// A table statistics entry (§ 7.3.5.4).
pub fn table_stats(table_id: u8, active: u32, lookups: u64, matched: u64) -> Vec<u8> {
    let mut b = vec![table_id, 0, 0, 0];
    b.extend_from_slice(&active.to_be_bytes());
    b.extend_from_slice(&lookups.to_be_bytes());
    b.extend_from_slice(&matched.to_be_bytes());
    b
}

/// A NUL-padded string field of `n` bytes (truncated to leave one NUL).
fn put_str(out: &mut Vec<u8>, s: &str, n: usize) {
    let b = s.as_bytes();
    let k = b.len().min(n - 1);
    out.extend_from_slice(&b[..k]);
    out.resize(out.len() + n - k, 0);
}

/// The switch description (§ 7.3.5.1).
pub fn desc_body(mfr: &str, hw: &str, sw: &str, serial: &str, dp: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(1056);
    put_str(&mut b, mfr, 256);
    put_str(&mut b, hw, 256);
    put_str(&mut b, sw, 256);
    put_str(&mut b, serial, 32);
    put_str(&mut b, dp, 256);
    b
}

/// Port config and state bits (§ 7.2.1).
pub const PC_PORT_DOWN: u32 = 1;
pub const PS_LINK_DOWN: u32 = 1;
pub const PS_LIVE: u32 = 4;
/// Port feature bits: 10 Gb/s full duplex, copper.
pub const PF_10GB_FD: u32 = 1 << 6;
pub const PF_COPPER: u32 = 1 << 11;

/// A port's description (`ofp_port`, § 7.2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortDesc<'a> {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    pub name: &'a str,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    /// Current and maximum speed in kb/s.
    pub curr_speed: u32,
    pub max_speed: u32,
}

impl PortDesc<'_> {
    pub fn emit(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(&self.port_no.to_be_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&self.hw_addr);
        b.extend_from_slice(&[0; 2]);
        put_str(&mut b, self.name, 16);
        // config, state, curr, advertised, supported, peer.
        for v in [self.config, self.state, self.curr, 0, 0, 0] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        b.extend_from_slice(&self.curr_speed.to_be_bytes());
        b.extend_from_slice(&self.max_speed.to_be_bytes());
        b
    }
}

/// PORT_STATUS (§ 7.4.3): a port came (reason 0), went (1) or changed
/// (2); `port` is its description. Asynchronous: xid 0.
pub fn port_status(reason: u8, port: &[u8]) -> Vec<u8> {
    const PORT_STATUS: u8 = 12;
    let mut m = header(OF13, PORT_STATUS, HEADER_LEN + 8 + port.len(), 0).to_vec();
    m.push(reason);
    m.extend_from_slice(&[0; 7]);
    m.extend_from_slice(port);
    m
}
pub const PPR_ADD: u8 = 0;
pub const PPR_DELETE: u8 = 1;

/// A port's counters (§ 7.3.5.6); what a port does not count is all ones,
/// as the specification asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortStats {
    pub port_no: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub duration_ns: u64,
}

/// A counter a port does not keep.
pub const NOT_COUNTED: u64 = u64::MAX;

impl PortStats {
    pub fn emit(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(112);
        b.extend_from_slice(&self.port_no.to_be_bytes());
        b.extend_from_slice(&[0; 4]);
        for v in [
            self.rx_packets,
            self.tx_packets,
            self.rx_bytes,
            self.tx_bytes,
            self.rx_dropped,
            self.tx_dropped,
            self.rx_errors,
            self.tx_errors,
            // frame, overrun and CRC errors, collisions: not counted.
            NOT_COUNTED,
            NOT_COUNTED,
            NOT_COUNTED,
            NOT_COUNTED,
        ] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        super::put_duration(&mut b, self.duration_ns);
        b
    }
}

/// The port a port statistics or port description request asks about
/// (PORT_ANY: every port).
pub fn parse_port_request(body: &[u8]) -> Result<u32> {
    need(Layer::OpenFlow, "port stats request", body, 0, 8).map_err(|e| e.at(MP_BODY_AT))?;
    Ok(be32(body, 0))
}

/// Table-feature property types (§ 7.3.5.5.2); each `_MISS` one is the
/// next number.
pub const TFPT_INSTRUCTIONS: u16 = 0;
pub const TFPT_NEXT_TABLES: u16 = 2;
pub const TFPT_WRITE_ACTIONS: u16 = 4;
pub const TFPT_APPLY_ACTIONS: u16 = 6;
pub const TFPT_MATCH: u16 = 8;
pub const TFPT_WILDCARDS: u16 = 10;
pub const TFPT_WRITE_SETFIELD: u16 = 12;
pub const TFPT_APPLY_SETFIELD: u16 = 14;

/// What one table can do, as its features entry says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFeatures<'a> {
    pub table_id: u8,
    pub name: &'a str,
    pub max_entries: u32,
    /// Instruction types.
    pub instructions: &'a [u16],
    /// Action types of apply-actions.
    pub apply_actions: &'a [u16],
    /// Fields matched: OXM headers (class, field, length, has-mask:
    /// a maskable field is listed with its mask bit set).
    pub matches: &'a [u32],
    /// Fields set_field can write: OXM headers.
    pub apply_setfields: &'a [u32],
}

/// An OXM header word: class, field, has-mask bit, payload length.
pub fn oxm_header(class: u16, field: u8, has_mask: bool, len: u8) -> u32 {
    u32::from(class) << 16 | u32::from(field << 1 | u8::from(has_mask)) << 8 | u32::from(len)
}

impl TableFeatures<'_> {
    /// The entry with all eight properties and their miss twins (Open
    /// vSwitch refuses an entry that lacks one).
    pub fn emit(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(512);
        b.extend_from_slice(&[0, 0, self.table_id, 0, 0, 0, 0, 0]);
        put_str(&mut b, self.name, 32);
        b.extend_from_slice(&[0; 16]); // metadata match, metadata write
        b.extend_from_slice(&0u32.to_be_bytes()); // config
        b.extend_from_slice(&self.max_entries.to_be_bytes());
        let ids = |types: &[u16]| -> Vec<u8> {
            types
                .iter()
                .flat_map(|t| {
                    let t = t.to_be_bytes();
                    [t[0], t[1], 0, 4]
                })
                .collect()
        };
        let words = |w: &[u32]| -> Vec<u8> { w.iter().flat_map(|x| x.to_be_bytes()).collect() };
        // Match fields without their mask bit: "can match"; wildcards:
        // every field can be left out.
        let plain: Vec<u32> = self.matches.iter().map(|h| h & !0x100).collect();
        let widen = |h: &u32| {
            let len = h & 0xff;
            if h & 0x100 != 0 {
                (h & !0xff) | (len * 2)
            } else {
                *h
            }
        };
        let matchable: Vec<u32> = self.matches.iter().map(widen).collect();
        let props: [(u16, Vec<u8>); 8] = [
            (TFPT_INSTRUCTIONS, ids(self.instructions)),
            (TFPT_NEXT_TABLES, Vec::new()),
            (TFPT_WRITE_ACTIONS, Vec::new()),
            (TFPT_APPLY_ACTIONS, ids(self.apply_actions)),
            (TFPT_MATCH, words(&matchable)),
            (TFPT_WILDCARDS, words(&plain)),
            (TFPT_WRITE_SETFIELD, Vec::new()),
            (TFPT_APPLY_SETFIELD, words(self.apply_setfields)),
        ];
        for (typ, payload) in &props {
            let twins: &[u16] = if matches!(*typ, TFPT_MATCH | TFPT_WILDCARDS) {
                &[0]
            } else {
                &[0, 1]
            };
            for miss in twins {
                let start = b.len();
                b.extend_from_slice(&(typ + miss).to_be_bytes());
                b.extend_from_slice(&((4 + payload.len()) as u16).to_be_bytes());
                b.extend_from_slice(payload);
                let len = b.len() - start;
                b.resize(start + len.div_ceil(8) * 8, 0);
            }
        }
        let len = (b.len() as u16).to_be_bytes();
        b[..2].copy_from_slice(&len);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::{frame, Message, OXM_BASIC};

    fn unhex(s: &str) -> Vec<u8> {
        crate::from_hex(s).unwrap()
    }

    /// `ovs-ofctl -O OpenFlow13 dump-flows` sends this (captured): all
    /// tables, any port and group, no cookie, an empty match.
    #[test]
    fn ovs_ofctl_flow_request_reads() {
        let b = unhex("04120038000000020001000000000000ff000000ffffffffffffffff00000000000000000000000000000000000000000001000400000000");
        let m = Message::new_checked(&b).unwrap();
        let mp = parse_multipart(&m).unwrap();
        assert_eq!((mp.typ, mp.flags), (MP_FLOW, 0));
        let r = parse_flow_stats_request(mp.body).unwrap();
        assert_eq!(
            (
                r.table_id,
                r.out_port,
                r.out_group,
                r.cookie_mask,
                r.matches.len()
            ),
            (TABLE_ALL, PORT_ANY, GROUP_ANY, 0, 0)
        );
        // Every truncation fails cleanly.
        for n in 0..mp.body.len() {
            let _ = parse_flow_stats_request(&mp.body[..n]);
        }
        assert!(parse_flow_stats_request(&mp.body[..35]).is_err());
    }

    /// The flow entry Open vSwitch 3.1 sent for `in_port=2
    /// actions=set_field:10.222.0.6->tun_dst,output:1` (captured; its
    /// duration was 0.218 s) comes out the same.
    #[test]
    fn a_flow_entry_matches_ovs_bytes() {
        let ovs = unhex("00680000000000000cfe6a808000000000000000000000000000000000000000000000000000000000000000000000000001000c800000040000000200000000000400280000000000190010000140040ade00060000000000000010000000010000000000000000");
        let port = 2u32.to_be_bytes();
        let ip = [10, 222, 0, 6];
        let e = FlowStats {
            table_id: 0,
            duration_ns: 0x0cfe_6a80,
            priority: 0x8000,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            cookie: 0,
            packets: 0,
            bytes: 0,
            matches: vec![Oxm {
                class: OXM_BASIC,
                field: 0,
                value: &port,
                mask: None,
            }],
            actions: vec![
                Action::SetField(Oxm {
                    class: crate::openflow::NXM_1,
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
        assert_eq!(e.emit(), ovs);
    }

    #[test]
    fn long_replies_split_on_entry_boundaries_with_reply_more() {
        let entries: Vec<Vec<u8>> = (0..3000u32).map(|i| vec![(i % 251) as u8; 104]).collect();
        let msgs = multipart_replies(7, MP_FLOW, &entries);
        assert!(msgs.len() > 1);
        let mut body = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            assert_eq!(frame(m).unwrap(), Some(m.len()));
            let mp = parse_multipart(&Message::new_checked(m).unwrap()).unwrap();
            assert_eq!(mp.typ, MP_FLOW);
            assert_eq!(mp.flags == MPF_REPLY_MORE, i + 1 < msgs.len());
            assert_eq!(mp.body.len() % 104, 0, "entries are never split");
            body.extend_from_slice(mp.body);
        }
        assert_eq!(body, entries.concat());
        let empty = multipart_replies(7, MP_FLOW, &[]);
        assert_eq!(empty.len(), 1);
        assert_eq!(empty[0].len(), MP_BODY_AT);
    }

    #[test]
    fn fixed_entries_have_their_sizes() {
        assert_eq!(desc_body("a", "b", "c", "d", "e").len(), 1056);
        let p = PortDesc {
            port_no: 1,
            hw_addr: [0; 6],
            name: "a-name-longer-than-sixteen",
            config: 0,
            state: PS_LIVE,
            curr: 0,
            curr_speed: 0,
            max_speed: 0,
        }
        .emit();
        assert_eq!(p.len(), 64);
        assert_eq!(p[16 + 15], 0, "names end in NUL");
        let s = PortStats {
            port_no: 1,
            rx_packets: 1,
            tx_packets: 2,
            rx_bytes: 3,
            tx_bytes: 4,
            rx_dropped: 0,
            tx_dropped: 0,
            rx_errors: 0,
            tx_errors: 0,
            duration_ns: 1,
        };
        assert_eq!(s.emit().len(), 112);
        assert_eq!(aggregate_body(1, 2, 3).len(), 24);
        assert_eq!(table_stats(0, 1, 2, 3).len(), 24);
        let f = TableFeatures {
            table_id: 0,
            name: "classifier",
            max_entries: 1,
            instructions: &[4],
            apply_actions: &[0, 17],
            matches: &[oxm_header(OXM_BASIC, 0, false, 4)],
            apply_setfields: &[],
        }
        .emit();
        assert_eq!(f.len() % 8, 0);
        assert_eq!(u16::from_be_bytes([f[0], f[1]]) as usize, f.len());
    }
}
