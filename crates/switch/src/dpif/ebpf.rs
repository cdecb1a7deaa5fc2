//! The switch's side of the kernel (eBPF) datapath: the devices of its
//! tenant ports (a veth pair and an upcall TAP each), the tunnel ports it
//! decapsulates for, and the step that turns the slow path's decision for
//! a flow's first packet into a cache entry (OVS's ofproto-dpif "xlate
//! then install").
//!
//! What may be cached is decided here, conservatively: a decision that
//! depends on more than the masked key (`normal`'s MAC learning), several
//! outputs, VLAN edits, or a port the kernel path does not serve stays in
//! the slow path (slower, never wrong).

use crate::config::{Port, PortKind, TunnelPort};
use crate::dpif::provider::{
    Counted, Dpif, PortCounters, PortEnv, Revalidation, SweepCounts, Sweeper, Upcalls,
};
use crate::port::tenant_tap_options;
use crate::port::{default_tenant_mtu, geneve_options, remote_and_key, StartError};
use std::collections::HashMap;
use std::net::IpAddr;
use tunlab_dp::key::f;
use tunlab_dp::{Action, Classifier, DropReason, FlowKey, Op, TlvMap, TunnelSet};
use tunlab_ebpf::maps::{self as km, Flow, TunnelKey, TunnelPortEntry};
use tunlab_ebpf::{Destination, KernelDatapath};
use tunlab_netio::netns;
use tunlab_netio::tap::{Tap, TapOptions};
use tunlab_wire::tunnel::TunnelKind;

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
    /// Flows installed, and why others were not.
    pub installed: u64,
    pub not_installed: HashMap<&'static str, u64>,
    /// Held while this process owns the pinned datapath (after `dp`, so
    /// that the pins go before the lock does).
    _pin_lock: Option<PinLock>,
}

/// The lock on a node's pins: held while the descriptor is open, its file
/// removed on a normal stop (a killed switch's stays, unlocked).
#[derive(Debug)]
struct PinLock {
    _file: std::fs::File,
    path: std::path::PathBuf,
}

impl Drop for PinLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn is_bpffs(path: &std::path::Path) -> bool {
    use nix::sys::statfs::{statfs, BPF_FS_MAGIC};
    statfs(path).is_ok_and(|s| s.filesystem_type() == BPF_FS_MAGIC)
}

/// Where the node pins its kernel datapath (`bpf_pin_dir`/NAME), locked
/// against a second live switch of the same name: mounts bpffs at
/// /sys/fs/bpf if nothing is mounted there (as systemd does at boot).
fn pin_dir(
    base: Option<&str>,
    node: &str,
) -> Result<Option<(std::path::PathBuf, PinLock)>, StartError> {
    let Some(base) = base else {
        return Ok(None);
    };
    let perr = |msg: String| StartError::Port {
        port: "-".into(),
        msg: format!("bpf_pin_dir {base}: {msg}"),
    };
    let base = std::path::Path::new(base);
    let fs_root = std::path::Path::new("/sys/fs/bpf");
    if base.starts_with(fs_root) && !is_bpffs(fs_root) {
        netns::run(&["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"]).map_err(|e| {
            perr(format!(
                "no bpf filesystem mounted at /sys/fs/bpf, and mounting one failed: {e}"
            ))
        })?;
    }
    std::fs::create_dir_all(base).map_err(|e| perr(e.to_string()))?;
    if !is_bpffs(base) {
        return Err(perr(
            "not on a bpf filesystem (mount -t bpf bpf DIR, or bpf_pin_dir = \"none\")".into(),
        ));
    }
    let dir = base.join(node);
    std::fs::create_dir_all("/run/tunlab").map_err(|e| perr(format!("/run/tunlab: {e}")))?;
    // Named by the bpf filesystem's device (each mount of bpffs is its
    // own instance: switches in private mount namespaces never share one)
    // and the node.
    let fs_dev = std::fs::metadata(base)
        .map(|m| std::os::unix::fs::MetadataExt::dev(&m))
        .map_err(|e| perr(e.to_string()))?;
    let lock_path = format!("/run/tunlab/pins-{fs_dev:x}-{node}.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| perr(format!("{lock_path}: {e}")))?;
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this function owns; no memory passed.
    if unsafe { nix::libc::flock(lock.as_raw_fd(), nix::libc::LOCK_EX | nix::libc::LOCK_NB) } != 0 {
        return Err(perr(format!(
            "{} belongs to a running switch (node names must differ, or give another bpf_pin_dir)",
            dir.display()
        )));
    }
    Ok(Some((
        dir,
        PinLock {
            _file: lock,
            path: lock_path.into(),
        },
    )))
}

/// Run an `ip` command, naming the port on failure.
fn ip(port: &str, args: &[&str]) -> Result<String, StartError> {
    netns::run(&[&["ip"][..], args].concat()).map_err(|e| StartError::Port {
        port: port.to_string(),
        msg: e.to_string(),
    })
}

fn ifindex_of(port: &str, dev: &str) -> Result<u32, StartError> {
    let out = ip(port, &["-o", "link", "show", "dev", dev])?;
    out.split(':')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| StartError::Port {
            port: port.to_string(),
            msg: format!("cannot read the ifindex of {dev} from `ip link`: {out}"),
        })
}

