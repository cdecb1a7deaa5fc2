//! One `[[port]]` table checked: its name and number, its kind and the
//! kind's settings, its policer. Errors name the port and the field.

use super::{
    ConfigError, FromFlow, Policing, Port, PortKind, RawPort, TunnelPort,
    DEFAULT_POLICING_BURST_KB, MAX_QUEUES,
};
use std::net::IpAddr;
use tunlab_wire::tunnel::TunnelKind;

/// Port `p` of file `file`, beside the `ports` checked before it.
pub(super) fn check(p: &RawPort, ports: &[Port], file: &str) -> Result<Port, ConfigError> {
    let perr = |field: &'static str, msg: String| ConfigError::Port {
        file: file.to_string(),
        port: p.name.clone(),
        field,
        msg,
    };
    if p.name.is_empty() || p.name.len() > 15 {
        return Err(perr(
            "name",
            "must be 1 to 15 bytes (a Linux interface name)".into(),
        ));
    }
    if p.ofport == 0 || p.ofport >= 0xff00 {
        return Err(perr(
            "ofport",
            format!(
                "{} is not a usable OpenFlow port number (1..65279)",
                p.ofport
            ),
        ));
    }
    if let Some(other) = ports
        .iter()
        .find(|o: &&Port| o.name == p.name || o.ofport == p.ofport)
    {
        return Err(perr(
            "ofport",
            format!(
                "clashes with port '{}' (ofport {})",
                other.name, other.ofport
            ),
        ));
    }
    let kind = kind(p, &perr)?;
    if p.queues.is_some() && !matches!(kind, PortKind::Tap { .. }) {
        return Err(perr("queues", "only tap ports have queues".into()));
    }
    let tenant = matches!(
        kind,
        PortKind::Tap { .. } | PortKind::Veth { .. } | PortKind::System
    );
    if !tenant && (p.ingress_policing_rate.is_some() || p.ingress_policing_burst.is_some()) {
        return Err(perr(
            "ingress_policing_rate",
            "only tenant ports (tap, veth, system) are policed".into(),
        ));
    }
    let police = match (p.ingress_policing_rate, p.ingress_policing_burst) {
        (None, None) => None,
        (None, Some(_)) => {
            return Err(perr(
                "ingress_policing_burst",
                "a burst needs ingress_policing_rate (kbit/s) too".into(),
            ))
        }
        // 0 turns the policer off, as in OVS.
        (Some(0), _) => None,
        (Some(rate_kbps), burst) => Some(Policing {
            rate_kbps,
            burst_kb: match burst {
                None | Some(0) => DEFAULT_POLICING_BURST_KB,
                Some(b) => b,
            },
        }),
    };
    Ok(Port {
        name: p.name.clone(),
        ofport: p.ofport,
        kind,
        police,
    })
}

/// The port's kind and that kind's settings.
fn kind(
    p: &RawPort,
    perr: &dyn Fn(&'static str, String) -> ConfigError,
) -> Result<PortKind, ConfigError> {
    Ok(match p.kind.as_str() {
        "tap" => PortKind::Tap {
            netns: p.netns.clone(),
            address: p.address.clone(),
            mtu: p.mtu,
            queues: match p.queues {
                None => 1,
                Some(q @ 1..=MAX_QUEUES) => q,
                Some(q) => {
                    return Err(perr(
                        "queues",
                        format!("{q} is not between 1 and {MAX_QUEUES}"),
                    ))
                }
            },
        },
        "veth" => PortKind::Veth {
            netns: p.netns.clone().ok_or_else(|| {
                perr(
                    "netns",
                    "a veth port needs the tenant's namespace for its peer".into(),
                )
            })?,
            address: p.address.clone(),
            mtu: p.mtu,
        },
        "system" => {
            for (field, given) in [
                ("netns", p.netns.is_some()),
                ("address", p.address.is_some()),
                ("mtu", p.mtu.is_some()),
            ] {
                if given {
                    return Err(perr(
                        field,
                        "a system port is an existing device: its namespace, address and MTU are its owner's".into(),
                    ));
                }
            }
            PortKind::System
        }
        "qinq" => PortKind::QinQ {
            underlay: p.underlay.clone().ok_or_else(|| {
                perr(
                    "underlay",
                    "a qinq port needs the underlay interface's name".into(),
                )
            })?,
        },
        k => PortKind::Tunnel(tunnel(p, k, perr)?),
    })
}

/// A tunnel port of type `k`: its addresses, key, UDP port, checksum.
fn tunnel(
    p: &RawPort,
    k: &str,
    perr: &dyn Fn(&'static str, String) -> ConfigError,
) -> Result<TunnelPort, ConfigError> {
    let kind = match k {
        "geneve" => TunnelKind::Geneve,
        "vxlan" => TunnelKind::Vxlan,
        "gre" => TunnelKind::Gre,
        "nvgre" => TunnelKind::Nvgre,
        "stt" => TunnelKind::Stt,
        _ => {
            return Err(perr(
                "type",
                format!(
                    "'{k}' is not one of tap, veth, system, geneve, vxlan, gre, nvgre, stt, qinq"
                ),
            ))
        }
    };
    let ip = |field: &'static str, v: &Option<String>| -> Result<Option<IpAddr>, ConfigError> {
        match v.as_deref() {
            None | Some("flow") => Ok(None),
            Some(s) => s
                .parse()
                .map(Some)
                .map_err(|_| perr(field, format!("'{s}' is not an IP address"))),
        }
    };
    let local_ip = ip("local_ip", &p.local_ip)?.ok_or_else(|| {
        perr(
            "local_ip",
            "a tunnel port needs its local underlay address".into(),
        )
    })?;
    let remote_ip = match (&p.remote_ip, ip("remote_ip", &p.remote_ip)?) {
        (None, _) => return Err(perr("remote_ip", "give an address or \"flow\"".into())),
        (_, Some(a)) => {
            if a.is_ipv4() != local_ip.is_ipv4() {
                return Err(perr(
                    "remote_ip",
                    "must be the same IP family as local_ip".into(),
                ));
            }
            FromFlow::Fixed(a)
        }
        (_, None) => FromFlow::Flow,
    };
    let max_key = match kind {
        TunnelKind::Geneve | TunnelKind::Vxlan | TunnelKind::Nvgre => 0x00ff_ffff,
        TunnelKind::Gre => u32::MAX as u64,
        TunnelKind::Stt => u64::MAX,
    };
    let key = match &p.key {
        None => FromFlow::Fixed(0),
        Some(toml::Value::String(s)) if s == "flow" => FromFlow::Flow,
        Some(toml::Value::Integer(n)) if *n >= 0 && (*n as u64) <= max_key => {
            FromFlow::Fixed(*n as u64)
        }
        Some(v) => {
            let shown = match v {
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::String(s) => format!("\"{s}\""),
                other => other.type_str().to_string(),
            };
            return Err(perr(
                "key",
                format!("{shown} is not \"flow\" or a number up to {max_key:#x} for {k}"),
            ));
        }
    };
    if p.csum == Some(true) && kind == TunnelKind::Nvgre {
        return Err(perr(
            "csum",
            "NVGRE has no checksum (RFC 7637 § 3.2)".into(),
        ));
    }
    Ok(TunnelPort {
        kind,
        local_ip,
        remote_ip,
        key,
        dst_port: p.dst_port.unwrap_or(kind.default_port()),
        csum: p.csum.unwrap_or(false),
    })
}
