//! From a packet to its flow key: the tenant frame's headers, the port it
//! came in on and, for tunnelled packets, the tunnel metadata with Geneve
//! options mapped to `tun_metadataN` by the TLV map.

use crate::key::{f, tun_metadata, FlowKey, FRAG_ANY, FRAG_LATER, TUN_METADATA_FIELDS};
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

/// The MAC address at `at`, or 0 if `b` ends before it does.
fn mac_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 6)
        .and_then(|m| m.try_into().ok())
        .map_or(0, FlowKey::mac)
}

/// The IPv6 extension header that is a fragment header.
const IPPROTO_FRAGMENT: u8 = 44;

/// Fill `key` from a tenant Ethernet frame and the port it arrived on.
/// Never fails: a truncated header leaves the fields it would have set at 0.
///
/// Words 0 to [`crate::key::DP_WORDS`] are read as the kernel datapath's
/// `extract_frame` (bpf/key.h) reads them, but for the protocol and ports
/// of an IPv6 packet with a fragment header, which OVS takes from behind
/// that header and the kernel datapath does not (the switch keeps flows
/// that depend on them out of the kernel).
pub fn extract(frame: &[u8], in_port: u32, key: &mut FlowKey) {
    *key = FlowKey::default();
    key.set(f::IN_PORT, in_port as u64);
    if frame.len() < 14 {
        return;
    }
    key.set(f::DL_DST, mac_at(frame, 0));
    key.set(f::DL_SRC, mac_at(frame, 6));
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
            key.set(f::NW_TTL, l3[8] as u64);
            let ihl = ((l3[0] & 0x0f) as usize) * 4;
            // [RFC 791 § 3.1]: the MF flag (0x2000), then the offset.
            let frag = u16::from_be_bytes([l3[6], l3[7]]);
            let later_fragment = frag & 0x1fff != 0;
            if frag & 0x3fff != 0 {
                let later = if later_fragment { FRAG_LATER } else { 0 };
                key.set(f::NW_FRAG, FRAG_ANY | later);
            }
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
            key.set(
                f::NW_TOS,
                ((u16::from_be_bytes([l3[0], l3[1]]) >> 4) & 0xff) as u64,
            );
            key.set(f::IPV6_LABEL, be32(l3, 0) & 0xf_ffff);
            key.set(f::NW_TTL, l3[7] as u64);
            let (proto, l4) = ipv6_fragment(l3, key);
            key.set(f::NW_PROTO, proto as u64);
            (proto, l4)
        }
        0x0806 if l3.len() >= 28 => {
            // OVS: nw_proto is the ARP opcode, nw_src/nw_dst the IPs.
            key.set(f::NW_PROTO, l3[7] as u64);
            key.set(f::NW_SRC, be32(l3, 14));
            key.set(f::NW_DST, be32(l3, 24));
            key.set(f::ARP_SHA, mac_at(l3, 8));
            key.set(f::ARP_THA, mac_at(l3, 18));
            return;
        }
        _ => return,
    };
    match proto {
        6 | 17 | 132 if l4.len() >= 4 => {
            key.set(f::TP_SRC, u16::from_be_bytes([l4[0], l4[1]]) as u64);
            key.set(f::TP_DST, u16::from_be_bytes([l4[2], l4[3]]) as u64);
            // OVS reads the flags of a whole fixed TCP header only; the
            // ports, as the kernel datapath does, of any 4 bytes.
            if proto == 6 && l4.len() >= 20 {
                let flags = u16::from_be_bytes([l4[12], l4[13]]) & 0x0fff;
                key.set(f::TCP_FLAGS, flags as u64);
            }
        }
        // OVS: ICMP type and code in tp_src and tp_dst.
        1 | 58 if l4.len() >= 2 => {
            key.set(f::TP_SRC, l4[0] as u64);
            key.set(f::TP_DST, l4[1] as u64);
            if proto == 58 && matches!(l4[0], 135 | 136) && l4[1] == 0 {
                neighbour_discovery(l4, key);
            }
        }
        _ => {}
    }
}

