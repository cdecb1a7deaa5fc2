//! Running a packet through the flow tables: from its flow key to the list
//! of things to do to it (push/pop tags, set tunnel fields, output).
//!
//! Actions are applied in order, as in OpenFlow: each `output` sees the
//! packet as the actions before it left it, so the result is a sequence of
//! [`Op`]s that the switch replays on the buffer. `set_field` on tunnel
//! fields changes what the next output to a tunnel port uses. `normal` is a
//! MAC-learning bridge. Nothing here reads a clock: callers pass `now`.

use crate::classifier::{Classifier, ExactMatchCache};
use crate::field::Field;
pub use crate::flow::PacketInReason;
use crate::flow::{Action, Match, PortNo};

mod conntrack;
mod fields;
mod packet_in;
mod trace;
use crate::key::{f, FieldPos, FlowKey, PACKET_WORDS, TUN_METADATA_FIELDS};
pub use conntrack::{CtOp, Recirc};
use fields::Frame;
use packet_in::Freezing;
pub use packet_in::{Continuation, FrozenActions, PacketIn};
use std::collections::HashMap;
use std::net::IpAddr;
pub use trace::{datapath_actions, parse_ct_state, Trace};

/// ct_state's "tracked" bit.
const CS_TRACKED: u64 = 0x20;

/// OVS's limits: on resubmit depth (a resubmit to the same or an earlier
/// table nests), and on table lookups in one translation.
pub const MAX_RESUBMIT_DEPTH: usize = 64;
pub const MAX_RESUBMITS: usize = MAX_RESUBMIT_DEPTH * MAX_RESUBMIT_DEPTH;

/// Tunnel fields set by actions for the next output to a tunnel port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TunnelSet {
    pub dst: Option<IpAddr>,
    pub src: Option<IpAddr>,
    pub id: Option<u64>,
    pub metadata: [Option<u32>; TUN_METADATA_FIELDS],
}

/// One step for the switch to apply to the packet, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    PushVlan(u16),
    PopVlan,
    SetVlanVid(u16),
    SetVlanPcp(u8),
    /// Rewrite one header field to `value` (the field's own terms, as
    /// [`Field::get`] gives it): what set_field, move, pop and dec_ttl
    /// made of the packet, committed before the packet goes anywhere
    /// (OVS's datapath `set()`).
    SetField {
        field: &'static Field,
        value: u128,
    },
    /// Send the packet as it is now to `port`; tunnel ports use `tun`.
    Output {
        port: PortNo,
        tun: TunnelSet,
    },
    /// `normal` found no learned port, or `flood`: every port but
    /// `except`.
    Flood {
        except: PortNo,
    },
    /// The packet as it is now to the OpenFlow controllers.
    Controller(Box<PacketIn>),
    /// Through connection tracking (the datapath's `ct()`); only a trace
    /// makes these until the datapaths track connections.
    Ct(Box<CtOp>),
    /// A copy of the packet goes through the tables again, from where
    /// recirculation `id` was frozen.
    Recirc(u32),
    /// The datapath forgets the packet's conntrack state (`ct_clear` on a
    /// tracked packet).
    CtClear,
}

/// Why a packet was dropped, for counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// No rule matched (the table-miss behaviour is drop).
    NoRule,
    /// The matching rule's actions were `drop` or produced no output.
    Action,
    /// More than [`MAX_RESUBMIT_DEPTH`] nested resubmits.
    ResubmitLoop,
    /// `pop_vlan` on an untagged packet, `mod_vlan_vid` without a tag.
    NoVlan,
    /// `dec_ttl` on a packet whose TTL was 1 or 0.
    TtlExpired,
    /// A `clone`'s actions changed the packet's VLAN tags, which the
    /// steps after it cannot undo.
    CloneChangedVlan,
    /// A `ct` action: the datapaths do not track connections yet (issue
    /// 45); `tunlab ctl trace` follows it.
    ConntrackNotBuilt,
}

impl DropReason {
    pub fn name(self) -> &'static str {
        match self {
            DropReason::NoRule => "no_rule",
            DropReason::Action => "drop_action",
            DropReason::ResubmitLoop => "resubmit_loop",
            DropReason::NoVlan => "no_vlan_tag",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::CloneChangedVlan => "clone_changed_vlan",
            DropReason::ConntrackNotBuilt => "conntrack_not_built",
        }
    }
}

/// MAC learning for the `normal` action: (VLAN, MAC) to port, aged.
#[derive(Debug, Clone, Default)]
pub struct MacTable {
    map: HashMap<(u16, u64), (PortNo, u64)>,
    /// Entries older than this (in the caller's time unit) are forgotten.
    pub max_age: u64,
    /// At most this many entries; learning stops when full.
    pub capacity: usize,
}

impl MacTable {
    pub fn new(capacity: usize, max_age: u64) -> MacTable {
        MacTable {
            map: HashMap::with_capacity(capacity.min(4096)),
            max_age,
            capacity,
        }
    }

