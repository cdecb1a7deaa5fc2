//! `ofproto/trace` for tunlab: a packet's way through the flow tables, as
//! Open vSwitch's `ovs-appctl ofproto/trace` prints it: the flow, each
//! table's rule (or "No match.") with the actions it ran, nested where a
//! resubmit comes back, then the final flow, the megaflow and the
//! datapath's steps. Fields and actions are in OVS's own syntax, so the
//! two traces read side by side.

use super::{DropReason, Op, Pipeline};
use crate::classifier::Classifier;
use crate::flow::{
    format_match, format_packet, Action, FlowRule, Match, Nat, NatKind, NumericPorts,
};
use crate::key::f;
use crate::key::FlowKey;
use std::fmt::Write as _;
use std::net::IpAddr;

/// What a trace collects while the translation runs.
#[derive(Debug, Clone, Default)]
pub(super) struct Lines {
    lines: Vec<String>,
    indent: usize,
    pub final_key: FlowKey,
}

/// A finished trace.
#[derive(Debug, Clone)]
pub struct Trace {
    pub flow: FlowKey,
    pub lines: Vec<String>,
    pub final_flow: FlowKey,
    /// The megaflow mask of the decision.
    pub megaflow: FlowKey,
    pub ops: Vec<Op>,
    pub result: Result<(), DropReason>,
    /// The recirculation this pass is (0: the packet as it came in), and
    /// what OVS prints between the rulers before it.
    pub recirc_id: u32,
    pub banner: Vec<String>,
    /// The passes the `ct(table=T)` actions forked, in the order OVS
    /// takes them (first forked, first traced; theirs after).
    pub recircs: Vec<Trace>,
}

/// How many recirculations a trace follows (OVS stops at 4096).
const MAX_RECIRCS: usize = 64;

/// conntrack state bits (`ovs-fields(7)` ct_state), in OVS's order.
const CT_STATE_BITS: [(&str, u64); 8] = [
    ("new", 0x01),
    ("est", 0x02),
    ("rel", 0x04),
    ("rpl", 0x08),
    ("inv", 0x10),
    ("trk", 0x20),
    ("snat", 0x40),
    ("dnat", 0x80),
];

/// `--ct-next`'s states: flag names joined by `,` or `|` (`trk,new`).
pub fn parse_ct_state(s: &str) -> Result<u64, String> {
    let mut v = 0;
    for w in s.split([',', '|']).map(str::trim).filter(|w| !w.is_empty()) {
        let w = w.trim_start_matches('+');
        let (_, bit) = CT_STATE_BITS.iter().find(|(n, _)| *n == w).ok_or_else(|| {
            format!("--ct-next: '{w}' is not a conntrack state (new, est, rel, rpl, inv, trk, snat, dnat)")
        })?;
        v |= bit;
    }
    if v != 0 && v & 0x20 == 0 {
        return Err(format!(
            "--ct-next: '{s}' lacks trk (every state but none is tracked)"
        ));
    }
    Ok(v)
}

fn ct_state_text(v: u64) -> String {
    let names: Vec<&str> = CT_STATE_BITS
        .iter()
        .filter(|(_, b)| v & b != 0)
        .map(|(n, _)| *n)
        .collect();
    names.join("|")
}

impl Pipeline {
    /// Trace `key` through the tables of `c`, counting nothing against
    /// any rule; recirculations get `trk|new`.
    pub fn trace(&mut self, c: &mut Classifier, key: &FlowKey, now: u64) -> Trace {
        self.trace_ct(c, key, now, &[])
    }

