//! tunlab's flow rules in OpenFlow 1.3's terms, both ways: a flow_mod
//! becomes the request `tunlab ctl` sends for the same rule (one flow
//! table, two doors), and a rule becomes the OXM match and actions a flow
//! statistics reply carries, in Open vSwitch's field order so that
//! `ovs-ofctl dump-flows` prints it as it prints OVS's own.

use nx_match::{put_match, Encoding};
use std::net::IpAddr;
use tunlab_dp::field;
use tunlab_dp::key::f;
use tunlab_dp::{Action as Act, FlowKey, FlowRule, Match, PacketIn};
use tunlab_wire::openflow::{self as of, Action, Oxm, OxmHeader};

/// The highest table a rule can be in (the classifier's limit; 0xff is
/// "all tables" in requests).
pub const MAX_TABLE: u8 = 254;
/// flow_mod flags: tell the controllers when the rule goes.
pub const FF_SEND_FLOW_REM: u16 = 1;
/// Unsupported flags (flow_mod failed).
pub const FMFC_BAD_FLAGS: u16 = 7;
/// The table does not exist (OpenFlow 1.3's OFPFMFC_BAD_TABLE_ID; 9 is
/// BAD_REQUEST's code for it, not FLOW_MOD_FAILED's).
pub const FMFC_BAD_TABLE_ID: u16 = 2;
/// Bad output port (bad action).
pub const BAC_BAD_OUT_PORT: u16 = 4;
/// An action's argument is not one tunlab can carry out (bad action).
pub const BAC_BAD_ARGUMENT: u16 = 5;

/// OpenFlow's reserved ports tunlab's rules use (1.3 § 7.2.1), and 1.0's
/// number for "the input port" that Nicira's resubmit carries.
pub const PORT_IN_PORT: u32 = 0xffff_fff8;
pub const PORT_NORMAL: u32 = 0xffff_fffa;
pub const PORT_TABLE: u32 = 0xffff_fff9;
pub const PORT_FLOOD: u32 = 0xffff_fffb;
pub const PORT_ALL: u32 = 0xffff_fffc;
pub const PORT_CONTROLLER: u32 = 0xffff_fffd;
const OF10_IN_PORT: u16 = 0xfff8;

pub mod actions;
pub mod flow_mod;
pub mod nx_match;

/// The basic OXM fields (1.3 § 7.2.3.7) that actions set.
mod oxm {
    pub const VLAN_VID: u8 = 6;
    pub const VLAN_PCP: u8 = 7;
    pub const TUNNEL_ID: u8 = 38;
}

/// NXM's OpenFlow 1.0 fields (class 0x0000), as Open vSwitch numbers them.
mod nxm0 {}

/// Nicira's NXM_1 fields (Open vSwitch's `meta-flow.h`): the tunnel's,
/// and IPv6's under 1.0.
mod nxm {
    pub const TUN_IPV4_SRC: u8 = 31;
    pub const TUN_IPV4_DST: u8 = 32;
    pub const TUN_METADATA0: u8 = 40;
    pub const TUN_IPV6_SRC: u8 = 109;
    pub const TUN_IPV6_DST: u8 = 110;
}

/// The VLAN-present bit of OXM's vlan_vid (OFPVID_PRESENT), which is
/// OVS's CFI convention in tunlab's VLAN_TCI.
const VID_PRESENT: u64 = 0x1000;

/// An OXM field with its value and mask held here (a rule's field, for a
/// reply to borrow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub class: u16,
    pub field: u8,
    pub value: Vec<u8>,
    pub mask: Option<Vec<u8>>,
}

impl Field {
    pub fn oxm(&self) -> Oxm<'_> {
        Oxm {
            class: self.class,
            field: self.field,
            value: &self.value,
            mask: self.mask.as_deref(),
        }
    }
}