    pub fn learn(&mut self, vlan: u16, mac: u64, port: PortNo, now: u64) {
        if mac & 0x0100_0000_0000 != 0 {
            return; // never learn a multicast source
        }
        if self.map.len() >= self.capacity && !self.map.contains_key(&(vlan, mac)) {
            self.expire(now);
            if self.map.len() >= self.capacity {
                return;
            }
        }
        self.map.insert((vlan, mac), (port, now));
    }

    pub fn lookup(&self, vlan: u16, mac: u64, now: u64) -> Option<PortNo> {
        match self.map.get(&(vlan, mac)) {
            Some(&(p, t)) if now.saturating_sub(t) <= self.max_age => Some(p),
            _ => None,
        }
    }

    pub fn expire(&mut self, now: u64) {
        let age = self.max_age;
        self.map.retain(|_, (_, t)| now.saturating_sub(*t) <= age);
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Learned entries: (vlan, mac, port, age).
    pub fn entries(&self, now: u64) -> impl Iterator<Item = (u16, u64, PortNo, u64)> + '_ {
        self.map
            .iter()
            .map(move |(&(v, m), &(p, t))| (v, m, p, now.saturating_sub(t)))
    }
}

/// The per-thread state of the datapath core: the cache and the MAC table
/// are this thread's; the classifier is shared and passed in.
#[derive(Debug, Clone)]
pub struct Pipeline {
    pub emc: ExactMatchCache,
    pub macs: MacTable,
    /// Whether hits count against rules (not while [`Pipeline::decide`]
    /// asks what a key would get), and as how many packets.
    counting: bool,
    hit_packets: u64,
    /// While [`Pipeline::process_megaflow`] runs: the key bits the
    /// decision depended on so far.
    wc: Option<FlowKey>,
    /// A `dec_ttl` found the TTL spent: the translation goes no further.
    stopped: bool,
    /// While [`Pipeline::trace`] runs: what each table did, a line each.
    tracing: Option<trace::Lines>,
    /// A `controller(...,pause)` is freezing the translation.
    freezing: Option<Freezing>,
    /// While tracing: the recirculations `ct(table=T)` forked, in order.
    recircs: Vec<Recirc>,
    next_recirc: u32,
    /// The table and field stack the next [`Pipeline::process`] starts
    /// with (a traced recirculation's), instead of table 0 and none.
    start_at: Option<(u8, Vec<u128>)>,
    /// Table lookups in this translation (OVS's `resubmits`).
    resubmits: usize,
    /// The translation began with a lookup (a packet's), not with actions
    /// (a packet_out's, a resumed continuation's).
    first_lookup_is_packets: bool,
}

impl Pipeline {
    pub fn new() -> Pipeline {
        Pipeline {
            emc: ExactMatchCache::new(8192),
            macs: MacTable::new(8192, 300_000_000_000),
            counting: true,
            hit_packets: 1,
            wc: None,
            stopped: false,
            tracing: None,
            freezing: None,
            recircs: Vec::new(),
            next_recirc: 1,
            start_at: None,
            resubmits: 0,
            first_lookup_is_packets: false,
        }
    }

    /// [`Pipeline::process`], and the megaflow mask of its decision: the
    /// key bits it depended on (every classifier lookup's wildcards, the
    /// VLAN tag the VLAN actions read, the in-port). Any key equal to
    /// `key` on those bits gets the same steps; a datapath may cache them
    /// under that mask. (`normal` also depends on the MAC table, which no
    /// mask holds: its decisions are not to be cached.)
    pub fn process_megaflow(
        &mut self,
        c: &mut Classifier,
        key: &FlowKey,
        bytes: u64,
        now: u64,
        ops: &mut Vec<Op>,
    ) -> (Result<(), DropReason>, FlowKey) {
        let mut wc = FlowKey::default();
        wc.set(f::IN_PORT, f::IN_PORT.max());
        self.wc = Some(wc);
        let r = self.process(c, key, bytes, now, ops);
        let mut wc = self.wc.take().unwrap_or(wc);
        // Pipeline state is 0 in every packet that enters: what the
        // decision read there, it wrote itself, and no datapath matches it.
        wc.w[PACKET_WORDS..].fill(0);
        (r, wc)
    }

    /// The decision read key field `p`: it is part of the megaflow.
    fn depends_on(&mut self, p: FieldPos) {
        if let Some(wc) = self.wc.as_mut() {
            wc.set(p, p.max());
        }
    }

    /// What [`Pipeline::process`] would decide for `key`, without
    /// counting a packet against any rule (a revalidator's question about
    /// a cached flow, not a packet).
    pub fn decide(
        &mut self,
        c: &mut Classifier,
        key: &FlowKey,
        now: u64,
        ops: &mut Vec<Op>,
    ) -> Result<(), DropReason> {
        self.counting = false;
        let r = self.process(c, key, 0, now, ops);
        self.counting = true;
        r
    }

    /// [`Pipeline::decide`] with the decision's megaflow mask (see
    /// [`Pipeline::process_megaflow`]).
    pub fn decide_megaflow(
        &mut self,
        c: &mut Classifier,
        key: &FlowKey,
        now: u64,
        ops: &mut Vec<Op>,
    ) -> (Result<(), DropReason>, FlowKey) {
        self.counting = false;
        let r = self.process_megaflow(c, key, 0, now, ops);
        self.counting = true;
        r
    }