    /// [`Pipeline::trace`], then every recirculation a `ct(table=T)`
    /// forked, each with the next of `ct_next` as its conntrack state
    /// (`trk|new` when they run out), as `ofproto/trace --ct-next` does.
    pub fn trace_ct(
        &mut self,
        c: &mut Classifier,
        key: &FlowKey,
        now: u64,
        ct_next: &[u64],
    ) -> Trace {
        self.recircs.clear();
        self.next_recirc = 1;
        let mut first = self.trace_pass(c, key, now, 0, Vec::new());
        let mut states = ct_next.iter();
        let mut queue: std::collections::VecDeque<super::Recirc> =
            std::mem::take(&mut self.recircs).into();
        while let Some(r) = queue.pop_front() {
            if first.recircs.len() >= MAX_RECIRCS {
                break;
            }
            let mut banner = Vec::new();
            let state = match states.next() {
                Some(s) => {
                    banner.push(format!(
                        "recirc({:#x}) - resume conntrack with ct_state={}",
                        r.id,
                        ct_state_text(*s)
                    ));
                    *s
                }
                None => {
                    banner.push(format!("recirc({:#x}) - resume conntrack with default ct_state=trk|new (use --ct-next to customize)", r.id));
                    0x21
                }
            };
            let mut k = r.key;
            k.set(f::RECIRC_ID, u64::from(r.id));
            k.set(f::CT_STATE, state);
            k.set(f::CT_ZONE, u64::from(r.zone));
            if let Some(n) = r.nat {
                banner.push("Replacing src/dst IP/ports to simulate NAT:".into());
                banner.push(format!(" Initial flow: {}", ip_flow(&k, &n)));
                simulate_nat(&mut k, &n);
                banner.push(format!(" Modified flow: {}", ip_flow(&k, &n)));
            }
            self.start_at = Some((r.table, r.stack.clone()));
            let mut pass = self.trace_pass(
                c,
                &k,
                now,
                r.id,
                vec![
                    "    thaw".into(),
                    format!("        Resuming from table {}", r.table),
                ],
            );
            pass.banner = banner;
            queue.extend(std::mem::take(&mut self.recircs));
            first.recircs.push(pass);
        }
        first
    }

    /// One pass of a trace: `lines` first (a recirculation's thaw).
    fn trace_pass(
        &mut self,
        c: &mut Classifier,
        key: &FlowKey,
        now: u64,
        recirc_id: u32,
        lines: Vec<String>,
    ) -> Trace {
        self.tracing = Some(Lines {
            lines,
            ..Lines::default()
        });
        let mut ops = Vec::new();
        let (result, megaflow) = self.decide_megaflow(c, key, now, &mut ops);
        let t = self.tracing.take().unwrap_or_default();
        Trace {
            flow: *key,
            lines: t.lines,
            final_flow: t.final_key,
            megaflow,
            ops,
            result,
            recirc_id,
            banner: Vec::new(),
            recircs: Vec::new(),
        }
    }

    /// An action's line of text (a nested action, an outcome `-> ...`).
    pub(super) fn trace_text(&mut self, text: String) {
        self.trace_line(true, text);
    }

    /// A table's line (`action`: false) or an action's, indented as OVS
    /// indents them: a table nested `d` resubmits deep by 4d, its actions
    /// by 4 at the top and 8d + 4 below.
    fn trace_line(&mut self, action: bool, text: String) {
        if let Some(t) = self.tracing.as_mut() {
            let d = t.indent;
            let pad = match (action, d) {
                (false, _) => 4 * d,
                (true, 0) => 4,
                (true, _) => 8 * d + 4,
            };
            t.lines.push(format!("{}{text}", " ".repeat(pad)));
        }
    }

    pub(super) fn trace_indent(&mut self, nested: bool, by: isize) {
        if let Some(t) = self.tracing.as_mut() {
            if nested {
                t.indent = t.indent.saturating_add_signed(by);
            }
        }
    }

    pub(super) fn traced_rule(&mut self, table: u8, r: &FlowRule) {
        if self.tracing.is_none() {
            return;
        }
        let mut s = format!("{table:>2}. ");
        let m = format_match(&r.m, &NumericPorts);
        if !m.is_empty() {
            let _ = write!(s, "{m}, ");
        }
        let _ = write!(s, "priority {}", r.priority);
        if r.cookie != 0 {
            let _ = write!(s, ", cookie {:#x}", r.cookie);
        }
        self.trace_line(false, s);
        if r.actions.is_empty() {
            self.trace_line(true, "drop".into());
        }
    }

    pub(super) fn traced_miss(&mut self, table: u8) {
        if self.tracing.is_some() {
            self.trace_line(false, format!("{table:>2}. No match."));
            self.trace_line(true, "drop".into());
        }
    }

