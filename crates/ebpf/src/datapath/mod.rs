//! The loaded kernel datapath: its programs attached to netdevs and its
//! maps, driven by the switch (OVS's dpif for the eBPF datapath).
//!
//! Here the loader: the object loaded (or a previous run's pinned maps
//! adopted), programs attached to devices (tcx links, pinned where the
//! node keeps its state), and what it holds released. Beside it: the
//! ports and tunnels in the maps ([`ports`]), the flow cache and what
//! it is keyed by ([`flows`]), the revalidator's handle ([`sweeper`]) and
//! the batched map syscalls aya does not wrap ([`batch`]).
//!
//! Everything attached is detached when this is dropped (aya drops its
//! links and the maps with the last file descriptor), so a switch that
//! stops leaves no program behind.

use crate::maps::{
    CKey, Flow, Mask, MaskOrder, PortEntry, Template, TunnelIdKey, TunnelKey, TunnelPortEntry,
    MAX_MASKS, STATS,
};
use aya::maps::{Array, HashMap, PerCpuArray, PerCpuHashMap};
use aya::programs::{SchedClassifier, TcAttachType};
use aya::{Ebpf, EbpfLoader};
use std::collections::HashMap as StdMap;
use std::os::fd::AsFd as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use tunlab_dp::FlowKey;

mod batch;
mod flows;
mod ports;
mod sweeper;

pub use batch::{FlowBatch, BATCH};
pub use sweeper::{FlowSweeper, Sweep, EVICT_FROM, EVICT_TO};

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
    /// Every mask slot holds another mask.
    #[error("every one of the cache's {max} mask slots is taken")]
    MasksFull { max: usize },
    /// A flow's in_port is past what a numbered cache key holds.
    #[error("in_port {port} is past the flow cache's limit (2^24)")]
    PortTooLarge { port: u64 },
    /// The megaflow mask keeps more words than the cache key packs.
    #[error("the megaflow mask keeps {words} key words, the kernel's flow cache key {max}")]
    MaskTooWide { words: usize, max: usize },
    /// The megaflow mask keeps a field only user space extracts.
    #[error("the megaflow mask keeps a field the kernel datapath does not extract")]
    MaskPastKernelKey,
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
pub const PINNED_MAPS: [&str; 10] = [
    "tl_flows",
    "tl_mask",
    "tl_mask_order",
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
    /// The megaflow masks by number, as tl_mask holds them (0: the union
    /// of the rules' masks), and the order lookups try them in.
    masks: [Mask; MAX_MASKS],
    order: Vec<u8>,
    /// Each mask's hits as last read (for the order by recent hits).
    mask_hits: [u64; MAX_MASKS],
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
            masks: [Mask::unused(); MAX_MASKS],
            order: Vec::new(),
            mask_hits: [0; MAX_MASKS],
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
        let masks: Array<_, Mask> = self.map("tl_mask")?;
        let read: Vec<Mask> = (0..MAX_MASKS as u32)
            .map(|i| masks.get(&i, 0).map_err(map_err("tl_mask")))
            .collect::<Result<_, _>>()?;
        self.masks.copy_from_slice(&read);
        let order: Array<_, MaskOrder> = self.map("tl_mask_order")?;
        self.order = order
            .get(&0, 0)
            .map_err(map_err("tl_mask_order"))?
            .ids()
            .to_vec();
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
        ("tl_mask", 4, z::<Mask>(), Some(MAX_MASKS)),
        ("tl_mask_order", 4, z::<MaskOrder>(), Some(1)),
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