    /// Count `packets` packets of `bytes` bytes in all, which a datapath's
    /// cached flow for `key` carried, against every rule `key` meets (the
    /// cache's flow stands for them); they were used `now`.
    pub fn credit(
        &mut self,
        c: &mut Classifier,
        key: &FlowKey,
        packets: u64,
        bytes: u64,
        now: u64,
    ) {
        let mut ops = Vec::new();
        self.hit_packets = packets;
        let _ = self.process(c, key, bytes, now, &mut ops);
        self.hit_packets = 1;
    }

    /// Decide what to do with a packet whose flow key is `key` and whose
    /// size is `bytes`; `ops` receives the steps (cleared first). Counts
    /// the packet against every rule it hits.
    pub fn process(
        &mut self,
        c: &mut Classifier,
        key: &FlowKey,
        bytes: u64,
        now: u64,
        ops: &mut Vec<Op>,
    ) -> Result<(), DropReason> {
        ops.clear();
        let mut fr = Frame::new(key);
        // A trace's recirculation starts where its `ct` left off.
        let (table, stack) = self.start_at.take().unwrap_or_default();
        fr.set_stack(stack);
        self.stopped = false;
        self.freezing = None;
        self.resubmits = 0;
        self.first_lookup_is_packets = true;
        let r = self.run_table(c, &mut fr, table, bytes, now, ops, 0);
        self.finish_freezing(&fr, ops);
        if let Some(t) = self.tracing.as_mut() {
            t.final_key = fr.key;
        }
        r?;
        self.sends(ops)
    }

    /// Carry out `actions` on a packet whose flow key is `key`, as a rule
    /// of table 0 would (OpenFlow's packet_out); `ops` receives the steps.
    /// Counts against rules only through resubmits.
    pub fn execute(
        &mut self,
        c: &mut Classifier,
        key: &FlowKey,
        actions: &[Action],
        bytes: u64,
        now: u64,
        ops: &mut Vec<Op>,
    ) -> Result<(), DropReason> {
        ops.clear();
        let mut fr = Frame::new(key);
        self.stopped = false;
        self.freezing = None;
        self.resubmits = 0;
        self.first_lookup_is_packets = false;
        let from = Origin {
            table: 0,
            cookie: u64::MAX,
            reason: PacketInReason::Action,
        };
        let r = self.run_actions(c, &mut fr, from, bytes, now, ops, 0, &|_, i| {
            actions.get(i).cloned()
        });
        self.finish_freezing(&fr, ops);
        r?;
        self.sends(ops)
    }

    #[allow(clippy::too_many_arguments)]
    fn run_table(
        &mut self,
        c: &mut Classifier,
        fr: &mut Frame,
        table: u8,
        bytes: u64,
        now: u64,
        ops: &mut Vec<Op>,
        depth: usize,
    ) -> Result<(), DropReason> {
        self.resubmits += 1;
        if depth > MAX_RESUBMIT_DEPTH || self.resubmits > MAX_RESUBMITS {
            return Err(DropReason::ResubmitLoop);
        }
        // The exact-match cache knows no wildcards: a megaflow's lookups
        // go to the classifier.
        let found = match self.wc.as_mut() {
            Some(wc) => c.lookup_wc(table, &fr.key, wc),
            None => self.emc.lookup(c, table, &fr.key),
        };
        // Only the packet's first lookup missing is "no rule" (a miss
        // after a resubmit just ends that resubmit).
        let first = self.resubmits == 1 && self.first_lookup_is_packets;
        let Some(r) = found else {
            self.traced_miss(table);
            return if first {
                Err(DropReason::NoRule)
            } else {
                Ok(())
            };
        };
        if let Some(rule) = c.get(r) {
            self.traced_rule(table, &rule.flow);
        }
        if self.counting {
            c.hit(r, self.hit_packets, bytes, now);
        }
        let from = match c.get(r) {
            Some(rule) => Origin {
                table,
                cookie: rule.flow.cookie,
                // The table-miss rule: lowest priority, matches everything.
                reason: if rule.flow.priority == 0 && rule.flow.m == Match::default() {
                    PacketInReason::NoMatch
                } else {
                    PacketInReason::Action
                },
            },
            None => return Ok(()),
        };
        // Actions are read one at a time by index, so that a resubmit can
        // borrow the classifier again; processing changes only counters,
        // never where rules are.
        self.run_actions(c, fr, from, bytes, now, ops, depth, &|c, i| {
            c.get(r).and_then(|rule| rule.flow.actions.get(i).cloned())
        })
    }

