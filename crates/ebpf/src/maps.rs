//! The kernel datapath's map values, field for field the structs of
//! `bpf/common.h` (sizes checked below); change both together.

use tunlab_dp::key::DP_WORDS;
use tunlab_dp::FlowKey;

/// `struct tl_key`: the words of a flow key the programs extract, in dp's
/// layout (the rest of dp's key is fields only user space reads, and the
/// pipeline's state).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Key {
    pub w: [u64; DP_WORDS],
}

impl From<&FlowKey> for Key {
    fn from(k: &FlowKey) -> Key {
        let mut w = [0; DP_WORDS];
        w.copy_from_slice(&k.w[..DP_WORDS]);
        Key { w }
    }
}

impl From<Key> for FlowKey {
    fn from(k: Key) -> FlowKey {
        let mut out = FlowKey::default();
        out.w[..DP_WORDS].copy_from_slice(&k.w);
        out
    }
}

/// `TL_CKEY_WORDS`: the words of a flow cache key.
pub const CKEY_WORDS: usize = 10;

/// `struct tl_ckey`: the flow cache's key, the megaflow mask's words only
/// (see [`Mask`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CKey {
    pub w: [u64; CKEY_WORDS],
}

/// `TL_MASK_TOO_WIDE`.
pub const MASK_TOO_WIDE: u8 = 0xff;
/// `TL_MAX_MASKS`: masks the cache holds flows under at once.
pub const MAX_MASKS: usize = 16;
/// `TL_MASK_ID_SHIFT`: where a cache key's in_port word names its mask.
pub const MASK_ID_SHIFT: u32 = 24;

/// `struct tl_mask_order`: the masks in use, in the order lookups try
/// them.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaskOrder {
    pub count: u32,
    pub id: [u8; MAX_MASKS],
}

impl MaskOrder {
    /// The masks' numbers, in order.
    pub fn ids(&self) -> &[u8] {
        &self.id[..(self.count as usize).min(MAX_MASKS)]
    }

    /// An order of these numbers (at most [`MAX_MASKS`]).
    pub fn of(ids: &[u8]) -> MaskOrder {
        let mut o = MaskOrder::default();
        for (slot, &i) in o.id.iter_mut().zip(ids) {
            *slot = i;
        }
        o.count = ids.len().min(MAX_MASKS) as u32;
        o
    }
}

/// The number of the mask cache key `c` was packed under.
pub fn mask_id(c: &CKey) -> usize {
    ((c.w[0] >> MASK_ID_SHIFT) & 0xff) as usize
}

/// `struct tl_mask`: the megaflow mask and the words of it the cache key
/// packs, in key order.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mask {
    pub m: Key,
    pub idx: [u8; CKEY_WORDS],
    /// Words packed, or [`MASK_TOO_WIDE`].
    pub n: u8,
    pub pad: [u8; 5],
    /// The mask's words in packing order (0 past `n`).
    pub pm: [u64; CKEY_WORDS],
}

impl Default for Mask {
    fn default() -> Mask {
        Mask::of(&FlowKey::default())
    }
}

impl Mask {
    /// The layout for megaflow mask `mask`: its non-zero words, or too
    /// wide if there are more than [`CKEY_WORDS`]. Only the words the
    /// programs extract count (see [`Mask::fits`]).
    pub fn of(mask: &FlowKey) -> Mask {
        let mut out = Mask {
            m: Key::from(mask),
            idx: [0; CKEY_WORDS],
            n: 0,
            pad: [0; 5],
            pm: [0; CKEY_WORDS],
        };
        let used: Vec<usize> = (0..DP_WORDS).filter(|&i| mask.w[i] != 0).collect();
        if used.len() > CKEY_WORDS {
            out.n = MASK_TOO_WIDE;
            return out;
        }
        for (slot, &i) in out.idx.iter_mut().zip(&used) {
            *slot = i as u8;
        }
        for (p, &i) in out.pm.iter_mut().zip(&used) {
            *p = mask.w[i];
        }
        out.n = used.len() as u8;
        out
    }

    /// Whether the programs can apply `mask`: it keeps no bit past the
    /// words they extract.
    pub fn fits(mask: &FlowKey) -> bool {
        mask.w[DP_WORDS..].iter().all(|&w| w == 0)
    }

    /// Words of the key the mask keeps (more than [`CKEY_WORDS`] when too
    /// wide).
    pub fn words(&self) -> usize {
        if self.too_wide() {
            self.m.w.iter().filter(|&&w| w != 0).count()
        } else {
            self.n as usize
        }
    }

    pub fn too_wide(&self) -> bool {
        self.n as usize > CKEY_WORDS
    }

