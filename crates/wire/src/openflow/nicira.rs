//! Nicira's extensions that Open vSwitch's tools send (an EXPERIMENTER
//! message, type 4 in 1.0 and 1.3, with experimenter 0x2320 and a
//! subtype): the flow format a 1.0 client asks for, and the TLV table
//! that maps Geneve options to `tun_metadataN` (`ovs-ofctl add-tlv-map`,
//! `del-tlv-map`, `dump-tlv-map`), with the errors OVS answers them with.
//!
//! ```text
//! header | experimenter 0x2320 (4) | subtype (4) | body
//! TLV_TABLE_MOD body:   command (2) | pad (6) | map...
//! TLV_TABLE_REPLY body: max option space (4) | max fields (2) | pad (10) | map...
//! map:                  class (2) | type (1) | len (1) | index (2) | pad (2)
//! ```

use super::{header, Message, HEADER_LEN, NX_VENDOR};
use crate::error::{need, Error, Layer, Result};
use crate::{be16, be32};

/// The EXPERIMENTER (1.3) / VENDOR (1.0) message type.
pub const EXPERIMENTER: u8 = 4;
/// Subtypes.
pub const NXT_SET_FLOW_FORMAT: u32 = 12;
/// Turn on (or off) the table id in a 1.0 flow_mod's command's high byte.
pub const NXT_FLOW_MOD_TABLE_ID: u32 = 15;
pub const NXT_TLV_TABLE_MOD: u32 = 24;
pub const NXT_TLV_TABLE_REQUEST: u32 = 25;
pub const NXT_TLV_TABLE_REPLY: u32 = 26;
/// Flush a conntrack zone (body: zeros (6) | zone (2)), and flush by
/// tuple (body: ip_proto (1) | zeros (7) | TLVs).
pub const NXT_CT_FLUSH_ZONE: u32 = 29;
pub const NXT_CT_FLUSH: u32 = 32;
/// Flow formats a 1.0 client can ask for.
pub const NXFF_OPENFLOW10: u32 = 0;
pub const NXFF_NXM: u32 = 2;
/// TLV table mod commands.
pub const NXTTMC_ADD: u16 = 0;
pub const NXTTMC_DELETE: u16 = 1;
pub const NXTTMC_CLEAR: u16 = 2;

/// A Nicira extension message: its subtype and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nx<'a> {
    pub subtype: u32,
    pub body: &'a [u8],
}

/// The Nicira extension in an EXPERIMENTER message; `None` for another
/// experimenter or a message too short to say.
pub fn parse_nx<'a>(m: &Message<'a>) -> Option<Nx<'a>> {
    let b = m.body();
    (m.msg_type() == EXPERIMENTER && b.len() >= 8 && be32(b, 0) == NX_VENDOR).then(|| Nx {
        subtype: be32(b, 4),
        body: &b[8..],
    })
}

/// A Nicira extension message of `subtype` carrying `body`.
pub fn nx_message(version: u8, xid: u32, subtype: u32, body: &[u8]) -> Vec<u8> {
    let mut m = header(version, EXPERIMENTER, HEADER_LEN + 8 + body.len(), xid).to_vec();
    m.extend_from_slice(&NX_VENDOR.to_be_bytes());
    m.extend_from_slice(&subtype.to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// One TLV mapping: a Geneve option (class, type, length) and the
/// `tun_metadataN` field it goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlvMapping {
    pub class: u16,
    pub typ: u8,
    pub len: u8,
    pub index: u16,
}

fn mappings(b: &[u8], base: usize) -> Result<Vec<TlvMapping>> {
    if !b.len().is_multiple_of(8) {
        return Err(Error::invalid(
            Layer::OpenFlow,
            "tlv map",
            base,
            "not a whole number of 8-byte mappings",
        ));
    }
    Ok(b.chunks_exact(8)
        .map(|c| TlvMapping {
            class: be16(c, 0),
            typ: c[2],
            len: c[3],
            index: be16(c, 4),
        })
        .collect())
}

fn put_mappings(out: &mut Vec<u8>, maps: &[TlvMapping]) {
    for m in maps {
        out.extend_from_slice(&m.class.to_be_bytes());
        out.extend_from_slice(&[m.typ, m.len]);
        out.extend_from_slice(&m.index.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
    }
}

/// Read a TLV_TABLE_MOD's body: the command and its mappings.
pub fn parse_tlv_table_mod(body: &[u8]) -> Result<(u16, Vec<TlvMapping>)> {
    const MAPS_AT: usize = HEADER_LEN + 8 + 8;
    need(Layer::OpenFlow, "tlv table mod", body, 0, 8).map_err(|e| e.at(HEADER_LEN + 8))?;
    Ok((be16(body, 0), mappings(&body[8..], MAPS_AT)?))
}

/// A TLV_TABLE_MOD (what `ovs-ofctl add-tlv-map` sends).
pub fn tlv_table_mod(version: u8, xid: u32, command: u16, maps: &[TlvMapping]) -> Vec<u8> {
    let mut body = command.to_be_bytes().to_vec();
    body.extend_from_slice(&[0; 6]);
    put_mappings(&mut body, maps);
    nx_message(version, xid, NXT_TLV_TABLE_MOD, &body)
}

/// The TLV_TABLE_REPLY to a TLV_TABLE_REQUEST.
pub fn tlv_table_reply(
    version: u8,
    xid: u32,
    max_option_space: u32,
    max_fields: u16,
    maps: &[TlvMapping],
) -> Vec<u8> {
    let mut body = max_option_space.to_be_bytes().to_vec();
    body.extend_from_slice(&max_fields.to_be_bytes());
    body.extend_from_slice(&[0; 10]);
    put_mappings(&mut body, maps);
    nx_message(version, xid, NXT_TLV_TABLE_REPLY, &body)
}

/// Why a TLV table mod failed (Open vSwitch's NXTTMFC_* errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlvModError {
    BadCommand,
    BadOptLen,
    BadFieldIdx,
    TableFull,
    AlreadyMapped,
    DupEntry,
    InvalidTlvDel,
}

impl TlvModError {
    /// (1.0's code under type BAD_REQUEST, 1.2+'s experimenter code), as
    /// Open vSwitch numbers them.
    fn codes(self) -> (u16, u16) {
        match self {
            TlvModError::BadCommand => (527, 16),
            TlvModError::BadOptLen => (528, 17),
            TlvModError::BadFieldIdx => (529, 18),
            TlvModError::TableFull => (530, 19),
            TlvModError::AlreadyMapped => (531, 20),
            TlvModError::DupEntry => (532, 21),
            TlvModError::InvalidTlvDel => (537, 38),
        }
    }
}

/// Why a conntrack flush is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtFlushError {
    /// Shorter than its fixed part.
    BadLen,
    /// A must-be-zero byte is not (OVS's NXBRC_MUST_BE_ZERO).
    MustBeZero,
}