/// An action with its set_field value held here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfAction {
    Output(u32),
    /// A controller action other than OpenFlow's output to CONTROLLER
    /// (which [`OfAction::view`] writes for the plain one).
    Controller {
        max_len: u16,
        reason: u8,
        id: u16,
        userdata: Vec<u8>,
        pause: bool,
    },
    PushVlan(u16),
    PopVlan,
    SetField(Field),
    Resubmit {
        port: u16,
        table: u8,
    },
    /// `load:` as given (NXAST_REG_LOAD, at most 64 bits).
    RegLoad {
        ofs: u16,
        n_bits: u8,
        dst: OxmHeader,
        value: u64,
    },
    Move {
        n_bits: u16,
        src_ofs: u16,
        dst_ofs: u16,
        src: OxmHeader,
        dst: OxmHeader,
    },
    Push {
        field: OxmHeader,
        ofs: u16,
        n_bits: u16,
    },
    Pop {
        field: OxmHeader,
        ofs: u16,
        n_bits: u16,
    },
    Note(Vec<u8>),
    DecTtl,
    /// `dec_ttl(ids)`: the ids as the wire holds them (2 bytes each).
    DecTtlIds(Vec<u8>),
    Clone(Vec<OfAction>),
    CtClear,
    /// NXAST_CT with its nested actions (a nat first, then exec's).
    Ct {
        flags: u16,
        zone: of::CtZone,
        recirc_table: u8,
        alg: u16,
        actions: Vec<OfAction>,
    },
    Nat {
        flags: u16,
        addrs: Option<of::NatAddrs>,
        ports: Option<(u16, Option<u16>)>,
    },
    Conjunction {
        id: u32,
        clause: u8,
        n_clauses: u8,
    },
}

impl OfAction {
    pub fn view(&self) -> Action<'_> {
        match self {
            OfAction::Output(port) => Action::Output {
                port: *port,
                max_len: 0,
            },
            // OVS writes the plain controller action as an output to
            // CONTROLLER, the rest as Nicira's.
            OfAction::Controller {
                max_len,
                reason: 1,
                id: 0,
                userdata,
                pause: false,
            } if userdata.is_empty() => Action::Output {
                port: PORT_CONTROLLER,
                max_len: *max_len,
            },
            OfAction::Controller {
                max_len,
                reason,
                id,
                userdata,
                pause,
            } => Action::Controller {
                max_len: *max_len,
                id: *id,
                reason: *reason,
                userdata,
                pause: *pause,
            },
            OfAction::PushVlan(t) => Action::PushVlan { ethertype: *t },
            OfAction::PopVlan => Action::PopVlan,
            OfAction::SetField(fld) => Action::SetField(fld.oxm()),
            OfAction::Resubmit { port, table } => Action::NxResubmit {
                port: *port,
                table: *table,
            },
            OfAction::RegLoad {
                ofs,
                n_bits,
                dst,
                value,
            } => Action::RegLoad {
                ofs: *ofs,
                n_bits: *n_bits,
                dst: *dst,
                value: *value,
            },
            OfAction::Move {
                n_bits,
                src_ofs,
                dst_ofs,
                src,
                dst,
            } => Action::Move {
                n_bits: *n_bits,
                src_ofs: *src_ofs,
                dst_ofs: *dst_ofs,
                src: *src,
                dst: *dst,
            },
            OfAction::Push { field, ofs, n_bits } => Action::StackPush {
                field: *field,
                ofs: *ofs,
                n_bits: *n_bits,
            },
            OfAction::Pop { field, ofs, n_bits } => Action::StackPop {
                field: *field,
                ofs: *ofs,
                n_bits: *n_bits,
            },
            OfAction::Note(b) => Action::Note(b),
            OfAction::DecTtl => Action::DecTtl,
            OfAction::DecTtlIds(ids) => Action::DecTtlCntIds { ids },
            OfAction::Clone(inner) => Action::Clone(inner.iter().map(OfAction::view).collect()),
            OfAction::CtClear => Action::CtClear,
            OfAction::Ct {
                flags,
                zone,
                recirc_table,
                alg,
                actions,
            } => Action::Ct {
                flags: *flags,
                zone: *zone,
                recirc_table: *recirc_table,
                alg: *alg,
                actions: actions.iter().map(OfAction::view).collect(),
            },
            OfAction::Nat {
                flags,
                addrs,
                ports,
            } => Action::Nat {
                flags: *flags,
                addrs: *addrs,
                ports: *ports,
            },
            OfAction::Conjunction {
                id,
                clause,
                n_clauses,
            } => Action::Conjunction {
                id: *id,
                clause: *clause,
                n_clauses: *n_clauses,
            },
        }
    }
}

