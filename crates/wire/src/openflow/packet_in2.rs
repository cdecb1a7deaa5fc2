//! Nicira's packet-in of properties and its continuations (Open vSwitch
//! 3.1's `lib/ofp-packet.c`, `include/openflow/nicira-ext.h`): a
//! controller asks for NXT_PACKET_IN2 with NXT_SET_PACKET_IN_FORMAT, and
//! then gets its packets with all their metadata, the userdata of the
//! `controller(userdata=..)` action that sent them, and, when that action
//! paused (`controller(pause)`), the frozen pipeline as a continuation
//! that it sends back in NXT_RESUME to carry on where it stopped. OVN
//! uses this for DHCP, ARP and ICMP replies and more.
//!
//! ```text
//! nx header (16):   header | experimenter 0x2320 (4) | subtype (4)
//! NXT_SET_PACKET_IN_FORMAT (16): nx header | format (4)
//! NXT_PACKET_IN2 (30), NXT_RESUME (28): nx header | properties, in this order:
//!   NXPINT_PACKET (0)         the frame's bytes (len 4 + n)
//!   NXPINT_FULL_LEN (1)       u32, only when the frame was cut
//!   NXPINT_BUFFER_ID (2)      u32 (Open vSwitch never buffers or writes it)
//!   NXPINT_TABLE_ID (3)       u8
//!   NXPINT_COOKIE (4)         pad (4) | u64; none for no cookie (all ones)
//!   NXPINT_REASON (5)         u8
//!   NXPINT_METADATA (6)       OXM TLVs of the pipeline's fields (len 4 + n)
//!   NXPINT_CONTINUATION (8)   pad (4) | properties, when there are any:
//!     NXCPT_BRIDGE (0x8000)      16 bytes: the bridge's UUID (len 20)
//!     NXCPT_STACK (0x8001)       one per stack entry, top first (<= 128 bytes)
//!     NXCPT_MIRRORS (0x8002)     u32
//!     NXCPT_CONNTRACKED (0x8003) flag
//!     NXCPT_TABLE_ID (0x8004)    u8   } the frozen rule of the ACTIONS that
//!     NXCPT_COOKIE (0x8005)      u64  } follow, each only when it changes
//!     NXCPT_ACTIONS (0x8006)     pad (4) | actions (the message's version's)
//!     NXCPT_ACTION_SET (0x8007)  pad (4) | actions
//!     NXCPT_ODP_PORT (0x8008)    u32
//!   NXPINT_USERDATA (7)       bytes (NXT_PACKET_IN2 only)
//! ```
//!
//! Each property is laid out as `lib/ofp-prop.c` does ([`ofprop`](super::ofprop)
//! has the layouts): padded to 8, the length counting the value but not
//! the padding. Reading is OVS's strict reading (`decode_nx_packet_in2`,
//! `ofputil_decode_packet_in_private`): an unknown property type is an
//! error naming it, values have the lengths they must, there must be a
//! packet, and a full length is never below it. The continuation's
//! contents are Open vSwitch's own and change between its versions; this
//! switch reads and writes 3.1's, the only ones a controller echoes to it.

use super::ofprop;
use super::{actions, actions10, nx_message, Action, Oxm, HEADER_LEN, MAX_LEN, OF10};
use crate::error::{Error, Layer, Result};

/// Nicira message subtypes.
pub const NXT_SET_PACKET_IN_FORMAT: u32 = 16;
pub const NXT_RESUME: u32 = 28;
pub const NXT_PACKET_IN2: u32 = 30;
/// Packet-in formats a controller can ask for: the version's own
/// PACKET_IN, Nicira's older NXT_PACKET_IN, NXT_PACKET_IN2.
pub const NXPIF_STANDARD: u32 = 0;
pub const NXPIF_NXT_PACKET_IN: u32 = 1;
pub const NXPIF_NXT_PACKET_IN2: u32 = 2;
/// BAD_REQUEST code Open vSwitch answers a format it does not know with
/// (OFPBRC_EPERM, in every version).
pub const BRC_EPERM: u16 = 5;
/// OFPERR_NXR_STALE: a continuation this switch did not make, or made
/// before it restarted; BAD_REQUEST code 534 in 1.0 and 1.1, Nicira
/// experimenter code 35 from 1.2 ([`nxr_stale`] writes it).
pub const NXR_STALE_CODE10: u16 = 534;
pub const NXR_STALE_CODE12: u16 = 35;

/// NXT_PACKET_IN2's property types.
pub const NXPINT_PACKET: u16 = 0;
pub const NXPINT_FULL_LEN: u16 = 1;
pub const NXPINT_BUFFER_ID: u16 = 2;
pub const NXPINT_TABLE_ID: u16 = 3;
pub const NXPINT_COOKIE: u16 = 4;
pub const NXPINT_REASON: u16 = 5;
pub const NXPINT_METADATA: u16 = 6;
pub const NXPINT_USERDATA: u16 = 7;
pub const NXPINT_CONTINUATION: u16 = 8;
/// The continuation's property types (private to Open vSwitch:
/// `enum nx_continuation_prop_type` in `lib/ofp-packet.c`).
pub const NXCPT_BRIDGE: u16 = 0x8000;
pub const NXCPT_STACK: u16 = 0x8001;
pub const NXCPT_MIRRORS: u16 = 0x8002;
pub const NXCPT_CONNTRACKED: u16 = 0x8003;
pub const NXCPT_TABLE_ID: u16 = 0x8004;
pub const NXCPT_COOKIE: u16 = 0x8005;
pub const NXCPT_ACTIONS: u16 = 0x8006;
pub const NXCPT_ACTION_SET: u16 = 0x8007;
pub const NXCPT_ODP_PORT: u16 = 0x8008;
/// The longest stack entry Open vSwitch takes (`union mf_subvalue`).
pub const MAX_STACK_ENTRY: usize = 128;

/// The cookie that means "none" (a packet_out's actions have no rule).
const NO_COOKIE: u64 = u64::MAX;

/// An NXT_PACKET_IN2 (or NXT_RESUME), read or to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn2<'a> {
    /// The frame, or as much of it as was sent (never empty: OVS refuses
    /// a packet-in without one).
    pub packet: &'a [u8],
    /// The whole frame's length, at least `packet`'s (NXPINT_FULL_LEN,
    /// written only when it differs).
    pub full_len: u32,
    pub buffer_id: Option<u32>,
    pub table_id: u8,
    /// The rule's cookie; `None` (all ones on the wire) is not sent.
    pub cookie: Option<u64>,
    /// OFPR_*, as the caller encodes it for the version.
    pub reason: u8,
    /// NXPINT_METADATA's OXM TLVs.
    pub metadata: Vec<Oxm<'a>>,
    /// The controller action's userdata (NXT_PACKET_IN2 only).
    pub userdata: Option<&'a [u8]>,
    pub continuation: Option<Continuation<'a>>,
}

