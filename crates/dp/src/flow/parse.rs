//! ovs-ofctl's flow syntax read into a rule: the match's fields with their
//! prerequisites, the actions; errors point at the token with a caret.

use super::*;
use crate::field::{self, Field, Fmt, Prereq};

/// A token with its byte offset in the rule text.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tok<'a> {
    pub(super) s: &'a str,
    pub(super) at: usize,
}

/// Split at top-level separators (commas, and spaces if `spaces`), keeping
/// parenthesised groups such as `resubmit(,1)` whole.
pub(super) fn split(s: &str, base: usize, spaces: bool) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(Tok {
                    s: &s[start..i],
                    at: base + start,
                });
                start = i + 1;
            }
            c if spaces && c.is_whitespace() && depth == 0 => {
                out.push(Tok {
                    s: &s[start..i],
                    at: base + start,
                });
                // Unicode whitespace (a no-break space) is several bytes.
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(Tok {
        s: &s[start..],
        at: base + start,
    });
    out.into_iter()
        .filter(|t| !t.s.trim().is_empty())
        .map(|t| {
            let lead = t.s.len() - t.s.trim_start().len();
            Tok {
                s: t.s.trim(),
                at: t.at + lead,
            }
        })
        .collect()
}

fn parse_u64(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

pub(super) struct Parser<'a, 'p> {
    pub(super) text: &'a str,
    pub(super) ports: &'p dyn PortNames,
}

impl<'a> Parser<'a, '_> {
    pub(super) fn err(&self, t: Tok, msg: impl Into<String>) -> FlowError {
        FlowError::new(self.text, t.at, t.at + t.s.len(), msg)
    }

    /// A number for `field`, at most `max`.
    pub(super) fn num(&self, t: Tok, field: &str, v: &str, max: u64) -> Result<u64, FlowError> {
        let n =
            parse_u64(v).ok_or_else(|| self.err(t, format!("{field}: '{v}' is not a number")))?;
        if n > max {
            return Err(self.err(t, format!("{field}: {n} is out of range (at most {max})")));
        }
        Ok(n)
    }

    pub(super) fn port(&self, t: Tok, field: &str, v: &str) -> Result<PortNo, FlowError> {
        if let Some(n) = parse_u64(v) {
            return u32::try_from(n)
                .map_err(|_| self.err(t, format!("{field}: port {n} is out of range")));
        }
        if let Some(&(_, n)) = RESERVED_PORTS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(v))
        {
            return Ok(n);
        }
        self.ports
            .port_no(v)
            .ok_or_else(|| self.err(t, format!("{field}: no port named '{v}'")))
    }

    pub(super) fn mac(&self, t: Tok, field: &str, v: &str) -> Result<(u64, u64), FlowError> {
        let one = |s: &str| {
            s.parse::<tunlab_wire::MacAddr>()
                .map(|m| FlowKey::mac(m.0))
                .map_err(|_| {
                    self.err(
                        t,
                        format!("{field}: '{s}' is not a MAC address (like 40:a6:b7:0b:e9:b1)"),
                    )
                })
        };
        match v.split_once('/') {
            Some((a, m)) => Ok((one(a)?, one(m)?)),
            None => Ok((one(v)?, 0xffff_ffff_ffff)),
        }
    }

    pub(super) fn ipv4(&self, t: Tok, field: &str, v: &str) -> Result<(u64, u64), FlowError> {
        let addr = |s: &str| {
            s.parse::<Ipv4Addr>()
                .map(|a| u32::from(a) as u64)
                .map_err(|_| self.err(t, format!("{field}: '{s}' is not an IPv4 address")))
        };
        match v.split_once('/') {
            Some((a, m)) => {
                let mask = match m.parse::<u32>() {
                    Ok(p) if p <= 32 => (u64::from(u32::MAX) << (32 - p)) & 0xffff_ffff,
                    Ok(_) => {
                        return Err(self.err(t, format!("{field}: prefix /{m} is longer than 32")))
                    }
                    Err(_) => addr(m)?,
                };
                Ok((addr(a)?, mask))
            }
            None => Ok((addr(v)?, 0xffff_ffff)),
        }
    }

    pub(super) fn ipv6(&self, t: Tok, field: &str, v: &str) -> Result<(u128, u128), FlowError> {
        let addr = |s: &str| {
            s.parse::<Ipv6Addr>()
                .map(u128::from)
                .map_err(|_| self.err(t, format!("{field}: '{s}' is not an IPv6 address")))
        };
        match v.split_once('/') {
            Some((a, m)) => {
                let mask = match m.parse::<u32>() {
                    Ok(0) => 0,
                    Ok(p) if p <= 128 => u128::MAX << (128 - p),
                    Ok(_) => {
                        return Err(self.err(t, format!("{field}: prefix /{m} is longer than 128")))
                    }
                    Err(_) => addr(m)?,
                };
                Ok((addr(a)?, mask))
            }
            None => Ok((addr(v)?, u128::MAX)),
        }
    }

    pub(super) fn ip_any(&self, t: Tok, field: &str, v: &str) -> Result<IpAddr, FlowError> {
        v.parse::<IpAddr>()
            .map_err(|_| self.err(t, format!("{field}: '{v}' is not an IP address")))
    }
}

