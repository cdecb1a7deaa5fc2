//! Answering a connection's messages: the session (HELLO, ECHO,
//! FEATURES, configuration, BARRIER); flow_mod of 1.3, of 1.0 and
//! Nicira's, through `tunlab ctl`'s door; the statistics (1.3's multipart,
//! 1.0's and Nicira's NXST); PACKET_OUT; Nicira's TLV table.

use super::{ours, send, Conn, Next};
use crate::api::FlowEntry;
use crate::ofproto::openflow::{self, FlowChange};
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

/// BAD_REQUEST codes: a statistics / multipart type not served, an
/// experimenter (or Nicira subtype) not known.
const BRC_BAD_MULTIPART: u16 = 2;
const BRC_BAD_EXPERIMENTER: u16 = 3;

/// Answer one message.
pub(super) fn handle(
    c: &mut Conn,
    m: &Message<'_>,
    dpid: u64,
    sw: &mut Switch,
    outbox: &mut Vec<Vec<u8>>,
) -> Next {
    let Some(v) = c.version else {
        return hello(c, m);
    };
    let reply = |c: &mut Conn, bytes: Vec<u8>| match send(c, &bytes) {
        Ok(()) => Next::Keep,
        Err(_) => Next::Close,
    };
    let error = |c: &mut Conn, typ, code| {
        let e = of::error(v, typ, code, m.xid(), m.bytes());
        match send(c, &e) {
            Ok(()) => Next::Keep,
            Err(_) => Next::Close,
        }
    };
    // Replies, or the error that refuses the request.
    let answer = |c: &mut Conn, r: Result<Vec<Vec<u8>>, (u16, u16)>| match r {
        Ok(replies) => {
            if replies.iter().all(|r| send(c, r).is_ok()) {
                Next::Keep
            } else {
                Next::Close
            }
        }
        Err((typ, code)) => error(c, typ, code),
    };
    if m.version() != v {
        return error(c, of::ET_BAD_REQUEST, of::BRC_BAD_VERSION);
    }
    let (barrier_request, barrier_reply, stats_request) = if v == of::OF13 {
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
        t13::FEATURES_REQUEST => {
            let mut r = features_reply(v, m.xid(), dpid);
            // 1.0 lists the ports in the reply.
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
            reply(c, r)
        }
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
        t if t == stats_request && v == of::OF13 => answer(c, multipart(m, dpid, sw)),
        t if t == stats_request && table_request(v, m.body()) => {
            let active = sw.on(0, |n| n.ofproto.classifier.len()).unwrap_or(0);
            reply(c, table_reply(v, m.xid(), active as u32))
        }
        t if t == stats_request => answer(c, stats10(m, dpid, sw)),
        // One flow table, two doors: a flow_mod becomes the same typed
        // change a `tunlab ctl` request makes.
        of::FLOW_MOD => {
            let change = if v == of::OF13 {
                of::parse_flow_mod(m)
                    .map_err(bad_len)
                    .and_then(|fm| openflow::flow_change(&fm))
            } else {
                // 1.0's fixed match.
                of::parse_flow_mod10(m)
                    .map_err(bad_len)
                    .and_then(|(fm, m10)| {
                        openflow::flow_change_with(&fm, &openflow::match10_text(&m10))
                    })
            };
            let done = change.and_then(|ch| flow_mod(ch, sw, outbox));
            answer(c, done.map(|()| Vec::new()))
        }
        of::EXPERIMENTER => match of::parse_nx(m) {
            // The flow format a 1.0 client asks for: plain and NXM
            // flow_mods are both read, and statistics go out in the form
            // asked (NXST or plain), so there is nothing to switch.
            Some(nx) if nx.subtype == of::NXT_SET_FLOW_FORMAT => Next::Keep,
            // A 1.0 client's flow_mod with an NXM match.
            Some(nx) if nx.subtype == of::NXT_FLOW_MOD => {
                let change = of::parse_nx_flow_mod(nx.body)
                    .map_err(bad_len)
                    .and_then(|fm| openflow::flow_change(&fm));
                let done = change.and_then(|ch| flow_mod(ch, sw, outbox));
                answer(c, done.map(|()| Vec::new()))
            }
            Some(nx) if nx.subtype == of::NXT_TLV_TABLE_MOD => {
                match of::parse_tlv_table_mod(nx.body) {
                    Ok((cmd, maps)) => match tlv_table_mod(cmd, &maps, sw) {
                        Ok(()) => Next::Keep,
                        Err(e) => match send(c, &of::nx_error(v, e, m.xid(), m.bytes())) {
                            Ok(()) => Next::Keep,
                            Err(_) => Next::Close,
                        },
                    },
                    Err(_) => error(c, of::ET_BAD_REQUEST, of::BRC_BAD_LEN),
                }
            }
            Some(nx) if nx.subtype == of::NXT_TLV_TABLE_REQUEST => match sw
                .on(0, |n| n.ofproto.tlv())
            {
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
            },
            _ => error(c, of::ET_BAD_REQUEST, BRC_BAD_EXPERIMENTER),
        },
        of::PACKET_OUT if v == of::OF13 => answer(c, packet_out(m, sw).map(|()| Vec::new())),
        _ => error(c, of::ET_BAD_REQUEST, of::BRC_BAD_TYPE),
    }
}

