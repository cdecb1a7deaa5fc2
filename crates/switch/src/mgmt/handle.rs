//! Answering a connection's messages: the session (HELLO, ECHO,
//! FEATURES, configuration, BARRIER); flow_mod of 1.3, of 1.0 and
//! Nicira's, through `tunlab ctl`'s door; the statistics (1.3's multipart,
//! 1.0's and Nicira's NXST); PACKET_OUT; Nicira's TLV table.

use super::stats::{
    bad_len, gone, multipart, port_state, ports, stats10, table_reply, table_request, to_ms,
    BRC_BAD_EXPERIMENTER, BRC_EPERM,
};
use super::{bundle, ours, refuse, reply, send, Async, Conn, Next};
use crate::ofproto::openflow::flow_mod::{self as openflow, FlowChange};
use crate::ofproto::openflow::{nx_match, PacketInFormat};
use crate::workers::{Expired, RemovedReason, Switch};
use tunlab_dp::key::TUN_METADATA_FIELDS;
use tunlab_dp::{Selector, TlvMap};
use tunlab_wire::openflow::{self as of, Message};

/// OpenFlow 1.3 message types beyond the session ones (§ 7.1).
mod t13 {
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const MULTIPART_REQUEST: u8 = 18;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
}

/// OpenFlow 1.0's numbers where they differ (§ 5.1).
mod t10 {
    pub const STATS_REQUEST: u8 = 16;
    pub const BARRIER_REQUEST: u8 = 18;
    pub const BARRIER_REPLY: u8 = 19;
}

/// Answer one message.
pub(super) fn handle(
    c: &mut Conn,
    m: &Message<'_>,
    (dpid, bridge): (u64, [u8; 16]),
    sw: &mut Switch,
    outbox: &mut Vec<Async>,
) -> Next {
    let Some(v) = c.version else {
        return hello(c, m);
    };
    let error = |c: &mut Conn, typ, code| refuse(c, v, m, (typ, code));
    let answer = |c: &mut Conn, r| answer(c, v, m, r);
    if m.version() != v {
        return error(c, of::ET_BAD_REQUEST, of::BRC_BAD_VERSION);
    }
    // 1.3 and 1.5 share the numbers and most layouts; 1.0 differs.
    let oxm = v != of::OF10;
    let (barrier_request, barrier_reply, stats_request) = if oxm {
        (
            t13::BARRIER_REQUEST,
            t13::BARRIER_REPLY,
            t13::MULTIPART_REQUEST,
        )
    } else {
        (t10::BARRIER_REQUEST, t10::BARRIER_REPLY, t10::STATS_REQUEST)
    };
    match m.msg_type() {
        of::HELLO | of::ECHO_REPLY | of::ERROR => Next::Keep,
        of::ECHO_REQUEST => reply(c, of::echo_reply(m)),
        t13::FEATURES_REQUEST => reply(c, features(v, m.xid(), dpid, sw)),
        t13::GET_CONFIG_REQUEST => {
            let mut r = of::header(v, t13::GET_CONFIG_REPLY, 12, m.xid()).to_vec();
            r.extend_from_slice(&0u16.to_be_bytes());
            r.extend_from_slice(&c.miss_send_len.to_be_bytes());
            reply(c, r)
        }
        t13::SET_CONFIG => {
            let b = m.body();
            if b.len() < 4 {
                return error(c, of::ET_BAD_REQUEST, of::BRC_BAD_LEN);
            }
            c.miss_send_len = u16::from_be_bytes([b[2], b[3]]);
            Next::Keep
        }
        // Requests are answered in order as they come: everything before
        // a barrier is done when it is read.
        t if t == barrier_request => reply(c, of::header(v, barrier_reply, 8, m.xid()).to_vec()),
        t if t == stats_request && oxm => answer(c, multipart(m, v, dpid, sw)),
        t if t == stats_request && table_request(v, m.body()) => {
            let active = sw.on(0, |n| n.ofproto.classifier.len()).unwrap_or(0);
            reply(c, table_reply(v, m.xid(), active as u32))
        }
        t if t == stats_request => answer(c, stats10(m, dpid, sw)),
        // One flow table, two doors: a flow_mod becomes the same typed
        // change a `tunlab ctl` request makes.
        of::FLOW_MOD => {
            let done = openflow::flow_mod_change(v, m).and_then(|ch| flow_mod(ch, sw, outbox));
            answer(c, done.map(|()| Vec::new()))
        }
        of::BUNDLE_CONTROL if v >= of::OF15 => bundle::control(c, v, m, sw),
        of::BUNDLE_ADD_MESSAGE if v >= of::OF15 => bundle::add(c, v, m),
        of::EXPERIMENTER => experimenter(c, v, m, bridge, sw, outbox),
        of::PACKET_OUT if oxm => answer(c, packet_out(v, m, sw).map(|()| Vec::new())),
        METER_MOD if oxm => answer(c, meter_mod(m).map(|()| Vec::new())),
        _ => error(c, of::ET_BAD_REQUEST, of::BRC_BAD_TYPE),
    }
}

