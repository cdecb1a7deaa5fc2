//! What a port means whichever datapath moves its packets: where a tunnel
//! port sends a frame and with which key and options, and the MTU a tenant
//! behind the node's tunnels is given.

use crate::config::{FromFlow, Port, PortKind, TunnelPort};
use std::net::IpAddr;
use tunlab_dp::{TlvMap, TunnelSet};
use tunlab_netio::tap::offload;
use tunlab_netio::TapOptions;
use tunlab_wire::geneve::{OptType, OptionRepr, OptionsBuf};
use tunlab_wire::tunnel::TunnelKind;
use tunlab_wire::vlan;

/// Why the node (or one of its ports) could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("port '{port}': {msg}")]
    Port { port: String, msg: String },
}

/// The Geneve options a frame leaving through a `kind` port carries: one
/// per `tun_metadataN` the flow set, as the TLV map says.
pub fn geneve_options(kind: TunnelKind, tlv: &TlvMap, tun: &TunnelSet) -> OptionsBuf {
    let mut opts = OptionsBuf::new();
    if kind == TunnelKind::Geneve {
        for (n, v) in tun.metadata.iter().enumerate() {
            if let (Some(v), Some((class, typ, _))) = (v, tlv.option(n)) {
                let _ = opts.push(OptionRepr {
                    class,
                    opt_type: OptType(typ),
                    data: &v.to_be_bytes(),
                });
            }
        }
    }
    opts
}

/// Where a tunnel port sends a frame and with which key: the port's own
/// settings, or what the flow set (`set_field:...->tun_dst`, `tun_id`).
pub fn remote_and_key(cfg: &TunnelPort, tun: &TunnelSet) -> Option<(IpAddr, u64)> {
    let remote = match (cfg.remote_ip, tun.dst) {
        (FromFlow::Fixed(ip), _) => ip,
        (FromFlow::Flow, Some(ip)) => ip,
        (FromFlow::Flow, None) => return None,
    };
    let key = match (cfg.key, tun.id) {
        (_, Some(id)) => id,
        (FromFlow::Fixed(k), None) => k,
        (FromFlow::Flow, None) => 0,
    };
    Some((remote, key))
}

/// The default tenant MTU: the underlay MTU minus the largest tunnel
/// overhead among the node's tunnel ports (outer IP, UDP and tunnel header,
/// plus the inner Ethernet header the tenant MTU does not count; for QinQ
/// the 4-byte S-tag, which a packet socket does not let past the MTU).
pub fn default_tenant_mtu(underlay_mtu: u16, ports: &[Port]) -> u16 {
    let mut worst = 0usize;
    for p in ports {
        if let PortKind::QinQ { .. } = &p.kind {
            worst = worst.max(vlan::TAG_LEN);
        }
        if let PortKind::Tunnel(t) = &p.kind {
            let ip = if t.local_ip.is_ipv4() { 20 } else { 40 };
            let hdr = match t.kind {
                TunnelKind::Geneve => 8 + 8 + 8, // UDP, Geneve, one 4-byte option
                TunnelKind::Vxlan => 8 + 8,
                TunnelKind::Gre => 4 + 4 + if t.csum { 4 } else { 0 },
                TunnelKind::Nvgre => 8,
                TunnelKind::Stt => 20 + 18,
            };
            worst = worst.max(ip + hdr + 14);
        }
    }
    underlay_mtu.saturating_sub(worst as u16)
}

/// A token bucket of bytes: a tenant port's ingress policer on the
/// userspace datapath (the kernel's is `struct tl_police`, the same
/// arithmetic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    rate: u64,
    burst: u64,
    tokens: u64,
    last_ns: u64,
}

impl TokenBucket {
    /// `rate` bytes a second, at most `burst` bytes at once; full at first.
    pub fn new(rate: u64, burst: u64) -> TokenBucket {
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            last_ns: 0,
        }
    }

    /// Whether a frame of `len` bytes may pass at `now_ns` (taking its
    /// tokens if so). Refill time is capped at a second.
    pub fn take(&mut self, len: u64, now_ns: u64) -> bool {
        let elapsed = now_ns.saturating_sub(self.last_ns).min(1_000_000_000);
        self.last_ns = now_ns;
        self.tokens = (self.tokens + elapsed * self.rate / 1_000_000_000).min(self.burst);
        if self.tokens >= len {
            self.tokens -= len;
            true
        } else {
            false
        }
    }
}

/// The device that holds `addr` in this namespace (a tunnel's underlay).
pub fn device_with(addr: IpAddr) -> Option<String> {
    let out = tunlab_netio::netns::run(&["ip", "-o", "addr", "show"]).ok()?;
    out.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        let _idx = w.next()?;
        let dev = w.next()?;
        let _fam = w.next()?;
        let a = w.next()?.split('/').next()?;
        (a.parse::<IpAddr>().ok()? == addr).then(|| dev.to_string())
    })
}

/// A device's MTU (sysfs: no process started).
pub fn device_mtu(dev: &str) -> Option<u16> {
    std::fs::read_to_string(format!("/sys/class/net/{dev}/mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A tenant-facing TAP's options. Checksum and TSO offload: the tenant's
/// kernel hands over TCP super-frames of up to 64 KB with the checksum
/// partial, and takes joined ones back (`offloads = false`: checksum only).
pub fn tenant_tap_options(offloads: bool) -> TapOptions {
    TapOptions {
        vnet_hdr: true,
        multi_queue: true,
        offload: if offloads {
            offload::CSUM | offload::TSO4 | offload::TSO6 | offload::TSO_ECN
        } else {
            offload::CSUM
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_passes_its_burst_then_its_rate() {
        // 1,000,000 bytes a second, bursts of 10,000.
        let mut b = TokenBucket::new(1_000_000, 10_000);
        let passed = (0..20).filter(|_| b.take(1000, 0)).count();
        assert_eq!(passed, 10, "the burst");
        // 5 ms later: 5,000 bytes more.
        let passed = (0..20).filter(|_| b.take(1000, 5_000_000)).count();
        assert_eq!(passed, 5);
        // Over 10 s, about rate x time.
        let mut sent = 0u64;
        for ms in 6..10_006u64 {
            for _ in 0..10 {
                if b.take(1000, ms * 1_000_000) {
                    sent += 1000;
                }
            }
        }
        assert!((9_900_000..=10_100_000).contains(&sent), "{sent}");
        // A long pause fills it to the burst, no more.
        assert_eq!(
            (0..50).filter(|_| b.take(1000, 100_000_000_000)).count(),
            10
        );
    }

    #[test]
    fn tenant_mtu_leaves_room_for_the_tunnel() {
        let text = "[switch]\nname='x'\n[[port]]\nname='g'\nofport=1\ntype='geneve'\nlocal_ip='10.0.0.1'\nremote_ip='flow'\n";
        let cfg = crate::config::parse(text, "t").unwrap();
        // 1500 - (IPv4 20 + UDP 8 + Geneve 8 + option 8 + inner Ethernet 14)
        assert_eq!(default_tenant_mtu(cfg.underlay_mtu, &cfg.ports), 1442);
    }
}
