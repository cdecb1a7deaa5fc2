//! Flow tables: rules looked up by tuple-space search (one hash table per
//! distinct mask, as OVS's classifier and Srinivasan et al. describe), with
//! an exact-match cache in front so that steady traffic does not probe the
//! tables at all.
//!
//! Semantics follow ovs-ofctl: `add` replaces a rule with the same table,
//! priority and match (keeping its counters, as `mod-flows` would reset
//! them only when asked); `delete` is non-strict by default (every rule at
//! least as specific as the given match) or strict (same priority and
//! match); among matching rules the highest priority wins, and among equal
//! priorities the rule added first.
//!
//! Cost: a lookup probes one hash table per distinct mask in the table,
//! highest maximum priority first, and stops once no remaining mask can
//! hold a better rule; it does not depend on how many rules share a mask.
//! Adding and strict deletion are O(1) plus a re-sort of the (few) masks.

use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxBuildHasher;

use crate::flow::{Action, FlowRule, Match};
use crate::key::{FlowKey, WORDS};

/// A rule in a table, with its counters.
#[derive(Debug, Clone)]
pub struct Rule {
    pub flow: FlowRule,
    pub packets: u64,
    pub bytes: u64,
    /// Caller's time when the rule was added (for `duration=` in dumps),
    /// and when a packet last hit it (for the idle timeout).
    pub added: u64,
    pub used: u64,
    seq: u64,
}

impl Rule {
    /// Lookup order within a table: higher priority first, then older.
    fn order(&self) -> (std::cmp::Reverse<u16>, u64) {
        (std::cmp::Reverse(self.flow.priority), self.seq)
    }
}

/// Where a rule is. Valid until the tables change (check
/// [`Classifier::generation`]); `index` names the rule's slot, which a
/// later rule may reuse once this one is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleRef {
    pub table: u8,
    pub index: u32,
}

/// Every rule of one table that has one particular mask, hashed by its
/// (pre-masked) match value.
#[derive(Debug, Clone)]
struct Subtable {
    mask: FlowKey,
    /// The words `mask` touches; the rest are wildcards.
    words: Vec<u8>,
    /// Match value to slots, in lookup order (several rules can share a
    /// match at different priorities).
    buckets: HashMap<FlowKey, Vec<u32>, FxBuildHasher>,
    /// How many rules hold each priority: the last key is the subtable's
    /// maximum, which orders the probes.
    priorities: BTreeMap<u16, u32>,
    /// Staged lookup, as OVS's classifier does it: the mask cut at the
    /// stage boundaries (the in-port and tunnel, then L2, then L3; each
    /// stage that adds bits, short of the whole mask), with how many
    /// rules have each masked value there. A probe that finds no rule at
    /// a stage depends only on the fields up to it: a megaflow need not
    /// hold the rest of the subtable's (a rule on another port does not
    /// make every flow depend on its UDP port).
    stages: Vec<Stage>,
}

/// One stage of a subtable: its mask, the words the mask touches, and
/// how many rules have each masked value there, by a hash of those words
/// alone (a probe reads a few words, not the key's 44). Two values of one
/// hash share a count: a probe may then pass a stage that no rule's value
/// agrees with, which costs the full probe and a megaflow holding more
/// bits than it needed, never a wrong answer.
#[derive(Debug, Clone)]
struct Stage {
    mask: FlowKey,
    words: Vec<u8>,
    counts: HashMap<u64, u32, FxBuildHasher>,
}

impl Stage {
    fn hash(&self, key: &FlowKey) -> u64 {
        use std::hash::{BuildHasher, Hasher};
        let mut h = FxBuildHasher.build_hasher();
        for &i in &self.words {
            h.write_u64(key.w[i as usize] & self.mask.w[i as usize]);
        }
        h.finish()
    }
}

/// The stages' fields, each with those of the stages before it: the
/// in-port and tunnel metadata, then L2, then L3 (L4 is the rest).
fn stage_fields() -> [FlowKey; 3] {
    use crate::key::{f, DP_WORDS, PACKET_WORDS, WORDS};
    let mut meta = FlowKey::default();
    for p in [
        f::IN_PORT,
        f::TUN_FAMILY,
        f::TUN_ID,
        f::TUN_SRC,
        f::TUN_DST,
        f::PKT_MARK,
    ] {
        meta.set(p, p.max());
    }
    // tun_ipv6_src/dst and tun_metadata0..7 (words 11 to 18), and the
    // pipeline's state: metadata, registers, conntrack, recirculation.
    for i in (11..DP_WORDS).chain(PACKET_WORDS..WORDS) {
        meta.w[i] = u64::MAX;
    }
    let mut l2 = meta;
    for p in [f::DL_TYPE, f::VLAN_TCI, f::DL_SRC, f::DL_DST] {
        l2.set(p, p.max());
    }
    let mut l3 = l2;
    for p in [
        f::NW_PROTO,
        f::NW_TOS,
        f::NW_SRC,
        f::NW_DST,
        f::NW_TTL,
        f::NW_FRAG,
        f::IPV6_LABEL,
        f::ARP_SHA,
        f::ARP_THA,
    ] {
        l3.set(p, p.max());
    }
    // ipv6_src/dst (words 7 to 10).
    for w in &mut l3.w[7..11] {
        *w = u64::MAX;
    }
    [meta, l2, l3]
}

