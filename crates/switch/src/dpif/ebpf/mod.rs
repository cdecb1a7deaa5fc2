//! The switch's side of the kernel (eBPF) datapath: the devices of its
//! tenant ports (a veth pair and an upcall TAP each), the tunnel ports it
//! decapsulates for, and the step that turns the slow path's decision for
//! a flow's first packet into a cache entry (OVS's ofproto-dpif "xlate
//! then install").
//!
//! Here: the datapath as a whole (loaded, pinned, its `Dpif`); its ports'
//! devices are in [`ports`], the translation of a decision into a cached
//! flow in [`xlate`].
//!
//! What may be cached is decided in `xlate`, conservatively: a decision that
//! depends on more than the masked key (`normal`'s MAC learning), several
//! outputs, VLAN edits, or a port the kernel path does not serve stays in
//! the slow path (slower, never wrong).

use crate::config::{Port, PortKind, TunnelPort};
use crate::dpif::provider::{
    Counted, Decide, Dpif, PortCounters, PortEnv, Revalidation, SweepCounts, Sweeper, Upcalls,
    Walked,
};
use crate::port::tenant_tap_options;
use crate::port::{default_tenant_mtu, geneve_options, remote_and_key, StartError};
use std::collections::HashMap;
use std::net::IpAddr;
use tunlab_dp::key::{f, DP_WORDS};
use tunlab_dp::{Action, Classifier, DropReason, FlowKey, Op, TlvMap, TunnelSet};
use tunlab_ebpf::maps::{self as km, Flow, TunnelKey, TunnelPortEntry};
use tunlab_ebpf::{Destination, KernelDatapath};
use tunlab_netio::tap::{Tap, TapOptions};
use tunlab_wire::tunnel::TunnelKind;

mod pins;
mod ports;
mod riders;
mod walk;
mod xlate;

use pins::{pin_dir, PinLock};
use riders::UpcallKeys;

use ports::ip;

/// A tenant port's devices.
#[derive(Debug)]
struct VethPort {
    name: String,
    ifindex: u32,
    upcall: String,
    upcall_ifindex: u32,
    /// The switch made the device (a veth port) and deletes it when the
    /// port goes; a system port's device is its owner's.
    owned: bool,
}

/// What an ofport is to the kernel datapath.
#[derive(Debug, Clone)]
enum Target {
    /// A tenant device: a veth whose peer is in the tenant's namespace
    /// (`peer`: IP frames are delivered straight into it), or a system
    /// port's device (frames leave through it, whatever it is).
    Veth { ifindex: u32, peer: bool },
    Tunnel {
        cfg: TunnelPort,
        underlay: u32,
        mtu: u16,
        /// The underlay device's name (its MTU is watched).
        dev: String,
    },
    /// A QinQ port: 802.1ad frames on this underlay device.
    Qinq { ifindex: u32 },
}

/// The kernel datapath and what the switch knows of it.
#[derive(Debug)]
pub struct Kernel {
    dp: KernelDatapath,
    veths: Vec<VethPort>,
    /// QinQ ports: the port's name, its underlay device and upcall TAP.
    qinqs: Vec<VethPort>,
    targets: HashMap<u32, Target>,
    /// Each kernel tunnel port's decapsulation entries (under its remote,
    /// and under any remote), in the order they were added: the kernel's
    /// map holds one port per key ([`Kernel::decap_owner`]); another port
    /// on the same key takes the slow path for it until that one goes.
    decaps: Vec<(u32, TunnelKey, TunnelPortEntry)>,
    /// Ports with a fixed key, under each of their decapsulation keys:
    /// the kernel's `tl_tunnel_ids` names the last added for each.
    decap_ids: Vec<(u32, km::TunnelIdKey)>,
    /// An adopted datapath's leftover port entries have been removed.
    adoption_swept: bool,
    /// False while any rule uses `normal` (its outputs depend on learned
    /// MACs, not on the key alone).
    cacheable: bool,
    /// How rule changes reached the cache: flow by flow, or as a new
    /// generation (every flow a miss).
    each_flow_changes: u64,
    new_generations: u64,
    /// A walk flow by flow stops after this many (then a new generation).
    each_flow_limit: u64,
    /// The rules' union mask, when a change moved it: set once the walk
    /// has removed the flows packed under the old one.
    new_union: Option<FlowKey>,
    /// Flows given new actions in place by a walk.
    replaced: u64,
    /// Flows a walk put in anew under a new mask before their old entry
    /// went (make-before-break), and flows it deleted (each a miss).
    rebuilt: u64,
    deleted_by_change: u64,
    /// The whole key of each cached flow's upcall, for the rebuilds.
    upcall_keys: UpcallKeys,
    /// Flows installed, and why others were not.
    pub installed: u64,
    pub not_installed: HashMap<&'static str, u64>,
    /// Held while this process owns the pinned datapath (after `dp`, so
    /// that the pins go before the lock does).
    _pin_lock: Option<PinLock>,
}

