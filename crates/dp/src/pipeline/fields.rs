//! The actions that read and write fields (set_field, load, move, push,
//! pop, dec_ttl), and the commit that turns what they made of the
//! packet's headers into [`Op::SetField`] steps before the packet goes
//! anywhere, as OVS's translation commits its flow to datapath `set()`
//! actions. Each packet field an action reads joins the megaflow.

use super::{DropReason, Op, Pipeline, TunnelSet};
use crate::field::{self, Field, Prereq, SubField};
use crate::flow::Action;
use crate::key::{f, tun_metadata, FlowKey, PACKET_WORDS};

/// OVS's limit on the field stack (entries).
const MAX_STACK: usize = 1024;

/// One packet's translation: its flow as the actions have left it, what
/// the steps so far have made of the packet (`committed`), the tunnel
/// fields for the next tunnel output, and the field stack.
#[derive(Debug, Clone)]
pub(super) struct Frame {
    pub key: FlowKey,
    pub committed: FlowKey,
    pub tun: TunnelSet,
    stack: Vec<u128>,
}

/// What a `clone` puts back.
pub(super) struct Saved {
    key: FlowKey,
    tun: TunnelSet,
    stack: Vec<u128>,
}

impl Frame {
    pub fn new(key: &FlowKey) -> Frame {
        Frame {
            key: *key,
            committed: *key,
            tun: TunnelSet::default(),
            stack: Vec::new(),
        }
    }

    /// The field stack, bottom first.
    pub fn stack(&self) -> &[u128] {
        &self.stack
    }

    /// Start with this stack (a resumed translation's).
    pub fn set_stack(&mut self, stack: Vec<u128>) {
        self.stack = stack;
    }

    pub fn save(&self) -> Saved {
        Saved {
            key: self.key,
            tun: self.tun,
            stack: self.stack.clone(),
        }
    }

    /// Back to before a clone. Header fields the clone changed are set
    /// back by the next commit; VLAN tags cannot be.
    pub fn restore(&mut self, s: Saved) -> Result<(), DropReason> {
        if self.committed.get(f::VLAN_TCI) != s.key.get(f::VLAN_TCI) {
            return Err(DropReason::CloneChangedVlan);
        }
        self.key = s.key;
        self.tun = s.tun;
        self.stack = s.stack;
        Ok(())
    }
}

/// Every bit of every word: a flow key read as wholly known.
const ALL: FlowKey = FlowKey {
    w: [u64::MAX; crate::key::WORDS],
};

impl Pipeline {
    /// The decision read `bits` of field `fl`: for a packet field, they
    /// join the megaflow.
    pub(super) fn reads(&mut self, fl: &Field, bits: u128) {
        if let Some(wc) = self.wc.as_mut() {
            let old = fl.get(wc);
            fl.set(wc, old | (bits & fl.all_ones()));
        }
    }

    /// Whether `fl`'s prerequisites hold for the packet as it is now (an
    /// action on a field whose protocol the packet lacks does nothing, as
    /// in OVS); what it read to know joins the megaflow.
    fn prereq_ok(&mut self, fl: &Field, key: &FlowKey) -> bool {
        if fl.prereq == Prereq::None {
            return true;
        }
        self.depends_on(f::DL_TYPE);
        self.depends_on(f::NW_PROTO);
        if matches!(fl.prereq, Prereq::Nd | Prereq::NdSolicit | Prereq::NdAdvert) {
            self.depends_on(f::TP_SRC);
            self.depends_on(f::TP_DST);
        }
        if fl.prereq == Prereq::CtValid {
            self.depends_on(f::CT_STATE);
        }
        fl.prereq.met(key, &ALL)
    }

