//! Flow rules in ovs-ofctl(8) syntax: parse, print back, and the errors that
//! point at the offending token.
//!
//! ```text
//! table=0,priority=100,in_port=1,dl_vlan=5 actions=pop_vlan,output:6
//! in_port=6 action=push_vlan:0x88a8,mod_vlan_vid:5,output:1
//! in_port=2 actions=set_field:10.222.0.6->tun_dst,output:1
//! ```
//!
//! Matches: every field of Open vSwitch's that tunlab holds (the table in
//! [`crate::field`]: in_port, Ethernet, VLAN, IPv4, IPv6, ARP, ND, ICMP,
//! TCP/UDP/SCTP ports, TTL, fragments, TCP flags, the tunnel's fields and
//! tun_metadata0..7, metadata, reg0..15, xreg0..7, xxreg0..3, pkt_mark,
//! conj_id, ct_state and the other conntrack fields), with masks where
//! OVS allows them, the OpenFlow 1.0 forms (`dl_vlan`, `dl_vlan_pcp`,
//! `tp_src`), the shorthands `ip`, `ipv6`, `arp`, `rarp`, `icmp`,
//! `icmp6`, `tcp`, `tcp6`, `udp`, `udp6`, `sctp`, `sctp6`, and `priority`,
//! `table`, `cookie`, the timeouts and `send_flow_rem`. A rule prints in
//! OVS's field order and forms (`match_format`), so that it reads as
//! `ovs-ofctl dump-flows` prints it. Actions: `output:N` (or a bare port),
//! `in_port`, `normal`, `flood` (`all`), `controller[:MAX_LEN]`, `drop`,
//! `set_field:V->F` for the tunnel fields, `set_tunnel:N`,
//! `set_tunnel64:N`, `push_vlan:TPID`, `pop_vlan` (`strip_vlan`),
//! `mod_vlan_vid:N`, `mod_vlan_pcp:N`, `resubmit(P,T)` / `resubmit:P`. As
//! in OVS, a field needs its prerequisites (`nw_src` needs `ip` or `arp`;
//! `tp_dst` needs `tcp` or `udp`; `nd_target` an ND ICMPv6 type).

use crate::field::{Field, SubField};
use crate::key::{f, FieldPos, FlowKey, TUN_METADATA_FIELDS};
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// `max_len` bytes of it (65535: all of it, OFPCML_NO_BUFFER), saying
    /// `reason`, to the controllers whose id is `id`, with `userdata`
    /// (NXT_PACKET_IN2's). `pause` freezes the translation there: the
    /// packet_in carries the rest as a continuation, which the controller
    /// sends back in NXT_RESUME (`ovs-actions(7)`, "The controller
    /// action").
    Controller {
        max_len: u16,
        reason: PacketInReason,
        id: u16,
        userdata: Vec<u8>,
        pause: bool,
    },
    /// Every port but the one the packet came in on (OpenFlow's FLOOD;
    /// ALL is the same here: no port has flooding turned off).
    Flood,
    /// `set_field:VALUE[/MASK]->FIELD`, or `load:VALUE->FIELD[BITS]`
    /// (`load`: printed back so), on a field of the pipeline (metadata,
    /// registers, in_port) or of the packet's headers: the bits of `mask`
    /// become those of `value` (both in the field's terms).
    SetField {
        field: &'static Field,
        value: u128,
        mask: u128,
        load: bool,
    },
    /// `move:SRC[BITS]->DST[BITS]`: copy bits between fields.
    Move {
        src: SubField,
        dst: SubField,
    },
    /// `push:FIELD[BITS]`, `pop:FIELD[BITS]`: OVS's field stack, one per
    /// translation (resubmits share it).
    Push(SubField),
    Pop(SubField),
    /// `note:HEX`: does nothing; kept for whoever reads the rules.
    Note(Vec<u8>),
    /// `dec_ttl`: the IPv4 TTL or IPv6 hop limit less one; a packet whose
    /// TTL is 1 or 0 goes no further (dropped: `ttl_expired`).
    DecTtl,
    /// `dec_ttl(ID,...)`: dec_ttl whose spent-TTL packet_in would go to
    /// the controllers with these ids (`dec_ttl()`: to none, as OVN
    /// writes it). tunlab sends no invalid-TTL packet_in either way.
    DecTtlIds(Vec<u16>),
    /// `clone(ACTIONS)`: the actions on a copy of the packet; what they
    /// change does not reach the actions after.
    Clone(Vec<Action>),
    /// `ct_clear`: the packet untracked, its conntrack fields zero.
    CtClear,
    /// `ct(...)`: the packet through connection tracking (OVS's
    /// `ovs-actions(7)` "The ct action"); boxed, as it is large and rare.
    Ct(Box<Ct>),
    /// `conjunction(ID,K/N)`: this rule is clause K (0-based here, 1-based
    /// in the text) of N of conjunctive match ID (see the classifier); a
    /// rule with it has no other actions.
    Conjunction {
        id: u32,
        clause: u8,
        n_clauses: u8,
    },
}

