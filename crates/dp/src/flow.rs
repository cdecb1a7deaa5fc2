//! Flow rules in ovs-ofctl(8) syntax: parse, print back, and the errors that
//! point at the offending token.
//!
//! ```text
//! table=0,priority=100,in_port=1,dl_vlan=5 actions=pop_vlan,output:6
//! in_port=6 action=push_vlan:0x88a8,mod_vlan_vid:5,output:1
//! in_port=2 actions=set_field:10.222.0.6->tun_dst,output:1
//! ```
//!
//! Supported matches: `in_port`, `dl_src`, `dl_dst` (with `/mask`),
//! `dl_type`, `dl_vlan`, `dl_vlan_pcp`, `vlan_tci` (`/mask`), `nw_src`,
//! `nw_dst` (`/prefix` or `/mask`), `nw_proto`, `nw_tos`, `tp_src`,
//! `tp_dst` (`/mask`), `ipv6_src`, `ipv6_dst`, `tun_id` (`/mask`),
//! `tun_src`, `tun_dst`, `tun_ipv6_src`, `tun_ipv6_dst`,
//! `tun_metadata0`..`tun_metadata7` (`/mask`), the shorthands `ip`, `ipv6`,
//! `arp`, `icmp`, `icmp6`, `tcp`, `tcp6`, `udp`, `udp6`, and `priority`,
//! `table`, `cookie`. Actions: `output:N` (or a bare port), `in_port`,
//! `normal`, `flood` (`all`), `controller[:MAX_LEN]`, `drop`, `set_field:V->F` for the tunnel fields,
//! `set_tunnel:N`, `set_tunnel64:N`, `push_vlan:TPID`, `pop_vlan`
//! (`strip_vlan`), `mod_vlan_vid:N`, `mod_vlan_pcp:N`, `resubmit(P,T)` /
//! `resubmit:P`. As in OVS, L3/L4 fields need their prerequisite
//! (`nw_src` needs `ip` or `arp`; `tp_dst` needs `tcp` or `udp`).

use crate::key::{f, tun_metadata, FieldPos, FlowKey, TUN_METADATA_FIELDS};
use std::fmt::{self, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An OpenFlow port number as rules use it.
pub type PortNo = u32;

/// A rule's match: value and mask in the flow key's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Match {
    pub value: FlowKey,
    pub mask: FlowKey,
}

impl Match {
    fn set(&mut self, p: FieldPos, v: u64, m: u64) {
        self.value.set(p, v & m);
        self.mask.set(p, m);
    }
    /// A 128-bit field (an IPv6 address) kept as two 64-bit halves.
    fn set128(&mut self, hi: FieldPos, lo: FieldPos, v: u128, m: u128) {
        self.set(hi, (v >> 64) as u64, (m >> 64) as u64);
        self.set(lo, v as u64, m as u64);
    }
    fn exact(&mut self, p: FieldPos, v: u64) {
        self.set(p, v, p.max());
    }
    /// Does `key` fall under this match?
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        self.value
            .w
            .iter()
            .zip(&self.mask.w)
            .zip(&key.w)
            .all(|((v, m), k)| k & m == *v)
    }
}

/// What a rule does with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Output(PortNo),
    InPort,
    Normal,
    SetTunDst(IpAddr),
    SetTunSrc(IpAddr),
    SetTunId(u64),
    SetTunMetadata(u8, u32),
    PushVlan(u16),
    PopVlan,
    ModVlanVid(u16),
    ModVlanPcp(u8),
    Resubmit {
        port: Option<PortNo>,
        table: Option<u8>,
    },
    /// Send the packet to the OpenFlow controllers (packet_in), at most
    /// `max_len` bytes of it (65535: all of it, OFPCML_NO_BUFFER).
    Controller {
        max_len: u16,
    },
    /// Every port but the one the packet came in on (OpenFlow's FLOOD;
    /// ALL is the same here: no port has flooding turned off).
    Flood,
}

/// A parsed flow rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRule {
    pub table: u8,
    pub priority: u16,
    pub cookie: u64,
    /// Seconds without a packet, and seconds since added, after which the
    /// rule goes (0: never), as OpenFlow's flow timeouts.
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    /// Tell the controllers when the rule goes (FLOW_REMOVED).
    pub send_flow_rem: bool,
    pub m: Match,
    /// Empty means drop.
    pub actions: Vec<Action>,
}

/// OVS's default priority.
pub const DEFAULT_PRIORITY: u16 = 32768;

/// A flow rule that does not parse: the message and where in the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{msg}\n  {text}\n  {caret}")]
pub struct FlowError {
    pub msg: String,
    pub text: String,
    /// Byte range of the offending token.
    pub start: usize,
    pub end: usize,
    caret: String,
}

impl FlowError {
    fn new(text: &str, start: usize, end: usize, msg: impl Into<String>) -> FlowError {
        let end = end.max(start + 1).min(text.len().max(start + 1));
        let caret = format!(
            "{}{}",
            " ".repeat(text[..start.min(text.len())].chars().count()),
            "^".repeat(end - start)
        );
        FlowError {
            msg: msg.into(),
            text: text.to_string(),
            start,
            end,
            caret,
        }
    }
}