/// NXT_CT_FLUSH_ZONE's body: the zone.
pub fn parse_ct_flush_zone(body: &[u8]) -> std::result::Result<u16, CtFlushError> {
    let b: &[u8; 8] = body.try_into().map_err(|_| CtFlushError::BadLen)?;
    if b[..6] != [0; 6] {
        return Err(CtFlushError::MustBeZero);
    }
    Ok(be16(b, 6))
}

/// NXT_CT_FLUSH's body: its IP protocol (0: any) and the TLVs that follow
/// (the zone and the tuples), whose whole lengths are checked (each TLV:
/// type (2) | length (2, the header's 4 included) | value, padded to 8).
pub fn parse_ct_flush(body: &[u8]) -> std::result::Result<(u8, &[u8]), CtFlushError> {
    if body.len() < 8 {
        return Err(CtFlushError::BadLen);
    }
    if body[1..8] != [0; 7] {
        return Err(CtFlushError::MustBeZero);
    }
    let tlvs = &body[8..];
    let mut at = 0;
    while at < tlvs.len() {
        if tlvs.len() - at < 4 {
            return Err(CtFlushError::BadLen);
        }
        let len = usize::from(be16(tlvs, at + 2));
        let padded = len.div_ceil(8) * 8;
        if len < 4 || at + padded > tlvs.len() {
            return Err(CtFlushError::BadLen);
        }
        at += padded;
    }
    Ok((body[0], tlvs))
}

/// OVS's NXBRC_MUST_BE_ZERO about `cause`.
pub fn nxbrc_must_be_zero(version: u8, xid: u32, cause: &[u8]) -> Vec<u8> {
    nx_error_codes(version, 515, 4, xid, cause)
}

/// The error message for `e` about `cause`, in the form each version has
/// for an experimenter's errors: 1.0 and 1.1's NXET_VENDOR (0xb0c2) wrapping
/// type and code, 1.2+'s EXPERIMENTER (0xffff) with a code.
pub fn nx_error(version: u8, e: TlvModError, xid: u32, cause: &[u8]) -> Vec<u8> {
    let (code10, code12) = e.codes();
    nx_error_codes(version, code10, code12, xid, cause)
}

/// The error message of Open vSwitch's Nicira error numbered `code10`
/// under BAD_REQUEST in 1.0 and 1.1, `code12` as an experimenter's error
/// from 1.2, about `cause`.
pub(super) fn nx_error_codes(
    version: u8,
    code10: u16,
    code12: u16,
    xid: u32,
    cause: &[u8],
) -> Vec<u8> {
    const NXET_VENDOR: u16 = 0xb0c2;
    const ET_EXPERIMENTER: u16 = 0xffff;
    /// OpenFlow 1.1's wire version: the last without experimenter errors.
    const OF11: u8 = 0x02;
    let data = &cause[..cause.len().min(super::ERROR_DATA_LEN)];
    let mut body = Vec::new();
    if version <= OF11 {
        body.extend_from_slice(&NXET_VENDOR.to_be_bytes());
        body.extend_from_slice(&0u16.to_be_bytes());
        body.extend_from_slice(&NX_VENDOR.to_be_bytes());
        body.extend_from_slice(&super::ET_BAD_REQUEST.to_be_bytes());
        body.extend_from_slice(&code10.to_be_bytes());
    } else {
        body.extend_from_slice(&ET_EXPERIMENTER.to_be_bytes());
        body.extend_from_slice(&code12.to_be_bytes());
        body.extend_from_slice(&NX_VENDOR.to_be_bytes());
    }
    body.extend_from_slice(data);
    let mut m = header(version, super::ERROR, HEADER_LEN + body.len(), xid).to_vec();
    m.extend_from_slice(&body);
    m
}

