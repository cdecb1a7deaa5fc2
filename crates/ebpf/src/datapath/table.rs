//! The open table: the cached flows whose mask packs at most
//! [`SLOT_WORDS`] words, by linear probing in a BPF array the switch maps
//! into its memory and writes directly (`struct tl_slot` in
//! bpf/common.h). A lookup reads one 128-byte slot where the hash map
//! reads a bucket and then an element: with a million flows, neither is
//! in a CPU cache (`cargo bench -p tunlab-ebpf --bench table`).
//!
//! Who writes what, and why no lookup ever sees half a flow:
//! - a key and its flow go into an empty slot (or a tombstone older than
//!   [`REUSE_AFTER`]) claimed by compare-and-swap ([`SLOT_BUSY`]), its tag
//!   stored last; a lookup reads the tag first (x86 keeps loads and
//!   stores in order; the compilers are told with barriers);
//! - a live slot is never written again but for the counters and `used`,
//!   which the programs add to atomically: a new flow for a key goes into
//!   another slot before the old one becomes a tombstone
//!   (make-before-break), so a packet finds the old flow or the new one;
//! - a tombstone is written over only [`REUSE_AFTER`] after its deletion,
//!   when no program can still be reading it (one runs for microseconds);
//! - the revalidator thread deletes (tombstones) and reclaims: a
//!   tombstone whose next slot is empty ends no probe chain and becomes
//!   empty again, once older than [`RECLAIM_AFTER`] (an insert that passed
//!   it took it, being old enough to reuse).
//!
//! Every change of a slot's state is a compare-and-swap, so the switch's
//! thread and the revalidator's share the table without a lock.

use crate::maps::{
    slot_tag, used_now, CKey, Flow, Slot, PROBES, SLOT_BUSY, SLOT_EMPTY, SLOT_TOMB, SLOT_WORDS,
};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// A tombstone is reused this long after its deletion, in `used` units
/// (2^20 ns, about 1 ms).
pub const REUSE_AFTER: u32 = 16;
/// A tombstone that ends its chain is made empty this long after its
/// deletion (about 1 s).
pub const RECLAIM_AFTER: u32 = 1024;

/// How many slots a table for `capacity` flows has: a power of two, at
/// least 1.5 times the capacity (linear probing stays short below a load
/// of two thirds; the revalidator keeps the cache under 90 % of it).
pub fn slots_for(capacity: u32) -> u32 {
    (capacity as u64 * 3 / 2)
        .next_power_of_two()
        .clamp(64, 1 << 31) as u32
}

/// The slots' memory.
enum Memory {
    /// The BPF array, mapped (unmapped on drop).
    Mapped { len: usize },
    /// A vector, for the tests (held: `base` points into it).
    #[cfg(test)]
    Heap(#[allow(dead_code)] Vec<Slot>),
}

/// The open table, shared by the switch's thread, its walks and the
/// revalidator thread.
pub struct Table {
    base: *mut Slot,
    slots: u32,
    memory: Memory,
    /// Live entries at most (an insert past it is [`Full`]).
    capacity: u64,
    live: AtomicU64,
}

// SAFETY: every access to the slots goes through atomics (`seq`) or
// volatile copies under the protocol in the module's comment; the mapping
// lives as long as the table.
unsafe impl Send for Table {}
unsafe impl Sync for Table {}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("slots", &self.slots)
            .field("live", &self.live())
            .finish()
    }
}

/// No slot within [`PROBES`] of the key's home is free, or the table holds
/// its capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// What a probe from a key's home found.
struct Probe {
    /// A live slot holding the key.
    existing: Option<u32>,
    /// The first slot an insert may take, and its `seq` then.
    free: Option<(u32, u64)>,
}

fn is_live(seq: u64) -> bool {
    seq & 3 == 0 && seq != SLOT_EMPTY
}

/// When a tombstone was made (None: not one).
fn tomb_time(seq: u64) -> Option<u32> {
    (seq & 3 == SLOT_TOMB).then_some((seq >> 2) as u32)
}

fn tomb_now() -> u64 {
    ((used_now() as u64) << 2) | SLOT_TOMB
}

