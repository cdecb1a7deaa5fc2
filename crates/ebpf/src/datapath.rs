//! The loaded kernel datapath: its programs attached to netdevs and its
//! maps, driven by the switch (OVS's dpif for the eBPF datapath).
//!
//! Everything attached is detached when this is dropped (aya drops its
//! links and the maps with the last file descriptor), so a switch that
//! stops leaves no program behind.

use crate::maps::{
    CKey, Flow, Mask, PortEntry, Template, TunnelIdKey, TunnelKey, TunnelPortEntry, STATS,
};
use aya::maps::{Array, HashMap, PerCpuArray, PerCpuHashMap};
use aya::programs::{SchedClassifier, TcAttachType};
use aya::{Ebpf, EbpfLoader};
use std::collections::HashMap as StdMap;
use std::os::fd::AsFd as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use tunlab_dp::FlowKey;

/// The programs, as clang built them from bpf/datapath.c.
pub static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/datapath.o"));

/// Why the kernel datapath could not do something; each names the step
/// and, where it is one, the device.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Loading the object (the verifier's log is in the message).
    #[error("loading the eBPF programs: {0}")]
    Load(String),
    #[error("attaching {prog} to {dev}: {msg}")]
    Attach {
        prog: &'static str,
        dev: String,
        msg: String,
    },
    #[error("map {map}: {msg}")]
    Map { map: &'static str, msg: String },
    /// The flow cache holds as many entries as it may (the revalidator
    /// makes room).
    #[error("the kernel's flow cache is full")]
    CacheFull,
    /// The megaflow mask keeps more words than the cache key packs.
    #[error("the megaflow mask keeps {words} key words, the kernel's flow cache key {max}")]
    MaskTooWide { words: usize, max: usize },
}

pub(crate) fn map_err(map: &'static str) -> impl Fn(aya::maps::MapError) -> Error {
    move |e| Error::Map {
        map,
        msg: e.to_string(),
    }
}

/// A program attached to a device, to detach by name.
#[derive(Debug)]
struct Attached {
    prog: &'static str,
    dev: String,
    link: Held,
}

/// How an attachment is held.
#[derive(Debug)]
enum Held {
    /// By the program: detached with it, or by [`KernelDatapath::detach`].
    Owned(aya::programs::tc::SchedClassifierLinkId),
    /// A tcx link pinned in bpffs: it stays attached if this process dies
    /// (the next one replaces its program); unpinned on a normal stop.
    Pinned {
        link: aya::programs::links::FdLink,
        pin: PathBuf,
    },
}

/// The maps that hold the datapath's state, pinned so that a restarted
/// switch adopts them (the per-CPU scratch maps are not state).
pub const PINNED_MAPS: [&str; 9] = [
    "tl_flows",
    "tl_mask",
    "tl_generation",
    "tl_templates",
    "tl_ports",
    "tl_tunnels",
    "tl_tunnel_ids",
    "tl_tlv",
    "tl_stats",
];

/// The kernel datapath of one switch.
pub struct KernelDatapath {
    ebpf: Ebpf,
    attached: Vec<Attached>,
    generation: u64,
    /// Templates by their bytes, so that flows to one destination share one.
    templates: StdMap<Vec<u8>, u32>,
    template_capacity: u32,
    flow_capacity: u32,
    /// The megaflow mask of the current generation, as tl_mask holds it.
    mask: Mask,
    /// Why pinned maps found at load were not adopted (another build's
    /// layout), if they were not.
    stale_pins: Option<String>,
    /// The next free template slot.
    next_template: u32,
    /// Where maps and links are pinned, if they are.
    pins: Option<PathBuf>,
    /// Whether the maps were a previous run's (see [`Self::adopted`]).
    adopted: bool,
}

impl std::fmt::Debug for KernelDatapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelDatapath")
            .field("attached", &self.attached)
            .field("generation", &self.generation)
            .field("templates", &self.templates.len())
            .finish()
    }
}

/// The programs in the object.
pub const FROM_TENANT: &str = "tl_from_tenant";
pub const FROM_UNDERLAY: &str = "tl_from_underlay";
pub const INJECT: &str = "tl_inject";

