//! ovs-ofctl's flow syntax read into a rule: the match's fields with their
//! prerequisites, the actions; errors point at the token with a caret.

use super::*;

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
    let mut pre = Prereqs::default();
    for t in split(match_part, 0, true) {
        let (k, v) = match t.s.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (t.s, ""),
        };
        if !p.rule_field(t, k, v, &mut rule)? && !p.tunnel_field(t, k, v, &mut rule.m, &mut pre)? {
            p.packet_field(t, k, v, &mut rule.m, &mut pre)?;
        }
    }
    pre.check(&p, &mut rule.m)?;
    rule.actions = parse_actions(&p, actions_part, actions_at)?;
    Ok(rule)
}

/// The fields a rule's match names that need others beside them: an IP
/// field needs `ip`/`arp`/`ipv6`, a port needs `tcp`/`udp`, an IPv6
/// address needs `ipv6`; the tunnel's address fields say its family.
#[derive(Default)]
struct Prereqs<'a> {
    l3: Option<Tok<'a>>,
    l4: Option<Tok<'a>>,
    v6: Option<Tok<'a>>,
    tun_v4: Option<Tok<'a>>,
    tun_v6: Option<Tok<'a>>,
}

impl<'a> Prereqs<'a> {
    /// Refuse a field whose prerequisite is missing, naming it; set the
    /// tunnel's family from the tunnel address fields that constrain
    /// anything (a /0 mask matches every tunnel, IPv6 too).
    fn check(&self, p: &Parser<'a, '_>, m: &mut Match) -> Result<(), FlowError> {
        let v4_used = m.mask.get(f::TUN_SRC) != 0 || m.mask.get(f::TUN_DST) != 0;
        let v6_used = [
            f::TUN_IPV6_SRC_HI,
            f::TUN_IPV6_SRC_LO,
            f::TUN_IPV6_DST_HI,
            f::TUN_IPV6_DST_LO,
        ]
        .iter()
        .any(|&f| m.mask.get(f) != 0);
        match (v4_used, v6_used) {
            (true, true) => {
                let t = self
                    .tun_v6
                    .or(self.tun_v4)
                    .unwrap_or(Tok { s: p.text, at: 0 });
                return Err(p.err(t, "a tunnel is IPv4 or IPv6: do not match tun_src/tun_dst and tun_ipv6_src/tun_ipv6_dst together"));
            }
            (true, false) => m.exact(f::TUN_FAMILY, 4),
            (false, true) => m.exact(f::TUN_FAMILY, 6),
            (false, false) => {}
        }
        let name = |t: Tok<'a>| t.s.split('=').next().unwrap_or(t.s).to_string();
        let dl_type = (m.mask.get(f::DL_TYPE) != 0).then(|| m.value.get(f::DL_TYPE));
        if let Some(t) = self.l3 {
            if !matches!(dl_type, Some(0x0800) | Some(0x0806) | Some(0x86dd)) {
                return Err(p.err(
                    t,
                    format!(
                        "{}: needs an IP match first (add 'ip,' or 'arp,' to the rule)",
                        name(t)
                    ),
                ));
            }
        }
        if let Some(t) = self.v6 {
            if dl_type != Some(0x86dd) {
                return Err(p.err(t, format!("{}: needs 'ipv6,' in the rule", name(t))));
            }
        }
        if let Some(t) = self.l4 {
            let proto = (m.mask.get(f::NW_PROTO) != 0).then(|| m.value.get(f::NW_PROTO));
            if !matches!(proto, Some(6) | Some(17) | Some(132)) {
                return Err(p.err(
                    t,
                    format!(
                        "{}: needs a transport match first (add 'tcp,' or 'udp,' to the rule)",
                        name(t)
                    ),
                ));
            }
        }
        Ok(())
    }
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

    /// A tunnel field (tun_id, the tunnel's addresses, tun_metadataN);
    /// false if `k` is none of them.
    fn tunnel_field(
        &self,
        t: Tok<'a>,
        k: &str,
        v: &str,
        m: &mut Match,
        pre: &mut Prereqs<'a>,
    ) -> Result<bool, FlowError> {
        let p = self;
        match k {
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
                pre.tun_v4 = Some(t);
            }
            "tun_ipv6_src" | "tun_ipv6_dst" => {
                let (a, b) = p.ipv6(t, k, v)?;
                let (hi, lo) = if k == "tun_ipv6_src" {
                    (f::TUN_IPV6_SRC_HI, f::TUN_IPV6_SRC_LO)
                } else {
                    (f::TUN_IPV6_DST_HI, f::TUN_IPV6_DST_LO)
                };
                m.set128(hi, lo, a, b);
                pre.tun_v6 = Some(t);
            }
            _ if k.starts_with("tun_metadata") => {
                let n = tun_metadata_index(p, t, k)?;
                let (a, b) = p.masked(t, k, v, u32::MAX as u64)?;
                m.set(tun_metadata(n), a, b)
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// A field of the packet (Ethernet, VLAN, IP, transport) or a
    /// shorthand (`ip`, `tcp`, ...); an error naming the known fields if
    /// `k` is none.
    fn packet_field(
        &self,
        t: Tok<'a>,
        k: &str,
        v: &str,
        m: &mut Match,
        pre: &mut Prereqs<'a>,
    ) -> Result<(), FlowError> {
        let p = self;
        match k {
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
                pre.l3 = Some(t);
            }
            "nw_dst" | "ip_dst" => {
                let (a, b) = p.ipv4(t, k, v)?;
                m.set(f::NW_DST, a, b);
                pre.l3 = Some(t);
            }
            "nw_proto" | "ip_proto" => {
                m.exact(f::NW_PROTO, p.num(t, k, v, 255)?);
                pre.l3 = pre.l3.or(Some(t));
            }
            "nw_tos" => {
                m.exact(f::NW_TOS, p.num(t, k, v, 255)?);
                pre.l3 = pre.l3.or(Some(t));
            }
            "tp_src" | "tcp_src" | "udp_src" => {
                let (a, b) = p.masked(t, k, v, 0xffff)?;
                m.set(f::TP_SRC, a, b);
                pre.l4 = Some(t);
            }
            "tp_dst" | "tcp_dst" | "udp_dst" => {
                let (a, b) = p.masked(t, k, v, 0xffff)?;
                m.set(f::TP_DST, a, b);
                pre.l4 = Some(t);
            }
            "ipv6_src" | "ipv6_dst" => {
                let (a, b) = p.ipv6(t, k, v)?;
                let (hi, lo) = if k == "ipv6_src" {
                    (f::IPV6_SRC_HI, f::IPV6_SRC_LO)
                } else {
                    (f::IPV6_DST_HI, f::IPV6_DST_LO)
                };
                m.set128(hi, lo, a, b);
                pre.v6 = Some(t);
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
        Ok(())
    }
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