impl Kernel {
    /// Load the programs and create the maps; nothing is attached yet.
    pub fn load(cfg: &crate::config::Config) -> Result<Kernel, StartError> {
        let node = &cfg.name;
        let (dir, lock) = match pin_dir(cfg.bpf_pin_dir.as_deref(), node)? {
            Some((d, l)) => (Some(d), Some(l)),
            None => (None, None),
        };
        let dp = KernelDatapath::load(cfg.flow_cache, cfg.tunnel_destinations, dir.as_deref())
            .map_err(|e| StartError::Port {
                port: "-".into(),
                msg: format!("kernel datapath: {e}"),
            })?;
        let shown = lock.as_ref().map_or("", |l| l.shown());
        if let (Some(why), true) = (dp.stale_pins(), dir.is_some()) {
            crate::tl_log!(
                Warning,
                "pins_not_adopted",
                format!("tunlab switch {node}: the maps pinned at {shown} are another build's ({why}): not adopted, this run starts with an empty flow cache");
                node = node,
                dir = shown
            );
        }
        if dp.adopted() && dir.is_some() {
            crate::tl_log!(
                Info,
                "pins_adopted",
                format!("tunlab switch {node}: adopting the kernel datapath pinned at {shown} (its cached flows forward until revalidated)");
                node = node,
                dir = shown
            );
        }
        Ok(Kernel {
            dp,
            veths: Vec::new(),
            qinqs: Vec::new(),
            targets: HashMap::new(),
            decaps: Vec::new(),
            decap_ids: Vec::new(),
            adoption_swept: false,
            cacheable: true,
            each_flow_changes: 0,
            new_generations: 0,
            each_flow_limit: u64::MAX,
            new_union: None,
            replaced: 0,
            rebuilt: 0,
            deleted_by_change: 0,
            upcall_keys: UpcallKeys::new(EACH_FLOW_LIMIT as usize),
            installed: 0,
            not_installed: HashMap::new(),
            _pin_lock: lock,
        })
    }
}

