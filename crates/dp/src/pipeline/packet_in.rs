//! The `controller` action's packet-ins, and `pause`: a translation
//! frozen where it stands, handed to the controller as a continuation and
//! carried on from there when it comes back (OVS's freezing, as in
//! `ofproto-dpif-xlate.c`, and `xlate_resume`).

use super::fields::Frame;
use super::{DropReason, Op, Origin, PacketInReason, Pipeline};
use crate::classifier::Classifier;
use crate::flow::Action;
use crate::key::FlowKey;

/// What a `controller` action sends: the packet as it is then (`max_len`
/// is the action's, which Open vSwitch, buffering nothing, does not cut
/// the packet to), which rule sent it (`table`, `cookie`) and why, to the
/// controllers with id `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn {
    pub max_len: u16,
    pub table: u8,
    pub cookie: u64,
    pub reason: PacketInReason,
    pub id: u16,
    pub userdata: Vec<u8>,
    /// The flow as the pipeline had it: its in_port, tunnel, metadata and
    /// registers are the packet_in's metadata (OVS's `flow_metadata`).
    pub key: FlowKey,
    /// For `controller(...,pause)`: the rest of the translation, which
    /// NXT_RESUME hands back.
    pub continuation: Option<Continuation>,
}

/// A translation frozen at a `pause` (OVS's frozen state): the actions
/// still to run, innermost rule's first, in groups that each run as the
/// rule of `table` and `cookie` would (OVS's `unroll_xlate`: a
/// `controller` action or a `resubmit` to the current table after a thaw
/// needs to know them), and the field stack.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Continuation {
    pub groups: Vec<FrozenActions>,
    /// Bottom first.
    pub stack: Vec<u128>,
}

/// One group of a [`Continuation`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FrozenActions {
    pub table: u8,
    pub cookie: u64,
    pub actions: Vec<Action>,
}

/// A `pause` met: the translation unwinds, each level adding the actions
/// it had left, until the top (or a `clone`) sends the packet_in.
#[derive(Debug, Clone)]
pub(super) struct Freezing {
    pub(super) pin: Box<PacketIn>,
    pub(super) groups: Vec<FrozenActions>,
    /// The table and cookie of the last group begun for a rule, if any.
    pub(super) unrolled: Option<(u8, u64)>,
}

impl Pipeline {
    /// Carry on a translation that a `controller(...,pause)` froze, for
    /// the packet `key` describes (as the controller sent it back, with
    /// the metadata it had then): OVS's `xlate_resume`. `ops` receives
    /// the steps; rules count only through resubmits.
    pub fn resume(
        &mut self,
        c: &mut Classifier,
        key: &FlowKey,
        cont: &Continuation,
        bytes: u64,
        now: u64,
        ops: &mut Vec<Op>,
    ) -> Result<(), DropReason> {
        ops.clear();
        let mut fr = Frame::new(key);
        fr.set_stack(cont.stack.clone());
        self.stopped = false;
        self.freezing = None;
        self.resubmits = 0;
        self.first_lookup_is_packets = false;
        for (n, g) in cont.groups.iter().enumerate() {
            let from = Origin {
                table: g.table,
                cookie: g.cookie,
                reason: PacketInReason::Action,
            };
            self.run_actions(c, &mut fr, from, bytes, now, ops, 0, &|_, i| {
                g.actions.get(i).cloned()
            })?;
            if self.stopped {
                break;
            }
            if let Some(fz) = self.freezing.as_mut() {
                // Paused again: the groups not yet run are frozen too.
                fz.groups.extend(cont.groups[n + 1..].iter().cloned());
                fz.unrolled = fz.groups.last().map(|g| (g.table, g.cookie));
                break;
            }
        }
        self.finish_freezing(&fr, ops);
        self.sends(ops)
    }

    /// Freeze `rest`, the actions left of a rule of `from` (OVS's
    /// `freeze_unroll_actions`): those that would read the rule's table or
    /// cookie are put in a group that says them.
    pub(super) fn freeze_rest(&mut self, from: Origin, rest: Vec<Action>) {
        let Some(fz) = self.freezing.as_mut() else {
            return;
        };
        // OVS sends a paused packet_in with the cookie of the level where
        // the freezing finishes (the outermost rule's).
        fz.pin.cookie = from.cookie;
        let here = (from.table, from.cookie);
        for a in rest {
            let reads_rule = matches!(
                a,
                Action::Output(_)
                    | Action::InPort
                    | Action::Controller { .. }
                    | Action::DecTtl
                    | Action::DecTtlIds(_)
                    | Action::Resubmit { table: None, .. }
            );
            if reads_rule && fz.unrolled != Some(here) {
                fz.unrolled = Some(here);
                fz.groups.push(FrozenActions {
                    table: from.table,
                    cookie: from.cookie,
                    actions: Vec::new(),
                });
            }
            if fz.groups.is_empty() {
                fz.groups.push(FrozenActions::default());
            }
            if let Some(g) = fz.groups.last_mut() {
                g.actions.push(a);
            }
        }
    }

