//! Actions in ovs-ofctl's syntax, both ways: read from a rule's text, and
//! printed as `ovs-ofctl dump-flows` prints them (`ovs-actions(7)`).

use super::text::{
    c_hex, needs, parse_u64, port_text, split, subfield, tun_metadata_index, value_text, Parser,
    Tok,
};
use super::*;
use crate::field::{self, Field, SubField};

const ACTIONS: &str = "output:N, in_port, normal, flood, all, controller[:MAX_LEN], controller(reason=R,max_len=N,id=N,userdata=HEX,pause), drop, set_field:V[/M]->FIELD, load:V->FIELD[BITS], move:SRC[BITS]->DST[BITS], push:FIELD[BITS], pop:FIELD[BITS], note:HEX, dec_ttl, clone(ACTIONS), conjunction(ID,K/N), ct_clear, set_tunnel:N, set_tunnel64:N, push_vlan:TPID, pop_vlan, strip_vlan, mod_vlan_vid:N, mod_vlan_pcp:N, resubmit(P,T), resubmit:P";

/// Read a rule's actions; `m` is its match, which the fields the actions
/// write need their prerequisites in (as OVS checks them), or `None` for
/// a packet_out's actions (checked per packet).
pub(super) fn parse_actions(
    p: &Parser,
    s: &str,
    base: usize,
    m: Option<&Match>,
) -> Result<Vec<Action>, FlowError> {
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
        // The keyword ends at the first ':' or '(' (a clone's actions
        // hold colons of their own).
        let end = t.s.find([':', '(']).unwrap_or(t.s.len());
        let k = t.s[..end].trim();
        let v = t.s[end..].strip_prefix(':').unwrap_or(&t.s[end..]).trim();
        if k == "drop" && v.is_empty() {
            if toks.len() > 1 {
                return Err(p.err(t, "drop must be the only action"));
            }
            continue;
        }
        out.push(parse_action(p, t, k, v, m)?);
    }
    let conj = out
        .iter()
        .filter(|a| matches!(a, Action::Conjunction { .. }))
        .count();
    if conj > 0 && conj != out.iter().filter(|a| !matches!(a, Action::Note(_))).count() {
        return Err(FlowError::new(
            p.text,
            base,
            base + s.len().max(1),
            "conjunction: a rule with conjunction actions has no other actions (OVS's rule)",
        ));
    }
    Ok(out)
}

/// `conjunction(ID,K/N)`: clause K of N (1 <= K <= N, 2 <= N <= 64).
fn conjunction(p: &Parser, t: Tok, v: &str) -> Result<Action, FlowError> {
    let usage = "conjunction: expected conjunction(ID,K/N), 1 <= K <= N, 2 <= N <= 64";
    let inner = v
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| p.err(t, usage))?;
    let (id, kn) = inner.split_once(',').ok_or_else(|| p.err(t, usage))?;
    let (k, n) = kn.split_once('/').ok_or_else(|| p.err(t, usage))?;
    let id = p.num(t, "conjunction id", id.trim(), u32::MAX as u64)? as u32;
    let k = p.num(t, "conjunction clause", k.trim(), 64)?;
    let n = p.num(t, "conjunction clauses", n.trim(), 64)?;
    if n < 2 || k < 1 || k > n {
        return Err(p.err(t, usage));
    }
    Ok(Action::Conjunction {
        id,
        clause: (k - 1) as u8,
        n_clauses: n as u8,
    })
}