/// An IPv6 packet's protocol and L4 header, past a fragment header right
/// after the fixed one (the only extension header read), with `nw_frag`
/// set as OVS's `parse_ipv6_ext_hdrs` sets it: a first fragment has the
/// protocol and ports behind the fragment header, a later one has
/// nw_proto 44 and no L4 fields. A truncated fragment header leaves
/// nw_proto 44 and no L4 fields either.
fn ipv6_fragment<'a>(l3: &'a [u8], key: &mut FlowKey) -> (u8, &'a [u8]) {
    let proto = l3[6];
    if proto != IPPROTO_FRAGMENT {
        return (proto, &l3[40..]);
    }
    let Some(fh) = l3.get(40..48) else {
        return (proto, &[]);
    };
    // [RFC 8200 § 4.5]: the offset in the top 13 bits, then 2 reserved
    // bits and M. All zero: an atomic fragment, not a fragment to OVS.
    let offlg = u16::from_be_bytes([fh[2], fh[3]]);
    if offlg & 0xfff8 != 0 {
        key.set(f::NW_FRAG, FRAG_ANY | FRAG_LATER);
        return (proto, &[]);
    }
    if offlg != 0 {
        key.set(f::NW_FRAG, FRAG_ANY);
    }
    (fh[0], &l3[48..])
}

