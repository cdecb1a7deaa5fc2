//! From a packet to its flow key: the tenant frame's headers, the port it
//! came in on and, for tunnelled packets, the tunnel metadata with Geneve
//! options mapped to `tun_metadataN` by the TLV map.

use crate::key::{f, tun_metadata, FlowKey, TUN_METADATA_FIELDS};
use std::net::IpAddr;
use tunlab_wire::geneve::{OptType, Options};
use tunlab_wire::tunnel::TunnelMetadata;

/// Geneve option to `tun_metadataN`, as `ovs-ofctl add-tlv-map` sets it:
/// `{class=0x0102,type=0x80,len=4}->tun_metadata0`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TlvMap {
    entries: [Option<(u16, u8, u8)>; TUN_METADATA_FIELDS],
}

/// Why a TLV mapping does not parse or fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tlv map '{text}': {msg}")]
pub struct TlvMapError {
    pub text: String,
    pub msg: String,
}

impl TlvMap {
    /// Parse and add mappings, comma-separated:
    /// `{class=0x0102,type=0x80,len=4}->tun_metadata0`. tunlab's
    /// tun_metadata fields hold up to 4 bytes.
    pub fn add(&mut self, text: &str) -> Result<(), TlvMapError> {
        let err = |msg: String| TlvMapError {
            text: text.to_string(),
            msg,
        };
        let mut rest = text.trim();
        while !rest.is_empty() {
            let open = rest.strip_prefix('{').ok_or_else(|| {
                err("expected '{class=...,type=...,len=...}->tun_metadataN'".into())
            })?;
            let (inner, after) = open
                .split_once('}')
                .ok_or_else(|| err("missing '}'".into()))?;
            let after = after
                .trim_start()
                .strip_prefix("->")
                .ok_or_else(|| err("missing '->tun_metadataN' after '}'".into()))?;
            let (target, tail) = match after.find(',') {
                Some(i) => (&after[..i], &after[i + 1..]),
                None => (after, ""),
            };
            let (mut class, mut typ, mut len) = (None, None, None);
            for kv in inner.split(',') {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| err(format!("'{kv}' is not key=value")))?;
                let n = parse_num(v.trim())
                    .ok_or_else(|| err(format!("{}: '{}' is not a number", k.trim(), v.trim())))?;
                match k.trim() {
                    "class" if n <= 0xffff => class = Some(n as u16),
                    "type" if n <= 0xff => typ = Some(n as u8),
                    "len" if n == 4 => len = Some(4),
                    "len" => {
                        return Err(err(format!(
                            "len={n}: tunlab's tun_metadata fields hold 4 bytes (len=4)"
                        )))
                    }
                    k => {
                        return Err(err(format!(
                            "'{k}={n}' is not class (16 bits), type (8 bits) or len"
                        )))
                    }
                }
            }
            let (class, typ, len) = match (class, typ, len) {
                (Some(c), Some(t), Some(l)) => (c, t, l),
                _ => return Err(err("class, type and len are all needed".into())),
            };
            let n = target
                .trim()
                .strip_prefix("tun_metadata")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n < TUN_METADATA_FIELDS)
                .ok_or_else(|| {
                    err(format!(
                        "'{}' is not tun_metadata0..tun_metadata{}",
                        target.trim(),
                        TUN_METADATA_FIELDS - 1
                    ))
                })?;
            if let Some(Some(old)) = self.entries.get(n) {
                if *old != (class, typ, len) {
                    return Err(err(format!(
                        "tun_metadata{n} is already mapped to class {:#06x} type {:#04x}",
                        old.0, old.1
                    )));
                }
            }
            self.entries[n] = Some((class, typ, len));
            rest = tail.trim_start();
        }
        Ok(())
    }

    /// Map field `n` to option (class, type, len), or unmap it (`None`).
    /// The caller has checked what it needs to (OpenFlow's TLV table mod
    /// refuses remapping a field in use).
    pub fn set(&mut self, n: usize, option: Option<(u16, u8, u8)>) {
        if let Some(e) = self.entries.get_mut(n) {
            *e = option;
        }
    }

    /// The field an option maps to.
    pub fn field(&self, class: u16, typ: OptType) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| matches!(e, Some((c, t, _)) if *c == class && *t == typ.0))
    }

    /// The option a field maps to: (class, type, len).
    pub fn option(&self, n: usize) -> Option<(u16, u8, u8)> {
        self.entries.get(n).copied().flatten()
    }

    /// Is a critical option known to this receiver (RFC 8926 § 3.5)?
    pub fn knows(&self, class: u16, typ: OptType) -> bool {
        self.field(class, typ).is_some()
    }
}

