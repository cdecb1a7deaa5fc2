//! OpenFlow's framing and session messages (OpenFlow 1.3.5 § 7.1, 7.5;
//! OpenFlow 1.0.0 § 5.1, 5.5): the common header, how a byte stream splits
//! into messages, HELLO with its version bitmap and the version two ends
//! agree on, ECHO and ERROR. The messages that program the switch are
//! built on these (issue 19).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    version    |     type      |            length             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                              xid                              |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use crate::error::{need, Error, Layer, Result};
use crate::{be16, be32};

pub const HEADER_LEN: usize = 8;
/// Wire versions.
pub const OF10: u8 = 0x01;
pub const OF13: u8 = 0x04;
pub const OF15: u8 = 0x06;
/// The largest message the length field can describe.
pub const MAX_LEN: usize = u16::MAX as usize;

/// Message types both versions number alike (1.0 § 5.1, 1.3 § 7.1).
pub const HELLO: u8 = 0;
pub const ERROR: u8 = 1;
pub const ECHO_REQUEST: u8 = 2;
pub const ECHO_REPLY: u8 = 3;

/// HELLO's one element type (1.3 § 7.5.1): a bitmap of versions.
pub const HELLO_ELEM_VERSIONBITMAP: u16 = 1;

/// Error types and codes (1.3 § 7.4.4; 1.0 numbers these alike).
pub const ET_HELLO_FAILED: u16 = 0;
pub const HFC_INCOMPATIBLE: u16 = 0;
pub const ET_BAD_REQUEST: u16 = 1;
pub const BRC_BAD_VERSION: u16 = 0;
pub const BRC_BAD_TYPE: u16 = 1;
pub const BRC_BAD_LEN: u16 = 6;
/// An error carries at least this much of the message that caused it.
pub const ERROR_DATA_LEN: usize = 64;

/// A view of one whole message: its header, and a body that ends where
/// the header's length says.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    buf: &'a [u8],
}

impl<'a> Message<'a> {
    /// The message at the start of `buf`; bytes after its length are not
    /// its own.
    pub fn new_checked(buf: &'a [u8]) -> Result<Message<'a>> {
        need(Layer::OpenFlow, "header", buf, 0, HEADER_LEN)?;
        let len = declared_len(buf)?;
        need(Layer::OpenFlow, "message", buf, 0, len)?;
        Ok(Message { buf: &buf[..len] })
    }
    pub fn version(&self) -> u8 {
        self.buf[0]
    }
    pub fn msg_type(&self) -> u8 {
        self.buf[1]
    }
    /// The message's length, header included (never less than 8).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn xid(&self) -> u32 {
        be32(self.buf, 4)
    }
    pub fn body(&self) -> &'a [u8] {
        &self.buf[HEADER_LEN..]
    }
    /// The whole message, header included.
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }
}

/// How many bytes of `stream` make its first whole message: `None` while
/// more bytes must come first, an error when the header it has cannot
/// start a message (the connection is then beyond repair).
pub fn frame(stream: &[u8]) -> Result<Option<usize>> {
    if stream.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = declared_len(stream)?;
    Ok((stream.len() >= len).then_some(len))
}

/// The length a whole header declares, which cannot be below its own 8.
fn declared_len(header: &[u8]) -> Result<usize> {
    let len = be16(header, 2) as usize;
    if len < HEADER_LEN {
        return Err(Error::invalid(
            Layer::OpenFlow,
            "length",
            2,
            "shorter than the 8-byte header",
        ));
    }
    Ok(len)
}

/// The common header.
pub fn header(version: u8, msg_type: u8, len: usize, xid: u32) -> [u8; HEADER_LEN] {
    let l = (len.min(MAX_LEN) as u16).to_be_bytes();
    let x = xid.to_be_bytes();
    [version, msg_type, l[0], l[1], x[0], x[1], x[2], x[3]]
}

/// A bitmap with bit N set for each wire version N.
pub fn version_bitmap(versions: &[u8]) -> u32 {
    versions
        .iter()
        .filter(|&&v| v < 32)
        .fold(0, |m, &v| m | 1 << v)
}

/// HELLO at `version` (the highest the sender speaks) with the bitmap of
/// every version it speaks (1.3 § 7.5.1; a 1.0 peer ignores it).
pub fn hello(version: u8, versions: u32, xid: u32) -> Vec<u8> {
    let mut m = header(version, HELLO, HEADER_LEN + 8, xid).to_vec();
    m.extend_from_slice(&HELLO_ELEM_VERSIONBITMAP.to_be_bytes());
    m.extend_from_slice(&8u16.to_be_bytes());
    m.extend_from_slice(&versions.to_be_bytes());
    m
}