    /// Carry out the actions `action(c, i)` gives for i = 0, 1, ... until
    /// it gives none; `from` is the rule (or packet_out) they belong to.
    #[allow(clippy::too_many_arguments)]
    fn run_actions(
        &mut self,
        c: &mut Classifier,
        fr: &mut Frame,
        from: Origin,
        bytes: u64,
        now: u64,
        ops: &mut Vec<Op>,
        depth: usize,
        action: &dyn Fn(&Classifier, usize) -> Option<Action>,
    ) -> Result<(), DropReason> {
        let mut i = 0;
        while let Some(a) = action(c, i) {
            if self.stopped {
                break;
            }
            i += 1;
            self.traced_action(&a);
            // Whether a resubmit ends the actions (its trace is then not
            // nested); asked only of a resubmit, as it clones the next.
            let last = matches!(a, Action::Resubmit { .. }) && action(c, i).is_none();
            self.run_action(c, fr, from, bytes, now, ops, depth, a, last)?;
            if self.freezing.is_some() {
                // The rest of these actions run when the controller
                // resumes the translation.
                let rest: Vec<Action> = (i..).map_while(|j| action(c, j)).collect();
                self.freeze_rest(from, rest);
                break;
            }
        }
        Ok(())
    }

    /// One action of [`Pipeline::run_actions`]'s.
    #[allow(clippy::too_many_arguments)]
    fn run_action(
        &mut self,
        c: &mut Classifier,
        fr: &mut Frame,
        from: Origin,
        bytes: u64,
        now: u64,
        ops: &mut Vec<Op>,
        depth: usize,
        a: Action,
        last: bool,
    ) -> Result<(), DropReason> {
        {
            match a {
                Action::Resubmit { port, table: t } => {
                    let saved = fr.key.get(f::IN_PORT);
                    if let Some(p) = port {
                        fr.key.set(f::IN_PORT, p as u64);
                    }
                    let t = t.unwrap_or(from.table);
                    // As OVS's trace: a resubmit that ends its actions is
                    // not nested.
                    let nested = !last;
                    self.trace_indent(nested, 1);
                    // As OVS counts depth: only a resubmit to this table or
                    // an earlier one nests (OVN's pipeline walks 80 tables
                    // forward).
                    let deeper = usize::from(t <= from.table);
                    let r = self.run_table(c, fr, t, bytes, now, ops, depth + deeper);
                    self.trace_indent(nested, -1);
                    r?;
                    fr.key.set(f::IN_PORT, saved);
                }
                Action::Clone(inner) => {
                    let saved = fr.save();
                    self.trace_indent(true, 1);
                    let r = self.run_actions(c, fr, from, bytes, now, ops, depth + 1, &|_, i| {
                        inner.get(i).cloned()
                    });
                    self.trace_indent(true, -1);
                    // A pause inside a clone freezes the clone's actions
                    // only (as OVS's clone): the original carries on.
                    self.finish_freezing(fr, ops);
                    r?;
                    self.stopped = false;
                    fr.restore(saved)?;
                }
                Action::Ct(ct) => self.conntrack(fr, &ct, ops)?,
                // The datapath is told only of a packet conntrack has seen
                // (OVS's `ctx->conntracked`: after a recirculation from ct).
                Action::CtClear => {
                    if fr.key.get(f::CT_STATE) & CS_TRACKED != 0 {
                        ops.push(Op::CtClear);
                    }
                    self.field_action(fr, &Action::CtClear)?;
                }
                a => self.act(fr, from, &a, now, ops)?,
            }
        }
        Ok(())
    }

    /// One action that neither looks up a table nor runs others.
    fn act(
        &mut self,
        fr: &mut Frame,
        from: Origin,
        a: &Action,
        now: u64,
        ops: &mut Vec<Op>,
    ) -> Result<(), DropReason> {
        let in_port = fr.key.get(f::IN_PORT) as PortNo;
        match *a {
            Action::Output(p) => {
                self.commit(fr, ops);
                ops.push(Op::Output {
                    port: p,
                    tun: fr.tun,
                })
            }
            Action::InPort => {
                self.commit(fr, ops);
                ops.push(Op::Output {
                    port: in_port,
                    tun: fr.tun,
                })
            }
            Action::Normal => {
                self.commit(fr, ops);
                self.depends_on(f::VLAN_TCI);
                self.depends_on(f::DL_SRC);
                self.depends_on(f::DL_DST);
                let key = &fr.key;
                let vlan = (key.get(f::VLAN_TCI) & 0x0fff) as u16;
                self.macs.learn(vlan, key.get(f::DL_SRC), in_port, now);
                let dst = key.get(f::DL_DST);
                match self.macs.lookup(vlan, dst, now) {
                    Some(p) if p == in_port => {}
                    Some(p) => ops.push(Op::Output {
                        port: p,
                        tun: fr.tun,
                    }),
                    None => ops.push(Op::Flood { except: in_port }),
                }
            }
            Action::Flood => {
                self.commit(fr, ops);
                ops.push(Op::Flood { except: in_port })
            }
            Action::Controller {
                max_len,
                reason,
                id,
                ref userdata,
                pause,
            } => {
                self.commit(fr, ops);
                let mut pin = Box::new(PacketIn {
                    max_len,
                    table: from.table,
                    cookie: from.cookie,
                    // A table-miss rule's sends say so (OVS's explicit
                    // miss), unless the action names its reason.
                    reason: if reason == PacketInReason::Action {
                        from.reason
                    } else {
                        reason
                    },
                    id,
                    userdata: userdata.clone(),
                    key: fr.key,
                    continuation: None,
                });
                if pause {
                    // OVS sends a paused packet_in as from table 0, with
                    // the reason the action gives.
                    pin.table = 0;
                    pin.reason = reason;
                    self.freezing = Some(Freezing {
                        pin,
                        groups: Vec::new(),
                        unrolled: None,
                    });
                } else {
                    ops.push(Op::Controller(pin));
                }
            }
            Action::SetTunDst(ip) => fr.tun.dst = Some(ip),
            Action::SetTunSrc(ip) => fr.tun.src = Some(ip),
            // The flow holds them too: a later move or match reads them
            // (OVN sets tun_metadata0 and moves a register into its upper
            // bits).
            Action::SetTunId(id) => {
                fr.tun.id = Some(id);
                fr.key.set(f::TUN_ID, id);
            }
            Action::SetTunMetadata(i, v) => {
                fr.tun.metadata[i as usize] = Some(v);
                if let Some(fl) = crate::field::TUN_METADATA.get(usize::from(i)) {
                    fl.set(&mut fr.key, u128::from(v));
                }
            }
            Action::PushVlan(_)
            | Action::PopVlan
            | Action::ModVlanVid(_)
            | Action::ModVlanPcp(_) => self.vlan(fr, a, ops)?,
            // Never run: a conjunctive rule is a clause, not an answer.
            Action::Note(_) | Action::Conjunction { .. } => {}
            _ => self.field_action(fr, a)?,
        }
        Ok(())
    }

