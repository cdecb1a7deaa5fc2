//! The actions OVN sends beyond output, VLANs and plain set_field, as
//! Open vSwitch 3.1 lays them out (`lib/ofp-actions.c`): Nicira's vendor
//! actions (experimenter 0xffff, vendor 0x00002320, a 16-bit subtype at
//! byte 8) and OpenFlow 1.1+/1.5's own DEC_NW_TTL and COPY_FIELD.
//!
//! ```text
//! nx header:            type=0xffff (2) | len (2) | vendor=0x2320 (4) | subtype (2)
//! NXAST_REG_LOAD  (7):  nx header | ofs_nbits (2) | dst header (4) | value (8)       = 24
//! NXAST_REG_LOAD2 (33): nx header | OXM TLV (value, maybe mask) | zeros to 8
//! NXAST_REG_MOVE  (6):  nx header | n_bits (2) | src_ofs (2) | dst_ofs (2)
//!                       | src header (4|8) | dst header (4|8) | zeros to 8
//! OFPAT_COPY_FIELD (28, 1.5): type | len | n_bits (2) | src_offset (2) | dst_offset (2)
//!                       | pad (2) | src header (4|8) | dst header (4|8) | zeros to 8
//! ONF copy field (1.3): type=0xffff | len | vendor=0x4f4e4600 | exp_type=3200 (2)
//!                       | pad (2) | n_bits | src_offset | dst_offset | pad (2) | headers | zeros
//! NXAST_STACK_PUSH (27) / _POP (28): nx header | offset (2) | field header (4|8)
//!                       | n_bits (2) | zeros                                     = 24
//! NXAST_NOTE (8):       nx header | note bytes (to the action's end, padding included)
//! OFPAT_DEC_NW_TTL (24, 1.1+): type | len=8 | pad (4)
//! NXAST_DEC_TTL (18, 1.0's dec_ttl): nx header | pad (6)                        = 16
//! NXAST_DEC_TTL_CNT_IDS (21): nx header | n_controllers (2) | zeros (4)
//!                       | controller ids (2 each) | zeros to 8
//! NXAST_CLONE (42):     nx header | pad (6) | actions
//! NXAST_CT_CLEAR (43):  nx header | pad (6)                                      = 16
//! NXAST_RESUBMIT_TABLE_CT (44): nx header | in_port (2) | table (1) | pad (3)    = 16
//! NXAST_CT (35):        nx header | flags (2) | zone_src (4) | zone_ofs_nbits (2)
//!                       | recirc_table (1) | pad (3) | alg (2) | actions         >= 24
//!                       (zone_src 0: the two bytes are the zone itself, zone_imm)
//! NXAST_NAT (36):       nx header | pad (2) | flags (2) | range_present (2)
//!                       | those present of: ipv4 min (4) | ipv4 max (4)
//!                       | ipv6 min (16) | ipv6 max (16) | port min (2) | port max (2)
//!                       | zeros to 8                                         >= 16
//! NXAST_CONTROLLER (20): nx header | max_len (2) | controller_id (2) | reason (1)
//!                       | zero (1)                                             = 16
//! NXAST_CONTROLLER2 (37): nx header | pad (6) | properties (each padded to 8):
//!                       MAX_LEN (0): u16 | pad (2), len 8; CONTROLLER_ID (1): same;
//!                       REASON (2): u8, len 5; USERDATA (3): bytes, len 4 + n;
//!                       PAUSE (4): flag, len 4; METER_ID (5): u32, len 8
//! field header:         class (2) | field (7 bits) has_mask (1 bit) | length (1)
//!                       [| experimenter (4) when class is 0xffff]
//! ```
//!
//! Which form Open vSwitch 3.1 writes depends on the version (captured
//! from `ovs-ofctl -O OpenFlow13` / `-O OpenFlow15 add-flow`): `move:` is
//! NXAST_REG_MOVE up to 1.4 and OFPAT_COPY_FIELD in 1.5; `load:` (and a
//! set_field of part of a field) is NXAST_REG_LOAD up to 1.4 and a masked
//! OFPAT_SET_FIELD in 1.5 (1.5 dropped REG_LOAD and REG_LOAD2); a
//! set_field of a field with an experimenter header or of variable length
//! (tun_metadata) that needs a mask is NXAST_REG_LOAD2 up to 1.4;
//! `dec_ttl` is OFPAT_DEC_NW_TTL from 1.1 (NXAST_DEC_TTL in 1.0) and
//! `dec_ttl(ids)` NXAST_DEC_TTL_CNT_IDS everywhere; `controller(...)`
//! NXAST_CONTROLLER, or NXAST_CONTROLLER2 when it has userdata or pauses
//! (its properties only where they differ from the defaults, in the order
//! above: `encode_CONTROLLER`); the rest are the same
//! Nicira bytes in every version (a clone's and a ct's nested actions
//! follow its version: `exec(set_field:0x2/0x2->ct_mark)` is a masked
//! OFPAT_SET_FIELD in 1.5 and NXAST_REG_LOAD before). Field headers are
//! written as given: Open vSwitch names a field by its NXM header in
//! Nicira's actions and by the version's OXM header in 1.5's, and
//! picking between them is the caller's (it knows the fields). A ct's
//! zone field is always named by its NXM header where the field has one
//! (`encode_CT`'s `nxm_header_from_mff`: `zone=OXM_OF_TCP_SRC[]` goes out
//! as NXM_OF_TCP_SRC in 1.5 too), by its OXM header where it has only
//! that (`zone=OXM_OF_PKT_REG0[16..31]`).
//!
//! NXAST_NAT as `encode_NAT` writes it: the range fields whose value is
//! not zero, so a range's last member whenever it was given, even equal
//! to the first (`nat(src=10.0.0.1-10.0.0.1:80-80)` has all four), and
//! the ports only with addresses. What may nest in a ct is Open vSwitch's
//! `ofpacts_verify_nested`, applied after decoding with its own error
//! codes: [`ct_only`] is its test, the check is the caller's.
//!
//! Every reader here takes any bytes without panicking; what does not fit
//! is an error naming the action (Open vSwitch's name for it) and the
//! offset in the message.
//!
//! The table covers every action; three families have files of their
//! own, with their numbers, readers and writers: `fields` (set_field,
//! the loads, the moves, the stack actions), `controller`
//! (NXAST_CONTROLLER and CONTROLLER2) and `conntrack` (NXAST_CT and
//! NXAST_NAT). The rest is here, with `read_nx`, which hands each Nicira
//! subtype to its reader.

