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
//! Nicira bytes in every version (a clone's nested actions follow its
//! version). Field headers are written as given: Open vSwitch names a
//! field by its NXM header in Nicira's actions and by the version's OXM
//! header in 1.5's, and picking between them is the caller's (it knows
//! the fields).
//!
//! Every reader here takes any bytes without panicking; what does not fit
//! is an error naming the action (Open vSwitch's name for it) and the
//! offset in the message.

use super::ofprop;
use super::{Action, Oxm, EXPERIMENTER_ACTION, NXM_1, NX_VENDOR, OF10, OF15};
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

/// NXAST_CONTROLLER2's property types (`enum
/// nx_action_controller2_prop_type`).
pub const NXAC2PT_MAX_LEN: u16 = 0;
pub const NXAC2PT_CONTROLLER_ID: u16 = 1;
pub const NXAC2PT_REASON: u16 = 2;
pub const NXAC2PT_USERDATA: u16 = 3;
pub const NXAC2PT_PAUSE: u16 = 4;
pub const NXAC2PT_METER_ID: u16 = 5;
/// The packet-in reason `action` (OFPR_ACTION), a controller action's
/// default.
pub const OFPR_ACTION: u8 = 1;

/// OpenFlow's own action types for dec_ttl (1.1+), group (1.1+),
/// copy_field and meter (1.5).
pub const AT_GROUP: u16 = 22;
pub const AT_DEC_NW_TTL: u16 = 24;
pub const AT_COPY_FIELD: u16 = 28;
pub const AT_METER: u16 = 29;

/// ONF's experimenter id and its OpenFlow 1.3 copy-field extension
/// (read as [`Action::Move`]; Open vSwitch writes it only to echo one).
pub const ONF_VENDOR: u32 = 0x4f4e_4600;
pub const ONFACT_COPY_FIELD: u16 = 3200;

/// The OXM class whose headers carry a 4-byte experimenter id (8 bytes
/// in all).
pub const OXM_EXPERIMENTER: u16 = 0xffff;

/// How deep clones may nest (Open vSwitch's own limit on nesting when it
/// parses actions, `MAX_OFPACT_PARSE_DEPTH`).
pub const MAX_ACTION_DEPTH: usize = 100;

/// The NXM_1 fields of variable length (tun_metadata0..63), which Open
/// vSwitch loads with NXAST_REG_LOAD2 rather than REG_LOAD.
const TUN_METADATA: std::ops::Range<u8> = 40..104;

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

/// The OXM TLV at the start of `b` as an action carries it (set_field,
/// REG_LOAD2), and the bytes it takes. Unlike a match's, an experimenter
/// TLV (class 0xffff) is read whole: its `value` starts with the 4-byte
/// experimenter id and its `mask` is the value's mask alone, so that
/// [`Oxm::emit`] writes the same bytes back.
pub(super) fn action_oxm<'a>(
    b: &'a [u8],
    base: usize,
    what: &'static str,
) -> Result<(Oxm<'a>, usize)> {
    need(Layer::OpenFlow, what, b, 0, 4).map_err(|e| e.at(base))?;
    let class = be16(b, 0);
    let has_mask = b[2] & 1 == 1;
    let len = usize::from(b[3]);
    need(Layer::OpenFlow, what, b, 4, len).map_err(|e| e.at(base))?;
    let body = &b[4..4 + len];
    let exp = if class == OXM_EXPERIMENTER { 4 } else { 0 };
    if len < exp {
        return Err(bad(what, base + 3, "experimenter TLV shorter than its id"));
    }
    let (value, mask) = if has_mask {
        let payload = len - exp;
        if !payload.is_multiple_of(2) {
            return Err(bad(what, base + 3, "odd length with a mask"));
        }
        let split = exp + payload / 2;
        (&body[..split], Some(&body[split..]))
    } else {
        (body, None)
    };
    let o = Oxm {
        class,
        field: b[2] >> 1,
        value,
        mask,
    };
    Ok((o, 4 + len))
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

/// Read `n_bits`, `src_ofs`, `dst_ofs` at `a[fixed..]` and the two
/// headers at `a[hdrs..]`, then zeros: the body every move form shares.
fn read_move(
    a: &[u8],
    at: usize,
    fixed: usize,
    hdrs: usize,
    what: &'static str,
) -> Result<Action<'static>> {
    need(Layer::OpenFlow, what, a, 0, hdrs).map_err(|e| e.at(at))?;
    let (src, n) = OxmHeader::parse(&a[hdrs..], at + hdrs, what)?;
    let (dst, m) = OxmHeader::parse(&a[hdrs + n..], at + hdrs + n, what)?;
    let end = hdrs + n + m;
    zeros(&a[end..], at + end, what)?;
    Ok(Action::Move {
        n_bits: be16(a, fixed),
        src_ofs: be16(a, fixed + 2),
        dst_ofs: be16(a, fixed + 4),
        src,
        dst,
    })
}

/// OFPAT_COPY_FIELD (1.5), whole, at `at`.
pub(super) fn read_copy_field(a: &[u8], at: usize) -> Result<Action<'static>> {
    read_move(a, at, 4, 12, "OFPAT_COPY_FIELD")
}

/// An experimenter action of another vendor than Nicira: ONF's copy
/// field is a move; anything else is `Other`.
pub(super) fn read_experimenter(a: &[u8], at: usize) -> Result<Action<'static>> {
    if a.len() >= 10 && be32(a, 4) == ONF_VENDOR && be16(a, 8) == ONFACT_COPY_FIELD {
        return read_move(a, at, 12, 20, "ONFACT_COPY_FIELD");
    }
    Ok(Action::Other {
        typ: EXPERIMENTER_ACTION,
    })
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
        NXAST_REG_LOAD => {
            const W: &str = "NXAST_REG_LOAD";
            exactly(a, at, 24, W)?;
            let dst = OxmHeader::from_u32(be32(a, 12));
            if dst.class == OXM_EXPERIMENTER {
                return Err(bad(W, at + 12, "an experimenter header does not fit"));
            }
            let ofs_nbits = be16(a, 10);
            let n_bits = (ofs_nbits & 0x3f) as u8 + 1;
            let value = be64(a, 16);
            if n_bits < 64 && value >> n_bits != 0 {
                return Err(bad(W, at + 16, "value has bits beyond n_bits"));
            }
            Action::RegLoad {
                ofs: ofs_nbits >> 6,
                n_bits,
                dst,
                value,
            }
        }
        NXAST_REG_LOAD2 => {
            const W: &str = "NXAST_REG_LOAD2";
            let (o, n) = action_oxm(&a[10..], at + 10, W)?;
            zeros(&a[10 + n..], at + 10 + n, W)?;
            Action::RegLoad2(o)
        }
        NXAST_REG_MOVE => read_move(a, at, 10, 16, "NXAST_REG_MOVE")?,
        NXAST_STACK_PUSH | NXAST_STACK_POP => {
            let what = if sub == NXAST_STACK_PUSH {
                "NXAST_STACK_PUSH"
            } else {
                "NXAST_STACK_POP"
            };
            exactly(a, at, 24, what)?;
            let (field, n) = OxmHeader::parse(&a[12..], at + 12, what)?;
            let n_bits = be16(a, 12 + n);
            zeros(&a[14 + n..], at + 14 + n, what)?;
            let ofs = be16(a, 10);
            if sub == NXAST_STACK_PUSH {
                Action::StackPush { field, ofs, n_bits }
            } else {
                Action::StackPop { field, ofs, n_bits }
            }
        }
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
        NXAST_CONTROLLER => {
            // OVS ignores the last byte ("must be zero"), and so does this.
            exactly(a, at, 16, "NXAST_CONTROLLER")?;
            Action::Controller {
                max_len: be16(a, 10),
                id: be16(a, 12),
                reason: a[14],
                userdata: &[],
                pause: false,
            }
        }
        NXAST_CONTROLLER2 => read_controller2(a, at)?,
        subtype => Action::NxOther { subtype },
    })
}

