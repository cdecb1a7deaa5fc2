//! The PVP tenant's reflector in XDP (`bpf/reflect.c`): frames go back
//! out of the interface they came in on, MAC addresses swapped, without
//! reaching user space.

use super::{map_err, Error};
use aya::maps::PerCpuArray;
use aya::programs::xdp::XdpMode;
use aya::programs::Xdp;
use aya::{Ebpf, EbpfLoader};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/reflect.o"));

/// The loaded reflector; detached (its link closed) and unloaded on drop.
pub struct XdpReflector {
    ebpf: Ebpf,
}

impl std::fmt::Debug for XdpReflector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpReflector").finish_non_exhaustive()
    }
}

impl XdpReflector {
    /// Load the reflector and attach it to `ifname` (in the calling
    /// thread's network namespace) in generic XDP: the frames a switch's
    /// TC program hands to a veth with `bpf_redirect_peer`, and those a
    /// switch writes into a TAP, meet only the generic hook.
    pub fn attach(ifname: &str) -> Result<XdpReflector, Error> {
        let mut ebpf = EbpfLoader::new()
            .load(OBJECT)
            .map_err(|e| Error::Load(format!("the XDP reflector: {e}")))?;
        let p = super::count::program_mut::<Xdp>(&mut ebpf, "tl_reflect")?;
        p.load()
            .map_err(|e| Error::Load(format!("loading tl_reflect: {e}")))?;
        p.attach(ifname, XdpMode::Skb)
            .map_err(|e| Error::Load(format!("attaching the XDP reflector to {ifname}: {e}")))?;
        Ok(XdpReflector { ebpf })
    }

    /// Frames reflected so far, all CPUs.
    pub fn reflected(&self) -> Result<u64, Error> {
        let m = self.ebpf.map("rfl_count").ok_or(Error::Map {
            map: "rfl_count",
            msg: "not in the reflector".into(),
        })?;
        let a: PerCpuArray<_, u64> = PerCpuArray::try_from(m).map_err(map_err("rfl_count"))?;
        let v = a.get(&0, 0).map_err(map_err("rfl_count"))?;
        Ok(v.iter().sum())
    }
}
