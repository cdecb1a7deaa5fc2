//! OpenFlow bundles (1.4+, § 7.3.9): a connection's flow_mods gathered
//! under a bundle id, each checked as it is added (an error for it then,
//! naming it by its xid), and made all at once on commit: every worker
//! takes the whole bundle in one step, so no packet sees part of it.
//! ovn-controller sends every change this way (atomic, ordered), and
//! `ovs-ofctl --bundle` does.

use super::{refuse, reply, Conn, Next};
use crate::api::FlowChange;
use crate::ofproto::openflow::flow_mod::flow_mod_change;
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
struct Bundle {
    flags: u16,
    closed: bool,
    /// A message was refused when added: the commit fails whole.
    spoiled: bool,
    changes: Vec<FlowChange>,
}

/// A connection's open bundles, by id: the state machine of § 7.3.9,
/// apart from the connection so that it can be driven in tests. Each
/// refusal is a BUNDLE_FAILED code.
#[derive(Debug, Default)]
pub(super) struct Bundles(HashMap<u32, Bundle>);

impl Bundles {
    pub fn new() -> Bundles {
        Bundles::default()
    }

    fn open(&mut self, id: u32, flags: u16) -> Result<(), u16> {
        if self.0.contains_key(&id) {
            return Err(of::BFC_BUNDLE_EXIST);
        }
        if self.0.len() >= MAX_BUNDLES {
            return Err(of::BFC_OUT_OF_BUNDLES);
        }
        self.0.insert(
            id,
            Bundle {
                flags,
                ..Bundle::default()
            },
        );
        Ok(())
    }

    fn close(&mut self, id: u32, flags: u16) -> Result<(), u16> {
        match self.0.get_mut(&id) {
            None => Err(of::BFC_BAD_ID),
            Some(b) if b.closed => Err(of::BFC_BUNDLE_CLOSED),
            Some(b) if b.flags != flags => Err(of::BFC_BAD_FLAGS),
            Some(b) => {
                b.closed = true;
                Ok(())
            }
        }
    }

    /// The bundle a message may be added to (opened now if it is not).
    fn addable(&mut self, id: u32, flags: u16) -> Result<&mut Bundle, u16> {
        if !self.0.contains_key(&id) {
            self.open(id, flags)?;
        }
        match self.0.get_mut(&id) {
            Some(b) if b.closed => Err(of::BFC_BUNDLE_CLOSED),
            Some(b) if b.flags != flags => Err(of::BFC_BAD_FLAGS),
            Some(b) if b.changes.len() >= MAX_MESSAGES => Err(of::BFC_MSG_TOO_MANY),
            Some(b) => Ok(b),
            None => Err(of::BFC_BAD_ID),
        }
    }

    /// A checked change, or the refusal of one (which spoils the bundle).
    fn add(&mut self, id: u32, flags: u16, change: Option<FlowChange>) -> Result<(), u16> {
        let b = self.addable(id, flags)?;
        match change {
            Some(ch) => b.changes.push(ch),
            None => b.spoiled = true,
        }
        Ok(())
    }

    /// The bundle's changes, to be made all at once; it is gone either way.
    fn commit(&mut self, id: u32, flags: u16) -> Result<Vec<FlowChange>, u16> {
        let b = self.0.remove(&id).ok_or(of::BFC_BAD_ID)?;
        if b.flags != flags {
            return Err(of::BFC_BAD_FLAGS);
        }
        if b.spoiled {
            return Err(of::BFC_MSG_FAILED);
        }
        Ok(b.changes)
    }