/// A frozen pipeline, as Open vSwitch 3.1 serializes it into
/// NXPINT_CONTINUATION. Each part is written only when set (OVS writes a
/// bridge, mirrors and an ODP port only when they are not zero, an action
/// set only when it has actions).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Continuation<'a> {
    /// The bridge's UUID as OVS writes `struct uuid`: four 32-bit words
    /// in the host's order (on x86 each word's bytes are reversed from
    /// the printed form). Opaque: a resume is checked against it.
    pub bridge: Option<[u8; 16]>,
    /// NXCPT_STACK entries in wire order (the top of the stack first).
    pub stack: Vec<&'a [u8]>,
    pub mirrors: Option<u32>,
    pub conntracked: bool,
    /// The frozen actions, one group per NXCPT_ACTIONS.
    pub actions: Vec<FrozenActions<'a>>,
    /// The action set, as the message's actions (raw, checked on reading).
    pub action_set: Option<&'a [u8]>,
    pub odp_port: Option<u32>,
}

impl Continuation<'_> {
    /// Nothing frozen: Open vSwitch leaves such a continuation out of an
    /// NXT_PACKET_IN2.
    pub fn is_empty(&self) -> bool {
        *self == Continuation::default()
    }
}

/// One NXCPT_ACTIONS property: the actions to carry on with after the
/// rule of table `table_id` and cookie `cookie` (OVS's `unroll_xlate`
/// before them) that were frozen there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrozenActions<'a> {
    pub table_id: u8,
    pub cookie: u64,
    pub actions: Vec<Action<'a>>,
}

fn bad(field: &'static str, offset: usize, reason: &'static str) -> Error {
    Error::invalid(Layer::OpenFlow, field, offset, reason)
}

/// NXT_SET_PACKET_IN_FORMAT asking for `format` (NXPIF_*).
pub fn set_packet_in_format(version: u8, xid: u32, format: u32) -> Vec<u8> {
    nx_message(
        version,
        xid,
        NXT_SET_PACKET_IN_FORMAT,
        &format.to_be_bytes(),
    )
}

/// The format an NXT_SET_PACKET_IN_FORMAT's body asks for (exactly 4
/// bytes). Open vSwitch answers a format above [`NXPIF_NXT_PACKET_IN2`]
/// with BAD_REQUEST / [`BRC_EPERM`].
pub fn parse_set_packet_in_format(body: &[u8]) -> Result<u32> {
    match <[u8; 4]>::try_from(body) {
        Ok(b) => Ok(u32::from_be_bytes(b)),
        Err(_) => Err(bad(
            "NXT_SET_PACKET_IN_FORMAT",
            HEADER_LEN + 8,
            "body is not one 4-byte format",
        )),
    }
}

/// The error Open vSwitch answers an NXT_RESUME with whose continuation
/// it did not make (OFPERR_NXR_STALE): in 1.0 and 1.1 Nicira's vendor
/// error wrapping BAD_REQUEST / 534, from 1.2 an experimenter error
/// (type 0xffff) of code 35 and experimenter 0x2320. `cause` is the
/// resume (its first 64 bytes go back).
pub fn nxr_stale(version: u8, xid: u32, cause: &[u8]) -> Vec<u8> {
    super::nicira::nx_error_codes(version, NXR_STALE_CODE10, NXR_STALE_CODE12, xid, cause)
}

/// NXT_PACKET_IN2 of `p` in wire version `version` (its continuation's
/// actions in that version's forms), as `ofputil_encode_nx_packet_in2`
/// writes it. A continuation with nothing in it is left out; userdata is
/// written when given (OVS gives none when it is empty). A packet too
/// big for the message is cut to fit, FULL_LEN then saying how long it
/// was.
pub fn packet_in2(version: u8, xid: u32, p: &PacketIn2<'_>) -> Vec<u8> {
    encode(version, xid, NXT_PACKET_IN2, p)
}

/// NXT_RESUME of `p` as `ofputil_encode_resume` writes it: the same
/// properties as [`packet_in2`] without userdata, and the continuation
/// always (empty when `None`).
pub fn resume(version: u8, xid: u32, p: &PacketIn2<'_>) -> Vec<u8> {
    encode(version, xid, NXT_RESUME, p)
}

fn encode(version: u8, xid: u32, subtype: u32, p: &PacketIn2<'_>) -> Vec<u8> {
    let resume = subtype == NXT_RESUME;
    // What follows the packet first, so that the packet can be cut to
    // the room it leaves.
    let mut tail = Vec::new();
    if let Some(id) = p.buffer_id {
        ofprop::put_u32(&mut tail, NXPINT_BUFFER_ID, id);
    }
    ofprop::put_u8(&mut tail, NXPINT_TABLE_ID, p.table_id);
    if let Some(c) = p.cookie.filter(|&c| c != NO_COOKIE) {
        ofprop::put_u64(&mut tail, NXPINT_COOKIE, c);
    }
    ofprop::put_u8(&mut tail, NXPINT_REASON, p.reason);
    let s = ofprop::start(&mut tail, NXPINT_METADATA);
    for o in &p.metadata {
        o.emit(&mut tail);
    }
    ofprop::end(&mut tail, s);
    match &p.continuation {
        Some(c) => put_continuation(&mut tail, version, c, resume),
        None if resume => put_continuation(&mut tail, version, &Continuation::default(), true),
        None => {}
    }
    if let (Some(u), false) = (p.userdata, resume) {
        ofprop::put(&mut tail, NXPINT_USERDATA, u);
    }

    let n = p.packet.len();
    let full = p.full_len.max(u32::try_from(n).unwrap_or(u32::MAX));
    // Whole 8-byte units below the length limit for PACKET and FULL_LEN.
    let room = MAX_LEN.saturating_sub(HEADER_LEN + 8 + tail.len()) / 8 * 8;
    let mut keep = n;
    let with_full = |k: usize| if full as usize != k { 8 } else { 0 };
    if (4 + keep).div_ceil(8) * 8 + with_full(keep) > room {
        keep = room.saturating_sub(8 + 4).min(n);
    }
    let mut body = Vec::with_capacity(16 + keep + tail.len());
    ofprop::put(&mut body, NXPINT_PACKET, &p.packet[..keep]);
    if full as usize != keep {
        ofprop::put_u32(&mut body, NXPINT_FULL_LEN, full);
    }
    body.extend_from_slice(&tail);
    nx_message(version, xid, subtype, &body)
}

