//! OpenFlow's type-length-value properties as Open vSwitch 3.1 reads and
//! writes them (`lib/ofp-prop.c`): NXAST_CONTROLLER2's, NXT_PACKET_IN2's
//! and its continuation's. Each is padded with zeros to a multiple of 8;
//! the length counts the header and the value but not that padding, except
//! where a layout puts padding inside the value (a 64-bit value sits after
//! 4 bytes of pad, nested properties after 4 bytes of pad, a 16-bit value
//! has 2 bytes of pad after it; those are counted).
//!
//! ```text
//! header:  type (2) | len (2)                      len = 4 + value, padded to 8
//! u8:      header | value (1) | zeros (3)           len 5
//! u16:     header | value (2) | pad (2)             len 8
//! u32:     header | value (4)                       len 8
//! u64:     header | pad (4) | value (8)             len 16
//! uuid:    header | value (16) | zeros (4)          len 20
//! flag:    header | zeros (4)                       len 4
//! nested:  header | pad (4) | properties            len 8 + properties
//! ```
//!
//! A type of 0xffff starts an experimenter's property in OpenFlow; none of
//! the property lists here knows one, so it reads as an unknown type.

use crate::be32;
use crate::error::{need, Error, ErrorKind, Layer, Result};

/// One property read: its type, the bytes after its 4-byte header up to
/// its length (padding excluded), and its offset in the message.
#[derive(Debug, Clone, Copy)]
pub(super) struct Prop<'a> {
    pub typ: u16,
    pub value: &'a [u8],
    pub at: usize,
}

fn bad(field: &'static str, offset: usize, reason: &'static str) -> Error {
    Error::invalid(Layer::OpenFlow, field, offset, reason)
}

/// The error for a property type the list `what` does not define (Open
/// vSwitch's strict OFPBPC_BAD_TYPE), naming the type.
pub(super) fn unknown(what: &'static str, p: &Prop<'_>) -> Error {
    Error::new(
        Layer::OpenFlow,
        p.at,
        ErrorKind::Unsupported {
            field: what,
            value: u32::from(p.typ),
        },
    )
}

/// Each property of `b` (at `base` in the message), in order, given to
/// `each`; `what` names the list in errors. As `ofpprop_pull`: a header
/// needs 4 bytes, a length at least 4, and the length padded to 8 must
/// fit in what is left (so the list is whole properties, padding
/// included).
pub(super) fn each<'a>(
    b: &'a [u8],
    base: usize,
    what: &'static str,
    mut each: impl FnMut(Prop<'a>) -> Result<()>,
) -> Result<()> {
    let mut at = 0;
    while at < b.len() {
        need(Layer::OpenFlow, what, b, at, 4).map_err(|e| e.at(base))?;
        let typ = u16::from_be_bytes([b[at], b[at + 1]]);
        let len = usize::from(u16::from_be_bytes([b[at + 2], b[at + 3]]));
        if len < 4 {
            return Err(bad(
                what,
                base + at + 2,
                "property length shorter than its 4-byte header",
            ));
        }
        let padded = len.div_ceil(8) * 8;
        need(Layer::OpenFlow, what, b, at, padded).map_err(|e| e.at(base))?;
        each(Prop {
            typ,
            value: &b[at + 4..at + len],
            at: base + at,
        })?;
        at += padded;
    }
    Ok(())
}

impl<'a> Prop<'a> {
    /// An 8-bit value: the first byte of one or more (`ofpprop_parse_u8`
    /// forgives a longer value).
    pub fn u8(&self, what: &'static str) -> Result<u8> {
        match self.value.first() {
            Some(&v) => Ok(v),
            None => Err(bad(what, self.at + 2, "property holds no 8-bit value")),
        }
    }

    /// A 16-bit value: the first two bytes of two or more.
    pub fn u16(&self, what: &'static str) -> Result<u16> {
        match self.value {
            [a, b, ..] => Ok(u16::from_be_bytes([*a, *b])),
            _ => Err(bad(what, self.at + 2, "property holds no 16-bit value")),
        }
    }

    /// A 32-bit value: exactly 4 bytes.
    pub fn u32(&self, what: &'static str) -> Result<u32> {
        if self.value.len() != 4 {
            return Err(bad(what, self.at + 2, "32-bit property's length is not 8"));
        }
        Ok(be32(self.value, 0))
    }

    /// A 64-bit value: 4 bytes of pad, then the value (length exactly 16).
    pub fn u64(&self, what: &'static str) -> Result<u64> {
        if self.value.len() != 12 {
            return Err(bad(what, self.at + 2, "64-bit property's length is not 16"));
        }
        Ok(u64::from(be32(self.value, 4)) << 32 | u64::from(be32(self.value, 8)))
    }

    /// 16 bytes exactly (a UUID).
    pub fn bytes16(&self, what: &'static str) -> Result<[u8; 16]> {
        <[u8; 16]>::try_from(self.value)
            .map_err(|_| bad(what, self.at + 2, "UUID property's length is not 20"))
    }

    /// What a nested property holds after its 4 bytes of pad, and its
    /// offset in the message.
    pub fn nested(&self, what: &'static str) -> Result<(&'a [u8], usize)> {
        match self.value.get(4..) {
            Some(inner) => Ok((inner, self.at + 8)),
            None => Err(bad(
                what,
                self.at + 2,
                "nested property shorter than its 8-byte header",
            )),
        }
    }
}

/// Open a property of `typ` at the end of `out`; [`end`] finishes it.
pub(super) fn start(out: &mut Vec<u8>, typ: u16) -> usize {
    let s = out.len();
    out.extend_from_slice(&typ.to_be_bytes());
    out.extend_from_slice(&[0, 4]);
    s
}

/// Open a property to hold nested properties (or actions): its header
/// padded to 8.
pub(super) fn start_nested(out: &mut Vec<u8>, typ: u16) -> usize {
    let s = start(out, typ);
    out.extend_from_slice(&[0; 4]);
    s
}

/// Write the length of the property begun at `s` (all it holds so far),
/// then pad it with zeros to 8.
pub(super) fn end(out: &mut Vec<u8>, s: usize) {
    let len = (out.len() - s).min(usize::from(u16::MAX));
    out[s + 2..s + 4].copy_from_slice(&(len as u16).to_be_bytes());
    let padded = (out.len() - s).div_ceil(8) * 8;
    out.resize(s + padded, 0);
}

/// A property holding `value` as it is.
pub(super) fn put(out: &mut Vec<u8>, typ: u16, value: &[u8]) {
    let s = start(out, typ);
    out.extend_from_slice(value);
    end(out, s);
}

pub(super) fn put_u8(out: &mut Vec<u8>, typ: u16, v: u8) {
    put(out, typ, &[v]);
}

/// A 16-bit value and 2 bytes of pad, counted (`ofpprop_put_be16`).
pub(super) fn put_u16(out: &mut Vec<u8>, typ: u16, v: u16) {
    let [a, b] = v.to_be_bytes();
    put(out, typ, &[a, b, 0, 0]);
}

pub(super) fn put_u32(out: &mut Vec<u8>, typ: u16, v: u32) {
    put(out, typ, &v.to_be_bytes());
}

/// 4 bytes of pad, then the 64-bit value (`ofpprop_put_be64`).
pub(super) fn put_u64(out: &mut Vec<u8>, typ: u16, v: u64) {
    let s = start(out, typ);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&v.to_be_bytes());
    end(out, s);
}

/// A property whose presence is its meaning.
pub(super) fn put_flag(out: &mut Vec<u8>, typ: u16) {
    put(out, typ, &[]);
}