    /// An unused slot's value.
    pub fn unused() -> Mask {
        Mask::default()
    }

    /// Whether the slot holds a mask.
    pub fn in_use(&self) -> bool {
        self.n != 0
    }

    /// `key` masked and packed as the programs pack it under mask number
    /// `id` (which goes in the in_port word's top byte: `key`'s in_port
    /// must be below 2^24 and the mask must keep it); None if the mask is
    /// too wide for the cache.
    pub fn pack_as(&self, key: &FlowKey, id: u8) -> Option<CKey> {
        let mut c = self.pack(key)?;
        c.w[0] |= (id as u64) << MASK_ID_SHIFT;
        Some(c)
    }

    pub fn flow_key(&self) -> FlowKey {
        FlowKey::from(self.m)
    }

    /// `key` masked and packed as the programs pack it; None if the mask
    /// is too wide for the cache.
    pub fn pack(&self, key: &FlowKey) -> Option<CKey> {
        if self.too_wide() {
            return None;
        }
        let mut c = CKey::default();
        for i in 0..self.n as usize {
            let j = self.idx[i] as usize;
            c.w[i] = key.w[j] & self.m.w[j];
        }
        Some(c)
    }

    /// The masked flow key a packed one stands for.
    pub fn unpack(&self, c: &CKey) -> FlowKey {
        let mut k = FlowKey::default();
        if !self.too_wide() {
            for i in 0..self.n as usize {
                k.w[self.idx[i] as usize] = c.w[i];
            }
        }
        k
    }

    /// [`Mask::unpack`] of a key [`Mask::pack_as`] packed: without the
    /// mask's number.
    pub fn unpack_numbered(&self, c: &CKey) -> FlowKey {
        let mut k = self.unpack(c);
        k.w[0] &= !(0xff << MASK_ID_SHIFT);
        k
    }
}

/// `enum tl_op_kind`.
pub const OP_OUTPUT_PORT: u8 = 1;
pub const OP_OUTPUT_TUNNEL: u8 = 2;
pub const OP_PUSH_VLAN: u8 = 3;
pub const OP_POP_VLAN: u8 = 4;
pub const OP_OUTPUT_DEV: u8 = 5;
/// `TL_MAX_OPS`.
pub const MAX_OPS: usize = 4;

/// `struct tl_op`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Op {
    pub kind: u8,
    pub flags: u8,
    pub arg16: u16,
    pub arg: u32,
}

/// `struct tl_flow`: a cached flow's actions and counters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flow {
    pub generation: u64,
    pub packets: u64,
    pub bytes: u64,
    /// 0: drop.
    pub n_ops: u32,
    /// Last use, in [`USED_SHIFT`] units of the coarse
    /// monotonic clock ([`used_now`]).
    pub used: u32,
    pub ops: [Op; MAX_OPS],
}

/// `TL_USED_SHIFT`: `used` counts 2^20 ns (about 1.05 ms).
pub const USED_SHIFT: u32 = 20;

/// Now, as `struct tl_flow`'s `used` counts it: the clock the kernel's
/// `bpf_ktime_get_coarse_ns` reads is CLOCK_MONOTONIC_COARSE.
pub fn used_now() -> u32 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given and nothing
    // else; CLOCK_MONOTONIC_COARSE exists on every Linux this runs on.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    let ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    (ns >> USED_SHIFT) as u32
}

/// `TL_TMPL_MAX`.
pub const TEMPLATE_MAX: usize = 128;

/// `enum tl_tunnel_kind`.
pub const KIND_GENEVE: u8 = 1;
pub const KIND_VXLAN: u8 = 2;
pub const KIND_GRE: u8 = 3;
pub const KIND_NVGRE: u8 = 4;

/// `struct tl_template`: outer headers from the IP header on.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Template {
    pub kind: u8,
    pub family: u8,
    pub len: u8,
    pub l4_off: u8,
    pub ifindex: u32,
    pub mtu: u16,
    pub pad: u16,
    pub local4: [u8; 4],
    pub remote4: [u8; 4],
    pub hdr: [u8; TEMPLATE_MAX],
    pub local6: [u8; 16],
    pub remote6: [u8; 16],
}

impl Default for Template {
    fn default() -> Template {
        Template {
            kind: 0,
            family: 0,
            len: 0,
            l4_off: 0,
            ifindex: 0,
            mtu: 0,
            pad: 0,
            local4: [0; 4],
            remote4: [0; 4],
            hdr: [0; TEMPLATE_MAX],
            local6: [0; 16],
            remote6: [0; 16],
        }
    }
}

/// `enum tl_port_role`.
pub const ROLE_VETH: u32 = 1;
pub const ROLE_UPCALL: u32 = 2;
pub const ROLE_QINQ: u32 = 3;