/// NXAST_CONTROLLER2, whole, at `at`: its properties over the defaults
/// (`decode_NXAST_RAW_CONTROLLER2`: a value property may be longer than
/// its value, a later one of a type replaces an earlier, an unknown type
/// is an error).
fn read_controller2(a: &[u8], at: usize) -> Result<Action<'_>> {
    const W: &str = "NXAST_CONTROLLER2";
    zeros(&a[10..16], at + 10, W)?;
    let (mut max_len, mut id, mut reason) = (u16::MAX, 0, OFPR_ACTION);
    let (mut userdata, mut pause) = (&a[..0], false);
    ofprop::each(&a[16..], at + 16, "NXAST_CONTROLLER2 property", |p| {
        match p.typ {
            NXAC2PT_MAX_LEN => max_len = p.u16("NXAC2PT_MAX_LEN")?,
            NXAC2PT_CONTROLLER_ID => id = p.u16("NXAC2PT_CONTROLLER_ID")?,
            NXAC2PT_REASON => reason = p.u8("NXAC2PT_REASON")?,
            NXAC2PT_USERDATA => userdata = p.value,
            NXAC2PT_PAUSE => pause = true,
            // Open vSwitch would send the packet-in through the meter;
            // there are none here to send it through.
            NXAC2PT_METER_ID => {
                return Err(bad(
                    "NXAC2PT_METER_ID",
                    p.at,
                    "a controller meter, and this switch has no meters",
                ))
            }
            _ => return Err(ofprop::unknown("NXAST_CONTROLLER2 property type", &p)),
        }
        Ok(())
    })?;
    Ok(Action::Controller {
        max_len,
        id,
        reason,
        userdata,
        pause,
    })
}

/// Check a clone's nesting `depth` (the outermost list is 0) at `at`.
pub(super) fn check_depth(depth: usize, at: usize) -> Result<()> {
    if depth > MAX_ACTION_DEPTH {
        return Err(bad("NXAST_CLONE", at, "nested more than 100 deep"));
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

/// OFPAT_SET_FIELD with `o`'s TLV.
fn put_set_field_tlv(out: &mut Vec<u8>, o: &Oxm<'_>) {
    let s = start(out, super::AT_SET_FIELD);
    o.emit(out);
    finish(out, s);
}

/// NXAST_REG_LOAD2 with `o`'s TLV.
fn put_reg_load2(out: &mut Vec<u8>, o: &Oxm<'_>) {
    let s = start_nx(out, NXAST_REG_LOAD2);
    o.emit(out);
    finish(out, s);
}

/// NXAST_REG_LOAD (the value cut to its `n_bits`, as Open vSwitch
/// requires).
pub(super) fn put_reg_load(out: &mut Vec<u8>, ofs: u16, n_bits: u8, dst: &OxmHeader, value: u64) {
    let s = start_nx(out, NXAST_REG_LOAD);
    let n = n_bits.wrapping_sub(1) & 0x3f;
    let ofs_nbits = ofs << 6 | u16::from(n);
    out.extend_from_slice(&ofs_nbits.to_be_bytes());
    out.extend_from_slice(&dst.to_u32().to_be_bytes());
    out.extend_from_slice(&(value & (u64::MAX >> (63 - n))).to_be_bytes());
    finish(out, s);
}

/// `o` without a mask that sets every bit (Open vSwitch writes such a
/// set_field unmasked); a tun_metadata TLV keeps its mask.
fn unmask_all_ones<'a>(o: &Oxm<'a>) -> Oxm<'a> {
    if o.class == NXM_1 && TUN_METADATA.contains(&o.field) {
        // Of variable length: the bytes given are the value's low ones,
        // so their mask sets part of the field only.
        return *o;
    }
    match o.mask {
        Some(m) if m.iter().all(|&x| x == 0xff) => Oxm { mask: None, ..*o },
        _ => *o,
    }
}

/// Bit `i` (0 the least significant) of the big-endian bytes `b`.
fn bit(b: &[u8], i: usize) -> bool {
    i < b.len() * 8 && b[b.len() - 1 - i / 8] >> (i % 8) & 1 == 1
}

/// A set_field as Open vSwitch writes it in `version`: OFPAT_SET_FIELD
/// when it sets the whole field (or in 1.5, which allows a mask);
/// before 1.5 a masked one (in 1.0 any) as Nicira loads
/// (`set_field_to_nxast`):
/// NXAST_REG_LOAD2 for an experimenter's or a variable-length field,
/// else one NXAST_REG_LOAD per run of set mask bits, 64 bits at most
/// each, from the lowest.
pub(super) fn put_set_field(out: &mut Vec<u8>, o: &Oxm<'_>, version: u8) {
    let o = unmask_all_ones(o);
    if version >= OF15 || (o.mask.is_none() && version > OF10) {
        return put_set_field_tlv(out, &o);
    }
    // 1.0 has no set_field: there even a whole field is loaded.
    let all;
    let mask = match o.mask {
        Some(m) => m,
        None => {
            all = vec![0xff; o.value.len()];
            &all
        }
    };
    let width = o.value.len().min(mask.len());
    if o.class == OXM_EXPERIMENTER
        || (o.class == NXM_1 && TUN_METADATA.contains(&o.field))
        || width > 127
    {
        return put_reg_load2(out, &o);
    }
    let dst = OxmHeader::new(o.class, o.field, width as u8);
    let (value, mask) = (
        &o.value[o.value.len() - width..],
        &mask[mask.len() - width..],
    );
    let n = width * 8;
    let mut at = 0;
    while let Some(ofs) = (at..n).find(|&i| bit(mask, i)) {
        let limit = (ofs + 64).min(n);
        let end = (ofs + 1..limit).find(|&i| !bit(mask, i)).unwrap_or(limit);
        let v = (ofs..end)
            .rev()
            .fold(0u64, |v, i| v << 1 | u64::from(bit(value, i)));
        put_reg_load(out, ofs as u16, (end - ofs) as u8, &dst, v);
        at = end;
    }
}