/// Nicira's extensions: the flow format, an NXM flow_mod, the TLV table.
fn experimenter(
    c: &mut Conn,
    v: u8,
    m: &Message<'_>,
    bridge: [u8; 16],
    sw: &mut Switch,
    outbox: &mut Vec<Async>,
) -> Next {
    let error = |c: &mut Conn, typ, code| refuse(c, v, m, (typ, code));
    let answer = |c: &mut Conn, r| answer(c, v, m, r);
    match of::parse_nx(m) {
        // The flow format a 1.0 client asks for: plain and NXM
        // flow_mods are both read, and statistics go out in the form
        // asked (NXST or plain), so there is nothing to switch.
        Some(nx) if nx.subtype == of::NXT_SET_FLOW_FORMAT => Next::Keep,
        // A 1.0 flow_mod's table in its command's high byte: always read
        // so (a client that has not turned it on sends 0 there).
        Some(nx) if nx.subtype == of::NXT_FLOW_MOD_TABLE_ID => Next::Keep,
        // A 1.0 client's flow_mod with an NXM match.
        Some(nx) if nx.subtype == of::NXT_FLOW_MOD => {
            let change = of::parse_nx_flow_mod(nx.body)
                .map_err(bad_len)
                .and_then(|fm| openflow::flow_change(&fm));
            let done = change.and_then(|ch| flow_mod(ch, sw, outbox));
            answer(c, done.map(|()| Vec::new()))
        }
        Some(nx) if nx.subtype == of::NXT_TLV_TABLE_MOD => match of::parse_tlv_table_mod(nx.body) {
            Ok((cmd, maps)) => match tlv_table_mod(cmd, &maps, sw) {
                Ok(()) => Next::Keep,
                Err(e) => match send(c, &of::nx_error(v, e, m.xid(), m.bytes())) {
                    Ok(()) => Next::Keep,
                    Err(_) => Next::Close,
                },
            },
            Err(_) => error(c, of::ET_BAD_REQUEST, of::BRC_BAD_LEN),
        },
        Some(nx) if nx.subtype == of::NXT_TLV_TABLE_REQUEST => {
            match sw.on(0, |n| n.ofproto.tlv()) {
                Ok(tlv) => {
                    let maps: Vec<of::TlvMapping> = (0..TUN_METADATA_FIELDS)
                        .filter_map(|i| {
                            let (class, typ, len) = tlv.option(i)?;
                            Some(of::TlvMapping {
                                class,
                                typ,
                                len,
                                index: i as u16,
                            })
                        })
                        .collect();
                    let space = (TUN_METADATA_FIELDS * 4) as u32;
                    let r =
                        of::tlv_table_reply(v, m.xid(), space, TUN_METADATA_FIELDS as u16, &maps);
                    reply(c, r)
                }
                Err(_) => error(c, of::ET_BAD_REQUEST, BRC_EPERM),
            }
        }
        // The packet_in form this connection wants: the version's own or
        // NXT_PACKET_IN2 (NXT_PACKET_IN, 1.0's Nicira form, is not built).
        Some(nx) if nx.subtype == of::NXT_SET_PACKET_IN_FORMAT => {
            let format = <[u8; 4]>::try_from(nx.body).ok().map(u32::from_be_bytes);
            match format {
                Some(of::NXPIF_STANDARD) => c.packet_in_format = PacketInFormat::Standard,
                Some(of::NXPIF_NXT_PACKET_IN2) => c.packet_in_format = PacketInFormat::NxtPacketIn2,
                Some(_) => return error(c, of::ET_BAD_REQUEST, BRC_EPERM),
                None => return error(c, of::ET_BAD_REQUEST, of::BRC_BAD_LEN),
            }
            Next::Keep
        }
        // Conntrack flushes (ovn-controller flushes each zone it assigns):
        // the datapaths hold no connections yet (issue 45), so there is
        // nothing to flush; the request is read and checked as OVS checks
        // it.
        Some(nx) if nx.subtype == of::NXT_CT_FLUSH_ZONE || nx.subtype == of::NXT_CT_FLUSH => {
            let r = if nx.subtype == of::NXT_CT_FLUSH_ZONE {
                of::parse_ct_flush_zone(nx.body).map(|_| ())
            } else {
                of::parse_ct_flush(nx.body).map(|_| ())
            };
            match r {
                Ok(()) => Next::Keep,
                Err(of::CtFlushError::BadLen) => error(c, of::ET_BAD_REQUEST, of::BRC_BAD_LEN),
                Err(of::CtFlushError::MustBeZero) => {
                    match send(c, &of::nxbrc_must_be_zero(v, m.xid(), m.bytes())) {
                        Ok(()) => Next::Keep,
                        Err(_) => Next::Close,
                    }
                }
            }
        }
        Some(nx) if nx.subtype == of::NXT_RESUME => match resume(v, nx.body, bridge, sw) {
            Ok(()) => Next::Keep,
            Err(Resume::Stale) => match send(c, &of::nxr_stale(v, m.xid(), m.bytes())) {
                Ok(()) => Next::Keep,
                Err(_) => Next::Close,
            },
            Err(Resume::Refused(e)) => error(c, e.0, e.1),
        },
        _ => error(c, of::ET_BAD_REQUEST, BRC_BAD_EXPERIMENTER),
    }
}