/// The versions a HELLO offers: its bitmap element if it has one, else
/// its header's version (and, by 1.3 § 6.3.1, every one below it, which
/// the agreement below treats as "the lower of the two").
pub fn hello_bitmap(m: &Message<'_>) -> Result<Option<u32>> {
    let body = m.body();
    let mut at = 0;
    while at + 4 <= body.len() {
        let typ = be16(body, at);
        let len = be16(body, at + 2) as usize;
        if len < 4 || at + len > body.len() {
            return Err(Error::invalid(
                Layer::OpenFlow,
                "hello element length",
                HEADER_LEN + at + 2,
                "shorter than its header or past the message's end",
            ));
        }
        if typ == HELLO_ELEM_VERSIONBITMAP {
            // One or more 32-bit words; versions up to 31 live in the first.
            if len < 8 {
                return Err(Error::invalid(
                    Layer::OpenFlow,
                    "version bitmap",
                    HEADER_LEN + at + 2,
                    "holds no bitmap word",
                ));
            }
            return Ok(Some(be32(body, at + 4)));
        }
        // Elements are padded to 8 bytes.
        at += len.div_ceil(8) * 8;
    }
    Ok(None)
}

/// The version two ends agree on (1.3 § 6.3.1): the highest both bitmaps
/// hold; without the peer's bitmap, the lower of the two header versions
/// if this end speaks it. `None`: nothing in common (answer with
/// HELLO_FAILED / INCOMPATIBLE and close).
pub fn agree(ours: u32, peer_version: u8, peer_bitmap: Option<u32>) -> Option<u8> {
    let common = match peer_bitmap {
        Some(b) => ours & b,
        None => {
            let highest_ours = 31 - ours.leading_zeros() as u8;
            let v = peer_version.min(highest_ours);
            if v < 32 {
                ours & (1 << v)
            } else {
                0
            }
        }
    };
    (common != 0).then(|| 31 - common.leading_zeros() as u8)
}

/// ECHO_REPLY to `request`: the same xid and body.
pub fn echo_reply(request: &Message<'_>) -> Vec<u8> {
    let mut m = header(request.version(), ECHO_REPLY, request.len(), request.xid()).to_vec();
    m.extend_from_slice(request.body());
    m
}

/// ERROR of `typ`/`code` about `cause` (its first 64 bytes, as 1.3
/// § 7.4.4 asks at the least), at `version` with the cause's xid.
pub fn error(version: u8, typ: u16, code: u16, xid: u32, cause: &[u8]) -> Vec<u8> {
    let data = &cause[..cause.len().min(ERROR_DATA_LEN)];
    let mut m = header(version, ERROR, HEADER_LEN + 4 + data.len(), xid).to_vec();
    m.extend_from_slice(&typ.to_be_bytes());
    m.extend_from_slice(&code.to_be_bytes());
    m.extend_from_slice(data);
    m
}

/// An ERROR message's type and code, and the data it carries.
pub fn parse_error<'a>(m: &Message<'a>) -> Result<(u16, u16, &'a [u8])> {
    let b = m.body();
    need(Layer::OpenFlow, "error type and code", b, 0, 4).map_err(|e| e.at(HEADER_LEN))?;
    Ok((be16(b, 0), be16(b, 2), &b[4..]))
}

/// OpenFlow 1.3's FLOW_MOD type (§ 7.3.4.1).
pub const FLOW_MOD: u8 = 14;

/// Flow_mod commands.
pub const FC_ADD: u8 = 0;
pub const FC_MODIFY: u8 = 1;
pub const FC_MODIFY_STRICT: u8 = 2;
pub const FC_DELETE: u8 = 3;
pub const FC_DELETE_STRICT: u8 = 4;

/// OXM classes: OpenFlow's basic fields, and Nicira's NXM_1 (where Open
/// vSwitch keeps the tunnel fields).
pub const OXM_BASIC: u16 = 0x8000;
pub const NXM_1: u16 = 0x0001;

/// The experimenter action type, Nicira's experimenter id, and the
/// subtypes of its two resubmit actions.
pub const EXPERIMENTER_ACTION: u16 = 0xffff;
pub const NX_VENDOR: u32 = 0x2320;
pub const NXAST_RESUBMIT: u16 = 1;
pub const NXAST_RESUBMIT_TABLE: u16 = 14;