/// What NXAST_REG_LOAD `ofs`/`n_bits`/`value` into `dst` sets, as the
/// field's value and mask (big-endian, the field's width): how 1.5
/// writes it as a set_field. `None` when the load does not fit in the
/// field `dst` names (or names by an experimenter's or masked header).
pub fn reg_load_value_mask(
    ofs: u16,
    n_bits: u8,
    dst: &OxmHeader,
    value: u64,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let w = usize::from(dst.len);
    let (ofs, n) = (usize::from(ofs), usize::from(n_bits));
    if dst.class == OXM_EXPERIMENTER || dst.has_mask || w == 0 || w > 127 {
        return None;
    }
    if n == 0 || n > 64 || ofs + n > w * 8 {
        return None;
    }
    let (mut v, mut m) = (vec![0u8; w], vec![0u8; w]);
    for i in 0..n {
        let b = ofs + i;
        let byte = w - 1 - b / 8;
        m[byte] |= 1 << (b % 8);
        if value >> i & 1 == 1 {
            v[byte] |= 1 << (b % 8);
        }
    }
    Some((v, m))
}

/// NXAST_REG_LOAD in versions before 1.5; in 1.5 (which has no
/// REG_LOAD) the set_field it amounts to, masked unless it sets the
/// whole field, as Open vSwitch writes it.
pub(super) fn put_load(
    out: &mut Vec<u8>,
    ofs: u16,
    n_bits: u8,
    dst: &OxmHeader,
    value: u64,
    version: u8,
) {
    if version >= OF15 {
        if let Some((v, m)) = reg_load_value_mask(ofs, n_bits, dst, value) {
            let o = Oxm {
                class: dst.class,
                field: dst.field,
                value: &v,
                mask: Some(&m),
            };
            return put_set_field_tlv(out, &unmask_all_ones(&o));
        }
    }
    put_reg_load(out, ofs, n_bits, dst, value);
}

/// NXAST_REG_LOAD2 before 1.5; OFPAT_SET_FIELD (its mask dropped if it
/// sets every bit) in 1.5.
pub(super) fn put_load2(out: &mut Vec<u8>, o: &Oxm<'_>, version: u8) {
    if version >= OF15 {
        put_set_field_tlv(out, &unmask_all_ones(o));
    } else {
        put_reg_load2(out, o);
    }
}

/// A move: OFPAT_COPY_FIELD in 1.5, NXAST_REG_MOVE before.
pub(super) fn put_move(
    out: &mut Vec<u8>,
    n_bits: u16,
    src_ofs: u16,
    dst_ofs: u16,
    src: &OxmHeader,
    dst: &OxmHeader,
    version: u8,
) {
    let s = if version >= OF15 {
        let s = start(out, AT_COPY_FIELD);
        for v in [n_bits, src_ofs, dst_ofs, 0] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        s
    } else {
        let s = start_nx(out, NXAST_REG_MOVE);
        for v in [n_bits, src_ofs, dst_ofs] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        s
    };
    src.emit(out);
    dst.emit(out);
    finish(out, s);
}