impl Dpif for Kernel {
    fn kind(&self) -> &'static str {
        "ebpf"
    }

    fn port_add(&mut self, p: &Port, env: PortEnv<'_>) -> Result<Option<Upcalls>, StartError> {
        Ok(Some(match p.kind {
            PortKind::Veth { .. } => Upcalls::Devices(self.add_veth_port(
                p,
                env.offloads,
                env.underlay_mtu,
                env.ports,
            )?),
            PortKind::System => Upcalls::Devices(self.add_system_port(p, env.offloads)?),
            PortKind::QinQ { .. } => Upcalls::Devices(self.add_qinq_port(p)?),
            PortKind::Tunnel(_) => {
                self.add_tunnel_port(p)?;
                Upcalls::Socket
            }
            // TAP ports are the slow path's alone: it holds their descriptor.
            PortKind::Tap { .. } => return Ok(None),
        }))
    }

    /// A port leaves: its programs, map entries and devices go.
    fn port_del(&mut self, ofport: u32, cfg: Option<&Port>) {
        self.targets.remove(&ofport);
        self.dp.forget_port_stats(ofport);
        if let Some(i) = self
            .qinqs
            .iter()
            .position(|q| cfg.is_some_and(|c| c.name == q.name))
        {
            let q = self.qinqs.remove(i);
            self.dp
                .remove_qinq_port(q.ifindex, &q.upcall, q.upcall_ifindex);
        }
        if let Some(i) = self
            .veths
            .iter()
            .position(|v| cfg.is_some_and(|c| c.name == v.name))
        {
            let v = self.veths.remove(i);
            let _ = self.dp.set_police(v.ifindex, None);
            self.dp
                .remove_tenant_port(&v.name, v.ifindex, &v.upcall, v.upcall_ifindex);
            if v.owned {
                let _ = ip(&v.name, &["link", "del", &v.name]);
            }
        }
        self.remove_decaps(ofport);
    }

    /// After any change to the flow table, the TLV map or the ports: the
    /// new megaflow mask (the union of every rule's, and in_port) and a
    /// new generation. Once this returns no earlier entry forwards.
    fn revalidate(&mut self, rules: &Classifier, tlv: &TlvMap) -> Result<Revalidation, String> {
        let first_after_adoption = self.dp.adopted() && !self.adoption_swept;
        if first_after_adoption {
            // Every port is open by the first revalidation: what an
            // adopted map names beyond them is a dead switch's.
            let keep: Vec<u32> = self
                .veths
                .iter()
                .chain(&self.qinqs)
                .flat_map(|v| [v.ifindex, v.upcall_ifindex])
                .collect();
            let gone = self.dp.retain_ports(&keep).map_err(|e| e.to_string())?;
            if gone > 0 {
                crate::tl_log!(
                    Info,
                    "ports_forgotten",
                    format!("tunlab switch: forgot {gone} port entries of the previous run");
                    count = gone
                );
            }
            self.adoption_swept = true;
        }
        let mask = cache_mask(rules);
        let cacheable = !rules.any_action(|a| matches!(a, Action::Normal));
        let mut entries: Vec<(u16, u8, u32)> = (0..tunlab_dp::key::TUN_METADATA_FIELDS)
            .filter_map(|n| tlv.option(n).map(|(c, t, _)| (c, t, n as u32)))
            .collect();
        entries.sort_unstable();
        // The cache was built under this TLV map (a restart, or any change
        // of the rules): its flows are checked one by one, as OVS's
        // revalidators do, each against its own megaflow mask, and only
        // those the change reaches are replaced (new actions, same mask)
        // or go (a mask that no longer covers the decision), instead of
        // every flow missing at once (a burst of slow-path packets that
        // the reinstalled flows overtake: TCP sees reordering and
        // retransmits). A rule of a new shape adds a mask; it does not
        // empty the cache. A large cache after a change is checked up to
        // a limit, then flushed (a new generation).
        let same_mask = self.dp.mask_layout().flow_key() == mask;
        let union = km::Mask::of(&mask);
        if union.too_wide() && cacheable && !same_mask {
            crate::tl_log!(
                Warning,
                "masks_too_wide",
                format!(
                    "tunlab switch: the rules' megaflow masks together keep {} flow key words, the kernel's flow cache key {}: a flow whose own mask keeps more stays in the slow path, and so does every flow once the 16 mask slots are taken (ctl stats: kernel_not_installed_mask_too_wide, kernel_slow_wide_mask)",
                    union.words(),
                    tunlab_ebpf::maps::CKEY_WORDS
                );
                words = union.words()
            );
        }
        if cacheable && self.cacheable && self.dp.tlv().map_err(|e| e.to_string())? == entries {
            self.each_flow_limit = if first_after_adoption {
                u64::MAX
            } else {
                EACH_FLOW_LIMIT
            };
            // The union mask (for flows past the mask slots) changes after
            // the walk, which removes what was packed under the old one.
            self.new_union = (!same_mask).then_some(mask);
            return Ok(Revalidation::EachFlow {
                adopted: first_after_adoption,
            });
        }
        self.new_generations += 1;
        self.upcall_keys.clear();
        self.dp.set_tlv(&entries).map_err(|e| e.to_string())?;
        self.dp.revalidate(&mask).map_err(|e| e.to_string())?;
        self.cacheable = cacheable;
        Ok(Revalidation::NewGeneration)
    }

    fn revalidate_each(&mut self, decide: &mut Decide<'_>, tlv: &TlvMap) -> Result<Walked, String> {
        self.walk(decide, tlv)
    }

    fn rebalance(&mut self) {
        // Heuristic order only: an error leaves the old order, which works.
        let _ = self.dp.rebalance_masks();
    }

    fn flow_flush(&mut self) -> Result<(), String> {
        // A new generation under the same mask: every entry is a miss.
        self.upcall_keys.clear();
        self.dp.new_generation().map_err(|e| e.to_string())
    }

    /// The slow path decided `decision` for a packet with flow key `key`
    /// that arrived on a port the kernel serves: cache it if the kernel
    /// can do the same.
    fn flow_put(
        &mut self,
        key: &FlowKey,
        mask: &FlowKey,
        decision: Result<&[Op], DropReason>,
        tlv: &TlvMap,
    ) {
        match self
            .compile(key, decision, tlv)
            .and_then(|f| self.put(key, mask, f))
        {
            Ok(ck) => {
                self.installed += 1;
                self.upcall_keys.remember(ck, key);
            }
            Err(why) => *self.not_installed.entry(why).or_default() += 1,
        }
    }

    /// The flows the kernel holds (`tunlab ctl dump-flows --datapath`).
    fn flow_dump(&self) -> Result<String, String> {
        let flows = self.dp.flows().map_err(|e| e.to_string())?;
        let mut s = String::new();
        for (k, fl) in flows {
            let nz: Vec<String> =
                k.w.iter()
                    .enumerate()
                    .filter(|(_, w)| **w != 0)
                    .map(|(i, w)| format!("w{i}={w:#x}"))
                    .collect();
            let action = match (fl.n_ops, fl.ops[0].kind) {
                (0, _) => "drop".to_string(),
                (_, km::OP_OUTPUT_PORT) => format!("output(ifindex {})", fl.ops[0].arg),
                (_, km::OP_OUTPUT_TUNNEL) => format!("tnl_push(template {})", fl.ops[0].arg),
                _ => fl.ops[..(fl.n_ops as usize).min(fl.ops.len())]
                    .iter()
                    .map(|o| match o.kind {
                        km::OP_OUTPUT_PORT => format!("output(ifindex {})", o.arg),
                        km::OP_OUTPUT_DEV => format!("output(dev ifindex {})", o.arg),
                        km::OP_PUSH_VLAN => {
                            format!("push_vlan(tpid={:#06x},tci={:#06x})", o.arg16, o.arg)
                        }
                        km::OP_POP_VLAN => "pop_vlan".to_string(),
                        k => format!("op{k}"),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
            };
            s.push_str(&format!(
                "in_port({}),key({}), packets:{}, bytes:{}, actions:{action}\n",
                k.get(f::IN_PORT),
                nz.join(","),
                fl.packets,
                fl.bytes
            ));
        }
        Ok(s)
    }

    /// Read each underlay device's MTU (sysfs, no fork); where one
    /// changed, its templates take the new MTU in place, so that cached
    /// flows send too-big frames to the slow path for an ICMP answer at
    /// once.
    fn refresh_mtu(&mut self) -> Option<u16> {
        let mut smallest: Option<u16> = None;
        let mut changed = Vec::new();
        for t in self.targets.values_mut() {
            if let Target::Tunnel {
                underlay, mtu, dev, ..
            } = t
            {
                let Some(now) = crate::port::device_mtu(dev) else {
                    continue;
                };
                if now != *mtu {
                    *mtu = now;
                    changed.push((*underlay, now));
                }
                smallest = Some(smallest.map_or(now, |m| m.min(now)));
            }
        }
        changed.sort_unstable();
        changed.dedup();
        for (ifindex, mtu) in changed {
            if let Err(e) = self.dp.set_device_mtu(ifindex, mtu) {
                crate::tl_log!(
                    Error,
                    "underlay_mtu_failed",
                    format!("tunlab switch: underlay MTU change to {mtu}: {e}");
                    mtu = mtu
                );
            }
        }
        smallest
    }

    fn flow_counts(&mut self, counted: Counted) -> Vec<(FlowKey, u64, u64)> {
        let Some(s) = counted.into_inner::<Swept>() else {
            return Vec::new();
        };
        self.upcall_keys.swept(&s.deleted, s.unlisted, s.since);
        s.deltas
            .iter()
            .map(|(k, p, b)| (self.dp.unpack(k), *p, *b))
            .collect()
    }

    fn sweeper(&self) -> Result<Option<Box<dyn Sweeper>>, String> {
        match self.dp.sweeper() {
            Ok(s) => Ok(Some(Box::new(EbpfSweeper(s, std::time::Instant::now())))),
            Err(e) => Err(e.to_string()),
        }
    }

    fn port_stats(&self) -> Vec<(u32, PortCounters)> {
        self.dp
            .port_stats()
            .unwrap_or_default()
            .into_iter()
            .map(|(port, c)| {
                let c = PortCounters {
                    rx_packets: c.rx_packets,
                    rx_bytes: c.rx_bytes,
                    tx_packets: c.tx_packets,
                    tx_bytes: c.tx_bytes,
                    rx_dropped: c.rx_dropped,
                };
                (port, c)
            })
            .collect()
    }

    /// Counters of the kernel datapath, with the install counts.
    fn stats(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self
            .dp
            .stats()
            .unwrap_or_default()
            .into_iter()
            .map(|(n, v)| (format!("kernel_{n}"), v))
            .collect();
        out.push(("kernel_installed".into(), self.installed));
        out.push((
            "kernel_changes_revalidated_each_flow".into(),
            self.each_flow_changes,
        ));
        out.push(("kernel_changes_new_generation".into(), self.new_generations));
        out.push(("kernel_flows_replaced_in_place".into(), self.replaced));
        out.push(("kernel_flows_rebuilt_before_break".into(), self.rebuilt));
        out.push((
            "kernel_flows_deleted_by_change".into(),
            self.deleted_by_change,
        ));
        out.push(("kernel_upcall_keys".into(), self.upcall_keys.len() as u64));
        out.push((
            "kernel_upcall_keys_not_kept".into(),
            self.upcall_keys.not_kept,
        ));
        out.push(("kernel_masks".into(), self.dp.masks().len() as u64));
        let mut why: Vec<_> = self.not_installed.iter().collect();
        why.sort();
        for (w, n) in why {
            out.push((format!("kernel_not_installed_{w}"), *n));
        }
        out
    }
}

impl Kernel {
    /// Put `flow` in the cache for `key` under its own mask, or, with
    /// every mask slot taken, under the rules' union (which covers every
    /// decision's mask); its cache key, or why it is not cached.
    fn put(&mut self, key: &FlowKey, mask: &FlowKey, flow: Flow) -> Result<km::CKey, &'static str> {
        use tunlab_ebpf::datapath::Error as E;
        kernel_extracts_alike(key, mask)?;
        let put = match self.dp.install_masked(key, mask, flow) {
            Err(E::MasksFull { .. }) => {
                *self
                    .not_installed
                    .entry("masks_full_under_union")
                    .or_default() += 1;
                self.dp.install(key, flow)
            }
            r => r,
        };
        put.map_err(|e| match e {
            E::PortTooLarge { .. } => "in_port_too_large",
            E::MaskTooWide { .. } => "mask_too_wide",
            E::MaskPastKernelKey => "needs_userspace_fields",
            E::CacheFull => "cache_full",
            _ => "map_update_failed",
        })
    }

    /// A walk flow by flow could not finish: a new generation instead
    /// (every flow a miss), under the new union mask if the change moved
    /// it.
    fn flush_after(&mut self, new_union: Option<FlowKey>) -> Result<(), String> {
        self.new_generations += 1;
        self.upcall_keys.clear();
        match new_union {
            Some(m) => self.dp.revalidate(&m),
            None => self.dp.new_generation(),
        }
        .map_err(|e| e.to_string())
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        for v in self.veths.iter().filter(|v| v.owned) {
            let _ = ip(&v.name, &["link", "del", &v.name]);
        }
    }
}