fn parse_action(
    p: &Parser,
    t: Tok,
    k: &str,
    v: &str,
    m: Option<&Match>,
) -> Result<Action, FlowError> {
    Ok(match k {
        "output" => match p.port(t, "output", v)? {
            // output:IN_PORT and the like are those actions.
            0xffff_fff8 => Action::InPort,
            0xffff_fffa => Action::Normal,
            0xffff_fffb | 0xffff_fffc => Action::Flood,
            0xffff_fffd => Action::controller(u16::MAX),
            n => Action::Output(n),
        },
        "in_port" | "IN_PORT" if v.is_empty() => Action::InPort,
        "normal" | "NORMAL" if v.is_empty() => Action::Normal,
        "flood" | "FLOOD" | "all" | "ALL" if v.is_empty() => Action::Flood,
        "controller" | "CONTROLLER" => controller(p, t, v)?,
        "pop_vlan" | "strip_vlan" if v.is_empty() => Action::PopVlan,
        "push_vlan" => {
            let tpid = p.num(t, "push_vlan", v, 0xffff)? as u16;
            if tpid != 0x8100 && tpid != 0x88a8 {
                return Err(p.err(
                    t,
                    format!("push_vlan: TPID {tpid:#06x} is neither 0x8100 (802.1Q) nor 0x88a8 (802.1ad)"),
                ));
            }
            Action::PushVlan(tpid)
        }
        "mod_vlan_vid" => Action::ModVlanVid(p.num(t, "mod_vlan_vid", v, 4095)? as u16),
        "mod_vlan_pcp" => Action::ModVlanPcp(p.num(t, "mod_vlan_pcp", v, 7)? as u8),
        "set_tunnel" => Action::SetTunId(p.num(t, "set_tunnel", v, u32::MAX as u64)?),
        "set_tunnel64" => Action::SetTunId(p.num(t, "set_tunnel64", v, u64::MAX)?),
        "set_field" => set_field(p, t, v, m)?,
        "load" => load(p, t, v, m)?,
        "move" => {
            let (src, dst) = v.split_once("->").ok_or_else(|| {
                p.err(
                    t,
                    "move: expected SRC[BITS]->DST[BITS], e.g. move:NXM_NX_REG14[]->NXM_NX_REG15[]",
                )
            })?;
            let (src, dst) = (subfield(p, t, src)?, subfield(p, t, dst)?);
            if src.n_bits != dst.n_bits {
                return Err(p.err(
                    t,
                    format!(
                        "move: {src} is {} bits and {dst} {}: they must be as wide",
                        src.n_bits, dst.n_bits
                    ),
                ));
            }
            writable(p, t, "move", dst.field)?;
            needs(p, t, "move", src.field, m)?;
            needs(p, t, "move", dst.field, m)?;
            Action::Move { src, dst }
        }
        "push" => {
            let sf = subfield(p, t, v)?;
            needs(p, t, "push", sf.field, m)?;
            Action::Push(sf)
        }
        "pop" => {
            let sf = subfield(p, t, v)?;
            writable(p, t, "pop", sf.field)?;
            needs(p, t, "pop", sf.field, m)?;
            Action::Pop(sf)
        }
        "note" => Action::Note(note_bytes(p, t, v)?),
        "dec_ttl" if v.is_empty() => {
            needs(p, t, "dec_ttl", &field::NW_TTL, m)?;
            Action::DecTtl
        }
        "dec_ttl" => {
            needs(p, t, "dec_ttl", &field::NW_TTL, m)?;
            let inner = v
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| p.err(t, "dec_ttl: expected dec_ttl or dec_ttl(ID,...)"))?;
            let ids = inner
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|id| {
                    p.num(t, "dec_ttl controller id", id, u16::MAX as u64)
                        .map(|n| n as u16)
                })
                .collect::<Result<Vec<u16>, _>>()?;
            Action::DecTtlIds(ids)
        }
        "clone" => {
            let inner = v
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| p.err(t, "clone: expected clone(ACTIONS)"))?;
            let at = t.at + t.s.find('(').map_or(0, |i| i + 1);
            if inner.trim().is_empty() {
                Action::Clone(Vec::new())
            } else {
                Action::Clone(parse_actions(p, inner, at, m)?)
            }
        }
        "conjunction" => conjunction(p, t, v)?,
        "ct" => super::conntrack::ct(p, t, v, m, &|body, at| parse_actions(p, body, at, m))?,
        "ct_clear" if v.is_empty() => Action::CtClear,
        _ if k.starts_with("resubmit") => parse_resubmit(p, t)?,
        _ if v.is_empty() && parse_u64(k).is_some() => Action::Output(p.port(t, "output", k)?),
        _ => match p.ports.port_no(t.s) {
            Some(no) if v.is_empty() => Action::Output(no),
            _ => return Err(p.err(t, format!("unknown action '{}' (known: {ACTIONS})", t.s))),
        },
    })
}

