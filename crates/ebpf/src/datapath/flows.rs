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

    /// The megaflow mask the programs apply (an adopted one: the previous
    /// run's) and its layout (how cache keys are packed).
    pub fn mask_layout(&self) -> Mask {
        self.mask
    }

    /// `key`, masked, as the cache holds it.
    fn pack(&self, key: &FlowKey) -> Result<CKey, Error> {
        self.mask.pack(key).ok_or(Error::MaskTooWide {
            words: self.mask.words(),
            max: crate::maps::CKEY_WORDS,
        })
    }

    /// Delete the entry cached for `key` (under the current mask), if
    /// there is one.
    pub fn remove_flow(&mut self, key: &FlowKey) -> Result<(), Error> {
        // Under a mask too wide for the cache nothing is cached.
        let Some(k) = self.mask.pack(key) else {
            return Ok(());
        };
        let mut m: HashMap<_, CKey, Flow> = self.map_mut("tl_flows")?;
        match m.remove(&k) {
            Ok(()) => Ok(()),
            // Gone already (the LRU, the revalidator thread).
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
    /// the megaflow mask and move to a new generation, so that no entry
    /// installed before forwards again. Returns once the kernel has both.
    /// A mask too wide for the cache key is set all the same: the
    /// programs then cache nothing (and count slow_wide_mask).
    pub fn revalidate(&mut self, mask: &FlowKey) -> Result<(), Error> {
        let layout = Mask::of(mask);
        let mut m: Array<_, Mask> = self.map_mut("tl_mask")?;
        m.set(0, layout, 0).map_err(map_err("tl_mask"))?;
        self.mask = layout;
        self.new_generation()
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

    /// Install a flow for `key` under the mask of the last
    /// [`KernelDatapath::revalidate`] (applied here, as the key is packed),
    /// at the current generation.
    pub fn install(&mut self, key: &FlowKey, mut flow: Flow) -> Result<(), Error> {
        flow.generation = self.generation;
        flow.used = crate::maps::used_now();
        let k = self.pack(key)?;
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
                out.push((self.mask.unpack(&k), f));
            }
        }
        Ok(out)
    }

    /// The flow key a cache key of this generation packs.
    pub fn unpack(&self, k: &CKey) -> FlowKey {
        self.mask.unpack(k)
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