mod conntrack;
mod controller;
mod fields;
pub use conntrack::*;
pub use controller::*;
pub use fields::*;

use super::{Action, EXPERIMENTER_ACTION, NX_VENDOR, OF10};
use super::{NXAST_RESUBMIT, NXAST_RESUBMIT_TABLE};
use crate::error::{need, Error, Layer, Result};
use crate::{be16, be32};

/// Nicira action subtypes (`enum ofp_raw_action_type`'s NX numbers).
pub const NXAST_REG_MOVE: u16 = 6;
pub const NXAST_REG_LOAD: u16 = 7;
pub const NXAST_NOTE: u16 = 8;
pub const NXAST_OUTPUT_REG: u16 = 15;
pub const NXAST_LEARN: u16 = 16;
pub const NXAST_EXIT: u16 = 17;
pub const NXAST_DEC_TTL: u16 = 18;
pub const NXAST_CONTROLLER: u16 = 20;
pub const NXAST_DEC_TTL_CNT_IDS: u16 = 21;
pub const NXAST_STACK_PUSH: u16 = 27;
pub const NXAST_STACK_POP: u16 = 28;
pub const NXAST_REG_LOAD2: u16 = 33;
pub const NXAST_CONJUNCTION: u16 = 34;
pub const NXAST_CT: u16 = 35;
pub const NXAST_NAT: u16 = 36;
pub const NXAST_CONTROLLER2: u16 = 37;
pub const NXAST_CLONE: u16 = 42;
pub const NXAST_CT_CLEAR: u16 = 43;
pub const NXAST_RESUBMIT_TABLE_CT: u16 = 44;
pub const NXAST_LEARN2: u16 = 45;
pub const NXAST_CHECK_PKT_LARGER: u16 = 49;

/// OpenFlow's own action types for dec_ttl (1.1+), group (1.1+),
/// copy_field and meter (1.5).
pub const AT_GROUP: u16 = 22;
pub const AT_DEC_NW_TTL: u16 = 24;
pub const AT_COPY_FIELD: u16 = 28;
pub const AT_METER: u16 = 29;

/// The OXM class whose headers carry a 4-byte experimenter id (8 bytes
/// in all).
pub const OXM_EXPERIMENTER: u16 = 0xffff;

/// How deep clones may nest (Open vSwitch's own limit on nesting when it
/// parses actions, `MAX_OFPACT_PARSE_DEPTH`).
pub const MAX_ACTION_DEPTH: usize = 100;

fn bad(field: &'static str, offset: usize, reason: &'static str) -> Error {
    Error::invalid(Layer::OpenFlow, field, offset, reason)
}

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from(be32(b, at)) << 32 | u64::from(be32(b, at + 4))
}

/// Open vSwitch's name for Nicira action `subtype`, for messages that
/// refuse one (`None` for a number it does not define).
pub fn nxast_name(subtype: u16) -> Option<&'static str> {
    Some(match subtype {
        NXAST_RESUBMIT => "NXAST_RESUBMIT",
        2 => "NXAST_SET_TUNNEL",
        4 => "NXAST_SET_QUEUE",
        5 => "NXAST_POP_QUEUE",
        NXAST_REG_MOVE => "NXAST_REG_MOVE",
        NXAST_REG_LOAD => "NXAST_REG_LOAD",
        NXAST_NOTE => "NXAST_NOTE",
        9 => "NXAST_SET_TUNNEL64",
        10 => "NXAST_MULTIPATH",
        12 => "NXAST_BUNDLE",
        13 => "NXAST_BUNDLE_LOAD",
        NXAST_RESUBMIT_TABLE => "NXAST_RESUBMIT_TABLE",
        NXAST_OUTPUT_REG => "NXAST_OUTPUT_REG",
        NXAST_LEARN => "NXAST_LEARN",
        NXAST_EXIT => "NXAST_EXIT",
        NXAST_DEC_TTL => "NXAST_DEC_TTL",
        19 => "NXAST_FIN_TIMEOUT",
        NXAST_CONTROLLER => "NXAST_CONTROLLER",
        NXAST_DEC_TTL_CNT_IDS => "NXAST_DEC_TTL_CNT_IDS",
        22 => "NXAST_WRITE_METADATA",
        23 => "NXAST_PUSH_MPLS",
        24 => "NXAST_POP_MPLS",
        25 => "NXAST_SET_MPLS_TTL",
        26 => "NXAST_DEC_MPLS_TTL",
        NXAST_STACK_PUSH => "NXAST_STACK_PUSH",
        NXAST_STACK_POP => "NXAST_STACK_POP",
        29 => "NXAST_SAMPLE",
        30 => "NXAST_SET_MPLS_LABEL",
        31 => "NXAST_SET_MPLS_TC",
        32 => "NXAST_OUTPUT_REG2",
        NXAST_REG_LOAD2 => "NXAST_REG_LOAD2",
        NXAST_CONJUNCTION => "NXAST_CONJUNCTION",
        NXAST_CT => "NXAST_CT",
        NXAST_NAT => "NXAST_NAT",
        NXAST_CONTROLLER2 => "NXAST_CONTROLLER2",
        38 => "NXAST_SAMPLE2",
        39 => "NXAST_OUTPUT_TRUNC",
        40 => "NXAST_GROUP",
        41 => "NXAST_SAMPLE3",
        NXAST_CLONE => "NXAST_CLONE",
        NXAST_CT_CLEAR => "NXAST_CT_CLEAR",
        NXAST_RESUBMIT_TABLE_CT => "NXAST_RESUBMIT_TABLE_CT",
        NXAST_LEARN2 => "NXAST_LEARN2",
        46 => "NXAST_ENCAP",
        47 => "NXAST_DECAP",
        48 => "NXAST_DEC_NSH_TTL",
        NXAST_CHECK_PKT_LARGER => "NXAST_CHECK_PKT_LARGER",
        50 => "NXAST_DELETE_FIELD",
        254 => "NXAST_DEBUG_SLOW",
        255 => "NXAST_DEBUG_RECIRC",
        _ => return None,
    })
}

/// An OXM or NXM field header without a value, as move, the stack
/// actions and REG_LOAD name a field: 4 bytes, or 8 when the class is
/// [`OXM_EXPERIMENTER`] (the experimenter id follows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OxmHeader {
    pub class: u16,
    pub field: u8,
    pub has_mask: bool,
    /// The length byte as written: the value's bytes, doubled with a
    /// mask, plus 4 for an experimenter's id.
    pub len: u8,
    /// The experimenter id of a class-0xffff header (written as 0 if
    /// `None` there; ignored for other classes).
    pub experimenter: Option<u32>,
}