    /// set_field, load, move, push, pop, dec_ttl.
    // The prerequisite checks record what they read in the megaflow: they
    // stay in the arms' bodies, not in match guards.
    #[allow(clippy::collapsible_match)]
    pub(super) fn field_action(&mut self, fr: &mut Frame, a: &Action) -> Result<(), DropReason> {
        match *a {
            Action::SetField {
                field, value, mask, ..
            } => {
                if self.prereq_ok(field, &fr.key) {
                    let old = field.get(&fr.key);
                    field.set(&mut fr.key, (old & !mask) | (value & mask));
                    tunnel_written(fr, field);
                }
            }
            Action::Move { src, dst } => {
                if self.prereq_ok(src.field, &fr.key) && self.prereq_ok(dst.field, &fr.key) {
                    self.reads(src.field, src.mask());
                    let v = src.get(&fr.key);
                    dst.set(&mut fr.key, v);
                    tunnel_written(fr, dst.field);
                }
            }
            Action::Push(sf) => {
                if self.prereq_ok(sf.field, &fr.key) && fr.stack.len() < MAX_STACK {
                    self.reads(sf.field, sf.mask());
                    fr.stack.push(sf.get(&fr.key));
                }
            }
            Action::Pop(sf) => {
                // An empty stack leaves the field as it is (OVS logs it).
                if let Some(v) = fr.stack.pop() {
                    if self.prereq_ok(sf.field, &fr.key) {
                        pop_into(fr, sf, v);
                    }
                }
            }
            Action::CtClear => {
                // Untracked: every conntrack field back to zero (what a
                // packet that never met conntrack has).
                for fl in field::CT_FIELDS {
                    fl.set(&mut fr.key, 0);
                }
            }
            Action::DecTtl | Action::DecTtlIds(_) => {
                let ttl = &field::NW_TTL;
                if self.prereq_ok(ttl, &fr.key) {
                    self.depends_on(f::NW_TTL);
                    let t = fr.key.get(f::NW_TTL);
                    if t <= 1 {
                        // The translation ends here; what it sent so far
                        // stays sent (OVS's invalid_ttl packet_in is not
                        // built: the packet is dropped).
                        self.stopped = true;
                        return Ok(());
                    }
                    fr.key.set(f::NW_TTL, t - 1);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Before the packet goes anywhere: a step for each header field the
    /// actions changed since the last commit (the datapath rewrites them),
    /// and the field joins the megaflow (the step carries its new value
    /// whole, which may hold bits of the old one).
    pub(super) fn commit(&mut self, fr: &mut Frame, ops: &mut Vec<Op>) {
        if fr.key.w[..PACKET_WORDS] == fr.committed.w[..PACKET_WORDS] {
            return;
        }
        for fl in header_fields(&fr.key) {
            let v = fl.get(&fr.key);
            if v != fl.get(&fr.committed) {
                self.reads(fl, fl.all_ones());
                ops.push(Op::SetField {
                    field: fl,
                    value: v,
                });
            }
        }
        fr.committed.w[..PACKET_WORDS].copy_from_slice(&fr.key.w[..PACKET_WORDS]);
    }
}

/// A popped value goes into its subfield (OVS pops the whole entry into
/// the subfield's bits).
fn pop_into(fr: &mut Frame, sf: SubField, v: u128) {
    sf.set(&mut fr.key, v);
    tunnel_written(fr, sf.field);
}

/// A write to tun_id or tun_metadataN: the next tunnel output carries it.
fn tunnel_written(fr: &mut Frame, fl: &Field) {
    if std::ptr::eq(fl, &field::TUN_ID) {
        fr.tun.id = Some(fr.key.get(f::TUN_ID));
    }
    if let Some(n) = field::TUN_METADATA
        .iter()
        .position(|m| std::ptr::eq(*m, fl))
    {
        fr.tun.metadata[n] = Some(fr.key.get(tun_metadata(n)) as u32);
    }
}

/// The header fields a packet of `key`'s protocols has, that actions can
/// change: what a commit compares. (A slice of statics: nothing is
/// allocated per packet.)
fn header_fields(key: &FlowKey) -> &'static [&'static Field] {
    use field::*;
    static ETH: [&Field; 2] = [&ETH_SRC, &ETH_DST];
    static ARP: [&Field; 7] = [
        &ETH_SRC, &ETH_DST, &ARP_OP, &ARP_SPA, &ARP_TPA, &ARP_SHA, &ARP_THA,
    ];
    static V4: [&Field; 7] = [
        &ETH_SRC, &ETH_DST, &IP_SRC, &IP_DST, &NW_TOS, &NW_ECN, &NW_TTL,
    ];
    static V4_L4: [&Field; 9] = [
        &ETH_SRC, &ETH_DST, &IP_SRC, &IP_DST, &NW_TOS, &NW_ECN, &NW_TTL, &TCP_SRC, &TCP_DST,
    ];
    static V4_ICMP: [&Field; 9] = [
        &ETH_SRC, &ETH_DST, &IP_SRC, &IP_DST, &NW_TOS, &NW_ECN, &NW_TTL, &ICMP_TYPE, &ICMP_CODE,
    ];
    static V6: [&Field; 8] = [
        &ETH_SRC,
        &ETH_DST,
        &IPV6_SRC,
        &IPV6_DST,
        &IPV6_LABEL,
        &NW_TOS,
        &NW_ECN,
        &NW_TTL,
    ];
    static V6_L4: [&Field; 10] = [
        &ETH_SRC,
        &ETH_DST,
        &IPV6_SRC,
        &IPV6_DST,
        &IPV6_LABEL,
        &NW_TOS,
        &NW_ECN,
        &NW_TTL,
        &TCP_SRC,
        &TCP_DST,
    ];
    static V6_ICMP: [&Field; 10] = [
        &ETH_SRC,
        &ETH_DST,
        &IPV6_SRC,
        &IPV6_DST,
        &IPV6_LABEL,
        &NW_TOS,
        &NW_ECN,
        &NW_TTL,
        &ICMPV6_TYPE,
        &ICMPV6_CODE,
    ];
    static V6_NS: [&Field; 12] = [
        &ETH_SRC,
        &ETH_DST,
        &IPV6_SRC,
        &IPV6_DST,
        &IPV6_LABEL,
        &NW_TOS,
        &NW_ECN,
        &NW_TTL,
        &ICMPV6_TYPE,
        &ICMPV6_CODE,
        &ND_TARGET,
        &ND_SLL,
    ];
    static V6_NA: [&Field; 12] = [
        &ETH_SRC,
        &ETH_DST,
        &IPV6_SRC,
        &IPV6_DST,
        &IPV6_LABEL,
        &NW_TOS,
        &NW_ECN,
        &NW_TTL,
        &ICMPV6_TYPE,
        &ICMPV6_CODE,
        &ND_TARGET,
        &ND_TLL,
    ];
    let proto = key.get(f::NW_PROTO);
    let nd = key.get(f::TP_DST) == 0;
    match key.get(f::DL_TYPE) {
        0x0806 | 0x8035 => &ARP,
        0x0800 => match proto {
            6 | 17 | 132 => &V4_L4,
            1 => &V4_ICMP,
            _ => &V4,
        },
        0x86dd => match (proto, key.get(f::TP_SRC)) {
            (6 | 17 | 132, _) => &V6_L4,
            (58, 135) if nd => &V6_NS,
            (58, 136) if nd => &V6_NA,
            (58, _) => &V6_ICMP,
            _ => &V6,
        },
        _ => &ETH,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::classifier;
    use super::*;

    fn ipv4_key(ttl: u64) -> FlowKey {
        let mut k = FlowKey::default();
        k.set(f::IN_PORT, 1);
        k.set(f::DL_SRC, 0x0a00_0000_0001);
        k.set(f::DL_DST, 0x0a00_0000_0002);
        k.set(f::DL_TYPE, 0x0800);
        k.set(f::NW_PROTO, 1);
        k.set(f::NW_SRC, 0x0a00_0001);
        k.set(f::NW_DST, 0x0a00_0002);
        k.set(f::NW_TTL, ttl);
        k.set(f::TUN_ID, 0x123456);
        k
    }

    fn set(name: &str, value: u128) -> Op {
        Op::SetField {
            field: field::by_name(name).unwrap(),
            value,
        }
    }

    fn out(port: u32, tun: TunnelSet) -> Op {
        Op::Output { port, tun }
    }

    /// OVN's table 0 for a tunnel port: the logical datapath from the
    /// VNI into metadata, ports into registers, then tables that match
    /// them. The decision depends on the tunnel id it moved, not on the
    /// registers (zero in every packet that enters).
    #[test]
    fn registers_and_metadata_carry_a_packet_through_tables() {
        let mut c = classifier(&[
            "priority=100,in_port=1 actions=move:NXM_NX_TUN_ID[0..23]->OXM_OF_METADATA[0..23],set_field:0x5->reg15,resubmit(,8)",
            "table=8,priority=50,reg15=0x5,metadata=0x123456 actions=move:NXM_NX_REG15[]->NXM_NX_REG14[],resubmit(,9)",
            "table=8,priority=0 actions=drop",
            "table=9,reg14=0x5 actions=output:2",
        ]);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        let k = ipv4_key(64);
        let (r, wc) = p.process_megaflow(&mut c, &k, 64, 0, &mut ops);
        assert_eq!(r, Ok(()));
        assert_eq!(ops, vec![out(2, TunnelSet::default())]);
        assert_eq!(wc.get(f::TUN_ID), 0xff_ffff, "the moved bits");
        assert_eq!(
            &wc.w[PACKET_WORDS..],
            &[0; crate::key::WORDS - PACKET_WORDS]
        );
        let mut other = k;
        other.set(f::TUN_ID, 0x654321);
        assert_eq!(
            p.process(&mut c, &other, 64, 0, &mut ops),
            Err(DropReason::Action)
        );
    }

    /// A router's ICMP echo reply: addresses swapped through the stack, the
    /// TTL reset, the type set; each header field that changed is
    /// rewritten once, before the output.
    #[test]
    fn header_changes_are_committed_before_output() {
        let mut c = classifier(&[
            "icmp,icmp_type=8 actions=push:NXM_OF_IP_SRC[],push:NXM_OF_IP_DST[],pop:NXM_OF_IP_SRC[],pop:NXM_OF_IP_DST[],set_field:255->nw_ttl,set_field:0->icmp_type,move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:0a:00:00:00:00:09->eth_src,output:in_port",
        ]);
        let mut k = ipv4_key(64);
        k.set(f::TP_SRC, 8);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        let (r, wc) = p.process_megaflow(&mut c, &k, 64, 0, &mut ops);
        assert_eq!(r, Ok(()));
        assert_eq!(
            ops,
            vec![
                set("eth_src", 0x0a00_0000_0009),
                set("eth_dst", 0x0a00_0000_0001),
                set("ip_src", 0x0a00_0002),
                set("ip_dst", 0x0a00_0001),
                set("nw_ttl", 255),
                set("icmp_type", 0),
                out(1, TunnelSet::default()),
            ]
        );
        for p in [f::NW_SRC, f::NW_DST, f::DL_SRC, f::DL_DST, f::NW_TTL] {
            assert_eq!(wc.get(p), p.max(), "{p:?}");
        }
    }

    #[test]
    fn dec_ttl_counts_down_and_stops_at_one() {
        let mut c = classifier(&["ip actions=dec_ttl,output:2"]);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        assert_eq!(p.process(&mut c, &ipv4_key(64), 64, 0, &mut ops), Ok(()));
        assert_eq!(ops, vec![set("nw_ttl", 63), out(2, TunnelSet::default())]);
        assert_eq!(
            p.process(&mut c, &ipv4_key(1), 64, 0, &mut ops),
            Err(DropReason::TtlExpired)
        );
        // What went out before the TTL ran out stays sent (as in OVS).
        let mut c = classifier(&["ip actions=output:3,dec_ttl,output:2"]);
        assert_eq!(p.process(&mut c, &ipv4_key(1), 64, 0, &mut ops), Ok(()));
        assert_eq!(ops, vec![out(3, TunnelSet::default())]);
    }

    /// A clone's changes reach its own outputs only; the next commit puts
    /// the header back.
    #[test]
    fn a_clone_changes_its_copy_only() {
        let mut c = classifier(&[
            "ip actions=clone(set_field:0a:00:00:00:00:07->eth_dst,set_field:0x1->reg0,output:2),output:3",
        ]);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        assert_eq!(p.process(&mut c, &ipv4_key(64), 64, 0, &mut ops), Ok(()));
        assert_eq!(
            ops,
            vec![
                set("eth_dst", 0x0a00_0000_0007),
                out(2, TunnelSet::default()),
                set("eth_dst", 0x0a00_0000_0002),
                out(3, TunnelSet::default()),
            ]
        );
    }

    /// OVN's egress to a tunnel: the logical ports moved into the Geneve
    /// option's bits, the VNI set; the tunnel output carries them.
    #[test]
    fn moves_into_the_tunnel_option_reach_the_tunnel_output() {
        let mut c = classifier(&[
            "ip actions=set_field:0x3->reg14,set_field:0x2->reg15,move:NXM_NX_REG14[0..14]->NXM_NX_TUN_METADATA0[16..30],move:NXM_NX_REG15[0..15]->NXM_NX_TUN_METADATA0[0..15],set_field:0x7->tun_id,output:9",
        ]);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        let mut k = ipv4_key(64);
        k.set(f::TUN_ID, 0);
        assert_eq!(p.process(&mut c, &k, 64, 0, &mut ops), Ok(()));
        let mut tun = TunnelSet::default();
        tun.metadata[0] = Some(0x30002);
        tun.id = Some(7);
        assert_eq!(ops, vec![out(9, tun)]);
    }

    /// An empty stack leaves the field alone; an action on a protocol the
    /// packet lacks does nothing.
    #[test]
    fn pops_and_sets_that_cannot_apply_do_nothing() {
        let mut c = classifier(&[
            "priority=10 actions=pop:NXM_NX_REG0[],resubmit(,1)",
            "table=1,reg0=0 actions=output:2",
        ]);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        assert_eq!(p.process(&mut c, &ipv4_key(64), 64, 0, &mut ops), Ok(()));
        assert_eq!(ops, vec![out(2, TunnelSet::default())]);
    }
}