/// `struct tl_port`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortEntry {
    pub ofport: u32,
    pub role: u32,
    pub peer_ifindex: u32,
    /// 1: a `tl_police` entry polices this tenant port.
    pub policed: u32,
}

/// `struct tl_tunnel_key`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TunnelKey {
    pub proto: u8,
    pub family: u8,
    pub dport: u16,
    /// The port's fixed remote (IPv4 in the first 4 bytes), or zeros: the
    /// entry for a source no port names.
    pub remote: [u8; 16],
}

/// `struct tl_tunnel_id_key`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TunnelIdKey {
    pub tk: TunnelKey,
    pub id: u32,
}

/// `struct tl_tunnel_port`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunnelPortEntry {
    pub ofport: u32,
    pub kind: u8,
    pub remote_any: u8,
    pub local_any: u8,
    pub pad: u8,
    pub local4: [u8; 4],
    pub remote4: [u8; 4],
    pub local6: [u8; 16],
    pub remote6: [u8; 16],
}

// SAFETY: plain `repr(C)` integers and byte arrays with no padding the
// kernel could leave uninitialised (sizes checked in the tests below), valid
// for any bit pattern.
unsafe impl aya::Pod for Key {}
// SAFETY: as above.
unsafe impl aya::Pod for CKey {}
// SAFETY: repr(C) integers and bytes, sized without implicit padding.
unsafe impl aya::Pod for Mask {}
// SAFETY: as above.
unsafe impl aya::Pod for MaskOrder {}
// SAFETY: as above.
unsafe impl aya::Pod for Flow {}
// SAFETY: as above.
unsafe impl aya::Pod for Template {}
// SAFETY: as above.
unsafe impl aya::Pod for PortEntry {}
// SAFETY: as above.
unsafe impl aya::Pod for TunnelKey {}
// SAFETY: as above.
unsafe impl aya::Pod for TunnelPortEntry {}
// SAFETY: as above.
unsafe impl aya::Pod for TunnelIdKey {}
// SAFETY: repr(C) plain integers without padding.
unsafe impl aya::Pod for Police {}

/// `enum tl_stat`, in order: the names `tunlab ctl stats` prints.
pub const STATS: [&str; 20] = [
    "tenant_rx",
    "underlay_rx",
    "hit",
    "miss",
    "stale",
    "upcall",
    "inject",
    "encap",
    "decap",
    "drop_action",
    "drop_unknown_critical_option",
    "slow_no_route",
    "slow_not_fast",
    "slow_unknown_remote",
    "err_adjust",
    "not_tunnel",
    "too_big",
    "slow_csum_not_verified",
    "drop_policed",
    "slow_wide_mask",
];

/// `struct tl_port_stats`: what the kernel forwarded or dropped itself
/// for one port, on one CPU.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
}

// SAFETY: repr(C) plain integers without padding.
unsafe impl aya::Pod for PortCounters {}