    fn discard(&mut self, id: u32) -> Result<(), u16> {
        self.0.remove(&id).map(drop).ok_or(of::BFC_BAD_ID)
    }
}

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
    let done = match bc.typ {
        of::BCT_OPEN_REQUEST => c
            .bundles
            .open(bc.bundle_id, bc.flags)
            .map(|()| of::BCT_OPEN_REPLY),
        of::BCT_CLOSE_REQUEST => c
            .bundles
            .close(bc.bundle_id, bc.flags)
            .map(|()| of::BCT_CLOSE_REPLY),
        of::BCT_COMMIT_REQUEST => c
            .bundles
            .commit(bc.bundle_id, bc.flags)
            .and_then(|changes| sw.change_flows(changes).map_err(|_| of::BFC_MSG_FAILED))
            .map(|()| of::BCT_COMMIT_REPLY),
        of::BCT_DISCARD_REQUEST => c
            .bundles
            .discard(bc.bundle_id)
            .map(|()| of::BCT_DISCARD_REPLY),
        _ => Err(of::BFC_BAD_TYPE),
    };
    match done {
        Ok(typ) => answer(c, typ),
        Err(code) => failed(c, v, m, code),
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
    let change = flow_mod_change(v, &inner);
    match c
        .bundles
        .add(ba.bundle_id, ba.flags, change.as_ref().ok().cloned())
    {
        Err(code) => failed(c, v, m, code),
        Ok(()) => match change {
            Ok(_) => Next::Keep,
            Err(e) => refuse(c, v, &inner, e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tunlab_dp::{parse_flow, Classifier, NumericPorts};

    fn add(i: u16) -> FlowChange {
        FlowChange::Add(
            parse_flow(
                &format!("priority={i},in_port={i} actions=output:1"),
                &NumericPorts,
            )
            .unwrap(),
        )
    }

    fn apply(c: &mut Classifier, changes: &[FlowChange]) {
        for ch in changes {
            if let FlowChange::Add(r) = ch {
                c.add(r.clone(), 0);
            }
        }
    }

    proptest! {
        /// A bundle either applies whole or not at all: any message
        /// refused on the way spoils it, and its commit gives nothing;
        /// otherwise the commit gives every change, in order.
        #[test]
        fn a_bundle_applies_whole_or_not_at_all(
            msgs in proptest::collection::vec(proptest::option::weighted(0.9, 1u16..500), 0..40),
        ) {
            let mut b = Bundles::new();
            let flags = of::BF_ATOMIC | of::BF_ORDERED;
            prop_assert_eq!(b.open(7, flags), Ok(()));
            for m in &msgs {
                prop_assert_eq!(b.add(7, flags, m.map(add)), Ok(()));
            }
            let mut c = Classifier::new();
            apply(&mut c, &[add(999)]);
            match b.commit(7, flags) {
                Ok(changes) => {
                    prop_assert!(msgs.iter().all(Option::is_some));
                    let want: Vec<FlowChange> = msgs.iter().flatten().map(|&i| add(i)).collect();
                    prop_assert_eq!(&changes, &want);
                    apply(&mut c, &changes);
                    let distinct: std::collections::BTreeSet<_> = msgs.iter().flatten().collect();
                    prop_assert_eq!(c.len(), 1 + distinct.len());
                }
                Err(code) => {
                    prop_assert_eq!(code, of::BFC_MSG_FAILED);
                    prop_assert!(msgs.iter().any(Option::is_none));
                    prop_assert_eq!(c.len(), 1, "nothing of it");
                }
            }
            // The bundle is gone either way.
            prop_assert_eq!(b.commit(7, flags), Err(of::BFC_BAD_ID));
        }
    }

    #[test]
    fn the_state_machine_refuses_as_openflow_says() {
        let mut b = Bundles::new();
        assert_eq!(b.open(1, 0), Ok(()));
        assert_eq!(b.open(1, 0), Err(of::BFC_BUNDLE_EXIST));
        assert_eq!(b.close(1, of::BF_ATOMIC), Err(of::BFC_BAD_FLAGS));
        assert_eq!(b.close(1, 0), Ok(()));
        assert_eq!(b.add(1, 0, Some(add(1))), Err(of::BFC_BUNDLE_CLOSED));
        assert_eq!(b.close(2, 0), Err(of::BFC_BAD_ID));
        // An add opens a bundle that is not open.
        assert_eq!(b.add(3, 0, Some(add(3))), Ok(()));
        assert_eq!(b.commit(3, of::BF_ORDERED), Err(of::BFC_BAD_FLAGS));
        assert_eq!(b.discard(1), Ok(()));
        assert_eq!(b.discard(1), Err(of::BFC_BAD_ID));
        for i in 0..MAX_BUNDLES as u32 {
            let _ = b.open(100 + i, 0);
        }
        assert_eq!(b.open(5000, 0), Err(of::BFC_OUT_OF_BUNDLES));
    }
}
