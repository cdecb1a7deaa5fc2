//! A rule printed back in ovs-ofctl's syntax, fields in the order and the
//! forms ovs-ofctl writes them.

use super::*;

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
        self.l2(out)?;
        self.l3(out)?;
        self.tunnel(out)
    }
}

/// How a match prints its fields: present or not, value, mask, and the
/// forms ovs-ofctl writes numbers and addresses in.
impl MatchDisplay<'_> {
    fn has(&self, p: FieldPos) -> bool {
        self.0.mask.get(p) != 0
    }

    fn val(&self, p: FieldPos) -> u64 {
        self.0.value.get(p)
    }

    fn msk(&self, p: FieldPos) -> u64 {
        self.0.mask.get(p)
    }

    /// `name=0xV,` or `name=0xV/0xM,`.
    fn num(&self, out: &mut fmt::Formatter<'_>, name: &str, p: FieldPos) -> fmt::Result {
        if self.msk(p) == p.max() {
            write!(out, "{name}={:#x},", self.val(p))
        } else {
            write!(out, "{name}={:#x}/{:#x},", self.val(p), self.msk(p))
        }
    }

    /// A transport port as OVS writes it: in decimal when exact, in hex
    /// with its mask (`tp_dst=80`, `tp_dst=0x1000/0xf000`).
    fn port(&self, out: &mut fmt::Formatter<'_>, name: &str, p: FieldPos) -> fmt::Result {
        if self.msk(p) == p.max() {
            write!(out, "{name}={},", self.val(p))
        } else {
            self.num(out, name, p)
        }
    }

    fn v6(&self, hi: FieldPos, lo: FieldPos) -> String {
        let a = Ipv6Addr::from(((self.val(hi) as u128) << 64) | self.val(lo) as u128);
        let mk = ((self.msk(hi) as u128) << 64) | self.msk(lo) as u128;
        if mk == u128::MAX {
            a.to_string()
        } else {
            format!("{a}/{}", Ipv6Addr::from(mk))
        }
    }

    /// The port, the Ethernet type (as a shorthand where one fits), the
    /// addresses and the VLAN.
    fn l2(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (has, val, msk) = (|p| self.has(p), |p| self.val(p), |p| self.msk(p));
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
        Ok(())
    }

    /// IPv4 and IPv6 addresses, TOS, transport ports.
    fn l3(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (has, val, msk) = (|p| self.has(p), |p| self.val(p), |p| self.msk(p));
        let v6 = |hi, lo| self.v6(hi, lo);
        let port = |out: &mut fmt::Formatter<'_>, name: &str, p| self.port(out, name, p);
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
            port(out, "tp_src", f::TP_SRC)?;
        }
        if has(f::TP_DST) {
            port(out, "tp_dst", f::TP_DST)?;
        }
        Ok(())
    }

    /// The tunnel's id, addresses and metadata.
    fn tunnel(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (has, val, msk) = (|p| self.has(p), |p| self.val(p), |p| self.msk(p));
        let v6 = |hi, lo| self.v6(hi, lo);
        let num = |out: &mut fmt::Formatter<'_>, name: &str, p| self.num(out, name, p);
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

/// A MAC address held in the low 48 bits.
fn mac(v: u64) -> String {
    let b = v.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// An IPv4 address, with its mask unless it is exact.
fn v4(v: u64, mk: u64) -> String {
    let a = Ipv4Addr::from(v as u32);
    if mk == 0xffff_ffff {
        a.to_string()
    } else {
        format!("{a}/{}", Ipv4Addr::from(mk as u32))
    }
}
