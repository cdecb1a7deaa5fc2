//! A rule printed back in ovs-ofctl's syntax, fields in the order and the
//! forms ovs-ofctl writes them.

use super::text::{c_hex, mac, port_text, v4, v6};
use super::*;
use crate::field::{self, Field, REGS, TUN_METADATA};

/// Print a rule back in ovs-ofctl syntax (what `dump-flows` shows after
/// the counters). Parsing the output gives back the same rule.
pub fn format_flow(r: &FlowRule, ports: &dyn PortNames) -> String {
    let mut s = String::new();
    if r.table != 0 {
        let _ = write!(s, "table={},", r.table);
    }
    if r.cookie != 0 {
        let _ = write!(s, "cookie={:#x},", r.cookie);
    }
    if r.idle_timeout != 0 {
        let _ = write!(s, "idle_timeout={},", r.idle_timeout);
    }
    if r.hard_timeout != 0 {
        let _ = write!(s, "hard_timeout={},", r.hard_timeout);
    }
    if r.send_flow_rem {
        s.push_str("send_flow_rem,");
    }
    if r.priority != DEFAULT_PRIORITY {
        let _ = write!(s, "priority={},", r.priority);
    }
    let _ = write!(s, "{}", MatchDisplay(&r.m, ports));
    if s.ends_with(',') {
        s.pop();
    }
    s.push_str(if s.is_empty() {
        "actions="
    } else {
        " actions="
    });
    if r.actions.is_empty() {
        s.push_str("drop");
    }
    for (i, a) in r.actions.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        super::actions::format_action(&mut s, a, ports);
    }
    s
}

/// A match as `ovs-ofctl` prints one (OVS's `match_format`), without a
/// priority.
pub fn format_match(m: &Match, ports: &dyn PortNames) -> String {
    let mut s = MatchDisplay(m, ports).to_string();
    if s.ends_with(',') {
        s.pop();
    }
    s
}

/// Actions as `ovs-ofctl` prints them (`drop` for none).
pub fn format_actions(actions: &[Action], ports: &dyn PortNames) -> String {
    if actions.is_empty() {
        return "drop".into();
    }
    let mut s = String::new();
    for (i, a) in actions.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        super::actions::format_action(&mut s, a, ports);
    }
    s
}

/// A packet's flow key as OVS's `flow_format` prints it (the `Flow:` and
/// `Final flow:` lines of `ofproto/trace`): the fields its headers have,
/// zero or not, and the pipeline's only where not zero.
pub fn format_packet(key: &FlowKey, ports: &dyn PortNames) -> String {
    let mut m = Match {
        value: *key,
        mask: FlowKey::default(),
    };
    for fl in packet_fields(key) {
        let old = fl.get(&m.mask);
        fl.set(&mut m.mask, old | fl.all_ones());
    }
    let (et, proto) = (key.get(f::DL_TYPE), key.get(f::NW_PROTO));
    let later = key.get(f::NW_FRAG) & crate::key::FRAG_LATER != 0;
    if !later && ((et == 0x0800 && proto == 1) || (et == 0x86dd && proto == 58)) {
        // ICMP's type and code are tp_src and tp_dst, whole.
        m.mask.set(f::TP_SRC, f::TP_SRC.max());
        m.mask.set(f::TP_DST, f::TP_DST.max());
    }
    let pipeline = [
        &field::RECIRC_ID,
        &field::METADATA,
        &field::PKT_MARK,
        &field::CT_STATE,
        &field::CT_ZONE,
        &field::CT_MARK,
        &field::CT_LABEL,
    ];
    // Options only of a tunnel the packet has (OVS's rule again).
    let options: &[&Field] = if key.get(f::TUN_FAMILY) != 0 {
        &TUN_METADATA
    } else {
        &[]
    };
    for fl in pipeline
        .into_iter()
        .chain(REGS)
        .chain(options.iter().copied())
    {
        if fl.get(key) != 0 {
            fl.set(&mut m.mask, fl.all_ones());
        }
    }
    format_match(&m, ports)
}