/// After a rule change, at most this many cached flows are checked one by
/// one (a few hundred milliseconds of the slow path's thread); a larger
/// cache takes a new generation instead. A restart's adopted cache is
/// always checked whole.
const EACH_FLOW_LIMIT: u64 = 100_000;

/// The kernel datapath the configuration asks for: none, the eBPF one
/// (refusing to start, with the reason, if this kernel cannot run it), or
/// whichever works (`auto`, which says what it chose and why).
pub fn choose(cfg: &crate::config::Config) -> Result<Option<Box<dyn Dpif>>, StartError> {
    use crate::config::DatapathChoice;
    match cfg.datapath {
        DatapathChoice::Userspace => Ok(None),
        DatapathChoice::Ebpf => Ok(Some(Box::new(Kernel::load(cfg)?))),
        DatapathChoice::Auto if !cfg.ports.iter().any(|p| p.kind.needs_kernel()) => {
            chose(&cfg.name, "userspace", "no veth or system port for the kernel to deliver to; datapath = \"ebpf\" takes them at run time");
            Ok(None)
        }
        // A veth or system port needs the kernel: if it cannot load, the
        // start fails, with why.
        DatapathChoice::Auto => {
            let k = Kernel::load(cfg)?;
            chose(&cfg.name, "ebpf", "this kernel runs tunlab's TC programs");
            Ok(Some(Box::new(k)))
        }
    }
}

