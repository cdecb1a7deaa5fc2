//! The conntrack actions' text, both ways: `ct(...)` with its `nat(...)`
//! and `exec(...)`, read as `ovs-actions(7)` writes them and printed as
//! OVS's `format_CT` and `format_NAT` print them.

use super::text::{needs, parse_u64, split, subfield, Parser, Tok};
use super::*;

/// `ct(commit,force,table=T,zone=Z|SUBFIELD,alg=ftp|tftp,nat[(...)],exec(...))`
/// as `ovs-actions(7)` has it.
/// The action parser, as `ct` is given it: text at a byte offset.
pub(super) type ParseActions<'a> = dyn Fn(&str, usize) -> Result<Vec<Action>, FlowError> + 'a;

/// `exec` reads the actions of an `exec(...)` (the action parser, passed
/// in: the grammar is recursive, the modules are not).
pub(super) fn ct(
    p: &Parser,
    t: Tok,
    v: &str,
    m: Option<&Match>,
    exec: &ParseActions<'_>,
) -> Result<Action, FlowError> {
    let inner = v
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            p.err(
                t,
                "ct: expected ct(commit,table=T,zone=Z,nat(...),exec(...))",
            )
        })?;
    let at = t.at + t.s.find('(').map_or(0, |i| i + 1);
    let mut ct = Ct::default();
    for kv in split(inner, at, false) {
        let end = kv.s.find(['=', '(']).unwrap_or(kv.s.len());
        let (k, val) = (
            &kv.s[..end],
            kv.s[end..].strip_prefix('=').unwrap_or(&kv.s[end..]),
        );
        match k {
            "commit" if val.is_empty() => ct.commit = true,
            "force" if val.is_empty() => ct.force = true,
            "table" => ct.table = Some(p.num(kv, "ct table", val, 254)? as u8),
            "zone" => {
                ct.zone = match parse_u64(val) {
                    Some(z) if z <= u64::from(u16::MAX) => CtZone::Imm(z as u16),
                    Some(_) => return Err(p.err(kv, "ct: zone is 0 to 65535")),
                    None => {
                        let sf = subfield(p, kv, val)?;
                        if sf.n_bits != 16 {
                            return Err(p.err(
                                kv,
                                format!("ct: a zone field is 16 bits, {sf} is {}", sf.n_bits),
                            ));
                        }
                        needs(p, kv, "ct zone", sf.field, m)?;
                        CtZone::Field(sf)
                    }
                }
            }
            "alg" => {
                ct.alg = match val {
                    "ftp" => 21,
                    "tftp" => 69,
                    _ => p.num(kv, "ct alg", val, u16::MAX as u64)? as u16,
                }
            }
            "nat" => ct.nat = Some(nat(p, kv, val)?),
            "exec" => {
                let body = val
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| p.err(kv, "ct: expected exec(ACTIONS)"))?;
                if !body.trim().is_empty() {
                    let at = kv.at + kv.s.find('(').map_or(0, |i| i + 1);
                    p.ct_exec.set(true);
                    let acts = exec(body, at);
                    p.ct_exec.set(false);
                    for a in acts? {
                        match a {
                            Action::SetField { .. } | Action::Move { .. } => ct.exec.push(a),
                            _ => return Err(p.err(kv, "ct: exec(...) holds set_field, load and move of ct_mark and ct_label")),
                        }
                    }
                }
            }
            _ => {
                return Err(p.err(
                    kv,
                    format!(
                        "ct: unknown argument '{}' (commit, force, table, zone, alg, nat, exec)",
                        kv.s
                    ),
                ))
            }
        }
    }
    if ct.force && !ct.commit {
        return Err(p.err(t, "ct: \"force\" needs \"commit\""));
    }
    // OVS's check_CT: conntrack is for IP packets.
    if let Some(m) = m {
        if m.mask.get(f::DL_TYPE) == 0 || !matches!(m.value.get(f::DL_TYPE), 0x0800 | 0x86dd) {
            return Err(p.err(t, "ct: needs 'ip,' or 'ipv6,' (or a protocol over them) in the match (OVS's MATCH_INCONSISTENT)"));
        }
    }
    Ok(Action::Ct(Box::new(ct)))
}

/// `nat` or `nat(src|dst[=RANGE][,persistent][,hash][,random])`.
fn nat(p: &Parser, t: Tok, v: &str) -> Result<Nat, FlowError> {
    let mut n = Nat::default();
    if v.is_empty() {
        return Ok(n);
    }
    let inner = v
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| p.err(t, "ct: expected nat or nat(src=ADDR[-ADDR][:PORT[-PORT]])"))?;
    for kv in inner.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, val) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "src" | "dst" => {
                if n.kind.is_some() {
                    return Err(p.err(t, "nat: src or dst, not both"));
                }
                n.kind = Some(if k == "src" {
                    NatKind::Src
                } else {
                    NatKind::Dst
                });
                if !val.is_empty() {
                    (n.addrs, n.ports) = nat_range(val).ok_or_else(|| {
                        p.err(
                            t,
                            format!(
                                "nat: bad range '{val}' (ADDR[-ADDR][:PORT[-PORT]], IPv6 in [])"
                            ),
                        )
                    })?;
                }
            }
            "persistent" if val.is_empty() => n.persistent = true,
            "hash" if val.is_empty() => n.hash = true,
            "random" if val.is_empty() => n.random = true,
            _ => {
                return Err(p.err(
                    t,
                    format!("nat: unknown argument '{kv}' (src, dst, persistent, hash, random)"),
                ))
            }
        }
    }
    if n.hash && n.random {
        return Err(p.err(t, "nat: hash or random, not both"));
    }
    Ok(n)
}