/// Whether `when` is at least `age` before `now` (modulo 2^32; a time
/// after `now` is not).
fn older(now: u32, when: u32, age: u32) -> bool {
    let d = now.wrapping_sub(when);
    d >= age && d < u32::MAX / 2
}

impl Table {
    /// Map the BPF array `fd` of `slots` slots (a power of two) holding at
    /// most `capacity` flows, and count what it holds (a previous run's).
    pub fn map(fd: std::os::fd::BorrowedFd<'_>, slots: u32, capacity: u32) -> std::io::Result<Table> {
        use std::os::fd::AsRawFd;
        let len = slots as usize * std::mem::size_of::<Slot>();
        // SAFETY: a shared read-write mapping of a BPF_F_MMAPABLE array of
        // `slots` values: the kernel checks `len` against the map's size.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let t = Table {
            base: p.cast(),
            slots,
            memory: Memory::Mapped { len },
            capacity: capacity as u64,
            live: AtomicU64::new(0),
        };
        t.recount();
        Ok(t)
    }

    #[cfg(test)]
    pub(crate) fn in_memory(slots: u32, capacity: u64) -> Table {
        let mut v = vec![Slot::default(); slots as usize];
        Table {
            base: v.as_mut_ptr(),
            slots,
            memory: Memory::Heap(v),
            capacity,
            live: AtomicU64::new(0),
        }
    }

    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Live entries, as counted by the inserts and deletes.
    pub fn live(&self) -> u64 {
        self.live.load(Ordering::Relaxed)
    }

    fn seq(&self, i: u32) -> &AtomicU64 {
        debug_assert!(i < self.slots);
        // SAFETY: slot i is in the table; `seq` is its first word, 8-byte
        // aligned, and only ever accessed atomically.
        unsafe { AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.base.add(i as usize)).seq)) }
    }

    /// Slot `i` if it holds a key: read whole between two reads of its tag
    /// that agree (its counters may move meanwhile: the programs add).
    fn read(&self, i: u32) -> Option<Slot> {
        let seq = self.seq(i).load(Ordering::Acquire);
        if !is_live(seq) {
            return None;
        }
        // SAFETY: slot i is in the table; a volatile copy of plain data.
        let s = unsafe { std::ptr::read_volatile(self.base.add(i as usize)) };
        fence(Ordering::Acquire);
        (self.seq(i).load(Ordering::Relaxed) == seq).then_some(Slot { seq, ..s })
    }

    fn key_of(s: &Slot) -> CKey {
        let mut k = CKey::default();
        k.w[..SLOT_WORDS].copy_from_slice(&s.w);
        k
    }

    fn probe(&self, k: &CKey, tag: u64) -> Probe {
        let home = (tag >> 32) as u32;
        let now = used_now();
        let mut p = Probe {
            existing: None,
            free: None,
        };
        for i in 0..PROBES {
            let at = home.wrapping_add(i) & (self.slots - 1);
            let seq = self.seq(at).load(Ordering::Acquire);
            if seq == SLOT_EMPTY {
                p.free.get_or_insert((at, seq));
                break;
            }
            match tomb_time(seq) {
                Some(when) if older(now, when, REUSE_AFTER) => {
                    p.free.get_or_insert((at, seq));
                }
                _ if seq == tag && p.existing.is_none() => {
                    if self.read(at).is_some_and(|s| s.w == k.w[..SLOT_WORDS]) {
                        p.existing = Some(at);
                    }
                }
                _ => {}
            }
        }
        p
    }

    /// Put `flow` at key `k`: into a free slot, and then, if the key was
    /// there, its old slot deleted (a packet finds one or the other).
    pub fn insert(&self, k: &CKey, flow: &Flow) -> Result<(), Full> {
        let tag = slot_tag(k);
        // A claim lost to the revalidator (which reclaims tombstones) is
        // tried again from the start.
        for _ in 0..4 {
            let p = self.probe(k, tag);
            let Some((at, was)) = p.free else {
                return Err(Full);
            };
            if p.existing.is_none() && self.live() >= self.capacity {
                return Err(Full);
            }
            let seq = self.seq(at);
            if seq
                .compare_exchange(was, SLOT_BUSY, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            // SAFETY: slot `at` is in the table and claimed (BUSY): no
            // lookup reads its key or flow, no other writer touches it.
            unsafe {
                let s = self.base.add(at as usize);
                let mut w = [0u64; SLOT_WORDS];
                w.copy_from_slice(&k.w[..SLOT_WORDS]);
                std::ptr::write_volatile(std::ptr::addr_of_mut!((*s).w), w);
                std::ptr::write_volatile(std::ptr::addr_of_mut!((*s).flow), *flow);
            }
            seq.store(tag, Ordering::Release);
            let replaced = p.existing.is_some_and(|old| {
                self.seq(old)
                    .compare_exchange(tag, tomb_now(), Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            });
            if !replaced {
                self.live.fetch_add(1, Ordering::Relaxed);
            }
            return Ok(());
        }
        Err(Full)
    }

    /// Delete key `k`; whether it was there.
    pub fn remove(&self, k: &CKey) -> bool {
        let tag = slot_tag(k);
        let home = (tag >> 32) as u32;
        for i in 0..PROBES {
            let at = home.wrapping_add(i) & (self.slots - 1);
            let seq = self.seq(at).load(Ordering::Acquire);
            if seq == SLOT_EMPTY {
                return false;
            }
            if seq == tag
                && self.read(at).is_some_and(|s| s.w == k.w[..SLOT_WORDS])
                && self.kill(at, tag)
            {
                return true;
            }
        }
        false
    }

    /// Slot `at` from live (`tag`) to a tombstone; false if it was not.
    fn kill(&self, at: u32, tag: u64) -> bool {
        let done = self
            .seq(at)
            .compare_exchange(tag, tomb_now(), Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        if done {
            self.live.fetch_sub(1, Ordering::Relaxed);
        }
        done
    }

    /// Every live entry from slot `from` on, in slot order, until `max`
    /// have been read: `doomed` says which to delete. Returns the entries
    /// read and the slot to go on from (None: the end).
    pub fn walk(
        &self,
        from: u32,
        max: u64,
        doomed: &mut impl FnMut(&CKey, &Flow) -> bool,
    ) -> (u64, Option<u32>) {
        let mut read = 0;
        for at in from..self.slots {
            if read >= max {
                return (read, Some(at));
            }
            let Some(s) = self.read(at) else { continue };
            read += 1;
            if doomed(&Self::key_of(&s), &s.flow) {
                self.kill(at, s.seq);
            }
        }
        (read, None)
    }

    /// Make empty again the tombstones older than [`RECLAIM_AFTER`] that
    /// end their chains; how many.
    pub fn reclaim(&self) -> u64 {
        let mask = self.slots - 1;
        let Some(e) = (0..self.slots).find(|&i| self.seq(i).load(Ordering::Relaxed) == SLOT_EMPTY)
        else {
            return 0;
        };
        let now = used_now();
        let (mut n, mut next_empty) = (0, true);
        // Backwards from an empty slot, round the table once: a run of
        // tombstones before an empty slot goes, the last one first.
        for step in 1..self.slots {
            let at = e.wrapping_sub(step) & mask;
            let seq = self.seq(at).load(Ordering::Acquire);
            let old = tomb_time(seq).is_some_and(|w| older(now, w, RECLAIM_AFTER));
            next_empty = if next_empty && old {
                let done = self
                    .seq(at)
                    .compare_exchange(seq, SLOT_EMPTY, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok();
                n += u64::from(done);
                done
            } else {
                seq == SLOT_EMPTY
            };
        }
        n
    }

    /// Count the live slots (a table adopted from a previous run).
    fn recount(&self) {
        let n = (0..self.slots)
            .filter(|&i| is_live(self.seq(i).load(Ordering::Relaxed)))
            .count();
        self.live.store(n as u64, Ordering::Relaxed);
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        match &self.memory {
            Memory::Mapped { len } => {
                // SAFETY: the mapping made in Table::map, unmapped once.
                unsafe { libc::munmap(self.base.cast(), *len) };
            }
            #[cfg(test)]
            Memory::Heap(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(j: u64) -> CKey {
        let mut k = CKey::default();
        k.w[0] = 1;
        k.w[3] = j;
        k
    }

    fn flow(n: u32) -> Flow {
        Flow {
            n_ops: n,
            ..Flow::default()
        }
    }

    /// The flow a lookup as the programs do it finds for `k`.
    fn lookup(t: &Table, k: &CKey) -> Option<Flow> {
        let tag = slot_tag(k);
        for i in 0..PROBES {
            let at = ((tag >> 32) as u32).wrapping_add(i) & (t.slots - 1);
            let seq = t.seq(at).load(Ordering::Acquire);
            if seq == SLOT_EMPTY {
                return None;
            }
            if let Some(s) = t.read(at).filter(|s| s.seq == tag && s.w == k.w[..SLOT_WORDS]) {
                return Some(s.flow);
            }
        }
        None
    }

    #[test]
    fn inserted_keys_are_found_and_removed_ones_are_not() {
        let t = Table::in_memory(1024, 600);
        for j in 0..600 {
            t.insert(&key(j), &flow(j as u32 % 4)).unwrap();
        }
        assert_eq!(t.live(), 600);
        assert_eq!(t.insert(&key(600), &flow(0)), Err(Full), "at capacity");
        for j in 0..600 {
            assert_eq!(lookup(&t, &key(j)).map(|f| f.n_ops), Some(j as u32 % 4));
        }
        for j in (0..600).step_by(2) {
            assert!(t.remove(&key(j)));
            assert!(!t.remove(&key(j)), "removed once");
        }
        assert_eq!(t.live(), 300);
        for j in 0..600 {
            assert_eq!(lookup(&t, &key(j)).is_some(), j % 2 == 1, "key {j}");
        }
    }

    #[test]
    fn a_replaced_key_has_one_live_slot_with_the_new_flow() {
        let t = Table::in_memory(64, 64);
        t.insert(&key(1), &flow(1)).unwrap();
        t.insert(&key(1), &flow(2)).unwrap();
        assert_eq!(lookup(&t, &key(1)).map(|f| f.n_ops), Some(2));
        assert_eq!(t.live(), 1);
        let mut seen = Vec::new();
        t.walk(0, u64::MAX, &mut |k, f| {
            seen.push((*k, f.n_ops));
            false
        });
        assert_eq!(seen, vec![(key(1), 2)]);
    }

    #[test]
    fn young_tombstones_keep_their_chains_and_old_ones_go() {
        let t = Table::in_memory(64, 64);
        for j in 0..40 {
            t.insert(&key(j), &flow(0)).unwrap();
        }
        // Delete all: tombstones too young to reclaim or reuse.
        let (read, end) = t.walk(0, u64::MAX, &mut |_, _| true);
        assert_eq!((read, end, t.live()), (40, None, 0));
        assert_eq!(t.reclaim(), 0);
        // Aged by hand past RECLAIM_AFTER: every one goes.
        let old = ((used_now().wrapping_sub(RECLAIM_AFTER + 1) as u64) << 2) | SLOT_TOMB;
        for i in 0..64 {
            let s = t.seq(i);
            if tomb_time(s.load(Ordering::Relaxed)).is_some() {
                s.store(old, Ordering::Relaxed);
            }
        }
        assert_eq!(t.reclaim(), 40);
        assert!((0..64).all(|i| t.seq(i).load(Ordering::Relaxed) == SLOT_EMPTY));
    }

    #[test]
    fn a_walk_stops_at_its_limit_and_goes_on_from_there() {
        let t = Table::in_memory(256, 256);
        for j in 0..100 {
            t.insert(&key(j), &flow(0)).unwrap();
        }
        let (read, next) = t.walk(0, 30, &mut |_, _| false);
        assert_eq!(read, 30);
        let (rest, end) = t.walk(next.unwrap(), u64::MAX, &mut |_, _| false);
        assert_eq!((read + rest, end), (100, None));
    }

    #[test]
    fn slots_are_a_power_of_two_at_least_half_again_the_capacity() {
        assert_eq!(slots_for(1_000_000), 1 << 21);
        assert_eq!(slots_for(1_250_000), 1 << 21);
        assert_eq!(slots_for(200_000), 1 << 19);
        assert_eq!(slots_for(16), 64);
    }
}
