//! `ofproto/trace` for tunlab: a packet's way through the flow tables, as
//! Open vSwitch's `ovs-appctl ofproto/trace` prints it: the flow, each
//! table's rule (or "No match.") with the actions it ran, nested where a
//! resubmit comes back, then the final flow, the megaflow and the
//! datapath's steps. Fields and actions are in OVS's own syntax, so the
//! two traces read side by side.

use super::{DropReason, Op, Pipeline};
use crate::classifier::Classifier;
use crate::flow::{format_match, format_packet, Action, FlowRule, Match, NumericPorts};
use crate::key::FlowKey;
use std::fmt::Write as _;

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
}

impl Pipeline {
    /// Trace `key` through the tables of `c`, counting nothing against
    /// any rule.
    pub fn trace(&mut self, c: &mut Classifier, key: &FlowKey, now: u64) -> Trace {
        self.tracing = Some(Lines::default());
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
        }
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

impl Trace {
    /// The trace as `ofproto/trace` prints it, for bridge `bridge`.
    pub fn render(&self, bridge: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "Flow: {}", format_packet(&self.flow, &NumericPorts));
        let _ = writeln!(s);
        let title = format!("bridge(\"{bridge}\")");
        let _ = writeln!(s, "{title}\n{}", "-".repeat(title.len()));
        for l in &self.lines {
            let _ = writeln!(s, "{l}");
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "Final flow: {}",
            format_packet(&self.final_flow, &NumericPorts)
        );
        let m = Match {
            value: self.flow.masked(&self.megaflow),
            mask: self.megaflow,
        };
        let mf = format_match(&m, &NumericPorts);
        let _ = writeln!(
            s,
            "Megaflow: recirc_id=0,eth{}{mf}",
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