/// Why an NXT_RESUME was not carried out.
enum Resume {
    /// Its continuation is of another bridge (or of this node before a
    /// restart): OVS's NXR_STALE.
    Stale,
    Refused((u16, u16)),
}

/// NXT_RESUME: the packet, with the metadata the packet_in gave (and the
/// controller may have changed), goes on through the actions its
/// continuation froze, on worker 0 (as a PACKET_OUT does).
fn resume(v: u8, body: &[u8], bridge: [u8; 16], sw: &mut Switch) -> Result<(), Resume> {
    let refused = |e| Resume::Refused(e);
    let p = of::parse_packet_in2(body, v)
        .map_err(|_| refused((of::ET_BAD_REQUEST, of::BRC_BAD_LEN)))?;
    let Some(cont) = p.continuation else {
        // Nothing to resume: OVS's "bad request" for a resume without one.
        return Err(refused((of::ET_BAD_REQUEST, of::BRC_BAD_LEN)));
    };
    if cont.bridge != Some(bridge) {
        return Err(Resume::Stale);
    }
    let metadata = nx_match::pull_match(&p.metadata).map_err(refused)?.m;
    let mut groups = Vec::with_capacity(cont.actions.len());
    for g in &cont.actions {
        groups.push(tunlab_dp::FrozenActions {
            table: g.table_id,
            cookie: g.cookie,
            actions: crate::ofproto::openflow::actions::from_wire(&g.actions, None, true)
                .map_err(refused)?,
        });
    }
    // On the wire the stack's top comes first; here the bottom does.
    let mut stack = Vec::with_capacity(cont.stack.len());
    for e in cont.stack.iter().rev() {
        if e.len() > 16 {
            return Err(refused((of::ET_BAD_REQUEST, of::BRC_BAD_LEN)));
        }
        stack.push(e.iter().fold(0u128, |acc, b| (acc << 8) | u128::from(*b)));
    }
    let cont = tunlab_dp::Continuation { groups, stack };
    let frame = p.packet.to_vec();
    sw.on(0, move |n| n.resume(&frame, &metadata, &cont))
        .map_err(|e| refused(gone(e)))
}

