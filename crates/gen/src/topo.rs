//! The generator's own wire when no interface is given: two network
//! namespaces joined by a veth pair, removed when dropped (and by the next
//! run if this one was killed).
//!
//! ```text
//!  netns tlgen-PID-N              netns tlgen-PID-N+1
//!  [tunlab gen TX] tlg0 ═══ veth ═══ tlg1 [tunlab gen RX]
//! ```
//!
//! IPv6 is off on both ends so that nothing but the generator's frames
//! crosses the wire.

use crate::send::Endpoint;
use std::sync::atomic::{AtomicUsize, Ordering};
use tunlab_netio::netns::{self, Netns};

/// Namespace prefix of the generator's wire.
pub const PREFIX: &str = "tlgen";

/// A veth pair between two fresh namespaces.
#[derive(Debug)]
pub struct Wire {
    tx_ns: Netns,
    rx_ns: Netns,
}

impl Wire {
    /// Create the pair with an MTU that carries frames of `max_frame`
    /// bytes (FCS not included).
    pub fn create(max_frame: usize) -> Result<Wire, String> {
        let e = |e: netns::CmdError| e.to_string();
        // Several wires may live in one process (tests run in parallel).
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(2, Ordering::Relaxed);
        let tx_ns = Netns::create(PREFIX, n).map_err(e)?;
        let rx_ns = Netns::create(PREFIX, n + 1).map_err(e)?;
        for ns in [&tx_ns, &rx_ns] {
            ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1")
                .map_err(e)?;
        }
        let veth = netns::Veth {
            mtu: Some(max_frame.saturating_sub(14).max(1500) as u32),
            // A queue per sender thread, for AF_XDP (one socket a queue).
            queues: Some(8),
            macs: None,
        };
        tx_ns.veth("tlg0", rx_ns.name(), "tlg1", veth).map_err(e)?;
        Ok(Wire { tx_ns, rx_ns })
    }

    pub fn tx(&self) -> Endpoint {
        Endpoint {
            ifname: "tlg0".into(),
            netns: Some(self.tx_ns.name().to_string()),
        }
    }

    pub fn rx(&self) -> Endpoint {
        Endpoint {
            ifname: "tlg1".into(),
            netns: Some(self.rx_ns.name().to_string()),
        }
    }
}