/// A flow_mod's change, carried out; a delete queues FLOW_REMOVED for
/// the rules it takes that asked for it. The switch refuses nothing a
/// checked change asks; a worker that stopped is all that can fail here
/// (OpenFlow has no closer code than "unknown").
fn flow_mod(
    change: FlowChange,
    sw: &mut Switch,
    outbox: &mut Vec<Vec<u8>>,
) -> Result<(), (u16, u16)> {
    let failed = |_| (of::ET_FLOW_MOD_FAILED, of::FMFC_UNKNOWN);
    match change {
        FlowChange::Add(rule) => sw.add_flows(vec![rule]).map(drop).map_err(failed),
        FlowChange::Modify { sel, actions } => sw.mod_flows(sel, actions).map(drop).map_err(failed),
        FlowChange::Delete(sel) => {
            let reported = doomed(&sel, sw);
            sw.del_flows(sel).map_err(failed)?;
            outbox.extend(reported.iter().map(flow_removed));
            Ok(())
        }
    }
}

/// A message that does not read is refused as of bad length.
fn bad_len<E>(_: E) -> (u16, u16) {
    (of::ET_BAD_REQUEST, of::BRC_BAD_LEN)
}

/// The node's ports: name and number.
fn ports(sw: &mut Switch) -> Vec<(String, u32)> {
    sw.on(0, |n| {
        n.netdev
            .ports()
            .map(|(name, ofport, _, _)| (name.to_string(), ofport))
            .collect()
    })
    .unwrap_or_default()
}

