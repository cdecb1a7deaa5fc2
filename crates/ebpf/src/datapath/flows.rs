//! The flow cache: how its keys are packed (the megaflow mask and the TLV
//! map), its generation, the header templates its flows point at, and
//! flows installed, listed and removed.

use super::*;

impl KernelDatapath {
    /// The TLV map as the kernel holds it, sorted: (class, type, N).
    pub fn tlv(&self) -> Result<Vec<(u16, u8, u32)>, Error> {
        let m: HashMap<_, u32, u32> = self.map("tl_tlv")?;
        let mut v: Vec<(u16, u8, u32)> = m
            .iter()
            .filter_map(Result::ok)
            .map(|(k, n)| ((k >> 8) as u16, k as u8, n))
            .collect();
        v.sort_unstable();
        Ok(v)
    }

    /// The union mask (mask 0) the programs apply (an adopted one: the
    /// previous run's) and its layout (how its cache keys are packed).
    pub fn mask_layout(&self) -> Mask {
        self.masks[0]
    }

    /// The masks in use, in the order lookups try them.
    pub fn masks(&self) -> Vec<FlowKey> {
        self.order
            .iter()
            .filter_map(|&i| self.masks.get(i as usize))
            .map(Mask::flow_key)
            .collect()
    }

    /// `key`, masked by mask 0, as the cache holds it.
    fn pack(&self, key: &FlowKey) -> Result<CKey, Error> {
        check_port(key)?;
        self.masks[0].pack(key).ok_or(Error::MaskTooWide {
            words: self.masks[0].words(),
            max: crate::maps::CKEY_WORDS,
        })
    }

    /// Delete the entry cached for `key` under mask 0, if there is one.
    pub fn remove_flow(&mut self, key: &FlowKey) -> Result<(), Error> {
        // Under a mask too wide for the cache nothing is cached.
        let Some(k) = self.masks[0].pack(key) else {
            return Ok(());
        };
        self.remove_packed(&k)
    }

    /// Delete cache entry `k`, if it is there.
    pub fn remove_packed(&mut self, k: &CKey) -> Result<(), Error> {
        let mut m: HashMap<_, CKey, Flow> = self.map_mut("tl_flows")?;
        match m.remove(k) {
            Ok(()) => Ok(()),
            // Gone already (the revalidator thread).
            Err(aya::maps::MapError::SyscallError(e))
                if e.io_error.raw_os_error() == Some(libc::ENOENT) =>
            {
                Ok(())
            }
            Err(e) => Err(map_err("tl_flows")(e)),
        }
    }

    /// The TLV map: Geneve option (class, type) -> tun_metadataN.
    pub fn set_tlv(&mut self, entries: &[(u16, u8, u32)]) -> Result<(), Error> {
        let mut m: HashMap<_, u32, u32> = self.map_mut("tl_tlv")?;
        let old: Vec<u32> = m.keys().filter_map(Result::ok).collect();
        for k in old {
            let _ = m.remove(&k);
        }
        for &(class, typ, n) in entries {
            m.insert(((class as u32) << 8) | typ as u32, n, 0)
                .map_err(map_err("tl_tlv"))?;
        }
        Ok(())
    }

    /// After any change to the flow table, the TLV map or the ports: set
    /// the union mask (mask 0), forget every other mask, and move to a new
    /// generation, so that no entry installed before forwards again.
    /// Returns once the kernel has all of it. A union mask too wide for the
    /// cache key is set all the same: flows then go under masks of their
    /// own, or stay in the slow path (counted as slow_wide_mask). Only
    /// the words the programs extract are applied ([`Mask::of`]): a flow
    /// whose decision reads others is the caller's to keep out.
    pub fn revalidate(&mut self, mask: &FlowKey) -> Result<(), Error> {
        let mut m: Array<_, Mask> = self.map_mut("tl_mask")?;
        let layout = Mask::of(mask);
        m.set(0, layout, 0).map_err(map_err("tl_mask"))?;
        for i in 1..MAX_MASKS as u32 {
            m.set(i, Mask::unused(), 0).map_err(map_err("tl_mask"))?;
        }
        self.masks = [Mask::unused(); MAX_MASKS];
        self.masks[0] = layout;
        self.set_order(vec![0])?;
        self.new_generation()
    }

    /// Set the union mask (mask 0) without a new generation: the caller
    /// has removed every entry packed under the old one.
    pub fn set_union_mask(&mut self, mask: &FlowKey) -> Result<(), Error> {
        let layout = Mask::of(mask);
        let mut m: Array<_, Mask> = self.map_mut("tl_mask")?;
        m.set(0, layout, 0).map_err(map_err("tl_mask"))?;
        self.masks[0] = layout;
        Ok(())
    }