/// The header OVS names field `fl` by in version `v`'s actions: before
/// 1.5 (Nicira's actions) its NXM header where it has one, in 1.5 its OXM
/// header where it has one.
fn header(fl: &tunlab_dp::field::Field, v: u8) -> OxmHeader {
    let code = if v < of::OF15 {
        fl.nxm.or(fl.oxm)
    } else {
        fl.oxm.or(fl.nxm)
    };
    // Every field of the table has a code point (the field table's test
    // `every_field_has_a_code_point`); were one added without, it would go
    // out in the experimenter class, which a peer refuses rather than
    // misreads.
    match code {
        Some(c) => OxmHeader::new(c.class, c.field, fl.bytes),
        None => OxmHeader::new(0xffff, 0, fl.bytes),
    }
}

/// A field's value (or mask) in its bytes on the wire.
fn field_bytes(fl: &tunlab_dp::field::Field, v: u128) -> Vec<u8> {
    let n = usize::from(fl.bytes).min(16);
    v.to_be_bytes()[16 - n..].to_vec()
}

/// A typed set_field (or load) as the wire carries it.
fn set_field_of(
    fl: &'static tunlab_dp::field::Field,
    value: u128,
    mask: u128,
    load: bool,
    v: u8,
) -> OfAction {
    let sf = tunlab_dp::field::SubField {
        field: fl,
        ofs: mask.trailing_zeros().min(127),
        n_bits: (128 - mask.leading_zeros())
            .saturating_sub(mask.trailing_zeros())
            .max(1),
    };
    let contiguous = sf.mask() == mask;
    if load && contiguous && sf.n_bits <= 64 {
        return OfAction::RegLoad {
            ofs: sf.ofs as u16,
            n_bits: sf.n_bits as u8,
            dst: header(fl, v),
            value: (value >> sf.ofs) as u64,
        };
    }
    // OVS's in_port is NXM_OF_IN_PORT, 16 bits in 1.0's numbering, in
    // every version (its 32-bit OXM form is another field, in_port_oxm).
    if std::ptr::eq(fl, &field::IN_PORT) && mask == fl.all_ones() {
        return OfAction::SetField(Field {
            class: of::NXM_0,
            field: 0,
            value: of::port_to10(value as u32).to_be_bytes().to_vec(),
            mask: None,
        });
    }
    let h = header(fl, v);
    let exact = mask == fl.all_ones();
    OfAction::SetField(Field {
        class: h.class,
        field: h.field,
        value: field_bytes(fl, value & fl.max_value()),
        mask: (!exact).then(|| field_bytes(fl, mask & fl.max_value())),
    })
}

fn sub(sf: &tunlab_dp::field::SubField, v: u8) -> (OxmHeader, u16, u16) {
    // OVS's in_port is the 16-bit NXM_OF_IN_PORT in every version.
    if std::ptr::eq(sf.field, &field::IN_PORT) && sf.ofs + sf.n_bits <= 16 {
        return (
            OxmHeader::new(of::NXM_0, 0, 2),
            sf.ofs as u16,
            sf.n_bits as u16,
        );
    }
    (header(sf.field, v), sf.ofs as u16, sf.n_bits as u16)
}

/// `v` in its `bytes` lowest big-endian bytes.
fn be_bytes(v: u64, bytes: usize) -> Vec<u8> {
    v.to_be_bytes()[8 - bytes..].to_vec()
}

/// The match of `m` as OpenFlow 1.3 OXM fields, in Open vSwitch's order.
pub fn match_fields(m: &Match) -> Vec<Field> {
    nx_match::put_match(m, nx_match::Encoding::Oxm(of::OF13))
}

/// The match of `m` as NXM fields (OpenFlow 1.0 with Nicira's
/// extensions), in the same order.
pub fn match_fields_nxm(m: &Match) -> Vec<Field> {
    nx_match::put_match(m, nx_match::Encoding::Nxm)
}

/// The fewest big-endian bytes that hold `v` (at least one), as Open
/// vSwitch writes a variable-length field's set_field value.
fn least_bytes(v: u64) -> Vec<u8> {
    let n = (8 - v.leading_zeros() as usize / 8).max(1);
    be_bytes(v, n)
}

fn set_ip(v4: u8, v6: u8, ip: IpAddr) -> OfAction {
    let (field, value) = match ip {
        IpAddr::V4(a) => (v4, a.octets().to_vec()),
        IpAddr::V6(a) => (v6, a.octets().to_vec()),
    };
    OfAction::SetField(Field {
        class: of::NXM_1,
        field,
        value,
        mask: None,
    })
}