/// NXAST_STACK_PUSH or _POP.
pub(super) fn put_stack(out: &mut Vec<u8>, subtype: u16, field: &OxmHeader, ofs: u16, n_bits: u16) {
    let s = start_nx(out, subtype);
    out.extend_from_slice(&ofs.to_be_bytes());
    field.emit(out);
    out.extend_from_slice(&n_bits.to_be_bytes());
    out.resize(s + 24, 0);
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

/// A controller action as `encode_CONTROLLER` writes it: NXAST_CONTROLLER
/// when it has no userdata and does not pause, else NXAST_CONTROLLER2
/// with each property that differs from its default, in type order.
pub(super) fn put_controller(
    out: &mut Vec<u8>,
    max_len: u16,
    id: u16,
    reason: u8,
    userdata: &[u8],
    pause: bool,
) {
    if userdata.is_empty() && !pause {
        let s = start_nx(out, NXAST_CONTROLLER);
        out.extend_from_slice(&max_len.to_be_bytes());
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&[reason, 0]);
        finish(out, s);
        return;
    }
    let s = start_nx(out, NXAST_CONTROLLER2);
    out.extend_from_slice(&[0; 6]);
    if max_len != u16::MAX {
        ofprop::put_u16(out, NXAC2PT_MAX_LEN, max_len);
    }
    if id != 0 {
        ofprop::put_u16(out, NXAC2PT_CONTROLLER_ID, id);
    }
    if reason != OFPR_ACTION {
        ofprop::put_u8(out, NXAC2PT_REASON, reason);
    }
    if !userdata.is_empty() {
        ofprop::put(out, NXAC2PT_USERDATA, userdata);
    }
    if pause {
        ofprop::put_flag(out, NXAC2PT_PAUSE);
    }
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
mod tests {
    use super::super::*;
    use super::{action_oxm, MAX_ACTION_DEPTH};
    use proptest::prelude::*;

    fn unhex(s: &str) -> Vec<u8> {
        crate::from_hex(s).unwrap()
    }

    /// FLOW_MODs Open vSwitch 3.1's `ovs-ofctl -O OpenFlow1X add-flow` sent
    /// (captured on a unix socket here): version, the rule as given to
    /// ovs-ofctl, the message.
    const OVS: &[(u8, &str, &str)] = &[
        (13, "actions=set_field:0x5/0xff->reg0",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000070007000100040000000000000005"),
        (15, "actions=set_field:0x5/0xff->reg0",
         "060e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000001900100001010800000005000000ff"),
        (13, "actions=load:0x1234->NXM_NX_REG0[]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff0018000023200007001f000100040000000000001234"),
        (15, "actions=load:0x1234->NXM_NX_REG0[]",
         "060e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000400000000000400180000000000190010000100040000123400000000"),
        (13, "ip,actions=set_field:10.0.0.0/255.0.0.0->ip_src",
         "040e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000a80000a0208000000000000000004002000000000ffff0018000023200007060700000e04000000000000000a"),
        (15, "ip,actions=set_field:10.0.0.0/255.0.0.0->ip_src",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000a80000a020800000000000000000400180000000000190010800017080a000000ff000000"),
        (13, "actions=load:0x1->NXM_NX_XXREG0[64..95]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff0018000023200007101f0001de100000000000000001"),
        (15, "actions=load:0x1->NXM_NX_XXREG0[64..95]",
         "060e006800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004003000000000001900280001df200000000000000001000000000000000000000000ffffffff0000000000000000"),
        (13, "actions=set_field:0x1/0x1->xreg4",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000070000800108080000000000000001"),
        (15, "actions=set_field:0x1/0x1->xreg4",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000001900188001091000000000000000010000000000000001"),
        (13, "actions=set_field:0x1/0xff->tun_metadata0",
         "040e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff00100000232000210001510201ff"),
        (15, "actions=set_field:0x1/0xff->tun_metadata0",
         "060e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000001900100001510201ff000000000000"),
        (13, "actions=set_field:0xabcd->tun_metadata1",
         "040e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff00000000000100040000000000040018000000000019001000015202abcd000000000000"),
        (15, "actions=set_field:0xabcd->tun_metadata1",
         "060e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff00000000000100040000000000040018000000000019001000015202abcd000000000000"),
        (13, "actions=move:NXM_NX_REG14[]->NXM_NX_REG15[]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320000600200000000000011c0400011e04"),
        (15, "actions=move:NXM_NX_REG14[]->NXM_NX_REG15[]",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000001c0018002000000000000000011c0400011e0400000000"),
        (13, "actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000060030000000000000040600000206"),
        (15, "actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000001c00180030000000000000800008068000060600000000"),
        (13, "actions=move:NXM_NX_XXREG0[0..31]->NXM_NX_REG1[]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000060020000000000001de1000010204"),
        (15, "actions=move:NXM_NX_XXREG0[0..31]->NXM_NX_REG1[]",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000001c001800200000000000000001de100001020400000000"),
        (13, "actions=move:OXM_OF_PKT_REG4[0..15]->NXM_NX_REG2[16..31]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000060010000000108001080800010404"),
        (15, "actions=move:OXM_OF_PKT_REG4[0..15]->NXM_NX_REG2[16..31]",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000001c00180010000000100000800108080001040400000000"),
        (13, "actions=push:NXM_NX_REG0[]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320001b0000000100040020000000000000"),
        (15, "actions=push:NXM_NX_REG0[]",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320001b0000000100040020000000000000"),
        (13, "actions=pop:NXM_NX_REG1[0..15]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320001c0000000102040010000000000000"),
        (15, "actions=pop:NXM_NX_REG1[0..15]",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320001c0000000102040010000000000000"),
        (13, "actions=push:NXM_NX_XXREG1[]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320001b00000001e0100080000000000000"),
        (15, "actions=push:NXM_NX_XXREG1[]",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320001b00000001e0100080000000000000"),
        (13, "actions=push:OXM_OF_PKT_REG4[]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320001b0000800108080040000000000000"),
        (15, "actions=push:OXM_OF_PKT_REG4[]",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320001b0000800108080040000000000000"),
        (13, "actions=note:01.02.03",
         "040e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff0010000023200008010203000000"),
        (15, "actions=note:01.02.03",
         "060e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff0010000023200008010203000000"),
        (13, "actions=note:00.11.22.33.44.55.66.77.88",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000080011223344556677880000000000"),
        (15, "actions=note:00.11.22.33.44.55.66.77.88",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000080011223344556677880000000000"),
        (13, "actions=note:",
         "040e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff0010000023200008000000000000"),
        (15, "actions=note:",
         "060e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff0010000023200008000000000000"),
        (13, "actions=clone(set_field:0x1->reg0,move:NXM_NX_REG14[]->NXM_NX_REG15[],output:1)",
         "040e008800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004005000000000ffff004800002320002a00000000000000190010000100040000000100000000ffff001800002320000600200000000000011c0400011e0400000010000000010000000000000000"),
        (15, "actions=clone(set_field:0x1->reg0,move:NXM_NX_REG14[]->NXM_NX_REG15[],output:1)",
         "060e008800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004005000000000ffff004800002320002a00000000000000190010000100040000000100000000001c0018002000000000000000011c0400011e040000000000000010000000010000000000000000"),
        (13, "actions=clone(clone(ct_clear),resubmit(,3))",
         "040e008000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004004800000000ffff004000002320002a000000000000ffff002000002320002a000000000000ffff001000002320002b000000000000ffff001000002320000efff803000000"),
        (15, "actions=clone(clone(ct_clear),resubmit(,3))",
         "060e008000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004004800000000ffff004000002320002a000000000000ffff002000002320002a000000000000ffff001000002320002b000000000000ffff001000002320000efff803000000"),
        (13, "actions=clone()",
         "040e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff001000002320002a000000000000"),
        (15, "actions=clone()",
         "060e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff001000002320002a000000000000"),
        (13, "actions=ct_clear",
         "040e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff001000002320002b000000000000"),
        (15, "actions=ct_clear",
         "060e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff001000002320002b000000000000"),
        (13, "actions=conjunction(1,1/2)",
         "040e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff0010000023200022000200000001"),
        (15, "actions=conjunction(1,1/2)",
         "060e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff0010000023200022000200000001"),
        (13, "actions=controller(userdata=00.01)",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000250000000000000003000600010000"),
        (15, "actions=controller(userdata=00.01)",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000250000000000000003000600010000"),
        (13, "actions=controller(userdata=01.02,pause)",
         "040e006000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002800000000ffff002000002320002500000000000000030006010200000004000400000000"),
        (15, "actions=controller(userdata=01.02,pause)",
         "060e006000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002800000000ffff002000002320002500000000000000030006010200000004000400000000"),
        (13, "actions=controller(reason=no_match)",
         "040e005000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff0010000023200014ffff00000000"),
        (15, "actions=controller(reason=no_match)",
         "060e005000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff0010000023200014ffff00000000"),
        (13, "actions=controller(max_len=65535,id=1)",
         "040e005000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff0010000023200014ffff00010100"),
        (15, "actions=controller(max_len=65535,id=1)",
         "060e005000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000ffff0010000023200014ffff00010100"),
        (13, "actions=controller(id=3,max_len=100,reason=invalid_ttl,userdata=01.02.03.04.05,pause)",
         "040e008000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004004800000000ffff0040000023200025000000000000000000080064000000010008000300000002000502000000000300090102030405000000000000000004000400000000"),
        (15, "actions=controller(id=3,max_len=100,reason=invalid_ttl,userdata=01.02.03.04.05,pause)",
         "060e008000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004004800000000ffff0040000023200025000000000000000000080064000000010008000300000002000502000000000300090102030405000000000000000004000400000000"),
        (13, "actions=controller(pause)",
         "040e005800000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000250000000000000004000400000000"),
        (15, "actions=controller(pause)",
         "060e005800000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000250000000000000004000400000000"),
        (13, "actions=controller(userdata=00.01.02.03.04.05.06.07.08.09.0a.0b)",
         "040e006000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002800000000ffff002000002320002500000000000000030010000102030405060708090a0b"),
        (15, "actions=controller(meter_id=3)",
         "060e005800000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000250000000000000005000800000003"),
        (15, "actions=controller",
         "060e005000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000400000000000400180000000000000010fffffffdffff000000000000"),
        (10, "actions=controller(userdata=01.02,pause)",
         "010e006800000002003820ff00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000008000ffffffffffff0000ffff002000002320002500000000000000030006010200000004000400000000"),
        (10, "actions=controller(reason=no_match)",
         "010e005800000002003820ff00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000008000ffffffffffff0000ffff0010000023200014ffff00000000"),
        (13, "actions=check_pkt_larger(1500)->NXM_NX_REG0[0]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320003105dc000000010004000000000000"),
        (15, "actions=check_pkt_larger(1500)->NXM_NX_REG0[0]",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320003105dc000000010004000000000000"),
        (13, "actions=output:NXM_NX_REG15[]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320000f001f00011e04ffff000000000000"),
        (15, "actions=output:NXM_NX_REG15[]",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff001800002320000f001f00011e04ffff000000000000"),
        (13, "actions=group:1",
         "040e004800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff00000000000100040000000000040010000000000016000800000001"),
        (15, "actions=group:1",
         "060e004800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff00000000000100040000000000040010000000000016000800000001"),
        (13, "actions=meter:1",
         "040e004000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000006000800000001"),
        (15, "actions=meter:1",
         "060e004800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001000000000001d000800000001"),
        (13, "ip,actions=dec_ttl",
         "040e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000a80000a02080000000000000000040010000000000018000800000000"),
        (15, "ip,actions=dec_ttl",
         "060e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000a80000a02080000000000000000040010000000000018000800000000"),
        (13, "ip,actions=dec_ttl(1,2,3)",
         "040e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000a80000a0208000000000000000004002000000000ffff00180000232000150003000000000001000200030000"),
        (15, "ip,actions=dec_ttl(1,2,3)",
         "060e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000a80000a0208000000000000000004002000000000ffff00180000232000150003000000000001000200030000"),
        (13, "ip,actions=dec_ttl(0)",
         "040e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000a80000a0208000000000000000004002000000000ffff00180000232000150001000000000000000000000000"),
        (15, "ip,actions=dec_ttl(0)",
         "060e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000a80000a0208000000000000000004002000000000ffff00180000232000150001000000000000000000000000"),
        (13, "ct_state=+trk-inv,ip,actions=resubmit(2,5,ct)",
         "040e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001001680000a0208000001d308000000200000003000000004001800000000ffff001000002320002c000205000000"),
        (15, "ct_state=+trk-inv,ip,actions=resubmit(2,5,ct)",
         "060e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001001680000a0208000001d308000000200000003000000004001800000000ffff001000002320002c000205000000"),
        (13, "ip,actions=ct(commit,zone=NXM_NX_REG13[0..15])",
         "040e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000a80000a0208000000000000000004002000000000ffff0018000023200023000100011a04000fff0000000000"),
        (15, "ip,actions=ct(commit,zone=NXM_NX_REG13[0..15])",
         "060e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000a80000a0208000000000000000004002000000000ffff0018000023200023000100011a04000fff0000000000"),
        (13, "packet_type=(1,0x894f),actions=move:NXM_NX_REG0[]->NXOXM_NSH_C1[]",
         "040e006800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000c800058040001894f000000000004002800000000ffff002000002320000600200000000000010004ffff0c08005ad65000000000"),
        (15, "packet_type=(1,0x894f),actions=move:NXM_NX_REG0[]->NXOXM_NSH_C1[]",
         "060e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000c800058040001894f000000000004002000000000001c0018002000000000000000010004ffff0c08005ad650"),
        (13, "packet_type=(1,0x894f),actions=push:NXOXM_NSH_C1[]",
         "040e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000c800058040001894f000000000004002000000000ffff001800002320001b0000ffff0c08005ad65000200000"),
        (15, "packet_type=(1,0x894f),actions=push:NXOXM_NSH_C1[]",
         "060e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000c800058040001894f000000000004002000000000ffff001800002320001b0000ffff0c08005ad65000200000"),
        (13, "packet_type=(1,0x894f),actions=set_field:5->nsh_c1",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000c800058040001894f00000000000400180000000000190010ffff0c08005ad65000000005"),
        (15, "packet_type=(1,0x894f),actions=set_field:5->nsh_c1",
         "060e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000c800058040001894f00000000000400180000000000190010ffff0c08005ad65000000005"),
        (13, "packet_type=(1,0x894f),actions=set_field:5/0xff->nsh_c1",
         "040e006800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000c800058040001894f000000000004002800000000ffff0020000023200021ffff0d0c005ad65000000005000000ff000000000000"),
        (15, "packet_type=(1,0x894f),actions=set_field:5/0xff->nsh_c1",
         "060e006000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000c800058040001894f00000000000400200000000000190018ffff0d0c005ad65000000005000000ff00000000"),
        (10, "ip,actions=dec_ttl",
         "010e005800000006003820ef00000000000000000000000000000000000008000000000000000000000000000000000000000000000000000000000000008000ffffffffffff0000ffff0010000023200012000000000000"),
        (10, "actions=move:NXM_NX_REG14[]->NXM_NX_REG15[]",
         "010e006000000006003820ff00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000008000ffffffffffff0000ffff001800002320000600200000000000011c0400011e04"),
        (10, "actions=clone(set_field:0x1->reg0,output:1)",
         "0104006000000008000023200000000d00000000000000000000000000008000ffffffffffff00000000000000000000ffff003000002320002a000000000000ffff0018000023200007001f0001000400000000000000010000000800010000"),
        (10, "actions=load:0x5->NXM_NX_REG0[0..7]",
         "010e006000000006003820ff00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000008000ffffffffffff0000ffff00180000232000070007000100040000000000000005"),
        (10, "ip,actions=set_field:10.0.0.0/255.0.0.0->ip_src",
         "010e005000000006003820ef00000000000000000000000000000000000008000000000000000000000000000000000000000000000000000000000000008000ffffffffffff0000000600080a000000"),
        (13, "actions=load:0x5->NXM_NX_REG0[0..7]",
         "040e005800000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004002000000000ffff00180000232000070007000100040000000000000005"),
        (15, "actions=load:0x5->NXM_NX_REG0[0..7]",
         "060e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff0000000000010004000000000004001800000000001900100001010800000005000000ff"),
        (13, "actions=set_field:0x1234->reg0",
         "040e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000400000000000400180000000000190010000100040000123400000000"),
        (15, "actions=set_field:0x1234->reg0",
         "060e005000000006000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000400000000000400180000000000190010000100040000123400000000"),
    ];

    /// The captured message for rule `flow` at version `v` (13 or 15).
    fn ovs(v: u8, flow: &str) -> Vec<u8> {
        let (_, _, h) = OVS
            .iter()
            .find(|(w, f, _)| *w == v && *f == flow)
            .unwrap_or_else(|| panic!("no capture of {flow} at 1.{}", v % 10));
        unhex(h)
    }

    fn read(b: &[u8]) -> FlowMod<'_> {
        parse_flow_mod(&Message::new_checked(b).unwrap()).unwrap()
    }

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

    /// `acts` in place of the flow_mod's actions, at the message's version.
    fn rewrite(b: &[u8], acts: &[Action<'_>]) -> Vec<u8> {
        let fm = read(b);
        FlowMod {
            actions: acts.to_vec(),
            ..fm
        }
        .emit_in(b[0], u32::from_be_bytes([b[4], b[5], b[6], b[7]]))
    }

    /// The capture reads as `want`, and `want` written at its version is
    /// Open vSwitch's bytes.
    fn golden(v: u8, flow: &str, want: &[Action<'_>]) {
        let b = ovs(v, flow);
        assert_eq!(read(&b).actions, want, "{flow} at 1.{}", v % 10);
        assert_eq!(hex(&rewrite(&b, want)), hex(&b), "{flow} at 1.{}", v % 10);
    }

    /// `acts` written at version `v` are Open vSwitch's bytes for `flow`
    /// (its own conversions: a load in 1.5, a masked set_field in 1.3).
    fn writes(v: u8, flow: &str, acts: &[Action<'_>]) {
        let b = ovs(v, flow);
        assert_eq!(hex(&rewrite(&b, acts)), hex(&b), "{flow} at 1.{}", v % 10);
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// What `ovs-ofctl ofp-print` prints for `msg` where it is installed.
    fn ofp_print(msg: &[u8]) -> Option<String> {
        let out = std::process::Command::new("ovs-ofctl")
            .arg("ofp-print")
            .arg(hex(msg))
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "ovs-ofctl ofp-print failed: {text}");
        assert!(!text.contains("decode error"), "{text}");
        Some(text)
    }

    fn prints(msg: &[u8], needle: &str) {
        if let Some(text) = ofp_print(msg) {
            assert!(text.contains(needle), "no {needle:?} in:\n{text}");
        }
    }

    const fn h(v: u32) -> OxmHeader {
        OxmHeader {
            class: (v >> 16) as u16,
            field: ((v >> 9) & 0x7f) as u8,
            has_mask: v & 0x100 != 0,
            len: v as u8,
            experimenter: None,
        }
    }

    const REG0: OxmHeader = h(0x0001_0004);
    const REG1: OxmHeader = h(0x0001_0204);
    const REG2: OxmHeader = h(0x0001_0404);
    const REG14: OxmHeader = h(0x0001_1c04);
    const REG15: OxmHeader = h(0x0001_1e04);
    const XXREG0: OxmHeader = h(0x0001_de10);
    const XXREG1: OxmHeader = h(0x0001_e010);
    /// xreg4 has only an OXM name (OXM_OF_PKT_REG4, class 0x8001).
    const XREG4: OxmHeader = h(0x8001_0808);
    /// NXOXM_NSH_C1: an experimenter field (8-byte header).
    const NSH_C1: OxmHeader = OxmHeader {
        class: OXM_EXPERIMENTER,
        field: 6,
        has_mask: false,
        len: 8,
        experimenter: Some(0x005a_d650),
    };
    const NSH: [u8; 4] = [0x00, 0x5a, 0xd6, 0x50];

    fn mv(
        n_bits: u16,
        src_ofs: u16,
        dst_ofs: u16,
        src: OxmHeader,
        dst: OxmHeader,
    ) -> Action<'static> {
        Action::Move {
            n_bits,
            src_ofs,
            dst_ofs,
            src,
            dst,
        }
    }

    fn load(ofs: u16, n_bits: u8, dst: OxmHeader, value: u64) -> Action<'static> {
        Action::RegLoad {
            ofs,
            n_bits,
            dst,
            value,
        }
    }

    fn sf<'a>(class: u16, field: u8, value: &'a [u8], mask: Option<&'a [u8]>) -> Action<'a> {
        Action::SetField(Oxm {
            class,
            field,
            value,
            mask,
        })
    }

    /// Masked set_field: 1.5 writes OFPAT_SET_FIELD with the masked TLV
    /// (length 16: header, value, mask, no padding needed); 1.3 has no
    /// masked set_field, so Open vSwitch writes NXAST_REG_LOAD of the
    /// mask's bits, which our writer does from the same SetField.
    #[test]
    fn masked_set_field_and_reg_load() {
        let f = "actions=set_field:0x5/0xff->reg0";
        golden(13, f, &[load(0, 8, REG0, 5)]);
        let masked = sf(NXM_1, 0, &[0, 0, 0, 5], Some(&[0, 0, 0, 0xff]));
        golden(15, f, std::slice::from_ref(&masked));
        writes(13, f, &[masked]);
        // `load:` is the same action: REG_LOAD in 1.3, set_field in 1.5.
        let f = "actions=load:0x5->NXM_NX_REG0[0..7]";
        golden(13, f, &[load(0, 8, REG0, 5)]);
        writes(15, f, &[load(0, 8, REG0, 5)]);
        prints(&ovs(13, f), "actions=load:0x5->NXM_NX_REG0[0..7]");
        prints(&ovs(15, f), "actions=set_field:0x5/0xff->reg0");

        // A load of the whole field is an unmasked set_field in 1.5.
        let f = "actions=load:0x1234->NXM_NX_REG0[]";
        golden(13, f, &[load(0, 32, REG0, 0x1234)]);
        let whole = sf(NXM_1, 0, &[0, 0, 0x12, 0x34], None);
        golden(15, f, std::slice::from_ref(&whole));
        writes(15, f, &[load(0, 32, REG0, 0x1234)]);
        // ... and a set_field of it is OFPAT_SET_FIELD in both (the
        // same bytes as 1.5's load), with an all-ones mask dropped.
        writes(13, "actions=set_field:0x1234->reg0", &[whole]);
        writes(
            13,
            "actions=set_field:0x1234->reg0",
            &[sf(NXM_1, 0, &[0, 0, 0x12, 0x34], Some(&[0xff; 4]))],
        );

        // 1.3 names ip_src by its NXM header in REG_LOAD (ofs 24, 8
        // bits), 1.5 by its OXM one; each is written as given.
        let f = "ip,actions=set_field:10.0.0.0/255.0.0.0->ip_src";
        let nxm_ip_src = h(0x0000_0e04);
        golden(13, f, &[load(24, 8, nxm_ip_src, 10)]);
        writes(
            13,
            f,
            &[sf(NXM_0, 7, &[10, 0, 0, 0], Some(&[255, 0, 0, 0]))],
        );
        let oxm = sf(OXM_BASIC, 11, &[10, 0, 0, 0], Some(&[255, 0, 0, 0]));
        golden(15, f, &[oxm]);
        writes(15, f, &[load(24, 8, h(0x8000_1604), 10)]);

        // 128-bit xxreg0, bits 64..95: a 16-byte value and mask in 1.5.
        let f = "actions=load:0x1->NXM_NX_XXREG0[64..95]";
        golden(13, f, &[load(64, 32, XXREG0, 1)]);
        let mut v = [0u8; 16];
        v[7] = 1;
        let mut m = [0u8; 16];
        m[4..8].copy_from_slice(&[0xff; 4]);
        golden(15, f, &[sf(NXM_1, 111, &v, Some(&m))]);
        writes(15, f, &[load(64, 32, XXREG0, 1)]);

        // xreg4's only header is OXM (class 0x8001): still REG_LOAD.
        let f = "actions=set_field:0x1/0x1->xreg4";
        golden(13, f, &[load(0, 1, XREG4, 1)]);
        let one = [0, 0, 0, 0, 0, 0, 0, 1];
        golden(15, f, &[sf(0x8001, 4, &one, Some(&one))]);
        writes(13, f, &[sf(0x8001, 4, &one, Some(&one))]);
        writes(15, f, &[load(0, 1, XREG4, 1)]);
    }

    /// NXAST_REG_LOAD2 carries the TLV for what REG_LOAD cannot name: a
    /// variable-length field (tun_metadata) or an experimenter's (an
    /// 8-byte header); 1.5 writes OFPAT_SET_FIELD instead.
    #[test]
    fn reg_load2_for_variable_and_experimenter_fields() {
        let f = "actions=set_field:0x1/0xff->tun_metadata0";
        let tlv = Oxm {
            class: NXM_1,
            field: 40,
            value: &[1],
            mask: Some(&[0xff]),
        };
        golden(13, f, &[Action::RegLoad2(tlv)]);
        golden(15, f, &[Action::SetField(tlv)]);
        writes(13, f, &[Action::SetField(tlv)]);
        writes(15, f, &[Action::RegLoad2(tlv)]);
        // Unmasked, it is a plain set_field in both.
        let f = "actions=set_field:0xabcd->tun_metadata1";
        for v in [13, 15] {
            golden(v, f, &[sf(NXM_1, 41, &[0xab, 0xcd], None)]);
        }

        // NSH c1: its value starts with the experimenter id.
        let f = "packet_type=(1,0x894f),actions=set_field:5->nsh_c1";
        let val = [NSH.as_slice(), &[0, 0, 0, 5]].concat();
        for v in [13, 15] {
            golden(v, f, &[sf(OXM_EXPERIMENTER, 6, &val, None)]);
        }
        let f = "packet_type=(1,0x894f),actions=set_field:5/0xff->nsh_c1";
        let tlv = Oxm {
            class: OXM_EXPERIMENTER,
            field: 6,
            value: &val,
            mask: Some(&[0, 0, 0, 0xff]),
        };
        golden(13, f, &[Action::RegLoad2(tlv)]);
        golden(15, f, &[Action::SetField(tlv)]);
        writes(13, f, &[Action::SetField(tlv)]);
        writes(15, f, &[Action::RegLoad2(tlv)]);
    }

    /// `move:` is NXAST_REG_MOVE in 1.3 and OFPAT_COPY_FIELD in 1.5
    /// (Open vSwitch's encode_REG_MOVE); the field headers are NXM names
    /// in the first and the version's OXM names (where a field has one)
    /// in the second.
    #[test]
    fn move_is_reg_move_then_copy_field() {
        let f = "actions=move:NXM_NX_REG14[]->NXM_NX_REG15[]";
        for v in [13, 15] {
            golden(v, f, &[mv(32, 0, 0, REG14, REG15)]);
        }
        let b = ovs(15, f);
        assert_eq!(&b[b.len() - 24..b.len() - 22], &AT_COPY_FIELD.to_be_bytes());
        prints(&b, "actions=move:NXM_NX_REG14[]->NXM_NX_REG15[]");

        let f = "actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]";
        golden(13, f, &[mv(48, 0, 0, h(0x0000_0406), h(0x0000_0206))]);
        golden(15, f, &[mv(48, 0, 0, h(0x8000_0806), h(0x8000_0606))]);

        let f = "actions=move:NXM_NX_XXREG0[0..31]->NXM_NX_REG1[]";
        for v in [13, 15] {
            golden(v, f, &[mv(32, 0, 0, XXREG0, REG1)]);
        }
        let f = "actions=move:OXM_OF_PKT_REG4[0..15]->NXM_NX_REG2[16..31]";
        for v in [13, 15] {
            golden(v, f, &[mv(16, 0, 16, XREG4, REG2)]);
        }
        // An experimenter header takes 8 bytes: REG_MOVE pads 28 to 32,
        // COPY_FIELD fills 24 exactly.
        let f = "packet_type=(1,0x894f),actions=move:NXM_NX_REG0[]->NXOXM_NSH_C1[]";
        for v in [13, 15] {
            golden(v, f, &[mv(32, 0, 0, REG0, NSH_C1)]);
        }
        assert_eq!(NSH_C1.wire_len(), 8);
        assert_eq!(
            (NSH_C1.value_len(), REG0.value_len(), XXREG0.value_len()),
            (4, 4, 16)
        );
        assert_eq!(REG14.to_u32(), 0x0001_1c04);
        assert_eq!(OxmHeader::from_u32(0x0001_1c04), REG14);

        // ONF's 1.3 copy-field extension reads as the same move.
        let onf = unhex(
            "ffff0020 4f4e4600 0c80 0000 0020 0000 0000 0000 00011c04 00011e04 00000000"
                .replace(' ', "")
                .as_str(),
        );
        assert_eq!(actions(&onf, 0).unwrap(), vec![mv(32, 0, 0, REG14, REG15)]);
    }

    /// The stack actions: the same 24 bytes in every version.
    #[test]
    fn stack_push_and_pop() {
        let cases = [
            (
                "actions=push:NXM_NX_REG0[]",
                Action::StackPush {
                    field: REG0,
                    ofs: 0,
                    n_bits: 32,
                },
            ),
            (
                "actions=pop:NXM_NX_REG1[0..15]",
                Action::StackPop {
                    field: REG1,
                    ofs: 0,
                    n_bits: 16,
                },
            ),
            (
                "actions=push:NXM_NX_XXREG1[]",
                Action::StackPush {
                    field: XXREG1,
                    ofs: 0,
                    n_bits: 128,
                },
            ),
            (
                "actions=push:OXM_OF_PKT_REG4[]",
                Action::StackPush {
                    field: XREG4,
                    ofs: 0,
                    n_bits: 64,
                },
            ),
            (
                "packet_type=(1,0x894f),actions=push:NXOXM_NSH_C1[]",
                Action::StackPush {
                    field: NSH_C1,
                    ofs: 0,
                    n_bits: 32,
                },
            ),
        ];
        for (f, a) in cases {
            for v in [13, 15] {
                golden(v, f, std::slice::from_ref(&a));
            }
        }
        prints(
            &ovs(13, "actions=pop:NXM_NX_REG1[0..15]"),
            "actions=pop:NXM_NX_REG1[0..15]",
        );
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

    fn ctl(max_len: u16, id: u16, reason: u8, userdata: &[u8], pause: bool) -> Action<'_> {
        Action::Controller {
            max_len,
            id,
            reason,
            userdata,
            pause,
        }
    }

    /// `controller(...)`: NXAST_CONTROLLER without userdata and pause,
    /// NXAST_CONTROLLER2 with only the properties off their defaults
    /// otherwise (max_len 0xffff, id 0, reason action), the same bytes in
    /// every version; a plain `controller` is OFPAT_OUTPUT, and a meter
    /// is refused.
    #[test]
    fn controller_and_controller2() {
        let cases = [
            ("actions=controller(userdata=00.01)", ctl(0xffff, 0, 1, &[0, 1], false)),
            ("actions=controller(userdata=01.02,pause)", ctl(0xffff, 0, 1, &[1, 2], true)),
            ("actions=controller(reason=no_match)", ctl(0xffff, 0, 0, &[], false)),
            ("actions=controller(max_len=65535,id=1)", ctl(0xffff, 1, 1, &[], false)),
            (
                "actions=controller(id=3,max_len=100,reason=invalid_ttl,userdata=01.02.03.04.05,pause)",
                ctl(100, 3, 2, &[1, 2, 3, 4, 5], true),
            ),
            ("actions=controller(pause)", ctl(0xffff, 0, 1, &[], true)),
        ];
        for (f, a) in &cases {
            for v in [13, 15] {
                golden(v, f, std::slice::from_ref(a));
            }
        }
        let u12: Vec<u8> = (0..12).collect();
        golden(
            13,
            "actions=controller(userdata=00.01.02.03.04.05.06.07.08.09.0a.0b)",
            &[ctl(0xffff, 0, 1, &u12, false)],
        );
        prints(
            &ovs(15, cases[4].0),
            "actions=controller(reason=invalid_ttl,max_len=100,id=3,userdata=01.02.03.04.05,pause)",
        );
        // 1.0 writes the same Nicira bytes.
        for (f, a) in &cases[1..3] {
            let b = ovs(10, f);
            let fm = parse_flow_mod10(&Message::new_checked(&b).unwrap())
                .unwrap()
                .0;
            assert_eq!(fm.actions, std::slice::from_ref(a), "{f}");
            let mut out = Vec::new();
            a.emit_in(OF10, &mut out);
            assert_eq!(hex(&out), hex(&b[b.len() - out.len()..]), "{f}");
        }
        // A plain `controller` is an output to CONTROLLER (all of it).
        golden(
            15,
            "actions=controller",
            &[Action::Output {
                port: 0xffff_fffd,
                max_len: 0xffff,
            }],
        );
        // The defaults spelled out read as the defaults, and write as
        // NXAST_CONTROLLER (OVS keeps the form it read; a controller
        // action parsed from text is written so).
        let spelled = unhex(concat!(
            "ffff0028000023200025000000000000",
            "00000008ffff0000",
            "0001000800000000",
            "0002000501000000"
        ));
        let a = actions(&spelled, 0).unwrap();
        assert_eq!(a, vec![ctl(0xffff, 0, 1, &[], false)]);
        let mut out = Vec::new();
        a[0].emit(&mut out);
        assert_eq!(hex(&out), "ffff0010000023200014ffff00000100");
        // A 16-bit value may be longer than 2 bytes, a later property
        // replaces an earlier one.
        let b = unhex("ffff002000002320002500000000000000000006002a000000000008002b0000");
        assert_eq!(actions(&b, 0).unwrap(), vec![ctl(0x2b, 0, 1, &[], false)]);
        assert_eq!(nxast_name(NXAST_CONTROLLER2), Some("NXAST_CONTROLLER2"));
    }

    /// What OVS's `decode_NXAST_RAW_CONTROLLER2` refuses, refused here by
    /// name and offset: a meter (this switch has none), unknown property
    /// types (the type named), properties cut short or too short for
    /// their value, padding that is not zero; NXAST_CONTROLLER's length.
    #[test]
    fn bad_controller_actions_are_refused() {
        let refused = |hx: &str, name: &str, offset: usize| {
            let b = unhex(hx);
            let e = actions(&b, 100).unwrap_err();
            assert!(e.to_string().contains(name), "{hx}: {e}");
            assert_eq!(e.offset, 100 + offset, "{hx}: {e}");
        };
        let b = ovs(15, "actions=controller(meter_id=3)");
        let e = read_err(&b);
        assert!(e.to_string().contains("NXAC2PT_METER_ID"), "{e}");
        assert!(e.to_string().contains("no meters"), "{e}");
        refused(
            "ffff00180000232000250000000000000006000400000000",
            "NXAST_CONTROLLER2 property type: unsupported value 0x6",
            16,
        );
        refused(
            "ffff0020000023200025000000000000ffff000c000023200000000900000000",
            "unsupported value 0xffff",
            16,
        );
        // A property's padded length past the action's end.
        refused(
            "ffff00180000232000250000000000000003000c01020304",
            "NXAST_CONTROLLER2 property: needs 16 bytes",
            16,
        );
        // Length below the property header's own 4.
        refused(
            "ffff00180000232000250000000000000003000200000000",
            "shorter than its 4-byte header",
            18,
        );
        // A max_len of one byte, a reason of none.
        refused(
            "ffff00180000232000250000000000000000000501000000",
            "NXAC2PT_MAX_LEN",
            18,
        );
        refused(
            "ffff00180000232000250000000000000002000400000000",
            "NXAC2PT_REASON",
            18,
        );
        refused(
            "ffff00180000232000250000000100000004000400000000",
            "NXAST_CONTROLLER2",
            13,
        );
        refused(
            "ffff0018000023200014ffff00000100ffff0000ffff0000",
            "NXAST_CONTROLLER",
            2,
        );
    }

    fn read_err(b: &[u8]) -> crate::error::Error {
        parse_flow_mod(&Message::new_checked(b).unwrap()).unwrap_err()
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
                "ip,actions=ct(commit,zone=NXM_NX_REG13[0..15])",
                NXAST_CT,
                "NXAST_CT",
            ),
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
        Action::NxOther { subtype: NXAST_CT }.emit(&mut out);
        assert_eq!(hex(&out), "ffff0010000023200023000000000000");
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
        ];
        for (f, v, name) in named {
            let b = ovs(v, f);
            let (_, at) = actions_at(&b);
            let e = actions(&shrink(&b[at..], 0, 8), at).unwrap_err();
            assert!(e.to_string().contains(name), "{f}: {e}");
            let len = usize::from(u16::from_be_bytes([b[at + 2], b[at + 3]]));
            assert!((at..at + len).contains(&e.offset), "{f}: {e}");
        }
        for (v, f, hx) in OVS {
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

    #[test]
    fn reg_load_value_and_mask() {
        assert_eq!(
            reg_load_value_mask(24, 8, &h(0x0000_0e04), 0x0a),
            Some((vec![10, 0, 0, 0], vec![0xff, 0, 0, 0]))
        );
        // Beyond the field, an experimenter's or a masked header: none.
        assert_eq!(reg_load_value_mask(30, 8, &REG0, 1), None);
        assert_eq!(reg_load_value_mask(0, 8, &NSH_C1, 1), None);
        assert_eq!(reg_load_value_mask(0, 8, &h(0x0001_0108), 1), None);
        // Bits of the value above n_bits are not loaded.
        assert_eq!(
            reg_load_value_mask(0, 4, &REG0, 0xff),
            Some((vec![0, 0, 0, 0x0f], vec![0, 0, 0, 0x0f]))
        );
        // A masked set_field whose mask has two runs is two REG_LOADs
        // in 1.3, each of its own bits.
        let mut out = Vec::new();
        Action::SetField(Oxm {
            class: NXM_1,
            field: 0,
            value: &[0x12, 0x34, 0x56, 0x78],
            mask: Some(&[0xff, 0, 0x0f, 0]),
        })
        .emit(&mut out);
        assert_eq!(
            actions(&out, 0).unwrap(),
            vec![load(8, 4, REG0, 0x6), load(24, 8, REG0, 0x12)]
        );
        // An experimenter TLV reads back as it was written.
        let tlv = unhex("ffff0d0c005ad65000000005000000ff");
        let (o, n) = action_oxm(&tlv, 0, "t").unwrap();
        assert_eq!(
            (o.value.len(), o.mask.map(<[u8]>::len), n),
            (8, Some(4), 16)
        );
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
        leaf.prop_recursive(3, 16, 4, |inner| {
            proptest::collection::vec(inner, 0..4).prop_map(Action::Clone)
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
            Action::Clone(v) => v.iter().all(stays_in_15),
            _ => true,
        }
    }

    /// The fuzz target's body takes every capture, alone and as one
    /// stream (its rewrites in each version hold).
    #[test]
    fn the_fuzz_body_takes_the_captures() {
        let mut stream = Vec::new();
        for (_, _, hx) in OVS {
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
        fn changed_captures_never_panic(i in 0..OVS.len(), changes in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
            let mut b = unhex(OVS[i].2);
            for (at, x) in changes {
                let k = 8 + at.index(b.len() - 8);
                b[k] = x;
            }
            crate::fuzz_targets::openflow(&b);
            let orig = unhex(OVS[i].2);
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