impl KernelDatapath {
    /// Load the programs through the verifier and create the maps: a flow
    /// cache of `flow_capacity` entries and room for `template_capacity`
    /// tunnel destinations.
    ///
    /// With `pins` (a directory on a bpf filesystem) the state maps and
    /// the tcx links are pinned there. If a previous run's maps are there
    /// (a switch killed, now restarted) they are adopted with their cached
    /// flows, which keep forwarding under the old programs until
    /// [`Self::attach`] swaps each program in place and the switch's first
    /// revalidation; see [`Self::adopted`].
    pub fn load(
        flow_capacity: u32,
        template_capacity: u32,
        pins: Option<&Path>,
    ) -> Result<KernelDatapath, Error> {
        let mut loader = EbpfLoader::new();
        loader
            .map_max_entries("tl_flows", flow_capacity)
            .map_max_entries("tl_templates", template_capacity);
        let mut adopted = false;
        let mut stale_pins = None;
        if let Some(dir) = pins {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::Load(format!("pin directory {}: {e}", dir.display())))?;
            stale_pins = unpin_other_layouts(dir)?;
            adopted = dir.join("tl_flows").exists();
            for name in PINNED_MAPS {
                loader.map_pin_path(name, dir.join(name));
            }
        }
        let mut ebpf = loader
            .load(OBJECT)
            .map_err(|e| Error::Load(e.to_string()))?;
        if let Some(dir) = pins {
            // Only root may read or change the node's state through bpffs.
            for name in PINNED_MAPS {
                let path = dir.join(name);
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .map_err(|e| Error::Load(format!("{}: {e}", path.display())))?;
            }
        }
        for name in [FROM_TENANT, FROM_UNDERLAY, INJECT] {
            let p: &mut SchedClassifier = ebpf
                .program_mut(name)
                .ok_or_else(|| Error::Load(format!("no program {name} in the object")))?
                .try_into()
                .map_err(|e: aya::programs::ProgramError| Error::Load(e.to_string()))?;
            p.load()
                .map_err(|e| Error::Load(format!("{name}: {}", verifier_text(&e))))?;
        }
        let mut dp = KernelDatapath {
            ebpf,
            attached: Vec::new(),
            generation: 0,
            templates: StdMap::new(),
            template_capacity,
            flow_capacity,
            next_template: 0,
            mask: Mask::default(),
            stale_pins,
            pins: pins.map(Path::to_path_buf),
            adopted,
        };
        if adopted {
            dp.adopt()?;
        } else {
            dp.revalidate(&FlowKey::default())?;
        }
        Ok(dp)
    }

    /// Take over a previous run's state: its generation (entries of it
    /// stay valid until the switch revalidates) and its templates (cached
    /// flows name them by slot).
    fn adopt(&mut self) -> Result<(), Error> {
        let gen: Array<_, u64> = self.map("tl_generation")?;
        self.generation = gen.get(&0, 0).map_err(map_err("tl_generation"))?;
        let mask: Array<_, Mask> = self.map("tl_mask")?;
        self.mask = mask.get(&0, 0).map_err(map_err("tl_mask"))?;
        let m: Array<_, Template> = self.map("tl_templates")?;
        let mut found = Vec::new();
        for i in 0..m.len() {
            let t = m.get(&i, 0).map_err(map_err("tl_templates"))?;
            if t.kind != 0 {
                found.push((i, t));
            }
        }
        for (i, t) in found {
            self.templates.insert(template_bytes(&t), i);
            self.next_template = self.next_template.max(i + 1);
        }
        Ok(())
    }

    /// Whether this datapath took over a previous run's pinned maps.
    pub fn adopted(&self) -> bool {
        self.adopted
    }

    /// Pinned maps left by a build with other map layouts, unpinned
    /// instead of adopted (the old programs keep forwarding with them
    /// until this run's replace them): what differed.
    pub fn stale_pins(&self) -> Option<&str> {
        self.stale_pins.as_deref()
    }

    pub fn flow_capacity(&self) -> u32 {
        self.flow_capacity
    }

    /// A program's file descriptor (for BPF_PROG_TEST_RUN).
    pub fn program_fd(&self, name: &str) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        let p: &SchedClassifier = self.ebpf.program(name)?.try_into().ok()?;
        p.fd().ok().map(|fd| fd.as_fd())
    }

    /// Attach `prog` to `dev`'s ingress (tcx where the kernel has it, a
    /// clsact qdisc otherwise). With pins and tcx the link is pinned; a
    /// link a previous run pinned there gets this run's program in its
    /// place, atomically (no packet meets an empty hook).
    fn attach(&mut self, prog: &'static str, dev: &str) -> Result<(), Error> {
        if let (Some(dir), true) = (self.pins.clone(), tcx()) {
            return self.attach_pinned(prog, dev, &dir);
        }
        self.attach_owned(prog, dev)
    }

    fn attach_pinned(&mut self, prog: &'static str, dev: &str, dir: &Path) -> Result<(), Error> {
        use aya::programs::links::{FdLink, PinnedLink};
        use aya::programs::tc::SchedClassifierLink;
        let err = |msg: String| Error::Attach {
            prog,
            dev: dev.to_string(),
            msg,
        };
        let ifindex = ifindex(dev).ok_or_else(|| err("no such device".into()))?;
        let pin = dir.join(format!("link_{prog}_{ifindex}"));
        let p = self.classifier(prog).map_err(err)?;
        let replaced = match PinnedLink::from_pin(&pin) {
            Ok(old) => {
                let link = SchedClassifierLink::try_from(FdLink::from(old))
                    .map_err(|e| err(format!("pinned link {}: {e}", pin.display())))?;
                match p.attach_to_link(link) {
                    Ok(id) => Some(id),
                    // The device was deleted and made again: its old link
                    // is defunct. Start afresh.
                    Err(_) => {
                        let _ = std::fs::remove_file(&pin);
                        None
                    }
                }
            }
            Err(_) => None,
        };
        let fresh = replaced.is_none();
        let id = match replaced {
            Some(id) => id,
            None => p
                .attach(dev, TcAttachType::Ingress)
                .map_err(|e| err(e.to_string()))?,
        };
        let link = p.take_link(id).map_err(|e| err(e.to_string()))?;
        let mut link = FdLink::try_from(link).map_err(|e| err(e.to_string()))?;
        if fresh {
            link = FdLink::from(
                link.pin(&pin)
                    .map_err(|e| err(format!("pinning at {}: {e}", pin.display())))?,
            );
            let _ = std::fs::set_permissions(&pin, std::fs::Permissions::from_mode(0o600));
        }
        self.attached.push(Attached {
            prog,
            dev: dev.to_string(),
            link: Held::Pinned { link, pin },
        });
        Ok(())
    }

    /// One of the object's TC programs, or why not.
    fn classifier(&mut self, prog: &str) -> Result<&mut SchedClassifier, String> {
        self.ebpf
            .program_mut(prog)
            .ok_or_else(|| "not in the object".to_string())?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| e.to_string())
    }

    fn attach_owned(&mut self, prog: &'static str, dev: &str) -> Result<(), Error> {
        let err = |msg: String| Error::Attach {
            prog,
            dev: dev.to_string(),
            msg,
        };
        // Kernels before 6.6 attach through clsact; it may already exist.
        if !tcx() {
            let _ = aya::programs::tc::qdisc_add_clsact(dev);
        }
        let p = self.classifier(prog).map_err(err)?;
        let link = p
            .attach(dev, TcAttachType::Ingress)
            .map_err(|e| err(e.to_string()))?;
        self.attached.push(Attached {
            prog,
            dev: dev.to_string(),
            link: Held::Owned(link),
        });
        Ok(())
    }

    /// Detach every program from `dev` (a port going away).
    pub fn detach(&mut self, dev: &str) {
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.attached)
            .into_iter()
            .partition(|a| a.dev == dev);
        self.attached = kept;
        for a in gone {
            self.release(a);
        }
    }

    fn release(&mut self, a: Attached) {
        match a.link {
            Held::Owned(id) => {
                if let Some(Ok(p)) = self
                    .ebpf
                    .program_mut(a.prog)
                    .map(<&mut SchedClassifier>::try_from)
                {
                    let _ = p.detach(id);
                }
            }
            Held::Pinned { link, pin } => {
                // Unpinned and closed: the kernel detaches it.
                let _ = std::fs::remove_file(&pin);
                drop(link);
            }
        }
    }

    /// A tenant port: frames from the tenant arrive on `veth` (ifindex
    /// `veth_ifindex`); misses go to the TAP `upcall` (`upcall_ifindex`),
    /// which the switch reads and writes to reach the tenant.
    pub fn add_tenant_port(
        &mut self,
        ofport: u32,
        veth: &str,
        veth_ifindex: u32,
        upcall: &str,
        upcall_ifindex: u32,
    ) -> Result<(), Error> {
        self.pair_ports(ofport, veth_ifindex, crate::maps::ROLE_VETH, upcall_ifindex)?;
        self.attach(FROM_TENANT, veth)?;
        self.attach(INJECT, upcall)?;
        Ok(())
    }

    /// A QinQ port on underlay device `dev`: its 802.1ad frames are the
    /// port's; misses go up through the TAP `upcall`, and what the switch
    /// writes there leaves by `dev`.
    pub fn add_qinq_port(
        &mut self,
        ofport: u32,
        dev: &str,
        dev_ifindex: u32,
        upcall: &str,
        upcall_ifindex: u32,
    ) -> Result<(), Error> {
        self.pair_ports(ofport, dev_ifindex, crate::maps::ROLE_QINQ, upcall_ifindex)?;
        self.attach_underlay(dev)?;
        self.attach(INJECT, upcall)
    }

    /// Forget a QinQ port (call [`KernelDatapath::revalidate`] after); the
    /// underlay keeps its program for the tunnels that may share it.
    pub fn remove_qinq_port(&mut self, dev_ifindex: u32, upcall: &str, upcall_ifindex: u32) {
        self.detach(upcall);
        self.forget_ports(&[dev_ifindex, upcall_ifindex]);
    }

    /// A port's two `tl_ports` entries: the device its frames arrive on
    /// (`role`, misses to the upcall TAP) and its upcall TAP (what the
    /// switch writes there goes back to the device).
    fn pair_ports(&mut self, ofport: u32, dev: u32, role: u32, upcall: u32) -> Result<(), Error> {
        for (at, role, peer) in [(dev, role, upcall), (upcall, crate::maps::ROLE_UPCALL, dev)] {
            self.set_port_entry(
                at,
                PortEntry {
                    ofport,
                    role,
                    peer_ifindex: peer,
                    policed: 0,
                },
            )?;
        }
        Ok(())
    }

    fn forget_ports(&mut self, ifindexes: &[u32]) {
        if let Ok(mut ports) = self.map_mut::<HashMap<_, u32, PortEntry>>("tl_ports") {
            for i in ifindexes {
                let _ = ports.remove(i);
            }
        }
    }

    /// Remove every `tl_ports` entry whose device is not in `keep` (an
    /// adopted map's entries for a killed switch's upcall TAPs, which are
    /// gone). Returns how many went.
    pub fn retain_ports(&mut self, keep: &[u32]) -> Result<usize, Error> {
        let mut ports: HashMap<_, u32, PortEntry> = self.map_mut("tl_ports")?;
        let gone: Vec<u32> = ports
            .keys()
            .filter_map(Result::ok)
            .filter(|i| !keep.contains(i))
            .collect();
        for i in &gone {
            let _ = ports.remove(i);
        }
        Ok(gone.len())
    }

    /// Set one `tl_ports` entry directly (tests drive the programs with
    /// BPF_PROG_TEST_RUN on devices that have no veth/TAP pair).
    pub fn set_port_entry(&mut self, ifindex: u32, p: PortEntry) -> Result<(), Error> {
        let mut ports: HashMap<_, u32, PortEntry> = self.map_mut("tl_ports")?;
        ports.insert(ifindex, p, 0).map_err(map_err("tl_ports"))
    }

    /// Police what tenant device `ifindex` (a port already added) sends
    /// in: `rate` bytes a second, bursts of `burst` bytes; None: no
    /// policer. The port's entry says whether to look.
    pub fn set_police(
        &mut self,
        ifindex: u32,
        rate_burst: Option<(u64, u64)>,
    ) -> Result<(), Error> {
        {
            let mut m: HashMap<_, u32, crate::maps::Police> = self.map_mut("tl_police")?;
            match rate_burst {
                Some((rate, burst)) => m
                    .insert(
                        ifindex,
                        crate::maps::Police {
                            rate,
                            burst,
                            tokens: burst,
                            ..Default::default()
                        },
                        0,
                    )
                    .map_err(map_err("tl_police"))?,
                None => {
                    let _ = m.remove(&ifindex);
                }
            }
        }
        let mut ports: HashMap<_, u32, PortEntry> = self.map_mut("tl_ports")?;
        if let Ok(mut e) = ports.get(&ifindex, 0) {
            e.policed = u32::from(rate_burst.is_some());
            ports.insert(ifindex, e, 0).map_err(map_err("tl_ports"))?;
        }
        Ok(())
    }

    /// Forget a tenant port (call [`KernelDatapath::revalidate`] after).
    pub fn remove_tenant_port(
        &mut self,
        veth: &str,
        veth_ifindex: u32,
        upcall: &str,
        upcall_ifindex: u32,
    ) {
        self.detach(veth);
        self.detach(upcall);
        self.forget_ports(&[veth_ifindex, upcall_ifindex]);
    }

    /// Decapsulate on `dev` (the underlay): attach once per device.
    pub fn attach_underlay(&mut self, dev: &str) -> Result<(), Error> {
        if self
            .attached
            .iter()
            .any(|a| a.dev == dev && a.prog == FROM_UNDERLAY)
        {
            return Ok(());
        }
        self.attach(FROM_UNDERLAY, dev)
    }

    pub fn add_tunnel(&mut self, key: TunnelKey, port: TunnelPortEntry) -> Result<(), Error> {
        let mut m: HashMap<_, TunnelKey, TunnelPortEntry> = self.map_mut("tl_tunnels")?;
        m.insert(key, port, 0).map_err(map_err("tl_tunnels"))
    }

    /// Frames under `key.tk` whose tunnel key is `key.id` belong to
    /// `ofport` (one of several ports that differ only in their key).
    pub fn add_tunnel_id(&mut self, key: TunnelIdKey, ofport: u32) -> Result<(), Error> {
        let mut m: HashMap<_, TunnelIdKey, u32> = self.map_mut("tl_tunnel_ids")?;
        m.insert(key, ofport, 0).map_err(map_err("tl_tunnel_ids"))
    }

    pub fn remove_tunnel_id(&mut self, key: TunnelIdKey) {
        if let Ok(mut m) = self.map_mut::<HashMap<_, TunnelIdKey, u32>>("tl_tunnel_ids") {
            let _ = m.remove(&key);
        }
    }

    pub fn remove_tunnel(&mut self, key: TunnelKey) {
        if let Ok(mut m) = self.map_mut::<HashMap<_, TunnelKey, TunnelPortEntry>>("tl_tunnels") {
            let _ = m.remove(&key);
        }
    }

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

    /// Underlay device `ifindex` has a new MTU: every template that sends
    /// through it takes it, in place (cached flows name templates by
    /// slot). Returns how many changed.
    pub fn set_device_mtu(&mut self, ifindex: u32, mtu: u16) -> Result<usize, Error> {
        let hit: Vec<(Vec<u8>, u32, Template)> = self
            .templates
            .iter()
            .filter_map(|(b, &i)| Some((b.clone(), i, template_from_bytes(b)?)))
            .filter(|(_, _, t)| t.ifindex == ifindex && t.mtu != mtu)
            .collect();
        let mut m: Array<_, Template> = self.map_mut("tl_templates")?;
        for (_, i, t) in &hit {
            let t = Template { mtu, ..*t };
            m.set(*i, t, 0).map_err(map_err("tl_templates"))?;
        }
        for (old, i, t) in &hit {
            self.templates.remove(old);
            self.templates
                .insert(template_bytes(&Template { mtu, ..*t }), *i);
        }
        Ok(hit.len())
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
            batch: Some(self.flow_batch()?),
            flows: HashMap::try_from(handle("tl_flows")?).map_err(map_err("tl_flows"))?,
            generation: Array::try_from(handle("tl_generation")?)
                .map_err(map_err("tl_generation"))?,
        })
    }

    /// Batched access to the flow cache on a descriptor of its own (no
    /// borrow of this datapath while it walks).
    pub fn flow_batch(&self) -> Result<FlowBatch, Error> {
        Ok(FlowBatch::new(self.dup_fd("tl_flows")?))
    }

    /// A second descriptor for one of the maps the revalidator reads.
    fn dup_fd(&self, name: &'static str) -> Result<std::os::fd::OwnedFd, Error> {
        let m = self.ebpf.map(name).ok_or(Error::Map {
            map: name,
            msg: "not in the object".into(),
        })?;
        let data = match m {
            aya::maps::Map::HashMap(d) | aya::maps::Map::Array(d) => d,
            _ => {
                return Err(Error::Map {
                    map: name,
                    msg: "not of the type bpf/maps.h gives it".into(),
                })
            }
        };
        data.fd()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Error::Map {
                map: name,
                msg: format!("dup: {e}"),
            })
    }

    /// Each port's counters (by ofport) of what the kernel handled
    /// itself, summed over CPUs.
    pub fn port_stats(&self) -> Result<Vec<(u32, crate::maps::PortCounters)>, Error> {
        let m: PerCpuHashMap<_, u32, crate::maps::PortCounters> = self.map("tl_port_stats")?;
        let mut out = Vec::new();
        for item in m.iter() {
            let (ofport, per_cpu) = item.map_err(map_err("tl_port_stats"))?;
            let mut sum = crate::maps::PortCounters::default();
            for c in per_cpu.iter() {
                sum.rx_packets += c.rx_packets;
                sum.rx_bytes += c.rx_bytes;
                sum.tx_packets += c.tx_packets;
                sum.tx_bytes += c.tx_bytes;
                sum.rx_dropped += c.rx_dropped;
            }
            out.push((ofport, sum));
        }
        out.sort_unstable_by_key(|(p, _)| *p);
        Ok(out)
    }

    /// Port `ofport` left: its counters go (a port added later under the
    /// same number starts from zero).
    pub fn forget_port_stats(&mut self, ofport: u32) {
        if let Ok(mut m) =
            self.map_mut::<PerCpuHashMap<_, u32, crate::maps::PortCounters>>("tl_port_stats")
        {
            let _ = m.remove(&ofport);
        }
    }

    /// The datapath's counters, summed over CPUs, by name.
    pub fn stats(&self) -> Result<Vec<(&'static str, u64)>, Error> {
        let m: PerCpuArray<_, u64> = self.map("tl_stats")?;
        // STATS and bpf/tunlab.h's enum tl_stat must name the same slots.
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

    fn map_mut<'a, T>(&'a mut self, name: &'static str) -> Result<T, Error>
    where
        T: TryFrom<&'a mut aya::maps::Map, Error = aya::maps::MapError>,
    {
        let m = self.ebpf.map_mut(name).ok_or(Error::Map {
            map: name,
            msg: "not in the object".into(),
        })?;
        T::try_from(m).map_err(map_err(name))
    }

    fn map<'a, T>(&'a self, name: &'static str) -> Result<T, Error>
    where
        T: TryFrom<&'a aya::maps::Map, Error = aya::maps::MapError>,
    {
        let m = self.ebpf.map(name).ok_or(Error::Map {
            map: name,
            msg: "not in the object".into(),
        })?;
        T::try_from(m).map_err(map_err(name))
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
                return true;
            }
            ages[bucket(idle)] += 1;
            false
        })?;
        self.counts = counts;
        self.deltas = deltas;
        let live = out.seen - out.stale - out.idle;
        if (live as f64) <= self.capacity as f64 * EVICT_FROM {
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
        self.walk(&mut |_, f: &Flow| {
            if f.generation != generation {
                return false;
            }
            let b = bucket(idle_for(f));
            let old = b > cut || (b == cut && from_cut > 0);
            if b == cut && old {
                from_cut -= 1;
            }
            out.evicted += u64::from(old);
            old
        })?;
        Ok(out)
    }

    /// What the cache's entries carried since the sweep before the last
    /// one looked (keys packed under the mask of their generation: the
    /// datapath unpacks them with [`Datapath::unpack`]).
    pub fn take_deltas(&mut self) -> Vec<(CKey, u64, u64)> {
        std::mem::take(&mut self.deltas)
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

/// Entries a batched read asks for at once.
pub const BATCH: usize = 4096;

/// `union bpf_attr`'s part for the `BPF_MAP_*_BATCH` commands.
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// Batched access to the flow cache, with its buffers.
pub struct FlowBatch {
    fd: std::os::fd::OwnedFd,
    keys: Vec<CKey>,
    values: Vec<Flow>,
    /// Entries read since this handle was made (0: batches never worked).
    walked: u64,
}

impl std::fmt::Debug for FlowBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowBatch")
            .field("walked", &self.walked)
            .finish_non_exhaustive()
    }
}