/// A rule's actions as version `v` writes them (Nicira's resubmit for
/// `resubmit`, set_field for the tunnel and VLAN fields; the fields an
/// action names by the header OVS names them by in that version).
pub fn of_actions_in(actions: &[Act], v: u8) -> Vec<OfAction> {
    let set = |class, field, value| {
        OfAction::SetField(Field {
            class,
            field,
            value,
            mask: None,
        })
    };
    actions
        .iter()
        .map(|a| match a {
            Act::Output(p) => OfAction::Output(*p),
            Act::InPort => OfAction::Output(PORT_IN_PORT),
            Act::Normal => OfAction::Output(PORT_NORMAL),
            Act::Flood => OfAction::Output(PORT_FLOOD),
            Act::Controller {
                max_len,
                reason,
                id,
                userdata,
                pause,
            } => OfAction::Controller {
                max_len: *max_len,
                reason: *reason as u8,
                id: *id,
                userdata: userdata.clone(),
                pause: *pause,
            },
            Act::SetTunDst(ip) => set_ip(nxm::TUN_IPV4_DST, nxm::TUN_IPV6_DST, *ip),
            Act::SetTunSrc(ip) => set_ip(nxm::TUN_IPV4_SRC, nxm::TUN_IPV6_SRC, *ip),
            Act::SetTunId(id) => set(of::OXM_BASIC, oxm::TUNNEL_ID, id.to_be_bytes().to_vec()),
            Act::SetTunMetadata(n, val) => set(
                of::NXM_1,
                nxm::TUN_METADATA0 + n,
                least_bytes(u64::from(*val)),
            ),
            Act::PushVlan(t) => OfAction::PushVlan(*t),
            Act::PopVlan => OfAction::PopVlan,
            Act::ModVlanVid(vid) => set(
                of::OXM_BASIC,
                oxm::VLAN_VID,
                be_bytes(VID_PRESENT | u64::from(*vid), 2),
            ),
            Act::ModVlanPcp(p) => set(of::OXM_BASIC, oxm::VLAN_PCP, vec![*p]),
            Act::Resubmit { port, table } => OfAction::Resubmit {
                port: port.map_or(OF10_IN_PORT, |p| p.min(u32::from(u16::MAX)) as u16),
                table: table.unwrap_or(0xff),
            },
            Act::SetField {
                field,
                value,
                mask,
                load,
            } => set_field_of(field, *value, *mask, *load, v),
            Act::Move { src, dst } => {
                let (src_h, src_ofs, n_bits) = sub(src, v);
                let (dst_h, dst_ofs, _) = sub(dst, v);
                OfAction::Move {
                    n_bits,
                    src_ofs,
                    dst_ofs,
                    src: src_h,
                    dst: dst_h,
                }
            }
            Act::Push(sf) => {
                let (field, ofs, n_bits) = sub(sf, v);
                OfAction::Push { field, ofs, n_bits }
            }
            Act::Pop(sf) => {
                let (field, ofs, n_bits) = sub(sf, v);
                OfAction::Pop { field, ofs, n_bits }
            }
            Act::Note(b) => OfAction::Note(b.clone()),
            Act::DecTtl => OfAction::DecTtl,
            Act::DecTtlIds(ids) => {
                OfAction::DecTtlIds(ids.iter().flat_map(|i| i.to_be_bytes()).collect())
            }
            Act::Clone(inner) => OfAction::Clone(of_actions_in(inner, v)),
            Act::CtClear => OfAction::CtClear,
            Act::Ct(ct) => ct_of(ct, v),
            Act::Conjunction {
                id,
                clause,
                n_clauses,
            } => OfAction::Conjunction {
                id: *id,
                clause: *clause,
                n_clauses: *n_clauses,
            },
        })
        .collect()
}