impl Subtable {
    fn new(mask: FlowKey) -> Subtable {
        let mut stages: Vec<Stage> = Vec::new();
        for fields in stage_fields() {
            let m = mask.masked(&fields);
            let new_bits = stages
                .last()
                .map_or(m != FlowKey::default(), |p| p.mask != m);
            if new_bits && m != mask {
                stages.push(Stage {
                    mask: m,
                    words: (0..WORDS as u8).filter(|&i| m.w[i as usize] != 0).collect(),
                    counts: HashMap::default(),
                });
            }
        }
        Subtable {
            mask,
            words: (0..WORDS as u8)
                .filter(|&i| mask.w[i as usize] != 0)
                .collect(),
            buckets: HashMap::default(),
            priorities: BTreeMap::new(),
            stages,
        }
    }

    /// A rule of match value `value` joins (+1) or leaves (-1) the stages.
    fn stage_count(&mut self, value: &FlowKey, joins: bool) {
        for st in &mut self.stages {
            let v = st.hash(value);
            if joins {
                *st.counts.entry(v).or_default() += 1;
            } else if let Some(n) = st.counts.get_mut(&v) {
                *n -= 1;
                if *n == 0 {
                    st.counts.remove(&v);
                }
            }
        }
    }

    /// Whether some rule's value agrees with `key` at every stage; if not,
    /// the fields up to the stage that none agreed at go into `wc`; if so,
    /// the whole mask does.
    fn passes_stages(&self, key: &FlowKey, wc: &mut FlowKey) -> bool {
        for st in &self.stages {
            if !st.counts.contains_key(&st.hash(key)) {
                for &i in &st.words {
                    wc.w[i as usize] |= st.mask.w[i as usize];
                }
                return false;
            }
        }
        for &i in &self.words {
            wc.w[i as usize] |= self.mask.w[i as usize];
        }
        true
    }

    fn max_priority(&self) -> u16 {
        self.priorities.last_key_value().map_or(0, |(p, _)| *p)
    }

    #[inline]
    fn masked(&self, key: &FlowKey) -> FlowKey {
        let mut m = FlowKey::default();
        for &i in &self.words {
            let i = i as usize;
            m.w[i] = key.w[i] & self.mask.w[i];
        }
        m
    }
}

#[derive(Debug, Default, Clone)]
struct Table {
    /// Ordered by maximum priority, highest first.
    subtables: Vec<Subtable>,
    /// How many of its rules are conjunctive (`conjunction` actions): a
    /// lookup in a table with any resolves them (see
    /// [`Classifier::lookup`]).
    conjunctive: usize,
}

/// The best of `rules` that is not conjunctive: its slot and priority.
fn best_plain(rules: &[(u32, &Rule)]) -> Option<(u32, u16)> {
    rules
        .iter()
        .filter(|(_, r)| !is_conjunctive(&r.flow.actions))
        .min_by_key(|(_, r)| r.order())
        .map(|(s, r)| (*s, r.flow.priority))
}

/// Whether a rule's actions make it one clause of a conjunctive match.
fn is_conjunctive(actions: &[Action]) -> bool {
    actions
        .iter()
        .any(|a| matches!(a, Action::Conjunction { .. }))
}

impl Table {
    fn sort(&mut self) {
        self.subtables
            .sort_by_key(|s| std::cmp::Reverse(s.max_priority()));
    }
}

/// Which rules a delete or modify means, as OpenFlow's flow_mod says it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Selector {
    /// One table, or all.
    pub table: Option<u8>,
    /// Non-strict: every rule at least as specific as this match. Strict:
    /// the rule with exactly this match...
    pub m: Match,
    /// ...and this priority.
    pub strict: Option<u16>,
    /// Only rules whose cookie equals this value under this mask.
    pub cookie: Option<(u64, u64)>,
}

impl Selector {
    /// Whether this selector picks `r` (what [`Classifier::delete_where`]
    /// and [`Classifier::modify`] act on; statistics requests filter by
    /// it too).
    pub fn picks(&self, r: &FlowRule) -> bool {
        let m = &self.m;
        self.table.is_none_or(|t| t == r.table)
            && self.cookie.is_none_or(|(v, mk)| r.cookie & mk == v & mk)
            && match self.strict {
                Some(prio) => r.priority == prio && r.m == *m,
                None => (0..WORDS).all(|i| {
                    r.m.mask.w[i] & m.mask.w[i] == m.mask.w[i]
                        && r.m.value.w[i] & m.mask.w[i] == m.value.w[i]
                }),
            }
    }
}