/// An ICMPv6 neighbour solicitation or advertisement [RFC 4861 § 4.3,
/// § 4.4], as OVS's `parse_icmpv6` reads it: the target address after the
/// 4 reserved (flag) bytes, then the options: a source link-layer address
/// to arp_sha, a target link-layer address to arp_tha. A second option of
/// the same kind makes the packet invalid to OVS: no target, no addresses.
fn neighbour_discovery(icmp: &[u8], key: &mut FlowKey) {
    let Some(target) = icmp.get(8..24).and_then(|t| <[u8; 16]>::try_from(t).ok()) else {
        return;
    };
    let (mut sll, mut tll) = (0, 0);
    let mut opts = &icmp[24..];
    // Each option: type, length in units of 8 bytes, data (RFC 4861 § 4.6).
    while opts.len() >= 8 {
        let len = opts[1] as usize * 8;
        if len == 0 || len > opts.len() {
            break;
        }
        // An Ethernet address option is 8 bytes; others are passed over.
        let seen = match (opts[0], len) {
            (1, 8) => Some(&mut sll),
            (2, 8) => Some(&mut tll),
            _ => None,
        };
        if let Some(addr) = seen {
            if *addr != 0 {
                return;
            }
            *addr = mac_at(opts, 2);
        }
        opts = &opts[len..];
    }
    key.set_ip6(
        f::ND_TARGET_HI,
        f::ND_TARGET_LO,
        u128::from_be_bytes(target).into(),
    );
    key.set(f::ARP_SHA, sll);
    key.set(f::ARP_THA, tll);
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
    use crate::key::FieldPos;
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

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    /// An Ethernet header from A to B of type `et`, then `l3`.
    fn eth(et: u16, l3: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&B);
        f.extend_from_slice(&A);
        f.extend_from_slice(&et.to_be_bytes());
        f.extend_from_slice(l3);
        f
    }

    /// An ARP reply from 10.0.0.1 at A to 10.0.0.2 at B.
    fn frame_arp() -> Vec<u8> {
        let mut arp = vec![0, 1, 0x08, 0x00, 6, 4, 0, 2];
        arp.extend_from_slice(&A);
        arp.extend_from_slice(&[10, 0, 0, 1]);
        arp.extend_from_slice(&B);
        arp.extend_from_slice(&[10, 0, 0, 2]);
        eth(0x0806, &arp)
    }

    /// IPv4 from 10.0.0.1 to 10.0.0.2, TTL 64, with `frag` as its flags
    /// and fragment offset, carrying `l4` of protocol `proto`.
    fn frame_ipv4(proto: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
        let mut ip = vec![0x45, 0x10, 0, 0, 0x12, 0x34, 0, 0, 64, proto, 0, 0];
        ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        ip[6..8].copy_from_slice(&frag.to_be_bytes());
        ip.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        ip.extend_from_slice(l4);
        eth(0x0800, &ip)
    }

    /// IPv6 from fe80::a to ff02::1:ff00:b, traffic class 0xb8, flow label
    /// 0x12345, hop limit 255, next header `nh`, then `rest`.
    fn frame_ipv6(nh: u8, rest: &[u8]) -> Vec<u8> {
        let mut ip = ((6u32 << 28) | (0xb8 << 20) | 0x1_2345)
            .to_be_bytes()
            .to_vec();
        ip.extend_from_slice(&(rest.len() as u16).to_be_bytes());
        ip.extend_from_slice(&[nh, 255]);
        ip.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xa]);
        ip.extend_from_slice(&[0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0xb]);
        ip.extend_from_slice(rest);
        eth(0x86dd, &ip)
    }

    /// A UDP header from port 2000 to 53 and 8 bytes of payload.
    fn udp() -> Vec<u8> {
        vec![0x07, 0xd0, 0, 53, 0, 16, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]
    }

    /// An IPv6 fragment header: next header 17, `offlg` (offset << 3 | M).
    fn fragment_header(offlg: u16) -> Vec<u8> {
        let mut h = vec![17, 0];
        h.extend_from_slice(&offlg.to_be_bytes());
        h.extend_from_slice(&0x0102_0304u32.to_be_bytes());
        h
    }

    const TARGET: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xb];

    /// An ICMPv6 neighbour solicitation (135) or advertisement (136) for
    /// TARGET, with the flags word `flags` and then `options`.
    fn frame_nd(icmp_type: u8, flags: u32, options: &[u8]) -> Vec<u8> {
        let mut icmp = vec![icmp_type, 0, 0, 0];
        icmp.extend_from_slice(&flags.to_be_bytes());
        icmp.extend_from_slice(&TARGET);
        icmp.extend_from_slice(options);
        frame_ipv6(58, &icmp)
    }

    /// A link-layer address option: 1 source, 2 target.
    fn lla(opt_type: u8, mac: [u8; 6]) -> Vec<u8> {
        let mut o = vec![opt_type, 1];
        o.extend_from_slice(&mac);
        o
    }

    fn key_of(frame: &[u8]) -> FlowKey {
        let mut k = FlowKey::default();
        extract(frame, 1, &mut k);
        k
    }

    #[test]
    fn arp_keeps_the_opcode_addresses_and_hardware_addresses() {
        let k = key_of(&frame_arp());
        assert_eq!(k.get(f::DL_TYPE), 0x0806);
        assert_eq!(k.get(f::NW_PROTO), 2, "the opcode");
        assert_eq!(k.get(f::NW_SRC), 0x0a00_0001);
        assert_eq!(k.get(f::NW_DST), 0x0a00_0002);
        assert_eq!(k.get(f::ARP_SHA), FlowKey::mac(A));
        assert_eq!(k.get(f::ARP_THA), FlowKey::mac(B));
        assert_eq!(k.get(f::NW_TTL), 0);
    }

    #[test]
    fn a_neighbour_solicitation_keeps_its_target_and_source_address() {
        let k = key_of(&frame_nd(135, 0, &lla(1, A)));
        assert_eq!((k.get(f::NW_PROTO), k.get(f::ICMP_TYPE)), (58, 135));
        assert_eq!(
            k.ip6(f::ND_TARGET_HI, f::ND_TARGET_LO),
            "fe80::b".parse::<std::net::Ipv6Addr>().unwrap()
        );
        assert_eq!(k.get(f::ARP_SHA), FlowKey::mac(A));
        assert_eq!(k.get(f::ARP_THA), 0);
    }

    #[test]
    fn a_neighbour_advertisement_keeps_its_target_and_target_address() {
        // A nonce option (RFC 3971, 8 bytes) first: passed over.
        let mut opts = vec![14, 1, 1, 2, 3, 4, 5, 6];
        opts.extend(lla(2, B));
        let k = key_of(&frame_nd(136, 0x6000_0000, &opts));
        assert_eq!(k.get(f::ICMP_TYPE), 136);
        assert_eq!(k.get(f::ND_TARGET_LO), 0xb);
        assert_eq!(k.get(f::ND_TARGET_HI), 0xfe80_0000_0000_0000);
        assert_eq!(k.get(f::ARP_THA), FlowKey::mac(B));
        assert_eq!(k.get(f::ARP_SHA), 0);
    }

    /// The options as OVS reads them: a zero length ends them, a second
    /// address of a kind makes the packet invalid (no target either), and
    /// other ICMPv6 messages or codes have no ND fields.
    #[test]
    fn neighbour_discovery_options_stop_where_ovs_stops() {
        let mut opts = vec![14, 0, 0, 0, 0, 0, 0, 0];
        opts.extend(lla(1, A));
        let k = key_of(&frame_nd(135, 0, &opts));
        assert_eq!((k.get(f::ND_TARGET_LO), k.get(f::ARP_SHA)), (0xb, 0));
        let mut twice = lla(1, A);
        twice.extend(lla(1, B));
        let k = key_of(&frame_nd(135, 0, &twice));
        assert_eq!((k.get(f::ND_TARGET_LO), k.get(f::ARP_SHA)), (0, 0));
        let mut echo = frame_nd(128, 0, &lla(1, A));
        let k = key_of(&echo);
        assert_eq!((k.get(f::ND_TARGET_LO), k.get(f::ARP_SHA)), (0, 0));
        echo[14 + 40] = 135;
        echo[14 + 40 + 1] = 1;
        let k = key_of(&echo);
        assert_eq!((k.get(f::ND_TARGET_LO), k.get(f::ARP_SHA)), (0, 0));
    }

    #[test]
    fn ipv4_fragments_first_and_later() {
        let k = key_of(&frame_ipv4(17, 0, &udp()));
        assert_eq!((k.get(f::NW_FRAG), k.get(f::TP_DST)), (0, 53));
        // More fragments, offset 0: the first, with its ports.
        let k = key_of(&frame_ipv4(17, 0x2000, &udp()));
        assert_eq!(k.get(f::NW_FRAG), FRAG_ANY);
        assert_eq!((k.get(f::TP_SRC), k.get(f::TP_DST)), (2000, 53));
        // Offset 185 (1480 bytes), with or without more: no ports.
        for frag in [0x2000 | 185, 185] {
            let k = key_of(&frame_ipv4(17, frag, &udp()));
            assert_eq!(k.get(f::NW_FRAG), FRAG_ANY | FRAG_LATER, "{frag:#x}");
            assert_eq!(k.get(f::NW_PROTO), 17);
            assert_eq!((k.get(f::TP_SRC), k.get(f::TP_DST)), (0, 0));
        }
        // Don't-fragment is not a fragment.
        let k = key_of(&frame_ipv4(17, 0x4000, &udp()));
        assert_eq!(k.get(f::NW_FRAG), 0);
    }

    #[test]
    fn ipv6_fragments_first_and_later() {
        let first = [fragment_header(1), udp()].concat();
        let k = key_of(&frame_ipv6(44, &first));
        assert_eq!(k.get(f::NW_FRAG), FRAG_ANY);
        assert_eq!(k.get(f::NW_PROTO), 17, "the protocol behind the header");
        assert_eq!((k.get(f::TP_SRC), k.get(f::TP_DST)), (2000, 53));
        let later = [fragment_header(185 << 3), udp()].concat();
        let k = key_of(&frame_ipv6(44, &later));
        assert_eq!(k.get(f::NW_FRAG), FRAG_ANY | FRAG_LATER);
        assert_eq!(k.get(f::NW_PROTO), 44, "OVS keeps the fragment header's");
        assert_eq!((k.get(f::TP_SRC), k.get(f::TP_DST)), (0, 0));
        // An atomic fragment (offset 0, no more): not a fragment to OVS.
        let atomic = [fragment_header(0), udp()].concat();
        let k = key_of(&frame_ipv6(44, &atomic));
        assert_eq!((k.get(f::NW_FRAG), k.get(f::NW_PROTO)), (0, 17));
        assert_eq!(k.get(f::TP_DST), 53);
        // A fragment header cut short: as the kernel datapath reads it.
        let k = key_of(&frame_ipv6(44, &fragment_header(1)[..7]));
        assert_eq!((k.get(f::NW_FRAG), k.get(f::NW_PROTO)), (0, 44));
    }

    #[test]
    fn tcp_flags_are_the_low_12_bits() {
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
        // Data offset 5, NS, then CWR, ECE, ACK and SYN.
        tcp[12] = 0x51;
        tcp[13] = 0xd2;
        let k = key_of(&frame_ipv4(6, 0, &tcp));
        assert_eq!(k.get(f::TCP_FLAGS), 0x1d2);
        assert_eq!((k.get(f::TP_SRC), k.get(f::TP_DST)), (40000, 80));
        // Not TCP: no flags, whatever the bytes.
        let k = key_of(&frame_ipv4(17, 0, &tcp));
        assert_eq!(k.get(f::TCP_FLAGS), 0);
        // A TCP header cut short: ports, no flags.
        let k = key_of(&frame_ipv4(6, 0, &tcp[..19]));
        assert_eq!((k.get(f::TP_DST), k.get(f::TCP_FLAGS)), (80, 0));
    }

    #[test]
    fn ttl_hop_limit_and_flow_label() {
        let k = key_of(&frame_ipv4(17, 0, &udp()));
        assert_eq!((k.get(f::NW_TTL), k.get(f::IPV6_LABEL)), (64, 0));
        let k = key_of(&frame_ipv6(17, &udp()));
        assert_eq!(k.get(f::NW_TTL), 255);
        assert_eq!(k.get(f::IPV6_LABEL), 0x1_2345);
        assert_eq!(k.get(f::NW_TOS), 0xb8, "the label leaves the class alone");
        assert_eq!((k.get(f::NW_FRAG), k.get(f::TP_DST)), (0, 53));
    }

    /// Every frame the tests build, whole.
    fn frames() -> Vec<Vec<u8>> {
        let mut tcp = vec![0u8; 20];
        tcp[12..14].copy_from_slice(&[0x50, 0x12]);
        let mut na_opts = lla(2, B);
        na_opts.extend(lla(1, A));
        vec![
            frame_vlan_udp(),
            frame_arp(),
            frame_ipv4(6, 0, &tcp),
            frame_ipv4(17, 0x2000, &udp()),
            frame_ipv4(17, 185, &udp()),
            frame_ipv6(17, &udp()),
            frame_ipv6(44, &[fragment_header(1), udp()].concat()),
            frame_ipv6(44, &[fragment_header(185 << 3), udp()].concat()),
            frame_nd(135, 0, &lla(1, A)),
            frame_nd(136, 0x6000_0000, &na_opts),
        ]
    }

    /// The fields only user space extracts.
    const NEW: [FieldPos; 9] = [
        f::ARP_SHA,
        f::NW_TTL,
        f::NW_FRAG,
        f::ARP_THA,
        f::TCP_FLAGS,
        f::ND_TARGET_HI,
        f::ND_TARGET_LO,
        f::IPV6_LABEL,
        f::PKT_MARK,
    ];

    /// Every frame cut short anywhere: no panic, and each field only user
    /// space extracts is either the whole frame's or 0 (never half read).
    #[test]
    fn short_frames_never_panic() {
        let mut k = FlowKey::default();
        for whole in frames() {
            let full = key_of(&whole);
            for n in 0..whole.len() {
                extract(&whole[..n], 3, &mut k);
                assert_eq!(k.get(f::IN_PORT), 3);
                for p in NEW {
                    let v = k.get(p);
                    assert!(
                        v == 0 || v == full.get(p),
                        "{p:?} of {n} bytes of {whole:x?}"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        /// Any bytes at any place of the test frames, cut anywhere: no
        /// panic.
        #[test]
        fn mangled_frames_never_panic(
            frame in proptest::sample::select(frames()),
            edits in proptest::collection::vec((0usize..200, proptest::prelude::any::<u8>()), 0..8),
            cut in 0usize..200,
        ) {
            let mut frame = frame;
            for (at, b) in edits {
                let n = frame.len();
                frame[at % n] = b;
            }
            frame.truncate(cut);
            let mut k = FlowKey::default();
            extract(&frame, 5, &mut k);
            proptest::prop_assert_eq!(k.get(f::IN_PORT), 5);
        }
    }
}