/// Resolve a port name used in `in_port=` or `output:`; numbers always work.
pub trait PortNames {
    fn port_no(&self, name: &str) -> Option<PortNo>;
    fn port_name(&self, _no: PortNo) -> Option<String> {
        None
    }
}

/// Port numbers only.
#[derive(Debug, Clone, Copy, Default)]
pub struct NumericPorts;
impl PortNames for NumericPorts {
    fn port_no(&self, _name: &str) -> Option<PortNo> {
        None
    }
}

/// A token with its byte offset in the rule text.
#[derive(Debug, Clone, Copy)]
struct Tok<'a> {
    s: &'a str,
    at: usize,
}

/// Split at top-level separators (commas, and spaces if `spaces`), keeping
/// parenthesised groups such as `resubmit(,1)` whole.
fn split(s: &str, base: usize, spaces: bool) -> Vec<Tok<'_>> {
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

struct Parser<'a, 'p> {
    text: &'a str,
    ports: &'p dyn PortNames,
}

impl<'a> Parser<'a, '_> {
    fn err(&self, t: Tok, msg: impl Into<String>) -> FlowError {
        FlowError::new(self.text, t.at, t.at + t.s.len(), msg)
    }

    /// A number for `field`, at most `max`.
    fn num(&self, t: Tok, field: &str, v: &str, max: u64) -> Result<u64, FlowError> {
        let n =
            parse_u64(v).ok_or_else(|| self.err(t, format!("{field}: '{v}' is not a number")))?;
        if n > max {
            return Err(self.err(t, format!("{field}: {n} is out of range (at most {max})")));
        }
        Ok(n)
    }

    /// `value` or `value/mask`, numbers.
    fn masked(&self, t: Tok, field: &str, v: &str, max: u64) -> Result<(u64, u64), FlowError> {
        match v.split_once('/') {
            Some((a, m)) => Ok((self.num(t, field, a, max)?, self.num(t, field, m, max)?)),
            None => Ok((self.num(t, field, v, max)?, max)),
        }
    }

    fn port(&self, t: Tok, field: &str, v: &str) -> Result<PortNo, FlowError> {
        if let Some(n) = parse_u64(v) {
            return u32::try_from(n)
                .map_err(|_| self.err(t, format!("{field}: port {n} is out of range")));
        }
        self.ports
            .port_no(v)
            .ok_or_else(|| self.err(t, format!("{field}: no port named '{v}'")))
    }

    fn mac(&self, t: Tok, field: &str, v: &str) -> Result<(u64, u64), FlowError> {
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

    fn ipv4(&self, t: Tok, field: &str, v: &str) -> Result<(u64, u64), FlowError> {
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

    fn ipv6(&self, t: Tok, field: &str, v: &str) -> Result<(u128, u128), FlowError> {
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

    fn ip_any(&self, t: Tok, field: &str, v: &str) -> Result<IpAddr, FlowError> {
        v.parse::<IpAddr>()
            .map_err(|_| self.err(t, format!("{field}: '{v}' is not an IP address")))
    }
}

const SHORTHANDS: &[(&str, u16, u8)] = &[
    ("ip", 0x0800, 0),
    ("ipv6", 0x86dd, 0),
    ("arp", 0x0806, 0),
    ("icmp", 0x0800, 1),
    ("tcp", 0x0800, 6),
    ("udp", 0x0800, 17),
    ("icmp6", 0x86dd, 58),
    ("tcp6", 0x86dd, 6),
    ("udp6", 0x86dd, 17),
];

const MATCH_FIELDS: &str = "in_port, dl_src, dl_dst, dl_type, dl_vlan, dl_vlan_pcp, vlan_tci, nw_src, nw_dst, nw_proto, nw_tos, tp_src, tp_dst, ipv6_src, ipv6_dst, tun_id, tun_src, tun_dst, tun_ipv6_src, tun_ipv6_dst, tun_metadata0..7, priority, table, cookie, ip, ipv6, arp, icmp, icmp6, tcp, tcp6, udp, udp6";
const ACTIONS: &str = "output:N, in_port, normal, flood, all, controller[:MAX_LEN], drop, set_field:V->tun_dst|tun_src|tun_ipv6_dst|tun_ipv6_src|tun_id|tun_metadataN, set_tunnel:N, set_tunnel64:N, push_vlan:TPID, pop_vlan, strip_vlan, mod_vlan_vid:N, mod_vlan_pcp:N, resubmit(P,T), resubmit:P";

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
    let mut needs_l3: Option<Tok> = None;
    let mut needs_l4: Option<Tok> = None;
    let mut needs_v6: Option<Tok> = None;
    let (mut tun_v4, mut tun_v6): (Option<Tok>, Option<Tok>) = (None, None);
    for t in split(match_part, 0, true) {
        let (k, v) = match t.s.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (t.s, ""),
        };
        let m = &mut rule.m;
        match k {
            "priority" => rule.priority = p.num(t, k, v, u16::MAX as u64)? as u16,
            "table" => rule.table = p.num(t, k, v, 254)? as u8,
            "cookie" => rule.cookie = p.num(t, k, v, u64::MAX)?,
            "in_port" => m.exact(f::IN_PORT, p.port(t, k, v)? as u64),
            "dl_src" | "eth_src" => {
                let (a, b) = p.mac(t, k, v)?;
                m.set(f::DL_SRC, a, b)
            }
            "dl_dst" | "eth_dst" => {
                let (a, b) = p.mac(t, k, v)?;
                m.set(f::DL_DST, a, b)
            }
            "dl_type" | "eth_type" => m.exact(f::DL_TYPE, p.num(t, k, v, 0xffff)?),
            "dl_vlan" => {
                let n = p.num(t, k, v, 0xffff)?;
                if n == 0xffff {
                    // OVS: dl_vlan=0xffff matches frames without a tag.
                    m.set(f::VLAN_TCI, 0, 0xffff)
                } else if n > 4095 {
                    return Err(p.err(
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
            }
            "dl_vlan_pcp" => {
                let n = p.num(t, k, v, 7)?;
                let old = (m.value.get(f::VLAN_TCI), m.mask.get(f::VLAN_TCI));
                m.set(
                    f::VLAN_TCI,
                    (old.0 & 0x0fff) | 0x1000 | (n << 13),
                    (old.1 & 0x0fff) | 0xf000,
                )
            }
            "vlan_tci" => {
                let (a, b) = p.masked(t, k, v, 0xffff)?;
                m.set(f::VLAN_TCI, a, b)
            }
            "nw_src" | "ip_src" => {
                let (a, b) = p.ipv4(t, k, v)?;
                m.set(f::NW_SRC, a, b);
                needs_l3 = Some(t);
            }
            "nw_dst" | "ip_dst" => {
                let (a, b) = p.ipv4(t, k, v)?;
                m.set(f::NW_DST, a, b);
                needs_l3 = Some(t);
            }
            "nw_proto" | "ip_proto" => {
                m.exact(f::NW_PROTO, p.num(t, k, v, 255)?);
                needs_l3 = needs_l3.or(Some(t));
            }
            "nw_tos" => {
                m.exact(f::NW_TOS, p.num(t, k, v, 255)?);
                needs_l3 = needs_l3.or(Some(t));
            }
            "tp_src" | "tcp_src" | "udp_src" => {
                let (a, b) = p.masked(t, k, v, 0xffff)?;
                m.set(f::TP_SRC, a, b);
                needs_l4 = Some(t);
            }
            "tp_dst" | "tcp_dst" | "udp_dst" => {
                let (a, b) = p.masked(t, k, v, 0xffff)?;
                m.set(f::TP_DST, a, b);
                needs_l4 = Some(t);
            }
            "ipv6_src" | "ipv6_dst" => {
                let (a, b) = p.ipv6(t, k, v)?;
                let (hi, lo) = if k == "ipv6_src" {
                    (f::IPV6_SRC_HI, f::IPV6_SRC_LO)
                } else {
                    (f::IPV6_DST_HI, f::IPV6_DST_LO)
                };
                m.set128(hi, lo, a, b);
                needs_v6 = Some(t);
            }
            "tun_id" | "tunnel_id" => {
                let (a, b) = p.masked(t, k, v, u64::MAX)?;
                m.set(f::TUN_ID, a, b)
            }
            "tun_src" | "tun_dst" => {
                let (a, b) = p.ipv4(t, k, v)?;
                m.set(
                    if k == "tun_src" {
                        f::TUN_SRC
                    } else {
                        f::TUN_DST
                    },
                    a,
                    b,
                );
                tun_v4 = Some(t);
            }
            "tun_ipv6_src" | "tun_ipv6_dst" => {
                let (a, b) = p.ipv6(t, k, v)?;
                let (hi, lo) = if k == "tun_ipv6_src" {
                    (f::TUN_IPV6_SRC_HI, f::TUN_IPV6_SRC_LO)
                } else {
                    (f::TUN_IPV6_DST_HI, f::TUN_IPV6_DST_LO)
                };
                m.set128(hi, lo, a, b);
                tun_v6 = Some(t);
            }
            _ if k.starts_with("tun_metadata") => {
                let n = tun_metadata_index(&p, t, k)?;
                let (a, b) = p.masked(t, k, v, u32::MAX as u64)?;
                m.set(tun_metadata(n), a, b)
            }
            "idle_timeout" => rule.idle_timeout = p.num(t, k, v, u16::MAX as u64)? as u16,
            "hard_timeout" => rule.hard_timeout = p.num(t, k, v, u16::MAX as u64)? as u16,
            "send_flow_rem" if v.is_empty() => rule.send_flow_rem = true,
            "importance" | "check_overlap" => {
                return Err(p.err(t, format!("{k} is not supported by tunlab")))
            }
            _ => match SHORTHANDS.iter().find(|(n, _, _)| *n == k) {
                Some(&(_, et, proto)) if v.is_empty() => {
                    m.exact(f::DL_TYPE, et as u64);
                    if proto != 0 {
                        m.exact(f::NW_PROTO, proto as u64);
                    }
                }
                _ => {
                    return Err(p.err(
                        t,
                        format!("unknown match field '{k}' (known: {MATCH_FIELDS})"),
                    ))
                }
            },
        }
    }
    // The tunnel's IP family follows from the tunnel address fields that
    // constrain anything (a /0 mask matches every tunnel, IPv6 too).
    let m = &mut rule.m;
    let v4_used = m.mask.get(f::TUN_SRC) != 0 || m.mask.get(f::TUN_DST) != 0;
    let v6_used = [
        f::TUN_IPV6_SRC_HI,
        f::TUN_IPV6_SRC_LO,
        f::TUN_IPV6_DST_HI,
        f::TUN_IPV6_DST_LO,
    ]
    .iter()
    .any(|&p| m.mask.get(p) != 0);
    match (v4_used, v6_used) {
        (true, true) => {
            let t = tun_v6.or(tun_v4).unwrap_or(Tok { s: text, at: 0 });
            return Err(p.err(t, "a tunnel is IPv4 or IPv6: do not match tun_src/tun_dst and tun_ipv6_src/tun_ipv6_dst together"));
        }
        (true, false) => m.exact(f::TUN_FAMILY, 4),
        (false, true) => m.exact(f::TUN_FAMILY, 6),
        (false, false) => {}
    }
    let dl_type = (rule.m.mask.get(f::DL_TYPE) != 0).then(|| rule.m.value.get(f::DL_TYPE));
    if let Some(t) = needs_l3 {
        if !matches!(dl_type, Some(0x0800) | Some(0x0806) | Some(0x86dd)) {
            return Err(p.err(
                t,
                format!(
                    "{}: needs an IP match first (add 'ip,' or 'arp,' to the rule)",
                    t.s.split('=').next().unwrap_or(t.s)
                ),
            ));
        }
    }
    if let Some(t) = needs_v6 {
        if dl_type != Some(0x86dd) {
            return Err(p.err(
                t,
                format!(
                    "{}: needs 'ipv6,' in the rule",
                    t.s.split('=').next().unwrap_or(t.s)
                ),
            ));
        }
    }
    if let Some(t) = needs_l4 {
        let proto = (rule.m.mask.get(f::NW_PROTO) != 0).then(|| rule.m.value.get(f::NW_PROTO));
        if !matches!(proto, Some(6) | Some(17) | Some(132)) {
            return Err(p.err(
                t,
                format!(
                    "{}: needs a transport match first (add 'tcp,' or 'udp,' to the rule)",
                    t.s.split('=').next().unwrap_or(t.s)
                ),
            ));
        }
    }
    rule.actions = parse_actions(&p, actions_part, actions_at)?;
    Ok(rule)
}

fn tun_metadata_index(p: &Parser, t: Tok, k: &str) -> Result<usize, FlowError> {
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

fn parse_actions(p: &Parser, s: &str, base: usize) -> Result<Vec<Action>, FlowError> {
    let toks = split(s, base, false);
    if toks.is_empty() {
        return Err(FlowError::new(
            p.text,
            base,
            base + 1,
            "actions= is empty (write 'actions=drop' to drop)",
        ));
    }
    let mut out = Vec::new();
    for t in &toks {
        let t = *t;
        let (k, v) = match t.s.split_once(':') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (t.s, ""),
        };
        let a = match k {
            "drop" if v.is_empty() => {
                if toks.len() > 1 {
                    return Err(p.err(t, "drop must be the only action"));
                }
                continue;
            }
            "output" => Action::Output(p.port(t, "output", v)?),
            "in_port" | "IN_PORT" if v.is_empty() => Action::InPort,
            "normal" | "NORMAL" if v.is_empty() => Action::Normal,
            "flood" | "FLOOD" | "all" | "ALL" if v.is_empty() => Action::Flood,
            "controller" | "CONTROLLER" => Action::Controller {
                max_len: if v.is_empty() {
                    u16::MAX
                } else {
                    p.num(t, "controller", v, u16::MAX as u64)? as u16
                },
            },
            "pop_vlan" | "strip_vlan" if v.is_empty() => Action::PopVlan,
            "push_vlan" => {
                let tpid = p.num(t, "push_vlan", v, 0xffff)? as u16;
                if tpid != 0x8100 && tpid != 0x88a8 {
                    return Err(p.err(t, format!("push_vlan: TPID {tpid:#06x} is neither 0x8100 (802.1Q) nor 0x88a8 (802.1ad)")));
                }
                Action::PushVlan(tpid)
            }
            "mod_vlan_vid" => Action::ModVlanVid(p.num(t, "mod_vlan_vid", v, 4095)? as u16),
            "mod_vlan_pcp" => Action::ModVlanPcp(p.num(t, "mod_vlan_pcp", v, 7)? as u8),
            "set_tunnel" => Action::SetTunId(p.num(t, "set_tunnel", v, u32::MAX as u64)?),
            "set_tunnel64" => Action::SetTunId(p.num(t, "set_tunnel64", v, u64::MAX)?),
            "set_field" | "load" if k == "set_field" => {
                let (val, field) = v.split_once("->").ok_or_else(|| {
                    p.err(
                        t,
                        "set_field: expected VALUE->FIELD, e.g. set_field:10.0.0.2->tun_dst",
                    )
                })?;
                let (val, field) = (val.trim(), field.trim());
                match field {
                    "tun_dst" | "tun_ipv6_dst" => Action::SetTunDst(p.ip_any(t, field, val)?),
                    "tun_src" | "tun_ipv6_src" => Action::SetTunSrc(p.ip_any(t, field, val)?),
                    "tun_id" | "tunnel_id" => Action::SetTunId(p.num(t, field, val, u64::MAX)?),
                    _ if field.starts_with("tun_metadata") => {
                        let n = tun_metadata_index(p, t, field)?;
                        Action::SetTunMetadata(n as u8, p.num(t, field, val, u32::MAX as u64)? as u32)
                    }
                    _ => return Err(p.err(t, format!("set_field: tunlab cannot set '{field}' (it sets tun_dst, tun_src, tun_ipv6_dst, tun_ipv6_src, tun_id, tun_metadata0..7)"))),
                }
            }
            _ if k.starts_with("resubmit") => parse_resubmit(p, t)?,
            _ if v.is_empty() && parse_u64(k).is_some() => Action::Output(p.port(t, "output", k)?),
            _ => match p.ports.port_no(t.s) {
                Some(no) if v.is_empty() => Action::Output(no),
                _ => return Err(p.err(t, format!("unknown action '{}' (known: {ACTIONS})", t.s))),
            },
        };
        out.push(a);
    }
    Ok(out)
}

fn parse_resubmit(p: &Parser, t: Tok) -> Result<Action, FlowError> {
    let s = t.s;
    if let Some(port) = s.strip_prefix("resubmit:") {
        return Ok(Action::Resubmit {
            port: Some(p.port(t, "resubmit", port.trim())?),
            table: None,
        });
    }
    let inner = s
        .strip_prefix("resubmit(")
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            p.err(
                t,
                "resubmit: expected resubmit(PORT,TABLE), resubmit(,TABLE) or resubmit:PORT",
            )
        })?;
    let (a, b) = inner.split_once(',').unwrap_or((inner, ""));
    let port = if a.trim().is_empty() {
        None
    } else {
        Some(p.port(t, "resubmit", a.trim())?)
    };
    let table = if b.trim().is_empty() {
        None
    } else {
        Some(p.num(t, "resubmit table", b.trim(), 254)? as u8)
    };
    if port.is_none() && table.is_none() {
        return Err(p.err(t, "resubmit: give a port, a table or both"));
    }
    Ok(Action::Resubmit { port, table })
}

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
        let port = |n: PortNo| ports.port_name(n).unwrap_or_else(|| n.to_string());
        let _ = match a {
            Action::Output(n) => write!(s, "output:{}", port(*n)),
            Action::InPort => write!(s, "in_port"),
            Action::Normal => write!(s, "normal"),
            Action::Flood => write!(s, "flood"),
            Action::Controller { max_len } => write!(s, "controller:{max_len}"),
            Action::SetTunDst(ip) => write!(
                s,
                "set_field:{ip}->{}",
                if ip.is_ipv4() {
                    "tun_dst"
                } else {
                    "tun_ipv6_dst"
                }
            ),
            Action::SetTunSrc(ip) => write!(
                s,
                "set_field:{ip}->{}",
                if ip.is_ipv4() {
                    "tun_src"
                } else {
                    "tun_ipv6_src"
                }
            ),
            Action::SetTunId(v) => write!(s, "set_field:{v:#x}->tun_id"),
            Action::SetTunMetadata(n, v) => write!(s, "set_field:{v:#x}->tun_metadata{n}"),
            Action::PushVlan(t) => write!(s, "push_vlan:{t:#06x}"),
            Action::PopVlan => write!(s, "pop_vlan"),
            Action::ModVlanVid(v) => write!(s, "mod_vlan_vid:{v}"),
            Action::ModVlanPcp(v) => write!(s, "mod_vlan_pcp:{v}"),
            Action::Resubmit { port: p, table } => write!(
                s,
                "resubmit({},{})",
                p.map(port).unwrap_or_default(),
                table.map(|t| t.to_string()).unwrap_or_default()
            ),
        };
    }
    s
}