    pub(super) fn traced_action(&mut self, a: &Action) {
        if self.tracing.is_some() {
            let text = match a {
                // A clone's own actions follow, nested.
                Action::Clone(_) => "clone".to_string(),
                a => crate::flow::format_actions(std::slice::from_ref(a), &NumericPorts),
            };
            self.trace_line(true, text);
        }
    }
}

/// The addresses and ports OVS's trace shows around a simulated NAT
/// (`oftrace_print_ip_flow`): none for a plain `nat`.
fn ip_flow(k: &FlowKey, n: &Nat) -> String {
    let Some((lo, _)) = n.addrs else {
        return String::new();
    };
    let (src, dst) = if lo.is_ipv4() {
        (
            std::net::Ipv4Addr::from(k.get(f::NW_SRC) as u32).to_string(),
            std::net::Ipv4Addr::from(k.get(f::NW_DST) as u32).to_string(),
        )
    } else {
        (
            std::net::Ipv6Addr::from(crate::field::IPV6_SRC.get(k)).to_string(),
            std::net::Ipv6Addr::from(crate::field::IPV6_DST.get(k)).to_string(),
        )
    };
    let mut s = format!(
        "{}={src},{}={dst}",
        if lo.is_ipv4() { "nw_src" } else { "ipv6_src" },
        if lo.is_ipv4() { "nw_dst" } else { "ipv6_dst" }
    );
    if n.ports.is_some() {
        let _ = write!(
            s,
            ",tp_src={},tp_dst={}",
            k.get(f::TP_SRC),
            k.get(f::TP_DST)
        );
    }
    s
}

/// OVS's trace takes a NAT to the first address and port of its range.
fn simulate_nat(k: &mut FlowKey, n: &Nat) {
    let (Some(kind), Some((lo, _))) = (n.kind, n.addrs) else {
        return;
    };
    let src = kind == NatKind::Src;
    match lo {
        IpAddr::V4(a) => k.set(
            if src { f::NW_SRC } else { f::NW_DST },
            u64::from(u32::from(a)),
        ),
        IpAddr::V6(a) => {
            let fl = if src {
                &crate::field::IPV6_SRC
            } else {
                &crate::field::IPV6_DST
            };
            fl.set(k, u128::from(a));
        }
    }
    if let Some((p, _)) = n.ports {
        k.set(if src { f::TP_SRC } else { f::TP_DST }, u64::from(p));
    }
}

impl Trace {
    /// The trace as `ofproto/trace` prints it, for bridge `bridge`: this
    /// pass, then the recirculations it forked.
    pub fn render(&self, bridge: &str) -> String {
        let mut s = self.render_pass(bridge);
        for r in &self.recircs {
            let _ = write!(s, "\n\n{}\n", "=".repeat(79));
            for l in &r.banner {
                let _ = writeln!(s, "{l}");
            }
            let _ = write!(s, "{}\n\n", "=".repeat(79));
            s.push_str(&r.render_pass(bridge));
        }
        s
    }

    fn render_pass(&self, bridge: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "Flow: {}", format_packet(&self.flow, &NumericPorts));
        let _ = writeln!(s);
        let title = format!("bridge(\"{bridge}\")");
        let _ = writeln!(s, "{title}\n{}", "-".repeat(title.len()));
        for l in &self.lines {
            let _ = writeln!(s, "{l}");
        }
        let _ = writeln!(s);
        // OVS says so when the actions changed nothing.
        let final_flow = if self.final_flow == self.flow {
            "unchanged".to_string()
        } else {
            format_packet(&self.final_flow, &NumericPorts)
        };
        let _ = writeln!(s, "Final flow: {final_flow}");
        let m = Match {
            value: self.flow.masked(&self.megaflow),
            mask: self.megaflow,
        };
        let mf = format_match(&m, &NumericPorts);
        let _ = writeln!(
            s,
            "Megaflow: recirc_id={:#x},eth{}{mf}",
            self.recirc_id,
            if mf.is_empty() { "" } else { "," }
        );
        let _ = write!(s, "Datapath actions: {}", datapath_actions(&self.ops));
        if let Err(why) = self.result {
            let _ = write!(s, "\n(dropped: {})", why.name());
        }
        s.push('\n');
        s
    }
}

