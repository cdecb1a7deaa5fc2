//! The statistics a connection asks for: 1.3's multipart (description,
//! flows, aggregate, tables, table features, ports, port descriptions),
//! 1.0's statistics and Nicira's NXST that `ovs-ofctl` asks for.

use crate::api::FlowEntry;
use crate::ofproto::openflow::nx_match;
use crate::workers::Switch;
use tunlab_dp::Selector;
use tunlab_wire::openflow::{self as of, Message};

/// BAD_REQUEST codes: a statistics / multipart type not served, an
/// experimenter (or Nicira subtype) not known.
pub(super) const BRC_BAD_MULTIPART: u16 = 2;
pub(super) const BRC_BAD_EXPERIMENTER: u16 = 3;

/// A message that does not read is refused as of bad length.
pub(super) fn bad_len<E>(_: E) -> (u16, u16) {
    (of::ET_BAD_REQUEST, of::BRC_BAD_LEN)
}

/// The node's ports: name and number.
pub(super) fn ports(sw: &mut Switch) -> Vec<(String, u32)> {
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
pub(super) fn stats10(
    m: &Message<'_>,
    dpid: u64,
    sw: &mut Switch,
) -> Result<Vec<Vec<u8>>, (u16, u16)> {
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
    let actions = crate::ofproto::openflow::of_actions_in(&e.flow.actions, of::OF10);
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

/// Multipart types beyond those of the wire crate (1.3 § 7.3.5).
const MP_GROUP_DESC: u16 = 7;
const MP_METER: u16 = 9;
const MP_METER_CONFIG: u16 = 10;
const MP_METER_FEATURES: u16 = 11;

/// The replies to a 1.3 or 1.5 multipart request, or the error that
/// refuses it. 1.5 lays out flows (OFPMP_FLOW_DESC), the aggregate (OXS
/// statistics) and ports (with properties) its own way.
pub(super) fn multipart(
    m: &Message<'_>,
    v: u8,
    dpid: u64,
    sw: &mut Switch,
) -> Result<Vec<Vec<u8>>, (u16, u16)> {
    let bad_len = |_| (of::ET_BAD_REQUEST, of::BRC_BAD_LEN);
    let v15 = v >= of::OF15;
    let mp = of::parse_multipart(m).map_err(bad_len)?;
    let entries: Vec<Vec<u8>> = match mp.typ {
        of::MP_DESC => vec![desc(dpid, sw)],
        of::MP_FLOW | of::MP_AGGREGATE => {
            let req = of::parse_flow_stats_request(mp.body).map_err(bad_len)?;
            let picked = flow_stats(&req, sw)?;
            let (p, b) = picked
                .iter()
                .fold((0, 0), |(p, b), e| (p + e.packets, b + e.bytes));
            match (mp.typ == of::MP_FLOW, v15) {
                (true, false) => picked.iter().map(flow_entry).collect(),
                (true, true) => picked.iter().map(flow_desc15).collect(),
                (false, false) => vec![of::aggregate_body(p, b, picked.len() as u32)],
                (false, true) => vec![of::aggregate_body15(p, b, picked.len() as u32)],
            }
        }
        // No meters (as OVS answers for a datapath without them), and no
        // groups yet.
        MP_METER_FEATURES => vec![vec![0; 16]],
        MP_METER | MP_METER_CONFIG | MP_GROUP_DESC => Vec::new(),
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
        // 1.4+ port statistics (with properties) are not built.
        of::MP_PORT_STATS if v15 => return Err((of::ET_BAD_REQUEST, BRC_BAD_MULTIPART)),
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
                .map(|(name, ofport)| port_desc(v, name, *ofport))
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
    Ok(of::multipart_replies_in(v, m.xid(), mp.typ, &entries))
}

/// The rules a flow or aggregate request picks: by table, by cookie
/// under its mask, by match (every rule at least as specific), by an
/// output port.
fn flow_stats(
    req: &of::FlowStatsRequest<'_>,
    sw: &mut Switch,
) -> Result<Vec<FlowEntry>, (u16, u16)> {
    let read = nx_match::pull_match(&req.matches)?;
    let sel = Selector {
        table: (req.table_id != of::TABLE_ALL).then_some(req.table_id),
        m: read.m,
        strict: None,
        cookie: read
            .cookie
            .or((req.cookie_mask != 0).then_some((req.cookie, req.cookie_mask))),
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

/// One rule's flow description (1.5): its match with 1.5's packet
/// registers, its statistics as OXS.
fn flow_desc15(e: &FlowEntry) -> Vec<u8> {
    use crate::ofproto::openflow::{nx_match, of_actions_in, Field, OfAction};
    let fields = nx_match::put_match(&e.flow.m, nx_match::Encoding::Oxm(of::OF15));
    let actions = of_actions_in(&e.flow.actions, of::OF15);
    of::FlowDesc15 {
        table_id: e.flow.table,
        priority: e.flow.priority,
        idle_timeout: e.flow.idle_timeout,
        hard_timeout: e.flow.hard_timeout,
        flags: if e.flow.send_flow_rem {
            crate::ofproto::openflow::FF_SEND_FLOW_REM
        } else {
            0
        },
        importance: 0,
        cookie: e.flow.cookie,
        duration_ns: to_ms(e.age_ns),
        idle_ns: to_ms(e.idle_ns),
        packets: e.packets,
        bytes: e.bytes,
        matches: fields.iter().map(Field::oxm).collect(),
        actions: actions.iter().map(OfAction::view).collect(),
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

/// A port's description, in version `v`'s layout: its device's MAC and
/// link state where it is a device here (a tunnel port is not: always
/// live).
pub(super) fn port_desc(v: u8, name: &str, ofport: u32) -> Vec<u8> {
    let (hw_addr, state) = port_state(name);
    let d = of::PortDesc {
        port_no: ofport,
        hw_addr,
        name,
        config: 0,
        state,
        curr: 0,
        curr_speed: 0,
        max_speed: 0,
    };
    if v >= of::OF15 {
        d.emit14()
    } else {
        d.emit()
    }
}

/// A port's MAC and state, where it is a device in this namespace (a
/// tenant's TAP lives in the tenant's, a tunnel port is no device: zeros
/// and live).
pub(super) fn port_state(name: &str) -> ([u8; 6], u32) {
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
pub(super) fn to_ms(ns: u64) -> u64 {
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
pub(super) fn gone<E>(_: E) -> (u16, u16) {
    (of::ET_BAD_REQUEST, BRC_EPERM)
}

/// Rules a table holds at most, as the table replies say.
const MAX_ENTRIES: u32 = 1_000_000;

/// BAD_REQUEST / EPERM: the node's workers are gone.
pub(super) const BRC_EPERM: u16 = 5;

/// Table-features failures: setting them is not allowed.
const ET_TABLE_FEATURES_FAILED: u16 = 13;

const TFFC_EPERM: u16 = 5;

/// Whether a 1.0 stats request asks for the table stats: ovs-ofctl asks
/// before it sends a flow_mod (to learn the tables' names), and gives up
/// if refused. (Under 1.3 it asks for the table features instead.)
pub(super) fn table_request(v: u8, body: &[u8]) -> bool {
    v == of::OF10 && body.get(..2) == Some(&[0, 3])
}

/// 1.0's TABLE stats reply (§ 5.3.5): one entry, table 0, with the
/// node's `active` rules (of every table; lookups and matches are not
/// counted here: 0; 1.3's table stats give each table its own).
pub(super) fn table_reply(v: u8, xid: u32, active: u32) -> Vec<u8> {
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