fn parse_num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// A big-endian u32 at `at` (an IPv4 address), widened for the key; the
/// caller has checked the length.
fn be32(b: &[u8], at: usize) -> u64 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as u64
}

/// Fill `key` from a tenant Ethernet frame and the port it arrived on.
/// Never fails: a truncated header leaves the fields it would have set at 0.
pub fn extract(frame: &[u8], in_port: u32, key: &mut FlowKey) {
    *key = FlowKey::default();
    key.set(f::IN_PORT, in_port as u64);
    if frame.len() < 14 {
        return;
    }
    key.set(
        f::DL_DST,
        FlowKey::mac(frame[0..6].try_into().unwrap_or([0; 6])),
    );
    key.set(
        f::DL_SRC,
        FlowKey::mac(frame[6..12].try_into().unwrap_or([0; 6])),
    );
    let be16 = |at: usize| u16::from_be_bytes([frame[at], frame[at + 1]]);
    let mut et = be16(12);
    let mut at = 14;
    let mut first_tag = true;
    while (et == 0x8100 || et == 0x88a8) && frame.len() >= at + 4 {
        if first_tag {
            // OVS's vlan_tci: the outermost tag, CFI bit meaning "present".
            key.set(f::VLAN_TCI, (be16(at) | 0x1000) as u64);
            first_tag = false;
        }
        et = be16(at + 2);
        at += 4;
    }
    key.set(f::DL_TYPE, et as u64);
    let l3 = &frame[at..];
    let (proto, l4) = match et {
        0x0800 if l3.len() >= 20 => {
            key.set(f::NW_SRC, be32(l3, 12));
            key.set(f::NW_DST, be32(l3, 16));
            key.set(f::NW_PROTO, l3[9] as u64);
            key.set(f::NW_TOS, l3[1] as u64);
            let ihl = ((l3[0] & 0x0f) as usize) * 4;
            let later_fragment = u16::from_be_bytes([l3[6], l3[7]]) & 0x1fff != 0;
            (
                l3[9],
                if later_fragment || l3.len() < ihl {
                    &[][..]
                } else {
                    &l3[ihl..]
                },
            )
        }
        0x86dd if l3.len() >= 40 => {
            let a = |o: usize| u128::from_be_bytes(l3[o..o + 16].try_into().unwrap_or([0; 16]));
            key.set_ip6(f::IPV6_SRC_HI, f::IPV6_SRC_LO, a(8).into());
            key.set_ip6(f::IPV6_DST_HI, f::IPV6_DST_LO, a(24).into());
            key.set(f::NW_PROTO, l3[6] as u64);
            key.set(
                f::NW_TOS,
                ((u16::from_be_bytes([l3[0], l3[1]]) >> 4) & 0xff) as u64,
            );
            (l3[6], &l3[40..])
        }
        0x0806 if l3.len() >= 28 => {
            // OVS: nw_proto is the ARP opcode, nw_src/nw_dst the IPs.
            key.set(f::NW_PROTO, l3[7] as u64);
            key.set(f::NW_SRC, be32(l3, 14));
            key.set(f::NW_DST, be32(l3, 24));
            return;
        }
        _ => return,
    };
    match proto {
        6 | 17 | 132 if l4.len() >= 4 => {
            key.set(f::TP_SRC, u16::from_be_bytes([l4[0], l4[1]]) as u64);
            key.set(f::TP_DST, u16::from_be_bytes([l4[2], l4[3]]) as u64);
        }
        // OVS: ICMP type and code in tp_src and tp_dst.
        1 | 58 if l4.len() >= 2 => {
            key.set(f::TP_SRC, l4[0] as u64);
            key.set(f::TP_DST, l4[1] as u64);
        }
        _ => {}
    }
}