/// `datapath = "auto"` says what it took, and why.
fn chose(node: &str, datapath: &str, why: &str) {
    crate::tl_log!(
        Info,
        "datapath_chosen",
        format!("tunlab switch {node}: datapath auto: {datapath} ({why})");
        node = node,
        datapath = datapath
    );
}

/// The revalidator's handle on the kernel's flow cache, and when its
/// last sweep began.
struct EbpfSweeper(tunlab_ebpf::datapath::FlowSweeper, std::time::Instant);

/// What the revalidator hands the switch's thread after a sweep.
struct Swept {
    /// What entries carried: key, packets, bytes.
    deltas: Vec<(km::CKey, u64, u64)>,
    /// Live entries the sweep deleted; `unlisted`: more than these.
    deleted: Vec<km::CKey>,
    unlisted: bool,
    since: std::time::Instant,
}

impl Sweeper for EbpfSweeper {
    fn sweep(&mut self, max_idle: std::time::Duration) -> Result<SweepCounts, String> {
        self.1 = std::time::Instant::now();
        let s = self.0.sweep(max_idle).map_err(|e| e.to_string())?;
        Ok(SweepCounts {
            seen: s.seen,
            idle: s.idle,
            stale: s.stale,
            evicted: s.evicted,
        })
    }

    fn take_counted(&mut self) -> Option<Counted> {
        let deltas = self.0.take_deltas();
        let (deleted, unlisted) = self.0.take_deleted();
        (!deltas.is_empty() || !deleted.is_empty() || unlisted).then(|| {
            Counted::new(Swept {
                deltas,
                deleted,
                unlisted,
                since: self.1,
            })
        })
    }
}