/// Error types and codes a flow_mod can earn (1.3 § 7.4.4).
pub const ET_BAD_ACTION: u16 = 2;
pub const BAC_BAD_TYPE: u16 = 0;
pub const BAC_BAD_LEN: u16 = 1;
pub const ET_BAD_INSTRUCTION: u16 = 3;
pub const BIC_UNKNOWN_INST: u16 = 0;
pub const ET_BAD_MATCH: u16 = 4;
pub const BMC_BAD_TYPE: u16 = 0;
pub const BMC_BAD_LEN: u16 = 1;
pub const BMC_BAD_FIELD: u16 = 6;
pub const BMC_BAD_PREREQ: u16 = 9;
pub const ET_FLOW_MOD_FAILED: u16 = 5;
pub const FMFC_UNKNOWN: u16 = 0;
pub const FMFC_BAD_COMMAND: u16 = 6;

/// One OXM TLV: a field of a class, its value and its mask if it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oxm<'a> {
    pub class: u16,
    pub field: u8,
    pub value: &'a [u8],
    pub mask: Option<&'a [u8]>,
}

/// An action of an apply-actions instruction (1.3 § 7.2.5), of a
/// PACKET_OUT, or nested in a clone or a ct. The readers take every
/// version's encodings (1.0's through [`actions10`]); [`Action::emit_in`] writes
/// each as Open vSwitch 3.1 does in the version asked for (see
/// [`nxast`](self#nicira-actions) for which form that is).
///
/// Not `Copy` (a clone holds its actions); clone it where a copy was
/// taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<'a> {
    /// OFPAT_OUTPUT (1.0's with its port widened to 32 bits).
    Output {
        port: u32,
        /// Bytes of the packet to send when `port` is the controller
        /// (0xffff: all of it, unbuffered); 0 elsewhere.
        max_len: u16,
    },
    /// OFPAT_PUSH_VLAN: push a tag of TPID `ethertype`.
    PushVlan { ethertype: u16 },
    /// OFPAT_POP_VLAN (1.0's STRIP_VLAN).
    PopVlan,
    /// OFPAT_SET_FIELD: one OXM TLV. OpenFlow 1.5 lets it carry a mask
    /// (set only the mask's bits), which the reader takes in any version;
    /// the writer writes a masked one as such in 1.5 and as Nicira loads
    /// before (Open vSwitch's choice). An experimenter field (class
    /// 0xffff) keeps its 4-byte experimenter id at the start of `value`.
    SetField(Oxm<'a>),
    /// Nicira's resubmit (NXAST_RESUBMIT and NXAST_RESUBMIT_TABLE): look
    /// the packet up again as if it came in on `port` (OpenFlow 1.0's
    /// numbers: 0xfff8 is the port it came in on) in `table` (0xff: the
    /// current one).
    NxResubmit { port: u16, table: u8 },
    /// NXAST_RESUBMIT_TABLE_CT (`resubmit(port,table,ct)`): a resubmit
    /// that looks the packet up with its conntrack original direction
    /// tuple in place of its own addresses and ports; `port` and `table`
    /// as in [`Action::NxResubmit`].
    NxResubmitCt { port: u16, table: u8 },
    /// NXAST_REG_LOAD (`load:value->dst[ofs..ofs+n_bits-1]`): set bits
    /// `ofs..ofs + n_bits` of field `dst` to the low `n_bits` bits of
    /// `value`. `n_bits` is 1..=64; `ofs` has 10 bits on the wire. 1.5
    /// writes it as the masked set_field it is
    /// ([`reg_load_value_mask`]).
    RegLoad {
        ofs: u16,
        n_bits: u8,
        dst: OxmHeader,
        value: u64,
    },
    /// NXAST_REG_LOAD2: a set_field by Nicira's action (one TLV, value
    /// and maybe a mask), which Open vSwitch uses before 1.5 for fields
    /// REG_LOAD cannot name (experimenter and variable-length fields);
    /// 1.5 writes it as OFPAT_SET_FIELD. Experimenter TLVs as in
    /// [`Action::SetField`].
    RegLoad2(Oxm<'a>),
    /// `move:src[src_ofs..]->dst[dst_ofs..]`: copy `n_bits` bits. Read
    /// from NXAST_REG_MOVE, OpenFlow 1.5's OFPAT_COPY_FIELD or ONF's 1.3
    /// copy-field; written as NXAST_REG_MOVE before 1.5 and
    /// OFPAT_COPY_FIELD in 1.5.
    Move {
        n_bits: u16,
        src_ofs: u16,
        dst_ofs: u16,
        src: OxmHeader,
        dst: OxmHeader,
    },
    /// NXAST_STACK_PUSH (`push:field[ofs..ofs+n_bits-1]`): push those
    /// bits of `field` on the action stack.
    StackPush {
        field: OxmHeader,
        ofs: u16,
        n_bits: u16,
    },
    /// NXAST_STACK_POP (`pop:field[ofs..ofs+n_bits-1]`): pop the stack's
    /// top into those bits of `field`.
    StackPop {
        field: OxmHeader,
        ofs: u16,
        n_bits: u16,
    },
    /// NXAST_NOTE (`note:..`): opaque bytes, no effect. They run from the
    /// action's byte 10 to its end, its padding included: Open vSwitch
    /// keeps (and prints) the zeros, so `note:01.02.03` reads back as
    /// 01 02 03 00 00 00. Written padded with zeros to 8.
    Note(&'a [u8]),
    /// `dec_ttl`: decrement the IP TTL or hop limit (the packet goes to
    /// controller 0 when it runs out). OFPAT_DEC_NW_TTL from 1.1,
    /// NXAST_DEC_TTL (read in any version) in 1.0.
    DecTtl,
    /// NXAST_DEC_TTL_CNT_IDS (`dec_ttl(id,...)`): dec_ttl that sends a
    /// packet whose TTL runs out to the controllers with these ids;
    /// `ids` are their 16-bit big-endian numbers ([`cnt_ids`] reads
    /// them).
    DecTtlCntIds { ids: &'a [u8] },
    /// NXAST_CLONE (`clone(...)`): run the nested actions on a copy of
    /// the packet, then carry on with the original.
    Clone(Vec<Action<'a>>),
    /// NXAST_CT_CLEAR: forget the packet's connection tracking state.
    CtClear,
    /// NXAST_CONJUNCTION (`conjunction(id,clause+1/n_clauses)`): the rule
    /// is clause `clause` (0-based on the wire) of `n_clauses` of
    /// conjunctive match `id`.
    Conjunction { id: u32, clause: u8, n_clauses: u8 },
    /// `controller(...)`: send the packet to the controllers with
    /// connection id `id` (0: those without one) as a packet-in of
    /// `reason`, `max_len` bytes of it at most (0xffff: all of it),
    /// carrying `userdata` (NXT_PACKET_IN2's NXPINT_USERDATA), and with
    /// `pause` freezing the pipeline into a continuation the controller
    /// resumes (NXT_RESUME). Read from NXAST_CONTROLLER (userdata empty,
    /// pause off) and NXAST_CONTROLLER2 (whose missing properties mean
    /// max_len 0xffff, id 0, reason 1 `action`); a CONTROLLER2 naming a
    /// meter (NXAC2PT_METER_ID) is refused, as this switch has no meters.
    /// Written as Open vSwitch 3.1's `encode_CONTROLLER` writes one it
    /// parsed: NXAST_CONTROLLER without userdata and pause,
    /// NXAST_CONTROLLER2 with only the properties that differ from those
    /// defaults otherwise, in every version. (A plain `controller` or
    /// `controller:N` — reason `action`, id 0, no userdata, no pause — is
    /// OVS's OFPAT_OUTPUT to port CONTROLLER, [`Action::Output`]; that
    /// choice is the caller's, this variant always writes a Nicira
    /// action.)
    Controller {
        max_len: u16,
        id: u16,
        reason: u8,
        userdata: &'a [u8],
        pause: bool,
    },
    /// NXAST_CT (`ct(commit,force,table=T,zone=Z,alg=A,nat(..),exec(..))`):
    /// send the packet through connection tracking in `zone`.
    /// `flags` are [`NX_CT_F_COMMIT`] and [`NX_CT_F_FORCE`] (force only
    /// with commit; other bits are refused). `recirc_table`: the table a
    /// copy of the packet goes on in, with its conntrack fields set
    /// ([`NX_CT_RECIRC_NONE`], 0xff: none). `alg`: the helper by its
    /// well-known port ([`IPPORT_FTP`], [`IPPORT_TFTP`]; 0 none).
    /// `actions`: what is done to the connection as it is committed, in
    /// the list's version (a `nat(..)` given in the text is the first of
    /// them). The reader refuses them without commit unless each is a
    /// plain `nat` (`decode_NXAST_RAW_CT`); which actions may nest here
    /// at all is the caller's check ([`ct_only`]).
    Ct {
        flags: u16,
        zone: CtZone,
        recirc_table: u8,
        alg: u16,
        actions: Vec<Action<'a>>,
    },
    /// NXAST_NAT (`nat`, `nat(src|dst[=ADDR[-ADDR][:PORT[-PORT]]],..)`):
    /// `flags` are NX_NAT_F_* ([`NX_NAT_F_SRC`] or [`NX_NAT_F_DST`],
    /// [`NX_NAT_F_PERSISTENT`], [`NX_NAT_F_PROTO_HASH`] or
    /// [`NX_NAT_F_PROTO_RANDOM`]); `addrs` the address range, `ports`
    /// the port range (only with addresses). A range's last member is
    /// `None` when the action has none (NX_NAT_RANGE_*_MAX absent: the
    /// range is its first alone); Open vSwitch writes a last equal to
    /// the first when it was given so (`10.0.0.1-10.0.0.1`), so the two
    /// are kept apart. Open vSwitch takes it only inside [`Action::Ct`]
    /// (`ofpacts_verify_nested`); read anywhere here, refused elsewhere
    /// by the caller ([`ct_only`]).
    Nat {
        flags: u16,
        addrs: Option<NatAddrs>,
        ports: Option<(u16, Option<u16>)>,
    },
    /// A Nicira action (experimenter 0xffff, vendor 0x00002320) not
    /// read into any of the above (learn, output_reg, check_pkt_larger,
    /// ...): the caller refuses it by `subtype` ([`nxast_name`] names
    /// it). Written as a bare 16-byte Nicira header.
    NxOther { subtype: u16 },
    /// Any other action type (another vendor's experimenter action:
    /// 0xffff): the caller refuses it by type.
    Other { typ: u16 },
}

/// A flow_mod of OpenFlow 1.3, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMod<'a> {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: u8,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    pub flags: u16,
    pub matches: Vec<Oxm<'a>>,
    /// The apply-actions instruction's actions (none: drop).
    pub actions: Vec<Action<'a>>,
    /// Instruction types other than apply-actions, for the caller to
    /// refuse.
    pub other_instructions: Vec<u16>,
}

/// Where a flow_mod's fields sit (after the header), and its match.
const FM_MATCH_AT: usize = 48;

fn bad(field: &'static str, offset: usize, reason: &'static str) -> Error {
    Error::invalid(Layer::OpenFlow, field, offset, reason)
}

/// The OXM TLV at the start of `b` and the bytes it takes; offsets in
/// errors are `base` + its place in `b`.
fn oxm(b: &[u8], base: usize) -> Result<(Oxm<'_>, usize)> {
    need(Layer::OpenFlow, "oxm header", b, 0, 4).map_err(|e| e.at(base))?;
    let class = be16(b, 0);
    let fh = b[2];
    let len = b[3] as usize;
    need(Layer::OpenFlow, "oxm value", b, 4, len).map_err(|e| e.at(base))?;
    let body = &b[4..4 + len];
    let (value, mask) = if fh & 1 == 1 {
        if !len.is_multiple_of(2) {
            return Err(bad("oxm length", base + 3, "odd with a mask"));
        }
        (&body[..len / 2], Some(&body[len / 2..]))
    } else {
        (body, None)
    };
    let o = Oxm {
        class,
        field: fh >> 1,
        value,
        mask,
    };
    Ok((o, 4 + len))
}

/// The OXM TLVs of a match's fields `b`, at `base` in the message.
pub fn oxms(b: &[u8], base: usize) -> Result<Vec<Oxm<'_>>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let (o, n) = oxm(&b[at..], base + at)?;
        out.push(o);
        at += n;
    }
    Ok(out)
}

/// Each action of the list `b` (at `base` in the message) as `read`
/// makes it of its type, whole bytes and offset in the message; every
/// action's length is checked first (a multiple of 8, inside `b`). Both
/// versions' action lists are laid out so.
fn each_action<'a>(
    b: &'a [u8],
    base: usize,
    mut read: impl FnMut(u16, &'a [u8], usize) -> Result<Action<'a>>,
) -> Result<Vec<Action<'a>>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        need(Layer::OpenFlow, "action header", b, at, 4).map_err(|e| e.at(base))?;
        let typ = be16(b, at);
        let len = be16(b, at + 2) as usize;
        if len < 8 || !len.is_multiple_of(8) {
            return Err(bad(
                "action length",
                base + at + 2,
                "not a multiple of 8 of at least 8",
            ));
        }
        need(Layer::OpenFlow, "action", b, at, len).map_err(|e| e.at(base))?;
        out.push(read(typ, &b[at..at + len], base + at)?);
        at += len;
    }
    Ok(out)
}