/// The `ct` action's settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ct {
    /// Commit the connection (create the entry).
    pub commit: bool,
    /// `force`: a committed connection of the other direction is ended
    /// and this one committed anew (needs `commit`).
    pub force: bool,
    /// Where the packet goes on after conntrack (`table=`): a copy
    /// recirculates there with its conntrack state; none: the translation
    /// only sends it through conntrack and goes on untracked.
    pub table: Option<u8>,
    pub zone: CtZone,
    /// The application-layer helper: 21 (ftp), 69 (tftp), 0 none.
    pub alg: u16,
    pub nat: Option<Nat>,
    /// `exec(...)`: set_field/load/move of ct_mark and ct_label, done to
    /// the connection's entry as it is committed.
    pub exec: Vec<Action>,
}

/// A `ct` action's zone: a number, or a field's bits (OVN's
/// `zone=NXM_NX_REG13[0..15]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CtZone {
    #[default]
    Zero,
    Imm(u16),
    Field(crate::field::SubField),
}

/// `nat`, `nat(src|dst[=ADDR[-ADDR][:PORT[-PORT]]][,persistent][,hash][,random])`:
/// plain `nat` undoes what the connection's NAT did (replies, and
/// OVN's zero SNAT); with `src` or `dst` a committed connection is
/// translated to the range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Nat {
    pub kind: Option<NatKind>,
    /// First and last address of the range (equal for one address).
    pub addrs: Option<(IpAddr, IpAddr)>,
    /// First and last port (equal for one port).
    pub ports: Option<(u16, u16)>,
    pub persistent: bool,
    pub hash: bool,
    pub random: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NatKind {
    Src,
    Dst,
}

/// Why a packet goes to the controllers: OpenFlow's ofp_packet_in_reason
/// (1.3's numbers, OVS's names in `controller(reason=...)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PacketInReason {
    /// The table-miss rule (priority 0, matching everything) sent it.
    NoMatch = 0,
    /// Any other rule's `controller` action, or a packet_out's.
    #[default]
    Action = 1,
    /// `dec_ttl` found the TTL spent.
    InvalidTtl = 2,
    ActionSet = 3,
    Group = 4,
    PacketOut = 5,
}

impl PacketInReason {
    pub const ALL: [PacketInReason; 6] = [
        PacketInReason::NoMatch,
        PacketInReason::Action,
        PacketInReason::InvalidTtl,
        PacketInReason::ActionSet,
        PacketInReason::Group,
        PacketInReason::PacketOut,
    ];

    /// OVS's name (`ofputil_packet_in_reason_to_string`).
    pub fn name(self) -> &'static str {
        match self {
            PacketInReason::NoMatch => "no_match",
            PacketInReason::Action => "action",
            PacketInReason::InvalidTtl => "invalid_ttl",
            PacketInReason::ActionSet => "action_set",
            PacketInReason::Group => "group",
            PacketInReason::PacketOut => "packet_out",
        }
    }

    pub fn from_name(s: &str) -> Option<PacketInReason> {
        Self::ALL.into_iter().find(|r| r.name() == s)
    }

    /// The reason numbered `n` on the wire.
    pub fn from_u8(n: u8) -> Option<PacketInReason> {
        Self::ALL.get(usize::from(n)).copied()
    }
}