/// Whether the programs read every field of `key` (the packet's whole key,
/// as user space extracted it) that a decision under megaflow mask `mask`
/// depends on, as user space does; if not, why the flow stays in the slow
/// path:
///
/// - `needs_userspace_fields`: the mask keeps a field the programs do not
///   extract (ARP and ND addresses, TTL, fragment bits, TCP flags, the
///   flow label);
/// - `ipv6_fragment_l4`: the packet is an IPv6 fragment (or has a fragment
///   header cut short) and the decision read its protocol or ports. User
///   space reads a first fragment's behind the fragment header, as OVS
///   does; the programs read any fragment as nw_proto 44 without ports,
///   so an entry made from one fragment would answer other fragments that
///   user space decides otherwise.
fn kernel_extracts_alike(key: &FlowKey, mask: &FlowKey) -> Result<(), &'static str> {
    if !km::Mask::fits(mask) {
        return Err("needs_userspace_fields");
    }
    let fragment = key.get(f::DL_TYPE) == 0x86dd
        && (key.get(f::NW_FRAG) != 0 || key.get(f::NW_PROTO) == IPPROTO_FRAGMENT);
    let reads_l4 = [f::NW_PROTO, f::TP_SRC, f::TP_DST]
        .iter()
        .any(|&p| mask.get(p) != 0);
    if fragment && reads_l4 {
        return Err("ipv6_fragment_l4");
    }
    Ok(())
}