struct MatchDisplay<'a>(&'a Match, &'a dyn PortNames);

impl fmt::Display for MatchDisplay<'_> {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        let has = |p: FieldPos| m.mask.get(p) != 0;
        let val = |p: FieldPos| m.value.get(p);
        let msk = |p: FieldPos| m.mask.get(p);
        let num = |out: &mut fmt::Formatter<'_>, name: &str, p: FieldPos| -> fmt::Result {
            if msk(p) == p.max() {
                write!(out, "{name}={:#x},", val(p))
            } else {
                write!(out, "{name}={:#x}/{:#x},", val(p), msk(p))
            }
        };
        let mac = |v: u64| {
            let b = v.to_be_bytes();
            format!(
                "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                b[2], b[3], b[4], b[5], b[6], b[7]
            )
        };
        let v4 = |v: u64, mk: u64| {
            let a = Ipv4Addr::from(v as u32);
            if mk == 0xffff_ffff {
                a.to_string()
            } else {
                format!("{a}/{}", Ipv4Addr::from(mk as u32))
            }
        };
        let v6 = |hi: FieldPos, lo: FieldPos| {
            let a = Ipv6Addr::from(((val(hi) as u128) << 64) | val(lo) as u128);
            let mk = ((msk(hi) as u128) << 64) | msk(lo) as u128;
            if mk == u128::MAX {
                a.to_string()
            } else {
                format!("{a}/{}", Ipv6Addr::from(mk))
            }
        };
        if has(f::IN_PORT) {
            let n = val(f::IN_PORT) as u32;
            write!(
                out,
                "in_port={},",
                self.1.port_name(n).unwrap_or_else(|| n.to_string())
            )?;
        }
        if has(f::DL_TYPE) {
            let et = val(f::DL_TYPE);
            let proto = has(f::NW_PROTO).then(|| val(f::NW_PROTO));
            match SHORTHANDS
                .iter()
                .find(|(_, e, p)| *e as u64 == et && proto == Some(*p as u64) && *p != 0)
            {
                Some((name, _, _)) => write!(out, "{name},")?,
                None => {
                    match SHORTHANDS
                        .iter()
                        .find(|(_, e, p)| *e as u64 == et && *p == 0)
                    {
                        Some((name, _, _)) => write!(out, "{name},")?,
                        None => write!(out, "dl_type={et:#06x},")?,
                    }
                    if let Some(p) = proto {
                        write!(out, "nw_proto={p},")?;
                    }
                }
            }
        } else if has(f::NW_PROTO) {
            write!(out, "nw_proto={},", val(f::NW_PROTO))?;
        }
        if has(f::DL_SRC) {
            write!(out, "dl_src={}", mac(val(f::DL_SRC)))?;
            if msk(f::DL_SRC) != f::DL_SRC.max() {
                write!(out, "/{}", mac(msk(f::DL_SRC)))?;
            }
            write!(out, ",")?;
        }
        if has(f::DL_DST) {
            write!(out, "dl_dst={}", mac(val(f::DL_DST)))?;
            if msk(f::DL_DST) != f::DL_DST.max() {
                write!(out, "/{}", mac(msk(f::DL_DST)))?;
            }
            write!(out, ",")?;
        }
        if has(f::VLAN_TCI) {
            let (v, mk) = (val(f::VLAN_TCI), msk(f::VLAN_TCI));
            match mk {
                0x1fff if v & 0x1000 != 0 => write!(out, "dl_vlan={},", v & 0xfff)?,
                0xf000 if v & 0x1000 != 0 => write!(out, "dl_vlan_pcp={},", v >> 13)?,
                0xffff if v == 0 => write!(out, "dl_vlan=0xffff,")?,
                0xffff if v & 0x1000 != 0 => {
                    write!(out, "dl_vlan={},dl_vlan_pcp={},", v & 0xfff, v >> 13)?
                }
                _ => write!(out, "vlan_tci={v:#06x}/{mk:#06x},")?,
            }
        }
        if has(f::NW_SRC) {
            write!(out, "nw_src={},", v4(val(f::NW_SRC), msk(f::NW_SRC)))?;
        }
        if has(f::NW_DST) {
            write!(out, "nw_dst={},", v4(val(f::NW_DST), msk(f::NW_DST)))?;
        }
        if has(f::IPV6_SRC_HI) || has(f::IPV6_SRC_LO) {
            write!(out, "ipv6_src={},", v6(f::IPV6_SRC_HI, f::IPV6_SRC_LO))?;
        }
        if has(f::IPV6_DST_HI) || has(f::IPV6_DST_LO) {
            write!(out, "ipv6_dst={},", v6(f::IPV6_DST_HI, f::IPV6_DST_LO))?;
        }
        if has(f::NW_TOS) {
            write!(out, "nw_tos={},", val(f::NW_TOS))?;
        }
        if has(f::TP_SRC) {
            num(out, "tp_src", f::TP_SRC)?;
        }
        if has(f::TP_DST) {
            num(out, "tp_dst", f::TP_DST)?;
        }
        if has(f::TUN_ID) {
            num(out, "tun_id", f::TUN_ID)?;
        }
        if has(f::TUN_SRC) {
            write!(out, "tun_src={},", v4(val(f::TUN_SRC), msk(f::TUN_SRC)))?;
        }
        if has(f::TUN_DST) {
            write!(out, "tun_dst={},", v4(val(f::TUN_DST), msk(f::TUN_DST)))?;
        }
        if has(f::TUN_IPV6_SRC_HI) || has(f::TUN_IPV6_SRC_LO) {
            write!(
                out,
                "tun_ipv6_src={},",
                v6(f::TUN_IPV6_SRC_HI, f::TUN_IPV6_SRC_LO)
            )?;
        }
        if has(f::TUN_IPV6_DST_HI) || has(f::TUN_IPV6_DST_LO) {
            write!(
                out,
                "tun_ipv6_dst={},",
                v6(f::TUN_IPV6_DST_HI, f::TUN_IPV6_DST_LO)
            )?;
        }
        for n in 0..TUN_METADATA_FIELDS {
            if has(tun_metadata(n)) {
                num(
                    out,
                    [
                        "tun_metadata0",
                        "tun_metadata1",
                        "tun_metadata2",
                        "tun_metadata3",
                        "tun_metadata4",
                        "tun_metadata5",
                        "tun_metadata6",
                        "tun_metadata7",
                    ][n],
                    tun_metadata(n),
                )?;
            }
        }
        Ok(())
    }
}