/// The action list `b` of OpenFlow 1.1 or later (an apply-actions
/// instruction's, a PACKET_OUT's), at `base` in the message for the
/// offsets in errors: 1.3's and 1.5's encodings alike.
pub fn parse_actions(b: &[u8], base: usize) -> Result<Vec<Action<'_>>> {
    actions(b, base)
}

/// The actions of `b`, at `base` in the message (1.1 and later; the
/// same reader takes 1.3's and 1.5's encodings).
fn actions(b: &[u8], base: usize) -> Result<Vec<Action<'_>>> {
    actions_at(b, base, 0)
}

/// [`actions`] of a list nested `depth` clones deep.
fn actions_at(b: &[u8], base: usize, depth: usize) -> Result<Vec<Action<'_>>> {
    nxast::check_depth(depth, base)?;
    each_action(b, base, |typ, a, at| {
        let len = a.len();
        Ok(match typ {
            0 => {
                if len != 16 {
                    return Err(bad("output action length", at + 2, "not 16"));
                }
                Action::Output {
                    port: be32(a, 4),
                    max_len: be16(a, 8),
                }
            }
            17 => Action::PushVlan {
                ethertype: be16(a, 4),
            },
            18 => Action::PopVlan,
            // One TLV (1.5: maybe masked), then padding to 8.
            25 => Action::SetField(nxast::action_oxm(&a[4..], at + 4, "OFPAT_SET_FIELD")?.0),
            nxast::AT_DEC_NW_TTL => nxast::read_dec_nw_ttl(a, at)?,
            nxast::AT_COPY_FIELD => nxast::read_copy_field(a, at)?,
            EXPERIMENTER_ACTION if len >= 8 && be32(a, 4) == NX_VENDOR => {
                nxast::read_nx(a, at, |inner, base| actions_at(inner, base, depth + 1))?
            }
            EXPERIMENTER_ACTION => nxast::read_experimenter(a, at)?,
            t => Action::Other { typ: t },
        })
    })
}