/// NXPINT_CONTINUATION as `ofputil_put_packet_in_private` writes it;
/// with nothing in it, left out unless `always` (a resume's).
fn put_continuation(out: &mut Vec<u8>, version: u8, c: &Continuation<'_>, always: bool) {
    let s = ofprop::start_nested(out, NXPINT_CONTINUATION);
    let inner = out.len();
    if let Some(b) = &c.bridge {
        ofprop::put(out, NXCPT_BRIDGE, b);
    }
    for e in &c.stack {
        ofprop::put(out, NXCPT_STACK, e);
    }
    if let Some(m) = c.mirrors {
        ofprop::put_u32(out, NXCPT_MIRRORS, m);
    }
    if c.conntracked {
        ofprop::put_flag(out, NXCPT_CONNTRACKED);
    }
    // Each group's rule is told only where it changes, from table 0 and
    // cookie 0, as the reader carries them over.
    let (mut table_id, mut cookie) = (0, 0);
    for g in &c.actions {
        if g.table_id != table_id {
            ofprop::put_u8(out, NXCPT_TABLE_ID, g.table_id);
            table_id = g.table_id;
        }
        if g.cookie != cookie {
            ofprop::put_u64(out, NXCPT_COOKIE, g.cookie);
            cookie = g.cookie;
        }
        // OVS leaves out a group without actions; one here is the
        // caller's, and written so that it reads back.
        let a = ofprop::start_nested(out, NXCPT_ACTIONS);
        for x in &g.actions {
            x.emit_in(version, out);
        }
        ofprop::end(out, a);
    }
    if let Some(set) = c.action_set {
        let a = ofprop::start_nested(out, NXCPT_ACTION_SET);
        out.extend_from_slice(set);
        ofprop::end(out, a);
    }
    if let Some(port) = c.odp_port {
        ofprop::put_u32(out, NXCPT_ODP_PORT, port);
    }
    if out.len() > inner || always {
        ofprop::end(out, s);
    } else {
        out.truncate(s);
    }
}

/// The actions `b` at `base` in a message of `version`.
fn read_actions(b: &[u8], base: usize, version: u8) -> Result<Vec<Action<'_>>> {
    if version <= OF10 {
        actions10(b, base)
    } else {
        actions(b, base)
    }
}

/// Read an NXT_PACKET_IN2 or NXT_RESUME: `body` is what follows the
/// 16-byte Nicira header (`Nx::body`), `version` the message's (its
/// actions are that version's). Offsets in errors are the message's.
pub fn parse_packet_in2(body: &[u8], version: u8) -> Result<PacketIn2<'_>> {
    const BASE: usize = HEADER_LEN + 8;
    let mut p = PacketIn2 {
        packet: &[],
        full_len: 0,
        buffer_id: None,
        table_id: 0,
        cookie: None,
        reason: 0,
        metadata: Vec::new(),
        userdata: None,
        continuation: None,
    };
    let mut full_len_at = BASE;
    ofprop::each(body, BASE, "NXT_PACKET_IN2 property", |q| {
        match q.typ {
            NXPINT_PACKET => p.packet = q.value,
            NXPINT_FULL_LEN => {
                p.full_len = q.u32("NXPINT_FULL_LEN")?;
                full_len_at = q.at;
            }
            NXPINT_BUFFER_ID => p.buffer_id = Some(q.u32("NXPINT_BUFFER_ID")?),
            NXPINT_TABLE_ID => p.table_id = q.u8("NXPINT_TABLE_ID")?,
            NXPINT_COOKIE => p.cookie = Some(q.u64("NXPINT_COOKIE")?).filter(|&c| c != NO_COOKIE),
            NXPINT_REASON => p.reason = q.u8("NXPINT_REASON")?,
            NXPINT_METADATA => p.metadata = super::oxms(q.value, q.at + 4)?,
            NXPINT_USERDATA => p.userdata = Some(q.value),
            NXPINT_CONTINUATION => {
                let (inner, at) = q.nested("NXPINT_CONTINUATION")?;
                p.continuation = Some(parse_continuation(inner, at, version)?);
            }
            _ => return Err(ofprop::unknown("NXT_PACKET_IN2 property type", &q)),
        }
        Ok(())
    })?;
    if p.packet.is_empty() {
        return Err(bad("NXPINT_PACKET", BASE, "no packet, or an empty one"));
    }
    let n = u32::try_from(p.packet.len()).unwrap_or(u32::MAX);
    // No full length (or 0): the packet is whole.
    if p.full_len == 0 {
        p.full_len = n;
    } else if p.full_len < n {
        return Err(bad(
            "NXPINT_FULL_LEN",
            full_len_at + 4,
            "shorter than the packet",
        ));
    }
    Ok(p)
}

