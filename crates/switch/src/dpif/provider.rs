//! What the switch asks of a datapath that forwards cached flows under it
//! (Open vSwitch's dpif): serve ports, take the slow path's decisions as
//! cached flows, forget them when the rules change, list them and count.
//!
//! Ofproto talks to a caching datapath only through this trait; the eBPF
//! datapath ([`crate::dpif::ebpf`]) is the implementation today. The
//! userspace datapath ([`crate::dpif::netdev`]) is the slow path's own
//! I/O, and the remaining dpif operations are carried out there:
//! - *misses come up* through the devices [`Dpif::port_add`] returns (the
//!   slow path reads them as that port), or, for a tunnel port, up the
//!   stack to the slow path's own socket;
//! - *execute one packet*: the slow path writes it to the output port's
//!   upcall device, which the datapath sends on (or to its own socket).

use crate::config::Port;
use crate::port::StartError;
use tunlab_dp::{Classifier, DropReason, FlowKey, Op, PacketIn, TlvMap};
use tunlab_netio::tap::Tap;
use tunlab_wire::tunnel::TunnelMetadata;

/// What a new port needs besides its own configuration.
#[derive(Debug, Clone, Copy)]
pub struct PortEnv<'a> {
    /// Offer checksum and TSO offload on tenant devices.
    pub offloads: bool,
    /// For a tenant port's default MTU.
    pub underlay_mtu: u16,
    /// Every port, the new one included (for the default MTU).
    pub ports: &'a [Port],
}

/// How a port's misses reach the slow path.
#[derive(Debug)]
pub enum Upcalls {
    /// Through these devices, which the slow path serves as the port.
    Devices(Vec<Tap>),
    /// Up the stack to the slow path's own socket for the port (tunnel
    /// ports).
    Socket,
}

/// How a revalidation left the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revalidation {
    /// A new generation: every cached flow is a miss from now on.
    NewGeneration,
    /// The cached flows (adopted from a previous run, or cached before a
    /// change that kept the megaflow mask and TLV map) stand until
    /// [`Dpif::revalidate_each`] checks them.
    EachFlow { adopted: bool },
}

/// A flow-caching datapath under the switch.
pub trait Dpif: std::fmt::Debug + Send {
    /// Which datapath this is, for messages (`ebpf`).
    fn kind(&self) -> &'static str;

    /// Serve port `p`: its devices, programs and map entries. `None`: this
    /// datapath does not serve ports of this kind (the slow path keeps
    /// them alone, e.g. TAP ports whose descriptor the switch holds).
    fn port_add(&mut self, p: &Port, env: PortEnv<'_>) -> Result<Option<Upcalls>, StartError>;

    /// Port `ofport` (configured as `cfg`) leaves: its programs, entries
    /// and the devices the datapath made go.
    fn port_del(&mut self, ofport: u32, cfg: Option<&Port>);

    /// The flow table, the TLV map or the ports changed: once this returns
    /// no flow cached before it forwards a packet — unless it returns
    /// [`Revalidation::EachFlow`]: the cache was built under the same mask
    /// and TLV map (adopted from a previous run, or before this change),
    /// and the caller must now call [`Dpif::revalidate_each`], which keeps
    /// what the rules still decide.
    fn revalidate(&mut self, rules: &Classifier, tlv: &TlvMap) -> Result<Revalidation, String>;

    /// Check each cached flow against `decide` (the slow path's decision
    /// for the flow's key, and the key bits it depended on): keep the
    /// flows whose mask still covers what the decision depends on, with
    /// the actions it decides now (replaced in place where they changed),
    /// delete the others.
    fn revalidate_each(
        &mut self,
        _decide: &mut Decide<'_>,
        _tlv: &TlvMap,
    ) -> Result<Walked, String> {
        Ok(Walked::default())
    }

    /// Reorder what lookups try first by what was hit lately (called
    /// between packets twice a second).
    fn rebalance(&mut self) {}

    /// Forget every cached flow (`tunlab ctl del-flows --datapath`, as
    /// `ovs-dpctl del-flows`); the rules stay, the next packets miss.
    fn flow_flush(&mut self) -> Result<(), String>;

    /// The slow path decided `decision` for a packet with flow key `key`,
    /// and the decision depended on the key bits of `mask` only (its
    /// megaflow mask: any key equal to `key` there gets the same steps):
    /// cache it if this datapath can do the same (otherwise that flow
    /// stays in the slow path, counted by reason in [`Dpif::stats`]).
    fn flow_put(
        &mut self,
        key: &FlowKey,
        mask: &FlowKey,
        decision: Result<&[Op], DropReason>,
        tlv: &TlvMap,
    );

    /// The cached flows with their counters, one per line
    /// (`tunlab ctl dump-flows --datapath`, as `ovs-dpctl dump-flows`).
    fn flow_dump(&self) -> Result<String, String>;

    /// The datapath's counters, named for `tunlab ctl stats`.
    fn stats(&self) -> Vec<(String, u64)>;

    /// Per port (by ofport): what this datapath forwarded or dropped
    /// itself; what it sent up is the slow path's to count.
    fn port_stats(&self) -> Vec<(u32, PortCounters)> {
        Vec::new()
    }

    /// Look at the underlay devices' MTUs again (called every half
    /// second); the smallest, if this datapath knows its devices.
    fn refresh_mtu(&mut self) -> Option<u16> {
        None
    }

    /// A handle for a revalidator thread that expires idle cached flows,
    /// if this datapath caches flows in a map it can share.
    fn sweeper(&self) -> Result<Option<Box<dyn Sweeper>>, String> {
        Ok(None)
    }

    /// The flow keys of what a sweeper counted (the cache packs keys its
    /// own way, and only the datapath, which knows the packing of its
    /// current generation, can read them): (key, packets, bytes). The
    /// datapath also learns here which flows the sweep deleted.
    fn flow_counts(&mut self, _counted: Counted) -> Vec<(FlowKey, u64, u64)> {
        Vec::new()
    }
}

/// The slow path's decision for a cached flow's key, and the key bits it
/// depended on (its megaflow mask).
pub type Decide<'a> = dyn FnMut(&FlowKey) -> (Result<Vec<Op>, DropReason>, FlowKey) + 'a;

/// What a walk of the cached flows ([`Dpif::revalidate_each`]) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Walked {
    /// Left as they were.
    pub kept: u64,
    /// Given new actions in place (a packet sees the old entry or the new
    /// one, never a miss).
    pub replaced: u64,
    /// Put in anew under new masks, from the whole keys of the packets
    /// known to ride them (the upcall that made each, the kernel's
    /// samples), before their old entry went: those packets never miss.
    pub rebuilt: u64,
    /// Deleted (their mask no longer covers what the decision reads, and
    /// no packet known to ride them could be decided anew): each one's
    /// next packet misses.
    pub deleted: u64,
}

