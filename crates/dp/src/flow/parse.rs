//! ovs-ofctl's flow syntax read into a rule: the match's fields with their
//! prerequisites, the actions; errors point at the token with a caret.

use super::text::{split, tun_metadata_index, Parser, Tok};
use super::*;
use crate::field::{self, Prereq};

const MATCH_FIELDS: &str = "in_port, dl_src, dl_dst, dl_type, dl_vlan, dl_vlan_pcp, vlan_tci, nw_src, nw_dst, nw_proto, nw_tos, nw_ecn, nw_ttl, nw_frag, tp_src, tp_dst, tcp_flags, icmp_type, icmp_code, arp_op, arp_spa, arp_tpa, arp_sha, arp_tha, ipv6_src, ipv6_dst, ipv6_label, nd_target, nd_sll, nd_tll, metadata, reg0..15, xreg0..7, xxreg0..3, pkt_mark, conj_id, ct_state, ct_zone, ct_mark, ct_label, ct_nw_src, ct_nw_dst, ct_nw_proto, ct_tp_src, ct_tp_dst, ct_ipv6_src, ct_ipv6_dst, tun_id, tun_src, tun_dst, tun_ipv6_src, tun_ipv6_dst, tun_metadata0..7, priority, table, cookie, ip, ipv6, arp, rarp, icmp, icmp6, tcp, tcp6, udp, udp6, sctp, sctp6";

/// Parse one rule in ovs-ofctl syntax.
pub fn parse_flow(text: &str, ports: &dyn PortNames) -> Result<FlowRule, FlowError> {
    let p = Parser {
        text,
        ports,
        ct_exec: std::cell::Cell::new(false),
    };
    let (match_part, actions_part, actions_at) = match find_actions(text) {
        Some((i, kw_len)) => (&text[..i], &text[i + kw_len..], i + kw_len),
        None => {
            return Err(FlowError::new(
                text,
                text.len(),
                text.len() + 1,
                "missing 'actions=' (every rule needs actions; 'actions=drop' to drop)",
            ))
        }
    };
    let mut rule = FlowRule {
        table: 0,
        priority: DEFAULT_PRIORITY,
        cookie: 0,
        idle_timeout: 0,
        hard_timeout: 0,
        send_flow_rem: false,
        m: Match::default(),
        actions: Vec::new(),
    };
    // Prerequisites, checked after all fields are known (order is free).
    let mut named = Vec::new();
    for t in split(match_part, 0, true) {
        let (k, v) = match t.s.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (t.s, ""),
        };
        if !p.rule_field(t, k, v, &mut rule)? {
            p.match_field(t, k, v, &mut rule.m, &mut named)?;
        }
    }
    check_prereqs(&p, &named, &mut rule.m)?;
    rule.actions = super::actions::parse_actions(&p, actions_part, actions_at, Some(&rule.m))?;
    Ok(rule)
}

/// Refuse a field whose prerequisite the rule lacks, naming what to add;
/// set the tunnel's family from the tunnel address fields that constrain
/// anything (a /0 mask matches every tunnel, IPv6 too).
fn check_prereqs(p: &Parser, named: &[(Tok, Prereq)], m: &mut Match) -> Result<(), FlowError> {
    let v4_used = m.mask.get(f::TUN_SRC) != 0 || m.mask.get(f::TUN_DST) != 0;
    let v6_used = [
        f::TUN_IPV6_SRC_HI,
        f::TUN_IPV6_SRC_LO,
        f::TUN_IPV6_DST_HI,
        f::TUN_IPV6_DST_LO,
    ]
    .iter()
    .any(|&f| m.mask.get(f) != 0);
    let tun_tok = |v6: bool| {
        named.iter().rev().find(|(t, _)| {
            let k = t.s.split('=').next().unwrap_or("");
            if v6 {
                k.starts_with("tun_ipv6")
            } else {
                k == "tun_src" || k == "tun_dst"
            }
        })
    };
    match (v4_used, v6_used) {
        (true, true) => {
            let t = tun_tok(true)
                .or(tun_tok(false))
                .map_or(Tok { s: p.text, at: 0 }, |(t, _)| *t);
            return Err(p.err(t, "a tunnel is IPv4 or IPv6: do not match tun_src/tun_dst and tun_ipv6_src/tun_ipv6_dst together"));
        }
        (true, false) => m.exact(f::TUN_FAMILY, 4),
        (false, true) => m.exact(f::TUN_FAMILY, 6),
        (false, false) => {}
    }
    for (t, pre) in named {
        if !pre.met(&m.value, &m.mask) {
            let name = t.s.split('=').next().unwrap_or(t.s);
            return Err(p.err(*t, format!("{name}: {}", pre.hint())));
        }
    }
    Ok(())
}

