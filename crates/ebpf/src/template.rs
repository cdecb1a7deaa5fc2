//! OVS's "build" step for the kernel datapath: a tunnel destination's
//! outer headers, made once by wire's [`HeaderTemplate`] and stored from
//! the IP header on, with the IPv4 checksum of a zero total length so
//! that the program only adds the length in.

use crate::maps::{Template, KIND_GENEVE, KIND_GRE, KIND_NVGRE, KIND_VXLAN, TEMPLATE_MAX};
use std::net::IpAddr;
use tunlab_wire::checksum;
use tunlab_wire::geneve::OptionsBuf;
use tunlab_wire::tunnel::{EncapSpec, HeaderTemplate, TunnelKind};

/// Why a destination cannot be pushed by the kernel datapath.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("{0} tunnels stay on the userspace datapath")]
    Kind(&'static str),
    #[error("outer headers: {0}")]
    Build(String),
    #[error("outer headers of {0} bytes do not fit the kernel's template ({TEMPLATE_MAX})")]
    TooLong(usize),
}

/// What a flow's output to a tunnel port resolves to.
#[derive(Debug, Clone)]
pub struct Destination {
    pub kind: TunnelKind,
    pub local: IpAddr,
    pub remote: IpAddr,
    pub key: u64,
    pub dst_port: u16,
    pub options: OptionsBuf,
    /// The underlay device the frame leaves by, and its MTU.
    pub ifindex: u32,
    pub mtu: u16,
}

pub fn build(d: &Destination) -> Result<Template, TemplateError> {
    let kind = match d.kind {
        TunnelKind::Geneve => KIND_GENEVE,
        TunnelKind::Vxlan => KIND_VXLAN,
        TunnelKind::Gre => KIND_GRE,
        TunnelKind::Nvgre => KIND_NVGRE,
        k => return Err(TemplateError::Kind(k.name())),
    };
    let mut spec = EncapSpec::new(d.kind, d.local, d.remote, Some(d.key));
    spec.dst_port = d.dst_port;
    spec.geneve_options = d.options;
    let h = HeaderTemplate::build(&spec).map_err(|e| TemplateError::Build(e.to_string()))?;
    // wire's template starts with an Ethernet header (14 bytes, no tag).
    let all = h.as_bytes();
    let ip = &all[14..];
    if ip.len() > TEMPLATE_MAX {
        return Err(TemplateError::TooLong(ip.len()));
    }
    let mut t = Template {
        kind,
        len: ip.len() as u8,
        ifindex: d.ifindex,
        mtu: d.mtu,
        ..Template::default()
    };
    t.hdr[..ip.len()].copy_from_slice(ip);
    match (d.local, d.remote) {
        (IpAddr::V4(l), IpAddr::V4(r)) => {
            t.family = 4;
            t.l4_off = 20;
            t.local4 = l.octets();
            t.remote4 = r.octets();
            t.hdr[2] = 0;
            t.hdr[3] = 0;
            t.hdr[10] = 0;
            t.hdr[11] = 0;
            let c = checksum::finish(checksum::sum(0, &t.hdr[..20]));
            t.hdr[10..12].copy_from_slice(&c.to_be_bytes());
        }
        (IpAddr::V6(l), IpAddr::V6(r)) => {
            t.family = 6;
            t.l4_off = 40;
            t.local6 = l.octets();
            t.remote6 = r.octets();
        }
        _ => {
            return Err(TemplateError::Build(
                "local and remote must both be IPv4 or both IPv6".into(),
            ))
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tunlab_wire::geneve::{OptType, OptionRepr, OvnPorts, OVN_CLASS, OVN_TYPE};

    fn dest(kind: TunnelKind) -> Destination {
        let mut options = OptionsBuf::new();
        if kind == TunnelKind::Geneve {
            options
                .push(OptionRepr {
                    class: OVN_CLASS,
                    opt_type: OptType(OVN_TYPE),
                    data: &OvnPorts::new(3, 2).unwrap().data(),
                })
                .unwrap();
        }
        Destination {
            kind,
            local: "172.16.0.1".parse().unwrap(),
            remote: "172.16.0.2".parse().unwrap(),
            key: 6,
            dst_port: kind.default_port(),
            options,
            ifindex: 7,
            mtu: 1500,
        }
    }

    #[test]
    fn geneve_ovn_template() {
        let t = build(&dest(TunnelKind::Geneve)).unwrap();
        // IPv4 20 + UDP 8 + Geneve 8 + OVN option 8.
        assert_eq!(
            (t.family, t.len, t.l4_off, t.kind),
            (4, 44, 20, KIND_GENEVE)
        );
        assert_eq!(&t.hdr[..2], &[0x45, 0x00]);
        assert_eq!(t.hdr[9], 17);
        assert_eq!(&t.hdr[22..24], &6081u16.to_be_bytes());
        // Geneve: 2 words of options, C bit (OVN's option is critical),
        // TEB, VNI 6, then class 0x0102 type 0x80.
        assert_eq!(&t.hdr[28..36], &[0x02, 0x40, 0x65, 0x58, 0, 0, 6, 0]);
        assert_eq!(&t.hdr[36..40], &[0x01, 0x02, 0x80, 0x01]);
        // The checksum with a zero length, completed with the real one,
        // is the checksum of the real header.
        let mut h = t.hdr[..20].to_vec();
        let tot: u16 = 1000;
        let c = u16::from_be_bytes([h[10], h[11]]);
        let sum = (!c as u32) + tot as u32;
        let sum = (sum & 0xffff) + (sum >> 16);
        h[2..4].copy_from_slice(&tot.to_be_bytes());
        h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        assert_eq!(checksum::finish(checksum::sum(0, &h)), 0);
    }

    #[test]
    fn every_fast_kind_builds_and_stt_does_not() {
        for k in [TunnelKind::Vxlan, TunnelKind::Gre, TunnelKind::Nvgre] {
            let t = build(&dest(k)).unwrap();
            assert!(t.len >= 24, "{k:?}");
        }
        assert!(matches!(
            build(&dest(TunnelKind::Stt)),
            Err(TemplateError::Kind(_))
        ));
        let mut d = dest(TunnelKind::Geneve);
        d.remote = "fd00::2".parse().unwrap();
        assert!(build(&d).is_err());
        d.local = "fd00::1".parse().unwrap();
        let t = build(&d).unwrap();
        assert_eq!((t.family, t.l4_off, t.hdr[6]), (6, 40, 17));
    }
}