/// The header fields a packet of `key`'s protocols has (OVS's
/// `flow_wildcards_init_for_packet`).
fn packet_fields(key: &FlowKey) -> Vec<&'static Field> {
    let mut out = vec![
        &field::IN_PORT,
        &field::ETH_SRC,
        &field::ETH_DST,
        &field::ETH_TYPE,
        &field::VLAN_TCI,
    ];
    match key.get(f::TUN_FAMILY) {
        4 => out.extend([&field::TUN_ID, &field::TUN_SRC, &field::TUN_DST]),
        6 => out.extend([&field::TUN_ID, &field::TUN_IPV6_SRC, &field::TUN_IPV6_DST]),
        // A tunnel id set with no tunnel yet (OVS's
        // flow_wildcards_init_for_packet).
        _ if key.get(f::TUN_ID) != 0 => out.push(&field::TUN_ID),
        _ => {}
    }
    let (et, proto) = (key.get(f::DL_TYPE), key.get(f::NW_PROTO));
    match et {
        0x0800 => out.extend([&field::IP_SRC, &field::IP_DST]),
        0x86dd => out.extend([&field::IPV6_SRC, &field::IPV6_DST, &field::IPV6_LABEL]),
        0x0806 | 0x8035 => out.extend([
            &field::ARP_OP,
            &field::ARP_SPA,
            &field::ARP_TPA,
            &field::ARP_SHA,
            &field::ARP_THA,
        ]),
        _ => {}
    }
    if et != 0x0800 && et != 0x86dd {
        return out;
    }
    out.extend([
        &field::NW_PROTO,
        &field::NW_TOS,
        &field::NW_ECN,
        &field::NW_TTL,
        &field::IP_FRAG,
    ]);
    if key.get(f::NW_FRAG) & crate::key::FRAG_LATER != 0 {
        return out;
    }
    match proto {
        6 => out.extend([&field::TCP_SRC, &field::TCP_DST, &field::TCP_FLAGS]),
        17 | 132 => out.extend([&field::TCP_SRC, &field::TCP_DST]),
        // Neighbour discovery: both link-layer addresses, whichever
        // message it is (OVS's `flow_wildcards_init_for_packet`).
        58 if et == 0x86dd
            && key.get(f::TP_DST) == 0
            && matches!(key.get(f::TP_SRC), 135 | 136) =>
        {
            out.extend([&field::ND_TARGET, &field::ND_SLL, &field::ND_TLL])
        }
        _ => {}
    }
    out
}

struct MatchDisplay<'a>(&'a Match, &'a dyn PortNames);

impl fmt::Display for MatchDisplay<'_> {
    /// The fields in the order and forms of OVS's `match_format`, so that
    /// a rule reads as `ovs-ofctl dump-flows` prints it.
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let skip = self.metadata(out)?;
        self.tunnel(out)?;
        self.l2(out, skip.0)?;
        self.l3(out, skip.1)?;
        self.l4(out)
    }
}