impl OxmHeader {
    /// A plain (unmasked) header of a `len`-byte field.
    pub const fn new(class: u16, field: u8, len: u8) -> OxmHeader {
        OxmHeader {
            class,
            field,
            has_mask: false,
            len,
            experimenter: None,
        }
    }

    /// The header as its 32 bits (an NXM header's usual spelling, e.g.
    /// 0x00011c04 for NXM_NX_REG14), without any experimenter id.
    pub fn to_u32(&self) -> u32 {
        u32::from(self.class) << 16
            | u32::from(self.field) << 9
            | u32::from(self.has_mask) << 8
            | u32::from(self.len)
    }

    /// The header of 32 bits `h` (no experimenter id).
    pub fn from_u32(h: u32) -> OxmHeader {
        OxmHeader {
            class: (h >> 16) as u16,
            field: ((h >> 9) & 0x7f) as u8,
            has_mask: h & 0x100 != 0,
            len: h as u8,
            experimenter: None,
        }
    }

    /// Its bytes on the wire: 4, or 8 for an experimenter's.
    pub fn wire_len(&self) -> usize {
        if self.class == OXM_EXPERIMENTER {
            8
        } else {
            4
        }
    }

    /// The field's width in bytes: the length without the experimenter
    /// id, halved when the header says a mask follows.
    pub fn value_len(&self) -> usize {
        let mut n = usize::from(self.len);
        if self.class == OXM_EXPERIMENTER {
            n = n.saturating_sub(4);
        }
        if self.has_mask {
            n / 2
        } else {
            n
        }
    }

    /// Append the header (4 or 8 bytes).
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_u32().to_be_bytes());
        if self.class == OXM_EXPERIMENTER {
            out.extend_from_slice(&self.experimenter.unwrap_or(0).to_be_bytes());
        }
    }

    /// The header at the start of `b` and the bytes it takes; `what`
    /// names it in errors, whose offsets are `base` + its place in `b`.
    pub fn parse(b: &[u8], base: usize, what: &'static str) -> Result<(OxmHeader, usize)> {
        need(Layer::OpenFlow, what, b, 0, 4).map_err(|e| e.at(base))?;
        let mut h = OxmHeader::from_u32(be32(b, 0));
        if h.class != OXM_EXPERIMENTER {
            return Ok((h, 4));
        }
        need(Layer::OpenFlow, what, b, 0, 8).map_err(|e| e.at(base))?;
        h.experimenter = Some(be32(b, 4));
        Ok((h, 8))
    }
}

/// Check that `rest` (at `base`) is all zeros, as Open vSwitch requires
/// of these actions' padding.
fn zeros(rest: &[u8], base: usize, what: &'static str) -> Result<()> {
    match rest.iter().position(|&x| x != 0) {
        Some(i) => Err(bad(what, base + i, "padding is not zero")),
        None => Ok(()),
    }
}

/// Check that action `a` (at `at`) is exactly `n` bytes long.
fn exactly(a: &[u8], at: usize, n: usize, what: &'static str) -> Result<()> {
    if a.len() == n {
        Ok(())
    } else {
        Err(bad(
            what,
            at + 2,
            match n {
                16 => "length is not 16",
                _ => "length is not 24",
            },
        ))
    }
}

/// OFPAT_DEC_NW_TTL, whole, at `at`.
pub(super) fn read_dec_nw_ttl(a: &[u8], at: usize) -> Result<Action<'static>> {
    if a.len() != 8 {
        return Err(bad("OFPAT_DEC_NW_TTL", at + 2, "length is not 8"));
    }
    Ok(Action::DecTtl)
}

/// A Nicira action `a` (whole, vendor checked; less than 16 bytes is an
/// error) at
/// `at` in the message; `nested` reads a clone's actions (their bytes
/// and offset), in the version of the list around it.
pub(super) fn read_nx<'a>(
    a: &'a [u8],
    at: usize,
    nested: impl FnOnce(&'a [u8], usize) -> Result<Vec<Action<'a>>>,
) -> Result<Action<'a>> {
    let len = a.len();
    if len < 16 {
        return Err(bad(
            "Nicira action",
            at + 2,
            "shorter than its 16-byte header",
        ));
    }
    let sub = be16(a, 8);
    Ok(match sub {
        NXAST_RESUBMIT | NXAST_RESUBMIT_TABLE | NXAST_RESUBMIT_TABLE_CT => {
            let what = match sub {
                NXAST_RESUBMIT => "NXAST_RESUBMIT",
                NXAST_RESUBMIT_TABLE => "NXAST_RESUBMIT_TABLE",
                _ => "NXAST_RESUBMIT_TABLE_CT",
            };
            exactly(a, at, 16, what)?;
            let (port, table) = (be16(a, 10), a[12]);
            if sub == NXAST_RESUBMIT {
                return Ok(Action::NxResubmit { port, table: 0xff });
            }
            zeros(&a[13..], at + 13, what)?;
            if sub == NXAST_RESUBMIT_TABLE {
                Action::NxResubmit { port, table }
            } else {
                Action::NxResubmitCt { port, table }
            }
        }
        NXAST_REG_LOAD => read_reg_load(a, at)?,
        NXAST_REG_LOAD2 => read_reg_load2(a, at)?,
        NXAST_REG_MOVE => read_move(a, at, 10, 16, "NXAST_REG_MOVE")?,
        NXAST_STACK_PUSH | NXAST_STACK_POP => read_stack(a, at, sub)?,
        NXAST_NOTE => Action::Note(&a[10..]),
        NXAST_DEC_TTL => {
            exactly(a, at, 16, "NXAST_DEC_TTL")?;
            Action::DecTtl
        }
        NXAST_DEC_TTL_CNT_IDS => {
            const W: &str = "NXAST_DEC_TTL_CNT_IDS";
            zeros(&a[12..16], at + 12, W)?;
            let n = usize::from(be16(a, 10));
            if 16 + 2 * n > len {
                return Err(bad(W, at + 10, "more controller ids than the action holds"));
            }
            Action::DecTtlCntIds {
                ids: &a[16..16 + 2 * n],
            }
        }
        NXAST_CLONE => Action::Clone(nested(&a[16..], at + 16)?),
        NXAST_CT => read_ct(a, at, nested)?,
        NXAST_NAT => read_nat(a, at)?,
        NXAST_CT_CLEAR => {
            exactly(a, at, 16, "NXAST_CT_CLEAR")?;
            Action::CtClear
        }
        NXAST_CONJUNCTION => {
            const W: &str = "NXAST_CONJUNCTION";
            exactly(a, at, 16, W)?;
            let (clause, n_clauses) = (a[10], a[11]);
            if !(2..=64).contains(&n_clauses) || clause >= n_clauses {
                return Err(bad(
                    W,
                    at + 10,
                    "clause not below n_clauses, or n_clauses not 2..64",
                ));
            }
            Action::Conjunction {
                id: be32(a, 12),
                clause,
                n_clauses,
            }
        }
        NXAST_CONTROLLER => read_controller(a, at)?,
        NXAST_CONTROLLER2 => read_controller2(a, at)?,
        subtype => Action::NxOther { subtype },
    })
}