/// The replies, or the error that refuses the request.
fn answer(c: &mut Conn, v: u8, m: &Message<'_>, r: Result<Vec<Vec<u8>>, (u16, u16)>) -> Next {
    match r {
        Ok(replies) => {
            if replies.iter().all(|r| send(c, r).is_ok()) {
                Next::Keep
            } else {
                Next::Close
            }
        }
        Err(e) => refuse(c, v, m, e),
    }
}

/// FEATURES_REPLY; 1.0 lists the ports in it.
fn features(v: u8, xid: u32, dpid: u64, sw: &mut Switch) -> Vec<u8> {
    let mut r = features_reply(v, xid, dpid);
    if v == of::OF10 {
        for (name, no) in ports(sw) {
            let (hw, state) = port_state(&name);
            r.extend_from_slice(&of::phy_port10(
                of::port_to10(no),
                hw,
                &name,
                0,
                state & of::PS_LINK_DOWN,
            ));
        }
        let len = (r.len().min(of::MAX_LEN) as u16).to_be_bytes();
        r[2..4].copy_from_slice(&len);
    }
    r
}

/// A flow_mod's change, carried out; a delete queues FLOW_REMOVED for
/// the rules it takes that asked for it. The switch refuses nothing a
/// checked change asks; a worker that stopped is all that can fail here
/// (OpenFlow has no closer code than "unknown").
fn flow_mod(
    change: FlowChange,
    sw: &mut Switch,
    outbox: &mut Vec<Async>,
) -> Result<(), (u16, u16)> {
    let failed = |_| (of::ET_FLOW_MOD_FAILED, of::FMFC_UNKNOWN);
    match change {
        FlowChange::Add(rule) => sw.add_flows(vec![rule]).map(drop).map_err(failed),
        FlowChange::Modify { sel, actions } => sw.mod_flows(sel, actions).map(drop).map_err(failed),
        FlowChange::Delete(sel) => {
            let reported = doomed(&sel, sw);
            sw.del_flows(sel).map_err(failed)?;
            outbox.extend(reported.iter().map(|e| Async::Of13(flow_removed(e))));
            Ok(())
        }
    }
}

/// NXT_TLV_TABLE_MOD, all or nothing, with Open vSwitch's rules: a field
/// mapped already cannot be mapped again, an option maps to one field,
/// and a mapping a rule uses cannot go. Every worker gets the new map.
fn tlv_table_mod(
    cmd: u16,
    maps: &[of::TlvMapping],
    sw: &mut Switch,
) -> Result<(), of::TlvModError> {
    use of::TlvModError as E;
    let (mut tlv, used) = sw
        .on(0, |n| {
            let used: Vec<bool> = (0..TUN_METADATA_FIELDS)
                .map(|i| {
                    n.ofproto.classifier.iter().any(|r| {
                        r.flow.m.mask.get(tunlab_dp::key::tun_metadata(i)) != 0
                            || r.flow.actions.iter().any(
                                |a| matches!(a, tunlab_dp::Action::SetTunMetadata(k, _) if usize::from(*k) == i),
                            )
                    })
                })
                .collect();
            (n.ofproto.tlv(), used)
        })
        .map_err(|_| E::BadCommand)?;
    let index = |m: &of::TlvMapping| {
        let i = usize::from(m.index);
        (i < TUN_METADATA_FIELDS).then_some(i).ok_or(E::BadFieldIdx)
    };
    match cmd {
        of::NXTTMC_ADD => {
            for m in maps {
                let i = index(m)?;
                if m.len != 4 {
                    // tunlab's tun_metadata fields are 4 bytes.
                    return Err(E::BadOptLen);
                }
                if tlv.option(i).is_some() {
                    return Err(E::AlreadyMapped);
                }
                if (0..TUN_METADATA_FIELDS)
                    .any(|k| matches!(tlv.option(k), Some((c, t, _)) if c == m.class && t == m.typ))
                {
                    return Err(E::DupEntry);
                }
                tlv.set(i, Some((m.class, m.typ, m.len)));
            }
        }
        of::NXTTMC_DELETE => {
            for m in maps {
                let i = index(m)?;
                if tlv.option(i).is_some() && used[i] {
                    return Err(E::InvalidTlvDel);
                }
                tlv.set(i, None);
            }
        }
        of::NXTTMC_CLEAR => {
            if (0..TUN_METADATA_FIELDS).any(|i| tlv.option(i).is_some() && used[i]) {
                return Err(E::InvalidTlvDel);
            }
            tlv = TlvMap::default();
        }
        _ => return Err(E::BadCommand),
    }
    sw.on_all(move |n| n.set_tlv(tlv))
        .map(|_| ())
        .map_err(|_| E::BadCommand)
}