/// A port's counters in a datapath (`tunlab ctl stats` adds them to the
/// slow path's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Dropped on receive by the datapath itself (policing, no room).
    pub rx_dropped: u64,
}

/// What one sweep of the flow cache did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepCounts {
    /// Entries in the cache before the sweep.
    pub seen: u64,
    /// Deleted: idle for longer than the limit.
    pub idle: u64,
    /// Deleted: cached under rules that have changed since.
    pub stale: u64,
    /// Deleted to make room in a nearly full cache.
    pub evicted: u64,
}

/// What cached flows carried since the last sweep (and which went), in the
/// datapath's own packing of their keys; [`Dpif::flow_counts`] of the datapath that made
/// it reads it (OVS's revalidators likewise hand a dumped flow's key back
/// to the datapath's own translation).
pub struct Counted(Box<dyn std::any::Any + Send>);

impl Counted {
    /// Wrap what a datapath's sweeper counted.
    pub fn new<T: std::any::Any + Send>(counts: T) -> Counted {
        Counted(Box::new(counts))
    }

    /// The counts, if this datapath made them.
    pub fn into_inner<T: std::any::Any>(self) -> Option<T> {
        self.0.downcast::<T>().ok().map(|b| *b)
    }
}

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Counted(..)")
    }
}

/// A revalidator thread's handle on a datapath's flow cache: it expires
/// idle flows and counts what every flow carried, without holding up the
/// thread that owns the datapath.
pub trait Sweeper: Send {
    /// Delete what has been idle longer than `max_idle`, what is stale,
    /// and, in a nearly full cache, what was used longest ago.
    fn sweep(&mut self, max_idle: std::time::Duration) -> Result<SweepCounts, String>;

    /// What the flows carried since the last call (empty: nothing).
    fn take_counted(&mut self) -> Option<Counted>;
}

/// What a datapath asks of the switch above it (Open vSwitch's upcall
/// handler): the decision for a packet it could not forward by itself,
/// and the delivery of a `controller` action's packet.
pub trait Upcall {
    /// A packet missed: `frame` came in on `in_port` (out of a tunnel
    /// with `tunnel`'s metadata). Fill `ops` with the steps to carry out,
    /// or say why the packet is dropped (the reason's counter name).
    fn upcall(
        &mut self,
        in_port: u32,
        frame: &[u8],
        tunnel: Option<&TunnelMetadata>,
        ops: &mut Vec<Op>,
    ) -> Result<(), &'static str>;

    /// The epoch of the decisions [`Upcall::upcall`] gives now: the same
    /// key gets the same steps while it stands, and it moves whenever the
    /// rules, the TLV map or the ports change. `None`: the decisions
    /// depend on more than the key (`normal`'s MAC learning) and must not
    /// be cached.
    fn cache_epoch(&self) -> Option<u64> {
        None
    }

    /// Send `frame`, as it is now, to the controllers as a PACKET_IN
    /// (`tunnelled`: it came out of the last upcall's tunnel), or say why
    /// not.
    fn controller(
        &mut self,
        in_port: u32,
        tunnelled: bool,
        pin: &PacketIn,
        frame: &[u8],
    ) -> Result<(), &'static str>;
}