/// All flow tables of one switch.
#[derive(Debug, Default, Clone)]
pub struct Classifier {
    tables: Vec<Table>,
    /// Rule storage; a deleted rule leaves `None` and its slot on `free`.
    slots: Vec<Option<Rule>>,
    free: Vec<u32>,
    len: usize,
    generation: u64,
    seq: u64,
}

impl Classifier {
    pub fn new() -> Classifier {
        Classifier::default()
    }

    /// Changes whenever a rule is added or removed; caches compare it.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The rule in `slot` (subtables name only live slots).
    fn rule(&self, slot: u32) -> Option<&Rule> {
        self.slots.get(slot as usize)?.as_ref()
    }

    /// Add a rule, or replace the one with the same table, priority and
    /// match (its counters are kept). Returns true if it replaced one.
    pub fn add(&mut self, flow: FlowRule, now: u64) -> bool {
        self.generation += 1;
        self.seq += 1;
        let t = flow.table as usize;
        if self.tables.len() <= t {
            self.tables.resize_with(t + 1, Table::default);
        }
        let table = &mut self.tables[t];
        let si = match table.subtables.iter().position(|s| s.mask == flow.m.mask) {
            Some(i) => i,
            None => {
                table.subtables.push(Subtable::new(flow.m.mask));
                table.subtables.len() - 1
            }
        };
        let st = &mut table.subtables[si];
        let flow_value = flow.m.value;
        let bucket = st.buckets.entry(flow.m.value).or_default();
        for &s in bucket.iter() {
            let Some(Some(r)) = self.slots.get_mut(s as usize) else {
                continue;
            };
            if r.flow.priority == flow.priority {
                let was = is_conjunctive(&r.flow.actions);
                let now_conj = is_conjunctive(&flow.actions);
                table.conjunctive = table.conjunctive + usize::from(now_conj) - usize::from(was);
                r.flow.actions = flow.actions;
                r.flow.cookie = flow.cookie;
                r.flow.idle_timeout = flow.idle_timeout;
                r.flow.hard_timeout = flow.hard_timeout;
                r.flow.send_flow_rem = flow.send_flow_rem;
                return true;
            }
        }
        table.conjunctive += usize::from(is_conjunctive(&flow.actions));
        let rule = Rule {
            flow,
            packets: 0,
            bytes: 0,
            added: now,
            used: now,
            seq: self.seq,
        };
        let order = rule.order();
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(rule);
                s
            }
            None => {
                self.slots.push(Some(rule));
                (self.slots.len() - 1) as u32
            }
        };
        let slots = &self.slots;
        let at = bucket.partition_point(|&s| {
            slots[s as usize]
                .as_ref()
                .is_some_and(|r| r.order() < order)
        });
        bucket.insert(at, slot);
        let value = flow_value;
        st.stage_count(&value, true);
        let prio = order.0 .0;
        let before = st.max_priority();
        *st.priorities.entry(prio).or_default() += 1;
        if prio > before || st.priorities.len() == 1 {
            table.sort();
        }
        self.len += 1;
        false
    }

    /// Take the rule in `slot` out of its subtable and storage.
    fn remove(&mut self, slot: u32) {
        let Some(rule) = self.slots[slot as usize].take() else {
            return;
        };
        self.free.push(slot);
        self.len -= 1;
        let table = &mut self.tables[rule.flow.table as usize];
        table.conjunctive -= usize::from(is_conjunctive(&rule.flow.actions));
        let Some(si) = table
            .subtables
            .iter()
            .position(|s| s.mask == rule.flow.m.mask)
        else {
            return;
        };
        let st = &mut table.subtables[si];
        st.stage_count(&rule.flow.m.value, false);
        if let Some(bucket) = st.buckets.get_mut(&rule.flow.m.value) {
            bucket.retain(|&s| s != slot);
            if bucket.is_empty() {
                st.buckets.remove(&rule.flow.m.value);
            }
        }
        let prio = rule.flow.priority;
        let before = st.max_priority();
        if let Some(n) = st.priorities.get_mut(&prio) {
            *n -= 1;
            if *n == 0 {
                st.priorities.remove(&prio);
            }
        }
        if st.buckets.is_empty() {
            table.subtables.remove(si);
        } else if st.max_priority() != before {
            table.sort();
        }
    }

    /// Delete rules in `table` (all tables if `None`): non-strict removes
    /// every rule whose match is at least as specific as `m`; strict removes
    /// the rule with exactly this match and `priority`. Returns how many.
    pub fn delete(&mut self, table: Option<u8>, m: &Match, strict: Option<u16>) -> usize {
        self.delete_where(&Selector {
            table,
            m: *m,
            strict,
            cookie: None,
        })
    }

    /// Delete the rules `sel` picks; how many.
    pub fn delete_where(&mut self, sel: &Selector) -> usize {
        let doomed = self.select(sel);
        for &s in &doomed {
            self.remove(s);
        }
        if !doomed.is_empty() {
            self.generation += 1;
        }
        doomed.len()
    }

    /// Give the rules `sel` picks `actions` (their matches, counters and
    /// ages stay, as OpenFlow's modify keeps them); how many. A cookie
    /// given as `Some` replaces theirs.
    pub fn modify(&mut self, sel: &Selector, actions: &[Action], cookie: Option<u64>) -> usize {
        let picked = self.select(sel);
        for &s in &picked {
            if let Some(Some(r)) = self.slots.get_mut(s as usize) {
                if let Some(t) = self.tables.get_mut(r.flow.table as usize) {
                    t.conjunctive = t.conjunctive + usize::from(is_conjunctive(actions))
                        - usize::from(is_conjunctive(&r.flow.actions));
                }
                r.flow.actions = actions.to_vec();
                if let Some(c) = cookie {
                    r.flow.cookie = c;
                }
            }
        }
        if !picked.is_empty() {
            self.generation += 1;
        }
        picked.len()
    }

    /// The slots of the rules `sel` picks.
    fn select(&self, sel: &Selector) -> Vec<u32> {
        let live = |s: u32| self.rule(s).is_some_and(|r| sel.picks(&r.flow));
        match sel.strict {
            // Strict: only the subtable with this mask can hold it.
            Some(_) => {
                let tables = match sel.table {
                    Some(t) => self.tables.get(t as usize..=t as usize).unwrap_or(&[]),
                    None => &self.tables[..],
                };
                tables
                    .iter()
                    .flat_map(|t| &t.subtables)
                    .filter(|s| s.mask == sel.m.mask)
                    .filter_map(|s| s.buckets.get(&sel.m.value))
                    .flatten()
                    .copied()
                    .filter(|&s| live(s))
                    .collect()
            }
            None => (0..self.slots.len() as u32).filter(|&s| live(s)).collect(),
        }
    }

    /// The highest-priority rule of `table` matching `key`.
    pub fn lookup(&self, table: u8, key: &FlowKey) -> Option<RuleRef> {
        self.lookup_inner(table, key, None)
    }

    /// [`Classifier::lookup`], also adding to `wc` every key bit the
    /// answer depended on (OVS's wildcards): the masks of the subtables
    /// probed, whether they held a match or not. Any key equal to `key`
    /// on the bits of `wc` gets the same answer: a datapath may cache it
    /// as a megaflow under that mask.
    pub fn lookup_wc(&self, table: u8, key: &FlowKey, wc: &mut FlowKey) -> Option<RuleRef> {
        self.lookup_inner(table, key, Some(wc))
    }

    /// OVS's conjunctive match (`ovs-fields(7)`, conjunction): where the
    /// table has conjunctive rules, the ones that match above the best
    /// ordinary match are gathered by priority, highest first; the first
    /// priority at which some conjunction id has every clause matched
    /// makes the answer the rule that matches the key with `conj_id` set
    /// to that id. Otherwise the ordinary match stands. Such a decision
    /// depends on every rule of the table: all its masks join `wc`.
    fn lookup_inner(&self, table: u8, key: &FlowKey, wc: Option<&mut FlowKey>) -> Option<RuleRef> {
        let t = self.tables.get(table as usize)?;
        if t.conjunctive == 0 {
            return self.hard_lookup(table, key, wc);
        }
        if let Some(wc) = wc {
            for st in &t.subtables {
                for i in 0..WORDS {
                    wc.w[i] |= st.mask.w[i];
                }
            }
        }
        let matching = self.matching(t, key);
        let hard = best_plain(&matching);
        let floor = hard.map(|(_, p)| p);
        let mut soft: Vec<&Rule> = matching
            .iter()
            .map(|(_, r)| *r)
            .filter(|r| {
                is_conjunctive(&r.flow.actions) && floor.is_none_or(|p| r.flow.priority > p)
            })
            .collect();
        soft.sort_by_key(|r| std::cmp::Reverse(r.flow.priority));
        for group in soft.chunk_by(|a, b| a.flow.priority == b.flow.priority) {
            let mut clauses: BTreeMap<u32, (u64, u8)> = BTreeMap::new();
            for r in group {
                for a in &r.flow.actions {
                    if let Action::Conjunction {
                        id,
                        clause,
                        n_clauses,
                    } = *a
                    {
                        let e = clauses.entry(id).or_insert((0, n_clauses));
                        e.0 |= 1u64 << clause.min(63);
                    }
                }
            }
            let done = clauses.iter().find(|(_, (bits, n))| {
                let all = if *n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
                bits & all == all
            });
            if let Some((&id, _)) = done {
                let mut k = *key;
                k.set(crate::key::f::CONJ_ID, u64::from(id));
                if let Some((slot, _)) = best_plain(&self.matching(t, &k)) {
                    return Some(RuleRef { table, index: slot });
                }
            }
        }
        hard.map(|(slot, _)| RuleRef { table, index: slot })
    }

    /// Every rule of `t` that matches `key`, with its slot.
    fn matching<'a>(&'a self, t: &'a Table, key: &FlowKey) -> Vec<(u32, &'a Rule)> {
        t.subtables
            .iter()
            .filter_map(|st| st.buckets.get(&st.masked(key)))
            .flatten()
            .filter_map(|&s| Some((s, self.rule(s)?)))
            .collect()
    }

    /// The best ordinary (non-conjunctive) answer: the highest-priority
    /// rule matching `key`, conjunctive rules included as any other (a
    /// table without them), through the staged subtables.
    fn hard_lookup(
        &self,
        table: u8,
        key: &FlowKey,
        mut wc: Option<&mut FlowKey>,
    ) -> Option<RuleRef> {
        let t = self.tables.get(table as usize)?;
        let mut best: Option<(u32, (std::cmp::Reverse<u16>, u64))> = None;
        for st in &t.subtables {
            if let Some((_, (std::cmp::Reverse(p), _))) = best {
                if st.max_priority() < p {
                    break; // ordered by maximum priority: nothing better follows
                }
            }
            if let Some(wc) = wc.as_deref_mut() {
                if !st.passes_stages(key, wc) {
                    continue;
                }
            }
            let hit = st.buckets.get(&st.masked(key)).and_then(|b| b.first());
            if let Some((slot, r)) = hit.and_then(|&s| Some((s, self.rule(s)?))) {
                let order = r.order();
                if best.is_none_or(|(_, o)| order < o) {
                    best = Some((slot, order));
                }
            }
        }
        best.map(|(slot, _)| RuleRef { table, index: slot })
    }

    pub fn get(&self, r: RuleRef) -> Option<&Rule> {
        self.slots.get(r.index as usize)?.as_ref()
    }

    /// Count `packets` packets of `bytes` bytes in all against a rule, at
    /// time `now`.
    pub fn hit(&mut self, r: RuleRef, packets: u64, bytes: u64, now: u64) {
        if let Some(Some(rule)) = self.slots.get_mut(r.index as usize) {
            rule.packets += packets;
            rule.bytes += bytes;
            rule.used = now;
        }
    }

    /// Every rule, table by table, in lookup order (for dumps: the order
    /// is the same in two classifiers given the same adds and deletes).
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        let mut all: Vec<&Rule> = self.slots.iter().flatten().collect();
        all.sort_by_key(|r| (r.flow.table, r.order()));
        all.into_iter()
    }

    /// Whether some rule has an action for which `pred` holds.
    pub fn any_action(&self, pred: impl Fn(&Action) -> bool) -> bool {
        self.iter().any(|r| r.flow.actions.iter().any(&pred))
    }

    /// Every rule, in no particular order (cheaper than [`Self::rules`]).
    pub fn iter(&self) -> impl Iterator<Item = &Rule> {
        self.slots.iter().flatten()
    }

    /// The distinct masks of all tables (each subtable's).
    pub fn masks(&self) -> impl Iterator<Item = &FlowKey> {
        self.tables
            .iter()
            .flat_map(|t| &t.subtables)
            .map(|s| &s.mask)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// An exact-match cache: packet flow key to rule, per table, valid for one
/// classifier generation. Fixed size, no allocation after creation; a
/// collision simply replaces the entry.
#[derive(Debug, Clone)]
pub struct ExactMatchCache {
    entries: Vec<Option<(u64, u8, FlowKey, RuleRef)>>,
    pub hits: u64,
    pub misses: u64,
}

impl ExactMatchCache {
    /// A cache of `size` entries (rounded up to a power of two).
    pub fn new(size: usize) -> ExactMatchCache {
        ExactMatchCache {
            entries: vec![None; size.max(1).next_power_of_two()],
            hits: 0,
            misses: 0,
        }
    }

    fn slot(&self, table: u8, key: &FlowKey) -> usize {
        let mut h = table as u64;
        for w in key.w {
            h = (h.rotate_left(5) ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
        (h >> 32) as usize & (self.entries.len() - 1)
    }

    /// Look `key` up in `table`, through the cache.
    pub fn lookup(&mut self, c: &Classifier, table: u8, key: &FlowKey) -> Option<RuleRef> {
        let i = self.slot(table, key);
        if let Some((gen, t, k, r)) = &self.entries[i] {
            if *gen == c.generation() && *t == table && k == key {
                self.hits += 1;
                return Some(*r);
            }
        }
        self.misses += 1;
        let r = c.lookup(table, key)?;
        self.entries[i] = Some((c.generation(), table, *key, r));
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{parse_flow, Action, NumericPorts};
    use crate::key::f;
    use proptest::prelude::*;

    fn rule(s: &str) -> FlowRule {
        parse_flow(s, &NumericPorts).unwrap()
    }

    fn key(in_port: u64, vlan: Option<u64>) -> FlowKey {
        let mut k = FlowKey::default();
        k.set(f::IN_PORT, in_port);
        if let Some(v) = vlan {
            k.set(f::VLAN_TCI, 0x1000 | v);
        }
        k
    }

    /// ovs-fields(7)'s example of a conjunctive match: two clauses over
    /// source and destination addresses, and a rule above that takes
    /// precedence and one below that does not.
    #[test]
    fn conjunctive_matches_as_ovs_fields_describes() {
        let mut c = Classifier::new();
        for r in [
            "conj_id=1234,ip actions=output:1",
            "ip,nw_src=10.0.0.1 actions=conjunction(1234,1/2)",
            "ip,nw_src=10.0.0.4 actions=conjunction(1234,1/2)",
            "ip,nw_src=10.0.0.6 actions=conjunction(1234,1/2)",
            "ip,nw_dst=10.0.0.2 actions=conjunction(1234,2/2)",
            "ip,nw_dst=10.0.0.5 actions=conjunction(1234,2/2)",
            "priority=40000,ip,nw_dst=10.0.0.9 actions=output:9",
            "priority=10,ip actions=output:7",
        ] {
            c.add(rule(r), 0);
        }
        let key = |src: [u8; 4], dst: [u8; 4]| {
            let mut k = FlowKey::default();
            k.set(f::DL_TYPE, 0x0800);
            k.set(f::NW_SRC, u64::from(u32::from_be_bytes(src)));
            k.set(f::NW_DST, u64::from(u32::from_be_bytes(dst)));
            k
        };
        let out = |c: &Classifier, k: FlowKey| {
            let mut wc = FlowKey::default();
            let r = c.lookup_wc(0, &k, &mut wc).unwrap();
            // A conjunctive decision depends on every rule of the table.
            assert_eq!(wc.get(f::NW_SRC), 0xffff_ffff);
            assert_eq!(wc.get(f::NW_DST), 0xffff_ffff);
            c.get(r).unwrap().flow.actions[0].clone()
        };
        assert_eq!(
            out(&c, key([10, 0, 0, 4], [10, 0, 0, 5])),
            Action::Output(1)
        );
        assert_eq!(
            out(&c, key([10, 0, 0, 1], [10, 0, 0, 2])),
            Action::Output(1)
        );
        // One clause only: the ordinary rule below.
        assert_eq!(
            out(&c, key([10, 0, 0, 4], [10, 0, 0, 3])),
            Action::Output(7)
        );
        assert_eq!(
            out(&c, key([10, 0, 0, 9], [10, 0, 0, 5])),
            Action::Output(7)
        );
        // A rule above the clauses wins.
        assert_eq!(
            out(&c, key([10, 0, 0, 4], [10, 0, 0, 9])),
            Action::Output(9)
        );
        // The cache agrees with the classifier.
        let mut emc = ExactMatchCache::new(16);
        let r = emc
            .lookup(&c, 0, &key([10, 0, 0, 6], [10, 0, 0, 2]))
            .unwrap();
        assert_eq!(c.get(r).unwrap().flow.actions[0], Action::Output(1));
        // Deleting a clause's last rule undoes the conjunction.
        c.delete(
            None,
            &rule("ip,nw_dst=10.0.0.5 actions=drop").m,
            Some(32768),
        );
        assert_eq!(
            out(&c, key([10, 0, 0, 4], [10, 0, 0, 5])),
            Action::Output(7)
        );
    }

    #[test]
    fn priority_then_insertion_order() {
        let mut c = Classifier::new();
        c.add(rule("priority=10,in_port=1 actions=output:2"), 0);
        c.add(rule("priority=20,in_port=1,dl_vlan=5 actions=output:3"), 0);
        c.add(rule("priority=20,in_port=1 actions=output:4"), 0);
        let out =
            |c: &Classifier, k| c.get(c.lookup(0, &k).unwrap()).unwrap().flow.actions[0].clone();
        assert_eq!(out(&c, key(1, Some(5))), Action::Output(3));
        assert_eq!(out(&c, key(1, Some(6))), Action::Output(4));
        assert_eq!(out(&c, key(1, None)), Action::Output(4));
        assert!(c.lookup(0, &key(2, None)).is_none());
        assert!(c.lookup(7, &key(1, None)).is_none());
    }

    #[test]
    fn add_replaces_same_match_and_keeps_counters() {
        let mut c = Classifier::new();
        c.add(rule("in_port=1 actions=output:2"), 0);
        let r = c.lookup(0, &key(1, None)).unwrap();
        c.hit(r, 1, 100, 1);
        assert!(c.add(rule("in_port=1 actions=output:3"), 5));
        assert_eq!(c.len(), 1);
        let rr = c.get(c.lookup(0, &key(1, None)).unwrap()).unwrap();
        assert_eq!(
            (rr.packets, rr.bytes, rr.flow.actions[0].clone()),
            (1, 100, Action::Output(3))
        );
    }

    #[test]
    fn modify_keeps_counters_and_cookies_pick_rules() {
        let mut c = Classifier::new();
        c.add(rule("cookie=0x11,in_port=1,dl_vlan=1 actions=output:2"), 0);
        c.add(rule("cookie=0x12,in_port=1,dl_vlan=5 actions=output:6"), 0);
        c.add(rule("cookie=0x21,priority=5,in_port=1 actions=drop"), 0);
        let r = c.lookup(0, &key(1, Some(5))).unwrap();
        c.hit(r, 1, 64, 1);
        let gen = c.generation();
        let any = Selector {
            m: rule("in_port=1 actions=drop").m,
            ..Selector::default()
        };
        // Non-strict, cookies 0x1X only: the two VLAN rules.
        let sel = Selector {
            cookie: Some((0x10, 0xf0)),
            ..any
        };
        assert_eq!(c.modify(&sel, &[Action::Output(9)], None), 2);
        assert!(c.generation() > gen, "caches must see the change");
        let rr = c.get(c.lookup(0, &key(1, Some(5))).unwrap()).unwrap();
        assert_eq!(
            (rr.packets, rr.bytes, rr.flow.actions.as_slice()),
            (1, 64, &[Action::Output(9)][..])
        );
        assert_eq!(rr.flow.cookie, 0x12);
        // Strict: exactly the priority-5 rule.
        let strict = Selector {
            strict: Some(5),
            ..any
        };
        assert_eq!(c.modify(&strict, &[], Some(0x99)), 1);
        let low = c.get(c.lookup(0, &key(1, None)).unwrap()).unwrap();
        assert_eq!((low.flow.cookie, low.flow.actions.len()), (0x99, 0));
        // Nothing picked: nothing changes, not even the generation.
        let gen = c.generation();
        let none = Selector {
            cookie: Some((0x5, u64::MAX)),
            ..any
        };
        assert_eq!(c.modify(&none, &[], None), 0);
        assert_eq!(c.delete_where(&none), 0);
        assert_eq!(c.generation(), gen);
        let ones = Selector {
            cookie: Some((0x10, 0xf0)),
            ..any
        };
        assert_eq!(c.delete_where(&ones), 2);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn delete_strict_and_not() {
        let mut c = Classifier::new();
        c.add(rule("in_port=1,dl_vlan=1 actions=pop_vlan,output:2"), 0);
        c.add(rule("in_port=1,dl_vlan=5 actions=pop_vlan,output:6"), 0);
        c.add(rule("priority=5,in_port=1 actions=drop"), 0);
        c.add(rule("in_port=2 actions=output:1"), 0);
        let m = rule("in_port=1 actions=drop").m;
        assert_eq!(c.delete(None, &m, Some(100)), 0);
        assert_eq!(c.delete(None, &m, Some(5)), 1);
        assert_eq!(c.delete(Some(0), &m, None), 2);
        assert_eq!(c.len(), 1);
        assert_eq!(c.delete(None, &Match::default(), None), 1);
        assert!(c.is_empty());
    }

    #[test]
    fn cache_follows_rule_changes() {
        let mut c = Classifier::new();
        let mut emc = ExactMatchCache::new(64);
        c.add(rule("in_port=1 actions=output:2"), 0);
        let k = key(1, None);
        for _ in 0..10 {
            assert!(emc.lookup(&c, 0, &k).is_some());
        }
        assert_eq!((emc.hits, emc.misses), (9, 1));
        c.add(rule("priority=40000,in_port=1 actions=output:9"), 0);
        let r = emc.lookup(&c, 0, &k).unwrap();
        assert_eq!(c.get(r).unwrap().flow.actions[0], Action::Output(9));
        c.delete(None, &Match::default(), None);
        assert!(emc.lookup(&c, 0, &k).is_none());
    }

    #[test]
    fn deleted_slots_are_reused_and_order_holds() {
        let mut c = Classifier::new();
        c.add(rule("priority=5,in_port=1 actions=output:1"), 0);
        c.add(rule("priority=5,dl_vlan=3 actions=output:2"), 0);
        c.add(rule("priority=9,in_port=1,dl_vlan=3 actions=output:3"), 0);
        let m = rule("priority=9,in_port=1,dl_vlan=3 actions=drop").m;
        assert_eq!(c.delete(None, &m, Some(9)), 1);
        // Same priority, two masks: the older rule wins.
        let out =
            |c: &Classifier, k| c.get(c.lookup(0, &k).unwrap()).unwrap().flow.actions[0].clone();
        assert_eq!(out(&c, key(1, Some(3))), Action::Output(1));
        c.add(rule("priority=7,dl_vlan=3 actions=output:4"), 0);
        assert_eq!(out(&c, key(1, Some(3))), Action::Output(4));
        assert_eq!(c.len(), 3);
        let prios: Vec<u16> = c.rules().map(|r| r.flow.priority).collect();
        assert_eq!(prios, [7, 5, 5]);
        assert_eq!(c.masks().count(), 2);
    }

    /// One step of the model test: add a rule, or delete strictly or not.
    #[derive(Debug, Clone)]
    enum Step {
        Add(u16, u64, Option<u64>, u32),
        DelStrict(u16, u64, Option<u64>),
        DelPort(u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        let vlan = proptest::option::of(0u64..3);
        prop_oneof![
            6 => (0u16..4, 0u64..4, vlan.clone(), 0u32..50).prop_map(|(p, i, v, o)| Step::Add(p, i, v, o)),
            2 => (0u16..4, 0u64..4, vlan).prop_map(|(p, i, v)| Step::DelStrict(p, i, v)),
            1 => (0u64..4).prop_map(Step::DelPort),
        ]
    }

    fn text(prio: u16, port: u64, vlan: Option<u64>, out: u32) -> String {
        match vlan {
            Some(v) => format!("priority={prio},in_port={port},dl_vlan={v} actions=output:{out}"),
            None => format!("priority={prio},in_port={port} actions=output:{out}"),
        }
    }

    proptest! {
        /// Under any mix of adds and deletes the classifier agrees with a
        /// list of rules in insertion order scanned end to end.
        #[test]
        fn survives_adds_and_deletes(steps in proptest::collection::vec(step(), 1..40)) {
            let mut c = Classifier::new();
            let mut flat: Vec<FlowRule> = Vec::new();
            for s in steps {
                match s {
                    Step::Add(p, i, v, o) => {
                        let r = rule(&text(p, i, v, o));
                        if let Some(old) = flat.iter_mut().find(|x| x.priority == r.priority && x.m == r.m) {
                            old.actions = r.actions.clone();
                        } else {
                            flat.push(r.clone());
                        }
                        c.add(r, 0);
                    }
                    Step::DelStrict(p, i, v) => {
                        let r = rule(&text(p, i, v, 0));
                        let before = flat.len();
                        flat.retain(|x| !(x.priority == p && x.m == r.m));
                        prop_assert_eq!(c.delete(Some(0), &r.m, Some(p)), before - flat.len());
                    }
                    Step::DelPort(i) => {
                        let r = rule(&format!("in_port={i} actions=drop"));
                        let before = flat.len();
                        flat.retain(|x| x.m.mask.get(crate::key::f::IN_PORT) == 0 || x.m.value.get(crate::key::f::IN_PORT) != i);
                        prop_assert_eq!(c.delete(None, &r.m, None), before - flat.len());
                    }
                }
                prop_assert_eq!(c.len(), flat.len());
                for port in 0..4 {
                    for vlan in [None, Some(0), Some(1), Some(2)] {
                        let k = key(port, vlan);
                        let best = flat.iter().filter(|r| r.m.matches(&k)).map(|r| r.priority).max();
                        let want = best.map(|p| flat.iter().find(|x| x.priority == p && x.m.matches(&k)).unwrap().actions.clone());
                        let got = c.lookup(0, &k).map(|r| c.get(r).unwrap().flow.actions.clone());
                        prop_assert_eq!(got, want);
                    }
                }
            }
        }
    }

    proptest! {
        /// The classifier agrees with a brute-force scan, with and without
        /// the cache, whatever the rules and keys.
        #[test]
        fn agrees_with_brute_force(
            rules in proptest::collection::vec((0u16..4, 0u64..4, proptest::option::of(0u64..3), 0u32..50), 1..20),
            keys in proptest::collection::vec((0u64..4, proptest::option::of(0u64..3)), 1..30)
        ) {
            let mut c = Classifier::new();
            let mut flat: Vec<FlowRule> = Vec::new();
            for (prio, port, vlan, out) in &rules {
                let text = match vlan {
                    Some(v) => format!("priority={prio},in_port={port},dl_vlan={v} actions=output:{out}"),
                    None => format!("priority={prio},in_port={port} actions=output:{out}"),
                };
                let r = rule(&text);
                if let Some(old) = flat.iter_mut().find(|o| o.priority == r.priority && o.m == r.m) {
                    old.actions = r.actions.clone();
                } else {
                    flat.push(r.clone());
                }
                c.add(r, 0);
            }
            let mut emc = ExactMatchCache::new(4);
            for (port, vlan) in keys {
                let k = key(port, vlan);
                let want = flat.iter().filter(|r| r.m.matches(&k)).max_by_key(|r| r.priority).map(|r| {
                    // Among equal priorities, the first added.
                    let p = r.priority;
                    flat.iter().find(|x| x.priority == p && x.m.matches(&k)).unwrap().actions.clone()
                });
                let got = c.lookup(0, &k).map(|r| c.get(r).unwrap().flow.actions.clone());
                let cached = emc.lookup(&c, 0, &k).map(|r| c.get(r).unwrap().flow.actions.clone());
                prop_assert_eq!(&got, &want);
                prop_assert_eq!(&cached, &want);
            }
        }
    }
}