impl<'a> Parser<'a, '_> {
    /// A field of the rule rather than of its match (priority, table,
    /// cookie, timeouts, flags); false if `k` is none of them.
    fn rule_field(
        &self,
        t: Tok<'a>,
        k: &str,
        v: &str,
        rule: &mut FlowRule,
    ) -> Result<bool, FlowError> {
        let p = self;
        match k {
            "priority" => rule.priority = p.num(t, k, v, u16::MAX as u64)? as u16,
            "table" => rule.table = p.num(t, k, v, 254)? as u8,
            "cookie" => rule.cookie = p.num(t, k, v, u64::MAX)?,
            "idle_timeout" => rule.idle_timeout = p.num(t, k, v, u16::MAX as u64)? as u16,
            "hard_timeout" => rule.hard_timeout = p.num(t, k, v, u16::MAX as u64)? as u16,
            "send_flow_rem" if v.is_empty() => rule.send_flow_rem = true,
            "importance" | "check_overlap" => {
                return Err(p.err(t, format!("{k} is not supported by tunlab")))
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// A match field (any of OVS's field names tunlab holds, the OpenFlow
    /// 1.0 forms `dl_vlan`, `dl_vlan_pcp`, `tp_src`, or a shorthand such
    /// as `tcp`), with the prerequisite it brings to `named`; an error
    /// naming the known fields if `k` is none.
    fn match_field(
        &self,
        t: Tok<'a>,
        k: &str,
        v: &str,
        m: &mut Match,
        named: &mut Vec<(Tok<'a>, Prereq)>,
    ) -> Result<(), FlowError> {
        let p = self;
        // The OpenFlow 1.0 names that stand for several fields.
        let (field, pre) = match k {
            "in_port" => {
                m.exact(f::IN_PORT, p.port(t, k, v)? as u64);
                return Ok(());
            }
            "dl_vlan" => return p.dl_vlan(t, v, m),
            "dl_vlan_pcp" => {
                let n = p.num(t, k, v, 7)?;
                let old = (m.value.get(f::VLAN_TCI), m.mask.get(f::VLAN_TCI));
                m.set(
                    f::VLAN_TCI,
                    (old.0 & 0x0fff) | 0x1000 | (n << 13),
                    (old.1 & 0x0fff) | 0xf000,
                );
                return Ok(());
            }
            "tp_src" | "tp_dst" => (&k[3..], Prereq::L4),
            "nw_src" | "ip_src" | "nw_dst" | "ip_dst" => (k, Prereq::Ipv4OrArp),
            "nw_proto" | "ip_proto" => (k, Prereq::IpOrArp),
            "icmp_type" | "icmp_code" => (k, Prereq::IcmpAny),
            _ if k.starts_with("tun_metadata") => {
                tun_metadata_index(p, t, k)?;
                (k, Prereq::None)
            }
            _ => (k, Prereq::None),
        };
        let fl = match field {
            "src" => field::by_name("tcp_src"),
            "dst" => field::by_name("tcp_dst"),
            _ => field::by_name(field).filter(|fl| !fl.name.starts_with("NXM")),
        };
        let Some(fl) = fl else {
            return match SHORTHANDS.iter().find(|(n, _, _)| *n == k) {
                Some(&(_, et, proto)) if v.is_empty() => {
                    m.exact(f::DL_TYPE, et as u64);
                    if proto != 0 {
                        m.exact(f::NW_PROTO, proto as u64);
                    }
                    Ok(())
                }
                _ => Err(p.err(
                    t,
                    format!("unknown match field '{k}' (known: {MATCH_FIELDS})"),
                )),
            };
        };
        let (val, mask) = p.field_value(t, k, fl, v)?;
        fl.set_match(&mut m.value, &mut m.mask, val, mask);
        let pre = if pre == Prereq::None { fl.prereq } else { pre };
        if pre != Prereq::None {
            named.push((t, pre));
        }
        if matches!(
            fl.name,
            "tun_src" | "tun_dst" | "tun_ipv6_src" | "tun_ipv6_dst"
        ) {
            // Named for the tunnel-family check.
            named.push((t, Prereq::None));
        }
        Ok(())
    }

    /// `dl_vlan=N`: a tag with VID N (any PCP); 0xffff: no tag.
    fn dl_vlan(&self, t: Tok, v: &str, m: &mut Match) -> Result<(), FlowError> {
        let n = self.num(t, "dl_vlan", v, 0xffff)?;
        if n == 0xffff {
            // OVS: dl_vlan=0xffff matches frames without a tag.
            m.set(f::VLAN_TCI, 0, 0xffff)
        } else if n > 4095 {
            return Err(self.err(
                t,
                format!("dl_vlan: {n} is out of range (0..4095, or 0xffff for no tag)"),
            ));
        } else {
            let old = (m.value.get(f::VLAN_TCI), m.mask.get(f::VLAN_TCI));
            m.set(
                f::VLAN_TCI,
                (old.0 & 0xe000) | 0x1000 | n,
                (old.1 & 0xe000) | 0x1fff,
            )
        }
        Ok(())
    }
}

/// Where `actions=` (or `action=`) starts, and the keyword's length.
fn find_actions(text: &str) -> Option<(usize, usize)> {
    for kw in ["actions=", "action="] {
        let mut from = 0;
        while let Some(i) = text[from..].find(kw) {
            let i = from + i;
            let before = text[..i].chars().last();
            if before.is_none() || matches!(before, Some(c) if c == ',' || c.is_whitespace()) {
                return Some((i, kw.len()));
            }
            from = i + kw.len();
        }
    }
    None
}