/// Read a flow_mod of OpenFlow 1.3. Offsets in errors are the message's.
pub fn parse_flow_mod<'a>(m: &Message<'a>) -> Result<FlowMod<'a>> {
    let b = m.bytes();
    need(Layer::OpenFlow, "flow_mod", b, 0, FM_MATCH_AT + 4)?;
    let match_type = be16(b, FM_MATCH_AT);
    if match_type != 1 {
        return Err(bad("match type", FM_MATCH_AT, "not OXM (1)"));
    }
    let match_len = be16(b, FM_MATCH_AT + 2) as usize;
    if match_len < 4 {
        return Err(bad(
            "match length",
            FM_MATCH_AT + 2,
            "shorter than its 4-byte header",
        ));
    }
    need(Layer::OpenFlow, "match", b, FM_MATCH_AT, match_len)?;
    let matches = oxms(
        &b[FM_MATCH_AT + 4..FM_MATCH_AT + match_len],
        FM_MATCH_AT + 4,
    )?;
    // The match is padded to 8 bytes; the instructions follow.
    let mut at = FM_MATCH_AT + match_len.div_ceil(8) * 8;
    let mut acts = Vec::new();
    let mut other_instructions = Vec::new();
    while at < b.len() {
        need(Layer::OpenFlow, "instruction header", b, at, 4)?;
        let typ = be16(b, at);
        let len = be16(b, at + 2) as usize;
        if len < 8 || !len.is_multiple_of(8) {
            return Err(bad(
                "instruction length",
                at + 2,
                "not a multiple of 8 of at least 8",
            ));
        }
        need(Layer::OpenFlow, "instruction", b, at, len)?;
        if typ == 4 {
            acts.extend(actions(&b[at + 8..at + len], at + 8)?);
        } else {
            other_instructions.push(typ);
        }
        at += len;
    }
    Ok(FlowMod {
        cookie: u64::from(be32(b, 8)) << 32 | u64::from(be32(b, 12)),
        cookie_mask: u64::from(be32(b, 16)) << 32 | u64::from(be32(b, 20)),
        table_id: b[24],
        command: b[25],
        idle_timeout: be16(b, 26),
        hard_timeout: be16(b, 28),
        priority: be16(b, 30),
        buffer_id: be32(b, 32),
        out_port: be32(b, 36),
        out_group: be32(b, 40),
        flags: be16(b, 44),
        matches,
        actions: acts,
        other_instructions,
    })
}