/// The IPv6 extension header that is a fragment header.
const IPPROTO_FRAGMENT: u64 = 44;

/// The kernel cache's one megaflow mask: the in-port, every rule's match
/// fields, and the VLAN tag when an action reads it (a pop, or a VID or
/// PCP set, differs for tagged and untagged frames even where no rule
/// matches on the tag). Only the words the programs extract: a decision
/// that reads the others is never cached ([`kernel_extracts_alike`]).
fn cache_mask(rules: &Classifier) -> FlowKey {
    let mut mask = FlowKey::default();
    mask.set(f::IN_PORT, f::IN_PORT.max());
    for rm in rules.masks() {
        for (m, w) in mask.w.iter_mut().zip(rm.w) {
            *m |= w;
        }
    }
    let reads_tag = |a: &Action| {
        matches!(
            a,
            Action::PushVlan(_) | Action::PopVlan | Action::ModVlanVid(_) | Action::ModVlanPcp(_)
        )
    };
    if rules.any_action(reads_tag) {
        mask.set(f::VLAN_TCI, f::VLAN_TCI.max());
    }
    mask.w[DP_WORDS..].fill(0);
    mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunlab_dp::{parse_flow, NumericPorts, Pipeline};

    fn rules(rs: &[&str]) -> Classifier {
        let mut c = Classifier::new();
        for r in rs {
            c.add(parse_flow(r, &NumericPorts).unwrap(), 0);
        }
        c
    }

    /// A rule that pops a tag without matching on it: tagged and untagged
    /// frames of the port must not share a cache entry.
    #[test]
    fn the_cache_mask_keeps_the_tag_when_an_action_reads_it() {
        let plain = rules(&["in_port=1 actions=output:2", "in_port=2 actions=output:1"]);
        assert_eq!(cache_mask(&plain).get(f::VLAN_TCI), 0);
        let mut c = rules(&[
            "in_port=1 actions=pop_vlan,output:2",
            "in_port=2 actions=output:1",
        ]);
        let mask = cache_mask(&c);
        assert_eq!(mask.get(f::VLAN_TCI), f::VLAN_TCI.max());
        // And every decision's megaflow fits under it.
        let mut k = FlowKey::default();
        k.set(f::IN_PORT, 1);
        k.set(f::VLAN_TCI, 0x1005);
        let (r, wc) = Pipeline::new().process_megaflow(&mut c, &k, 60, 0, &mut Vec::new());
        assert!(r.is_ok());
        assert!(mask.covers(&wc));
        assert!(!cache_mask(&plain).covers(&wc));
    }

    /// A rule on a field only user space extracts (here arp_sha, and a
    /// register): the union mask keeps neither, and a decision that read
    /// the ARP address stays in the slow path, by name; one that did not
    /// (an IPv4 packet the ARP rule's stages turned away) is cached.
    #[test]
    fn a_decision_on_a_field_the_kernel_does_not_extract_is_not_cached() {
        let mut on_sha = parse_flow("priority=200,arp actions=output:2", &NumericPorts).unwrap();
        on_sha.m.mask.set(f::ARP_SHA, f::ARP_SHA.max());
        on_sha.m.value.set(f::ARP_SHA, 0x0200_0000_000a);
        let mut on_reg = parse_flow("priority=300,in_port=7 actions=drop", &NumericPorts).unwrap();
        on_reg.m.mask.set(tunlab_dp::key::reg(3), u32::MAX as u64);
        let mut c = rules(&["priority=100,in_port=1 actions=output:3"]);
        c.add(on_sha, 0);
        c.add(on_reg, 0);
        let union = cache_mask(&c);
        assert_eq!(
            &union.w[DP_WORDS..],
            &[0; tunlab_dp::key::WORDS - DP_WORDS][..]
        );
        assert_eq!(union.get(f::DL_TYPE), f::DL_TYPE.max());
        let mut arp = FlowKey::default();
        arp.set(f::IN_PORT, 1);
        arp.set(f::DL_TYPE, 0x0806);
        arp.set(f::ARP_SHA, 0x0200_0000_000a);
        let (r, wc) = Pipeline::new().process_megaflow(&mut c, &arp, 60, 0, &mut Vec::new());
        assert!(r.is_ok());
        assert_eq!(wc.get(f::ARP_SHA), f::ARP_SHA.max());
        assert_eq!(
            kernel_extracts_alike(&arp, &wc),
            Err("needs_userspace_fields")
        );
        let mut ip = arp;
        ip.set(f::DL_TYPE, 0x0800);
        let (r, wc) = Pipeline::new().process_megaflow(&mut c, &ip, 60, 0, &mut Vec::new());
        assert!(r.is_ok());
        assert_eq!(kernel_extracts_alike(&ip, &wc), Ok(()));
    }

    /// An IPv6 fragment's L4 fields are user space's alone: a decision
    /// that read them is not cached, whether the fragment is the first
    /// (user space read the ports behind the fragment header) or a later
    /// one (nw_proto 44, which the kernel sees in the first fragment too);
    /// one that did not read them, or a whole packet's, is.
    #[test]
    fn a_decision_on_an_ipv6_fragments_l4_fields_is_not_cached() {
        let mut c = rules(&[
            "priority=200,udp6,tp_dst=53 actions=output:3",
            "priority=100,in_port=1 actions=output:2",
        ]);
        let mut whole = FlowKey::default();
        whole.set(f::IN_PORT, 1);
        whole.set(f::DL_TYPE, 0x86dd);
        whole.set(f::NW_PROTO, 17);
        whole.set(f::TP_DST, 53);
        let mut first = whole;
        first.set(f::NW_FRAG, 1);
        let mut later = FlowKey::default();
        later.set(f::IN_PORT, 1);
        later.set(f::DL_TYPE, 0x86dd);
        later.set(f::NW_PROTO, 44);
        later.set(f::NW_FRAG, 3);
        for (k, want) in [
            (whole, Ok(())),
            (first, Err("ipv6_fragment_l4")),
            (later, Err("ipv6_fragment_l4")),
        ] {
            let (r, wc) = Pipeline::new().process_megaflow(&mut c, &k, 60, 0, &mut Vec::new());
            assert!(r.is_ok());
            assert_eq!(wc.get(f::NW_FRAG), 0, "no rule reads it");
            assert_eq!(kernel_extracts_alike(&k, &wc), want, "{k:?}");
        }
        // Rules that read no L4 field: every fragment is cached.
        let mut c = rules(&["in_port=1 actions=output:2"]);
        for k in [first, later] {
            let (_, wc) = Pipeline::new().process_megaflow(&mut c, &k, 60, 0, &mut Vec::new());
            assert_eq!(kernel_extracts_alike(&k, &wc), Ok(()));
        }
    }
}