/// A `ct` as OVS writes it: the zone's field by its NXM header in every
/// version, the nat first among the nested actions.
fn ct_of(ct: &tunlab_dp::flow::Ct, v: u8) -> OfAction {
    use tunlab_dp::flow::{CtZone, NatKind};
    let zone = match ct.zone {
        CtZone::Zero => of::CtZone::Imm(0),
        CtZone::Imm(z) => of::CtZone::Imm(z),
        CtZone::Field(sf) => {
            let c = sf.field.nxm.or(sf.field.oxm);
            of::CtZone::Field {
                src: c.map_or(OxmHeader::new(0xffff, 0, sf.field.bytes), |c| {
                    OxmHeader::new(c.class, c.field, sf.field.bytes)
                }),
                ofs: sf.ofs as u16,
                n_bits: sf.n_bits as u16,
            }
        }
    };
    let mut actions = Vec::new();
    if let Some(n) = &ct.nat {
        let mut flags = 0;
        for (on, bit) in [
            (n.kind == Some(NatKind::Src), of::NX_NAT_F_SRC),
            (n.kind == Some(NatKind::Dst), of::NX_NAT_F_DST),
            (n.persistent, of::NX_NAT_F_PERSISTENT),
            (n.hash, of::NX_NAT_F_PROTO_HASH),
            (n.random, of::NX_NAT_F_PROTO_RANDOM),
        ] {
            if on {
                flags |= bit;
            }
        }
        let addrs = n.addrs.and_then(|(lo, hi)| match (lo, hi) {
            (IpAddr::V4(lo), IpAddr::V4(hi)) => Some(of::NatAddrs::V4 {
                min: lo,
                max: (hi != lo).then_some(hi),
            }),
            (IpAddr::V6(lo), IpAddr::V6(hi)) => Some(of::NatAddrs::V6 {
                min: lo,
                max: (hi != lo).then_some(hi),
            }),
            _ => None,
        });
        actions.push(OfAction::Nat {
            flags,
            addrs,
            ports: n.ports.map(|(lo, hi)| (lo, (hi != lo).then_some(hi))),
        });
    }
    actions.extend(of_actions_in(&ct.exec, v));
    let mut flags = 0;
    if ct.commit {
        flags |= of::NX_CT_F_COMMIT;
    }
    if ct.force {
        flags |= of::NX_CT_F_FORCE;
    }
    OfAction::Ct {
        flags,
        zone,
        recirc_table: ct.table.unwrap_or(of::NX_CT_RECIRC_NONE),
        alg: ct.alg,
        actions,
    }
}

/// [`of_actions_in`] for OpenFlow 1.3.
pub fn of_actions(actions: &[Act]) -> Vec<OfAction> {
    of_actions_in(actions, of::OF13)
}

/// A rule's match and actions for a flow statistics reply.
pub fn rule_to_of(r: &FlowRule) -> (Vec<Field>, Vec<OfAction>) {
    (match_fields(&r.m), of_actions(&r.actions))
}

/// The fields of `key` that a packet_in carries as its metadata, as OVS's
/// `flow_get_metadata` picks them: the in_port always; the tunnel's id,
/// addresses and options when the packet came out of one; the metadata,
/// registers, packet mark and conntrack fields that are not zero.
pub fn metadata_match(key: &FlowKey) -> Match {
    let mut m = Match::default();
    let mut put = |fl: &tunlab_dp::field::Field, always: bool| {
        let v = fl.get(key);
        if always || v != 0 {
            fl.set_match(&mut m.value, &mut m.mask, v, fl.all_ones());
        }
    };
    put(&field::IN_PORT, true);
    match key.get(f::TUN_FAMILY) {
        4 => [&field::TUN_ID, &field::TUN_SRC, &field::TUN_DST]
            .into_iter()
            .for_each(|fl| put(fl, true)),
        6 => [&field::TUN_ID, &field::TUN_IPV6_SRC, &field::TUN_IPV6_DST]
            .into_iter()
            .for_each(|fl| put(fl, true)),
        _ => {}
    }
    if key.get(f::TUN_FAMILY) != 0 {
        field::TUN_METADATA.iter().for_each(|fl| put(fl, false));
    }
    put(&field::METADATA, false);
    field::REGS.iter().for_each(|fl| put(fl, false));
    put(&field::PKT_MARK, false);
    if key.get(f::CT_STATE) != 0 {
        field::CT_FIELDS.iter().for_each(|fl| put(fl, false));
    }
    m
}

/// Packet-in formats a connection can ask for (NXT_SET_PACKET_IN_FORMAT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PacketInFormat {
    /// The version's own PACKET_IN.
    #[default]
    Standard,
    /// NXT_PACKET_IN2: userdata, all the metadata, continuations.
    NxtPacketIn2,
}