/// The replies to a 1.0 statistics request (besides the table's): the
/// description, ports and their descriptions, and Nicira's flow and
/// aggregate statistics that `ovs-ofctl dump-flows` and `dump-aggregate`
/// ask for.
fn stats10(m: &Message<'_>, dpid: u64, sw: &mut Switch) -> Result<Vec<Vec<u8>>, (u16, u16)> {
    let (typ, body) = of::parse_stats10(m).map_err(bad_len)?;
    let xid = m.xid();
    let plain = |entries: Vec<Vec<u8>>| of::stats10_replies(xid, typ, &[], &entries);
    Ok(match typ {
        of::ST10_DESC => plain(vec![desc(dpid, sw)]),
        of::ST10_PORT => {
            let want = body
                .get(..2)
                .map(|b| u16::from_be_bytes([b[0], b[1]]))
                .ok_or_else(|| bad_len(()))?;
            let rows = sw.ports().map_err(gone)?;
            plain(
                rows.iter()
                    .filter(|r| want == 0xffff || of::port_from10(want) == r.ofport)
                    .map(|r| {
                        of::port_stats10(
                            of::port_to10(r.ofport),
                            [
                                r.rx_packets,
                                r.tx_packets,
                                r.rx_bytes,
                                r.tx_bytes,
                                r.rx_dropped,
                                0,
                                0,
                                r.tx_errors,
                            ],
                        )
                    })
                    .collect(),
            )
        }
        of::ST10_PORT_DESC => plain(
            ports(sw)
                .iter()
                .map(|(name, no)| {
                    let (hw, state) = port_state(name);
                    // 1.0 has no "live" bit.
                    of::phy_port10(of::port_to10(*no), hw, name, 0, state & of::PS_LINK_DOWN)
                })
                .collect(),
        ),
        of::ST10_VENDOR => {
            let Some(req) = of::parse_nx_stats_request(body).map_err(bad_len)? else {
                return Err((of::ET_BAD_REQUEST, BRC_BAD_EXPERIMENTER));
            };
            let filter = of::FlowStatsRequest {
                table_id: req.table_id,
                out_port: req.out_port,
                out_group: of::GROUP_ANY,
                cookie: 0,
                cookie_mask: 0,
                matches: req.matches,
            };
            let picked = flow_stats(&filter, sw)?;
            let head = of::nx_stats_head(req.subtype);
            let entries = match req.subtype {
                of::NXST_FLOW => picked.iter().map(nx_flow_entry).collect(),
                of::NXST_AGGREGATE => {
                    let (p, b) = picked
                        .iter()
                        .fold((0, 0), |(p, b), e| (p + e.packets, b + e.bytes));
                    vec![of::aggregate_body(p, b, picked.len() as u32)]
                }
                _ => return Err((of::ET_BAD_REQUEST, BRC_BAD_MULTIPART)),
            };
            of::stats10_replies(xid, typ, &head, &entries)
        }
        _ => return Err((of::ET_BAD_REQUEST, BRC_BAD_MULTIPART)),
    })
}

/// One rule's NXST_FLOW entry: NXM match, 1.0 actions.
fn nx_flow_entry(e: &FlowEntry) -> Vec<u8> {
    let fields = crate::ofproto::openflow::match_fields_nxm(&e.flow.m);
    let actions = crate::ofproto::openflow::of_actions(&e.flow.actions);
    let oxms: Vec<of::Oxm<'_>> = fields
        .iter()
        .map(crate::ofproto::openflow::Field::oxm)
        .collect();
    let acts: Vec<of::Action<'_>> = actions
        .iter()
        .map(crate::ofproto::openflow::OfAction::view)
        .collect();
    of::nx_flow_stats_entry(
        e.flow.table,
        to_ms(e.age_ns),
        e.flow.priority,
        e.flow.idle_timeout,
        e.flow.hard_timeout,
        (e.idle_ns / 1_000_000_000).min(0xfffe) as u16,
        e.flow.cookie,
        e.packets,
        e.bytes,
        &oxms,
        &acts,
    )
}

