//! What the switch asks of a datapath that forwards cached flows under it
//! (Open vSwitch's dpif): serve ports, take the slow path's decisions as
//! cached flows, forget them when the rules change, list them and count.
//!
//! The userspace datapath (`userspace`) is the switch's slow
//! path and talks to a cache only through this trait; `kernel`
//! (the eBPF one) is the implementation today. The remaining dpif
//! operations are the slow path's own I/O:
//! - *misses come up* through the devices [`Dpif::port_add`] returns (the
//!   slow path reads them as that port), or, for a tunnel port, up the
//!   stack to the slow path's own socket;
//! - *execute one packet*: the slow path writes it to the output port's
//!   upcall device, which the datapath sends on (or to its own socket).

use crate::config::Port;
use crate::port::StartError;
use tunlab_dp::{Classifier, DropReason, FlowKey, Op, TlvMap};
use tunlab_netio::tap::Tap;

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
    /// for the flow's key): keep the flows whose cached actions are what
    /// it decides now, delete the others. Returns (kept, deleted).
    fn revalidate_each(
        &mut self,
        _decide: &mut dyn FnMut(&FlowKey) -> Result<Vec<Op>, DropReason>,
        _tlv: &TlvMap,
    ) -> Result<(u64, u64), String> {
        Ok((0, 0))
    }

    /// Forget every cached flow (`tunlab ctl del-flows --datapath`, as
    /// `ovs-dpctl del-flows`); the rules stay, the next packets miss.
    fn flow_flush(&mut self) -> Result<(), String>;

    /// The slow path decided `decision` for a packet with flow key `key`:
    /// cache it if this datapath can do the same (otherwise that flow
    /// stays in the slow path, counted by reason in [`Dpif::stats`]).
    fn flow_put(&mut self, key: &FlowKey, decision: Result<&[Op], DropReason>, tlv: &TlvMap);

    /// The cached flows with their counters, one per line
    /// (`tunlab ctl dump-flows --datapath`, as `ovs-dpctl dump-flows`).
    fn flow_dump(&self) -> Result<String, String>;

    /// The datapath's counters, named for `tunlab ctl stats`.
    fn stats(&self) -> Vec<(String, u64)>;

    /// Per port (by ofport): what this datapath forwarded or dropped
    /// itself; what it sent up is the slow path's to count.
    fn port_stats(&self) -> Vec<(u32, tunlab_ebpf::maps::PortCounters)> {
        Vec::new()
    }

    /// Look at the underlay devices' MTUs again (called every half
    /// second); the smallest, if this datapath knows its devices.
    fn refresh_mtu(&mut self) -> Option<u16> {
        None
    }

    /// A handle for a revalidator thread that expires idle cached flows,
    /// if this datapath caches flows in a map it can share.
    /// The flow key of a cached flow's packed key (the sweeper's counts
    /// name flows so); `None` where the datapath packs none.
    fn unpack(&self, _k: &tunlab_ebpf::maps::CKey) -> Option<FlowKey> {
        None
    }

    fn sweeper(&self) -> Result<Option<tunlab_ebpf::datapath::FlowSweeper>, String> {
        Ok(None)
    }
}