mod build;
mod multipart;
mod nicira;
mod nxast;
mod of10;
mod of15;
mod ofprop;
mod packet;
mod packet_in2;
pub use build::*;
pub use multipart::*;
pub use nicira::*;
pub use nxast::*;
pub use of10::*;
pub use of15::*;
pub use packet::*;
pub use packet_in2::*;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unhex(s: &str) -> Vec<u8> {
        crate::from_hex(s).unwrap()
    }

    /// What Open vSwitch 3.1's `ovs-ofctl` sent first on a unix socket
    /// (captured here): `-O OpenFlow13` says HELLO with a bitmap holding
    /// only 1.3; the default (1.0) says a bare 1.0 HELLO.
    #[test]
    fn ovs_ofctl_hellos_agree_as_ovs_would() {
        let ours = version_bitmap(&[OF10, OF13]);
        assert_eq!(ours, 0x12);
        let h13 = unhex("04000010000000010001000800000010");
        let m = Message::new_checked(&h13).unwrap();
        assert_eq!(
            (m.version(), m.msg_type(), m.len(), m.xid()),
            (4, HELLO, 16, 1)
        );
        let b = hello_bitmap(&m).unwrap();
        assert_eq!(b, Some(0x10));
        assert_eq!(agree(ours, m.version(), b), Some(OF13));

        let h10 = unhex("0100000800000001");
        let m = Message::new_checked(&h10).unwrap();
        assert_eq!(hello_bitmap(&m).unwrap(), None);
        assert_eq!(agree(ours, m.version(), None), Some(OF10));
        // Only 1.1 and 1.2 in the peer's bitmap: nothing in common.
        assert_eq!(agree(ours, 3, Some(0b1100)), None);
        // A newer peer without a bitmap: our highest below its version.
        assert_eq!(agree(ours, 6, None), Some(OF13));
        // A 1.1 peer without a bitmap: 1.1 is not ours.
        assert_eq!(agree(ours, 2, None), None);
    }

    /// The requests `ovs-ofctl add-flow` sent next, before any flow_mod:
    /// a 1.3 multipart request for table features (type 12), and a 1.0
    /// stats request for table stats (type 3).
    #[test]
    fn ovs_ofctl_table_requests_frame_whole() {
        let both = [
            unhex("0412001000000002000c000000000000"),
            unhex("0110000c0000000200030000"),
        ]
        .concat();
        let first = frame(&both).unwrap().unwrap();
        assert_eq!(first, 16);
        let m = Message::new_checked(&both).unwrap();
        assert_eq!((m.version(), m.msg_type(), m.xid()), (OF13, 18, 2));
        assert_eq!(be16(m.body(), 0), 12);
        let rest = &both[first..];
        assert_eq!(frame(rest).unwrap(), Some(12));
        let m = Message::new_checked(rest).unwrap();
        assert_eq!(
            (m.version(), m.msg_type(), be16(m.body(), 0)),
            (OF10, 16, 3)
        );
        // Half a message waits for more.
        assert_eq!(frame(&rest[..11]).unwrap(), None);
        assert_eq!(frame(&rest[..3]).unwrap(), None);
    }

    #[test]
    fn hello_echo_and_error_build_what_they_parse() {
        let h = hello(OF13, version_bitmap(&[OF10, OF13]), 7);
        let m = Message::new_checked(&h).unwrap();
        assert_eq!(hello_bitmap(&m).unwrap(), Some(0x12));
        assert_eq!(m.xid(), 7);

        let req = [header(OF13, ECHO_REQUEST, 12, 9).as_slice(), b"ping"].concat();
        let r = echo_reply(&Message::new_checked(&req).unwrap());
        let m = Message::new_checked(&r).unwrap();
        assert_eq!(
            (m.msg_type(), m.xid(), m.body()),
            (ECHO_REPLY, 9, &b"ping"[..])
        );

        let cause = vec![0xabu8; 100];
        let e = error(OF13, ET_BAD_REQUEST, BRC_BAD_TYPE, 5, &cause);
        let m = Message::new_checked(&e).unwrap();
        assert_eq!(m.len(), 8 + 4 + 64);
        let (t, c, data) = parse_error(&m).unwrap();
        assert_eq!((t, c, data.len()), (ET_BAD_REQUEST, BRC_BAD_TYPE, 64));
    }

    #[test]
    fn bad_lengths_are_named() {
        let e = Message::new_checked(&[4, 0, 0, 4, 0, 0, 0, 1]).unwrap_err();
        assert!(e.to_string().contains("length"), "{e}");
        assert!(frame(&[4, 0, 0, 7, 0, 0, 0, 1]).is_err());
        let e = Message::new_checked(&[4, 0, 0, 16, 0, 0, 0, 1]).unwrap_err();
        assert!(e.to_string().contains("message: needs 16 bytes"), "{e}");
        // A hello element that runs past the end.
        let bad = unhex("04000010000000010001000c00000010");
        let m = Message::new_checked(&bad).unwrap();
        let e = hello_bitmap(&m).unwrap_err();
        assert!(e.to_string().contains("hello element length"), "{e}");
        assert_eq!(e.offset, 10);
    }

    /// `ovs-ofctl -O OpenFlow13 add-flow ... in_port=2
    /// action=push_vlan:0x88a8,mod_vlan_vid:1,output:1` (the QinQ
    /// article's), as Open vSwitch 3.1 wrote it (tests/golden).
    #[test]
    fn the_qinq_articles_flow_mod_from_ovs_ofctl() {
        let b = unhex("040e007000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff000000000001000c80000004000000020000000000040030000000000011000888a800000019001080000c02100100000000000000000010000000010000000000000000");
        let fm = parse_flow_mod(&Message::new_checked(&b).unwrap()).unwrap();
        assert_eq!((fm.command, fm.priority, fm.table_id), (FC_ADD, 0x8000, 0));
        assert_eq!(fm.buffer_id, 0xffff_ffff);
        assert_eq!(
            fm.matches,
            vec![Oxm {
                class: OXM_BASIC,
                field: 0,
                value: &[0, 0, 0, 2],
                mask: None
            }]
        );
        assert_eq!(
            fm.actions,
            vec![
                Action::PushVlan { ethertype: 0x88a8 },
                Action::SetField(Oxm {
                    class: OXM_BASIC,
                    field: 6,
                    value: &[0x10, 0x01],
                    mask: None
                }),
                Action::Output {
                    port: 1,
                    max_len: 0
                },
            ]
        );
        assert!(fm.other_instructions.is_empty());
    }

    /// The tun_dst article's: `in_port=1,tun_dst=10.222.0.1
    /// action=output:2`: tun_dst is Nicira's NXM_1 field 32.
    #[test]
    fn the_tun_dst_articles_flow_mod_from_ovs_ofctl() {
        let b = unhex("040e006000000002000000000000000000000000000000000000000000008000ffffffffffffffffffffffff00000000000100148000000400000001000140040ade000100000000000400180000000000000010000000020000000000000000");
        let fm = parse_flow_mod(&Message::new_checked(&b).unwrap()).unwrap();
        assert_eq!(fm.matches.len(), 2);
        assert_eq!(
            fm.matches[1],
            Oxm {
                class: NXM_1,
                field: 32,
                value: &[10, 222, 0, 1],
                mask: None
            }
        );
        assert_eq!(
            fm.actions,
            vec![Action::Output {
                port: 2,
                max_len: 0
            }]
        );
        // Cut anywhere, it fails with a named field, never a panic.
        for n in 0..b.len() {
            let mut cut = b[..n].to_vec();
            if n >= 4 {
                cut[2..4].copy_from_slice(&(n as u16).to_be_bytes());
            }
            if let Ok(m) = Message::new_checked(&cut) {
                let _ = parse_flow_mod(&m);
            }
        }
    }

    proptest! {
        #[test]
        fn any_flow_mod_body_parses_or_fails_cleanly(body in proptest::collection::vec(any::<u8>(), 0..160)) {
            let mut b = header(OF13, FLOW_MOD, 8 + body.len(), 1).to_vec();
            b.extend_from_slice(&body);
            if let Ok(m) = Message::new_checked(&b) {
                let _ = parse_flow_mod(&m);
            }
        }

        /// Whatever the bytes: no panic, and a framed message is exactly
        /// what its header says.
        #[test]
        fn any_bytes_frame_or_fail_cleanly(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(Some(n)) = frame(&data) {
                let m = Message::new_checked(&data).unwrap();
                prop_assert_eq!(m.len(), n);
                let _ = hello_bitmap(&m);
                let _ = parse_error(&m);
            }
        }

        #[test]
        fn agreement_is_common_and_highest(ours in 1u32.., theirs in 1u32..) {
            match agree(ours, 0, Some(theirs)) {
                Some(v) => {
                    prop_assert!(ours & theirs & (1 << v) != 0);
                    prop_assert!((ours & theirs) >> v == 1);
                }
                None => prop_assert_eq!(ours & theirs, 0),
            }
        }
    }
}