/// NXPINT_CONTINUATION's properties `b`, at `base` in the message, as
/// `ofputil_decode_packet_in_private` reads them: a table id and cookie
/// hold (from 0) for every NXCPT_ACTIONS after them; a later action set
/// replaces an earlier (OVS, which never writes two, would join them).
fn parse_continuation(b: &[u8], base: usize, version: u8) -> Result<Continuation<'_>> {
    let mut c = Continuation::default();
    let (mut table_id, mut cookie) = (0, 0);
    ofprop::each(b, base, "NXPINT_CONTINUATION property", |q| {
        match q.typ {
            NXCPT_BRIDGE => c.bridge = Some(q.bytes16("NXCPT_BRIDGE")?),
            NXCPT_STACK => {
                if q.value.len() > MAX_STACK_ENTRY {
                    return Err(bad("NXCPT_STACK", q.at + 2, "longer than 128 bytes"));
                }
                c.stack.push(q.value);
            }
            NXCPT_MIRRORS => c.mirrors = Some(q.u32("NXCPT_MIRRORS")?),
            NXCPT_CONNTRACKED => c.conntracked = true,
            NXCPT_TABLE_ID => table_id = q.u8("NXCPT_TABLE_ID")?,
            NXCPT_COOKIE => cookie = q.u64("NXCPT_COOKIE")?,
            NXCPT_ACTIONS => {
                let (inner, at) = q.nested("NXCPT_ACTIONS")?;
                c.actions.push(FrozenActions {
                    table_id,
                    cookie,
                    actions: read_actions(inner, at, version)?,
                });
            }
            NXCPT_ACTION_SET => {
                let (inner, at) = q.nested("NXCPT_ACTION_SET")?;
                read_actions(inner, at, version)?;
                c.action_set = Some(inner);
            }
            NXCPT_ODP_PORT => c.odp_port = Some(q.u32("NXCPT_ODP_PORT")?),
            _ => return Err(ofprop::unknown("NXPINT_CONTINUATION property type", &q)),
        }
        Ok(())
    })?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::{NXM_1, OF13, OF15, OXM_BASIC};
    use proptest::prelude::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The DHCP DISCOVER of the OVN capture (291 bytes, from
    /// 0a:00:00:00:01:11, 0.0.0.0:68 to 255.255.255.255:67, TTL 64, no
    /// UDP checksum), its BOOTP body minimal.
    fn dhcp_frame() -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[0x0a, 0, 0, 0, 1, 0x11, 0x08, 0x00]);
        let mut ip = vec![0x45, 0, 0x01, 0x15, 0, 0, 0, 0, 64, 17, 0, 0];
        ip.extend_from_slice(&[0, 0, 0, 0, 255, 255, 255, 255]);
        let c = crate::checksum::checksum(&ip).to_be_bytes();
        ip[10..12].copy_from_slice(&c);
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0, 68, 0, 67, 0x01, 0x01, 0, 0]);
        let mut bootp = vec![1, 1, 6, 0, 0x12, 0x34, 0x56, 0x78];
        bootp.resize(28, 0);
        bootp.extend_from_slice(&[0x0a, 0, 0, 0, 1, 0x11]);
        bootp.resize(236, 0);
        bootp.extend_from_slice(&[0x63, 0x82, 0x53, 0x63, 53, 1, 1, 255]);
        bootp.resize(249, 0);
        f.extend_from_slice(&bootp);
        f
    }

    fn oxm<'a>(class: u16, field: u8, value: &'a [u8], mask: Option<&'a [u8]>) -> Oxm<'a> {
        Oxm {
            class,
            field,
            value,
            mask,
        }
    }

    const HI: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
    const LO: &[u8] = &[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
    const XREG: u16 = 0x8001;
    /// The metadata of the OVN capture as OVS 3.1 writes it in 1.5
    /// (`nx_put_raw`): in_port, then registers as 64-bit xregs (reg2N the
    /// high half), masked where one half is zero, then metadata.
    fn ovn_metadata() -> Vec<Oxm<'static>> {
        vec![
            oxm(OXM_BASIC, 0, &[0, 0, 0, 2], None),
            oxm(XREG, 0, &[0, 0, 3, 0, 0, 0, 0, 0], Some(HI)),
            oxm(XREG, 5, &[0, 0, 0, 0, 0, 0, 0, 2], Some(LO)),
            oxm(XREG, 6, &[0, 0, 0, 7, 0, 0, 0, 6], None),
            oxm(XREG, 7, &[0, 0, 0, 2, 0, 0, 0, 0], Some(HI)),
            oxm(OXM_BASIC, 2, &[0, 0, 0, 0, 0, 0, 0, 2], None),
        ]
    }

    /// The bridge UUID f72247aa-d79a-41dd-912c-23656ca612c8 as OVS on x86
    /// writes its `struct uuid` (four little-endian words).
    const BRIDGE: [u8; 16] = [
        0xaa, 0x47, 0x22, 0xf7, 0xdd, 0x41, 0x9a, 0xd7, 0x65, 0x23, 0x2c, 0x91, 0xc8, 0x12, 0xa6,
        0x6c,
    ];

    const OVN_USERDATA: &[u8] = &[
        0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xde, 0x10, 0x00, 0x00, 0x00,
        0x63, 0x0a, 0x00, 0x01, 0x0b, 0x33, 0x04, 0x00, 0x00, 0x0e, 0x10, 0x01, 0x04, 0xff, 0xff,
        0xff, 0x00, 0x03, 0x04, 0x0a, 0x00, 0x01, 0x01, 0x36, 0x04, 0x0a, 0x00, 0x01, 0x01,
    ];

    fn ovn_packet_in(frame: &[u8]) -> PacketIn2<'_> {
        PacketIn2 {
            packet: frame,
            full_len: frame.len() as u32,
            buffer_id: None,
            table_id: 0,
            cookie: Some(0xf515_4f7f),
            reason: 1,
            metadata: ovn_metadata(),
            userdata: Some(OVN_USERDATA),
            continuation: Some(Continuation {
                bridge: Some(BRIDGE),
                actions: vec![FrozenActions {
                    table_id: 0,
                    cookie: 0,
                    actions: vec![Action::NxResubmit {
                        port: 0xfff8,
                        table: 29,
                    }],
                }],
                odp_port: Some(5),
                ..Continuation::default()
            }),
        }
    }

    fn unhex(s: &str) -> Vec<u8> {
        crate::from_hex(s).unwrap()
    }

    /// What `ovs-ofctl ofp-print HEX 4` prints for `msg` where it is
    /// installed.
    fn ofp_print(msg: &[u8]) -> Option<String> {
        let out = std::process::Command::new("ovs-ofctl")
            .args(["ofp-print", &hex(msg), "4"])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "ovs-ofctl ofp-print failed: {text}");
        assert!(!text.contains("decode error"), "{text}");
        Some(text)
    }

    /// Each of `lines` is a line of what ovs-ofctl prints for `msg`.
    fn prints(msg: &[u8], lines: &[&str]) {
        if let Some(text) = ofp_print(msg) {
            for l in lines {
                assert!(text.lines().any(|t| t == *l), "no {l:?} in:\n{text}");
            }
        }
    }

    /// The message's body after the Nicira header, read.
    fn read(msg: &[u8]) -> PacketIn2<'_> {
        let m = crate::openflow::Message::new_checked(msg).unwrap();
        assert_eq!(m.len(), msg.len());
        let nx = crate::openflow::parse_nx(&m).unwrap();
        assert!(nx.subtype == NXT_PACKET_IN2 || nx.subtype == NXT_RESUME);
        parse_packet_in2(nx.body, m.version()).unwrap()
    }

    /// The PACKET_IN2 with a continuation of the OVN capture
    /// (/work/shared/ovn/vconn-ch1.log, line 2420: a DHCP DISCOVER paused
    /// by `controller(userdata=..,pause)` in table 0), built here. `ovs-ofctl
    /// ofp-print HEX 4` (Open vSwitch 3.1) prints for these bytes, as
    /// ovs-vswitchd logged the one it sent:
    ///
    /// ```text
    /// NXT_PACKET_IN2 (OF1.5) (xid=0x0): cookie=0xf5154f7f total_len=291 reg0=0x300,reg11=0x2,reg12=0x7,reg13=0x6,reg14=0x2,metadata=0x2,in_port=2 (via action) data_len=291 (unbuffered)
    ///  userdata=00.00.00.02.00.00.00.00.00.01.de.10.00.00.00.63.0a.00.01.0b.33.04.00.00.0e.10.01.04.ff.ff.ff.00.03.04.0a.00.01.01.36.04.0a.00.01.01
    ///  continuation.bridge=f72247aa-d79a-41dd-912c-23656ca612c8
    ///  continuation.actions=unroll_xlate(table=0, cookie=0),resubmit(,29)
    ///  continuation.odp_port=5
    /// udp,vlan_tci=0x0000,dl_src=0a:00:00:00:01:11,dl_dst=ff:ff:ff:ff:ff:ff,nw_src=0.0.0.0,nw_dst=255.255.255.255,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=68,tp_dst=67 udp_csum:0
    /// ```
    ///
    /// and for the NXT_RESUME of the same (what ovn-controller sent back,
    /// there with its DHCP OFFER in place of the packet) the same without
    /// the userdata line.
    #[test]
    fn the_ovn_continuation_as_ovs_prints_it() {
        let frame = dhcp_frame();
        assert_eq!(frame.len(), 291);
        let p = ovn_packet_in(&frame);
        const HEAD: &str = "0604022800000000000023200000001e00000127";
        // TABLE_ID 0, COOKIE (pad, u64), REASON action, METADATA (in_port,
        // xreg0/5/7 masked, xreg6, metadata), CONTINUATION (BRIDGE,
        // ACTIONS (pad, resubmit(,29)), ODP_PORT 5), USERDATA.
        const TAIL: &str = concat!(
            "0003000500000000",
            "000400100000000000000000f5154f7f",
            "0005000501000000",
            "00060060",
            "80000004000000028001011000000300000000",
            "00ffffffff0000000080010b10000000000000",
            "000200000000ffffffff80010c080000000700",
            "00000680010f100000000200000000ffffffff",
            "00000000800004080000000000000002",
            "0008004000000000",
            "80000014aa4722f7dd419ad765232c91c812a66c00000000",
            "8006001800000000ffff001000002320000efff81d000000",
            "8008000800000005",
            "00070030",
            "00000002000000000001de10000000630a00010b330400000e100104ffffff0003040a00010136040a000101"
        );
        const RESUME_HEAD: &str = "060401f800000000000023200000001c00000127";
        let want = [unhex(HEAD), frame.clone(), vec![0], unhex(TAIL)].concat();
        let got = packet_in2(OF15, 0, &p);
        assert_eq!(hex(&got), hex(&want));
        assert_eq!(read(&got), p);
        // NXT_RESUME: the same, the userdata left off.
        let userdata_at = TAIL.len() - 2 * 0x30;
        let want = [
            unhex(RESUME_HEAD),
            frame.clone(),
            vec![0],
            unhex(&TAIL[..userdata_at]),
        ]
        .concat();
        let r = resume(OF15, 0, &p);
        assert_eq!(hex(&r), hex(&want));
        assert_eq!(
            read(&r),
            PacketIn2 {
                userdata: None,
                ..p.clone()
            }
        );
        let common = [
            " continuation.bridge=f72247aa-d79a-41dd-912c-23656ca612c8",
            " continuation.actions=unroll_xlate(table=0, cookie=0),resubmit(,29)",
            " continuation.odp_port=5",
            "udp,vlan_tci=0x0000,dl_src=0a:00:00:00:01:11,dl_dst=ff:ff:ff:ff:ff:ff,nw_src=0.0.0.0,nw_dst=255.255.255.255,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=68,tp_dst=67 udp_csum:0",
        ];
        prints(&got, &common);
        prints(&got, &[
            "NXT_PACKET_IN2 (OF1.5) (xid=0x0): cookie=0xf5154f7f total_len=291 reg0=0x300,reg11=0x2,reg12=0x7,reg13=0x6,reg14=0x2,metadata=0x2,in_port=2 (via action) data_len=291 (unbuffered)",
            " userdata=00.00.00.02.00.00.00.00.00.01.de.10.00.00.00.63.0a.00.01.0b.33.04.00.00.0e.10.01.04.ff.ff.ff.00.03.04.0a.00.01.01.36.04.0a.00.01.01",
        ]);
        prints(&r, &common);
        prints(&r, &["NXT_RESUME (OF1.5) (xid=0x0): cookie=0xf5154f7f total_len=291 reg0=0x300,reg11=0x2,reg12=0x7,reg13=0x6,reg14=0x2,metadata=0x2,in_port=2 (via action) data_len=291 (unbuffered)"]);
        if let Some(text) = ofp_print(&r) {
            assert!(!text.contains("userdata"), "{text}");
        }
    }

    /// Every property and continuation part at once, for a packet cut to
    /// 64 of its 291 bytes: in 1.3, and in 1.0 with its actions in 1.0's
    /// forms (NXAST_DEC_TTL, 1.0's output).
    fn every_part<'a>(frame: &'a [u8], stack: [&'a [u8]; 2], set: &'a [u8]) -> PacketIn2<'a> {
        PacketIn2 {
            packet: &frame[..64],
            full_len: 291,
            buffer_id: Some(7),
            table_id: 11,
            cookie: Some(0x2417_990d),
            reason: 0,
            metadata: vec![
                oxm(OXM_BASIC, 0, &[0, 0, 0, 2], None),
                oxm(NXM_1, 11, &[0, 0, 0, 2], None),
            ],
            userdata: Some(&[0xab; 5]),
            continuation: Some(Continuation {
                bridge: Some(BRIDGE),
                stack: stack.to_vec(),
                mirrors: Some(3),
                conntracked: true,
                actions: vec![
                    FrozenActions {
                        table_id: 0,
                        cookie: 0,
                        actions: vec![
                            Action::NxResubmit {
                                port: 0xfff8,
                                table: 29,
                            },
                            Action::DecTtl,
                            Action::Controller {
                                max_len: 0xffff,
                                id: 0,
                                reason: 1,
                                userdata: &[1, 2],
                                pause: true,
                            },
                        ],
                    },
                    FrozenActions {
                        table_id: 11,
                        cookie: 0x2417_990d,
                        actions: vec![Action::CtClear],
                    },
                    // Only the cookie changes, and no actions follow (OVS
                    // would leave such a group out; written, it reads
                    // back).
                    FrozenActions {
                        table_id: 11,
                        cookie: 7,
                        actions: vec![],
                    },
                ],
                action_set: Some(set),
                odp_port: Some(5),
            }),
        }
    }

    /// [`every_part`] written in 1.3 and 1.0: the properties in OVS's
    /// order, each table id and cookie only where it changes. `ovs-ofctl
    /// ofp-print HEX 4` prints for the 1.3 bytes (for 1.0's the same
    /// without "(OF1.3)"):
    ///
    /// ```text
    /// NXT_PACKET_IN2 (OF1.3) (xid=0x0): table_id=11 cookie=0x2417990d total_len=291 reg11=0x2,in_port=2 (via no_match) data_len=64 buffer=0x00000007
    ///  userdata=ab.ab.ab.ab.ab
    ///  continuation.bridge=f72247aa-d79a-41dd-912c-23656ca612c8
    ///  continuation.stack=(top) 0 0x5 (bottom)
    ///  continuation.mirrors=0x3
    ///  continuation.conntracked=true
    ///  continuation.actions=unroll_xlate(table=0, cookie=0),resubmit(,29),dec_ttl,controller(userdata=01.02,pause),unroll_xlate(table=11, cookie=605526285),ct_clear,unroll_xlate(table=11, cookie=7)
    ///  continuation.action_set=output:3
    ///  continuation.odp_port=5
    /// ```
    #[test]
    fn every_part_in_13_and_10() {
        let frame = dhcp_frame();
        let stack: [&[u8]; 2] = [&[0; 16], &[0, 0, 0, 5]];
        let set13 = unhex("00000010000000030000000000000000");
        let set10 = unhex("0000000800030000");
        let head = |v: &str| unhex(&format!("{v}0401a800000000000023200000001e00000044"));
        // FULL_LEN 291, BUFFER_ID 7, TABLE_ID 11, COOKIE, REASON 0,
        // METADATA (in_port 2, reg11 2).
        let before = concat!(
            "0001000800000123",
            "0002000800000007",
            "000300050b000000",
            "0004001000000000000000002417990d",
            "0005000500000000",
            "000600148000000400000002000116040000000200000000",
        );
        // CONTINUATION: BRIDGE, two STACKs (top first), MIRRORS,
        // CONNTRACKED, then the first ACTIONS' header.
        let cont = concat!(
            "000800f800000000",
            "80000014aa4722f7dd419ad765232c91c812a66c00000000",
            "800100140000000000000000000000000000000000000000",
            "8001000800000005",
            "8002000800000003",
            "8003000400000000",
        );
        let resubmit = "ffff001000002320000efff81d000000";
        let controller = "ffff002000002320002500000000000000030006010200000004000400000000";
        // TABLE_ID 11 and COOKIE for the ct_clear group; COOKIE 7 alone
        // for the empty one.
        let groups = concat!(
            "800400050b000000",
            "8005001000000000000000002417990d",
            "8006001800000000ffff001000002320002b000000000000",
            "80050010000000000000000000000007",
            "8006000800000000",
        );
        // ODP_PORT 5, USERDATA.
        let tail = concat!("8008000800000005", "00070009ababababab00000000000000");
        let want13 = [
            head("04"),
            frame[..64].to_vec(),
            vec![0; 4],
            unhex(&format!(
                "{before}{cont}{}{resubmit}{}{controller}{groups}{}{tail}",
                "8006004000000000",
                "0018000800000000",
                "800700180000000000000010000000030000000000000000",
            )),
        ]
        .concat();
        let p13 = every_part(&frame, stack, &set13);
        let got = packet_in2(OF13, 0, &p13);
        assert_eq!(hex(&got), hex(&want13));
        assert_eq!(read(&got), p13);
        let want10 = [
            head("01"),
            frame[..64].to_vec(),
            vec![0; 4],
            unhex(&format!(
                "{before}{cont}{}{resubmit}{}{controller}{groups}{}{tail}",
                "8006004800000000",
                "ffff0010000023200012000000000000",
                "80070010000000000000000800030000",
            )),
        ]
        .concat();
        let p10 = every_part(&frame, stack, &set10);
        let got10 = packet_in2(OF10, 0, &p10);
        assert_eq!(hex(&got10), hex(&want10));
        assert_eq!(read(&got10), p10);
        let lines = [
            " userdata=ab.ab.ab.ab.ab",
            " continuation.bridge=f72247aa-d79a-41dd-912c-23656ca612c8",
            " continuation.stack=(top) 0 0x5 (bottom)",
            " continuation.mirrors=0x3",
            " continuation.conntracked=true",
            " continuation.actions=unroll_xlate(table=0, cookie=0),resubmit(,29),dec_ttl,controller(userdata=01.02,pause),unroll_xlate(table=11, cookie=605526285),ct_clear,unroll_xlate(table=11, cookie=7)",
            " continuation.action_set=output:3",
            " continuation.odp_port=5",
        ];
        prints(&got, &lines);
        prints(&got, &["NXT_PACKET_IN2 (OF1.3) (xid=0x0): table_id=11 cookie=0x2417990d total_len=291 reg11=0x2,in_port=2 (via no_match) data_len=64 buffer=0x00000007"]);
        prints(&got10, &lines);
        prints(&got10, &["NXT_PACKET_IN2 (xid=0x0): table_id=11 cookie=0x2417990d total_len=291 reg11=0x2,in_port=2 (via no_match) data_len=64 buffer=0x00000007"]);
    }

    /// NXT_SET_PACKET_IN_FORMAT as ovn-controller sent it (the capture's
    /// line 143: `NXT_SET_PACKET_IN_FORMAT (OF1.5) (xid=0x1b):
    /// format=nxt_packet_in2`), and the NXR_STALE error OVS answers a
    /// resume it did not make with, per version; `ovs-ofctl ofp-print`
    /// prints `OFPT_ERROR (OF1.3) (xid=0x9): NXR_STALE` (no "(OF1.x)" in
    /// 1.0) and then the resume, cut to 64 bytes.
    #[test]
    fn set_packet_in_format_and_stale_resumes() {
        let m = set_packet_in_format(OF15, 0x1b, NXPIF_NXT_PACKET_IN2);
        assert_eq!(hex(&m), "060400140000001b000023200000001000000002");
        prints(
            &m,
            &["NXT_SET_PACKET_IN_FORMAT (OF1.5) (xid=0x1b): format=nxt_packet_in2"],
        );
        let m10 = set_packet_in_format(OF10, 3, NXPIF_NXT_PACKET_IN2);
        assert_eq!(hex(&m10), "0104001400000003000023200000001000000002");
        prints(
            &m10,
            &["NXT_SET_PACKET_IN_FORMAT (xid=0x3): format=nxt_packet_in2"],
        );
        let msg = crate::openflow::Message::new_checked(&m).unwrap();
        let nx = crate::openflow::parse_nx(&msg).unwrap();
        assert_eq!(nx.subtype, NXT_SET_PACKET_IN_FORMAT);
        assert_eq!(parse_set_packet_in_format(nx.body).unwrap(), 2);
        let e = parse_set_packet_in_format(&[0, 0, 0, 2, 0, 0, 0, 0]).unwrap_err();
        assert!(e.to_string().contains("NXT_SET_PACKET_IN_FORMAT"), "{e}");
        assert_eq!(e.offset, 16);
        assert!(parse_set_packet_in_format(&[0, 2]).is_err());

        let frame = dhcp_frame();
        let p = ovn_packet_in(&frame);
        let cases = [
            (
                OF10,
                "0101005400000009b0c200000000232000010216",
                "OFPT_ERROR (xid=0x9): NXR_STALE",
            ),
            (
                OF13,
                "0401005000000009ffff002300002320",
                "OFPT_ERROR (OF1.3) (xid=0x9): NXR_STALE",
            ),
            (
                OF15,
                "0601005000000009ffff002300002320",
                "OFPT_ERROR (OF1.5) (xid=0x9): NXR_STALE",
            ),
        ];
        for (v, head, text) in cases {
            let r = resume(v, 9, &p);
            let e = nxr_stale(v, 9, &r);
            assert_eq!(hex(&e), format!("{head}{}", hex(&r[..64])));
            prints(&e, &[text]);
        }
    }

    /// What `decode_nx_packet_in2` and `ofputil_decode_packet_in_private`
    /// refuse is refused, naming the property and pointing into the
    /// message (bodies start at its byte 16).
    #[test]
    fn bad_packet_in2s_are_refused() {
        let refused = |body: &str, name: &str, offset: usize| {
            let b = unhex(body);
            let e = parse_packet_in2(&b, OF15).unwrap_err();
            assert!(e.to_string().contains(name), "{body}: {e}");
            assert_eq!(e.offset, 16 + offset, "{body}: {e}");
        };
        // A 1-byte packet.
        const PACKET: &str = "0000000501000000";
        refused("", "no packet", 0);
        refused("0000000400000000", "no packet", 0);
        refused("0003000500000000", "no packet", 0);
        // A full length of 0 is none (the packet's); below the packet's
        // it is refused.
        for (full, want) in [("00000000", 1), ("00000002", 2)] {
            let b = unhex(&format!("{PACKET}00010008{full}"));
            assert_eq!(parse_packet_in2(&b, OF15).unwrap().full_len, want);
        }
        refused(
            "00000006010200000001000800000001",
            "NXPINT_FULL_LEN: shorter than the packet",
            12,
        );
        // Unknown types, named; experimenter properties are unknown too.
        refused(
            &format!("{PACKET}0009000400000000"),
            "NXT_PACKET_IN2 property type: unsupported value 0x9",
            8,
        );
        refused(
            &format!("{PACKET}ffff000c000023200000000100000000"),
            "unsupported value 0xffff",
            8,
        );
        // Lengths: below the header, past the end, wrong for the value.
        refused(
            &format!("{PACKET}0003000200000000"),
            "shorter than its 4-byte header",
            10,
        );
        refused(&format!("{PACKET}0007000c00000000"), "needs 16 bytes", 8);
        refused("000000050100", "needs 8 bytes", 0);
        refused(&format!("{PACKET}0000"), "needs 4 bytes", 8);
        refused(&format!("{PACKET}0001000501000000"), "NXPINT_FULL_LEN", 10);
        refused(
            &format!("{PACKET}0002000c000000000000000000000000"),
            "NXPINT_BUFFER_ID",
            10,
        );
        refused(&format!("{PACKET}0003000400000000"), "NXPINT_TABLE_ID", 10);
        refused(&format!("{PACKET}0005000400000000"), "NXPINT_REASON", 10);
        refused(
            &format!("{PACKET}0004000800000000"),
            "64-bit property's length is not 16",
            10,
        );
        // A metadata TLV whose value is missing.
        refused(&format!("{PACKET}0006000880000004"), "oxm value", 16);
        // The continuation: its header, its own unknown types and lengths,
        // its actions.
        refused(
            &format!("{PACKET}0008000400000000"),
            "NXPINT_CONTINUATION",
            10,
        );
        refused(
            &format!("{PACKET}00080010000000008009000400000000"),
            "NXPINT_CONTINUATION property type: unsupported value 0x8009",
            16,
        );
        let stack = format!("80010085{}", "00".repeat(129 + 3));
        refused(
            &format!("{PACKET}0008{:04x}00000000{stack}", 8 + stack.len() / 2),
            "NXCPT_STACK",
            18,
        );
        refused(
            &format!("{PACKET}000800200000000080000013{}", "00".repeat(20)),
            "NXCPT_BRIDGE",
            18,
        );
        refused(
            &format!("{PACKET}000800180000000080060010000000000000001000000000"),
            "action: needs 16 bytes",
            24,
        );
        refused(
            &format!("{PACKET}00080010000000008006000400000000"),
            "NXCPT_ACTIONS",
            18,
        );
        refused(
            &format!("{PACKET}000800180000000080070010000000000000000c00000000"),
            "action length",
            26,
        );
        refused(
            &format!("{PACKET}00080010000000008002000400000000"),
            "NXCPT_MIRRORS",
            18,
        );
        refused(
            &format!("{PACKET}0008001000000000800500080000000000"),
            "NXCPT_COOKIE",
            18,
        );
    }

    /// A packet too big for the message is cut to fit, its full length
    /// kept; every cut of a golden message reads or is refused, never a
    /// panic.
    #[test]
    fn big_packets_are_cut_and_cut_messages_refused() {
        let big = vec![0x5a; 70_000];
        let frame = dhcp_frame();
        let mut p = ovn_packet_in(&frame);
        p.packet = &big;
        p.full_len = 70_000;
        for v in [OF10, OF13, OF15] {
            let m = packet_in2(v, 1, &p);
            assert!(m.len() <= MAX_LEN && m.len() > MAX_LEN - 8, "{}", m.len());
            let back = read(&m);
            assert_eq!(back.full_len, 70_000);
            assert_eq!(back.packet, &big[..back.packet.len()]);
            assert_eq!(back.continuation, p.continuation);
            let r = resume(v, 1, &p);
            assert!(r.len() <= MAX_LEN);
            assert_eq!(read(&r).full_len, 70_000);
        }
        // A frame just under the limit fits whole, with no FULL_LEN.
        let room = MAX_LEN - packet_in2(OF15, 0, &ovn_packet_in(&[1])).len() + 1;
        let fits = vec![1u8; room / 8 * 8 - 8];
        p.packet = &fits;
        p.full_len = fits.len() as u32;
        let m = packet_in2(OF15, 0, &p);
        assert_eq!(read(&m).packet, &fits[..]);

        let g = packet_in2(OF13, 0, &every_part(&frame, [&[0; 16], &[5]], &[]));
        for n in 16..g.len() {
            let _ = parse_packet_in2(&g[16..n], OF13);
            let _ = parse_packet_in2(&g[16..n], OF10);
        }
    }

    /// The fuzz target's body takes the goldens, alone and as a stream.
    #[test]
    fn the_fuzz_body_takes_the_goldens() {
        let frame = dhcp_frame();
        let p = ovn_packet_in(&frame);
        let set = unhex("00000010000000030000000000000000");
        let msgs = [
            packet_in2(OF15, 0, &p),
            resume(OF15, 0, &p),
            packet_in2(OF13, 0, &every_part(&frame, [&[0; 16], &[5]], &set)),
            packet_in2(OF10, 0, &every_part(&frame, [&[0; 16], &[5]], &[])),
            set_packet_in_format(OF15, 1, NXPIF_NXT_PACKET_IN2),
        ];
        for m in &msgs {
            crate::fuzz_targets::openflow(m);
        }
        crate::fuzz_targets::openflow(&msgs.concat());
    }

    /// Actions that each version writes and reads back as themselves.
    fn pool() -> Vec<Action<'static>> {
        use crate::openflow::OxmHeader;
        let reg = |n: u8| OxmHeader::new(NXM_1, n, 4);
        vec![
            Action::NxResubmit {
                port: 0xfff8,
                table: 29,
            },
            Action::NxResubmit {
                port: 3,
                table: 0xff,
            },
            Action::DecTtl,
            Action::CtClear,
            Action::Note(&[1, 2, 3, 4, 5, 6]),
            Action::Output {
                port: 1,
                max_len: 0,
            },
            Action::Controller {
                max_len: 0xffff,
                id: 0,
                reason: 1,
                userdata: &[1, 2],
                pause: true,
            },
            Action::Controller {
                max_len: 100,
                id: 3,
                reason: 0,
                userdata: &[],
                pause: false,
            },
            Action::Move {
                n_bits: 32,
                src_ofs: 0,
                dst_ofs: 0,
                src: reg(14),
                dst: reg(15),
            },
            Action::StackPush {
                field: reg(0),
                ofs: 0,
                n_bits: 32,
            },
            Action::Clone(vec![Action::CtClear, Action::DecTtl]),
        ]
    }

    /// A continuation's parts, owned (actions as indices into [`pool`]).
    type Cont = (
        Option<[u8; 16]>,
        Vec<Vec<u8>>,
        Option<u32>,
        bool,
        Vec<(u8, u64, Vec<usize>)>,
        Option<Vec<usize>>,
        Option<u32>,
    );

    fn any_cont() -> impl Strategy<Value = Cont> {
        let n = pool().len();
        let acts = || proptest::collection::vec(0..n, 0..4);
        (
            proptest::option::of(any::<[u8; 16]>()),
            proptest::collection::vec(
                proptest::collection::vec(any::<u8>(), 0..=MAX_STACK_ENTRY),
                0..3,
            ),
            proptest::option::of(any::<u32>()),
            any::<bool>(),
            proptest::collection::vec((any::<u8>(), any::<u64>(), acts()), 0..4),
            proptest::option::of(acts()),
            proptest::option::of(any::<u32>()),
        )
    }

    /// A metadata TLV, owned: class, field, value, and a mask of its
    /// length or none.
    type Tlv = (u16, u8, Vec<u8>, Option<Vec<u8>>);

    fn any_tlv() -> impl Strategy<Value = Tlv> {
        (
            proptest::sample::select(vec![OXM_BASIC, NXM_1, 0x8001]),
            0u8..128,
            proptest::collection::vec(any::<(u8, u8)>(), 1..9),
            any::<bool>(),
        )
            .prop_map(|(class, field, vm, masked)| {
                let (v, m): (Vec<u8>, Vec<u8>) = vm.into_iter().unzip();
                (class, field, v, masked.then_some(m))
            })
    }

    /// Write `p` both ways in `v`, and read each back as what it says.
    fn round_trip(v: u8, p: &PacketIn2<'_>) -> std::result::Result<(), TestCaseError> {
        let m = packet_in2(v, 7, p);
        let want = PacketIn2 {
            continuation: p.continuation.clone().filter(|c| !c.is_empty()),
            ..p.clone()
        };
        prop_assert_eq!(read(&m), want);
        let r = resume(v, 7, p);
        let want = PacketIn2 {
            userdata: None,
            continuation: Some(p.continuation.clone().unwrap_or_default()),
            ..p.clone()
        };
        prop_assert_eq!(read(&r), want);
        Ok(())
    }

    /// Whatever reads writes back to a message that reads, and writing
    /// that again gives the same bytes.
    fn rewrites(body: &[u8], v: u8) -> std::result::Result<(), TestCaseError> {
        if let Ok(p) = parse_packet_in2(body, v) {
            prop_assert!(p.full_len as usize >= p.packet.len() && !p.packet.is_empty());
            let m = packet_in2(v, 0, &p);
            let back = read(&m);
            prop_assert_eq!(hex(&packet_in2(v, 0, &back)), hex(&m));
        }
        Ok(())
    }

    proptest! {
        /// Any NXT_PACKET_IN2 or NXT_RESUME written in any version reads
        /// back as itself (an empty continuation as none in a packet-in,
        /// none as an empty one in a resume, which also drops userdata).
        #[test]
        fn packet_in2_round_trips(
            v in proptest::sample::select(vec![OF10, OF13, OF15]),
            packet in proptest::collection::vec(any::<u8>(), 1..100),
            extra in prop_oneof![Just(0u32), 1u32..100_000],
            buffer_id in proptest::option::of(any::<u32>()),
            (table_id, reason) in any::<(u8, u8)>(),
            cookie in proptest::option::of(0..u64::MAX),
            tlvs in proptest::collection::vec(any_tlv(), 0..4),
            userdata in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
            cont in proptest::option::of(any_cont()),
        ) {
            let pool = pool();
            let emit = |ix: &[usize]| {
                let mut out = Vec::new();
                for &i in ix {
                    pool[i].emit_in(v, &mut out);
                }
                out
            };
            let set = cont.as_ref().and_then(|c| c.5.as_deref()).map(emit);
            let continuation = cont.as_ref().map(|c| Continuation {
                bridge: c.0,
                stack: c.1.iter().map(Vec::as_slice).collect(),
                mirrors: c.2,
                conntracked: c.3,
                actions: c
                    .4
                    .iter()
                    .map(|(table_id, cookie, ix)| FrozenActions {
                        table_id: *table_id,
                        cookie: *cookie,
                        actions: ix.iter().map(|&i| pool[i].clone()).collect(),
                    })
                    .collect(),
                action_set: set.as_deref(),
                odp_port: c.6,
            });
            let p = PacketIn2 {
                packet: &packet,
                full_len: packet.len() as u32 + extra,
                buffer_id,
                table_id,
                cookie,
                reason,
                metadata: tlvs
                    .iter()
                    .map(|(c, f, v, m)| oxm(*c, *f, v, m.as_deref()))
                    .collect(),
                userdata: userdata.as_deref(),
                continuation,
            };
            round_trip(v, &p)?;
        }

        /// Any bytes as a body: read or refused, never a panic.
        #[test]
        fn any_body_reads_or_is_refused(
            v in proptest::sample::select(vec![OF10, OF13, OF15]),
            body in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            rewrites(&body, v)?;
        }

        /// The golden bodies with bytes changed: read or refused, never a
        /// panic; what reads writes back stably.
        #[test]
        fn changed_goldens_never_panic(
            which in any::<bool>(),
            changes in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let frame = dhcp_frame();
            let set = unhex("00000010000000030000000000000000");
            let (v, mut m) = if which {
                (OF15, packet_in2(OF15, 0, &ovn_packet_in(&frame)))
            } else {
                (OF13, packet_in2(OF13, 0, &every_part(&frame, [&[0; 16], &[5]], &set)))
            };
            for (at, x) in changes {
                let k = 16 + at.index(m.len() - 16);
                m[k] = x;
            }
            rewrites(&m[16..], v)?;
            rewrites(&m[16..], OF10)?;
        }
    }
}
