//! The revalidator's handle on the flow cache.

use super::*;

impl KernelDatapath {
    /// A second handle on the flow cache for a revalidator thread, which
    /// then sweeps it without holding up the thread that owns this.
    pub fn sweeper(&self) -> Result<FlowSweeper, Error> {
        let handle = |name: &'static str| -> Result<aya::maps::Map, Error> {
            let data = aya::maps::MapData::from_fd(self.dup_fd(name)?).map_err(map_err(name))?;
            aya::maps::Map::from_map_data(data).map_err(map_err(name))
        };
        Ok(FlowSweeper {
            capacity: self.flow_capacity as u64,
            counts: std::collections::HashMap::new(),
            deltas: Vec::new(),
            deleted: Vec::new(),
            deleted_unlisted: false,
            batch: Some(self.flow_batch()?),
            flows: HashMap::try_from(handle("tl_flows")?).map_err(map_err("tl_flows"))?,
            generation: Array::try_from(handle("tl_generation")?)
                .map_err(map_err("tl_generation"))?,
        })
    }
}

/// The flow cache as a revalidator sees it: it deletes entries that no
/// packet has used for a while, and entries of an earlier generation
/// (which no packet can use again), as OVS's revalidators expire datapath
/// flows after `max-idle`; and when the cache is nearly full, the entries
/// used longest ago, down to [`EVICT_TO`] of its capacity (the kernel map
/// does not evict by itself).
pub struct FlowSweeper {
    capacity: u64,
    /// Each live entry's counters at the last sweep.
    counts: std::collections::HashMap<CKey, (u64, u64)>,
    /// What entries carried since the last sweep: key, packets, bytes
    /// ([`Self::take_deltas`]).
    deltas: Vec<(CKey, u64, u64)>,
    /// The live entries deleted since [`Self::take_deleted`] (idle or
    /// evicted), up to [`DELETED_LISTED`]; true: more went than listed.
    deleted: Vec<CKey>,
    deleted_unlisted: bool,
    flows: HashMap<aya::maps::MapData, CKey, Flow>,
    generation: Array<aya::maps::MapData, u64>,
    /// Batched reads and deletes (`BPF_MAP_*_BATCH`); None once the
    /// kernel refused them, and the sweep goes entry by entry.
    batch: Option<FlowBatch>,
}

impl std::fmt::Debug for FlowSweeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowSweeper").finish_non_exhaustive()
    }
}

/// What one sweep found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Entries in the cache before the sweep.
    pub seen: u64,
    /// Deleted: idle on every CPU for longer than the limit.
    pub idle: u64,
    /// Deleted: of an earlier generation.
    pub stale: u64,
    /// Deleted to make room: used longest ago while the cache was over
    /// [`EVICT_FROM`] of its capacity.
    pub evicted: u64,
}

/// A sweep that leaves more live entries than this share of the cache's
/// capacity evicts...
pub const EVICT_FROM: f64 = 0.9;
/// ...the least recently used down to this share.
pub const EVICT_TO: f64 = 0.75;
/// Deleted entries a sweep lists for [`FlowSweeper::take_deleted`]; past
/// this it only says that more went (a vector of a million keys would
/// be 80 MB).
pub const DELETED_LISTED: usize = 200_000;
/// Buckets of the idle-time histogram eviction chooses its cut-off from.
const AGE_BUCKETS: usize = 1024;