/// A device's MTU (`ip -o link` prints `mtu N`).
fn mtu_of(port: &str, dev: &str) -> Result<u16, StartError> {
    let out = ip(port, &["-o", "link", "show", "dev", dev])?;
    let mut w = out.split_whitespace();
    w.find(|&t| t == "mtu")
        .and_then(|_| w.next())
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| StartError::Port {
            port: port.to_string(),
            msg: format!("cannot read the MTU of {dev} from `ip link`: {out}"),
        })
}

/// No IPv6 on a device the switch owns: its kernel would otherwise send
/// router solicitations and neighbour discovery the switch would read as
/// tenant frames.
fn no_ipv6(dev: &str) {
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1");
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
        if let (Some(why), Some(d)) = (dp.stale_pins(), &dir) {
            eprintln!(
                "tunlab switch {node}: the maps pinned at {} are another build's ({why}): not adopted, this run starts with an empty flow cache",
                d.display()
            );
        }
        if dp.adopted() {
            if let Some(d) = &dir {
                eprintln!(
                    "tunlab switch {node}: adopting the kernel datapath pinned at {} (its cached flows forward until revalidated)",
                    d.display()
                );
            }
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
            installed: 0,
            not_installed: HashMap::new(),
            _pin_lock: lock,
        })
    }

    /// Make a veth port's devices and attach to them: the pair (this end
    /// `p.name`, the tenant's end of the same name in its namespace, with
    /// the address and MTU) and the upcall TAP through which misses reach
    /// the switch and the switch reaches the tenant. Returns the TAP,
    /// which the userspace datapath serves as port `p`.
    fn add_veth_port(
        &mut self,
        p: &Port,
        offloads: bool,
        underlay_mtu: u16,
        ports: &[Port],
    ) -> Result<Vec<Tap>, StartError> {
        let PortKind::Veth {
            netns: ns,
            address,
            mtu,
        } = &p.kind
        else {
            return Err(StartError::Port {
                port: p.name.clone(),
                msg: "not a veth port".into(),
            });
        };
        let name = &p.name;
        let mtu = mtu
            .unwrap_or_else(|| default_tenant_mtu(underlay_mtu, ports))
            .to_string();
        // A killed switch's veth is still there, carrying its tenant's
        // connections through the pinned datapath: the restarted switch
        // adopts it as it is.
        let adopt = self.dp.adopted() && ifindex_of(name, name).is_ok();
        if !adopt {
            ip(
                name,
                &[
                    "link", "add", name, "type", "veth", "peer", "name", name, "netns", ns,
                ],
            )?;
        }
        let made = (|| {
            no_ipv6(name);
            ip(name, &["link", "set", name, "mtu", &mtu, "up"])?;
            ip(name, &["-n", ns, "link", "set", name, "mtu", &mtu, "up"])?;
            if let (Some(a), false) = (address, adopt) {
                ip(name, &["-n", ns, "addr", "add", a, "dev", name])?;
            }
            self.attach_tenant(p, &mtu, offloads, true)
        })();
        if made.is_err() {
            let _ = ip(name, &["link", "del", name]);
        }
        made
    }

    /// Attach to an existing device (a system port: a VM's TAP, a
    /// container's veth) as to a veth port's: its frames are switched on
    /// its ingress, frames for it leave through it, and misses reach the
    /// switch through an upcall TAP. The device itself is left alone.
    fn add_system_port(&mut self, p: &Port, offloads: bool) -> Result<Vec<Tap>, StartError> {
        let mtu = mtu_of(&p.name, &p.name)?.to_string();
        self.attach_tenant(p, &mtu, offloads, false)
    }

    /// A tenant device's upcall TAP (of `mtu`), programs and map entries;
    /// `peer`: the device is a veth whose other end is in the tenant's
    /// namespace. Returns the upcall TAP, which the userspace datapath
    /// serves as port `p`.
    fn attach_tenant(
        &mut self,
        p: &Port,
        mtu: &str,
        offloads: bool,
        peer: bool,
    ) -> Result<Vec<Tap>, StartError> {
        let name = &p.name;
        let perr = |msg: String| StartError::Port {
            port: name.clone(),
            msg,
        };
        let ifindex = ifindex_of(name, name)?;
        let upcall = format!("tlu{ifindex}");
        let tap = Tap::open(&upcall, tenant_tap_options(offloads))
            .map_err(|e| perr(format!("upcall TAP {upcall}: {e}")))?;
        no_ipv6(&upcall);
        ip(name, &["link", "set", &upcall, "mtu", mtu, "up"])?;
        let upcall_ifindex = ifindex_of(name, &upcall)?;
        self.dp
            .add_tenant_port(p.ofport, name, ifindex, &upcall, upcall_ifindex)
            .map_err(|e| perr(e.to_string()))?;
        self.dp
            .set_police(ifindex, p.police.map(crate::config::Policing::bytes))
            .map_err(|e| perr(e.to_string()))?;
        self.veths.push(VethPort {
            name: name.clone(),
            ifindex,
            upcall,
            upcall_ifindex,
            owned: peer,
        });
        self.targets
            .insert(p.ofport, Target::Veth { ifindex, peer });
        Ok(vec![tap])
    }

    /// A QinQ port in the kernel: its 802.1ad frames are switched on the
    /// underlay device's ingress; misses, and what the switch sends, go
    /// through an upcall TAP (no virtio-net header: frames as the packet
    /// socket would give them, the S-tag in place), which the userspace
    /// datapath serves instead of a packet socket.
    fn add_qinq_port(&mut self, p: &Port) -> Result<Vec<Tap>, StartError> {
        let PortKind::QinQ { underlay } = &p.kind else {
            return Err(StartError::Port {
                port: p.name.clone(),
                msg: "not a qinq port".into(),
            });
        };
        let perr = |msg: String| StartError::Port {
            port: p.name.clone(),
            msg,
        };
        let ifindex = ifindex_of(&p.name, underlay)?;
        let mtu = mtu_of(&p.name, underlay)?.to_string();
        let upcall = format!("tlq{ifindex}");
        let opts = TapOptions {
            vnet_hdr: false,
            multi_queue: true,
            offload: 0,
        };
        let tap =
            Tap::open(&upcall, opts).map_err(|e| perr(format!("upcall TAP {upcall}: {e}")))?;
        no_ipv6(&upcall);
        ip(&p.name, &["link", "set", &upcall, "mtu", &mtu, "up"])?;
        let upcall_ifindex = ifindex_of(&p.name, &upcall)?;
        self.dp
            .add_qinq_port(p.ofport, underlay, ifindex, &upcall, upcall_ifindex)
            .map_err(|e| perr(e.to_string()))?;
        self.targets.insert(p.ofport, Target::Qinq { ifindex });
        self.qinqs.push(VethPort {
            name: p.name.clone(),
            ifindex,
            upcall,
            upcall_ifindex,
            owned: false,
        });
        Ok(vec![tap])
    }

    /// A tunnel port the kernel datapath serves (Geneve, VXLAN, GRE,
    /// NVGRE with a fixed local address): decapsulate for it on the
    /// underlay device holding that address. Others stay in user space.
    fn add_tunnel_port(&mut self, p: &Port) -> Result<(), StartError> {
        let PortKind::Tunnel(t) = &p.kind else {
            return Ok(());
        };
        let kind = match t.kind {
            TunnelKind::Geneve => km::KIND_GENEVE,
            TunnelKind::Vxlan => km::KIND_VXLAN,
            TunnelKind::Gre => km::KIND_GRE,
            TunnelKind::Nvgre => km::KIND_NVGRE,
            TunnelKind::Stt => return Ok(()),
        };
        if t.local_ip.is_unspecified() {
            return Ok(());
        }
        let perr = |msg: String| StartError::Port {
            port: p.name.clone(),
            msg,
        };
        let dev = crate::port::device_with(t.local_ip).ok_or_else(|| {
            perr(format!(
                "no device here has local_ip {} (the kernel datapath decapsulates on it)",
                t.local_ip
            ))
        })?;
        let underlay = ifindex_of(&p.name, &dev)?;
        let mtu = mtu_of(&p.name, &dev)?;
        let mut e = TunnelPortEntry {
            ofport: p.ofport,
            kind,
            remote_any: 1,
            ..TunnelPortEntry::default()
        };
        match t.local_ip {
            IpAddr::V4(a) => e.local4 = a.octets(),
            IpAddr::V6(a) => e.local6 = a.octets(),
        }
        if let crate::config::FromFlow::Fixed(r) = t.remote_ip {
            e.remote_any = 0;
            match r {
                IpAddr::V4(a) => e.remote4 = a.octets(),
                IpAddr::V6(a) => e.remote6 = a.octets(),
            }
        }
        let (proto, dport) = match t.kind {
            TunnelKind::Gre | TunnelKind::Nvgre => (47, 0),
            _ => (17, t.dst_port),
        };
        let family = if t.local_ip.is_ipv4() { 4 } else { 6 };
        let any = TunnelKey {
            proto,
            family,
            dport,
            remote: [0; 16],
        };
        // Under its remote (so that ports to different remotes on one
        // UDP port each keep their traffic in the kernel), and under any
        // remote: the entry that counts unknown sources, or serves a
        // port whose remote the flow chooses.
        let mut keys = vec![any];
        if let crate::config::FromFlow::Fixed(r) = t.remote_ip {
            let mut exact = any;
            match r {
                IpAddr::V4(a) => exact.remote[..4].copy_from_slice(&a.octets()),
                IpAddr::V6(a) => exact.remote = a.octets(),
            }
            keys.push(exact);
        }
        for key in &keys {
            self.decaps.push((p.ofport, *key, e));
            if let Err(err) = self.dp.add_tunnel(*key, self.decap_owner(key)) {
                self.remove_decaps(p.ofport);
                return Err(perr(err.to_string()));
            }
            if let crate::config::FromFlow::Fixed(id) = t.key {
                let ik = km::TunnelIdKey {
                    tk: *key,
                    id: id as u32,
                };
                self.decap_ids.push((p.ofport, ik));
                if let Err(err) = self.dp.add_tunnel_id(ik, p.ofport) {
                    self.remove_decaps(p.ofport);
                    return Err(perr(err.to_string()));
                }
            }
        }
        if let Err(err) = self.dp.attach_underlay(&dev) {
            self.remove_decaps(p.ofport);
            return Err(perr(err.to_string()));
        }
        self.targets.insert(
            p.ofport,
            Target::Tunnel {
                cfg: *t,
                underlay,
                mtu,
                dev: dev.clone(),
            },
        );
        Ok(())
    }

    /// A tunnel port's decapsulation entries go; another port on the same
    /// key (the latest added) takes each over.
    fn remove_decaps(&mut self, ofport: u32) {
        while let Some(i) = self.decap_ids.iter().position(|(o, _)| *o == ofport) {
            let (_, ik) = self.decap_ids.remove(i);
            match self.decap_ids.iter().rev().find(|(_, k)| *k == ik) {
                Some(&(other, _)) => {
                    if self.dp.add_tunnel_id(ik, other).is_err() {
                        self.dp.remove_tunnel_id(ik);
                    }
                }
                None => self.dp.remove_tunnel_id(ik),
            }
        }
        while let Some(i) = self.decaps.iter().position(|(o, _, _)| *o == ofport) {
            let (_, key, _) = self.decaps.remove(i);
            if self.decaps.iter().any(|(_, k, _)| *k == key) {
                if self.dp.add_tunnel(key, self.decap_owner(&key)).is_err() {
                    self.dp.remove_tunnel(key);
                }
            } else {
                self.dp.remove_tunnel(key);
            }
        }
    }

    /// Which of the ports on a decapsulation key the kernel's entry names:
    /// for the any-remote key a port whose remote the flow chooses (it
    /// takes every source; a fixed-remote port there only counts unknown
    /// sources), else the last added. `key` must have a port.
    fn decap_owner(&self, key: &TunnelKey) -> TunnelPortEntry {
        let on_key = || self.decaps.iter().rev().filter(|(_, k, _)| k == key);
        on_key()
            .find(|(_, _, e)| e.remote_any == 1)
            .or_else(|| on_key().next())
            .map(|(_, _, e)| *e)
            .unwrap_or_default()
    }

    fn compile(
        &mut self,
        key: &FlowKey,
        result: Result<&[Op], DropReason>,
        tlv: &TlvMap,
    ) -> Result<Flow, &'static str> {
        let in_port = key.get(f::IN_PORT) as u32;
        let from_tunnel = match self.targets.get(&in_port) {
            Some(Target::Veth { .. }) => false,
            Some(Target::Tunnel { .. } | Target::Qinq { .. }) => true,
            None => return Err("in_port_not_in_kernel"),
        };
        if !self.cacheable {
            return Err("normal_action");
        }
        let ops = match result {
            Ok(ops) => ops,
            Err(DropReason::NoRule | DropReason::Action) => return Ok(Flow::default()),
            Err(_) => return Err("drop_reason_not_cached"),
        };
        let Some((Op::Output { port, tun }, edits)) = ops.split_last() else {
            return Err("actions_not_in_kernel");
        };
        // The output port's number for its counters (0, uncounted, beyond
        // what the op's 16 bits hold).
        let counted = u16::try_from(*port).unwrap_or(0);
        let mut flow = Flow::default();
        let n = vlan_edits(key, edits, &mut flow.ops)?;
        let out = &mut flow.ops[n];
        flow.n_ops = n as u32 + 1;
        match self.targets.get(port).cloned() {
            Some(Target::Veth { ifindex, peer }) => {
                *out = km::Op {
                    kind: if peer {
                        km::OP_OUTPUT_PORT
                    } else {
                        km::OP_OUTPUT_DEV
                    },
                    arg16: counted,
                    arg: ifindex,
                    ..km::Op::default()
                };
            }
            Some(Target::Qinq { ifindex }) if !from_tunnel => {
                *out = km::Op {
                    kind: km::OP_OUTPUT_DEV,
                    arg16: counted,
                    arg: ifindex,
                    ..km::Op::default()
                };
            }
            Some(Target::Tunnel { .. }) if n > 0 => return Err("vlan_edit_before_tunnel"),
            Some(Target::Tunnel {
                cfg, underlay, mtu, ..
            }) if !from_tunnel => {
                let d =
                    destination(&cfg, tun, tlv, underlay, mtu).ok_or("no_tunnel_destination")?;
                let t = tunlab_ebpf::template::build(&d).map_err(|_| "template_failed")?;
                let i = self.dp.template(&t).map_err(|_| "templates_full")?;
                *out = km::Op {
                    kind: km::OP_OUTPUT_TUNNEL,
                    arg16: counted,
                    arg: i,
                    ..km::Op::default()
                };
            }
            _ => return Err("output_not_in_kernel"),
        }
        Ok(flow)
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
                eprintln!("tunlab switch: forgot {gone} port entries of the previous run");
            }
            self.adoption_swept = true;
        }
        let mut mask = FlowKey::default();
        mask.set(f::IN_PORT, u32::MAX as u64);
        let mut cacheable = true;
        for rm in rules.masks() {
            for (m, w) in mask.w.iter_mut().zip(rm.w) {
                *m |= w;
            }
        }
        if rules
            .iter()
            .any(|r| r.flow.actions.iter().any(|a| matches!(a, Action::Normal)))
        {
            cacheable = false;
        }
        let mut entries: Vec<(u16, u8, u32)> = (0..tunlab_dp::key::TUN_METADATA_FIELDS)
            .filter_map(|n| tlv.option(n).map(|(c, t, _)| (c, t, n as u32)))
            .collect();
        entries.sort_unstable();
        // The cache was built under this very mask and TLV map (a restart
        // with the same rules, or a change that keeps the rules' shape:
        // an output, a tun_dst, a drop): its flows are checked one by one,
        // as OVS's revalidators do, and only those whose actions changed
        // go, instead of every flow missing at once (a burst of slow-path
        // packets that the reinstalled flows overtake: TCP sees
        // reordering and retransmits). A large cache after a change is
        // checked up to a limit, then flushed (a new generation).
        let same_mask = self.dp.mask_layout().flow_key() == mask;
        if cacheable
            && self.cacheable
            && same_mask
            && self.dp.tlv().map_err(|e| e.to_string())? == entries
        {
            self.each_flow_limit = if first_after_adoption {
                u64::MAX
            } else {
                EACH_FLOW_LIMIT
            };
            return Ok(Revalidation::EachFlow {
                adopted: first_after_adoption,
            });
        }
        self.new_generations += 1;
        self.dp.set_tlv(&entries).map_err(|e| e.to_string())?;
        self.dp.revalidate(&mask).map_err(|e| e.to_string())?;
        let layout = self.dp.mask_layout();
        if layout.too_wide() && cacheable && !same_mask {
            eprintln!(
                "tunlab switch: the rules' megaflow mask keeps {} flow key words, the kernel's flow cache key {}: every packet takes the slow path until the rules match fewer fields (ctl stats: kernel_slow_wide_mask)",
                layout.words(),
                tunlab_ebpf::maps::CKEY_WORDS
            );
        }
        self.cacheable = cacheable;
        Ok(Revalidation::NewGeneration)
    }

    fn revalidate_each(
        &mut self,
        decide: &mut dyn FnMut(&FlowKey) -> Result<Vec<Op>, DropReason>,
        tlv: &TlvMap,
    ) -> Result<(u64, u64), String> {
        let generation = self.dp.generation();
        let layout = self.dp.mask_layout();
        let (mut kept, mut deleted) = (0, 0);
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
                    let key = layout.unpack(k);
                    let decision = decide(&key);
                    let now = self.compile(&key, decision.as_deref().map_err(|e| *e), tlv);
                    let n = cached.n_ops as usize;
                    let same = now.is_ok_and(|f| {
                        f.n_ops == cached.n_ops && f.ops.get(..n) == cached.ops.get(..n)
                    });
                    if same {
                        kept += 1;
                    } else {
                        deleted += 1;
                    }
                    !same
                })
                .map_err(|e| format!("walking the adopted flows: {e}"))
            });
        match walked {
            Ok(true) => {
                self.each_flow_changes += 1;
                Ok((kept, deleted))
            }
            // Too many to check now: none may forward unchecked.
            Ok(false) => {
                self.new_generations += 1;
                self.dp.new_generation().map_err(|e| e.to_string())?;
                Ok((0, kept + deleted))
            }
            Err(e) => {
                // Unchecked flows must not forward: a new generation instead.
                self.new_generations += 1;
                self.dp.new_generation().map_err(|e| e.to_string())?;
                Err(format!("{e}; every cached flow is a miss instead"))
            }
        }
    }

    fn flow_flush(&mut self) -> Result<(), String> {
        // A new generation under the same mask: every entry is a miss.
        self.dp.new_generation().map_err(|e| e.to_string())
    }

    /// The slow path decided `decision` for a packet with flow key `key`
    /// that arrived on a port the kernel serves: cache it if the kernel
    /// can do the same.
    fn flow_put(&mut self, key: &FlowKey, decision: Result<&[Op], DropReason>, tlv: &TlvMap) {
        match self.compile(key, decision, tlv) {
            Ok(flow) => {
                // Masked by the datapath as it packs the cache key.
                match self.dp.install(key, flow) {
                    Ok(()) => self.installed += 1,
                    Err(tunlab_ebpf::datapath::Error::MaskTooWide { .. }) => {
                        *self.not_installed.entry("mask_too_wide").or_default() += 1
                    }
                    Err(tunlab_ebpf::datapath::Error::CacheFull) => {
                        *self.not_installed.entry("cache_full").or_default() += 1
                    }
                    Err(_) => *self.not_installed.entry("map_update_failed").or_default() += 1,
                }
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
                eprintln!("tunlab switch: underlay MTU change to {mtu}: {e}");
            }
        }
        smallest
    }

    fn flow_counts(&self, counted: Counted) -> Vec<(FlowKey, u64, u64)> {
        counted
            .into_inner::<Vec<(km::CKey, u64, u64)>>()
            .unwrap_or_default()
            .iter()
            .map(|(k, p, b)| (self.dp.unpack(k), *p, *b))
            .collect()
    }

    fn sweeper(&self) -> Result<Option<Box<dyn Sweeper>>, String> {
        match self.dp.sweeper() {
            Ok(s) => Ok(Some(Box::new(EbpfSweeper(s)))),
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
        let mut why: Vec<_> = self.not_installed.iter().collect();
        why.sort();
        for (w, n) in why {
            out.push((format!("kernel_not_installed_{w}"), *n));
        }
        out
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

/// The VLAN edits in front of a flow's output, as the kernel applies them:
/// a push (with the TCI the pipeline gives the new tag: the frame's, for
/// the untagged frames the kernel takes from tenants, 0, then the VID and
/// PCP the following edits set) or a pop. Returns how many ops it wrote.
fn vlan_edits(key: &FlowKey, edits: &[Op], ops: &mut [km::Op]) -> Result<usize, &'static str> {
    let mut n = 0;
    let mut i = 0;
    while i < edits.len() {
        if n + 1 >= ops.len() {
            return Err("too_many_vlan_edits");
        }
        match edits[i] {
            Op::PushVlan(tpid) => {
                if key.get(f::VLAN_TCI) & 0x1000 != 0 {
                    // A tagged tenant frame never takes the kernel path.
                    return Err("vlan_push_on_tagged_frame");
                }
                let mut tci: u16 = 0;
                while let Some(e) = edits.get(i + 1) {
                    match *e {
                        Op::SetVlanVid(v) => tci = (tci & 0xf000) | (v & 0x0fff),
                        Op::SetVlanPcp(p) => tci = (tci & 0x1fff) | ((p as u16) << 13),
                        _ => break,
                    }
                    i += 1;
                }
                ops[n] = km::Op {
                    kind: km::OP_PUSH_VLAN,
                    arg16: tpid,
                    arg: tci as u32,
                    ..km::Op::default()
                };
            }
            Op::PopVlan => {
                ops[n] = km::Op {
                    kind: km::OP_POP_VLAN,
                    ..km::Op::default()
                };
            }
            _ => return Err("vlan_edit_not_in_kernel"),
        }
        n += 1;
        i += 1;
    }
    Ok(n)
}

/// A flow's tunnel output resolved: where to, with which key and options
/// (the same choice the userspace path makes when it sends).
fn destination(
    cfg: &TunnelPort,
    tun: &TunnelSet,
    tlv: &TlvMap,
    ifindex: u32,
    mtu: u16,
) -> Option<Destination> {
    let (remote, key) = remote_and_key(cfg, tun)?;
    Some(Destination {
        kind: cfg.kind,
        local: tun.src.unwrap_or(cfg.local_ip),
        remote,
        key,
        dst_port: cfg.dst_port,
        options: geneve_options(cfg.kind, tlv, tun),
        ifindex,
        mtu,
    })
}

/// The kernel datapath the configuration asks for: none, the eBPF one
/// (refusing to start, with the reason, if this kernel cannot run it), or
/// whichever works (`auto`, which says what it chose and why).
pub fn choose(cfg: &crate::config::Config) -> Result<Option<Box<dyn Dpif>>, StartError> {
    use crate::config::DatapathChoice;
    match cfg.datapath {
        DatapathChoice::Userspace => Ok(None),
        DatapathChoice::Ebpf => Ok(Some(Box::new(Kernel::load(cfg)?))),
        DatapathChoice::Auto => {
            match Kernel::load(cfg) {
                Ok(k) => {
                    eprintln!("tunlab switch {}: datapath auto: ebpf (this kernel runs tunlab's TC programs)", cfg.name);
                    Ok(Some(Box::new(k)))
                }
                Err(e) => {
                    if cfg.ports.iter().any(|p| p.kind.needs_kernel()) {
                        return Err(e);
                    }
                    eprintln!("tunlab switch {}: datapath auto: userspace ({e})", cfg.name);
                    Ok(None)
                }
            }
        }
    }
}
/// The revalidator's handle on the kernel's flow cache.
struct EbpfSweeper(tunlab_ebpf::datapath::FlowSweeper);

impl Sweeper for EbpfSweeper {
    fn sweep(&mut self, max_idle: std::time::Duration) -> Result<SweepCounts, String> {
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
        (!deltas.is_empty()).then(|| Counted::new(deltas))
    }
}