/// `struct tl_police`: a tenant port's ingress token bucket (bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Police {
    /// `struct bpf_spin_lock` (the kernel's; left alone by updates).
    pub lock: u32,
    pub pad: u32,
    /// Bytes a second.
    pub rate: u64,
    pub burst: u64,
    pub tokens: u64,
    pub last_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::mem::size_of;
    use tunlab_dp::key::f;

    #[test]
    fn a_mask_packs_its_words_in_key_order() {
        let mut mask = FlowKey::default();
        mask.w[0] = u32::MAX as u64;
        mask.w[3] = 0xffff_ffff_0000_0000;
        mask.w[15] = 0xffff;
        let m = Mask::of(&mask);
        assert_eq!((m.n, &m.idx[..3]), (3, &[0u8, 3, 15][..]));
        let mut key = FlowKey::default();
        key.w[0] = 0x1234_0000_0007;
        key.w[3] = 0x0a00_0001_0a00_0002;
        key.w[15] = 0xabcd_ef01;
        key.w[7] = 99;
        let c = m.pack(&key).unwrap();
        assert_eq!(&c.w[..4], &[7, 0x0a00_0001_0000_0000, 0xef01, 0]);
        let mut masked = key;
        for (k, w) in masked.w.iter_mut().zip(mask.w) {
            *k &= w;
        }
        assert_eq!(m.unpack(&c), masked);
    }

    #[test]
    fn a_mask_of_more_words_than_the_cache_key_holds_packs_nothing() {
        let mut mask = FlowKey::default();
        for w in mask.w.iter_mut().take(CKEY_WORDS + 1) {
            *w = 1;
        }
        let m = Mask::of(&mask);
        assert!(m.too_wide());
        assert_eq!(m.words(), CKEY_WORDS + 1);
        assert_eq!(m.pack(&FlowKey::default()), None);
        mask.w[CKEY_WORDS] = 0;
        assert_eq!(Mask::of(&mask).n as usize, CKEY_WORDS);
    }

    /// Two masks that keep the same words pack a key alike but for the
    /// number in the in_port word: their entries never meet.
    #[test]
    fn a_numbered_key_names_its_mask_and_unpacks_without_it() {
        let mut mask = FlowKey::default();
        mask.set(f::IN_PORT, f::IN_PORT.max());
        mask.set(f::NW_DST, f::NW_DST.max());
        let m = Mask::of(&mask);
        let mut key = FlowKey::default();
        key.set(f::IN_PORT, 7);
        key.set(f::NW_DST, 0x0a00_0002);
        key.set(f::TP_DST, 80);
        let (a, b) = (m.pack_as(&key, 3).unwrap(), m.pack_as(&key, 4).unwrap());
        assert_ne!(a, b);
        assert_eq!((mask_id(&a), mask_id(&b)), (3, 4));
        assert_eq!(m.pack_as(&key, 0), m.pack(&key));
        let back = m.unpack_numbered(&a);
        assert_eq!(back.get(f::IN_PORT), 7);
        assert_eq!(back.get(f::NW_DST), 0x0a00_0002);
        assert_eq!(back.get(f::TP_DST), 0, "not in the mask");
        let order = MaskOrder::of(&[2, 0, 5]);
        assert_eq!(order.ids(), &[2, 0, 5]);
    }

    proptest! {
        #[test]
        fn packing_then_unpacking_gives_the_masked_key(
            mw in proptest::array::uniform19(prop_oneof![Just(0u64), any::<u64>()]),
            kw in proptest::collection::vec(any::<u64>(), tunlab_dp::key::WORDS),
        ) {
            let mask = FlowKey::from(Key { w: mw });
            let m = Mask::of(&mask);
            let mut key = FlowKey::default();
            key.w.copy_from_slice(&kw);
            match m.pack(&key) {
                Some(c) => prop_assert_eq!(m.unpack(&c), key.masked(&mask)),
                None => prop_assert!(mw.iter().filter(|&&w| w != 0).count() > CKEY_WORDS),
            }
        }
    }

    /// The programs' key is dp's first words: a mask past them does not
    /// fit, and the words past them are not packed.
    #[test]
    fn the_kernel_key_is_the_words_the_programs_extract() {
        let mut key = FlowKey::default();
        key.set(f::IN_PORT, 7);
        key.set(f::NW_TTL, 64);
        let k = Key::from(&key);
        assert_eq!(k.w[0], 7);
        let back = FlowKey::from(k);
        assert_eq!((back.get(f::IN_PORT), back.get(f::NW_TTL)), (7, 0));
        let mut mask = FlowKey::default();
        mask.set(f::IN_PORT, f::IN_PORT.max());
        assert!(Mask::fits(&mask));
        mask.set(f::NW_TTL, f::NW_TTL.max());
        assert!(!Mask::fits(&mask));
        let m = Mask::of(&mask);
        assert_eq!((m.n, m.idx[0]), (1, 0));
        assert_eq!(m.unpack(&m.pack(&key).unwrap()), back);
    }

    #[test]
    fn layouts_match_the_c_structs() {
        // Sizes as clang lays out bpf/common.h (no implicit padding).
        assert_eq!(size_of::<Key>(), 152);
        assert_eq!(size_of::<CKey>(), 80);
        assert_eq!(size_of::<Mask>(), 152 + CKEY_WORDS + 1 + 5 + 8 * CKEY_WORDS);
        assert_eq!(size_of::<MaskOrder>(), 4 + MAX_MASKS);
        assert_eq!(size_of::<Op>(), 8);
        assert_eq!(size_of::<Flow>(), 32 + 8 * MAX_OPS);
        assert_eq!(
            size_of::<Template>(),
            // kind..l4_off, ifindex, mtu+pad, local4, remote4, hdr, the v6 pair.
            4 + 4 + 4 + 4 + 4 + 16 + 16 + TEMPLATE_MAX
        );
        // The header right after the fixed part (one cache line per hit).
        assert_eq!(std::mem::offset_of!(Template, hdr), 20);
        assert_eq!(size_of::<PortEntry>(), 16);
        assert_eq!(size_of::<Police>(), 40);
        assert_eq!(size_of::<PortCounters>(), 40);
        assert_eq!(size_of::<TunnelKey>(), 20);
        assert_eq!(size_of::<TunnelIdKey>(), 24);
        assert_eq!(size_of::<TunnelPortEntry>(), 8 + 8 + 32);
    }
}