/// The body of the `flow_parse` fuzz target: any text either parses into a
/// rule that prints and parses back to itself, or gives an error whose span
/// lies within the text.
#[doc(hidden)]
pub fn fuzz_parse(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_flow(text, &NumericPorts) {
        Ok(r) => {
            let printed = format_flow(&r, &NumericPorts);
            let again = parse_flow(&printed, &NumericPorts).expect("a printed rule parses");
            assert_eq!(again, r, "{printed}");
        }
        Err(e) => assert!(e.start <= text.len() && e.start < e.end, "{e:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(s: &str) -> Result<FlowRule, FlowError> {
        parse_flow(s, &NumericPorts)
    }

    /// The flows printed in the QinQ article (reference/qinq-vs-vxlan-geneve.md).
    const QINQ_ARTICLE: &[&str] = &[
        "in_port=1,tun_dst=10.222.0.1 action=output:2",
        "in_port=2 action=set_field:10.222.0.6->tun_dst,output:1",
        "in_port=1,tun_dst=10.222.0.5 action=output:6",
        "in_port=6 action=set_field:10.222.0.10->tun_dst,output:1",
        "in_port=1,dl_vlan=1 action=pop_vlan,output:2",
        "in_port=2 action=push_vlan:0x88a8,mod_vlan_vid:1,output:1",
        "in_port=1,dl_vlan=5 action=pop_vlan,output:6",
        "in_port=6 action=push_vlan:0x88a8,mod_vlan_vid:5,output:1",
    ];

    #[test]
    fn article_flows_load_as_written() {
        for s in QINQ_ARTICLE {
            let r = parse(s).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(r.priority, DEFAULT_PRIORITY);
            assert!(!r.actions.is_empty());
        }
        let r = parse(QINQ_ARTICLE[5]).unwrap();
        assert_eq!(
            r.actions,
            vec![
                Action::PushVlan(0x88a8),
                Action::ModVlanVid(1),
                Action::Output(1)
            ]
        );
        let r = parse(QINQ_ARTICLE[1]).unwrap();
        assert_eq!(
            r.actions,
            vec![
                Action::SetTunDst("10.222.0.6".parse().unwrap()),
                Action::Output(1)
            ]
        );
        let r = parse(QINQ_ARTICLE[4]).unwrap();
        assert_eq!(r.m.value.get(f::VLAN_TCI), 0x1001);
        assert_eq!(r.m.mask.get(f::VLAN_TCI), 0x1fff);
    }

    #[test]
    fn matching() {
        let r = parse("in_port=1,dl_vlan=5 actions=pop_vlan,output:6").unwrap();
        let mut k = FlowKey::default();
        k.set(f::IN_PORT, 1);
        k.set(f::VLAN_TCI, 0x1005 | (3 << 13)); // PCP does not matter
        assert!(r.m.matches(&k));
        k.set(f::VLAN_TCI, 0x1006);
        assert!(!r.m.matches(&k));
        let r = parse("tcp,nw_dst=10.0.0.0/8,tp_dst=0x1000/0xf000 actions=drop").unwrap();
        let mut k = FlowKey::default();
        k.set(f::DL_TYPE, 0x0800);
        k.set(f::NW_PROTO, 6);
        k.set(f::NW_DST, u32::from(Ipv4Addr::new(10, 9, 8, 7)) as u64);
        k.set(f::TP_DST, 0x1234);
        assert!(r.m.matches(&k));
        k.set(f::TP_DST, 0x2234);
        assert!(!r.m.matches(&k));
        assert!(r.actions.is_empty());
    }

    #[test]
    fn errors_point_at_the_token() {
        let e = parse("in_port=1,dl_vlan=5000 actions=pop_vlan").unwrap_err();
        assert_eq!(&e.text[e.start..e.end], "dl_vlan=5000");
        assert!(e.msg.contains("out of range"), "{e}");
        assert_eq!(
            e.to_string().lines().nth(2).unwrap(),
            "            ^^^^^^^^^^^^"
        );

        let e = parse("in_port=1 actions=push_vlan:0x9100").unwrap_err();
        assert_eq!(&e.text[e.start..e.end], "push_vlan:0x9100");
        let e = parse("in_port=1,nw_src=10.0.0.1 actions=drop").unwrap_err();
        assert!(e.msg.contains("add 'ip,'"), "{e}");
        let e = parse("in_port=1,tp_dst=80,ip actions=drop").unwrap_err();
        assert!(e.msg.contains("'tcp,'"), "{e}");
        let e = parse("in_port=1").unwrap_err();
        assert!(e.msg.contains("missing 'actions='"));
        let e = parse("in_port=1,frobnicate=2 actions=drop").unwrap_err();
        assert_eq!(&e.text[e.start..e.end], "frobnicate=2");
        assert!(e.msg.contains("known: in_port"));
        let e = parse("in_port=1 actions=output:2,drop").unwrap_err();
        assert!(e.msg.contains("only action"));
        let e = parse("tun_metadata9=1 actions=drop").unwrap_err();
        assert!(e.msg.contains("tun_metadata0 to tun_metadata7"));
        let e = parse("in_port=1 actions=set_field:1.2.3->tun_dst").unwrap_err();
        assert!(e.msg.contains("not an IP address"));
        let e = parse("in_port=1 actions=resubmit(,300)").unwrap_err();
        assert!(e.msg.contains("at most 254"), "{e}");
    }

    #[test]
    fn multibyte_whitespace_is_a_separator() {
        // Found by the flow_parse fuzz target: a no-break space (2 bytes)
        // between fields made the splitter slice inside the character.
        let r = parse("in_port=1\u{a0}dl_vlan=5 actions=drop").unwrap();
        assert_eq!(r.m.value.get(f::VLAN_TCI), 0x1005);
        let _ = parse("d\u{15}2\u{a0}0sr_ actions=set");
    }

    #[test]
    fn actions_with_parentheses_and_spacing() {
        let r = parse(
            "table=0, priority=10, in_port=1  actions=resubmit(,1),resubmit(2,3),resubmit:4, 5",
        )
        .unwrap();
        assert_eq!(
            r.actions,
            vec![
                Action::Resubmit {
                    port: None,
                    table: Some(1)
                },
                Action::Resubmit {
                    port: Some(2),
                    table: Some(3)
                },
                Action::Resubmit {
                    port: Some(4),
                    table: None
                },
                Action::Output(5)
            ]
        );
        assert_eq!(r.priority, 10);
    }

    #[test]
    fn ovn_metadata_rules() {
        let r = parse("in_port=1,tun_id=6,tun_metadata0=0x30002 actions=output:2").unwrap();
        assert_eq!(r.m.value.get(tun_metadata(0)), 0x30002);
        let r = parse(
            "in_port=2 actions=set_field:6->tun_id,set_field:0x30002->tun_metadata0,output:1",
        )
        .unwrap();
        assert_eq!(r.actions[1], Action::SetTunMetadata(0, 0x30002));
    }

    fn field_tokens() -> impl Strategy<Value = Vec<String>> {
        let mac = any::<[u8; 6]>().prop_map(|b| {
            format!(
                "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                b[0], b[1], b[2], b[3], b[4], b[5]
            )
        });
        proptest::collection::vec(
            prop_oneof![
                (0u32..100).prop_map(|p| format!("in_port={p}")),
                mac.clone().prop_map(|m| format!("dl_src={m}")),
                mac.prop_map(|m| format!("dl_dst={m}")),
                (0u16..4096).prop_map(|v| format!("dl_vlan={v}")),
                any::<u64>().prop_map(|v| format!("tun_id={v}")),
                (any::<u32>(), 0u32..=32)
                    .prop_map(|(a, p)| format!("tun_dst={}/{p}", Ipv4Addr::from(a))),
                (0usize..8, any::<u32>()).prop_map(|(n, v)| format!("tun_metadata{n}={v}")),
                (any::<u32>(), 1u32..=32)
                    .prop_map(|(a, p)| format!("ip,nw_src={}/{p}", Ipv4Addr::from(a))),
                (any::<u16>(), any::<u16>()).prop_map(|(a, m)| format!("udp,tp_dst={a}/{m}")),
            ],
            0..5,
        )
    }

    fn action_tokens() -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(
            prop_oneof![
                (0u32..100).prop_map(|p| format!("output:{p}")),
                Just("in_port".to_string()),
                Just("normal".to_string()),
                Just("flood".to_string()),
                (0u16..=u16::MAX).prop_map(|n| format!("controller:{n}")),
                Just("pop_vlan".to_string()),
                prop_oneof![Just(0x8100u16), Just(0x88a8)]
                    .prop_map(|t| format!("push_vlan:{t:#x}")),
                (0u16..4096).prop_map(|v| format!("mod_vlan_vid:{v}")),
                any::<u32>().prop_map(|a| format!("set_field:{}->tun_dst", Ipv4Addr::from(a))),
                any::<u64>().prop_map(|v| format!("set_field:{v}->tun_id")),
                (0usize..8, any::<u32>())
                    .prop_map(|(n, v)| format!("set_field:{v}->tun_metadata{n}")),
                (0u8..255).prop_map(|t| format!("resubmit(,{t})")),
            ],
            1..5,
        )
    }

    proptest! {
        #[test]
        fn print_then_parse_is_identity(fields in field_tokens(), actions in action_tokens(), prio in any::<u16>()) {
            let text = format!("priority={prio},{} actions={}", fields.join(","), actions.join(","));
            // Later tokens may overwrite earlier ones (as in OVS); the rule
            // that results must survive printing and parsing again.
            let r = match parse(&text) { Ok(r) => r, Err(e) => return Err(TestCaseError::fail(e.to_string())) };
            let printed = format_flow(&r, &NumericPorts);
            let again = parse(&printed).map_err(|e| TestCaseError::fail(format!("{printed}: {e}")))?;
            prop_assert_eq!(again, r, "{}", printed);
        }

        #[test]
        fn garbage_never_panics(s in "\\PC{0,80}") {
            let _ = parse(&s);
        }

        #[test]
        fn near_misses_never_panic(fields in field_tokens(), cut in 0usize..120, junk in "[=,:/>()a-z0-9 -]{0,6}") {
            let text = format!("{} actions=output:1", fields.join(","));
            let cut = cut.min(text.len());
            let mut s = text[..cut].to_string();
            s.push_str(&junk);
            s.push_str(&text[cut..]);
            let _ = parse(&s);
        }
    }
}