/// The switch's description (both versions' bodies are alike).
fn desc(dpid: u64, sw: &Switch) -> Vec<u8> {
    of::desc_body(
        "tunlab",
        "tunlab overlay switch",
        concat!("tunlab ", env!("CARGO_PKG_VERSION")),
        "None",
        &format!("{} (dpid {dpid:#018x})", sw.name),
    )
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
fn packet_out(m: &Message<'_>, sw: &mut Switch) -> Result<(), (u16, u16)> {
    let po = of::parse_packet_out(m).map_err(|_| (of::ET_BAD_REQUEST, of::BRC_BAD_LEN))?;
    if po.buffer_id != of::NO_BUFFER {
        return Err((of::ET_BAD_REQUEST, of::BRC_BUFFER_UNKNOWN));
    }
    let mut text = Vec::new();
    for a in &po.actions {
        text.push(crate::ofproto::openflow::action_text(a)?);
    }
    if text.is_empty() {
        return Ok(()); // no actions: the packet is dropped
    }
    let names = sw.on(0, |n| n.ofproto.port_map()).map_err(gone)?;
    let actions = tunlab_dp::parse_flow(&format!("actions={}", text.join(",")), &names)
        .map_err(|_| (of::ET_BAD_ACTION, of::BAC_BAD_TYPE))?
        .actions;
    let (in_port, frame) = (po.in_port, po.frame.to_vec());
    sw.on(0, move |n| n.packet_out(in_port, &frame, &actions))
        .map_err(gone)
}

/// The replies to a 1.3 multipart request, or the error that refuses it.
fn multipart(m: &Message<'_>, dpid: u64, sw: &mut Switch) -> Result<Vec<Vec<u8>>, (u16, u16)> {
    let bad_len = |_| (of::ET_BAD_REQUEST, of::BRC_BAD_LEN);
    let mp = of::parse_multipart(m).map_err(bad_len)?;
    let entries: Vec<Vec<u8>> = match mp.typ {
        of::MP_DESC => vec![desc(dpid, sw)],
        of::MP_FLOW | of::MP_AGGREGATE => {
            let req = of::parse_flow_stats_request(mp.body).map_err(bad_len)?;
            let picked = flow_stats(&req, sw)?;
            if mp.typ == of::MP_FLOW {
                picked.iter().map(flow_entry).collect()
            } else {
                let (p, b) = picked
                    .iter()
                    .fold((0, 0), |(p, b), e| (p + e.packets, b + e.bytes));
                vec![of::aggregate_body(p, b, picked.len() as u32)]
            }
        }
        // Tables 0 up to the highest that holds a rule: each one's rules
        // and the packets they matched; table 0 also looked up (and
        // missed) what no rule matched.
        of::MP_TABLE => {
            let flows = sw.flows().map_err(gone)?;
            let (_, st) = sw.port_rows().map_err(gone)?;
            let missed = st.drops.get("no_rule").copied().unwrap_or(0);
            (0..=highest_table(&flows))
                .map(|t| {
                    let rules = flows.iter().filter(|e| e.flow.table == t);
                    let (n, matched) = rules.fold((0, 0), |(n, m), e| (n + 1, m + e.packets));
                    let lookups = matched + if t == 0 { missed } else { 0 };
                    of::table_stats(t, n, lookups, matched)
                })
                .collect()
        }
        of::MP_PORT_STATS => {
            let want = of::parse_port_request(mp.body).map_err(bad_len)?;
            let rows = sw.ports().map_err(gone)?;
            let age = sw.on(0, |n| n.ofproto.uptime_ns()).map_err(gone)?;
            rows.iter()
                .filter(|r| want == of::PORT_ANY || want == r.ofport)
                .map(|r| {
                    of::PortStats {
                        port_no: r.ofport,
                        rx_packets: r.rx_packets,
                        tx_packets: r.tx_packets,
                        rx_bytes: r.rx_bytes,
                        tx_bytes: r.tx_bytes,
                        rx_dropped: r.rx_dropped,
                        tx_dropped: 0,
                        rx_errors: 0,
                        tx_errors: r.tx_errors,
                        duration_ns: to_ms(age),
                    }
                    .emit()
                })
                .collect()
        }
        of::MP_PORT_DESC => {
            let ports = sw
                .on(0, |n| {
                    n.netdev
                        .ports()
                        .map(|(name, ofport, _, _)| (name.to_string(), ofport))
                        .collect::<Vec<_>>()
                })
                .map_err(gone)?;
            ports
                .iter()
                .map(|(name, ofport)| port_desc(name, *ofport))
                .collect()
        }
        // A request with a body would set the table's features: refused.
        of::MP_TABLE_FEATURES if mp.body.is_empty() => {
            let flows = sw.flows().map_err(gone)?;
            (0..=highest_table(&flows)).map(table_features).collect()
        }
        of::MP_TABLE_FEATURES => return Err((ET_TABLE_FEATURES_FAILED, TFFC_EPERM)),
        _ => return Err((of::ET_BAD_REQUEST, BRC_BAD_MULTIPART)),
    };
    Ok(of::multipart_replies(m.xid(), mp.typ, &entries))
}

/// The rules a flow or aggregate request picks: by table, by cookie
/// under its mask, by match (every rule at least as specific), by an
/// output port.
fn flow_stats(
    req: &of::FlowStatsRequest<'_>,
    sw: &mut Switch,
) -> Result<Vec<FlowEntry>, (u16, u16)> {
    let mut fields = Vec::new();
    for o in &req.matches {
        fields.push(openflow::match_text(o).ok_or((of::ET_BAD_MATCH, of::BMC_BAD_FIELD))?);
    }
    let sel = Selector {
        table: (req.table_id != of::TABLE_ALL).then_some(req.table_id),
        m: openflow::match_of(&fields)?,
        strict: None,
        cookie: (req.cookie_mask != 0).then_some((req.cookie, req.cookie_mask)),
    };
    let outputs = |e: &FlowEntry| {
        req.out_port == of::PORT_ANY
            || e.flow
                .actions
                .iter()
                .any(|a| matches!(a, tunlab_dp::Action::Output(p) if *p == req.out_port))
    };
    Ok(sw
        .flows()
        .map_err(gone)?
        .into_iter()
        .filter(|e| sel.picks(&e.flow) && outputs(e) && req.out_group == of::GROUP_ANY)
        .collect())
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

/// One rule's flow statistics entry.
fn flow_entry(e: &FlowEntry) -> Vec<u8> {
    let (fields, actions) = crate::ofproto::openflow::rule_to_of(&e.flow);
    of::FlowStats {
        table_id: e.flow.table,
        duration_ns: to_ms(e.age_ns),
        priority: e.flow.priority,
        idle_timeout: e.flow.idle_timeout,
        hard_timeout: e.flow.hard_timeout,
        flags: if e.flow.send_flow_rem {
            crate::ofproto::openflow::FF_SEND_FLOW_REM
        } else {
            0
        },
        cookie: e.flow.cookie,
        packets: e.packets,
        bytes: e.bytes,
        matches: fields
            .iter()
            .map(crate::ofproto::openflow::Field::oxm)
            .collect(),
        actions: actions
            .iter()
            .map(crate::ofproto::openflow::OfAction::view)
            .collect(),
    }
    .emit()
}

/// A port's description: its device's MAC and link state where it is a
/// device here (a tunnel port is not: always live).
pub(super) fn port_desc(name: &str, ofport: u32) -> Vec<u8> {
    let (hw_addr, state) = port_state(name);
    of::PortDesc {
        port_no: ofport,
        hw_addr,
        name,
        config: 0,
        state,
        curr: 0,
        curr_speed: 0,
        max_speed: 0,
    }
    .emit()
}

/// A port's MAC and state, where it is a device in this namespace (a
/// tenant's TAP lives in the tenant's, a tunnel port is no device: zeros
/// and live).
fn port_state(name: &str) -> ([u8; 6], u32) {
    let sys = |what: &str| std::fs::read_to_string(format!("/sys/class/net/{name}/{what}")).ok();
    let hw_addr = sys("address")
        .and_then(|a| {
            let b: Vec<u8> = a
                .trim()
                .split(':')
                .filter_map(|x| u8::from_str_radix(x, 16).ok())
                .collect();
            b.try_into().ok()
        })
        .unwrap_or([0; 6]);
    let state = match sys("operstate").as_deref().map(str::trim) {
        Some("down" | "lowerlayerdown") => of::PS_LINK_DOWN,
        _ => of::PS_LIVE,
    };
    (hw_addr, state)
}

/// A duration cut to whole milliseconds, as Open vSwitch reports them
/// (so that `ovs-ofctl` prints `duration=0.218s`, not nine digits).
fn to_ms(ns: u64) -> u64 {
    ns / 1_000_000 * 1_000_000
}

/// The highest table that holds a rule (0 when none does).
fn highest_table(flows: &[FlowEntry]) -> u8 {
    flows.iter().map(|e| e.flow.table).max().unwrap_or(0)
}

/// A table's features: apply-actions with output, push/pop VLAN and
/// set_field; the fields tunlab matches and sets. (Tables have no names,
/// as Open vSwitch's have none unless configured.)
fn table_features(table_id: u8) -> Vec<u8> {
    use of::{oxm_header as h, NXM_1, OXM_BASIC as B};
    let matches = [
        h(B, 0, false, 4),
        h(B, 3, true, 6),
        h(B, 4, true, 6),
        h(B, 5, false, 2),
        h(B, 6, true, 2),
        h(B, 7, false, 1),
        h(B, 8, false, 1),
        h(B, 10, false, 1),
        h(B, 11, true, 4),
        h(B, 12, true, 4),
        h(B, 13, true, 2),
        h(B, 14, true, 2),
        h(B, 15, true, 2),
        h(B, 16, true, 2),
        h(B, 26, true, 16),
        h(B, 27, true, 16),
        h(B, 38, true, 8),
        h(NXM_1, 31, true, 4),
        h(NXM_1, 32, true, 4),
        h(NXM_1, 109, true, 16),
        h(NXM_1, 110, true, 16),
    ];
    let setfields = [
        h(B, 6, false, 2),
        h(B, 7, false, 1),
        h(B, 38, false, 8),
        h(NXM_1, 31, false, 4),
        h(NXM_1, 32, false, 4),
        h(NXM_1, 109, false, 16),
        h(NXM_1, 110, false, 16),
    ];
    of::TableFeatures {
        table_id,
        name: "",
        max_entries: MAX_ENTRIES,
        instructions: &[of::IT_APPLY_ACTIONS],
        apply_actions: &[
            of::AT_OUTPUT,
            of::AT_PUSH_VLAN,
            of::AT_POP_VLAN,
            of::AT_SET_FIELD,
        ],
        matches: &matches,
        apply_setfields: &setfields,
    }
    .emit()
}

/// The error for a request the node's workers could not answer (they
/// stopped).
fn gone<E>(_: E) -> (u16, u16) {
    (of::ET_BAD_REQUEST, BRC_EPERM)
}

/// Rules a table holds at most, as the table replies say.
const MAX_ENTRIES: u32 = 1_000_000;
/// BAD_REQUEST / EPERM: the node's workers are gone.
const BRC_EPERM: u16 = 5;
/// Table-features failures: setting them is not allowed.
const ET_TABLE_FEATURES_FAILED: u16 = 13;
const TFFC_EPERM: u16 = 5;

/// Whether a 1.0 stats request asks for the table stats: ovs-ofctl asks
/// before it sends a flow_mod (to learn the tables' names), and gives up
/// if refused. (Under 1.3 it asks for the table features instead.)
fn table_request(v: u8, body: &[u8]) -> bool {
    v == of::OF10 && body.get(..2) == Some(&[0, 3])
}

/// 1.0's TABLE stats reply (§ 5.3.5): one entry, table 0, with the
/// node's `active` rules (of every table; lookups and matches are not
/// counted here: 0; 1.3's table stats give each table its own).
fn table_reply(v: u8, xid: u32, active: u32) -> Vec<u8> {
    const STATS_REPLY: u8 = 17;
    let mut name = [0u8; 32];
    name[..10].copy_from_slice(b"classifier");
    let mut body = Vec::new();
    body.extend_from_slice(&3u16.to_be_bytes()); // TABLE
    body.extend_from_slice(&[0; 2]); // flags
    body.extend_from_slice(&[0, 0, 0, 0]); // table 0, pad
    body.extend_from_slice(&name);
    body.extend_from_slice(&0x003f_ffffu32.to_be_bytes()); // wildcards
    body.extend_from_slice(&MAX_ENTRIES.to_be_bytes());
    body.extend_from_slice(&active.to_be_bytes());
    body.extend_from_slice(&[0; 8 + 8]); // lookups, matched
    let mut r = of::header(v, STATS_REPLY, of::HEADER_LEN + body.len(), xid).to_vec();
    r.extend_from_slice(&body);
    r
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
                "tunlab speaks OpenFlow 1.0 and 1.3; the peer offered version {:#x}",
                m.version()
            );
            let e = of::error(
                m.version().min(of::OF13),
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
    if v == of::OF13 {
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
        for v in [of::OF10, of::OF13] {
            let r = features_reply(v, 3, 0x0000_1234_5678_9abc);
            let m = Message::new_checked(&r).unwrap();
            assert_eq!((m.version(), m.msg_type(), m.len(), m.xid()), (v, 6, 32, 3));
            assert_eq!(&m.body()[..8], &0x0000_1234_5678_9abcu64.to_be_bytes());
            assert_eq!(m.body()[12], 255, "tables 0 to 254");
        }
    }
}