/// How a match prints its fields: present or not, value, mask, and the
/// forms ovs-ofctl writes numbers and addresses in.
impl MatchDisplay<'_> {
    fn val(&self, fl: &Field) -> u128 {
        fl.get(&self.0.value)
    }

    fn msk(&self, fl: &Field) -> u128 {
        fl.get(&self.0.mask)
    }

    fn raw(&self, p: FieldPos) -> (u64, u64) {
        (self.0.value.get(p), self.0.mask.get(p))
    }

    /// `name=0xV,` or `name=0xV/0xM,` (OVS's `format_uint32_masked` and
    /// `format_be64_masked`).
    fn hex(&self, out: &mut fmt::Formatter<'_>, name: &str, fl: &Field) -> fmt::Result {
        let (v, m) = (self.val(fl), self.msk(fl));
        if m == 0 {
            return Ok(());
        }
        write!(out, "{name}={}", c_hex(v))?;
        if m != fl.all_ones() {
            write!(out, "/{}", c_hex(m))?;
        }
        write!(out, ",")
    }

    /// A 16-bit field as `format_be16_masked`: decimal when exact, hex
    /// with its mask.
    fn be16(&self, out: &mut fmt::Formatter<'_>, name: &str, p: FieldPos) -> fmt::Result {
        let (v, m) = self.raw(p);
        match m {
            0 => Ok(()),
            0xffff => write!(out, "{name}={v},"),
            _ => write!(out, "{name}={v:#x}/{m:#x},"),
        }
    }

    fn ip4(&self, out: &mut fmt::Formatter<'_>, name: &str, p: FieldPos) -> fmt::Result {
        let (v, m) = self.raw(p);
        if m != 0 {
            write!(out, "{name}={},", v4(v, m))?;
        }
        Ok(())
    }

    fn ip6(&self, out: &mut fmt::Formatter<'_>, fl: &Field) -> fmt::Result {
        let name = fl.name;
        let (v, m) = (self.val(fl), self.msk(fl));
        if m != 0 {
            write!(out, "{name}={},", v6(v, m))?;
        }
        Ok(())
    }

    fn eth(&self, out: &mut fmt::Formatter<'_>, name: &str, p: FieldPos) -> fmt::Result {
        let (v, m) = self.raw(p);
        match m {
            0 => Ok(()),
            0xffff_ffff_ffff => write!(out, "{name}={},", mac(v)),
            _ => write!(out, "{name}={}/{},", mac(v), mac(m)),
        }
    }

    /// The pipeline's fields, conntrack's, and the protocol shorthand;
    /// returns whether the shorthand stood for dl_type and nw_proto.
    fn metadata(&self, out: &mut fmt::Formatter<'_>) -> Result<(bool, bool), fmt::Error> {
        self.hex(out, "pkt_mark", &field::PKT_MARK)?;
        self.hex(out, "recirc_id", &field::RECIRC_ID)?;
        self.hex(out, "dp_hash", &field::DP_HASH)?;
        let (v, m) = self.raw(f::CONJ_ID);
        if m != 0 {
            write!(out, "conj_id={v},")?;
        }
        let (v, m) = self.raw(f::CT_STATE);
        // A packet's whole ct_state (the field's 32 bits) is its 8 flags.
        let m = if m == 0xffff_ffff { 0xff } else { m };
        if m != 0 {
            write!(
                out,
                "ct_state={},",
                flags(v, m, 0xff, field::CT_STATE_FLAGS)
            )?;
        }
        let (v, m) = self.raw(f::CT_ZONE);
        match m {
            0 => {}
            0xffff => write!(out, "ct_zone={v},")?,
            _ => write!(out, "ct_zone={v:#x}/{m:#x},")?,
        }
        self.hex(out, "ct_mark", &field::CT_MARK)?;
        self.hex(out, "ct_label", &field::CT_LABEL)?;
        self.ip4(out, "ct_nw_src", f::CT_NW_SRC)?;
        self.ip6(out, &field::CT_IPV6_SRC)?;
        self.ip4(out, "ct_nw_dst", f::CT_NW_DST)?;
        self.ip6(out, &field::CT_IPV6_DST)?;
        let (v, m) = self.raw(f::CT_NW_PROTO);
        if m != 0 {
            write!(out, "ct_nw_proto={v},")?;
            self.be16(out, "ct_tp_src", f::CT_TP_SRC)?;
            self.be16(out, "ct_tp_dst", f::CT_TP_DST)?;
        }
        // OVS's match_format: a match on recirc_id is a megaflow's, whose
        // packet type it names.
        if self.raw(f::RECIRC_ID).1 != 0 {
            write!(out, "eth,")?;
        }
        let (mut skip_type, mut skip_proto) = (false, false);
        let (et, et_m) = self.raw(f::DL_TYPE);
        let (proto, proto_m) = self.raw(f::NW_PROTO);
        if et_m != 0 {
            let named = SHORTHANDS
                .iter()
                .find(|(_, e, p)| *e as u64 == et && proto_m != 0 && proto == *p as u64 && *p != 0);
            let plain = SHORTHANDS
                .iter()
                .find(|(_, e, p)| *e as u64 == et && *p == 0);
            if let Some((name, _, _)) = named {
                write!(out, "{name},")?;
                (skip_type, skip_proto) = (true, true);
            } else if let Some((name, _, _)) = plain {
                write!(out, "{name},")?;
                skip_type = true;
            }
        }
        for fl in REGS {
            self.hex(out, fl.name, fl)?;
        }
        Ok((skip_type, skip_proto))
    }

    /// The tunnel's id, addresses and metadata, then metadata and the
    /// in-port, as OVS places them.
    fn tunnel(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.hex(out, "tun_id", &field::TUN_ID)?;
        self.ip4(out, "tun_src", f::TUN_SRC)?;
        self.ip4(out, "tun_dst", f::TUN_DST)?;
        self.ip6(out, &field::TUN_IPV6_SRC)?;
        self.ip6(out, &field::TUN_IPV6_DST)?;
        for fl in TUN_METADATA {
            self.hex(out, fl.name, fl)?;
        }
        self.hex(out, "metadata", &field::METADATA)?;
        let (v, m) = self.raw(f::IN_PORT);
        if m != 0 {
            write!(out, "in_port={},", port_text(v as u32, self.1))?;
        }
        Ok(())
    }

    /// The VLAN, the Ethernet addresses, and dl_type where no shorthand
    /// said it.
    fn l2(&self, out: &mut fmt::Formatter<'_>, skip_type: bool) -> fmt::Result {
        let (v, mk) = self.raw(f::VLAN_TCI);
        if mk != 0 {
            let (vid_m, pcp_m) = (mk & 0x0fff, mk & 0xe000);
            if mk & 0x1000 != 0
                && v & 0x1000 != 0
                && (vid_m == 0 || vid_m == 0x0fff)
                && (pcp_m == 0 || pcp_m == 0xe000)
                && (vid_m != 0 || pcp_m != 0)
            {
                if vid_m != 0 {
                    write!(out, "dl_vlan={},", v & 0xfff)?;
                }
                if pcp_m != 0 {
                    write!(out, "dl_vlan_pcp={},", v >> 13)?;
                }
            } else if mk == 0xffff {
                write!(out, "vlan_tci={v:#06x},")?;
            } else {
                write!(out, "vlan_tci={v:#06x}/{mk:#06x},")?;
            }
        }
        self.eth(out, "dl_src", f::DL_SRC)?;
        self.eth(out, "dl_dst", f::DL_DST)?;
        let (et, m) = self.raw(f::DL_TYPE);
        if !skip_type && m != 0 {
            write!(out, "dl_type={et:#06x},")?;
        }
        Ok(())
    }

    /// Addresses, protocol, TOS, TTL and fragments.
    fn l3(&self, out: &mut fmt::Formatter<'_>, skip_proto: bool) -> fmt::Result {
        let et = self.0.value.get(f::DL_TYPE);
        let arp = et == 0x0806 || et == 0x8035;
        if et == 0x86dd {
            self.ip6(out, &field::IPV6_SRC)?;
            self.ip6(out, &field::IPV6_DST)?;
            let (v, m) = self.raw(f::IPV6_LABEL);
            match m {
                0 => {}
                0xfffff => write!(out, "ipv6_label={v:#07x},")?,
                _ => write!(out, "ipv6_label={v:#07x}/{m:#07x},")?,
            }
        } else if arp {
            self.ip4(out, "arp_spa", f::NW_SRC)?;
            self.ip4(out, "arp_tpa", f::NW_DST)?;
        } else {
            self.ip4(out, "nw_src", f::NW_SRC)?;
            self.ip4(out, "nw_dst", f::NW_DST)?;
        }
        let (proto, m) = self.raw(f::NW_PROTO);
        if !skip_proto && m != 0 {
            write!(out, "{}={proto},", if arp { "arp_op" } else { "nw_proto" })?;
        }
        if arp {
            self.eth(out, "arp_sha", f::ARP_SHA)?;
            self.eth(out, "arp_tha", f::ARP_THA)?;
        }
        let (tos, m) = self.raw(f::NW_TOS);
        if m & 0xfc != 0 {
            write!(out, "nw_tos={},", tos & 0xfc)?;
        }
        if m & 0x03 != 0 {
            write!(out, "nw_ecn={},", tos & 0x03)?;
        }
        let (ttl, m) = self.raw(f::NW_TTL);
        if m != 0 {
            write!(out, "nw_ttl={ttl},")?;
        }
        let (v, m) = self.raw(f::NW_FRAG);
        let any = v & 1 != 0;
        let later = v & 2 != 0;
        match m {
            3 => write!(
                out,
                "nw_frag={},",
                match (any, later) {
                    (true, true) => "later",
                    (true, false) => "first",
                    (false, false) => "no",
                    (false, true) => "<error>",
                }
            )?,
            1 => write!(out, "nw_frag={},", if any { "yes" } else { "no" })?,
            2 => write!(
                out,
                "nw_frag={},",
                if later { "later" } else { "not_later" }
            )?,
            _ => {}
        }
        Ok(())
    }

    /// Ports, or ICMP's type and code (and ND's fields), and TCP flags.
    fn l4(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let et = self.0.value.get(f::DL_TYPE);
        let proto = self.0.value.get(f::NW_PROTO);
        if et == 0x0800 && proto == 1 {
            self.be16(out, "icmp_type", f::TP_SRC)?;
            self.be16(out, "icmp_code", f::TP_DST)?;
        } else if et == 0x86dd && proto == 58 {
            self.be16(out, "icmp_type", f::TP_SRC)?;
            self.be16(out, "icmp_code", f::TP_DST)?;
            self.ip6(out, &field::ND_TARGET)?;
            self.eth(out, "nd_sll", f::ARP_SHA)?;
            self.eth(out, "nd_tll", f::ARP_THA)?;
        } else {
            self.be16(out, "tp_src", f::TP_SRC)?;
            self.be16(out, "tp_dst", f::TP_DST)?;
        }
        let (v, m) = self.raw(f::TCP_FLAGS);
        if (et == 0x0800 || et == 0x86dd) && proto == 6 && m != 0 {
            write!(
                out,
                "tcp_flags={},",
                flags(v, m, 0xfff, field::TCP_FLAG_NAMES)
            )?;
        }
        Ok(())
    }
}

/// Flags as OVS's `format_flags_masked` writes them: with the whole mask,
/// the names joined by `|` (`0` for none); else `+set-clear` for each
/// masked bit, lowest first.
fn flags(v: u64, m: u64, all: u64, names: &[(u32, &str)]) -> String {
    let name = |bit: u64| {
        names
            .iter()
            .find(|(b, _)| *b as u64 == bit)
            .map_or_else(|| format!("{bit:#x}"), |(_, n)| n.to_string())
    };
    let bits = |x: u64| (0..64).map(|i| 1u64 << i).filter(move |b| x & b != 0);
    if m == all {
        if v == 0 {
            return "0".into();
        }
        return bits(v).map(name).collect::<Vec<_>>().join("|");
    }
    bits(m)
        .map(|b| format!("{}{}", if v & b != 0 { '+' } else { '-' }, name(b)))
        .collect()
}
