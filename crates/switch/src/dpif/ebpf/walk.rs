//! After a rule change, the cached flows walked one by one, as OVS's
//! revalidators walk the datapath's: each is decided again under the new
//! rules and kept, given new actions in place, or rebuilt under a new mask
//! before its old entry goes (make-before-break, where OVS deletes it and
//! lets its next packet miss).

use super::riders::Samples;
use super::*;

/// A cached flow whose mask no longer covers its decision, and the
/// microflows known to ride it, each decided again from its whole key:
/// (key, the decision's mask, its flow).
struct Rebuild {
    old: km::CKey,
    news: Vec<(FlowKey, FlowKey, Flow)>,
}

impl Kernel {
    /// [`Dpif::revalidate_each`]: every cached flow of this generation
    /// decided again under the new rules, against its own mask.
    pub(super) fn walk(&mut self, decide: &mut Decide<'_>, tlv: &TlvMap) -> Result<Walked, String> {
        let generation = self.dp.generation();
        let new_union = self.new_union.take();
        let (mut kept, mut deleted) = (0, 0);
        let mut replace: Vec<(km::CKey, Flow)> = Vec::new();
        let mut rebuild: Vec<Rebuild> = Vec::new();
        // The programs' samples of whole keys, read when a flow first
        // needs them.
        let mut samples: Option<Samples> = None;
        // Walked in batches on a descriptor of its own, each batch's
        // changed flows deleted before the next: a million cached flows
        // are never all in memory at once.
        let limit = self.each_flow_limit;
        let walked = self
            .dp
            .flow_batch()
            .map_err(|e| e.to_string())
            .and_then(|mut b| {
                b.sweep_at_most(limit, &mut |k, cached| {
                    // Older generations are the revalidator thread's to sweep.
                    if cached.generation != generation {
                        return false;
                    }
                    if km::mask_id(k) == 0 && new_union.is_some() {
                        deleted += 1;
                        self.upcall_keys.forget(k);
                        return true;
                    }
                    let key = self.dp.unpack(k);
                    let (decision, wc) = decide(&key);
                    let now = self.compile(&key, decision.as_deref().map_err(|e| *e), tlv);
                    match now {
                        Ok(f) if self.dp.mask_of(k).covers(&wc) => {
                            let n = cached.n_ops as usize;
                            if f.n_ops != cached.n_ops || f.ops.get(..n) != cached.ops.get(..n) {
                                // New actions under the same mask: the
                                // entry is replaced in place, never missed.
                                replace.push((*k, f));
                            } else {
                                kept += 1;
                            }
                            false
                        }
                        // The decision reads more than the mask kept: the
                        // microflows known to ride the entry (the upcall
                        // that made it, the keys the programs sampled) are
                        // decided again, and their entries go in before
                        // this one goes.
                        _ => {
                            let sampled = samples.get_or_insert_with(|| {
                                Samples::new(self.dp.key_samples().unwrap_or_default())
                            });
                            let news = self.decide_riders(k, &key, sampled, decide, tlv);
                            if news.is_empty() {
                                deleted += 1;
                                self.upcall_keys.forget(k);
                                true
                            } else {
                                rebuild.push(Rebuild { old: *k, news });
                                false
                            }
                        }
                    }
                })
                .map_err(|e| format!("walking the cached flows: {e}"))
            });
        let walked = walked.and_then(|all| {
            if let Some(m) = new_union {
                self.dp.set_union_mask(&m).map_err(|e| e.to_string())?;
            }
            let replaced = replace.len() as u64;
            self.replaced += replaced;
            for (k, f) in replace {
                self.dp.install_packed(k, f).map_err(|e| e.to_string())?;
            }
            let (rebuilt, not) = self.rebuild(rebuild)?;
            deleted += not;
            Ok((all, replaced, rebuilt))
        });
        match walked {
            Ok((true, replaced, rebuilt)) => {
                self.each_flow_changes += 1;
                self.deleted_by_change += deleted;
                Ok(Walked {
                    kept,
                    replaced,
                    rebuilt,
                    deleted,
                })
            }
            // Too many to check now: none may forward unchecked.
            Ok((false, replaced, rebuilt)) => self.flush_after(new_union).map(|()| Walked {
                deleted: kept + replaced + rebuilt + deleted,
                ..Walked::default()
            }),
            Err(e) => {
                // Unchecked flows must not forward: a new generation instead.
                self.flush_after(new_union)?;
                Err(format!("{e}; every cached flow is a miss instead"))
            }
        }
    }

    /// The microflows known to ride cached flow `k` (masked key `key`):
    /// the upcall that made it and the sampled keys it covers, each
    /// decided again from its whole key, where the kernel can carry the
    /// decision: (whole key, the decision's mask, its flow).
    fn decide_riders(
        &mut self,
        k: &km::CKey,
        key: &FlowKey,
        sampled: &mut Samples,
        decide: &mut Decide<'_>,
        tlv: &TlvMap,
    ) -> Vec<(FlowKey, FlowKey, Flow)> {
        let mask = self.dp.mask_of(k);
        let riders = self.upcall_keys.get(k).copied().into_iter();
        let riders: Vec<FlowKey> = riders
            .chain(sampled.riding(&mask, key).iter().copied())
            .collect();
        let mut news = Vec::new();
        for whole in riders {
            let (decision, wc) = decide(&whole);
            if let Ok(flow) = self.compile(&whole, decision.as_deref().map_err(|e| *e), tlv) {
                news.push((whole, wc, flow));
            }
        }
        news
    }

    /// Make-before-break: each flow's new entries go in under their new
    /// masks, then its old entry is deleted (a packet finds one or the
    /// other: the old is still there while the new go in, and the new are
    /// there once the old has gone). A flow none of whose new entries
    /// could go in is deleted, a miss. How many were rebuilt, and how many
    /// deleted instead.
    fn rebuild(&mut self, flows: Vec<Rebuild>) -> Result<(u64, u64), String> {
        let (mut rebuilt, mut not) = (0, 0);
        for r in flows {
            let mut put = 0;
            let mut kept_old = false;
            for (whole, wc, flow) in r.news {
                if let Ok(new) = self.put(&whole, &wc, flow) {
                    put += 1;
                    self.upcall_keys.remember(new, &whole);
                    kept_old |= new == r.old;
                }
            }
            match put {
                0 => not += 1,
                _ => rebuilt += 1,
            }
            if kept_old {
                continue;
            }
            self.upcall_keys.forget(&r.old);
            self.dp.remove_packed(&r.old).map_err(|e| e.to_string())?;
        }
        self.rebuilt += rebuilt;
        Ok((rebuilt, not))
    }
}