const MATCH_FIELDS: &str = "in_port, dl_src, dl_dst, dl_type, dl_vlan, dl_vlan_pcp, vlan_tci, nw_src, nw_dst, nw_proto, nw_tos, nw_ecn, nw_ttl, nw_frag, tp_src, tp_dst, tcp_flags, icmp_type, icmp_code, arp_op, arp_spa, arp_tpa, arp_sha, arp_tha, ipv6_src, ipv6_dst, ipv6_label, nd_target, nd_sll, nd_tll, metadata, reg0..15, xreg0..7, xxreg0..3, pkt_mark, conj_id, ct_state, ct_zone, ct_mark, ct_label, ct_nw_src, ct_nw_dst, ct_nw_proto, ct_tp_src, ct_tp_dst, ct_ipv6_src, ct_ipv6_dst, tun_id, tun_src, tun_dst, tun_ipv6_src, tun_ipv6_dst, tun_metadata0..7, priority, table, cookie, ip, ipv6, arp, rarp, icmp, icmp6, tcp, tcp6, udp, udp6, sctp, sctp6";

/// Parse one rule in ovs-ofctl syntax.
pub fn parse_flow(text: &str, ports: &dyn PortNames) -> Result<FlowRule, FlowError> {
    let p = Parser { text, ports };
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

    /// A field's value and mask, written in the field's format; a mask
    /// on a field OVS matches only whole is refused.
    pub(super) fn field_value(
        &self,
        t: Tok,
        k: &str,
        fl: &Field,
        v: &str,
    ) -> Result<(u128, u128), FlowError> {
        let ones = fl.all_ones();
        let (val, mask) = match fl.fmt {
            Fmt::Ethernet => {
                let (a, b) = self.mac(t, k, v)?;
                (a as u128, b as u128)
            }
            Fmt::Ipv4 => {
                let (a, b) = self.ipv4(t, k, v)?;
                (a as u128, b as u128)
            }
            Fmt::Ipv6 => self.ipv6(t, k, v)?,
            Fmt::Port => (self.port(t, k, v)? as u128, ones),
            Fmt::CtState => self.flags(t, k, v, field::CT_STATE_FLAGS, ones)?,
            Fmt::TcpFlags => self.flags(t, k, v, field::TCP_FLAG_NAMES, ones)?,
            Fmt::Frag => match v {
                "no" => (0, field::FRAG_ANY),
                "yes" => (field::FRAG_ANY, field::FRAG_ANY),
                "first" => (field::FRAG_ANY, field::FRAG_ANY | field::FRAG_LATER),
                "later" => (
                    field::FRAG_ANY | field::FRAG_LATER,
                    field::FRAG_ANY | field::FRAG_LATER,
                ),
                "not_later" => (0, field::FRAG_LATER),
                _ => {
                    return Err(self.err(
                        t,
                        format!("{k}: '{v}' is not no, yes, first, later or not_later"),
                    ))
                }
            },
            Fmt::Decimal | Fmt::Hex => match v.split_once('/') {
                Some((a, b)) => (self.wide(t, k, a)?, self.wide(t, k, b)?),
                None => (self.wide(t, k, v)?, ones),
            },
        };
        let max = fl.max_value();
        if val & !max != 0 || mask & !ones != 0 {
            return Err(self.err(
                t,
                format!(
                    "{k}: {v} is out of range (the field holds {})",
                    if fl.shift > 0 {
                        format!("the bits {max:#x}")
                    } else {
                        format!("0 to {max}")
                    }
                ),
            ));
        }
        if !fl.maskable && mask != ones && mask != 0 {
            return Err(self.err(t, format!("{k} cannot be masked (OVS matches it whole)")));
        }
        Ok((val, mask))
    }

    /// A number of up to 128 bits, decimal or 0x-hex.
    pub(super) fn wide(&self, t: Tok, k: &str, v: &str) -> Result<u128, FlowError> {
        let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            Some(h) => u128::from_str_radix(h, 16).ok(),
            None => v.parse().ok(),
        };
        n.ok_or_else(|| self.err(t, format!("{k}: '{v}' is not a number")))
    }

    /// Flags as OVS writes them: `+trk-new` (these bits set, those clear,
    /// the rest wildcarded), `trk|est` (exactly these), or a number with
    /// an optional mask.
    pub(super) fn flags(
        &self,
        t: Tok,
        k: &str,
        v: &str,
        names: &[(u32, &str)],
        ones: u128,
    ) -> Result<(u128, u128), FlowError> {
        if v.starts_with(|c: char| c.is_ascii_digit()) {
            return match v.split_once('/') {
                Some((a, b)) => Ok((self.wide(t, k, a)?, self.wide(t, k, b)?)),
                None => Ok((self.wide(t, k, v)?, ones)),
            };
        }
        let bit = |name: &str| {
            names
                .iter()
                .find(|(_, n)| *n == name)
                .map(|(b, _)| *b as u128)
                .ok_or_else(|| {
                    let known: Vec<&str> = names.iter().map(|(_, n)| *n).collect();
                    self.err(
                        t,
                        format!("{k}: unknown flag '{name}' (known: {})", known.join(", ")),
                    )
                })
        };
        if v.starts_with(['+', '-']) {
            let (mut val, mut mask) = (0, 0);
            let mut rest = v;
            while let Some(sign) = rest.chars().next() {
                let body = &rest[1..];
                let end = body.find(['+', '-']).unwrap_or(body.len());
                let b = bit(&body[..end])?;
                if mask & b != 0 {
                    return Err(self.err(t, format!("{k}: '{}' twice", &body[..end])));
                }
                mask |= b;
                if sign == '+' {
                    val |= b;
                }
                rest = &body[end..];
            }
            return Ok((val, mask));
        }
        let mut val = 0;
        for name in v.split('|') {
            val |= bit(name)?;
        }
        Ok((val, ones))
    }
}

pub(super) fn tun_metadata_index(p: &Parser, t: Tok, k: &str) -> Result<usize, FlowError> {
    match k
        .strip_prefix("tun_metadata")
        .and_then(|n| n.parse::<usize>().ok())
    {
        Some(n) if n < TUN_METADATA_FIELDS => Ok(n),
        _ => Err(p.err(
            t,
            format!(
                "'{k}': tunlab has tun_metadata0 to tun_metadata{}",
                TUN_METADATA_FIELDS - 1
            ),
        )),
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
