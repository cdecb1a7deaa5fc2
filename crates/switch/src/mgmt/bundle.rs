//! OpenFlow bundles (1.4+, § 7.3.9): a connection's flow_mods gathered
//! under a bundle id, each checked as it is added (an error for it then,
//! naming it by its xid), and made all at once on commit: every worker
//! takes the whole bundle in one step, so no packet sees part of it.
//! ovn-controller sends every change this way (atomic, ordered), and
//! `ovs-ofctl --bundle` does.

use super::handle::{flow_mod_change, refuse, reply};
use super::{Conn, Next};
use crate::api::FlowChange;
use crate::workers::Switch;
use std::collections::HashMap;
use tunlab_wire::openflow::{self as of, Message};

/// Bundles a connection may hold open at once, and messages in one (OVS
/// has its own limits; these keep a client from growing the switch
/// without bound).
const MAX_BUNDLES: usize = 64;
const MAX_MESSAGES: usize = 1 << 17;

/// One open bundle.
#[derive(Debug, Default)]
pub(super) struct Bundle {
    flags: u16,
    closed: bool,
    /// A message was refused when added: the commit fails whole.
    spoiled: bool,
    changes: Vec<FlowChange>,
}

/// A connection's open bundles, by id.
pub(super) type Bundles = HashMap<u32, Bundle>;

fn failed(c: &mut Conn, v: u8, m: &Message<'_>, code: u16) -> Next {
    refuse(c, v, m, (of::ET_BUNDLE_FAILED, code))
}

/// OFPT_BUNDLE_CONTROL: open, close, commit or discard.
pub(super) fn control(c: &mut Conn, v: u8, m: &Message<'_>, sw: &mut Switch) -> Next {
    let Ok(bc) = of::parse_bundle_control(m) else {
        return refuse(c, v, m, (of::ET_BAD_REQUEST, of::BRC_BAD_LEN));
    };
    let answer = |c: &mut Conn, typ| {
        reply(
            c,
            of::bundle_control_reply(v, m.xid(), bc.bundle_id, typ, 0),
        )
    };
    if bc.flags & !(of::BF_ATOMIC | of::BF_ORDERED) != 0 {
        return failed(c, v, m, of::BFC_BAD_FLAGS);
    }
    match bc.typ {
        of::BCT_OPEN_REQUEST => {
            if c.bundles.contains_key(&bc.bundle_id) {
                return failed(c, v, m, of::BFC_BUNDLE_EXIST);
            }
            if c.bundles.len() >= MAX_BUNDLES {
                return failed(c, v, m, of::BFC_OUT_OF_BUNDLES);
            }
            c.bundles.insert(
                bc.bundle_id,
                Bundle {
                    flags: bc.flags,
                    ..Bundle::default()
                },
            );
            answer(c, of::BCT_OPEN_REPLY)
        }
        of::BCT_CLOSE_REQUEST => match c.bundles.get_mut(&bc.bundle_id) {
            None => failed(c, v, m, of::BFC_BAD_ID),
            Some(b) if b.closed => failed(c, v, m, of::BFC_BUNDLE_CLOSED),
            Some(b) if b.flags != bc.flags => failed(c, v, m, of::BFC_BAD_FLAGS),
            Some(b) => {
                b.closed = true;
                answer(c, of::BCT_CLOSE_REPLY)
            }
        },
        of::BCT_COMMIT_REQUEST => {
            let Some(b) = c.bundles.remove(&bc.bundle_id) else {
                return failed(c, v, m, of::BFC_BAD_ID);
            };
            if b.flags != bc.flags {
                return failed(c, v, m, of::BFC_BAD_FLAGS);
            }
            if b.spoiled {
                return failed(c, v, m, of::BFC_MSG_FAILED);
            }
            match sw.change_flows(b.changes) {
                Ok(()) => answer(c, of::BCT_COMMIT_REPLY),
                Err(_) => failed(c, v, m, of::BFC_MSG_FAILED),
            }
        }
        of::BCT_DISCARD_REQUEST => match c.bundles.remove(&bc.bundle_id) {
            Some(_) => answer(c, of::BCT_DISCARD_REPLY),
            None => failed(c, v, m, of::BFC_BAD_ID),
        },
        _ => failed(c, v, m, of::BFC_BAD_TYPE),
    }
}

/// OFPT_BUNDLE_ADD_MESSAGE: a message for a bundle (opened now if it is
/// not open: § 7.3.9.4), checked now and kept for the commit. A message
/// that does not check out is refused with its own error and xid, and
/// spoils the bundle: its commit fails and changes nothing.
pub(super) fn add(c: &mut Conn, v: u8, m: &Message<'_>) -> Next {
    let Ok(ba) = of::parse_bundle_add(m) else {
        return refuse(c, v, m, (of::ET_BAD_REQUEST, of::BRC_BAD_LEN));
    };
    let Ok(inner) = Message::new_checked(ba.message) else {
        return failed(c, v, m, of::BFC_MSG_BAD_LEN);
    };
    if inner.xid() != m.xid() {
        return failed(c, v, m, of::BFC_MSG_BAD_XID);
    }
    if inner.version() != v || inner.msg_type() != of::FLOW_MOD {
        // Group, port and meter changes are not built into bundles.
        return failed(c, v, m, of::BFC_MSG_UNSUP);
    }
    match c.bundles.get(&ba.bundle_id) {
        Some(b) if b.closed => return failed(c, v, m, of::BFC_BUNDLE_CLOSED),
        Some(b) if b.flags != ba.flags => return failed(c, v, m, of::BFC_BAD_FLAGS),
        Some(b) if b.changes.len() >= MAX_MESSAGES => return failed(c, v, m, of::BFC_MSG_TOO_MANY),
        Some(_) => {}
        None if c.bundles.len() >= MAX_BUNDLES => return failed(c, v, m, of::BFC_OUT_OF_BUNDLES),
        None => {
            c.bundles.insert(
                ba.bundle_id,
                Bundle {
                    flags: ba.flags,
                    ..Bundle::default()
                },
            );
        }
    }
    match flow_mod_change(v, &inner) {
        Ok(change) => {
            if let Some(b) = c.bundles.get_mut(&ba.bundle_id) {
                b.changes.push(change);
            }
            Next::Keep
        }
        Err(e) => {
            if let Some(b) = c.bundles.get_mut(&ba.bundle_id) {
                b.spoiled = true;
            }
            refuse(c, v, &inner, e)
        }
    }
}
