//! The userspace datapath's flow cache (dpif-netdev's exact-match flow
//! table): a packet's whole flow key → the steps the slow path decided
//! for it. A hit skips ofproto (the classifier, its tables, the actions);
//! a miss goes up ([`crate::dpif::provider::Upcall`]) and the decision is
//! put here ([`crate::dpif::provider::Dpif::flow_put`]).
//!
//! Direct-mapped, as OVS's EMC: one slot per hash, a new flow takes the
//! slot of an old one. Every entry carries the epoch of the rules it was
//! decided under; ofproto's epoch moves with every change of the rules,
//! the TLV map or the ports, and an entry of an older epoch is a miss.
//! What the entries carried is counted here and handed up
//! ([`FlowCache::take_counted`]) for ofproto to credit the rules with, as
//! the kernel datapath's revalidator does.

use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use tunlab_dp::key::{f, FieldPos};
use tunlab_dp::{FlowKey, Op};

/// Slots per worker: as many as OVS's EMC has.
pub const SLOTS: usize = 8192;

/// One cached flow.
#[derive(Debug, Clone)]
struct Entry {
    epoch: u64,
    key: FlowKey,
    ops: Vec<Op>,
    /// Since the rules were last credited.
    packets: u64,
    bytes: u64,
    /// Since the entry was put.
    total_packets: u64,
    total_bytes: u64,
}

/// One worker's cache of decided flows.
#[derive(Debug, Clone)]
pub struct FlowCache {
    slots: Vec<Option<Entry>>,
    /// Counts of entries that lost their slot before they were credited.
    evicted: Vec<(FlowKey, u64, u64)>,
    pub hits: u64,
    pub misses: u64,
    /// Decisions put, and those that cannot be cached (a `controller`
    /// action: its PACKET_IN carries the upcall's own key).
    pub installed: u64,
    pub refused: u64,
    /// Entries replaced by another flow's.
    pub evictions: u64,
}

impl Default for FlowCache {
    fn default() -> FlowCache {
        FlowCache::new(SLOTS)
    }
}

impl FlowCache {
    /// A cache of `slots` entries (rounded up to a power of two).
    pub fn new(slots: usize) -> FlowCache {
        FlowCache {
            slots: vec![None; slots.max(1).next_power_of_two()],
            evicted: Vec::new(),
            hits: 0,
            misses: 0,
            installed: 0,
            refused: 0,
            evictions: 0,
        }
    }