    fn set_order(&mut self, ids: Vec<u8>) -> Result<(), Error> {
        let mut o: Array<_, MaskOrder> = self.map_mut("tl_mask_order")?;
        o.set(0, MaskOrder::of(&ids), 0)
            .map_err(map_err("tl_mask_order"))?;
        self.order = ids;
        Ok(())
    }

    /// The number of the slot holding `mask`, which is taken (and tried
    /// by lookups first, being the newest) if no slot holds it yet.
    fn mask_slot(&mut self, mask: &FlowKey) -> Result<u8, Error> {
        let layout = Mask::of(mask);
        if layout.too_wide() {
            return Err(Error::MaskTooWide {
                words: layout.words(),
                max: crate::maps::CKEY_WORDS,
            });
        }
        // Not slot 0, the union, even when equal: its entries go whenever
        // the union changes; a flow's own mask stays.
        if let Some(i) = (1..MAX_MASKS).find(|&i| self.masks[i].in_use() && self.masks[i] == layout)
        {
            return Ok(i as u8);
        }
        let Some(free) = (1..MAX_MASKS).find(|&i| !self.masks[i].in_use()) else {
            return Err(Error::MasksFull { max: MAX_MASKS });
        };
        // The mask before its number in the order: a lookup never tries
        // a slot it cannot read.
        let mut m: Array<_, Mask> = self.map_mut("tl_mask")?;
        m.set(free as u32, layout, 0).map_err(map_err("tl_mask"))?;
        self.masks[free] = layout;
        let mut order = vec![free as u8];
        order.extend(self.order.iter().copied());
        self.set_order(order)?;
        Ok(free as u8)
    }

    /// Order the masks by the hits under each since the last call, most
    /// first (OVS rebalances its mask array so). Returns whether the order
    /// changed.
    pub fn rebalance_masks(&mut self) -> Result<bool, Error> {
        let hits: PerCpuArray<_, u64> = self.map("tl_mask_hits")?;
        let mut totals = [0u64; MAX_MASKS];
        for (i, t) in totals.iter_mut().enumerate() {
            *t = hits
                .get(&(i as u32), 0)
                .map_err(map_err("tl_mask_hits"))?
                .iter()
                .sum();
        }
        let mut by: Vec<(u64, u8)> = self
            .order
            .iter()
            .map(|&i| {
                let i = i as usize % MAX_MASKS;
                (totals[i].saturating_sub(self.mask_hits[i]), i as u8)
            })
            .collect();
        self.mask_hits = totals;
        // Stable: masks without hits keep their places behind the others.
        by.sort_by_key(|x| std::cmp::Reverse(x.0));
        let order: Vec<u8> = by.into_iter().map(|(_, i)| i).collect();
        if order == self.order {
            return Ok(false);
        }
        self.set_order(order)?;
        Ok(true)
    }

