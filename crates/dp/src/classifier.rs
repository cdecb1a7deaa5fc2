//! Flow tables: rules ordered by priority, looked up by masked match, with
//! an exact-match cache in front so that steady traffic does not walk the
//! rule list.
//!
//! Semantics follow ovs-ofctl: `add` replaces a rule with the same table,
//! priority and match (keeping its counters, as `mod-flows` would reset
//! them only when asked); `delete` is non-strict by default (every rule at
//! least as specific as the given match) or strict (same priority and
//! match); among matching rules the highest priority wins, and among equal
//! priorities the rule added first.

use crate::flow::{FlowRule, Match};
use crate::key::{FlowKey, WORDS};

/// A rule in a table, with its counters.
#[derive(Debug, Clone)]
pub struct Rule {
    pub flow: FlowRule,
    /// Words of the key this rule's mask touches (the rest are wildcards).
    words: Vec<u8>,
    pub packets: u64,
    pub bytes: u64,
    /// Caller's time when the rule was added (for `duration=` in dumps).
    pub added: u64,
    seq: u64,
}

impl Rule {
    #[inline]
    fn matches(&self, key: &FlowKey) -> bool {
        let m = &self.flow.m;
        self.words.iter().all(|&i| {
            let i = i as usize;
            key.w[i] & m.mask.w[i] == m.value.w[i]
        })
    }
}

/// Where a rule is: table and position. Valid until the tables change
/// (check [`Classifier::generation`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleRef {
    pub table: u8,
    pub index: u32,
}

/// All flow tables of one switch.
#[derive(Debug, Default, Clone)]
pub struct Classifier {
    tables: Vec<Vec<Rule>>,
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

    fn table_mut(&mut self, t: u8) -> &mut Vec<Rule> {
        let t = t as usize;
        if self.tables.len() <= t {
            self.tables.resize_with(t + 1, Vec::new);
        }
        &mut self.tables[t]
    }

    /// Add a rule, or replace the one with the same table, priority and
    /// match (its counters are kept). Returns true if it replaced one.
    pub fn add(&mut self, flow: FlowRule, now: u64) -> bool {
        self.generation += 1;
        self.seq += 1;
        let seq = self.seq;
        let words = (0..WORDS as u8)
            .filter(|&i| flow.m.mask.w[i as usize] != 0)
            .collect();
        let table = self.table_mut(flow.table);
        if let Some(r) = table
            .iter_mut()
            .find(|r| r.flow.priority == flow.priority && r.flow.m == flow.m)
        {
            r.flow.actions = flow.actions;
            r.flow.cookie = flow.cookie;
            return true;
        }
        let at = table.partition_point(|r| r.flow.priority >= flow.priority);
        table.insert(
            at,
            Rule {
                flow,
                words,
                packets: 0,
                bytes: 0,
                added: now,
                seq,
            },
        );
        false
    }

    /// Delete rules in `table` (all tables if `None`): non-strict removes
    /// every rule whose match is at least as specific as `m`; strict removes
    /// the rule with exactly this match and `priority`. Returns how many.
    pub fn delete(&mut self, table: Option<u8>, m: &Match, strict: Option<u16>) -> usize {
        let mut n = 0;
        for (t, rules) in self.tables.iter_mut().enumerate() {
            if table.is_some_and(|x| x as usize != t) {
                continue;
            }
            let before = rules.len();
            rules.retain(|r| {
                let hit = match strict {
                    Some(prio) => r.flow.priority == prio && r.flow.m == *m,
                    None => (0..WORDS).all(|i| {
                        r.flow.m.mask.w[i] & m.mask.w[i] == m.mask.w[i]
                            && r.flow.m.value.w[i] & m.mask.w[i] == m.value.w[i]
                    }),
                };
                !hit
            });
            n += before - rules.len();
        }
        if n > 0 {
            self.generation += 1;
        }
        n
    }

    /// The highest-priority rule of `table` matching `key`.
    pub fn lookup(&self, table: u8, key: &FlowKey) -> Option<RuleRef> {
        let rules = self.tables.get(table as usize)?;
        let mut best: Option<(usize, u16, u64)> = None;
        for (i, r) in rules.iter().enumerate() {
            if let Some((_, prio, _)) = best {
                if r.flow.priority < prio {
                    break; // sorted by priority: nothing better follows
                }
            }
            if r.matches(key) {
                match best {
                    Some((_, p, s)) if p == r.flow.priority && s < r.seq => {}
                    _ => best = Some((i, r.flow.priority, r.seq)),
                }
            }
        }
        best.map(|(i, _, _)| RuleRef {
            table,
            index: i as u32,
        })
    }

    pub fn get(&self, r: RuleRef) -> Option<&Rule> {
        self.tables.get(r.table as usize)?.get(r.index as usize)
    }

    /// Count a packet of `bytes` against a rule.
    pub fn hit(&mut self, r: RuleRef, bytes: u64) {
        if let Some(rule) = self
            .tables
            .get_mut(r.table as usize)
            .and_then(|t| t.get_mut(r.index as usize))
        {
            rule.packets += 1;
            rule.bytes += bytes;
        }
    }

    /// Every rule, table by table, in lookup order.
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.tables.iter().flatten()
    }

    pub fn len(&self) -> usize {
        self.tables.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    #[test]
    fn priority_then_insertion_order() {
        let mut c = Classifier::new();
        c.add(rule("priority=10,in_port=1 actions=output:2"), 0);
        c.add(rule("priority=20,in_port=1,dl_vlan=5 actions=output:3"), 0);
        c.add(rule("priority=20,in_port=1 actions=output:4"), 0);
        let out = |c: &Classifier, k| c.get(c.lookup(0, &k).unwrap()).unwrap().flow.actions[0];
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
        c.hit(r, 100);
        assert!(c.add(rule("in_port=1 actions=output:3"), 5));
        assert_eq!(c.len(), 1);
        let rr = c.get(c.lookup(0, &key(1, None)).unwrap()).unwrap();
        assert_eq!(
            (rr.packets, rr.bytes, rr.flow.actions[0]),
            (1, 100, Action::Output(3))
        );
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