/// Check the nesting `depth` of a clone's or ct's actions (the
/// outermost list is 0) at `at`.
pub(super) fn check_depth(depth: usize, at: usize) -> Result<()> {
    if depth > MAX_ACTION_DEPTH {
        return Err(bad(
            "NXAST_CLONE or NXAST_CT",
            at,
            "nested more than 100 deep",
        ));
    }
    Ok(())
}

/// Open the action at the end of `out`: its type and a length to be
/// filled by [`finish`]; returns where it starts.
pub(super) fn start(out: &mut Vec<u8>, typ: u16) -> usize {
    let s = out.len();
    out.extend_from_slice(&typ.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    s
}

/// Open a Nicira action of `subtype`.
pub(super) fn start_nx(out: &mut Vec<u8>, subtype: u16) -> usize {
    let s = start(out, EXPERIMENTER_ACTION);
    out.extend_from_slice(&NX_VENDOR.to_be_bytes());
    out.extend_from_slice(&subtype.to_be_bytes());
    s
}

/// Pad the action begun at `s` with zeros to 8 and write its length.
pub(super) fn finish(out: &mut Vec<u8>, s: usize) {
    let len = (out.len() - s).div_ceil(8) * 8;
    out.resize(s + len, 0);
    let l = (len.min(u16::MAX as usize) as u16).to_be_bytes();
    out[s + 2..s + 4].copy_from_slice(&l);
}

/// NXAST_CONJUNCTION.
pub(super) fn put_conjunction(out: &mut Vec<u8>, id: u32, clause: u8, n_clauses: u8) {
    let s = start_nx(out, NXAST_CONJUNCTION);
    out.extend_from_slice(&[clause, n_clauses]);
    out.extend_from_slice(&id.to_be_bytes());
    finish(out, s);
}

/// A Nicira action of `subtype` with nothing but padding after it.
pub(super) fn put_nx_empty(out: &mut Vec<u8>, subtype: u16) {
    let s = start_nx(out, subtype);
    out.extend_from_slice(&[0; 6]);
    finish(out, s);
}

/// NXAST_NOTE with `note`, padded with zeros to 8.
pub(super) fn put_note(out: &mut Vec<u8>, note: &[u8]) {
    let s = start_nx(out, NXAST_NOTE);
    out.extend_from_slice(note);
    finish(out, s);
}

/// dec_ttl: NXAST_DEC_TTL in 1.0, OFPAT_DEC_NW_TTL from 1.1.
pub(super) fn put_dec_ttl(out: &mut Vec<u8>, version: u8) {
    if version <= OF10 {
        put_nx_empty(out, NXAST_DEC_TTL);
    } else {
        let s = start(out, AT_DEC_NW_TTL);
        out.extend_from_slice(&[0; 4]);
        finish(out, s);
    }
}

/// NXAST_DEC_TTL_CNT_IDS with the big-endian ids `ids` (an odd byte
/// left over is dropped).
pub(super) fn put_cnt_ids(out: &mut Vec<u8>, ids: &[u8]) {
    let s = start_nx(out, NXAST_DEC_TTL_CNT_IDS);
    let n = (ids.len() / 2).min(u16::MAX as usize);
    out.extend_from_slice(&(n as u16).to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&ids[..2 * n]);
    finish(out, s);
}

/// NXAST_RESUBMIT_TABLE_CT.
pub(super) fn put_resubmit_ct(out: &mut Vec<u8>, port: u16, table: u8) {
    let s = start_nx(out, NXAST_RESUBMIT_TABLE_CT);
    out.extend_from_slice(&port.to_be_bytes());
    out.extend_from_slice(&[table, 0, 0, 0]);
    finish(out, s);
}

/// NXAST_CLONE holding what `nested` writes (its actions, in the
/// clone's version).
pub(super) fn put_clone(out: &mut Vec<u8>, nested: impl FnOnce(&mut Vec<u8>)) {
    let s = start_nx(out, NXAST_CLONE);
    out.extend_from_slice(&[0; 6]);
    nested(out);
    finish(out, s);
}

/// The controller ids of [`Action::DecTtlCntIds`]'s `ids`.
pub fn cnt_ids(ids: &[u8]) -> impl Iterator<Item = u16> + '_ {
    ids.chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
}

