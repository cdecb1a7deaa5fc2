//! The microflows known to ride each cached flow: the whole key of the
//! packet whose upcall made it ([`UpcallKeys`]), and the whole keys the
//! TC programs sampled from the packets that hit ([`Samples`]).
//!
//! The kernel's cache holds a flow under its masked key only. When a rule
//! change makes a flow depend on a field its mask left out, the masked key
//! cannot be decided again: the field's value is gone. With the upcall's
//! whole key the flow is decided again as that packet would be, the new
//! entry goes in under its new mask, and only then does the old one go
//! (make-before-break): the flow's packets never miss, so none go up to
//! the slow path to be overtaken by those that follow. OVS's revalidators
//! delete such a flow and let its next packet miss.
//!
//! An entry carries every microflow its masked key covers, and only the
//! first one went up; the others are known from the samples (every 16th
//! hit on a CPU, the last 256 there), so a busy microflow is known and a
//! light one may not be: it misses once after the change, as under OVS.
//!
//! Upcall keys are bounded: a change walks at most
//! [`super::EACH_FLOW_LIMIT`] flows (more take a new generation, which
//! forgets every key), so no more are kept. The revalidator thread reports
//! the flows it expires; their keys are forgotten unless the flow was made
//! again after the sweep began.

use std::collections::HashMap;
use std::time::Instant;
use tunlab_dp::FlowKey;
use tunlab_ebpf::maps::CKey;

/// Cache key -> (the upcall's whole key, when it was remembered).
#[derive(Debug, Default)]
pub(super) struct UpcallKeys {
    keys: HashMap<CKey, (FlowKey, Instant)>,
    cap: usize,
    /// Flows made while the table was full: a change that needs their
    /// whole key deletes them instead (a miss).
    pub not_kept: u64,
}

impl UpcallKeys {
    pub fn new(cap: usize) -> UpcallKeys {
        UpcallKeys {
            keys: HashMap::new(),
            cap,
            not_kept: 0,
        }
    }

    /// The flow at `ck` was made by a packet whose key is `key`.
    pub fn remember(&mut self, ck: CKey, key: &FlowKey) {
        if self.keys.len() >= self.cap && !self.keys.contains_key(&ck) {
            self.not_kept += 1;
            return;
        }
        self.keys.insert(ck, (*key, Instant::now()));
    }

    pub fn get(&self, ck: &CKey) -> Option<&FlowKey> {
        self.keys.get(ck).map(|(k, _)| k)
    }

    pub fn forget(&mut self, ck: &CKey) {
        self.keys.remove(ck);
    }

    /// A new generation: no flow of the old one forwards again.
    pub fn clear(&mut self) {
        self.keys.clear();
    }

    /// The revalidator deleted `gone` in a sweep that began at `since`
    /// (or more than it could list, with `all_before`): a key remembered
    /// after that is of a flow made again since, and stays.
    pub fn swept(&mut self, gone: &[CKey], all_before: bool, since: Instant) {
        if all_before {
            self.keys.retain(|_, (_, at)| *at >= since);
            return;
        }
        for ck in gone {
            if self.keys.get(ck).is_some_and(|(_, at)| *at < since) {
                self.keys.remove(ck);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

/// The programs' samples of whole keys, each once, found by the masked
/// key of the entry they ride (indexed per mask as the walk first asks
/// for it: a walk may ask for 100,000 entries).
#[derive(Debug, Default)]
pub(super) struct Samples {
    keys: Vec<FlowKey>,
    by_mask: HashMap<FlowKey, HashMap<FlowKey, Vec<FlowKey>>>,
}

impl Samples {
    pub fn new(mut keys: Vec<FlowKey>) -> Samples {
        keys.sort_unstable_by_key(|k| k.w);
        keys.dedup();
        Samples {
            keys,
            by_mask: HashMap::new(),
        }
    }

    /// The sampled keys that `key` under `mask` covers.
    pub fn riding(&mut self, mask: &FlowKey, key: &FlowKey) -> &[FlowKey] {
        let keys = &self.keys;
        self.by_mask
            .entry(*mask)
            .or_insert_with(|| {
                let mut m: HashMap<FlowKey, Vec<FlowKey>> = HashMap::new();
                for k in keys {
                    m.entry(k.masked(mask)).or_default().push(*k);
                }
                m
            })
            .get(key)
            .map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(n: u64) -> CKey {
        let mut k = CKey::default();
        k.w[0] = n;
        k
    }

    fn key(n: u64) -> FlowKey {
        let mut k = FlowKey::default();
        k.w[3] = n;
        k
    }

    #[test]
    fn samples_are_found_by_the_entry_they_ride() {
        let (a, b, c) = (key(1), key(2), key(0x100));
        let mut mask = FlowKey::default();
        mask.w[3] = 0xff00;
        let mut s = Samples::new(vec![a, b, a, c]);
        // a and b fold into one entry (word 3 = 0), c is another's.
        assert_eq!(s.riding(&mask, &a.masked(&mask)), &[a, b]);
        assert_eq!(s.riding(&mask, &c.masked(&mask)), &[c]);
        assert_eq!(s.riding(&mask, &key(0x200)), &[] as &[FlowKey]);
        // Under a mask that keeps the whole word, each is its own.
        mask.w[3] = u64::MAX;
        assert_eq!(s.riding(&mask, &b), &[b]);
    }

    #[test]
    fn keys_are_bounded_and_a_full_table_counts_what_it_could_not_keep() {
        let mut u = UpcallKeys::new(2);
        u.remember(ck(1), &key(10));
        u.remember(ck(2), &key(20));
        u.remember(ck(3), &key(30));
        assert_eq!((u.len(), u.not_kept), (2, 1));
        assert_eq!(u.get(&ck(3)), None);
        // A flow made again under a key it holds is still kept.
        u.remember(ck(2), &key(21));
        assert_eq!((u.get(&ck(2)), u.not_kept), (Some(&key(21)), 1));
        u.forget(&ck(1));
        u.remember(ck(3), &key(30));
        assert_eq!(u.get(&ck(3)), Some(&key(30)));
    }

    #[test]
    fn a_sweep_forgets_only_flows_made_before_it_began() {
        let mut u = UpcallKeys::new(10);
        u.remember(ck(1), &key(1));
        u.remember(ck(2), &key(2));
        let since = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        // Made again while the sweep ran: the sweep deleted the old one.
        u.remember(ck(1), &key(11));
        u.remember(ck(3), &key(3));
        u.swept(&[ck(1), ck(2)], false, since);
        assert_eq!(u.get(&ck(1)), Some(&key(11)));
        assert_eq!(u.get(&ck(2)), None);
        // Too many to list: everything remembered before the sweep goes.
        let mut v = UpcallKeys::new(10);
        v.remember(ck(5), &key(5));
        let since = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        v.remember(ck(6), &key(6));
        v.swept(&[], true, since);
        assert_eq!((v.get(&ck(5)), v.get(&ck(6))), (None, Some(&key(6))));
        v.clear();
        assert_eq!(v.len(), 0);
    }
}