impl Action {
    /// `controller:MAX_LEN`: to controller 0, reason "action", no
    /// userdata, no pause (OpenFlow's output to CONTROLLER).
    pub fn controller(max_len: u16) -> Action {
        Action::Controller {
            max_len,
            reason: PacketInReason::Action,
            id: 0,
            userdata: Vec::new(),
            pause: false,
        }
    }
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

mod actions;
mod conntrack;
mod format;
mod parse;
mod text;

pub use conntrack::format_nat;
pub use format::{format_actions, format_flow, format_match, format_packet};
pub use parse::parse_flow;
pub use text::format_value;

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
    ("rarp", 0x8035, 0),
    ("sctp", 0x0800, 132),
    ("sctp6", 0x86dd, 132),
];

/// OpenFlow's reserved port numbers by the names OVS gives them
/// (`ofputil_port_from_string`), as `in_port=LOCAL` writes them.
pub const RESERVED_PORTS: &[(&str, PortNo)] = &[
    ("IN_PORT", 0xffff_fff8),
    ("TABLE", 0xffff_fff9),
    ("NORMAL", 0xffff_fffa),
    ("FLOOD", 0xffff_fffb),
    ("ALL", 0xffff_fffc),
    ("CONTROLLER", 0xffff_fffd),
    ("LOCAL", 0xffff_fffe),
    ("ANY", 0xffff_ffff),
];

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
    use crate::key::tun_metadata;
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
    fn ports_print_as_ovs_prints_them() -> Result<(), FlowError> {
        // Decimal when exact, hex with a mask (ovs-ofctl dump-flows).
        for text in [
            "priority=60,udp,tp_dst=60 actions=drop",
            "tcp,tp_src=1024,tp_dst=0x1000/0xf000 actions=drop",
        ] {
            assert_eq!(format_flow(&parse(text)?, &NumericPorts), text);
        }
        Ok(())
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
                (0u16..=u16::MAX).prop_map(|n| format!("CONTROLLER:{n}")),
                Just("pop_vlan".to_string()),
                prop_oneof![Just(0x8100u16), Just(0x88a8)]
                    .prop_map(|t| format!("push_vlan:{t:#x}")),
                (0u16..4096).prop_map(|v| format!("mod_vlan_vid:{v}")),
                any::<u32>().prop_map(|a| format!("set_field:{}->tun_dst", Ipv4Addr::from(a))),
                any::<u64>().prop_map(|v| format!("set_field:{v}->tun_id")),
                (0usize..8, any::<u32>())
                    .prop_map(|(n, v)| format!("set_field:{v}->tun_metadata{n}")),
                (0u8..255).prop_map(|t| format!("resubmit(,{t})")),
                (0usize..16, any::<u32>()).prop_map(|(n, v)| format!("set_field:{v:#x}->reg{n}")),
                (any::<u64>(), any::<u64>())
                    .prop_map(|(v, m)| format!("set_field:{v:#x}/{m:#x}->metadata")),
                (0usize..16, 0usize..16)
                    .prop_map(|(a, b)| format!("move:NXM_NX_REG{a}[0..15]->NXM_NX_REG{b}[16..31]")),
                (0usize..4).prop_map(|n| format!("push:NXM_NX_XXREG{n}[]")),
                (0usize..8).prop_map(|n| format!("pop:OXM_OF_PKT_REG{n}[]")),
                (0usize..16, any::<u16>())
                    .prop_map(|(n, v)| format!("load:{v:#x}->NXM_NX_REG{n}[8..23]")),
                proptest::collection::vec(any::<u8>(), 0..6).prop_map(|b| format!(
                    "note:{}",
                    b.iter()
                        .map(|x| format!("{x:02x}"))
                        .collect::<Vec<_>>()
                        .join(".")
                )),
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
