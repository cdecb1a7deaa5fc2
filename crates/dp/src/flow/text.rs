//! The words of ovs-ofctl's flow syntax, both ways: tokens and the
//! values of fields as text is read (numbers, addresses, flags), and as
//! OVS prints them (`%#x` numbers, CIDR prefixes, port names). The
//! parser, the printer and the actions' text all stand on this.

use super::*;
use crate::field::{self, Field, Fmt, Prereq, SubField};

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

pub(super) fn parse_u64(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

pub(super) struct Parser<'a, 'p> {
    pub(super) text: &'a str,
    pub(super) ports: &'p dyn PortNames,
    /// Inside a `ct`'s `exec(...)`: the actions write the connection's
    /// ct_mark and ct_label, and nothing else.
    pub(super) ct_exec: std::cell::Cell<bool>,
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

/// A number as C's `%#x` writes it: `0` for zero, else `0x...`.
pub(super) fn c_hex(v: u128) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// A port by its name, OpenFlow's reserved name, or its number.
pub(super) fn port_text(n: PortNo, ports: &dyn PortNames) -> String {
    if let Some(name) = ports.port_name(n) {
        return name;
    }
    match RESERVED_PORTS.iter().find(|(_, p)| *p == n) {
        Some((name, _)) => name.to_string(),
        None => n.to_string(),
    }
}

/// A field's whole value as OVS's `mf_format` writes it.
pub fn format_value(fl: &Field, v: u128) -> String {
    value_text(fl, v, fl.all_ones())
}

/// A field's value (with its mask unless exact) as OVS's `mf_format`
/// writes it: a set_field's value.
pub(super) fn value_text(fl: &Field, v: u128, m: u128) -> String {
    let exact = m == fl.all_ones();
    match fl.fmt {
        Fmt::Ethernet if exact => mac(v as u64),
        Fmt::Ethernet => format!("{}/{}", mac(v as u64), mac(m as u64)),
        Fmt::Ipv4 => v4(v as u64, m as u64),
        Fmt::Ipv6 => v6(v, m),
        // OVS names the reserved ports (`set_field:ANY->in_port`).
        Fmt::Port if exact => port_text(v as PortNo, &NumericPorts),
        Fmt::Decimal if exact => v.to_string(),
        _ if exact => c_hex(v),
        _ => format!("{}/{}", c_hex(v), c_hex(m)),
    }
}

/// A MAC address held in the low 48 bits.
pub(super) fn mac(v: u64) -> String {
    let b = v.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// An IPv4 address as OVS writes it: alone when exact, `/N` for a
/// prefix, else with its mask.
pub(super) fn v4(v: u64, mk: u64) -> String {
    let a = Ipv4Addr::from(v as u32);
    let m = mk as u32;
    if m == u32::MAX {
        a.to_string()
    } else if m.leading_ones() + m.trailing_zeros() == 32 {
        format!("{a}/{}", m.leading_ones())
    } else {
        format!("{a}/{}", Ipv4Addr::from(m))
    }
}

/// An IPv6 address, the same way.
pub(super) fn v6(v: u128, m: u128) -> String {
    let a = Ipv6Addr::from(v);
    if m == u128::MAX {
        a.to_string()
    } else if m.leading_ones() + m.trailing_zeros() == 128 {
        format!("{a}/{}", m.leading_ones())
    } else {
        format!("{a}/{}", Ipv6Addr::from(m))
    }
}

/// A subfield's text (`NXM_NX_REG13[0..15]`, `reg0[]`).
pub(super) fn subfield(p: &Parser, t: Tok, s: &str) -> Result<SubField, FlowError> {
    SubField::parse(s).map_err(|e| p.err(t, e.to_string()))
}

/// A field an action reads or writes needs its prerequisites in the
/// rule's match (OVS's `MATCH_INCONSISTENT`).
pub(super) fn needs(
    p: &Parser,
    t: Tok,
    what: &str,
    fl: &Field,
    m: Option<&Match>,
) -> Result<(), FlowError> {
    match m {
        Some(m) if fl.prereq != Prereq::None && !fl.prereq.met(&m.value, &m.mask) => Err(p.err(
            t,
            format!("{what} on {}: the rule {}", fl.name, fl.prereq.hint()),
        )),
        _ => Ok(()),
    }
}