    /// The VLAN actions: a step now (the tag is not committed as a field),
    /// and the key as the packet is after it.
    fn vlan(&mut self, fr: &mut Frame, a: &Action, ops: &mut Vec<Op>) -> Result<(), DropReason> {
        self.depends_on(f::VLAN_TCI);
        let tci = fr.key.get(f::VLAN_TCI);
        let tagged = tci & 0x1000 != 0;
        match *a {
            Action::PushVlan(tpid) => {
                ops.push(Op::PushVlan(tpid));
                // The new outermost tag inherits the old one's TCI (as
                // OVS does); mod_vlan_vid then sets its VID.
                fr.key.set(f::VLAN_TCI, tci | 0x1000);
            }
            // The inner tag, if any, is not in the key; rules after a pop
            // in the same packet see "no tag" (OVS with one VLAN level
            // behaves the same).
            Action::PopVlan if tagged => {
                ops.push(Op::PopVlan);
                fr.key.set(f::VLAN_TCI, 0);
            }
            // OVS pushes a tag for mod_vlan_vid on untagged frames; tunlab
            // keeps the explicit push_vlan form.
            Action::ModVlanVid(v) if tagged => {
                ops.push(Op::SetVlanVid(v));
                fr.key.set(f::VLAN_TCI, (tci & 0xf000) | v as u64);
            }
            Action::ModVlanPcp(pcp) if tagged => {
                ops.push(Op::SetVlanPcp(pcp));
                fr.key
                    .set(f::VLAN_TCI, (tci & 0x1fff) | ((pcp as u64) << 13));
            }
            _ => return Err(DropReason::NoVlan),
        }
        fr.committed.set(f::VLAN_TCI, fr.key.get(f::VLAN_TCI));
        Ok(())
    }
}

/// Which rule's actions run: its table and cookie, and why its
/// `controller` action would send.
#[derive(Debug, Clone, Copy)]
struct Origin {
    table: u8,
    cookie: u64,
    reason: PacketInReason,
}

impl Pipeline {
    /// Steps that send the packet nowhere drop it: for a spent TTL if a
    /// `dec_ttl` ended the translation.
    fn sends(&self, ops: &[Op]) -> Result<(), DropReason> {
        if ops.iter().any(Op::sends) {
            Ok(())
        } else if self.stopped {
            Err(DropReason::TtlExpired)
        } else {
            Err(DropReason::Action)
        }
    }
}

impl Op {
    /// Whether this step sends the packet somewhere.
    pub fn sends(&self) -> bool {
        matches!(
            self,
            Op::Output { .. } | Op::Flood { .. } | Op::Controller { .. } | Op::Recirc(_)
        )
    }
}