impl FlowSweeper {
    /// Delete every entry idle for longer than `max_idle`, and every
    /// stale one; then, if more live entries than [`EVICT_FROM`] of the
    /// capacity remain, those used longest ago down to [`EVICT_TO`]. The
    /// cache is read in batches of [`BATCH`] entries a system call (a
    /// million entries take about 0.4 s of this thread instead of 3 s one
    /// by one), none of the packet threads' time.
    pub fn sweep(&mut self, max_idle: std::time::Duration) -> Result<Sweep, Error> {
        let generation = self
            .generation
            .get(&0, 0)
            .map_err(map_err("tl_generation"))?;
        let limit =
            (max_idle.as_nanos() >> crate::maps::USED_SHIFT).min(u32::MAX as u128 / 2) as u32;
        let now = crate::maps::used_now();
        // Idle time in the clock's units, modulo 2^32; a use after `now`
        // was read counts as none.
        let idle_for = |f: &Flow| match now.wrapping_sub(f.used) {
            d if d >= u32::MAX / 2 => 0,
            d => d,
        };
        let mut out = Sweep::default();
        // The live entries' idle times, for eviction's cut-off.
        let mut ages = vec![0u64; AGE_BUCKETS];
        let bucket = |idle: u32| {
            ((idle as u64 * AGE_BUCKETS as u64) / (limit as u64 + 1)).min(AGE_BUCKETS as u64 - 1)
                as usize
        };
        // What each live entry carried since the last sweep (an entry
        // re-installed since counts afresh), for the rules' counters.
        let before = std::mem::take(&mut self.counts);
        let mut counts = std::collections::HashMap::with_capacity(before.len());
        let mut deltas = std::mem::take(&mut self.deltas);
        let (mut deleted, mut unlisted) = (std::mem::take(&mut self.deleted), false);
        self.walk(&mut |k: &CKey, f: &Flow| {
            out.seen += 1;
            if f.generation != generation {
                out.stale += 1;
                return true;
            }
            let (p0, b0) = match before.get(k) {
                Some(&(p, b)) if p <= f.packets && b <= f.bytes => (p, b),
                _ => (0, 0),
            };
            if f.packets > p0 {
                deltas.push((*k, f.packets - p0, f.bytes - b0));
            }
            counts.insert(*k, (f.packets, f.bytes));
            let idle = idle_for(f);
            if idle > limit {
                out.idle += 1;
                list(&mut deleted, &mut unlisted, k);
                return true;
            }
            ages[bucket(idle)] += 1;
            false
        })?;
        self.counts = counts;
        self.deltas = deltas;
        let live = out.seen - out.stale - out.idle;
        if (live as f64) <= self.capacity as f64 * EVICT_FROM {
            self.deleted = deleted;
            self.deleted_unlisted |= unlisted;
            return Ok(out);
        }
        // The oldest buckets, from the top, until enough would go; of the
        // last bucket only as many as still needed (the first the walk
        // meets: equally old, as far as the clock tells).
        let excess = live.saturating_sub((self.capacity as f64 * EVICT_TO) as u64);
        let (mut cut, mut older) = (AGE_BUCKETS, 0);
        while cut > 0 && older + ages[cut - 1] < excess {
            cut -= 1;
            older += ages[cut];
        }
        let mut from_cut = excess - older;
        let cut = cut.saturating_sub(1);
        self.walk(&mut |k, f: &Flow| {
            if f.generation != generation {
                return false;
            }
            let b = bucket(idle_for(f));
            let old = b > cut || (b == cut && from_cut > 0);
            if b == cut && old {
                from_cut -= 1;
            }
            out.evicted += u64::from(old);
            if old {
                list(&mut deleted, &mut unlisted, k);
            }
            old
        })?;
        self.deleted = deleted;
        self.deleted_unlisted |= unlisted;
        Ok(out)
    }

    /// What the cache's entries carried since the sweep before the last
    /// one looked (keys packed under the mask of their generation: the
    /// datapath unpacks them with [`Datapath::unpack`]).
    pub fn take_deltas(&mut self) -> Vec<(CKey, u64, u64)> {
        std::mem::take(&mut self.deltas)
    }

    /// The live entries deleted since the last call (idle or evicted; not
    /// stale ones), and whether more went than the list holds.
    pub fn take_deleted(&mut self) -> (Vec<CKey>, bool) {
        (
            std::mem::take(&mut self.deleted),
            std::mem::take(&mut self.deleted_unlisted),
        )
    }

    /// Walk the cache and delete the entries `doomed` says go: batched
    /// where the kernel can, else one by one.
    fn walk(&mut self, doomed: &mut impl FnMut(&CKey, &Flow) -> bool) -> Result<(), Error> {
        let batched = match &mut self.batch {
            Some(b) => match b.sweep(&mut |k, f| doomed(k, f)) {
                Ok(()) => true,
                // Refused before reading anything (an older kernel).
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && b.walked == 0 => false,
                Err(e) => {
                    return Err(Error::Map {
                        map: "tl_flows",
                        msg: format!("batched lookup: {e}"),
                    })
                }
            },
            None => false,
        };
        if !batched {
            self.batch = None;
            // An error: deleted meanwhile (by the switch, a flush).
            let gone: Vec<CKey> = self
                .flows
                .iter()
                .flatten()
                .filter(|(k, f)| doomed(k, f))
                .map(|(k, _)| k)
                .collect();
            // Deleted after the walk: removing the key a walk stands on
            // sends a hash map's next-key back to the start.
            for k in &gone {
                let _ = self.flows.remove(k);
            }
        }
        Ok(())
    }
}

/// Add `k` to a sweep's list of deleted entries, or say it was too long.
fn list(deleted: &mut Vec<CKey>, unlisted: &mut bool, k: &CKey) {
    if deleted.len() < DELETED_LISTED {
        deleted.push(*k);
    } else {
        *unlisted = true;
    }
}