/// The steps in the datapath's notation, header rewrites grouped by
/// header as OVS writes its `set()` actions.
pub fn datapath_actions(ops: &[Op]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut sets: Vec<(&'static str, String)> = Vec::new();
    let flush = |sets: &mut Vec<(&'static str, String)>, out: &mut Vec<String>| {
        let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
        for (h, kv) in sets.drain(..) {
            match groups.iter_mut().find(|(g, _)| *g == h) {
                Some((_, v)) => v.push(kv),
                None => groups.push((h, vec![kv])),
            }
        }
        for (h, kv) in groups {
            out.push(format!("set({h}({}))", kv.join(",")));
        }
    };
    for op in ops {
        if let Op::SetField { field, value } = op {
            let (h, k) = odp_name(field.name);
            let v = crate::flow::format_value(field, *value);
            sets.push((h, format!("{k}={v}")));
            continue;
        }
        flush(&mut sets, &mut out);
        out.push(match op {
            Op::PushVlan(t) => format!("push_vlan(tpid={t:#06x})"),
            Op::PopVlan => "pop_vlan".into(),
            Op::SetVlanVid(v) => format!("set_vlan_vid({v})"),
            Op::SetVlanPcp(p) => format!("set_vlan_pcp({p})"),
            Op::Output { port, tun } => {
                let mut t = Vec::new();
                if let Some(id) = tun.id {
                    t.push(format!("tun_id={id:#x}"));
                }
                if let Some(ip) = tun.src {
                    t.push(format!("src={ip}"));
                }
                if let Some(ip) = tun.dst {
                    t.push(format!("dst={ip}"));
                }
                for (n, v) in tun.metadata.iter().enumerate() {
                    if let Some(v) = v {
                        t.push(format!("tun_metadata{n}={v:#x}"));
                    }
                }
                if t.is_empty() {
                    port.to_string()
                } else {
                    format!("set(tunnel({})),{port}", t.join(","))
                }
            }
            Op::Flood { except } => format!("flood(except {except})"),
            Op::Controller { .. } => "userspace(controller)".into(),
            Op::Ct(ct) => ct_text(ct),
            Op::Recirc(id) => format!("recirc({id:#x})"),
            Op::CtClear => "ct_clear".into(),
            Op::SetField { .. } => String::new(),
        });
    }
    flush(&mut sets, &mut out);
    if out.is_empty() {
        "drop".into()
    } else {
        out.join(",")
    }
}

/// The datapath's `ct(...)` as OVS's `format_odp_conntrack_action`
/// writes it.
fn ct_text(ct: &super::CtOp) -> String {
    let mut p: Vec<String> = Vec::new();
    if ct.commit {
        p.push("commit".into());
    }
    if ct.force {
        p.push("force_commit".into());
    }
    if ct.zone != 0 {
        p.push(format!("zone={}", ct.zone));
    }
    // C's %#x: 0 is "0".
    let hex = |v: u128| {
        if v == 0 {
            "0".to_string()
        } else {
            format!("{v:#x}")
        }
    };
    if let Some((v, m)) = ct.mark {
        p.push(format!("mark={}/{}", hex(v.into()), hex(m.into())));
    }
    if let Some((v, m)) = ct.label {
        p.push(format!("label={}/{}", hex(v), hex(m)));
    }
    match ct.alg {
        0 => {}
        21 => p.push("helper=ftp".into()),
        69 => p.push("helper=tftp".into()),
        n => p.push(format!("helper={n}")),
    }
    if let Some(n) = &ct.nat {
        p.push(crate::flow::format_nat(n));
    }
    if p.is_empty() {
        "ct".into()
    } else {
        format!("ct({})", p.join(","))
    }
}

/// The datapath header and key OVS's `set()` names a field by.
fn odp_name(field: &str) -> (&'static str, &'static str) {
    match field {
        "eth_src" => ("eth", "src"),
        "eth_dst" => ("eth", "dst"),
        "ip_src" => ("ipv4", "src"),
        "ip_dst" => ("ipv4", "dst"),
        "ipv6_src" => ("ipv6", "src"),
        "ipv6_dst" => ("ipv6", "dst"),
        "ipv6_label" => ("ipv6", "label"),
        "nw_tos" => ("ip", "tos"),
        "nw_ecn" => ("ip", "ecn"),
        "nw_ttl" => ("ip", "ttl"),
        "tcp_src" => ("l4", "src"),
        "tcp_dst" => ("l4", "dst"),
        "icmp_type" => ("icmp", "type"),
        "icmp_code" => ("icmp", "code"),
        "icmpv6_type" => ("icmpv6", "type"),
        "icmpv6_code" => ("icmpv6", "code"),
        "arp_op" => ("arp", "op"),
        "arp_spa" => ("arp", "sip"),
        "arp_tpa" => ("arp", "tip"),
        "arp_sha" => ("arp", "sha"),
        "arp_tha" => ("arp", "tha"),
        "nd_target" => ("nd", "target"),
        "nd_sll" => ("nd", "sll"),
        "nd_tll" => ("nd", "tll"),
        _ => ("field", "value"),
    }
}

/// Whether the megaflow keeps no pipeline state (it never does: pipeline
/// fields are zero in every packet that enters).
#[cfg(test)]
fn packet_only(wc: &FlowKey) -> bool {
    wc.w[crate::key::PACKET_WORDS..].iter().all(|w| *w == 0)
}

#[cfg(test)]
mod tests {
    use super::super::tests::classifier;
    use super::*;
    use crate::key::f;

    #[test]
    fn a_trace_reads_as_ovs_prints_one() {
        let mut c = classifier(&[
            "priority=100,in_port=2 actions=set_field:0x6->reg13,set_field:0x2->metadata,resubmit(,8)",
            "table=8,metadata=0x2,priority=50,cookie=0x8ec4a5a2 actions=set_field:0/0x1000->reg10,resubmit(,73),resubmit(,9)",
            "table=73,ip,reg13=0x6,metadata=0x2,priority=90 actions=set_field:0x1/0x1->reg10",
            "table=9,priority=0 actions=resubmit(,10)",
            "table=10,icmp,priority=10 actions=dec_ttl,set_field:0a:00:00:00:00:01->eth_src,output:3",
        ]);
        let mut k = FlowKey::default();
        k.set(f::IN_PORT, 2);
        k.set(f::DL_TYPE, 0x0800);
        k.set(f::NW_PROTO, 1);
        k.set(f::NW_TTL, 64);
        k.set(f::TP_SRC, 8);
        let t = Pipeline::new().trace(&mut c, &k, 0);
        assert!(packet_only(&t.megaflow));
        let text = t.render("br-int");
        let want = "\
Flow: icmp,in_port=2,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00,nw_src=0.0.0.0,nw_dst=0.0.0.0,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,icmp_type=8,icmp_code=0

bridge(\"br-int\")
----------------
 0. in_port=2, priority 100
    set_field:0x6->reg13
    set_field:0x2->metadata
    resubmit(,8)
 8. metadata=0x2, priority 50, cookie 0x8ec4a5a2
    set_field:0/0x1000->reg10
    resubmit(,73)
    73. ip,reg13=0x6,metadata=0x2, priority 90
            set_field:0x1/0x1->reg10
    resubmit(,9)
 9. priority 0
    resubmit(,10)
10. icmp, priority 10
    dec_ttl
    set_field:0a:00:00:00:00:01->eth_src
    output:3

Final flow: icmp,reg10=0x1,reg13=0x6,metadata=0x2,in_port=2,vlan_tci=0x0000,dl_src=0a:00:00:00:00:01,dl_dst=00:00:00:00:00:00,nw_src=0.0.0.0,nw_dst=0.0.0.0,nw_tos=0,nw_ecn=0,nw_ttl=63,nw_frag=no,icmp_type=8,icmp_code=0
";
        assert!(text.starts_with(want), "{text}");
        assert!(
            text.ends_with("Datapath actions: set(eth(src=0a:00:00:00:00:01)),set(ip(ttl=63)),3\n"),
            "{text}"
        );
    }
}