/// `set_field:VALUE[/MASK]->FIELD`: the tunnel's fields as their own
/// actions, every other writable field as [`Action::SetField`].
fn set_field(p: &Parser, t: Tok, v: &str, m: Option<&Match>) -> Result<Action, FlowError> {
    let (val, name) = v.split_once("->").ok_or_else(|| {
        p.err(
            t,
            "set_field: expected VALUE->FIELD, e.g. set_field:10.0.0.2->tun_dst",
        )
    })?;
    let (val, name) = (val.trim(), name.trim());
    Ok(match name {
        "tun_dst" | "tun_ipv6_dst" => Action::SetTunDst(p.ip_any(t, name, val)?),
        "tun_src" | "tun_ipv6_src" => Action::SetTunSrc(p.ip_any(t, name, val)?),
        // A masked one (OVN's set_field:0x2/0xffffff->tun_id) is the
        // general set_field below.
        "tun_id" | "tunnel_id" if !val.contains('/') => {
            Action::SetTunId(p.num(t, name, val, u64::MAX)?)
        }
        _ if name.starts_with("tun_metadata") => {
            let n = tun_metadata_index(p, t, name)?;
            Action::SetTunMetadata(n as u8, p.num(t, name, val, u32::MAX as u64)? as u32)
        }
        _ => {
            let fl = field::by_name(name)
                .ok_or_else(|| p.err(t, format!("set_field: '{name}' is not a field")))?;
            writable(p, t, "set_field", fl)?;
            needs(p, t, "set_field", fl, m)?;
            let (value, mask) = p.field_value(t, name, fl, val)?;
            Action::SetField {
                field: fl,
                value: value & mask,
                mask,
                load: false,
            }
        }
    })
}

/// `load:VALUE->FIELD[BITS]`, which OVS keeps as a masked set_field.
fn load(p: &Parser, t: Tok, v: &str, m: Option<&Match>) -> Result<Action, FlowError> {
    let (val, dst) = v.split_once("->").ok_or_else(|| {
        p.err(
            t,
            "load: expected VALUE->FIELD[BITS], e.g. load:0x1->NXM_NX_REG0[5]",
        )
    })?;
    let dst = subfield(p, t, dst)?;
    writable(p, t, "load", dst.field)?;
    needs(p, t, "load", dst.field, m)?;
    let value = p.wide(t, "load", val.trim())?;
    if dst.n_bits < 128 && value >> dst.n_bits != 0 {
        return Err(p.err(
            t,
            format!("load: {val} does not fit in {dst}'s {} bits", dst.n_bits),
        ));
    }
    Ok(Action::SetField {
        field: dst.field,
        value: value << dst.ofs,
        mask: dst.mask(),
        load: true,
    })
}

/// The fields tunlab's pipeline writes: its own (metadata, registers,
/// in_port) and the packet's headers, which a datapath rewrites before
/// output. The tunnel's are their own actions; conntrack's are written
/// by `ct`; VLAN fields by the VLAN actions.
fn writable(p: &Parser, t: Tok, what: &str, fl: &Field) -> Result<(), FlowError> {
    if p.ct_exec.get() {
        return if matches!(fl.name, "ct_mark" | "ct_label") {
            Ok(())
        } else {
            Err(p.err(
                t,
                format!(
                    "ct: exec(...) writes ct_mark and ct_label only, not {}",
                    fl.name
                ),
            ))
        };
    }
    // The tunnel's id and options are written for the next tunnel
    // output; its addresses only through set_field.
    let tunnel_ok = fl.name == "tun_id" || fl.name.starts_with("tun_metadata");
    let ok = fl.writable
        && (tunnel_ok || !fl.name.starts_with("tun_"))
        && !fl.name.starts_with("ct_")
        && !fl.name.starts_with("vlan")
        && !matches!(fl.name, "pkt_mark" | "tcp_flags" | "ip_frag");
    if ok {
        Ok(())
    } else {
        Err(p.err(
            t,
            format!(
                "{what}: tunlab does not write {} this way (it writes metadata, registers, in_port, tun_id, tun_metadataN and the packet's Ethernet, IP, ARP, ND, ICMP and port fields; set_field writes the tunnel's addresses, mod_vlan_vid/mod_vlan_pcp the VLAN)",
                fl.name
            ),
        ))
    }
}