#[cfg(test)]
mod tests {

    /// The conntrack flushes: a zone after six zero bytes; a protocol,
    /// seven zero bytes and whole TLVs; anything else refused as OVS
    /// refuses it (any bytes, never a panic).
    #[test]
    fn ct_flushes_read_or_are_refused() {
        assert_eq!(parse_ct_flush_zone(&[0, 0, 0, 0, 0, 0, 0, 5]), Ok(5));
        assert_eq!(
            parse_ct_flush_zone(&[0, 0, 1, 0, 0, 0, 0, 5]),
            Err(CtFlushError::MustBeZero)
        );
        assert_eq!(parse_ct_flush_zone(&[0; 6]), Err(CtFlushError::BadLen));
        assert_eq!(parse_ct_flush(&[6, 0, 0, 0, 0, 0, 0, 0]), Ok((6, &[][..])));
        // One TLV of 6 bytes (zone 5), padded to 8.
        let body = [0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 6, 0, 5, 0, 0];
        assert_eq!(parse_ct_flush(&body).map(|(p, t)| (p, t.len())), Ok((0, 8)));
        assert_eq!(parse_ct_flush(&body[..12]), Err(CtFlushError::BadLen));
        assert_eq!(
            parse_ct_flush(&[0, 1, 0, 0, 0, 0, 0, 0]),
            Err(CtFlushError::MustBeZero)
        );
        for n in 0..40 {
            let b: Vec<u8> = (0..n).map(|i| (i * 37 % 251) as u8).collect();
            let _ = (parse_ct_flush_zone(&b), parse_ct_flush(&b));
        }
    }
    use super::*;
    use crate::openflow::{OF10, OF13};

    fn unhex(s: &str) -> Vec<u8> {
        crate::from_hex(s).unwrap()
    }

    /// `ovs-ofctl add-tlv-map` (1.0, its default) and `-O OpenFlow13
    /// dump-tlv-map` against Open vSwitch 3.1, captured here: the requests
    /// read, and the reply and errors build byte for byte as OVS sent them.
    #[test]
    fn tlv_messages_match_ovs() {
        let add = unhex(
            "0104002800000004000023200000001800000000000000000102800400000000ffff010800030000",
        );
        let m = Message::new_checked(&add).unwrap();
        let nx = parse_nx(&m).unwrap();
        assert_eq!(nx.subtype, NXT_TLV_TABLE_MOD);
        let (cmd, maps) = parse_tlv_table_mod(nx.body).unwrap();
        assert_eq!(cmd, NXTTMC_ADD);
        let want = [
            TlvMapping {
                class: 0x0102,
                typ: 0x80,
                len: 4,
                index: 0,
            },
            TlvMapping {
                class: 0xffff,
                typ: 1,
                len: 8,
                index: 3,
            },
        ];
        assert_eq!(maps, want);
        assert_eq!(tlv_table_mod(OF10, 4, NXTTMC_ADD, &want), add);

        let reply = unhex("0404003000000002000023200000001a000001000040000000000000000000000102800400000000ffff020400020000");
        let maps = [
            TlvMapping {
                class: 0x0102,
                typ: 0x80,
                len: 4,
                index: 0,
            },
            TlvMapping {
                class: 0xffff,
                typ: 2,
                len: 4,
                index: 2,
            },
        ];
        assert_eq!(tlv_table_reply(OF13, 2, 256, 64, &maps), reply);

        // The errors, as OVS sent them about the mod that caused them.
        let mod13 = unhex("040400200000000200002320000000180000000000000000ffff020400020000");
        let e = nx_error(OF13, TlvModError::AlreadyMapped, 2, &mod13);
        assert_eq!(e, unhex("0401003000000002ffff001400002320040400200000000200002320000000180000000000000000ffff020400020000"));
        let e = nx_error(OF10, TlvModError::AlreadyMapped, 4, &add);
        assert_eq!(e, unhex("0101003c00000004b0c2000000002320000102130104002800000004000023200000001800000000000000000102800400000000ffff010800030000"));
        // A body that is not whole mappings, and one too short, fail.
        assert!(parse_tlv_table_mod(&[0; 7]).is_err());
        assert!(parse_tlv_table_mod(&[0; 12]).is_err());
    }
}