impl FlowBatch {
    fn new(fd: std::os::fd::OwnedFd) -> FlowBatch {
        FlowBatch {
            fd,
            keys: vec![CKey::default(); BATCH],
            values: vec![Flow::default(); BATCH],
            walked: 0,
        }
    }

    fn call(&self, cmd: libc::c_long, attr: &mut BatchAttr) -> std::io::Result<()> {
        // SAFETY: `attr` is a valid bpf_attr prefix for the batch commands
        // whose keys/values pointers name buffers of `count` entries
        // (a CKey and a Flow each, the map's key and value sizes), alive for
        // the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                cmd,
                attr as *mut BatchAttr,
                std::mem::size_of::<BatchAttr>(),
            )
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Read every entry, [`BATCH`] a call, ask `doomed` of each (its key
    /// and value), and delete the doomed ones of each batch
    /// before reading the next: the walk's position is a bucket, which
    /// deleting entries already read does not move, and memory stays one
    /// batch.
    pub fn sweep(&mut self, doomed: &mut impl FnMut(&CKey, &Flow) -> bool) -> std::io::Result<()> {
        self.sweep_at_most(u64::MAX, doomed).map(|_| ())
    }

    /// [`FlowBatch::sweep`], stopping after the batch in which `max`
    /// entries have been read: true if it read them all.
    pub fn sweep_at_most(
        &mut self,
        max: u64,
        doomed: &mut impl FnMut(&CKey, &Flow) -> bool,
    ) -> std::io::Result<bool> {
        use std::os::fd::AsRawFd;
        const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
        // The position between calls: a bucket number for hash maps.
        let mut token = [0u64; 2];
        let mut first = true;
        let mut gone = Vec::with_capacity(BATCH);
        let mut read = 0u64;
        loop {
            let mut attr = BatchAttr {
                in_batch: if first { 0 } else { token.as_ptr() as u64 },
                out_batch: token.as_mut_ptr() as u64,
                keys: self.keys.as_mut_ptr() as u64,
                values: self.values.as_mut_ptr() as u64,
                count: BATCH as u32,
                map_fd: self.fd.as_raw_fd() as u32,
                ..BatchAttr::default()
            };
            let r = self.call(BPF_MAP_LOOKUP_BATCH, &mut attr);
            let end = match r {
                Ok(()) => false,
                // The last entries come with ENOENT.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => true,
                Err(e) => return Err(e),
            };
            let n = (attr.count as usize).min(BATCH);
            gone.clear();
            for i in 0..n {
                if doomed(&self.keys[i], &self.values[i]) {
                    gone.push(self.keys[i]);
                }
            }
            self.delete(&gone);
            self.walked += n as u64;
            read += n as u64;
            if end {
                return Ok(true);
            }
            if read >= max {
                return Ok(false);
            }
            first = false;
        }
    }

    /// Delete `keys` in batches (one by one if the kernel refuses
    /// batched deletes); a key the LRU took meanwhile is skipped.
    fn delete(&self, keys: &[CKey]) {
        use std::os::fd::AsRawFd;
        const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
        const BPF_MAP_DELETE_BATCH: libc::c_long = 27;
        let mut done = 0;
        while done < keys.len() {
            let chunk = &keys[done..(done + BATCH).min(keys.len())];
            let mut attr = BatchAttr {
                keys: chunk.as_ptr() as u64,
                count: chunk.len() as u32,
                map_fd: self.fd.as_raw_fd() as u32,
                ..BatchAttr::default()
            };
            let r = self.call(BPF_MAP_DELETE_BATCH, &mut attr);
            // `count` says how many went, also when it stopped early.
            done += (attr.count as usize).min(chunk.len());
            match r {
                Ok(()) => {}
                // It stops at a key the LRU took meanwhile: skip that one.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => done += 1,
                Err(_) => break,
            }
        }
        for k in &keys[done.min(keys.len())..] {
            let attr = ElemAttr {
                map_fd: self.fd.as_raw_fd() as u32,
                key: k as *const CKey as u64,
                ..ElemAttr::default()
            };
            // SAFETY: `attr` is the bpf_attr prefix of BPF_MAP_DELETE_ELEM,
            // its key pointer names a live CKey of the map's key size.
            unsafe {
                libc::syscall(
                    libc::SYS_bpf,
                    BPF_MAP_DELETE_ELEM,
                    &attr as *const ElemAttr,
                    std::mem::size_of::<ElemAttr>(),
                );
            }
        }
    }
}

/// `union bpf_attr`'s part for the element commands.
#[repr(C)]
#[derive(Default)]
struct ElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

impl Drop for KernelDatapath {
    /// A normal stop: detach every program and remove every pin (a killed
    /// switch never gets here, and its pins keep the datapath running).
    fn drop(&mut self) {
        for a in std::mem::take(&mut self.attached) {
            self.release(a);
        }
        if let Some(dir) = &self.pins {
            if let Ok(entries) = std::fs::read_dir(dir) {
                for e in entries.flatten() {
                    let _ = std::fs::remove_file(e.path());
                }
            }
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Whether programs attach through tcx (kernel 6.6 and later).
pub(crate) fn tcx() -> bool {
    aya::util::KernelVersion::current().is_ok_and(|v| v >= aya::util::KernelVersion::new(6, 6, 0))
}

fn ifindex(dev: &str) -> Option<u32> {
    let name = std::ffi::CString::new(dev).ok()?;
    // SAFETY: if_nametoindex reads the NUL-terminated string it is given.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (i != 0).then_some(i)
}

fn template_bytes(t: &Template) -> Vec<u8> {
    // SAFETY: Template is repr(C) plain data without padding (size
    // checked in maps.rs); viewing it as bytes reads initialised memory.
    unsafe {
        std::slice::from_raw_parts(
            (t as *const Template).cast::<u8>(),
            std::mem::size_of::<Template>(),
        )
    }
    .to_vec()
}

fn template_from_bytes(b: &[u8]) -> Option<Template> {
    if b.len() != std::mem::size_of::<Template>() {
        return None;
    }
    // SAFETY: `b` holds a Template's bytes (made by template_bytes, length
    // checked above); Template is plain data valid for any bit pattern,
    // and read_unaligned needs no alignment.
    Some(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<Template>()) })
}

/// Each pinned map's key and value sizes (and entries, where fixed) as
/// this build's programs and loader use them.
fn pinned_layout() -> [(&'static str, usize, usize, Option<usize>); PINNED_MAPS.len()] {
    use crate::maps::{PortEntry as P, Template as T, TunnelIdKey as I};
    use std::mem::size_of as z;
    [
        ("tl_flows", z::<CKey>(), z::<Flow>(), None),
        ("tl_mask", 4, z::<Mask>(), Some(1)),
        ("tl_generation", 4, 8, Some(1)),
        ("tl_templates", 4, z::<T>(), None),
        ("tl_ports", 4, z::<P>(), None),
        ("tl_tunnels", z::<TunnelKey>(), z::<TunnelPortEntry>(), None),
        ("tl_tunnel_ids", z::<I>(), 4, None),
        ("tl_tlv", 4, 4, None),
        ("tl_stats", 4, 8, Some(STATS.len())),
    ]
}

/// If the maps pinned in `dir` are not laid out as this build's (a
/// switch of another version ran there), unpin them all, so that this
/// run makes its own; what differed. A switch never adopts half a state.
fn unpin_other_layouts(dir: &Path) -> Result<Option<String>, Error> {
    let mut differs = None;
    for (name, key, value, entries) in pinned_layout() {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        let info = aya::maps::MapInfo::from_pin(&path)
            .map_err(|e| Error::Load(format!("pinned map {}: {e}", path.display())))?;
        let (k, v, n) = (
            info.key_size() as usize,
            info.value_size() as usize,
            info.max_entries() as usize,
        );
        if k != key || v != value || entries.is_some_and(|e| e != n) {
            differs = Some(format!(
                "{name} has {k}-byte keys, {v}-byte values and {n} entries; this build's has {key}, {value}{}",
                entries.map(|e| format!(" and {e}")).unwrap_or_default()
            ));
            break;
        }
    }
    if differs.is_some() {
        for name in PINNED_MAPS {
            let path = dir.join(name);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::Load(format!("unpinning {}: {e}", path.display()))),
            }
        }
    }
    Ok(differs)
}

/// A program error with the verifier's log when there is one.
fn verifier_text(e: &aya::programs::ProgramError) -> String {
    match e {
        aya::programs::ProgramError::LoadError {
            io_error,
            verifier_log,
        } => {
            format!("{io_error}\n{verifier_log}")
        }
        e => e.to_string(),
    }
}