/// `controller`, `controller:MAX_LEN` or `controller(KEY[=VALUE],...)`
/// with OVS's keys: reason, max_len, id, userdata (hex bytes), pause.
fn controller(p: &Parser, t: Tok, v: &str) -> Result<Action, FlowError> {
    let mut a = Action::controller(u16::MAX);
    if v.is_empty() {
        return Ok(a);
    }
    let Some(inner) = v.strip_prefix('(').and_then(|r| r.strip_suffix(')')) else {
        if let Action::Controller { max_len, .. } = &mut a {
            *max_len = p.num(t, "controller max_len", v, u16::MAX as u64)? as u16;
        }
        return Ok(a);
    };
    let Action::Controller {
        max_len,
        reason,
        id,
        userdata,
        pause,
    } = &mut a
    else {
        unreachable!("Action::controller makes a controller action")
    };
    for kv in inner.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
        let (k, val) = match kv.split_once('=') {
            Some((k, val)) => (k.trim(), val.trim()),
            None => (kv, ""),
        };
        match k {
            "reason" => {
                *reason = PacketInReason::from_name(val).ok_or_else(|| {
                    p.err(
                        t,
                        format!("controller: unknown reason \"{val}\" (no_match, action, invalid_ttl, action_set, group, packet_out)"),
                    )
                })?
            }
            "max_len" => *max_len = p.num(t, "controller max_len", val, u16::MAX as u64)? as u16,
            "id" => *id = p.num(t, "controller id", val, u16::MAX as u64)? as u16,
            "userdata" => {
                *userdata = hex_bytes(val)
                    .ok_or_else(|| p.err(t, "controller: bad hex digit in userdata (e.g. userdata=00.01.ab)"))?
            }
            "pause" if val.is_empty() => *pause = true,
            "meter_id" => {
                return Err(p.err(t, "controller: meter_id: this switch has no meters"));
            }
            _ => {
                return Err(p.err(
                    t,
                    format!("controller: unknown key \"{k}\" (reason, max_len, id, userdata, pause)"),
                ))
            }
        }
    }
    Ok(a)
}

/// Hex bytes, any pair separated from the next by `.` (OVS's
/// `ofpbuf_put_hex`); `None` if not so.
fn hex_bytes(v: &str) -> Option<Vec<u8>> {
    let hex: String = v.chars().filter(|c| *c != '.').collect();
    if !hex.len().is_multiple_of(2) || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    Some(
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0))
            .collect(),
    )
}