/// PACKET_OUT: the frame goes through worker 0 with the message's
/// actions, as if it came in on the message's in_port.
fn packet_out(v: u8, m: &Message<'_>, sw: &mut Switch) -> Result<(), (u16, u16)> {
    let bad = |_| (of::ET_BAD_REQUEST, of::BRC_BAD_LEN);
    // 1.5 says the in_port in a match.
    let (buffer_id, in_port, actions, frame) = if v >= of::OF15 {
        let po = of::parse_packet_out15(m).map_err(bad)?;
        let in_port = po
            .in_port()
            .unwrap_or(crate::ofproto::openflow::PORT_CONTROLLER);
        (po.buffer_id, in_port, po.actions, po.frame)
    } else {
        let po = of::parse_packet_out(m).map_err(bad)?;
        (po.buffer_id, po.in_port, po.actions, po.frame)
    };
    if buffer_id != of::NO_BUFFER {
        return Err((of::ET_BAD_REQUEST, of::BRC_BUFFER_UNKNOWN));
    }
    let actions = crate::ofproto::openflow::actions::from_wire(&actions, None, true)?;
    if actions.is_empty() {
        return Ok(()); // no actions: the packet is dropped
    }
    let frame = frame.to_vec();
    sw.on(0, move |n| n.packet_out(in_port, &frame, &actions))
        .map_err(gone)
}

/// OFPT_METER_MOD (1.3 § 7.3.4.4).
const METER_MOD: u8 = 29;
/// METER_MOD_FAILED and the codes used here.
const ET_METER_MOD_FAILED: u16 = 12;
const MMFC_INVALID_METER: u16 = 2;
const MMFC_UNKNOWN_METER: u16 = 3;
const MMFC_BAD_COMMAND: u16 = 4;
const MMFC_OUT_OF_METERS: u16 = 10;

/// METER_MOD on a switch without meters (its meter features say none):
/// deleting (ovn-controller deletes them all at start) finds nothing to
/// delete and succeeds; adding is refused as out of meters, modifying as
/// an unknown meter.
fn meter_mod(m: &Message<'_>) -> Result<(), (u16, u16)> {
    const ALL: u32 = 0xffff_ffff;
    let b = m.body();
    if b.len() < 8 {
        return Err((of::ET_BAD_REQUEST, of::BRC_BAD_LEN));
    }
    let command = u16::from_be_bytes([b[0], b[1]]);
    let id = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
    let failed = |code| Err((ET_METER_MOD_FAILED, code));
    match command {
        2 => Ok(()),
        0 | 1 if id == ALL || id == 0 => failed(MMFC_INVALID_METER),
        0 => failed(MMFC_OUT_OF_METERS),
        1 => failed(MMFC_UNKNOWN_METER),
        _ => failed(MMFC_BAD_COMMAND),
    }
}

