//! The generator's XDP counter (`bpf/count.c`): loaded, sized for a run's
//! flows and sending streams, attached to the receiving interface, and
//! read back into per-flow counts, totals and latency buckets. The
//! figures mean what [`crate::count::Counter`]'s do.

use super::{map_err, tcx, Error};
use aya::maps::{Array, MapData, PerCpuArray};
use aya::programs::xdp::XdpMode;
use aya::programs::{SchedClassifier, TcAttachType, Xdp};
use aya::{Ebpf, EbpfLoader};
use std::os::fd::AsFd;

/// The counter's object, built by build.rs from `bpf/count.c`.
pub static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/count.o"));

/// Sequence numbers a stream's window remembers (bpf/count.c's
/// CNT_WINDOW): duplicates further back than this are not found.
pub const WINDOW: u32 = 1 << 20;
/// Latency buckets (16 per power of two, as count.rs).
pub const BUCKETS: usize = 32 * 16;

/// `struct cnt_cfg`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Cfg {
    streams: u32,
    flows: u32,
    realtime_minus_tai: i64,
    pass: u32,
    _pad: u32,
}
// SAFETY: plain old data, no padding the kernel could not read.
unsafe impl aya::Pod for Cfg {}

/// `struct cnt_totals`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub rx: u64,
    pub rx_bytes: u64,
    pub dups: u64,
    pub reordered: u64,
    pub foreign: u64,
    pub lat_n: u64,
    pub lat_sum: u64,
    pub lat_min: u64,
    pub lat_max: u64,
}
// SAFETY: plain old data.
unsafe impl aya::Pod for Totals {}

/// What the counter has counted, all CPUs together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub totals: Totals,
    pub per_flow: Vec<u64>,
    pub latency: Vec<u64>,
}

/// Where the counter runs on the receiving interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// XDP: in the driver where it has XDP, generic XDP otherwise.
    Xdp,
    /// TC ingress (tcx), on the socket buffer as it arrived.
    Tc,
}

impl Hook {
    /// The cheaper hook for `ifname`: XDP on a NIC (a device with a
    /// bus behind it), TC on a virtual device. veth's XDP copies every
    /// frame that lacks XDP's 256 bytes of headroom (as every frame a
    /// socket sends does) into a page of its own, and generic XDP
    /// reallocates its head; TC reads the buffer in place.
    pub fn for_device(ifname: &str) -> Hook {
        if std::path::Path::new("/sys/class/net")
            .join(ifname)
            .join("device")
            .exists()
        {
            Hook::Xdp
        } else {
            Hook::Tc
        }
    }
}

/// The loaded counter; detached and unloaded on drop.
pub struct XdpCounter {
    ebpf: Ebpf,
    flows: u32,
}

impl std::fmt::Debug for XdpCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpCounter")
            .field("flows", &self.flows)
            .finish()
    }
}

/// CLOCK_REALTIME - CLOCK_TAI in ns, as this moment reads them.
fn realtime_minus_tai() -> i64 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    };
    read(libc::CLOCK_REALTIME) - read(libc::CLOCK_TAI)
}

fn load_err(what: &str) -> impl Fn(aya::programs::ProgramError) -> Error + '_ {
    move |e| Error::Load(format!("{what}: {e}"))
}

/// Program `name` of `ebpf` as its kind `P` (Xdp, SchedClassifier).
pub(super) fn program_mut<'a, P>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut P, Error>
where
    &'a mut P: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or_else(|| Error::Load(format!("no program {name} in the object")))?
        .try_into()
        .map_err(load_err(name))
}

impl XdpCounter {
    /// Load the counter for `flows` flows and `streams` sending streams;
    /// `pass` lets counted frames on up the stack (else they are dropped).
    /// Not attached yet: [`Self::attach`], or run it with
    /// BPF_PROG_TEST_RUN through [`Self::program`].
    pub fn load(flows: u32, streams: u32, pass: bool) -> Result<XdpCounter, Error> {
        let flows = flows.max(1);
        let streams = streams.clamp(1, 256);
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("cnt_flows", flows)
            .map_max_entries("cnt_next", streams)
            .map_max_entries("cnt_seen", streams * WINDOW)
            .load(OBJECT)
            .map_err(|e| Error::Load(format!("the XDP counter: {e}")))?;
        program_mut::<Xdp>(&mut ebpf, "tl_count")?
            .load()
            .map_err(load_err("loading tl_count"))?;
        program_mut::<SchedClassifier>(&mut ebpf, "tl_count_tc")?
            .load()
            .map_err(load_err("loading tl_count_tc"))?;
        let mut cfg: Array<_, Cfg> = Array::try_from(
            ebpf.map_mut("cnt_cfg")
                .ok_or_else(|| Error::Load("no map cnt_cfg".into()))?,
        )
        .map_err(|e| Error::Load(format!("cnt_cfg: {e}")))?;
        cfg.set(
            0,
            Cfg {
                streams,
                flows,
                realtime_minus_tai: realtime_minus_tai(),
                pass: u32::from(pass),
                _pad: 0,
            },
            0,
        )
        .map_err(|e| Error::Load(format!("cnt_cfg: {e}")))?;
        Ok(XdpCounter { ebpf, flows })
    }

