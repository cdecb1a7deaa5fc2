//! OpenFlow's flow_mod as a change to tunlab's flow table: its match and
//! actions in ovs-ofctl's words (from OXM fields, a 1.0 `ofp_match`, or
//! actions), read by the flow rules' own parser, and the command as a
//! typed add, modify or delete; or the OpenFlow error that refuses it.

use super::{
    nxm, nxm0, oxm, BAC_BAD_ARGUMENT, BAC_BAD_OUT_PORT, FF_SEND_FLOW_REM, FMFC_BAD_FLAGS,
    FMFC_BAD_TABLE_ID, MAX_TABLE, OF10_IN_PORT, PORT_ALL, PORT_CONTROLLER, PORT_FLOOD,
    PORT_IN_PORT, PORT_NORMAL, PORT_TABLE, VID_PRESENT,
};
use tunlab_dp::{parse_flow, Action as Act, FlowRule, Match, NumericPorts, Selector};
use tunlab_wire::openflow::{self as of, Action, FlowMod, Oxm};

/// A 1.0 `ofp_match` in ovs-ofctl's words.
pub fn match10_text(m: &of::Match10) -> Vec<String> {
    let mac = |a: [u8; 6]| {
        a.iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let net = |(a, len): ([u8; 4], u8)| format!("{}/{len}", std::net::Ipv4Addr::from(a));
    let mut t = Vec::new();
    if let Some(p) = m.in_port {
        t.push(format!("in_port={}", of::port_from10(p)));
    }
    if let Some(a) = m.dl_src {
        t.push(format!("dl_src={}", mac(a)));
    }
    if let Some(a) = m.dl_dst {
        t.push(format!("dl_dst={}", mac(a)));
    }
    match m.dl_vlan {
        Some(0xffff) => t.push("vlan_tci=0x0000/0x1fff".into()),
        Some(v) => t.push(format!("dl_vlan={}", v & 0xfff)),
        None => {}
    }
    if let Some(p) = m.dl_vlan_pcp {
        t.push(format!("dl_vlan_pcp={}", p & 7));
    }
    if let Some(e) = m.dl_type {
        t.push(format!("dl_type={e:#06x}"));
    }
    if let Some(v) = m.nw_tos {
        t.push(format!("nw_tos={}", v & 0xfc));
    }
    if let Some(v) = m.nw_proto {
        t.push(format!("nw_proto={v}"));
    }
    if let Some(n) = m.nw_src {
        t.push(format!("nw_src={}", net(n)));
    }
    if let Some(n) = m.nw_dst {
        t.push(format!("nw_dst={}", net(n)));
    }
    if let Some(p) = m.tp_src {
        t.push(format!("tp_src={p}"));
    }
    if let Some(p) = m.tp_dst {
        t.push(format!("tp_dst={p}"));
    }
    t
}

/// What a flow_mod asks of the flow table.
#[derive(Debug, Clone, PartialEq)]
pub enum FlowChange {
    /// Add this rule (replacing one with the same match and priority).
    Add(FlowRule),
    /// Give the rules `sel` picks these actions.
    Modify { sel: Selector, actions: Vec<Act> },
    /// Delete the rules `sel` picks.
    Delete(Selector),
}

/// The change `fm` asks for, its match read from its OXM fields; or the
/// OpenFlow error type and code that refuse it.
pub fn flow_change(fm: &FlowMod<'_>) -> Result<FlowChange, (u16, u16)> {
    let m = read_match(&fm.matches)?;
    flow_change_with(fm, &m.fields, m.cookie)
}

/// The match that `fields` (in ovs-ofctl's words, from OXM fields or a
/// 1.0 `ofp_match`) mean, read by the flow rules' own parser, so that a
/// field means the same through OpenFlow and `tunlab ctl`; a combination
/// the parser refuses (a field without its prerequisite) is a bad match.
pub fn match_of(fields: &[String]) -> Result<Match, (u16, u16)> {
    let text = if fields.is_empty() {
        "actions=drop".to_string()
    } else {
        format!("{} actions=drop", fields.join(","))
    };
    parse_flow(&text, &NumericPorts)
        .map(|r| r.m)
        .map_err(|_| (of::ET_BAD_MATCH, of::BMC_BAD_PREREQ))
}

/// An OXM match, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfMatch {
    /// Its fields in ovs-ofctl's words (for [`match_of`]).
    pub fields: Vec<String>,
    /// The cookie it picks rules by, if it has Nicira's cookie field (how
    /// 1.0 with NXM picks by cookie): (value, mask).
    pub cookie: Option<(u64, u64)>,
}