#[cfg(test)]
mod testkit;

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::testkit::*;
    use super::MAX_ACTION_DEPTH;
    use proptest::prelude::*;

    /// Where the apply-actions instruction's actions start in a flow_mod
    /// (and the instruction's own offset).
    fn actions_at(b: &[u8]) -> (usize, usize) {
        apply_actions_at(b).expect("apply-actions")
    }

    fn apply_actions_at(b: &[u8]) -> Option<(usize, usize)> {
        let match_len = usize::from(u16::from_be_bytes([b[50], b[51]]));
        let ins = 48 + match_len.div_ceil(8) * 8;
        (b.get(ins..ins + 2)? == [0, 4]).then_some((ins, ins + 8))
    }

    /// A note keeps its padding: Open vSwitch reads the bytes to the
    /// action's end and prints them all (`note:01.02.03` comes back as
    /// `note:01.02.03.00.00.00`), and writes them padded to 8.
    #[test]
    fn note_keeps_its_padding() {
        let cases: [(&str, &[u8]); 3] = [
            ("actions=note:01.02.03", &[1, 2, 3, 0, 0, 0]),
            (
                "actions=note:00.11.22.33.44.55.66.77.88",
                &[
                    0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0, 0, 0, 0, 0,
                ],
            ),
            ("actions=note:", &[0; 6]),
        ];
        for (f, note) in cases {
            for v in [13, 15] {
                golden(v, f, &[Action::Note(note)]);
            }
        }
        // Written from the bytes the user gave, it pads the same.
        writes(13, "actions=note:01.02.03", &[Action::Note(&[1, 2, 3])]);
        writes(15, "actions=note:", &[Action::Note(&[])]);
        prints(
            &ovs(13, "actions=note:01.02.03"),
            "actions=note:01.02.03.00.00.00",
        );
    }

    /// dec_ttl is OFPAT_DEC_NW_TTL from 1.1 on; with controller ids (even
    /// the default `(0)` spelled out), NXAST_DEC_TTL_CNT_IDS.
    #[test]
    fn dec_ttl_and_its_controller_ids() {
        for v in [13, 15] {
            golden(v, "ip,actions=dec_ttl", &[Action::DecTtl]);
            golden(
                v,
                "ip,actions=dec_ttl(1,2,3)",
                &[Action::DecTtlCntIds {
                    ids: &[0, 1, 0, 2, 0, 3],
                }],
            );
            golden(
                v,
                "ip,actions=dec_ttl(0)",
                &[Action::DecTtlCntIds { ids: &[0, 0] }],
            );
        }
        let b = ovs(15, "ip,actions=dec_ttl");
        assert_eq!(hex(&b[b.len() - 8..]), "0018000800000000");
        assert_eq!(
            cnt_ids(&[0, 1, 0, 2, 0, 3]).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        // 1.0's dec_ttl, NXAST_DEC_TTL, reads the same in a 1.3 list.
        let nx = unhex("ffff0010000023200012000000000000");
        assert_eq!(actions(&nx, 0).unwrap(), vec![Action::DecTtl]);
    }

    /// A clone nests actions of its own version: the move inside is
    /// REG_MOVE in 1.3 and COPY_FIELD in 1.5.
    #[test]
    fn clone_nests_its_versions_actions() {
        let f = "actions=clone(set_field:0x1->reg0,move:NXM_NX_REG14[]->NXM_NX_REG15[],output:1)";
        let inner = vec![
            sf(NXM_1, 0, &[0, 0, 0, 1], None),
            mv(32, 0, 0, REG14, REG15),
            Action::Output {
                port: 1,
                max_len: 0,
            },
        ];
        for v in [13, 15] {
            golden(v, f, &[Action::Clone(inner.clone())]);
        }
        let f = "actions=clone(clone(ct_clear),resubmit(,3))";
        let want = Action::Clone(vec![
            Action::Clone(vec![Action::CtClear]),
            Action::NxResubmit {
                port: 0xfff8,
                table: 3,
            },
        ]);
        for v in [13, 15] {
            golden(v, f, std::slice::from_ref(&want));
            golden(v, "actions=clone()", &[Action::Clone(Vec::new())]);
            golden(v, "actions=ct_clear", &[Action::CtClear]);
        }
        prints(&ovs(15, f), "actions=clone(clone(ct_clear),resubmit(,3))");
    }

    /// `conjunction(ID,K/N)`: clause K-1 on the wire, as OVS 3.1 writes
    /// it in both versions.
    #[test]
    fn conjunction() {
        for v in [13, 15] {
            golden(
                v,
                "actions=conjunction(1,1/2)",
                &[Action::Conjunction {
                    id: 1,
                    clause: 0,
                    n_clauses: 2,
                }],
            );
        }
        assert_eq!(nxast_name(NXAST_CONJUNCTION), Some("NXAST_CONJUNCTION"));
    }

    #[test]
    fn resubmit_with_ct() {
        let f = "ct_state=+trk-inv,ip,actions=resubmit(2,5,ct)";
        for v in [13, 15] {
            golden(v, f, &[Action::NxResubmitCt { port: 2, table: 5 }]);
        }
    }

    /// What tunlab leaves for later reads as NxOther with its subtype
    /// (or Other with its type), for the switch to name.
    #[test]
    fn the_rest_is_named_by_subtype() {
        let cases = [
            (
                "actions=check_pkt_larger(1500)->NXM_NX_REG0[0]",
                NXAST_CHECK_PKT_LARGER,
                "NXAST_CHECK_PKT_LARGER",
            ),
            (
                "actions=output:NXM_NX_REG15[]",
                NXAST_OUTPUT_REG,
                "NXAST_OUTPUT_REG",
            ),
        ];
        for (f, subtype, name) in cases {
            for v in [13, 15] {
                assert_eq!(
                    read(&ovs(v, f)).actions,
                    vec![Action::NxOther { subtype }],
                    "{f}"
                );
            }
            assert_eq!(nxast_name(subtype), Some(name));
        }
        for v in [13, 15] {
            assert_eq!(
                read(&ovs(v, "actions=group:1")).actions,
                vec![Action::Other { typ: AT_GROUP }]
            );
        }
        // meter: an instruction in 1.3, an action in 1.5.
        let meter = ovs(13, "actions=meter:1");
        let fm = read(&meter);
        assert_eq!((fm.actions.len(), fm.other_instructions), (0, vec![6]));
        assert_eq!(
            read(&ovs(15, "actions=meter:1")).actions,
            vec![Action::Other { typ: AT_METER }]
        );
        // Another vendor's experimenter action stays Other.
        let other = unhex("ffff0010000000aa0001000000000000");
        assert_eq!(
            actions(&other, 0).unwrap(),
            vec![Action::Other { typ: 0xffff }]
        );
        // NxOther writes a bare header of its subtype.
        let mut out = Vec::new();
        Action::NxOther {
            subtype: NXAST_LEARN,
        }
        .emit(&mut out);
        assert_eq!(hex(&out), "ffff0010000023200010000000000000");
    }

    /// OpenFlow 1.0 (ovs-ofctl's default): the same Nicira actions, with
    /// dec_ttl as NXAST_DEC_TTL; 1.0 keeps reading a whole-field load as
    /// a set_field.
    #[test]
    fn openflow10_forms() {
        let cases: [(&str, Vec<Action<'_>>); 4] = [
            ("ip,actions=dec_ttl", vec![Action::DecTtl]),
            (
                "actions=move:NXM_NX_REG14[]->NXM_NX_REG15[]",
                vec![mv(32, 0, 0, REG14, REG15)],
            ),
            (
                "actions=load:0x5->NXM_NX_REG0[0..7]",
                vec![load(0, 8, REG0, 5)],
            ),
            (
                "actions=clone(set_field:0x1->reg0,output:1)",
                vec![Action::Clone(vec![
                    sf(NXM_1, 0, &[0, 0, 0, 1], None),
                    Action::Output {
                        port: 1,
                        max_len: 0,
                    },
                ])],
            ),
        ];
        for (f, want) in cases {
            let b = ovs(10, f);
            let m = Message::new_checked(&b).unwrap();
            let fm = match parse_nx(&m) {
                Some(nx) => parse_nx_flow_mod(nx.body).unwrap(),
                None => parse_flow_mod10(&m).unwrap().0,
            };
            assert_eq!(fm.actions, want, "{f}");
            let mut out = Vec::new();
            for a in &want {
                a.emit_in(OF10, &mut out);
            }
            assert_eq!(hex(&out), hex(&b[b.len() - out.len()..]), "{f}");
        }
    }

    /// Each golden's actions cut short (their length fields shrunk by 8
    /// at a time): read or refused, never a panic, and a refusal points
    /// inside the action; the first cut of each names it.
    #[test]
    fn shortened_actions_are_refused_by_name() {
        let named = [
            ("actions=load:0x1234->NXM_NX_REG0[]", 13, "NXAST_REG_LOAD"),
            (
                "packet_type=(1,0x894f),actions=set_field:5/0xff->nsh_c1",
                13,
                "NXAST_REG_LOAD2",
            ),
            ("actions=set_field:0x5/0xff->reg0", 15, "OFPAT_SET_FIELD"),
            (
                "actions=move:NXM_NX_REG14[]->NXM_NX_REG15[]",
                13,
                "NXAST_REG_MOVE",
            ),
            (
                "actions=move:NXM_NX_REG14[]->NXM_NX_REG15[]",
                15,
                "OFPAT_COPY_FIELD",
            ),
            ("actions=push:NXM_NX_REG0[]", 13, "NXAST_STACK_PUSH"),
            ("actions=pop:NXM_NX_REG1[0..15]", 15, "NXAST_STACK_POP"),
            ("ip,actions=dec_ttl(1,2,3)", 13, "NXAST_DEC_TTL_CNT_IDS"),
            (
                "ct_state=+trk-inv,ip,actions=resubmit(2,5,ct)",
                13,
                "Nicira action",
            ),
            ("actions=note:01.02.03", 15, "Nicira action"),
            ("actions=ct_clear", 13, "Nicira action"),
            ("ip,actions=ct(zone=5)", 13, "NXAST_CT"),
            ("ip,actions=ct(zone=5)", 15, "NXAST_CT"),
        ];
        for (f, v, name) in named {
            let b = ovs(v, f);
            let (_, at) = actions_at(&b);
            let e = actions(&shrink(&b[at..], 0, 8), at).unwrap_err();
            assert!(e.to_string().contains(name), "{f}: {e}");
            let len = usize::from(u16::from_be_bytes([b[at + 2], b[at + 3]]));
            assert!((at..at + len).contains(&e.offset), "{f}: {e}");
        }
        for (v, f, hx) in captures() {
            let b = unhex(hx);
            if b[1] != FLOW_MOD || b[0] == OF10 {
                continue;
            }
            let Some((_, at)) = apply_actions_at(&b) else {
                continue;
            };
            let list = &b[at..];
            let mut i = 0;
            while i < list.len() {
                let len = usize::from(u16::from_be_bytes([list[i + 2], list[i + 3]]));
                for less in (8..len).step_by(8) {
                    let cut = shrink(list, i, less);
                    if let Err(e) = actions(&cut, at) {
                        assert!(
                            (at + i..at + i + len).contains(&e.offset),
                            "{v} {f} -{less}: {e}"
                        );
                    }
                }
                // Every cut of the bytes themselves too.
                for n in 0..list.len() {
                    let _ = actions(&list[..n], at);
                }
                i += len;
            }
        }
    }

    /// `list` with its action at `i` made `less` bytes shorter (its
    /// length field too), bytes dropped from its end.
    fn shrink(list: &[u8], i: usize, less: usize) -> Vec<u8> {
        let len = usize::from(u16::from_be_bytes([list[i + 2], list[i + 3]]));
        let mut out = list[..i + len - less].to_vec();
        out[i + 2..i + 4].copy_from_slice(&((len - less) as u16).to_be_bytes());
        out.extend_from_slice(&list[i + len..]);
        out
    }

    /// Garbage Open vSwitch refuses is refused here, by name and offset.
    #[test]
    fn garbage_is_refused_where_it_is() {
        let refused = |hx: &str, name: &str, offset: usize| {
            let b = unhex(hx);
            let e = actions(&b, 100).unwrap_err();
            assert!(e.to_string().contains(name), "{hx}: {e}");
            assert_eq!(e.offset, 100 + offset, "{hx}: {e}");
        };
        // REG_MOVE's padding must be zero.
        refused(
            concat!(
                "ffff0020",
                "00002320",
                "0006",
                "0020",
                "0000",
                "0000",
                "00010004",
                "ffff0c08005ad650",
                "00000001"
            ),
            "NXAST_REG_MOVE",
            31,
        );
        // An experimenter header cut off by the action's end.
        refused("001c0010002000000000000000010004", "OFPAT_COPY_FIELD", 16);
        refused(
            concat!("001c0010", "0020", "0000", "0000", "0000", "ffff0c08"),
            "OFPAT_COPY_FIELD",
            12,
        );
        // REG_LOAD's 4-byte dst cannot be an experimenter's.
        refused(
            "ffff00180000232000070007ffff0c080000000000000005",
            "NXAST_REG_LOAD",
            12,
        );
        // A load of more bits than n_bits says.
        refused(
            "ffff00180000232000070007000100040000000000000105",
            "NXAST_REG_LOAD",
            16,
        );
        // A masked TLV of odd length.
        refused("0019001000010103000000ff00000000", "OFPAT_SET_FIELD", 7);
        refused(
            "ffff0018000023200021ffff0d03005ad650000000000000",
            "NXAST_REG_LOAD2",
            13,
        );
        // More controller ids than fit; nonzero reserved bytes.
        refused(
            "ffff00180000232000150005000000000001000200030000",
            "NXAST_DEC_TTL_CNT_IDS",
            10,
        );
        refused(
            "ffff00180000232000150001000000010001000000000000",
            "NXAST_DEC_TTL_CNT_IDS",
            15,
        );
        // resubmit(,,ct)'s pad; ct_clear and dec_ttl's fixed lengths.
        refused(
            "ffff001000002320002c0002050000ff",
            "NXAST_RESUBMIT_TABLE_CT",
            15,
        );
        refused(
            "ffff001800002320002b0000000000000000000000000000",
            "NXAST_CT_CLEAR",
            2,
        );
        refused("00180010000000000000000000000000", "OFPAT_DEC_NW_TTL", 2);
        refused("ffff000800002320", "Nicira action", 2);
        // A stack action whose n_bits lands past an experimenter header
        // is still 24 bytes, and its padding must be zero.
        refused(
            "ffff001800002320001b0000ffff0c08005ad650002000ff",
            "NXAST_STACK_PUSH",
            23,
        );
    }

    /// A clone's nested error keeps its offset in the message; nesting
    /// stops at Open vSwitch's parse depth.
    #[test]
    fn clone_errors_and_depth() {
        let f = "actions=clone(set_field:0x1->reg0,move:NXM_NX_REG14[]->NXM_NX_REG15[],output:1)";
        let mut b = ovs(15, f);
        let (_, at) = actions_at(&b);
        // The nested COPY_FIELD is the clone's second action (16 + 16
        // in); set its last padding byte.
        let mv_at = at + 16 + 16;
        assert_eq!(&b[mv_at..mv_at + 2], &AT_COPY_FIELD.to_be_bytes());
        b[mv_at + 23] = 1;
        let e = parse_flow_mod(&Message::new_checked(&b).unwrap()).unwrap_err();
        assert!(e.to_string().contains("OFPAT_COPY_FIELD"), "{e}");
        assert_eq!(e.offset, mv_at + 23);

        let nest = |depth: usize| {
            let mut a = vec![Action::CtClear];
            for _ in 0..depth {
                a = vec![Action::Clone(a)];
            }
            let mut out = Vec::new();
            for x in &a {
                x.emit(&mut out);
            }
            out
        };
        let ok = nest(MAX_ACTION_DEPTH);
        let got = actions(&ok, 0).unwrap();
        assert_eq!(got.len(), 1);
        let e = actions(&nest(MAX_ACTION_DEPTH + 1), 0).unwrap_err();
        assert!(e.to_string().contains("nested more than 100 deep"), "{e}");
        assert_eq!(e.offset, 16 * (MAX_ACTION_DEPTH + 1));
        // 1.0's reader stops there too.
        assert!(actions10(&nest(MAX_ACTION_DEPTH + 1), 0).is_err());
    }

    /// PACKET_OUT and flow descriptions of 1.5 write 1.5's forms.
    #[test]
    fn openflow15_messages_write_15_forms() {
        let acts = [mv(32, 0, 0, REG14, REG15), load(0, 8, REG0, 5)];
        let port = [0, 0, 0, 1];
        let po = packet_out15(
            1,
            &[Oxm {
                class: OXM_BASIC,
                field: 0,
                value: &port,
                mask: None,
            }],
            &acts,
            &[],
        );
        let p = parse_packet_out15(&Message::new_checked(&po).unwrap()).unwrap();
        assert_eq!(
            p.actions,
            vec![
                mv(32, 0, 0, REG14, REG15),
                sf(NXM_1, 0, &[0, 0, 0, 5], Some(&[0, 0, 0, 0xff]))
            ]
        );
        prints(
            &po,
            "actions=move:NXM_NX_REG14[]->NXM_NX_REG15[],set_field:0x5/0xff->reg0",
        );
        let mut ins = Vec::new();
        put_apply_actions_in(OF15, &mut ins, &acts);
        assert_eq!(&ins[8..10], &AT_COPY_FIELD.to_be_bytes());
        let mut ins13 = Vec::new();
        put_apply_actions(&mut ins13, &acts);
        assert_eq!(&ins13[8..10], &EXPERIMENTER_ACTION.to_be_bytes());
    }

    /// A structured action, for the round trips below.
    fn any_header() -> impl Strategy<Value = OxmHeader> {
        (
            any::<u16>(),
            0u8..128,
            any::<bool>(),
            any::<u8>(),
            any::<u32>(),
        )
            .prop_map(|(class, field, has_mask, len, exp)| OxmHeader {
                class,
                field,
                has_mask,
                len,
                experimenter: (class == OXM_EXPERIMENTER).then_some(exp),
            })
    }

    fn any_action() -> impl Strategy<Value = Action<'static>> {
        let leaf = prop_oneof![
            (
                any::<u16>(),
                any::<u16>(),
                any::<u16>(),
                any_header(),
                any_header()
            )
                .prop_map(|(n, s, d, src, dst)| mv(n, s, d, src, dst)),
            (any_header(), any::<u16>(), any::<u16>(), any::<bool>()).prop_map(
                |(field, ofs, n_bits, push)| {
                    if push {
                        Action::StackPush { field, ofs, n_bits }
                    } else {
                        Action::StackPop { field, ofs, n_bits }
                    }
                }
            ),
            (any::<u16>(), any::<u8>())
                .prop_map(|(port, table)| Action::NxResubmitCt { port, table }),
            Just(Action::CtClear),
            Just(Action::DecTtl),
            (
                any::<u16>(),
                any::<u16>(),
                any::<u8>(),
                prop::sample::select(vec![&[][..], &[7][..], &[1, 2, 3, 4, 5, 6, 7, 8, 9][..]]),
                any::<bool>()
            )
                .prop_map(|(max_len, id, reason, userdata, pause)| {
                    Action::Controller {
                        max_len,
                        id,
                        reason,
                        userdata,
                        pause,
                    }
                }),
            prop::sample::select(vec![
                &[][..],
                &[0, 1][..],
                &[0, 1, 0, 2, 0, 3, 0, 4, 0, 5][..]
            ])
            .prop_map(|ids| Action::DecTtlCntIds { ids }),
            prop::sample::select(vec![
                &[0u8; 6][..],
                &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14][..]
            ])
            .prop_map(Action::Note),
            (0u16..1024, 1u8..=64, any::<u64>(), any_header()).prop_map(
                |(ofs, n, value, mut dst)| {
                    if dst.class == OXM_EXPERIMENTER {
                        dst.class = 0;
                        dst.experimenter = None;
                    }
                    load(ofs, n, dst, value & (u64::MAX >> (64 - u32::from(n))))
                }
            ),
        ];
        let leaf = prop_oneof![leaf, any_nat()];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Action::Clone),
                (
                    any::<bool>(),
                    any_zone(),
                    any::<u8>(),
                    any::<u16>(),
                    proptest::collection::vec(inner, 0..4),
                )
                    .prop_map(|(force, zone, recirc_table, alg, actions)| {
                        let flags = NX_CT_F_COMMIT | if force { NX_CT_F_FORCE } else { 0 };
                        ct(flags, zone, recirc_table, alg, actions)
                    }),
                // Without commit, plain nats only.
                (any_zone(), any::<u8>(), 0usize..3)
                    .prop_map(|(zone, table, n)| { ct(0, zone, table, 0, vec![NAT; n]) }),
            ]
        })
    }

    /// A zone: immediate, or 16 bits of a (non-experimenter, non-zero)
    /// field that holds them.
    fn any_zone() -> impl Strategy<Value = CtZone> {
        prop_oneof![
            any::<u16>().prop_map(CtZone::Imm),
            (any_header(), any::<u16>()).prop_filter_map("zone fits", |(mut src, ofs)| {
                if src.class == OXM_EXPERIMENTER {
                    src.class = NXM_1;
                    src.experimenter = None;
                }
                let bits = src.value_len() * 8;
                (bits >= 16 && src.to_u32() != 0)
                    .then(|| zf(src, ofs % (bits as u16 - 15).min(1024)))
            }),
        ]
    }

    /// A nat Open vSwitch would read: flags of one direction (or none),
    /// hash or random, a range with a non-zero first and a last not below
    /// it, ports only with addresses.
    fn any_nat() -> impl Strategy<Value = Action<'static>> {
        // A last (when `b`'s low bit says so) from `min` to `top`.
        let last = |min: u128, top: u128, b: u128| -> Option<u128> {
            (b & 1 == 1).then(|| min + (b >> 1) % (top - min + 1))
        };
        (
            0u16..3,
            any::<bool>(),
            0u16..3,
            0u8..3,
            any::<u128>(),
            any::<u128>(),
            any::<u32>(),
            any::<u32>(),
        )
            .prop_map(move |(dir, persistent, proto, fam, a, b, p, q)| {
                let mut flags = [0, NX_NAT_F_SRC, NX_NAT_F_DST][usize::from(dir)]
                    | [0, NX_NAT_F_PROTO_HASH, NX_NAT_F_PROTO_RANDOM][usize::from(proto)];
                if persistent {
                    flags |= NX_NAT_F_PERSISTENT;
                }
                let addrs = match fam {
                    1 => {
                        let min = (a as u32).max(1);
                        let max = last(u128::from(min), u128::from(u32::MAX), b);
                        Some(NatAddrs::V4 {
                            min: min.into(),
                            max: max.map(|m| (m as u32).into()),
                        })
                    }
                    2 => {
                        let min = a.max(1);
                        let max = last(min, u128::MAX, b);
                        Some(NatAddrs::V6 {
                            min: min.into(),
                            max: max.map(Into::into),
                        })
                    }
                    _ => None,
                };
                let pmin = (p as u16).max(1);
                let ports = (addrs.is_some() && p >> 16 & 1 == 1).then(|| {
                    let span = u32::from(u16::MAX - pmin) + 1;
                    (pmin, (q & 1 == 1).then(|| pmin + ((q >> 1) % span) as u16))
                });
                nat(flags, addrs, ports)
            })
    }

    /// Does `a` stay itself through 1.5 (whose writer turns loads into
    /// set_fields)?
    fn stays_in_15(a: &Action<'_>) -> bool {
        match a {
            Action::RegLoad {
                ofs,
                n_bits,
                dst,
                value,
            } => reg_load_value_mask(*ofs, *n_bits, dst, *value).is_none(),
            Action::Clone(v) | Action::Ct { actions: v, .. } => v.iter().all(stays_in_15),
            _ => true,
        }
    }

    /// The fuzz target's body takes every capture, alone and as one
    /// stream (its rewrites in each version hold).
    #[test]
    fn the_fuzz_body_takes_the_captures() {
        let mut stream = Vec::new();
        for (_, _, hx) in captures() {
            let b = unhex(hx);
            crate::fuzz_targets::openflow(&b);
            stream.extend_from_slice(&b);
        }
        crate::fuzz_targets::openflow(&stream);
    }

    proptest! {
        /// A capture with bytes changed (past its header) goes through
        /// the fuzz target's body: read or refused, never a panic.
        #[test]
        fn changed_captures_never_panic(i in 0..captures().len(), changes in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
            let all = captures();
            let mut b = unhex(all[i].2);
            for (at, x) in changes {
                let k = 8 + at.index(b.len() - 8);
                b[k] = x;
            }
            crate::fuzz_targets::openflow(&b);
            let orig = unhex(all[i].2);
            let at = if orig[0] == OF10 { None } else { apply_actions_at(&orig) };
            if let Some(list) = at.and_then(|(_, at)| Some((at, b.get(at..)?))) {
                let (at, list) = list;
                let _ = actions(list, at);
                let _ = actions10(list, at);
            }
        }

        /// Any bytes as an action list (1.3/1.5's reader and 1.0's):
        /// read or refused, never a panic; what reads writes in the
        /// reader's versions to bytes that read back and write the same
        /// again.
        #[test]
        fn any_action_list_reads_or_is_refused(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let lists = [(actions(&b, 0), &[OF13, OF15][..]), (actions10(&b, 0), &[OF10][..])];
            for (acts, versions) in lists {
                let Ok(acts) = acts else { continue };
                for &v in versions {
                    let mut out = Vec::new();
                    for a in &acts {
                        a.emit_in(v, &mut out);
                    }
                    prop_assert_eq!(out.len() % 8, 0);
                    let back = if v == OF10 { actions10(&out, 0) } else { actions(&out, 0) };
                    let back = back.map_err(|e| TestCaseError::fail(format!("{e} in {}", hex(&out))))?;
                    let mut again = Vec::new();
                    for a in &back {
                        a.emit_in(v, &mut again);
                    }
                    prop_assert_eq!(hex(&again), hex(&out));
                }
            }
        }

        /// Any Nicira-layout action written in 1.3 (and, where it stays a
        /// move or stays Nicira, 1.5) reads back as itself.
        #[test]
        fn actions_round_trip(a in any_action()) {
            for v in [OF13, OF15] {
                if v == OF15 && !stays_in_15(&a) {
                    continue;
                }
                let mut out = Vec::new();
                a.emit_in(v, &mut out);
                prop_assert_eq!(actions(&out, 0).unwrap(), vec![a.clone()]);
            }
        }
    }
}
