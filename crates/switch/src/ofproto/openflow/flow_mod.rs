//! OpenFlow's flow_mod as a change to tunlab's flow table: its match read
//! into the typed match (from OXM or NXM fields by [`nx_match`], or from
//! a 1.0 `ofp_match`), its actions, and the command as a typed add,
//! modify or delete; or the OpenFlow error that refuses it.
//!
//! [`nx_match`]: super::nx_match

use super::nx_match::pull_match;
use super::{FF_SEND_FLOW_REM, FMFC_BAD_FLAGS, FMFC_BAD_TABLE_ID, MAX_TABLE};
use tunlab_dp::field::{self, Prereq};
use tunlab_dp::key::f;
use tunlab_dp::{Action as Act, FlowKey, FlowRule, Match, Selector};
use tunlab_wire::openflow::{self as of, FlowMod, Message};

/// A 1.0 `ofp_match` as a typed match; a field without its prerequisite
/// is a bad match.
pub fn match10(m10: &of::Match10) -> Result<Match, (u16, u16)> {
    let mut m = Match::default();
    let mut prereqs = Vec::new();
    let mut set = |fl: &'static field::Field, v: u128, mask: Option<u128>| {
        fl.set_match(&mut m.value, &mut m.mask, v, mask.unwrap_or(u128::MAX));
        prereqs.push(fl.prereq);
    };
    let mac = |a: [u8; 6]| u128::from(FlowKey::mac(a));
    let prefix = |len: u8| u128::from(u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0));
    if let Some(p) = m10.in_port {
        set(&field::IN_PORT, u128::from(of::port_from10(p)), None);
    }
    if let Some(a) = m10.dl_src {
        set(&field::ETH_SRC, mac(a), None);
    }
    if let Some(a) = m10.dl_dst {
        set(&field::ETH_DST, mac(a), None);
    }
    match m10.dl_vlan {
        Some(0xffff) => set(&field::VLAN_TCI, 0, Some(0x1fff)),
        Some(v) => set(&field::VLAN_VID, 0x1000 | u128::from(v & 0xfff), None),
        None => {}
    }
    if let Some(e) = m10.dl_type {
        set(&field::ETH_TYPE, u128::from(e), None);
    }
    if let Some(v) = m10.nw_tos {
        set(&field::NW_TOS, u128::from(v & 0xfc), None);
    }
    if let Some(v) = m10.nw_proto {
        set(&field::NW_PROTO, u128::from(v), None);
    }
    if let Some((a, len)) = m10.nw_src {
        set(
            &field::IP_SRC,
            u128::from(u32::from_be_bytes(a)),
            Some(prefix(len)),
        );
    }
    if let Some((a, len)) = m10.nw_dst {
        set(
            &field::IP_DST,
            u128::from(u32::from_be_bytes(a)),
            Some(prefix(len)),
        );
    }
    if let Some(p) = m10.tp_src {
        set(&field::TCP_SRC, u128::from(p), None);
    }
    if let Some(p) = m10.tp_dst {
        set(&field::TCP_DST, u128::from(p), None);
    }
    if let Some(p) = m10.dl_vlan_pcp {
        // A tag with this priority, whatever its VID matched.
        let (v, mk) = (m.value.get(f::VLAN_TCI), m.mask.get(f::VLAN_TCI));
        m.value.set(
            f::VLAN_TCI,
            (v & 0x0fff) | 0x1000 | (u64::from(p & 7) << 13),
        );
        m.mask.set(f::VLAN_TCI, (mk & 0x0fff) | 0xf000);
    }
    // 1.0's IP fields also match ARP, its transport ports UDP and SCTP.
    let lenient = |p: &Prereq| match p {
        Prereq::Ipv4 => Prereq::Ipv4OrArp,
        Prereq::IpAny => Prereq::IpOrArp,
        Prereq::Tcp => Prereq::L4,
        p => *p,
    };
    if prereqs.iter().any(|p| !lenient(p).met(&m.value, &m.mask)) {
        return Err((of::ET_BAD_MATCH, of::BMC_BAD_PREREQ));
    }
    Ok(m)
}

/// A change to the flow table, as a flow_mod (or `tunlab ctl`) asks it.
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
    let pulled = pull_match(&fm.matches)?;
    flow_change_with(fm, pulled.m, pulled.cookie)
}

/// [`flow_change`] for a flow_mod whose match is already read (a 1.0
/// `ofp_match`, [`match10`]), with the cookie its match picks by, if any.
pub fn flow_change_with(
    fm: &FlowMod<'_>,
    m: Match,
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
                actions: flow_mod_actions(fm, &m)?,
            }))
        }
        of::FC_MODIFY | of::FC_MODIFY_STRICT => Ok(FlowChange::Modify {
            sel,
            actions: flow_mod_actions(fm, &m)?,
        }),
        of::FC_DELETE | of::FC_DELETE_STRICT => Ok(FlowChange::Delete(sel)),
        _ => Err((of::ET_FLOW_MOD_FAILED, of::FMFC_BAD_COMMAND)),
    }
}

/// A flow_mod's actions as the rule's (none: drop), held to `m`'s
/// prerequisites.
fn flow_mod_actions(fm: &FlowMod<'_>, m: &Match) -> Result<Vec<Act>, (u16, u16)> {
    super::actions::from_wire(&fm.actions, Some(m), false)
}

/// The change a FLOW_MOD of version `v` asks for: one flow table, two
/// doors (a flow_mod becomes the same typed change a `tunlab ctl`
/// request makes).
pub fn flow_mod_change(v: u8, m: &Message<'_>) -> Result<FlowChange, (u16, u16)> {
    if v == of::OF10 {
        // 1.0's fixed match.
        of::parse_flow_mod10(m)
            .map_err(|_| (of::ET_BAD_REQUEST, of::BRC_BAD_LEN))
            .and_then(|(fm, m10)| match10(&m10).and_then(|m| flow_change_with(&fm, m, None)))
    } else {
        of::parse_flow_mod(m)
            .map_err(|_| (of::ET_BAD_REQUEST, of::BRC_BAD_LEN))
            .and_then(|fm| flow_change(&fm))
    }
}
