//! Which tunnel a UDP or TCP port carries: tshark's "decode as".
//!
//! By default VXLAN on UDP 4789 (IANA) and 8472 (the Linux kernel's when a
//! VXLAN device is made without `dstport`), Geneve on UDP 6081 and STT on
//! TCP 7471. `--decode-as udp.port==N,vxlan` (tshark's `-d` spelling; a
//! single `=` is taken too) names any other.

use tunlab_wire::{geneve, stt, vxlan};

/// A tunnel the decoder reads behind a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tunnel {
    Vxlan,
    Geneve,
    Stt,
}

/// The ports the decoder reads tunnels on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeAs {
    udp: Vec<(u16, Tunnel)>,
    tcp: Vec<(u16, Tunnel)>,
}

/// The Linux kernel's VXLAN port when none is given (`dstport`).
pub const LINUX_VXLAN_PORT: u16 = 8472;

impl Default for DecodeAs {
    fn default() -> DecodeAs {
        DecodeAs {
            udp: vec![
                (vxlan::UDP_PORT, Tunnel::Vxlan),
                (LINUX_VXLAN_PORT, Tunnel::Vxlan),
                (geneve::UDP_PORT, Tunnel::Geneve),
            ],
            tcp: vec![(stt::TCP_PORT, Tunnel::Stt)],
        }
    }
}

impl DecodeAs {
    /// Add one rule, `udp.port==N,PROTO` or `tcp.port==N,stt`; the error
    /// names the part that is wrong.
    pub fn add(&mut self, spec: &str) -> Result<(), String> {
        let bad = |what: String| format!("--decode-as '{spec}': {what}");
        let (selector, proto) = spec.split_once(',').ok_or_else(|| {
            bad("expected FIELD==PORT,PROTOCOL (e.g. udp.port==8472,vxlan)".into())
        })?;
        let (field, port) = selector
            .split_once("==")
            .or_else(|| selector.split_once('='))
            .ok_or_else(|| bad(format!("'{selector}' has no '==PORT'")))?;
        let port: u16 = port
            .trim()
            .parse()
            .map_err(|_| bad(format!("'{}' is not a port (0 to 65535)", port.trim())))?;
        let tunnel = match proto.trim().to_ascii_lowercase().as_str() {
            "vxlan" => Tunnel::Vxlan,
            "geneve" => Tunnel::Geneve,
            "stt" => Tunnel::Stt,
            other => {
                return Err(bad(format!(
                    "unknown protocol '{other}' (vxlan, geneve or stt)"
                )))
            }
        };
        let table = match (field.trim(), tunnel) {
            ("udp.port", Tunnel::Vxlan | Tunnel::Geneve) => &mut self.udp,
            ("tcp.port", Tunnel::Stt) => &mut self.tcp,
            ("udp.port" | "tcp.port", _) => {
                return Err(bad(format!(
                    "{} runs over {}, not {}",
                    proto.trim(),
                    if tunnel == Tunnel::Stt { "TCP" } else { "UDP" },
                    field.trim()
                )))
            }
            (other, _) => {
                return Err(bad(format!(
                    "unknown field '{other}' (udp.port or tcp.port)"
                )))
            }
        };
        // The latest rule for a port wins, as in tshark.
        table.retain(|(p, _)| *p != port);
        table.insert(0, (port, tunnel));
        Ok(())
    }

    /// The defaults with `specs` added in order.
    pub fn with(specs: &[String]) -> Result<DecodeAs, String> {
        let mut d = DecodeAs::default();
        for s in specs {
            d.add(s)?;
        }
        Ok(d)
    }

    fn find(table: &[(u16, Tunnel)], dst: u16, src: u16) -> Option<Tunnel> {
        // The destination port first, then the source port (a reply).
        let by = |port| table.iter().find(|(p, _)| *p == port).map(|(_, t)| *t);
        by(dst).or_else(|| by(src))
    }

    /// The tunnel behind a UDP datagram between these ports, if any.
    pub fn udp(&self, dst: u16, src: u16) -> Option<Tunnel> {
        DecodeAs::find(&self.udp, dst, src)
    }

    /// The tunnel behind a TCP segment between these ports, if any.
    pub fn tcp(&self, dst: u16, src: u16) -> Option<Tunnel> {
        DecodeAs::find(&self.tcp, dst, src)
    }
}

impl Tunnel {
    /// The name a port's note shows.
    pub fn name(self) -> &'static str {
        match self {
            Tunnel::Vxlan => "vxlan",
            Tunnel::Geneve => "geneve",
            Tunnel::Stt => "stt",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_port_is_vxlan_by_default_and_others_by_rule() {
        let d = DecodeAs::default();
        assert_eq!(d.udp(4789, 1), Some(Tunnel::Vxlan));
        assert_eq!(d.udp(8472, 40000), Some(Tunnel::Vxlan));
        assert_eq!(d.udp(6081, 1), Some(Tunnel::Geneve));
        assert_eq!(d.tcp(7471, 1), Some(Tunnel::Stt));
        assert_eq!(d.udp(5000, 1), None);
        let d = DecodeAs::with(&["udp.port==5000,vxlan".into(), "udp.port=4789,geneve".into()])
            .unwrap();
        assert_eq!(d.udp(5000, 1), Some(Tunnel::Vxlan));
        assert_eq!(
            d.udp(1, 5000),
            Some(Tunnel::Vxlan),
            "a reply, by its source port"
        );
        assert_eq!(d.udp(4789, 1), Some(Tunnel::Geneve), "the latest rule wins");
        let d = DecodeAs::with(&["tcp.port==7000,STT".into()]).unwrap();
        assert_eq!(d.tcp(7000, 1), Some(Tunnel::Stt));
    }

    #[test]
    fn a_bad_rule_names_what_is_wrong() {
        let err = |s: &str| DecodeAs::default().add(s).unwrap_err();
        assert!(err("udp.port==8472").contains("expected FIELD==PORT,PROTOCOL"));
        assert!(err("udp.port,vxlan").contains("has no '==PORT'"));
        assert!(err("udp.port==70000,vxlan").contains("'70000' is not a port"));
        assert!(err("udp.port==1,nvgre").contains("unknown protocol 'nvgre'"));
        assert!(err("ip.proto==1,vxlan").contains("unknown field 'ip.proto'"));
        assert!(err("tcp.port==1,vxlan").contains("vxlan runs over UDP, not tcp.port"));
        assert!(err("udp.port==1,stt").contains("stt runs over TCP, not udp.port"));
    }
}