/// `ADDR[-ADDR][:PORT[-PORT]]`, an IPv6 address in brackets when a port
/// follows; ranges not backwards.
#[allow(clippy::type_complexity)]
fn nat_range(s: &str) -> Option<(Option<(IpAddr, IpAddr)>, Option<(u16, u16)>)> {
    fn addr(s: &str) -> Option<IpAddr> {
        s.trim_start_matches('[').trim_end_matches(']').parse().ok()
    }
    // The ports follow the last ':' after a ']' (IPv6) or the only ':'.
    let (addrs, ports) = if let Some(close) = s.rfind(']') {
        match s[close..].find(':') {
            Some(i) => (&s[..close + i], Some(&s[close + i + 1..])),
            None => (s, None),
        }
    } else if s.matches(':').count() == 1 {
        let (a, b) = s.split_once(':')?;
        (a, Some(b))
    } else {
        (s, None)
    };
    let (lo, hi) = match addrs.split_once("]-") {
        Some((a, b)) => (addr(a)?, addr(b)?),
        None => match addrs.split_once('-') {
            Some((a, b)) if !addrs.starts_with('[') => (addr(a)?, addr(b)?),
            _ => (addr(addrs)?, addr(addrs)?),
        },
    };
    if lo.is_ipv4() != hi.is_ipv4() || lo > hi {
        return None;
    }
    let ports = match ports {
        None => None,
        Some(p) => {
            let (a, b) = p.split_once('-').unwrap_or((p, p));
            let (a, b): (u16, u16) = (a.parse().ok()?, b.parse().ok()?);
            if a > b {
                return None;
            }
            Some((a, b))
        }
    };
    Some((Some((lo, hi)), ports))
}

/// `ct(...)` as OVS's `format_CT` writes it: only what is set, nat
/// before exec, the helper last.
/// `action` writes one of `exec`'s actions (the action printer, passed
/// in).
pub(super) fn format_ct(
    s: &mut String,
    ct: &Ct,
    ports: &dyn PortNames,
    action: &dyn Fn(&mut String, &Action, &dyn PortNames),
) {
    let mut parts: Vec<String> = Vec::new();
    if ct.commit {
        parts.push("commit".into());
    }
    if ct.force {
        parts.push("force".into());
    }
    if let Some(t) = ct.table {
        parts.push(format!("table={t}"));
    }
    match ct.zone {
        CtZone::Zero | CtZone::Imm(0) => {}
        CtZone::Imm(z) => parts.push(format!("zone={z}")),
        CtZone::Field(sf) => parts.push(format!("zone={sf}")),
    }
    if let Some(n) = &ct.nat {
        parts.push(format_nat(n));
    }
    if !ct.exec.is_empty() {
        let mut e = String::new();
        for (i, a) in ct.exec.iter().enumerate() {
            if i > 0 {
                e.push(',');
            }
            action(&mut e, a, ports);
        }
        parts.push(format!("exec({e})"));
    }
    match ct.alg {
        0 => {}
        21 => parts.push("alg=ftp".into()),
        69 => parts.push("alg=tftp".into()),
        n => parts.push(format!("alg={n}")),
    }
    let _ = write!(s, "ct({})", parts.join(","));
}

/// `nat(...)` as OVS's `format_NAT` writes it (the flags only with a
/// range, as OVS prints them).
pub fn format_nat(n: &Nat) -> String {
    let Some(kind) = n.kind else {
        return "nat".into();
    };
    let mut s = String::from(if kind == NatKind::Src {
        "nat(src"
    } else {
        "nat(dst"
    });
    if let Some((lo, hi)) = n.addrs {
        let bracket = |ip: IpAddr| match ip {
            IpAddr::V6(a) if n.ports.is_some() => format!("[{a}]"),
            ip => ip.to_string(),
        };
        let _ = write!(s, "={}", bracket(lo));
        if hi != lo {
            let _ = write!(s, "-{}", bracket(hi));
        }
        if let Some((a, b)) = n.ports {
            let _ = write!(s, ":{a}");
            if b != a {
                let _ = write!(s, "-{b}");
            }
        }
        for (on, w) in [
            (n.persistent, "persistent"),
            (n.hash, "hash"),
            (n.random, "random"),
        ] {
            if on {
                let _ = write!(s, ",{w}");
            }
        }
    }
    s.push(')');
    s
}