/// Add what a tunnel brought to `key`: tun_id, tun_src/tun_dst and the
/// Geneve options that `tlv` maps to tun_metadataN (first 4 bytes).
pub fn extract_tunnel(meta: &TunnelMetadata, tlv: &TlvMap, key: &mut FlowKey) {
    key.set(f::TUN_ID, meta.tun_id);
    match (meta.src, meta.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            key.set(f::TUN_FAMILY, 4);
            key.set(f::TUN_SRC, u32::from(s) as u64);
            key.set(f::TUN_DST, u32::from(d) as u64);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            key.set(f::TUN_FAMILY, 6);
            key.set_ip6(f::TUN_IPV6_SRC_HI, f::TUN_IPV6_SRC_LO, s);
            key.set_ip6(f::TUN_IPV6_DST_HI, f::TUN_IPV6_DST_LO, d);
        }
        _ => {}
    }
    for o in Options::new(meta.options.as_bytes()) {
        if let Some(n) = tlv.field(o.class(), o.opt_type()) {
            let d = o.data();
            let mut v = [0u8; 4];
            let k = d.len().min(4);
            v[4 - k..].copy_from_slice(&d[..k]);
            key.set(tun_metadata(n), u32::from_be_bytes(v) as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{parse_flow, NumericPorts};
    use tunlab_wire::geneve::{OptionRepr, OvnPorts, OVN_CLASS, OVN_TYPE};

    fn frame_vlan_udp() -> Vec<u8> {
        let mut f = vec![0u8; 14 + 4 + 20 + 8];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        f[14..16].copy_from_slice(&[0x20, 0x05]); // PCP 1, VID 5
        f[16..18].copy_from_slice(&[0x08, 0x00]);
        f[18] = 0x45;
        f[27] = 17;
        f[30..34].copy_from_slice(&[192, 168, 1, 1]);
        f[34..38].copy_from_slice(&[192, 168, 1, 2]);
        f[38..40].copy_from_slice(&2000u16.to_be_bytes());
        f[40..42].copy_from_slice(&1000u16.to_be_bytes());
        f
    }

    #[test]
    fn rules_match_extracted_keys() {
        let mut k = FlowKey::default();
        extract(&frame_vlan_udp(), 1, &mut k);
        for s in [
            "in_port=1,dl_vlan=5 actions=pop_vlan,output:2",
            "udp,nw_src=192.168.1.0/24,tp_dst=1000 actions=drop",
            "dl_src=02:00:00:00:00:01,dl_vlan_pcp=1 actions=drop",
        ] {
            assert!(parse_flow(s, &NumericPorts).unwrap().m.matches(&k), "{s}");
        }
        for s in [
            "in_port=2 actions=drop",
            "dl_vlan=6 actions=drop",
            "tcp actions=drop",
            "dl_vlan=0xffff actions=drop",
        ] {
            assert!(!parse_flow(s, &NumericPorts).unwrap().m.matches(&k), "{s}");
        }
    }

    #[test]
    fn tunnel_fields_and_ovn_option() {
        let mut tlv = TlvMap::default();
        tlv.add("{class=0x0102,type=0x80,len=4}->tun_metadata0")
            .unwrap();
        assert!(tlv.knows(OVN_CLASS, OptType(OVN_TYPE)));
        let mut meta = TunnelMetadata {
            tun_id: 6,
            src: "172.17.2.163".parse().unwrap(),
            dst: "172.17.2.60".parse().unwrap(),
            ..TunnelMetadata::default()
        };
        meta.options
            .push(OptionRepr {
                class: OVN_CLASS,
                opt_type: OptType(OVN_TYPE),
                data: &OvnPorts::new(3, 2).unwrap().data(),
            })
            .unwrap();
        let mut k = FlowKey::default();
        extract(&frame_vlan_udp(), 1, &mut k);
        extract_tunnel(&meta, &tlv, &mut k);
        let r = parse_flow(
            "in_port=1,tun_id=6,tun_src=172.17.2.163,tun_metadata0=0x30002 actions=output:2",
            &NumericPorts,
        )
        .unwrap();
        assert!(r.m.matches(&k));
        let r = parse_flow("tun_metadata0=0x30003 actions=output:2", &NumericPorts).unwrap();
        assert!(!r.m.matches(&k));
        let r = parse_flow("tun_ipv6_src=::1 actions=output:2", &NumericPorts).unwrap();
        assert!(!r.m.matches(&k));
    }

    #[test]
    fn tlv_map_errors() {
        let mut t = TlvMap::default();
        assert!(t
            .add("{class=0x0102,type=0x80,len=8}->tun_metadata0")
            .unwrap_err()
            .msg
            .contains("4 bytes"));
        assert!(t
            .add("{class=0x0102,type=0x80,len=4}->tun_metadata8")
            .unwrap_err()
            .msg
            .contains("tun_metadata0..tun_metadata7"));
        assert!(t
            .add("{class=0x0102,len=4}->tun_metadata0")
            .unwrap_err()
            .msg
            .contains("all needed"));
        t.add("{class=0x0102,type=0x80,len=4}->tun_metadata0,{class=0x0105,type=0x01,len=4}->tun_metadata1").unwrap();
        assert!(t
            .add("{class=0x0103,type=0x80,len=4}->tun_metadata0")
            .unwrap_err()
            .msg
            .contains("already mapped"));
        assert_eq!(t.field(0x0105, OptType(1)), Some(1));
    }

    #[test]
    fn short_frames_never_panic() {
        let f = frame_vlan_udp();
        let mut k = FlowKey::default();
        for n in 0..f.len() {
            extract(&f[..n], 3, &mut k);
            assert_eq!(k.get(f::IN_PORT), 3);
        }
    }
}