    /// Attach to `ifname` (in the calling thread's network namespace)
    /// at `hook`, and say where it runs: `driver` or `generic` (XDP: the
    /// driver's if it has one), `tc`. Detached when the counter is
    /// dropped.
    pub fn attach(&mut self, ifname: &str, hook: Hook) -> Result<&'static str, Error> {
        if hook == Hook::Tc {
            // Kernels before 6.6 attach through clsact; it may exist.
            if !tcx() {
                let _ = aya::programs::tc::qdisc_add_clsact(ifname);
            }
            return program_mut::<SchedClassifier>(&mut self.ebpf, "tl_count_tc")?
                .attach(ifname, TcAttachType::Ingress)
                .map(|_| "tc")
                .map_err(load_err(&format!("attaching the TC counter to {ifname}")));
        }
        let p = program_mut::<Xdp>(&mut self.ebpf, "tl_count")?;
        match p.attach(ifname, XdpMode::Driver) {
            Ok(_) => Ok("driver"),
            Err(_) => p
                .attach(ifname, XdpMode::Skb)
                .map(|_| "generic")
                .map_err(load_err(&format!("attaching the XDP counter to {ifname}"))),
        }
    }

    /// The program's descriptor (for BPF_PROG_TEST_RUN).
    pub fn program(&self) -> Result<std::os::fd::BorrowedFd<'_>, Error> {
        let p: &Xdp = self
            .ebpf
            .program("tl_count")
            .ok_or_else(|| Error::Load("no program tl_count".into()))?
            .try_into()
            .map_err(load_err("tl_count"))?;
        Ok(p.fd().map_err(load_err("tl_count"))?.as_fd())
    }

    /// The per-CPU array `name` of the counter.
    fn per_cpu<T: aya::Pod>(&self, name: &'static str) -> Result<PerCpuArray<&MapData, T>, Error> {
        let m = self.ebpf.map(name).ok_or(Error::Map {
            map: name,
            msg: "not in the counter".into(),
        })?;
        PerCpuArray::try_from(m).map_err(map_err(name))
    }

    /// Each CPU's totals.
    fn totals(&self) -> Result<Vec<Totals>, Error> {
        let m: PerCpuArray<_, Totals> = self.per_cpu("cnt_totals")?;
        let v = m.get(&0, 0).map_err(map_err("cnt_totals"))?;
        Ok(v.iter().copied().collect())
    }

    /// Frames counted so far (cheap: no per-flow read), all CPUs.
    pub fn rx(&self) -> Result<u64, Error> {
        Ok(self.totals()?.iter().map(|c| c.rx).sum())
    }

    /// Everything counted so far, summed over CPUs.
    pub fn read(&self) -> Result<Counts, Error> {
        let mut t = Totals::default();
        for c in self.totals()? {
            t.rx += c.rx;
            t.rx_bytes += c.rx_bytes;
            t.dups += c.dups;
            t.reordered += c.reordered;
            t.foreign += c.foreign;
            t.lat_n += c.lat_n;
            t.lat_sum += c.lat_sum;
            if c.lat_n > 0 && (t.lat_min == 0 || c.lat_min < t.lat_min) {
                t.lat_min = c.lat_min;
            }
            t.lat_max = t.lat_max.max(c.lat_max);
        }
        let sum = |name: &'static str, n: u32| -> Result<Vec<u64>, Error> {
            let a: PerCpuArray<_, u64> = self.per_cpu(name)?;
            (0..n)
                .map(|i| a.get(&i, 0).map(|v| v.iter().sum()).map_err(map_err(name)))
                .collect()
        };
        Ok(Counts {
            totals: t,
            per_flow: sum("cnt_flows", self.flows)?,
            latency: sum("cnt_latency", BUCKETS as u32)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunlab_bpf::test_run::{run_tc, run_xdp, TC_ACT_OK, TC_ACT_SHOT, XDP_DROP, XDP_PASS};

    /// A 64-byte frame whose last 16 bytes are the generator's signature
    /// (crates/gen/src/sig.rs; the fix-up word left 0: the counter does
    /// not check it), stamped `ago_ns` before now.
    fn frame(stream: u8, flow: u32, seq: u32, ago_ns: u64) -> Vec<u8> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let mut f = vec![0u8; 48];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&0x7e4cu16.to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&((u32::from(stream) << 24) | flow).to_be_bytes());
        f.extend_from_slice(&seq.to_be_bytes());
        f.extend_from_slice(&((now - ago_ns) as u32).to_be_bytes());
        f
    }

    #[test]
    fn signatures_in_order_duplicated_reordered_and_foreign() {
        let c = XdpCounter::load(4, 2, false).expect("load the XDP counter (needs root)");
        let run = |f: &[u8]| run_xdp(c.program().unwrap(), f).unwrap();
        // Stream 0 in order over flows 0..3, stream 1's first frame.
        for seq in 0..3 {
            assert_eq!(run(&frame(0, seq, seq, 50_000)), XDP_DROP);
        }
        assert_eq!(run(&frame(1, 3, 0, 50_000)), XDP_DROP);
        // A duplicate, then 5 before 4: 4 is reordered.
        assert_eq!(run(&frame(0, 1, 1, 50_000)), XDP_DROP);
        run(&frame(0, 0, 5, 50_000));
        run(&frame(0, 0, 4, 50_000));
        // Foreign: no magic, an unknown stream, an unknown flow, too short.
        let mut plain = frame(0, 0, 6, 0);
        plain[48] = 0;
        assert_eq!(run(&plain), XDP_PASS);
        assert_eq!(run(&frame(2, 0, 0, 0)), XDP_PASS);
        assert_eq!(run(&frame(0, 4, 7, 0)), XDP_PASS);
        assert_eq!(run(&[0u8; 15]), XDP_PASS);

        let n = c.read().unwrap();
        let t = n.totals;
        assert_eq!(
            (t.rx, t.dups, t.reordered, t.foreign),
            (6, 1, 1, 4),
            "{t:?}"
        );
        assert_eq!(t.rx_bytes, 6 * 68, "wire bytes count the FCS");
        assert_eq!(n.per_flow, vec![3, 1, 1, 1]);
        // Six latencies of about 50 µs (the run itself adds a little).
        assert_eq!(t.lat_n, 6);
        assert_eq!(n.latency.iter().sum::<u64>(), 6);
        assert!(t.lat_min >= 50_000 && t.lat_max < 50_000_000, "{t:?}");
    }

    /// The TC program counts as the XDP one does: the same body.
    #[test]
    fn the_tc_hook_counts_alike() {
        let c = XdpCounter::load(2, 1, false).expect("load the counter (needs root)");
        let p: &SchedClassifier = c.ebpf.program("tl_count_tc").unwrap().try_into().unwrap();
        let fd = p.fd().unwrap().as_fd();
        let run = |f: &[u8]| run_tc(fd, f, 0).unwrap().verdict;
        assert_eq!(run(&frame(0, 0, 0, 50_000)), TC_ACT_SHOT);
        assert_eq!(run(&frame(0, 1, 2, 50_000)), TC_ACT_SHOT);
        assert_eq!(run(&frame(0, 1, 2, 50_000)), TC_ACT_SHOT, "a duplicate");
        assert_eq!(run(&frame(0, 0, 1, 50_000)), TC_ACT_SHOT, "reordered");
        assert_eq!(run(&frame(0, 2, 3, 0)), TC_ACT_OK, "an unknown flow");
        let n = c.read().unwrap();
        let t = n.totals;
        assert_eq!(
            (t.rx, t.dups, t.reordered, t.foreign),
            (3, 1, 1, 1),
            "{t:?}"
        );
        assert_eq!(n.per_flow, vec![2, 1]);
        assert_eq!(t.rx_bytes, 3 * 68);
    }

    #[test]
    fn pass_lets_counted_frames_through() {
        let c = XdpCounter::load(1, 1, true).expect("load the XDP counter (needs root)");
        let v = run_xdp(c.program().unwrap(), &frame(0, 0, 0, 0)).unwrap();
        assert_eq!(v, XDP_PASS);
        assert_eq!(c.read().unwrap().totals.rx, 1);
    }
}