impl Default for Pipeline {
    fn default() -> Pipeline {
        Pipeline::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{parse_flow, NumericPorts};

    pub(super) fn classifier(rules: &[&str]) -> Classifier {
        let mut c = Classifier::new();
        for r in rules {
            c.add(parse_flow(r, &NumericPorts).unwrap(), 0);
        }
        c
    }

    pub(super) fn key(in_port: u64, vlan: Option<u64>, src: u64, dst: u64) -> FlowKey {
        let mut k = FlowKey::default();
        k.set(f::IN_PORT, in_port);
        k.set(f::DL_SRC, src);
        k.set(f::DL_DST, dst);
        if let Some(v) = vlan {
            k.set(f::VLAN_TCI, 0x1000 | v);
        }
        k
    }

    /// A megaflow holds what its lookups probed: the in-port always, the
    /// fields of every subtable tried (the one that missed too), and the
    /// tag that a VLAN action read; not the fields no rule looks at.
    #[test]
    fn a_megaflow_holds_the_fields_its_lookups_probed() {
        let mut c = classifier(&[
            "priority=200,in_port=1,dl_dst=00:00:00:00:00:09 actions=drop",
            "priority=100,in_port=1 actions=resubmit(,1)",
            "table=1,dl_src=00:00:00:00:00:01 actions=mod_vlan_vid:5,output:2",
            "table=1,priority=0 actions=output:3",
        ]);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        let k = key(1, Some(7), 1, 2);
        let (r, wc) = p.process_megaflow(&mut c, &k, 64, 0, &mut ops);
        assert_eq!(r, Ok(()));
        assert_eq!(ops.len(), 2);
        assert_eq!(wc.get(f::IN_PORT), f::IN_PORT.max());
        assert_eq!(wc.get(f::DL_DST), f::DL_DST.max(), "the missed subtable");
        assert_eq!(wc.get(f::DL_SRC), f::DL_SRC.max(), "table 1's subtable");
        assert_eq!(
            wc.get(f::VLAN_TCI),
            f::VLAN_TCI.max(),
            "mod_vlan_vid read it"
        );
        assert_eq!(wc.get(f::NW_SRC), 0);
        assert_eq!(wc.get(f::TP_DST), 0);
        // A plain process after it has no wildcards left over.
        assert_eq!(p.process(&mut c, &k, 64, 0, &mut ops), Ok(()));
        assert!(p.wc.is_none());
    }

    /// Staged lookup: a subtable whose rules are all on another port
    /// adds only the in-port to a megaflow, not the fields past it.
    #[test]
    fn a_rule_on_another_port_leaves_the_megaflow_narrow() {
        let mut c = classifier(&[
            "priority=40001,in_port=1,udp,tp_dst=7 actions=drop",
            "in_port=1 actions=output:10",
            "in_port=10 actions=output:1",
        ]);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        let mut k = key(10, None, 1, 2);
        k.set(f::DL_TYPE, 0x0800);
        k.set(f::NW_PROTO, 17);
        k.set(f::TP_DST, 7);
        let (r, wc) = p.process_megaflow(&mut c, &k, 64, 0, &mut ops);
        assert_eq!(r, Ok(()));
        let mut only_port = FlowKey::default();
        only_port.set(f::IN_PORT, f::IN_PORT.max());
        assert_eq!(wc, only_port);
        // From port 1 the UDP rule's fields count, up to the port stage
        // and on: the whole subtable's mask.
        k.set(f::IN_PORT, 1);
        let (r, wc) = p.process_megaflow(&mut c, &k, 64, 0, &mut ops);
        assert_eq!(r, Err(DropReason::Action));
        assert_eq!(wc.get(f::TP_DST), f::TP_DST.max());
        assert_eq!(wc.get(f::NW_PROTO), f::NW_PROTO.max());
    }

    /// A rule on a register or the metadata is probed, but a packet enters
    /// with them 0: the megaflow keeps none of the pipeline's state.
    #[test]
    fn a_megaflow_keeps_no_pipeline_state() {
        let mut on_state =
            parse_flow("priority=40000,in_port=1 actions=drop", &NumericPorts).unwrap();
        on_state.m.mask.set(crate::key::reg(0), u32::MAX as u64);
        on_state.m.value.set(crate::key::reg(0), 5);
        on_state.m.mask.set(f::METADATA, u64::MAX);
        on_state.m.value.set(f::METADATA, 7);
        let mut c = classifier(&["in_port=1 actions=output:2"]);
        c.add(on_state, 0);
        let k = key(1, None, 1, 2);
        let mut probed = FlowKey::default();
        c.lookup_wc(0, &k, &mut probed);
        assert_ne!(probed.get(f::METADATA), 0, "the lookup read the state");
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        let (r, wc) = p.process_megaflow(&mut c, &k, 64, 0, &mut ops);
        assert_eq!(r, Ok(()));
        assert_eq!(ops.len(), 1);
        assert_eq!(wc.get(f::IN_PORT), f::IN_PORT.max());
        assert_eq!(
            &wc.w[PACKET_WORDS..],
            &[0; crate::key::WORDS - PACKET_WORDS][..]
        );
    }

    /// A cached flow's counts go to every rule its key meets (through a
    /// resubmit too), as used at the time given; nothing is learned or
    /// counted twice.
    #[test]
    fn credit_counts_a_cached_flows_packets_against_its_rules() {
        let mut c = classifier(&[
            "in_port=1 actions=resubmit(,1)",
            "table=1,in_port=1 actions=output:2",
        ]);
        let mut p = Pipeline::new();
        p.credit(&mut c, &key(1, None, 1, 2), 1000, 1_500_000, 77);
        for r in c.rules() {
            assert_eq!(
                (r.packets, r.bytes, r.used),
                (1000, 1_500_000, 77),
                "{:?}",
                r.flow
            );
        }
        // A packet after it counts as one again.
        let mut ops = Vec::new();
        p.process(&mut c, &key(1, None, 1, 2), 100, 78, &mut ops)
            .unwrap();
        assert!(c.rules().all(|r| r.packets == 1001));
    }

    #[test]
    fn qinq_article_flows() {
        let mut c = classifier(&[
            "in_port=1,dl_vlan=1 action=pop_vlan,output:2",
            "in_port=2 action=push_vlan:0x88a8,mod_vlan_vid:1,output:1",
        ]);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        p.process(&mut c, &key(2, None, 1, 2), 100, 0, &mut ops)
            .unwrap();
        assert_eq!(
            ops,
            vec![
                Op::PushVlan(0x88a8),
                Op::SetVlanVid(1),
                Op::Output {
                    port: 1,
                    tun: TunnelSet::default()
                }
            ]
        );
        p.process(&mut c, &key(1, Some(1), 1, 2), 100, 0, &mut ops)
            .unwrap();
        assert_eq!(
            ops,
            vec![
                Op::PopVlan,
                Op::Output {
                    port: 2,
                    tun: TunnelSet::default()
                }
            ]
        );
        assert_eq!(
            p.process(&mut c, &key(1, Some(2), 1, 2), 100, 0, &mut ops),
            Err(DropReason::NoRule)
        );
        let counts: Vec<_> = c.rules().map(|r| (r.packets, r.bytes)).collect();
        assert_eq!(counts, vec![(1, 100), (1, 100)]);
    }

    #[test]
    fn decide_answers_as_process_without_counting() {
        let mut c = classifier(&[
            "in_port=2 action=push_vlan:0x88a8,mod_vlan_vid:1,output:1",
            "priority=5,in_port=3 actions=resubmit:2",
        ]);
        let mut p = Pipeline::new();
        let (mut decided, mut processed) = (Vec::new(), Vec::new());
        let counts = |c: &Classifier| c.rules().map(|r| (r.packets, r.bytes)).collect::<Vec<_>>();
        for k in [key(2, None, 1, 2), key(3, None, 1, 2), key(4, None, 1, 2)] {
            let before = counts(&c);
            let d = p.decide(&mut c, &k, 0, &mut decided);
            assert_eq!(counts(&c), before, "decide counted");
            assert_eq!(d, p.process(&mut c, &k, 64, 0, &mut processed));
            assert_eq!(decided, processed);
        }
        // process counted afterwards: decide left counting on.
        assert!(c.rules().any(|r| r.packets > 0));
    }

    #[test]
    fn set_field_tun_dst_reaches_the_output() {
        let mut c = classifier(&[
            "in_port=2 action=set_field:10.222.0.6->tun_dst,set_field:6->tun_id,output:1",
        ]);
        let mut ops = Vec::new();
        Pipeline::new()
            .process(&mut c, &key(2, None, 1, 2), 64, 0, &mut ops)
            .unwrap();
        let Op::Output { port: 1, tun } = ops[0] else {
            panic!("{ops:?}")
        };
        assert_eq!(tun.dst, Some("10.222.0.6".parse().unwrap()));
        assert_eq!(tun.id, Some(6));
    }

    #[test]
    fn normal_learns_and_floods() {
        let mut c = classifier(&["actions=normal"]);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        // A -> B: B unknown, flood; A learned on port 1.
        p.process(&mut c, &key(1, None, 0xa, 0xb), 64, 0, &mut ops)
            .unwrap();
        assert_eq!(ops, vec![Op::Flood { except: 1 }]);
        // B -> A from port 2: A known on 1.
        p.process(&mut c, &key(2, None, 0xb, 0xa), 64, 1, &mut ops)
            .unwrap();
        assert_eq!(
            ops,
            vec![Op::Output {
                port: 1,
                tun: TunnelSet::default()
            }]
        );
        // A -> B again: B now known on 2.
        p.process(&mut c, &key(1, None, 0xa, 0xb), 64, 2, &mut ops)
            .unwrap();
        assert_eq!(
            ops,
            vec![Op::Output {
                port: 2,
                tun: TunnelSet::default()
            }]
        );
        // Aged out: flood again.
        p.process(
            &mut c,
            &key(1, None, 0xa, 0xb),
            64,
            2 + p.macs.max_age + 10,
            &mut ops,
        )
        .unwrap();
        assert_eq!(ops, vec![Op::Flood { except: 1 }]);
    }

    #[test]
    fn resubmit_tables_and_loops() {
        let mut c = classifier(&[
            "in_port=1 actions=resubmit(,1)",
            "table=1,in_port=1 actions=output:2",
            "in_port=5 actions=resubmit(,0)",
        ]);
        let mut ops = Vec::new();
        let mut p = Pipeline::new();
        p.process(&mut c, &key(1, None, 1, 2), 64, 0, &mut ops)
            .unwrap();
        assert_eq!(
            ops,
            vec![Op::Output {
                port: 2,
                tun: TunnelSet::default()
            }]
        );
        assert_eq!(
            p.process(&mut c, &key(5, None, 1, 2), 64, 0, &mut ops),
            Err(DropReason::ResubmitLoop)
        );
    }

    #[test]
    fn long_action_lists_run_whole() {
        let outs: Vec<String> = (1..=40).map(|p| format!("output:{p}")).collect();
        let mut c = classifier(&[&format!("in_port=100 actions={}", outs.join(","))]);
        let mut ops = Vec::new();
        Pipeline::new()
            .process(&mut c, &key(100, None, 1, 2), 64, 0, &mut ops)
            .unwrap();
        assert_eq!(ops.len(), 40);
    }

    #[test]
    fn drops_are_explained() {
        let mut c = classifier(&[
            "in_port=1 actions=drop",
            "in_port=2 actions=pop_vlan,output:1",
        ]);
        let mut ops = Vec::new();
        let mut p = Pipeline::new();
        assert_eq!(
            p.process(&mut c, &key(1, None, 1, 2), 64, 0, &mut ops),
            Err(DropReason::Action)
        );
        assert_eq!(
            p.process(&mut c, &key(2, None, 1, 2), 64, 0, &mut ops),
            Err(DropReason::NoVlan)
        );
        assert_eq!(
            p.process(&mut c, &key(3, None, 1, 2), 64, 0, &mut ops),
            Err(DropReason::NoRule)
        );
    }

    mod megaflow {
        use super::*;
        use proptest::prelude::*;

        /// Rules over a few fields with small values, so that keys meet
        /// them often: several masks, overlapping matches, priorities,
        /// a second table and VLAN actions.
        fn rule() -> impl Strategy<Value = String> {
            let field = prop_oneof![
                (1u64..4).prop_map(|v| format!("in_port={v}")),
                (0u64..3).prop_map(|v| format!("dl_src=00:00:00:00:00:0{v}")),
                (0u64..3).prop_map(|v| format!("dl_dst=00:00:00:00:00:0{v}")),
                (0u64..4).prop_map(|v| format!("ip,nw_src=10.0.0.{v}")),
                (0u64..4).prop_map(|v| format!("ip,nw_src=10.0.0.{}/31", v & 2)),
                (0u64..3).prop_map(|v| format!("dl_vlan={v}")),
                Just("vlan_tci=0".to_string()),
            ];
            let action = prop_oneof![
                (1u32..5).prop_map(|p| format!("output:{p}")),
                Just("drop".to_string()),
                Just("resubmit(,1)".to_string()),
                (1u16..9).prop_map(|v| format!("mod_vlan_vid:{v},output:2")),
                Just("pop_vlan,output:3".to_string()),
            ];
            (
                0u8..2,
                0u16..4,
                proptest::collection::vec(field, 0..3),
                action,
            )
                .prop_map(|(table, prio, fields, action)| {
                    let mut m = vec![format!("table={table}"), format!("priority={prio}")];
                    m.extend(fields);
                    // Table 1 does not resubmit (no loops to reason about).
                    let action = if table == 1 && action.starts_with("resubmit") {
                        "output:4".to_string()
                    } else {
                        action
                    };
                    format!("{} actions={action}", m.join(","))
                })
        }

        fn a_key() -> impl Strategy<Value = FlowKey> {
            (
                1u64..4,
                0u64..3,
                0u64..3,
                proptest::option::of(0u64..3),
                0u64..4,
                any::<bool>(),
            )
                .prop_map(|(port, src, dst, vlan, nw, ip)| {
                    let mut k = key(port, vlan, src, dst);
                    if ip {
                        k.set(f::DL_TYPE, 0x0800);
                        k.set(f::NW_SRC, 0x0a00_0000 | nw);
                    } else {
                        k.set(f::DL_TYPE, 0x0806);
                    }
                    k
                })
        }

        proptest! {
            /// The megaflow property: every key that agrees with `k` on
            /// the bits of its mask gets the steps `k` got.
            #[test]
            fn keys_equal_under_the_mask_get_the_same_steps(
                rules in proptest::collection::vec(rule(), 1..12),
                gone in proptest::collection::vec(any::<bool>(), 12),
                k in a_key(),
                others in proptest::collection::vec(a_key(), 1..16),
            ) {
                let mut c = Classifier::new();
                let parsed: Vec<_> = rules
                    .iter()
                    .filter_map(|r| parse_flow(r, &NumericPorts).ok())
                    .collect();
                for rule in &parsed {
                    c.add(rule.clone(), 0);
                }
                // Some go again (the stages count rules out as well as in).
                for (rule, _) in parsed.iter().zip(&gone).filter(|(_, g)| **g) {
                    c.delete(Some(rule.table), &rule.m, Some(rule.priority));
                }
                let mut p = Pipeline::new();
                let (mut ops, mut ops2) = (Vec::new(), Vec::new());
                let (r, wc) = p.process_megaflow(&mut c, &k, 64, 0, &mut ops);
                for o in others {
                    let mut k2 = FlowKey::default();
                    for i in 0..k2.w.len() {
                        k2.w[i] = (k.w[i] & wc.w[i]) | (o.w[i] & !wc.w[i]);
                    }
                    let r2 = p.process(&mut c, &k2, 64, 0, &mut ops2);
                    prop_assert_eq!(r, r2, "{:?} vs {:?} under {:?}", k, k2, wc);
                    if r.is_ok() {
                        prop_assert_eq!(&ops, &ops2);
                    }
                }
            }
        }
    }
}