    fn slot(&self, key: &FlowKey) -> usize {
        let mut h = 0u64;
        for w in key.w {
            h = (h.rotate_left(5) ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
        (h >> 32) as usize & (self.slots.len() - 1)
    }

    /// The steps cached for `key` under `epoch`, counting a packet of
    /// `bytes` against the flow; `None` (a miss) when there are none.
    pub fn lookup(&mut self, key: &FlowKey, epoch: u64, bytes: u64) -> Option<&[Op]> {
        let i = self.slot(key);
        match &mut self.slots[i] {
            Some(e) if e.epoch == epoch && e.key == *key => {
                self.hits += 1;
                e.packets += 1;
                e.bytes += bytes;
                e.total_packets += 1;
                e.total_bytes += bytes;
                Some(&e.ops)
            }
            _ => {
                self.misses += 1;
                None
            }
        }
    }

    /// Cache `ops` for `key` under `epoch`. A decision with a `controller`
    /// step is not cached. The packet that missed was counted by the
    /// rules themselves, so the entry starts at zero.
    pub fn put(&mut self, key: &FlowKey, epoch: u64, ops: &[Op]) {
        if ops.iter().any(|o| matches!(o, Op::Controller { .. })) {
            self.refused += 1;
            return;
        }
        let i = self.slot(key);
        let slot = &mut self.slots[i];
        if let Some(old) = slot.take() {
            if old.key != *key || old.epoch != epoch {
                self.evictions += 1;
            }
            if old.packets > 0 {
                self.evicted.push((old.key, old.packets, old.bytes));
            }
        }
        *slot = Some(Entry {
            epoch,
            key: *key,
            ops: ops.to_vec(),
            packets: 0,
            bytes: 0,
            total_packets: 0,
            total_bytes: 0,
        });
        self.installed += 1;
    }

    /// Forget every flow; what they carried is still handed up.
    pub fn flush(&mut self) {
        for e in self.slots.iter_mut().filter_map(Option::take) {
            if e.packets > 0 {
                self.evicted.push((e.key, e.packets, e.bytes));
            }
        }
    }

    /// What the flows carried since the last call: (key, packets, bytes),
    /// for ofproto to credit the rules each key meets.
    pub fn take_counted(&mut self) -> Vec<(FlowKey, u64, u64)> {
        let mut out = std::mem::take(&mut self.evicted);
        for e in self.slots.iter_mut().flatten() {
            if e.packets > 0 {
                out.push((e.key, e.packets, e.bytes));
                e.packets = 0;
                e.bytes = 0;
            }
        }
        out
    }

    /// Entries of epoch `epoch` (older ones are dead weight, reused as
    /// flows come).
    pub fn len(&self, epoch: u64) -> usize {
        self.slots
            .iter()
            .flatten()
            .filter(|e| e.epoch == epoch)
            .count()
    }

    /// The live flows, one per line, as `ovs-appctl dpctl/dump-flows`
    /// lists a netdev datapath's: the exact key, the counters, the steps.
    pub fn dump(&self, epoch: u64, worker: usize) -> String {
        let mut s = String::new();
        for e in self.slots.iter().flatten().filter(|e| e.epoch == epoch) {
            let _ = writeln!(
                s,
                "{}, packets:{}, bytes:{}, actions:{} (worker {worker})",
                format_key(&e.key),
                e.total_packets,
                e.total_bytes,
                format_ops(&e.ops)
            );
        }
        s
    }
}

/// A flow key in the datapath's notation (`in_port(1),tunnel(...),eth(...)`).
pub fn format_key(k: &FlowKey) -> String {
    let mut s = format!("in_port({})", k.get(f::IN_PORT));
    match k.get(f::TUN_FAMILY) {
        4 => {
            let _ = write!(
                s,
                ",tunnel(tun_id={:#x},src={},dst={})",
                k.get(f::TUN_ID),
                Ipv4Addr::from(k.get(f::TUN_SRC) as u32),
                Ipv4Addr::from(k.get(f::TUN_DST) as u32)
            );
        }
        6 => {
            let _ = write!(
                s,
                ",tunnel(tun_id={:#x},ipv6_src={},ipv6_dst={})",
                k.get(f::TUN_ID),
                v6(k, f::TUN_IPV6_SRC_HI, f::TUN_IPV6_SRC_LO),
                v6(k, f::TUN_IPV6_DST_HI, f::TUN_IPV6_DST_LO)
            );
        }
        _ => {}
    }
    let mac = |v: u64| {
        let b = v.to_be_bytes();
        format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[2], b[3], b[4], b[5], b[6], b[7]
        )
    };
    let _ = write!(
        s,
        ",eth(src={},dst={})",
        mac(k.get(f::DL_SRC)),
        mac(k.get(f::DL_DST))
    );
    if k.get(f::VLAN_TCI) != 0 {
        let _ = write!(s, ",vlan(tci={:#06x})", k.get(f::VLAN_TCI));
    }
    let ty = k.get(f::DL_TYPE);
    let _ = write!(s, ",eth_type({ty:#06x})");
    let proto = k.get(f::NW_PROTO);
    match ty {
        0x0800 => {
            let _ = write!(
                s,
                ",ipv4(src={},dst={},proto={proto})",
                Ipv4Addr::from(k.get(f::NW_SRC) as u32),
                Ipv4Addr::from(k.get(f::NW_DST) as u32)
            );
        }
        0x86dd => {
            let _ = write!(
                s,
                ",ipv6(src={},dst={},proto={proto})",
                v6(k, f::IPV6_SRC_HI, f::IPV6_SRC_LO),
                v6(k, f::IPV6_DST_HI, f::IPV6_DST_LO)
            );
        }
        _ => {}
    }
    let l4 = match proto {
        6 => Some("tcp"),
        17 => Some("udp"),
        1 | 58 => Some("icmp"),
        _ => None,
    };
    if let (Some(name), 0x0800 | 0x86dd) = (l4, ty) {
        let _ = write!(
            s,
            ",{name}(src={},dst={})",
            k.get(f::TP_SRC),
            k.get(f::TP_DST)
        );
    }
    s
}

/// The IPv6 address a key keeps in two words.
fn v6(k: &FlowKey, hi: FieldPos, lo: FieldPos) -> Ipv6Addr {
    Ipv6Addr::from(((k.get(hi) as u128) << 64) | k.get(lo) as u128)
}

/// Cached steps in the datapath's notation (as `ofproto/trace` writes
/// them).
pub fn format_ops(ops: &[Op]) -> String {
    tunlab_dp::pipeline::datapath_actions(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunlab_dp::TunnelSet;

    fn key(port: u32, src: u64) -> FlowKey {
        let mut k = FlowKey::default();
        k.set(f::IN_PORT, port as u64);
        k.set(f::DL_SRC, src);
        k.set(f::DL_TYPE, 0x0800);
        k
    }

    fn out(port: u32) -> Op {
        Op::Output {
            port,
            tun: TunnelSet::default(),
        }
    }

    #[test]
    fn a_put_flow_hits_under_its_epoch_only() {
        let mut c = FlowCache::new(64);
        let k = key(1, 0xaa);
        assert!(c.lookup(&k, 7, 100).is_none());
        c.put(&k, 7, &[out(2)]);
        assert_eq!(c.lookup(&k, 7, 100), Some(&[out(2)][..]));
        assert_eq!(c.lookup(&k, 7, 50).map(<[Op]>::len), Some(1));
        // The rules moved on: the entry is stale.
        assert!(c.lookup(&k, 8, 100).is_none());
        assert_eq!((c.hits, c.misses), (2, 2));
        assert_eq!(c.len(7), 1);
        assert_eq!(c.len(8), 0);
        // Another key misses.
        assert!(c.lookup(&key(1, 0xab), 7, 1).is_none());
    }

    #[test]
    fn what_flows_carried_is_handed_up_once_even_after_eviction() {
        let mut c = FlowCache::new(1);
        let (a, b) = (key(1, 1), key(1, 2));
        c.put(&a, 1, &[out(2)]);
        c.lookup(&a, 1, 100);
        c.lookup(&a, 1, 60);
        // One slot: b takes a's, and a's counts wait to be handed up.
        c.put(&b, 1, &[out(3)]);
        assert_eq!(c.evictions, 1);
        c.lookup(&b, 1, 10);
        let mut got = c.take_counted();
        got.sort_by_key(|x| x.1);
        assert_eq!(got, vec![(b, 1, 10), (a, 2, 160)]);
        assert!(c.take_counted().is_empty(), "counted once");
        c.lookup(&b, 1, 5);
        c.flush();
        assert_eq!(c.take_counted(), vec![(b, 1, 5)]);
        assert_eq!(c.len(1), 0);
    }

    #[test]
    fn a_controller_step_is_not_cached() {
        let mut c = FlowCache::new(8);
        let k = key(1, 1);
        let ops = [Op::Controller(Box::new(tunlab_dp::PacketIn {
            max_len: 128,
            table: 0,
            cookie: 0,
            reason: tunlab_dp::PacketInReason::Action,
            id: 0,
            userdata: Vec::new(),
            key: k,
            continuation: None,
        }))];
        c.put(&k, 1, &ops);
        assert!(c.lookup(&k, 1, 1).is_none());
        assert_eq!((c.installed, c.refused), (0, 1));
    }

    #[test]
    fn the_dump_names_the_key_and_the_steps() {
        let mut c = FlowCache::new(8);
        let mut k = key(3, 0x0200_0000_0001);
        k.set(f::NW_PROTO, 6);
        k.set(f::NW_SRC, 0xc0a8_0001);
        k.set(f::NW_DST, 0xc0a8_0002);
        k.set(f::TP_SRC, 40000);
        k.set(f::TP_DST, 5201);
        let tun = TunnelSet {
            id: Some(5),
            dst: Some("10.0.0.2".parse().unwrap()),
            ..TunnelSet::default()
        };
        c.put(&k, 1, &[Op::PushVlan(0x8100), Op::Output { port: 9, tun }]);
        c.lookup(&k, 1, 1500);
        let d = c.dump(1, 0);
        assert_eq!(
            d,
            "in_port(3),eth(src=02:00:00:00:00:01,dst=00:00:00:00:00:00),eth_type(0x0800),\
             ipv4(src=192.168.0.1,dst=192.168.0.2,proto=6),tcp(src=40000,dst=5201), \
             packets:1, bytes:1500, actions:push_vlan(tpid=0x8100),\
             set(tunnel(tun_id=0x5,dst=10.0.0.2)),9 (worker 0)\n"
        );
        assert_eq!(c.dump(2, 0), "");
    }
}