    /// A new generation under the same mask: every cached entry is a miss
    /// once this returns (`ovs-dpctl del-flows`).
    pub fn new_generation(&mut self) -> Result<(), Error> {
        self.generation += 1;
        let g = self.generation;
        let mut gen: Array<_, u64> = self.map_mut("tl_generation")?;
        gen.set(0, g, 0).map_err(map_err("tl_generation"))
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// A tunnel destination's template index, adding it if new.
    pub fn template(&mut self, t: &Template) -> Result<u32, Error> {
        let bytes = template_bytes(t);
        if let Some(&i) = self.templates.get(&bytes) {
            return Ok(i);
        }
        let i = self.next_template;
        if i >= self.template_capacity {
            return Err(Error::Map {
                map: "tl_templates",
                msg: format!("full ({} tunnel destinations)", self.template_capacity),
            });
        }
        let mut m: Array<_, Template> = self.map_mut("tl_templates")?;
        m.set(i, t, 0).map_err(map_err("tl_templates"))?;
        self.templates.insert(bytes, i);
        self.next_template = i + 1;
        Ok(i)
    }

    /// Install a flow for `key` under the union mask of the last
    /// [`KernelDatapath::revalidate`] (applied here, as the key is packed),
    /// at the current generation; its cache key.
    pub fn install(&mut self, key: &FlowKey, flow: Flow) -> Result<CKey, Error> {
        let k = self.pack(key)?;
        self.install_packed(k, flow)?;
        Ok(k)
    }

    /// Install a flow for `key` under its own megaflow mask `mask` (which
    /// keeps the in_port), taking a mask slot for it if it is new; its
    /// cache key (which names the mask: [`crate::maps::mask_id`]).
    /// [`Error::MasksFull`] when every slot holds another mask,
    /// [`Error::MaskPastKernelKey`] when it keeps a field the programs do
    /// not extract.
    pub fn install_masked(
        &mut self,
        key: &FlowKey,
        mask: &FlowKey,
        flow: Flow,
    ) -> Result<CKey, Error> {
        check_port(key)?;
        if !Mask::fits(mask) {
            return Err(Error::MaskPastKernelKey);
        }
        let id = self.mask_slot(mask)?;
        let Some(k) = self.masks[id as usize].pack_as(key, id) else {
            return Err(Error::MaskTooWide {
                words: self.masks[id as usize].words(),
                max: crate::maps::CKEY_WORDS,
            });
        };
        self.install_packed(k, flow)?;
        Ok(k)
    }

    /// Put `flow` at cache key `k` (replacing what is there, in place: a
    /// packet sees the old entry or the new one, never none).
    pub fn install_packed(&mut self, k: CKey, mut flow: Flow) -> Result<(), Error> {
        flow.generation = self.generation;
        flow.used = crate::maps::used_now();
        let mut m: HashMap<_, CKey, Flow> = self.map_mut("tl_flows")?;
        m.insert(k, flow, 0).map_err(|e| match &e {
            aya::maps::MapError::SyscallError(se)
                if se.io_error.raw_os_error() == Some(libc::E2BIG) =>
            {
                Error::CacheFull
            }
            _ => map_err("tl_flows")(e),
        })
    }

    /// The cached flows of the current generation (as `ovs-dpctl
    /// dump-flows` shows them).
    pub fn flows(&self) -> Result<Vec<(FlowKey, Flow)>, Error> {
        let m: HashMap<_, CKey, Flow> = self.map("tl_flows")?;
        let mut out = Vec::new();
        for item in m.iter() {
            let (k, f) = item.map_err(map_err("tl_flows"))?;
            if f.generation == self.generation {
                out.push((self.unpack(&k), f));
            }
        }
        Ok(out)
    }

    /// The whole keys the programs sampled from the packets that hit of
    /// late (every 16th hit on each CPU, the last 256 there: see
    /// `tl_samples` in maps.h).
    pub fn key_samples(&self) -> Result<Vec<FlowKey>, Error> {
        let m: PerCpuArray<_, crate::maps::Key> = self.map("tl_samples")?;
        let mut out = Vec::new();
        for i in 0..m.len() {
            for k in m.get(&i, 0).map_err(map_err("tl_samples"))?.iter() {
                if k.w != [0; tunlab_dp::key::DP_WORDS] {
                    out.push(FlowKey::from(*k));
                }
            }
        }
        Ok(out)
    }

    /// The flow key a cache key of this generation packs.
    pub fn unpack(&self, k: &CKey) -> FlowKey {
        match crate::maps::mask_id(k) {
            0 => self.masks[0].unpack(k),
            i => self
                .masks
                .get(i)
                .map(|m| m.unpack_numbered(k))
                .unwrap_or_default(),
        }
    }

    /// The mask cache key `k` was packed under.
    pub fn mask_of(&self, k: &CKey) -> FlowKey {
        self.masks
            .get(crate::maps::mask_id(k))
            .map(Mask::flow_key)
            .unwrap_or_default()
    }

    /// Batched access to the flow cache on a descriptor of its own (no
    /// borrow of this datapath while it walks).
    pub fn flow_batch(&self) -> Result<FlowBatch, Error> {
        Ok(FlowBatch::new(self.dup_fd("tl_flows")?))
    }

    /// The datapath's counters, summed over CPUs, by name.
    pub fn stats(&self) -> Result<Vec<(&'static str, u64)>, Error> {
        let m: PerCpuArray<_, u64> = self.map("tl_stats")?;
        // STATS and bpf/common.h's enum tl_stat must name the same slots.
        if m.len() as usize != STATS.len() {
            return Err(Error::Map {
                map: "tl_stats",
                msg: format!("{} slots, {} names (maps.rs STATS)", m.len(), STATS.len()),
            });
        }
        let mut out = Vec::with_capacity(STATS.len());
        for (i, name) in STATS.iter().enumerate() {
            let v = m.get(&(i as u32), 0).map_err(map_err("tl_stats"))?;
            out.push((*name, v.iter().sum()));
        }
        Ok(out)
    }
}

/// Cache keys name their mask in the in_port's top byte: a port numbered
/// past it never takes the fast path.
fn check_port(key: &FlowKey) -> Result<(), Error> {
    let port = key.get(tunlab_dp::key::f::IN_PORT);
    if port >> crate::maps::MASK_ID_SHIFT != 0 {
        return Err(Error::PortTooLarge { port });
    }
    Ok(())
}
