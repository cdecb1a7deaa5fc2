//! What a port means whichever datapath moves its packets: where a tunnel
//! port sends a frame and with which key and options, and the MTU a tenant
//! behind the node's tunnels is given.

use crate::config::{FromFlow, Port, PortKind, TunnelPort};
use std::net::IpAddr;
use tunlab_dp::{TlvMap, TunnelSet};
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_mtu_leaves_room_for_the_tunnel() {
        let text = "[switch]\nname='x'\n[[port]]\nname='g'\nofport=1\ntype='geneve'\nlocal_ip='10.0.0.1'\nremote_ip='flow'\n";
        let cfg = crate::config::parse(text, "t").unwrap();
        // 1500 - (IPv4 20 + UDP 8 + Geneve 8 + option 8 + inner Ethernet 14)
        assert_eq!(default_tenant_mtu(cfg.underlay_mtu, &cfg.ports), 1442);
    }
}