/// The message a `controller` action's packet_in `pin` is on a
/// connection of `version` that asked for `format`: the packet `frame` as
/// it was then, its metadata, and for
/// NXT_PACKET_IN2 the userdata and a paused translation's continuation,
/// which carries `bridge` (the node's UUID) so that NXT_RESUME can be
/// checked against it. OVS's `ofputil_encode_packet_in_private`.
pub fn packet_in_message(
    pin: &PacketIn,
    frame: &[u8],
    bridge: [u8; 16],
    version: u8,
    format: PacketInFormat,
) -> Vec<u8> {
    let enc = if version == of::OF10 {
        Encoding::Nxm
    } else {
        Encoding::Oxm(version)
    };
    let fields = put_match(&metadata_match(&pin.key), enc);
    let metadata: Vec<of::Oxm<'_>> = fields.iter().map(Field::oxm).collect();
    // The whole frame, whatever the action's max_len: Open vSwitch, which
    // buffers no packets, sends every packet_in whole (its
    // `ofputil_encode_packet_in_private` ignores max_len); tunlab does
    // what it does.
    let data = frame;
    let reason = pin.reason as u8;
    if format == PacketInFormat::Standard {
        // Before 1.4 the reasons past invalid_ttl are "action" (OVS's
        // encode_packet_in_reason).
        let reason = if version < of::OF15 && reason > 2 {
            1
        } else {
            reason
        };
        let total = frame.len().min(usize::from(u16::MAX)) as u16;
        return if version == of::OF10 {
            let in_port = of::port_to10(pin.key.get(f::IN_PORT) as u32);
            of::packet_in10(total, in_port, reason, data)
        } else {
            of::packet_in_in(
                version, total, reason, pin.table, pin.cookie, &metadata, data,
            )
        };
    }
    // The continuation's actions, held here for the wire's view of them.
    let groups: Vec<(u8, u64, Vec<OfAction>)> = pin
        .continuation
        .iter()
        .flat_map(|c| &c.groups)
        .map(|g| (g.table, g.cookie, of_actions_in(&g.actions, version)))
        .collect();
    // On the wire the stack's top comes first.
    let stack: Vec<[u8; 16]> = pin
        .continuation
        .iter()
        .flat_map(|c| c.stack.iter().rev())
        .map(|v| v.to_be_bytes())
        .collect();
    let continuation = pin.continuation.as_ref().map(|_| of::Continuation {
        bridge: Some(bridge),
        stack: stack.iter().map(|b| &b[..]).collect(),
        mirrors: None,
        conntracked: pin.key.get(f::CT_STATE) != 0,
        actions: groups
            .iter()
            .map(|(table, cookie, acts)| of::FrozenActions {
                table_id: *table,
                cookie: *cookie,
                actions: acts.iter().map(OfAction::view).collect(),
            })
            .collect(),
        action_set: None,
        odp_port: Some(pin.key.get(f::IN_PORT) as u32),
    });
    of::packet_in2(
        version,
        0,
        &of::PacketIn2 {
            packet: data,
            full_len: frame.len() as u32,
            buffer_id: None,
            table_id: pin.table,
            // A packet_out's actions have no rule: no cookie (OVS's
            // all-ones "none").
            cookie: (pin.cookie != u64::MAX).then_some(pin.cookie),
            reason,
            metadata,
            userdata: (!pin.userdata.is_empty()).then_some(&pin.userdata[..]),
            continuation,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::flow_mod::*;
    use super::*;
    use tunlab_dp::{parse_flow, NumericPorts, Selector};
    use tunlab_wire::openflow::Message;

    fn unhex(s: &str) -> Vec<u8> {
        tunlab_wire::from_hex(s).unwrap()
    }

    /// ovs-ofctl's bytes for two of the articles' rules (wire's golden
    /// file) become the rules as the articles wrote them.
    #[test]
    fn flow_mods_become_the_articles_rules() {
        let cases = [
            ("040e007000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000c80000004000000020000000000040030000000000011000888a800000019001080000c02100100000000000000000010000000010000000000000000",
             "priority=32768,in_port=2 actions=push_vlan:0x88a8,mod_vlan_vid:1,output:1"),
            ("040e006800000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000c800000040000000200000000000400280000000000190010000140040ade00060000000000000010000000010000000000000000",
             "priority=32768,in_port=2 actions=set_field:10.222.0.6->tun_dst,output:1"),
        ];
        let rule = |text: &str| parse_flow(text, &NumericPorts).unwrap();
        for (bytes, want) in cases {
            let b = unhex(bytes);
            let fm = of::parse_flow_mod(&Message::new_checked(&b).unwrap()).unwrap();
            assert_eq!(
                flow_change(&fm).unwrap(),
                FlowChange::Add(rule(want)),
                "{want}"
            );
        }
        // Modify picks by match, priority (strict) and cookie under its
        // mask, and gives the rules the new actions.
        let b = unhex(cases[0].0);
        let mut fm = of::parse_flow_mod(&Message::new_checked(&b).unwrap()).unwrap();
        fm.command = of::FC_MODIFY_STRICT;
        fm.cookie = 0x10;
        fm.cookie_mask = 0xf0;
        let r = rule(cases[0].1);
        assert_eq!(
            flow_change(&fm).unwrap(),
            FlowChange::Modify {
                sel: Selector {
                    table: None,
                    m: r.m,
                    strict: Some(32768),
                    cookie: Some((0x10, 0xf0)),
                },
                actions: r.actions.clone(),
            }
        );
        fm.command = 9;
        assert_eq!(
            flow_change(&fm),
            Err((of::ET_FLOW_MOD_FAILED, of::FMFC_BAD_COMMAND))
        );
        // An add into table 3, with its cookie.
        fm.command = of::FC_ADD;
        fm.table_id = 3;
        let mut want = r.clone();
        want.table = 3;
        want.cookie = 0x10;
        assert_eq!(flow_change(&fm).unwrap(), FlowChange::Add(want));
        fm.table_id = of::TABLE_ALL;
        assert_eq!(
            flow_change(&fm),
            Err((of::ET_FLOW_MOD_FAILED, FMFC_BAD_TABLE_ID))
        );
        // 1.0 with NXM picks by cookie in the match: read as the
        // selector's cookie, not a match field.
        let port = 2u32.to_be_bytes();
        let (v, m) = (0x70u64.to_be_bytes(), 0xf0u64.to_be_bytes());
        let oxms = [
            Oxm {
                class: of::OXM_BASIC,
                field: 0, // OXM_OF_IN_PORT
                value: &port,
                mask: None,
            },
            Oxm {
                class: of::NXM_1,
                field: 30, // NXM_NX_COOKIE
                value: &v,
                mask: Some(&m),
            },
        ];
        let pulled = nx_match::pull_match(&oxms).unwrap();
        assert_eq!(pulled.cookie, Some((0x70, 0xf0)));
        assert_eq!(pulled.m, rule("in_port=2 actions=drop").m);
        let short = [Oxm {
            class: of::NXM_1,
            field: 30, // NXM_NX_COOKIE
            value: &v[..4],
            mask: None,
        }];
        assert_eq!(
            nx_match::pull_match(&short),
            Err((of::ET_BAD_MATCH, of::BMC_BAD_LEN))
        );
        // A field without its prerequisite is a bad match, not an
        // unknown failure.
        let a = [10, 0, 0, 1];
        let no_ip = [Oxm {
            class: of::OXM_BASIC,
            field: 11, // OXM_OF_IPV4_SRC
            value: &a,
            mask: None,
        }];
        assert_eq!(
            nx_match::pull_match(&no_ip),
            Err((of::ET_BAD_MATCH, of::BMC_BAD_PREREQ))
        );
    }

    /// A rule's match and actions are the fields and actions Open vSwitch
    /// 3.1 sent for the same rule (its flow statistics reply, captured;
    /// wire's build tests hold the same bytes).
    #[test]
    fn rules_encode_as_ovs_encodes_them() {
        let cases = [
            ("priority=60,tun_metadata0=0x1234,dl_dst=00:11:22:33:44:55 actions=set_field:0xabcd->tun_metadata0,set_field:0x9->tun_id,set_field:10.0.0.9->tun_src,resubmit(,1),resubmit(5),resubmit(5,2)",
             "800006060011223344550001500400001234",
             "00040068000000000019001000015002abcd0000000000000019001080004c0800000000000000090019001000013e040a00000900000000ffff001000002320000efff801000000ffff001000002320000e0005ff000000ffff001000002320000e000502000000"),
            ("priority=4,tun_src=10.0.0.1,tun_dst=10.0.0.2,tun_id=0x10/0xff,in_port=9 actions=output:2",
             "800000040000000980004d10000000000000001000000000000000ff00013e040a000001000140040a000002",
             "000400180000000000000010000000020000000000000000"),
            ("priority=2,udp,nw_src=1.2.3.4,nw_dst=5.6.7.8,nw_tos=32,tp_src=53,tp_dst=99 actions=output:2",
             "80000a020800800016040102030480001804050607088000100108800014011180001e020035800020020063",
             "000400180000000000000010000000020000000000000000"),
            ("priority=1,dl_src=00:00:00:00:00:01,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,dl_vlan=7,dl_vlan_pcp=2 actions=mod_vlan_vid:9,output:4",
             "800008060000000000018000070c01000000000001000000000080000c02100780000e0102",
             "00040028000000000019001080000c02100900000000000000000010000000040000000000000000"),
            ("priority=3,ipv6,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::/32 actions=output:2",
             "80000a0286dd8000341020010db80000000000000000000000018000372020010db8000000000000000000000000ffffffff000000000000000000000000",
             "000400180000000000000010000000020000000000000000"),
            ("priority=50,ip,nw_dst=10.0.0.0/8,tun_id=0x5 actions=normal",
             "80000a020800800019080a000000ff00000080004c080000000000000005",
             "000400180000000000000010fffffffa0000000000000000"),
            ("priority=100,in_port=1,dl_vlan=5 actions=pop_vlan,output:6",
             "800000040000000180000c021005",
             "0004002000000000001200080000000000000010000000060000000000000000"),
            ("priority=10,tcp,tp_dst=80 actions=drop", "80000a020800800014010680001c020050", ""),
        ];
        for (rule, fields, instructions) in cases {
            let r = parse_flow(rule, &NumericPorts).unwrap();
            let (m, a) = rule_to_of(&r);
            let mut got = Vec::new();
            for fld in &m {
                fld.oxm().emit(&mut got);
            }
            let hex: String = got.iter().map(|x| format!("{x:02x}")).collect();
            assert_eq!(hex, *fields, "{rule}");
            let views: Vec<Action<'_>> = a.iter().map(OfAction::view).collect();
            let mut ins = Vec::new();
            of::put_apply_actions(&mut ins, &views);
            assert_eq!(ins, unhex(instructions), "{rule}");
        }
    }

    /// What a rule becomes on the wire comes back as the same rule through
    /// the flow_mod path (the match read by nx_match, the actions as
    /// text, then the parser).
    #[test]
    fn rules_survive_the_round_trip() {
        let rules = [
            "priority=60,tun_metadata0=0x1234,dl_dst=00:11:22:33:44:55 actions=set_field:0xabcd->tun_metadata0,set_field:0x9->tun_id,resubmit(,1),resubmit(5),resubmit(5,2)",
            "priority=4,tun_src=10.0.0.1,tun_dst=10.0.0.2,tun_id=0x10/0xff,in_port=9 actions=output:2",
            "priority=2,udp,nw_src=1.2.3.0/24,nw_dst=5.6.7.8,nw_tos=32,tp_src=53,tp_dst=99 actions=output:2",
            "priority=1,dl_src=00:00:00:00:00:01,dl_vlan=7,dl_vlan_pcp=2 actions=mod_vlan_vid:9,mod_vlan_pcp:3,output:4",
            "priority=3,ipv6,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::/32 actions=in_port",
            "priority=7,vlan_tci=0x0000/0x1fff,tun_ipv6_dst=fd00::2 actions=set_field:fd00::9->tun_ipv6_dst,push_vlan:0x88a8,pop_vlan",
            "priority=8,arp,nw_src=10.0.0.1 actions=normal",
            "priority=9 actions=drop",
        ];
        for rule in rules {
            let r = parse_flow(rule, &NumericPorts).unwrap();
            let (m, a) = rule_to_of(&r);
            let oxms: Vec<Oxm<'_>> = m.iter().map(Field::oxm).collect();
            let pulled = nx_match::pull_match(&oxms).unwrap_or_else(|e| panic!("{rule}: {e:?}"));
            assert_eq!(pulled.m, r.m, "{rule}");
            let nxm = match_fields_nxm(&r.m);
            let oxms: Vec<Oxm<'_>> = nxm.iter().map(Field::oxm).collect();
            assert_eq!(
                nx_match::pull_match(&oxms).map(|p| p.m),
                Ok(r.m),
                "{rule} (NXM)"
            );
            let views: Vec<Action<'_>> = a.iter().map(OfAction::view).collect();
            let back = actions::from_wire(&views, Some(&r.m), false)
                .unwrap_or_else(|e| panic!("{rule}: {e:?}"));
            assert_eq!(back, r.actions, "{rule}");
        }
    }
}