/// The rules with send_flow_rem that a delete picking `sel` is about to
/// take, with their counters.
fn doomed(sel: &Selector, sw: &mut Switch) -> Vec<Expired> {
    sw.flows()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.flow.send_flow_rem && sel.picks(&e.flow))
        .map(|e| Expired {
            flow: e.flow,
            reason: RemovedReason::Delete,
            age_ns: e.age_ns,
            packets: e.packets,
            bytes: e.bytes,
        })
        .collect()
}

/// FLOW_REMOVED for a rule that went.
pub(super) fn flow_removed(e: &Expired) -> Vec<u8> {
    let fields = crate::ofproto::openflow::match_fields(&e.flow.m);
    of::FlowRemoved {
        cookie: e.flow.cookie,
        priority: e.flow.priority,
        reason: e.reason as u8,
        table_id: e.flow.table,
        duration_ns: to_ms(e.age_ns),
        idle_timeout: e.flow.idle_timeout,
        hard_timeout: e.flow.hard_timeout,
        packets: e.packets,
        bytes: e.bytes,
        matches: fields
            .iter()
            .map(crate::ofproto::openflow::Field::oxm)
            .collect(),
    }
    .emit()
}

/// The peer's first message must be its HELLO; agree on a version or
/// say why not and close.
fn hello(c: &mut Conn, m: &Message<'_>) -> Next {
    if m.msg_type() != of::HELLO {
        let e = of::error(
            of::OF13,
            of::ET_HELLO_FAILED,
            of::HFC_INCOMPATIBLE,
            m.xid(),
            m.bytes(),
        );
        let _ = send(c, &e);
        return Next::Close;
    }
    let agreed = of::hello_bitmap(m)
        .ok()
        .and_then(|b| of::agree(ours(), m.version(), b));
    match agreed {
        Some(v) => {
            c.version = Some(v);
            Next::Keep
        }
        None => {
            // 1.3 § 6.3.1: an ASCII reason in the data.
            let why = format!(
                "tunlab speaks OpenFlow 1.0, 1.3 and 1.5; the peer offered version {:#x}",
                m.version()
            );
            let e = of::error(
                m.version().min(of::OF15),
                of::ET_HELLO_FAILED,
                of::HFC_INCOMPATIBLE,
                m.xid(),
                why.as_bytes(),
            );
            let _ = send(c, &e);
            Next::Close
        }
    }
}

/// FEATURES_REPLY: tables 0 to 254, no buffers; flow and port statistics (1.3
/// § 7.3.1; 1.0 § 5.3.1 adds the actions bitmap, and the caller the
/// ports).
fn features_reply(v: u8, xid: u32, dpid: u64) -> Vec<u8> {
    const FLOW_STATS: u32 = 1 << 0;
    const PORT_STATS: u32 = 1 << 2;
    let mut r = of::header(v, t13::FEATURES_REPLY, 32, xid).to_vec();
    r.extend_from_slice(&dpid.to_be_bytes());
    r.extend_from_slice(&0u32.to_be_bytes()); // n_buffers
    r.push(crate::ofproto::openflow::MAX_TABLE + 1); // n_tables
    if v != of::OF10 {
        r.extend_from_slice(&[0, 0, 0]); // auxiliary_id, pad
        r.extend_from_slice(&(FLOW_STATS | PORT_STATS).to_be_bytes());
        r.extend_from_slice(&0u32.to_be_bytes()); // reserved
    } else {
        r.extend_from_slice(&[0, 0, 0]); // pad
        r.extend_from_slice(&(FLOW_STATS | PORT_STATS).to_be_bytes());
        // Actions: output, set VLAN VID and PCP, strip VLAN.
        r.extend_from_slice(&0b1111u32.to_be_bytes());
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_replies_have_their_versions_layout() {
        for v in [of::OF10, of::OF13, of::OF15] {
            let r = features_reply(v, 3, 0x0000_1234_5678_9abc);
            let m = Message::new_checked(&r).unwrap();
            assert_eq!((m.version(), m.msg_type(), m.len(), m.xid()), (v, 6, 32, 3));
            assert_eq!(&m.body()[..8], &0x0000_1234_5678_9abcu64.to_be_bytes());
            assert_eq!(m.body()[12], 255, "tables 0 to 254");
        }
    }
}