/// `note:` bytes as OVS writes them: hex pairs, any separated by `.`.
fn note_bytes(p: &Parser, t: Tok, v: &str) -> Result<Vec<u8>, FlowError> {
    hex_bytes(v).ok_or_else(|| p.err(t, "note: expected hex bytes, e.g. note:01.02.ab"))
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
    let mut parts = inner.split(',');
    let a = parts.next().unwrap_or("");
    let b = parts.next().unwrap_or("");
    if let Some(extra) = parts.next() {
        return Err(p.err(
            t,
            format!("resubmit: '{}' is not built (resubmit(PORT,TABLE) only; the ct form waits for conntrack)", extra.trim()),
        ));
    }
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

/// The controller action as OVS's `format_CONTROLLER` writes it: the
/// plain one as OpenFlow's output to CONTROLLER, the rest with only what
/// differs from the defaults, in OVS's order.
fn format_controller(s: &mut String, a: &Action) {
    let _ = match a {
        Action::Controller {
            max_len,
            reason: PacketInReason::Action,
            id: 0,
            userdata,
            pause: false,
        } if userdata.is_empty() => write!(s, "CONTROLLER:{max_len}"),
        Action::Controller {
            max_len,
            reason,
            id,
            userdata,
            pause,
        } => {
            // OVS's order; only what differs from the defaults.
            let mut parts = Vec::new();
            if *reason != PacketInReason::Action {
                parts.push(format!("reason={}", reason.name()));
            }
            if *max_len != u16::MAX {
                parts.push(format!("max_len={max_len}"));
            }
            if *id != 0 {
                parts.push(format!("id={id}"));
            }
            if !userdata.is_empty() {
                let hex: Vec<String> = userdata.iter().map(|x| format!("{x:02x}")).collect();
                parts.push(format!("userdata={}", hex.join(".")));
            }
            if *pause {
                parts.push("pause".into());
            }
            write!(s, "controller({})", parts.join(","))
        }
        _ => Ok(()),
    };
}

/// Write `a` as `ovs-ofctl dump-flows` writes it.
pub(super) fn format_action(s: &mut String, a: &Action, ports: &dyn PortNames) {
    let port = |n: PortNo| port_text(n, ports);
    let _ = match a {
        Action::Output(n) => write!(s, "output:{}", port(*n)),
        Action::InPort => write!(s, "in_port"),
        Action::Normal => write!(s, "normal"),
        Action::Flood => write!(s, "flood"),
        Action::Controller { .. } => {
            format_controller(s, a);
            Ok(())
        }
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
        Action::SetField {
            field,
            value,
            mask,
            load: true,
        } => {
            let sf = bits_of(field, *mask);
            write!(s, "load:{}->{sf}", c_hex(value >> sf.ofs))
        }
        Action::SetField {
            field, value, mask, ..
        } => write!(
            s,
            "set_field:{}->{}",
            value_text(field, *value, *mask),
            field.name
        ),
        Action::Move { src, dst } => write!(s, "move:{src}->{dst}"),
        Action::Push(sf) => write!(s, "push:{sf}"),
        Action::Pop(sf) => write!(s, "pop:{sf}"),
        Action::Note(b) => {
            let hex: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
            write!(s, "note:{}", hex.join("."))
        }
        Action::DecTtl => write!(s, "dec_ttl"),
        Action::DecTtlIds(ids) => {
            let ids: Vec<String> = ids.iter().map(u16::to_string).collect();
            write!(s, "dec_ttl({})", ids.join(","))
        }
        Action::Ct(ct) => {
            super::conntrack::format_ct(s, ct, ports, &format_action);
            Ok(())
        }
        Action::CtClear => write!(s, "ct_clear"),
        Action::Conjunction {
            id,
            clause,
            n_clauses,
        } => write!(s, "conjunction({id},{}/{n_clauses})", clause + 1),
        Action::Clone(inner) => {
            s.push_str("clone(");
            for (i, a) in inner.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                format_action(s, a, ports);
            }
            write!(s, ")")
        }
    };
}