    /// The freezing done: its packet_in, with what was frozen, is the
    /// next step.
    pub(super) fn finish_freezing(&mut self, fr: &Frame, ops: &mut Vec<Op>) {
        let Some(fz) = self.freezing.take() else {
            return;
        };
        let mut pin = fz.pin;
        pin.key = fr.key;
        pin.continuation = Some(Continuation {
            groups: fz.groups,
            stack: fr.stack().to_vec(),
        });
        ops.push(Op::Controller(pin));
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{classifier, key};
    use super::super::*;
    use crate::flow::PortNo;

    fn controller_op(ops: &[Op]) -> &PacketIn {
        match ops.iter().find(|o| matches!(o, Op::Controller(_))) {
            Some(Op::Controller(pin)) => pin,
            _ => panic!("no packet_in in {ops:?}"),
        }
    }

    /// `controller(...,pause)` deep in resubmits freezes the rest of every
    /// level, innermost first, the outer rule's output in a group of its
    /// own (it reads the rule: OVS's unroll_xlate), the inner rule's
    /// resubmit to a named table not; the packet_in goes as from table 0
    /// with the outer rule's cookie, carrying the registers. Resumed with
    /// the metadata it carried, the packet goes on as if never paused.
    #[test]
    fn pause_freezes_every_level_and_resume_carries_on() {
        let mut c = classifier(&[
            "cookie=0x10,in_port=1 actions=set_field:5->reg0,push:NXM_NX_REG0[],resubmit(,1),output:3",
            "cookie=0x11,table=1 actions=controller(userdata=01.02,pause),set_field:7->reg1,resubmit(,2)",
            "cookie=0x12,table=2,reg1=7 actions=output:2",
        ]);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        let k = key(1, None, 1, 2);
        assert_eq!(p.process(&mut c, &k, 64, 0, &mut ops), Ok(()));
        assert_eq!(ops.len(), 1, "{ops:?}");
        let pin = controller_op(&ops);
        assert_eq!((pin.table, pin.cookie), (0, 0x10));
        assert_eq!(pin.userdata, [1, 2]);
        assert_eq!(pin.key.get(crate::key::reg(0)), 5);
        let cont = pin.continuation.clone().expect("a continuation");
        assert_eq!(cont.stack, [5]);
        assert_eq!(cont.groups.len(), 2, "{cont:?}");
        assert_eq!((cont.groups[0].table, cont.groups[0].cookie), (0, 0));
        assert_eq!(cont.groups[0].actions.len(), 2);
        assert_eq!((cont.groups[1].table, cont.groups[1].cookie), (0, 0x10));
        assert_eq!(cont.groups[1].actions, [Action::Output(3)]);

        let resumed = pin.key;
        assert_eq!(p.resume(&mut c, &resumed, &cont, 64, 0, &mut ops), Ok(()));
        let outs: Vec<PortNo> = ops
            .iter()
            .filter_map(|o| match o {
                Op::Output { port, .. } => Some(*port),
                _ => None,
            })
            .collect();
        assert_eq!(outs, [2, 3]);
    }

    /// A pause inside a clone freezes the clone's rest only; the original
    /// packet carries on. A controller action without pause sends with
    /// its own rule's table and cookie, and no continuation.
    #[test]
    fn pause_in_a_clone_freezes_the_clone_only() {
        let mut c = classifier(&[
            "cookie=0x20,in_port=1 actions=clone(controller(pause),output:2),output:3",
            "cookie=0x21,in_port=4 actions=resubmit(,5),output:3",
            "cookie=0x22,table=5 actions=controller(id=7,max_len=40)",
        ]);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        assert_eq!(
            p.process(&mut c, &key(1, None, 1, 2), 64, 0, &mut ops),
            Ok(())
        );
        assert_eq!(ops.len(), 2, "{ops:?}");
        let cont = controller_op(&ops).continuation.clone().unwrap();
        assert_eq!(cont.groups.len(), 1);
        assert_eq!(cont.groups[0].actions, [Action::Output(2)]);
        assert_eq!(cont.groups[0].cookie, 0x20);
        assert!(matches!(ops[1], Op::Output { port: 3, .. }));

        assert_eq!(
            p.process(&mut c, &key(4, None, 1, 2), 64, 0, &mut ops),
            Ok(())
        );
        let pin = controller_op(&ops);
        assert_eq!(
            (pin.table, pin.cookie, pin.id, pin.max_len),
            (5, 0x22, 7, 40)
        );
        assert!(pin.continuation.is_none());
    }

    /// Paused again while resumed: what was not yet run is frozen anew,
    /// behind what the second pause left.
    #[test]
    fn a_second_pause_freezes_what_is_left() {
        let mut c = classifier(&["table=3 actions=controller(pause),output:4"]);
        let cont = Continuation {
            groups: vec![
                FrozenActions {
                    table: 0,
                    cookie: 0,
                    actions: vec![Action::Resubmit {
                        port: None,
                        table: Some(3),
                    }],
                },
                FrozenActions {
                    table: 1,
                    cookie: 9,
                    actions: vec![Action::Output(5)],
                },
            ],
            stack: vec![],
        };
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        assert_eq!(
            p.resume(&mut c, &key(1, None, 1, 2), &cont, 64, 0, &mut ops),
            Ok(())
        );
        let again = controller_op(&ops).continuation.clone().unwrap();
        let flat: Vec<(u8, u64, Vec<Action>)> = again
            .groups
            .into_iter()
            .map(|g| (g.table, g.cookie, g.actions))
            .collect();
        assert_eq!(
            flat,
            [
                (3, 0, vec![Action::Output(4)]),
                (1, 9, vec![Action::Output(5)]),
            ]
        );
    }
}