/// Read an OXM match; a field tunlab does not match is a bad field.
pub fn read_match(oxms: &[Oxm<'_>]) -> Result<OfMatch, (u16, u16)> {
    let word = |b: &[u8]| -> Result<u64, (u16, u16)> {
        let a: [u8; 8] = b
            .try_into()
            .map_err(|_| (of::ET_BAD_MATCH, of::BMC_BAD_LEN))?;
        Ok(u64::from_be_bytes(a))
    };
    let (mut fields, mut cookie) = (Vec::new(), None);
    for o in oxms {
        if (o.class, o.field) == (of::NXM_1, nxm::COOKIE) {
            let mask = o.mask.map_or(Ok(u64::MAX), word)?;
            cookie = Some((word(o.value)?, mask));
            continue;
        }
        fields.push(match_text(o).ok_or((of::ET_BAD_MATCH, of::BMC_BAD_FIELD))?);
    }
    Ok(OfMatch { fields, cookie })
}

/// [`flow_change`] for a flow_mod whose match is already in ovs-ofctl's
/// words (a 1.0 `ofp_match`, [`match10_text`]), with the cookie its match
/// picks by, if any.
pub fn flow_change_with(
    fm: &FlowMod<'_>,
    fields: &[String],
    picked: Option<(u64, u64)>,
) -> Result<FlowChange, (u16, u16)> {
    let is_delete = matches!(fm.command, of::FC_DELETE | of::FC_DELETE_STRICT);
    // Tables 0 to MAX_TABLE; "all tables" picks rules to delete.
    let table_ok = fm.table_id <= MAX_TABLE || (fm.table_id == of::TABLE_ALL && is_delete);
    if !table_ok {
        return Err((of::ET_FLOW_MOD_FAILED, FMFC_BAD_TABLE_ID));
    }
    if !fm.other_instructions.is_empty() {
        return Err((of::ET_BAD_INSTRUCTION, of::BIC_UNKNOWN_INST));
    }
    let m = match_of(fields)?;
    // Table 0 and "all tables" pick in every table, as `tunlab ctl`'s
    // requests without table= do.
    let table = (fm.table_id != 0 && fm.table_id <= MAX_TABLE).then_some(fm.table_id);
    let strict = matches!(fm.command, of::FC_MODIFY_STRICT | of::FC_DELETE_STRICT);
    // Delete and modify pick rules by cookie under cookie_mask.
    let sel = Selector {
        table,
        m,
        strict: strict.then_some(fm.priority),
        cookie: picked.or((fm.cookie_mask != 0).then_some((fm.cookie, fm.cookie_mask))),
    };
    match fm.command {
        of::FC_ADD => {
            if fm.flags & !FF_SEND_FLOW_REM != 0 {
                // Overlap checks and counter flags are not built.
                return Err((of::ET_FLOW_MOD_FAILED, FMFC_BAD_FLAGS));
            }
            Ok(FlowChange::Add(FlowRule {
                table: table.unwrap_or(0),
                priority: fm.priority,
                cookie: fm.cookie,
                idle_timeout: fm.idle_timeout,
                hard_timeout: fm.hard_timeout,
                send_flow_rem: fm.flags & FF_SEND_FLOW_REM != 0,
                m,
                actions: flow_mod_actions(fm)?,
            }))
        }
        of::FC_MODIFY | of::FC_MODIFY_STRICT => Ok(FlowChange::Modify {
            sel,
            actions: flow_mod_actions(fm)?,
        }),
        of::FC_DELETE | of::FC_DELETE_STRICT => Ok(FlowChange::Delete(sel)),
        _ => Err((of::ET_FLOW_MOD_FAILED, of::FMFC_BAD_COMMAND)),
    }
}

/// A flow_mod's actions as the rule's (none: drop).
fn flow_mod_actions(fm: &FlowMod<'_>) -> Result<Vec<Act>, (u16, u16)> {
    let mut acts = Vec::new();
    for a in &fm.actions {
        // "Through the flow table" is for PACKET_OUT only.
        if matches!(
            a,
            Action::Output {
                port: PORT_TABLE,
                ..
            }
        ) {
            return Err((of::ET_BAD_ACTION, BAC_BAD_OUT_PORT));
        }
        acts.push(action_text(a)?);
    }
    if acts.is_empty() {
        return Ok(Vec::new());
    }
    parse_flow(&format!("actions={}", acts.join(",")), &NumericPorts)
        .map(|r| r.actions)
        .map_err(|_| (of::ET_BAD_ACTION, BAC_BAD_ARGUMENT))
}

pub(super) fn hex(b: &[u8]) -> String {
    let mut s = String::from("0x");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

fn ip4(b: &[u8]) -> Option<String> {
    let a: [u8; 4] = b.try_into().ok()?;
    Some(std::net::Ipv4Addr::from(a).to_string())
}

fn ip6(b: &[u8]) -> Option<String> {
    let a: [u8; 16] = b.try_into().ok()?;
    Some(std::net::Ipv6Addr::from(a).to_string())
}

fn mac(b: &[u8]) -> Option<String> {
    let a: [u8; 6] = b.try_into().ok()?;
    Some(
        a.iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
    )
}

/// `value` or `value/mask`, each written by `f`.
fn masked(o: &Oxm<'_>, f: impl Fn(&[u8]) -> Option<String>) -> Option<String> {
    let v = f(o.value)?;
    Some(match o.mask {
        Some(m) => format!("{v}/{}", f(m)?),
        None => v,
    })
}

/// A match field in ovs-ofctl's words; `None`: not one tunlab matches.
pub fn match_text(o: &Oxm<'_>) -> Option<String> {
    let be = |b: &[u8]| -> Option<u64> {
        (b.len() <= 8).then(|| b.iter().fold(0u64, |a, &x| a << 8 | u64::from(x)))
    };
    let num = |b: &[u8]| be(b).map(|n| n.to_string());
    let exact = o.mask.is_none();
    let (name, val) = match (o.class, o.field) {
        (of::OXM_BASIC, oxm::IN_PORT) | (of::NXM_0, nxm0::IN_PORT) if exact => {
            let p = be(o.value)?;
            // 1.0's 16-bit reserved ports are 1.3's 32-bit ones.
            let p = if o.class == of::NXM_0 {
                u64::from(of::port_from10(p as u16))
            } else {
                p
            };
            ("in_port", p.to_string())
        }
        (of::NXM_0, nxm0::ETH_DST) => ("dl_dst", masked(o, mac)?),
        (of::NXM_0, nxm0::ETH_SRC) => ("dl_src", masked(o, mac)?),
        (of::NXM_0, nxm0::ETH_TYPE) if exact => ("dl_type", format!("{:#06x}", be(o.value)?)),
        (of::NXM_0, nxm0::VLAN_TCI) => {
            ("vlan_tci", masked(o, |b| Some(format!("{:#06x}", be(b)?)))?)
        }
        (of::NXM_0, nxm0::IP_TOS) if exact => ("nw_tos", num(o.value)?),
        (of::NXM_0, nxm0::IP_PROTO | nxm0::ARP_OP) if exact => ("nw_proto", num(o.value)?),
        (of::NXM_0, nxm0::IP_SRC | nxm0::ARP_SPA) => ("nw_src", masked(o, ip4)?),
        (of::NXM_0, nxm0::IP_DST | nxm0::ARP_TPA) => ("nw_dst", masked(o, ip4)?),
        (of::NXM_0, nxm0::TCP_SRC | nxm0::UDP_SRC) => ("tp_src", masked(o, num)?),
        (of::NXM_0, nxm0::TCP_DST | nxm0::UDP_DST) => ("tp_dst", masked(o, num)?),
        // 1.0 with NXM picks rules by cookie in the match.
        (of::NXM_1, nxm::IPV6_SRC) => ("ipv6_src", masked(o, ip6)?),
        (of::NXM_1, nxm::IPV6_DST) => ("ipv6_dst", masked(o, ip6)?),
        (of::OXM_BASIC, oxm::ETH_DST) => ("dl_dst", masked(o, mac)?),
        (of::OXM_BASIC, oxm::ETH_SRC) => ("dl_src", masked(o, mac)?),
        (of::OXM_BASIC, oxm::ETH_TYPE) if exact => ("dl_type", format!("{:#06x}", be(o.value)?)),
        // OFPVID_PRESENT (0x1000) and the VID; 0: no tag.
        (of::OXM_BASIC, oxm::VLAN_VID) => match o.mask {
            None => {
                let v = be(o.value)?;
                if v & VID_PRESENT == 0 {
                    ("vlan_tci", "0x0000/0x1fff".into())
                } else {
                    ("dl_vlan", (v & 0xfff).to_string())
                }
            }
            Some(m) => ("vlan_tci", format!("{:#06x}/{:#06x}", be(o.value)?, be(m)?)),
        },
        (of::OXM_BASIC, oxm::VLAN_PCP) if exact => ("dl_vlan_pcp", num(o.value)?),
        (of::OXM_BASIC, oxm::IP_DSCP) if exact => ("nw_tos", (be(o.value)? << 2).to_string()),
        (of::OXM_BASIC, oxm::IP_PROTO | oxm::ARP_OP) if exact => ("nw_proto", num(o.value)?),
        (of::OXM_BASIC, oxm::IPV4_SRC | oxm::ARP_SPA) => ("nw_src", masked(o, ip4)?),
        (of::OXM_BASIC, oxm::IPV4_DST | oxm::ARP_TPA) => ("nw_dst", masked(o, ip4)?),
        (of::OXM_BASIC, oxm::TCP_SRC | oxm::UDP_SRC | oxm::SCTP_SRC) => ("tp_src", masked(o, num)?),
        (of::OXM_BASIC, oxm::TCP_DST | oxm::UDP_DST | oxm::SCTP_DST) => ("tp_dst", masked(o, num)?),
        (of::OXM_BASIC, oxm::IPV6_SRC) => ("ipv6_src", masked(o, ip6)?),
        (of::OXM_BASIC, oxm::IPV6_DST) => ("ipv6_dst", masked(o, ip6)?),
        (of::OXM_BASIC, oxm::TUNNEL_ID) | (of::NXM_1, nxm::TUN_ID) => {
            ("tun_id", masked(o, |b| Some(hex(b)))?)
        }
        (of::NXM_1, nxm::TUN_IPV4_SRC) => ("tun_src", masked(o, ip4)?),
        (of::NXM_1, nxm::TUN_IPV4_DST) => ("tun_dst", masked(o, ip4)?),
        (of::NXM_1, nxm::TUN_IPV6_SRC) => ("tun_ipv6_src", masked(o, ip6)?),
        (of::NXM_1, nxm::TUN_IPV6_DST) => ("tun_ipv6_dst", masked(o, ip6)?),
        (of::NXM_1, f) if (nxm::TUN_METADATA0..nxm::TUN_METADATA0 + 8).contains(&f) => {
            return Some(format!(
                "tun_metadata{}={}",
                f - nxm::TUN_METADATA0,
                masked(o, |b| Some(hex(b)))?
            ));
        }
        _ => return None,
    };
    Some(format!("{name}={val}"))
}

/// An action in ovs-ofctl's words, or the error that refuses it.
pub fn action_text(a: &Action<'_>) -> Result<String, (u16, u16)> {
    let bad_type = (of::ET_BAD_ACTION, of::BAC_BAD_TYPE);
    let bad_len = (of::ET_BAD_ACTION, of::BAC_BAD_LEN);
    Ok(match *a {
        Action::Output { port, max_len } => match port {
            PORT_NORMAL => "normal".into(),
            PORT_IN_PORT => "in_port".into(),
            PORT_FLOOD | PORT_ALL => "flood".into(),
            PORT_CONTROLLER => format!("controller:{max_len}"),
            // A packet_out's "through the flow table".
            PORT_TABLE => "resubmit(,0)".into(),
            p if p < 0xffff_ff00 => format!("output:{p}"),
            _ => return Err((of::ET_BAD_ACTION, BAC_BAD_OUT_PORT)),
        },
        Action::PushVlan { ethertype } => format!("push_vlan:{ethertype:#06x}"),
        Action::PopVlan => "pop_vlan".into(),
        Action::NxResubmit { port, table } => {
            let port = if port == OF10_IN_PORT {
                String::new()
            } else {
                port.to_string()
            };
            let table = if table == 0xff {
                String::new()
            } else {
                table.to_string()
            };
            format!("resubmit({port},{table})")
        }
        Action::SetField(o) if o.mask.is_none() => match (o.class, o.field) {
            (of::OXM_BASIC, oxm::VLAN_VID) if o.value.len() == 2 => {
                format!(
                    "mod_vlan_vid:{}",
                    u16::from_be_bytes([o.value[0], o.value[1]]) & 0xfff
                )
            }
            (of::OXM_BASIC, oxm::VLAN_PCP) if o.value.len() == 1 => {
                format!("mod_vlan_pcp:{}", o.value[0] & 7)
            }
            (of::NXM_1, nxm::TUN_IPV4_SRC | nxm::TUN_IPV4_DST) => format!(
                "set_field:{}->{}",
                ip4(o.value).ok_or(bad_len)?,
                if o.field == nxm::TUN_IPV4_SRC {
                    "tun_src"
                } else {
                    "tun_dst"
                }
            ),
            (of::NXM_1, nxm::TUN_IPV6_SRC | nxm::TUN_IPV6_DST) => format!(
                "set_field:{}->{}",
                ip6(o.value).ok_or(bad_len)?,
                if o.field == nxm::TUN_IPV6_SRC {
                    "tun_ipv6_src"
                } else {
                    "tun_ipv6_dst"
                }
            ),
            (of::OXM_BASIC, oxm::TUNNEL_ID) | (of::NXM_1, nxm::TUN_ID) => {
                format!("set_field:{}->tun_id", hex(o.value))
            }
            (of::NXM_1, f) if (nxm::TUN_METADATA0..nxm::TUN_METADATA0 + 8).contains(&f) => {
                if o.value.len() > 4 {
                    return Err(bad_len);
                }
                format!(
                    "set_field:{}->tun_metadata{}",
                    hex(o.value),
                    f - nxm::TUN_METADATA0
                )
            }
            _ => return Err(bad_type),
        },
        _ => return Err(bad_type),
    })
}