/// The contiguous bits `mask` covers in `field`, as a subfield (a load's
/// destination).
fn bits_of(field: &'static Field, mask: u128) -> SubField {
    let ofs = mask.trailing_zeros().min(127);
    let n_bits = (128 - mask.leading_zeros()).saturating_sub(ofs).max(1);
    SubField { field, ofs, n_bits }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{format_flow, parse_flow, NumericPorts};

    fn parse(s: &str) -> Result<FlowRule, FlowError> {
        parse_flow(s, &NumericPorts)
    }

    /// Actions OVN writes, as Open vSwitch 3.1 printed them in
    /// `shared/ovn/flows-ch1.txt`: each reads and prints back unchanged.
    #[test]
    fn ovns_field_actions_print_as_ovs_printed_them() {
        for text in [
            "priority=100,in_port=1 actions=move:NXM_NX_TUN_ID[0..23]->OXM_OF_METADATA[0..23],move:NXM_NX_TUN_METADATA0[16..30]->NXM_NX_REG14[0..14],move:NXM_NX_TUN_METADATA0[0..15]->NXM_NX_REG15[0..15],resubmit(,40)",
            "priority=100,in_port=2 actions=set_field:0x6->reg13,set_field:0x2->reg11,set_field:0x7->reg12,set_field:0x2->metadata,set_field:0x2->reg14,resubmit(,8)",
            "table=10,priority=50,reg0=0x8000/0x8000,metadata=0x1 actions=set_field:0/0x1000->reg10,set_field:0/0xffffffff000000000000000000000000->xxreg0,resubmit(,11)",
            "table=11,priority=90,arp,metadata=0x1,arp_tpa=10.0.1.1,arp_op=1 actions=push:NXM_NX_REG0[],push:NXM_NX_XXREG0[],move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:00:00:00:00:01:01->eth_src,set_field:2->arp_op,move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],set_field:00:00:00:00:01:01->arp_sha,move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],set_field:10.0.1.1->arp_spa,move:NXM_NX_REG14[]->NXM_NX_REG15[],set_field:0->in_port,pop:NXM_NX_XXREG0[],pop:NXM_NX_REG0[],resubmit(,37)",
            "table=12,priority=90,icmp,metadata=0x3,nw_dst=10.0.1.1,icmp_type=8,icmp_code=0 actions=push:NXM_OF_IP_SRC[],push:NXM_OF_IP_DST[],pop:NXM_OF_IP_SRC[],pop:NXM_OF_IP_DST[],set_field:255->nw_ttl,set_field:0->icmp_type,set_field:0x1/0x1->xreg4,resubmit(,13)",
            "table=13,priority=100,ip,metadata=0x3 actions=dec_ttl,move:NXM_NX_REG10[6]->OXM_OF_PKT_REG4[2],note:00.01.02.03,clone(ct_clear,set_field:0x1->reg0,resubmit(,14))",
            "table=14 actions=load:0x1->NXM_NX_REG10[7],load:0->NXM_NX_REG0[0..15]",
        ] {
            let r = parse(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(format_flow(&r, &NumericPorts), text);
        }
    }

    /// The controller action in OVS's forms: the plain one prints as
    /// OpenFlow's output to CONTROLLER, the rest as `controller(...)`
    /// with only what differs from the defaults, in OVS's order
    /// (`format_CONTROLLER`); OVN's DHCP rule from flows-ch1.txt among
    /// them.
    #[test]
    fn controller_actions_print_as_ovs_prints_them() {
        for (text, printed) in [
            ("actions=controller", "actions=CONTROLLER:65535"),
            ("actions=CONTROLLER:128", "actions=CONTROLLER:128"),
            ("actions=output:CONTROLLER", "actions=CONTROLLER:65535"),
            ("actions=controller()", "actions=CONTROLLER:65535"),
            ("actions=controller(max_len=64)", "actions=CONTROLLER:64"),
            (
                "actions=controller(pause,userdata=0a.0B,id=3,max_len=100,reason=no_match)",
                "actions=controller(reason=no_match,max_len=100,id=3,userdata=0a.0b,pause)",
            ),
            (
                "table=28,priority=100,udp,reg14=0x2,metadata=0x2,dl_src=0a:00:00:00:01:11,nw_src=0.0.0.0,nw_dst=255.255.255.255,tp_src=68,tp_dst=67 actions=controller(userdata=00.00.00.02.00.00.00.00.00.01.de.10.00.00.00.63.0a.00.01.0b.33.04.00.00.0e.10.01.04.ff.ff.ff.00.03.04.0a.00.01.01.36.04.0a.00.01.01,pause),resubmit(,29)",
                "",
            ),
            ("actions=controller(reason=invalid_ttl)", "actions=controller(reason=invalid_ttl)"),
        ] {
            let r = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let want = if printed.is_empty() { text } else { printed };
            assert_eq!(format_flow(&r, &NumericPorts), want);
        }
        for (text, says) in [
            ("actions=controller(reason=later)", "unknown reason"),
            ("actions=controller(userdata=0g)", "bad hex"),
            ("actions=controller(max_len=70000)", "max_len"),
            ("actions=controller(meter_id=1)", "no meters"),
            ("actions=controller(colour=red)", "unknown key"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.msg.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn field_actions_are_refused_with_a_reason() {
        for (text, says) in [
            ("ip actions=set_field:1->tcp_dst", "needs 'tcp,'"),
            ("actions=set_field:10.0.0.1->ip_src", "needs 'ip,'"),
            (
                "actions=move:NXM_NX_REG0[0..3]->NXM_NX_REG1[0..4]",
                "as wide",
            ),
            ("actions=move:NXM_NX_REG0[]", "expected SRC"),
            ("actions=set_field:1->dl_type", "does not write"),
            ("actions=set_field:1->ct_mark", "does not write"),
            ("actions=push:NXM_NX_REG99[]", "not a field"),
            ("actions=load:0x10->NXM_NX_REG0[0..3]", "does not fit"),
            ("actions=note:0x", "hex bytes"),
            ("actions=resubmit(,1,ct)", "not built"),
            ("ip actions=set_field:300->nw_ttl", "out of range"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.msg.contains(says), "{text}: {e}");
        }
    }
}
