//! TCP header (RFC 9293 § 3.1). tunlab reads tenant TCP for flow hashing and
//! segmentation, and writes the TCP-like header of STT.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          Source Port          |       Destination Port        |
//! |                        Sequence Number                        |
//! |                    Acknowledgment Number                      |
//! |  Data |       |C|E|U|A|P|R|S|F|                               |
//! | Offset| Rsrvd |W|C|R|C|S|S|Y|I|            Window             |
//! |           Checksum            |         Urgent Pointer        |
//! |                    Options (data offset > 5)                  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use crate::checksum;
use crate::error::{need, Error, Layer, Result};
use crate::{be16, be32, put16, put32};

pub const HEADER_LEN: usize = 20;

/// TCP flag bits, as in the low byte of the offset/flags word.
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

#[derive(Debug, Clone)]
pub struct Packet<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    #[inline]
    pub fn new_checked(buf: T) -> Result<Packet<T>> {
        let b = buf.as_ref();
        need(Layer::Tcp, "header", b, 0, HEADER_LEN)?;
        let off = ((b[12] >> 4) as usize) * 4;
        if off < HEADER_LEN {
            return Err(Error::invalid(
                Layer::Tcp,
                "data offset",
                12,
                "less than 5 words",
            ));
        }
        need(Layer::Tcp, "options", b, 0, off)?;
        Ok(Packet { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.b(), 0)
    }
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), 2)
    }
    #[inline]
    pub fn seq(&self) -> u32 {
        be32(self.b(), 4)
    }
    #[inline]
    pub fn ack(&self) -> u32 {
        be32(self.b(), 8)
    }
    #[inline]
    pub fn header_len(&self) -> usize {
        ((self.b()[12] >> 4) as usize) * 4
    }
    /// The three reserved bits plus the historic NS bit (low nibble of byte 12).
    #[inline]
    pub fn reserved(&self) -> u8 {
        self.b()[12] & 0x0f
    }
    #[inline]
    pub fn flags(&self) -> u8 {
        self.b()[13]
    }
    #[inline]
    pub fn window(&self) -> u16 {
        be16(self.b(), 14)
    }
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 16)
    }
    #[inline]
    pub fn urgent(&self) -> u16 {
        be16(self.b(), 18)
    }
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.b()[HEADER_LEN..self.header_len()]
    }
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }
    /// Verify over the whole buffer (header and payload) with a pseudo-header sum.
    #[inline]
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        checksum::fold(checksum::sum(pseudo, self.b())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    pub fn set_seq(&mut self, v: u32) {
        put32(self.buf.as_mut(), 4, v);
    }
    #[inline]
    pub fn set_ack(&mut self, v: u32) {
        put32(self.buf.as_mut(), 8, v);
    }
    #[inline]
    pub fn set_flags(&mut self, v: u8) {
        self.buf.as_mut()[13] = v;
    }
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), 16, v);
    }
    /// Compute the checksum over the whole buffer given the pseudo-header sum.
    #[inline]
    pub fn fill_checksum(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let c = checksum::finish(checksum::sum(pseudo, self.buf.as_ref()));
        self.set_checksum(c);
    }
}

/// A TCP header without options, as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub urgent: u16,
}

impl Repr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq: p.seq(),
            ack: p.ack(),
            flags: p.flags(),
            window: p.window(),
            urgent: p.urgent(),
        }
    }
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Write a 20-byte header with a zero checksum.
    #[inline]
    pub fn emit(&self, b: &mut [u8]) {
        put16(b, 0, self.src_port);
        put16(b, 2, self.dst_port);
        put32(b, 4, self.seq);
        put32(b, 8, self.ack);
        b[12] = 5 << 4;
        b[13] = self.flags;
        put16(b, 14, self.window);
        put16(b, 16, 0);
        put16(b, 18, self.urgent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn roundtrip_and_etherparse_agrees(
            sp in any::<u16>(), dp in any::<u16>(), seq in any::<u32>(), ack in any::<u32>(),
            fl in any::<u8>(), win in any::<u16>(), urg in any::<u16>(),
            payload in proptest::collection::vec(any::<u8>(), 0..100)
        ) {
            let r = Repr { src_port: sp, dst_port: dp, seq, ack, flags: fl, window: win, urgent: urg };
            let mut b = vec![0xa5u8; 20 + payload.len()];
            r.emit(&mut b);
            b[20..].copy_from_slice(&payload);
            let pseudo = checksum::pseudo_v4([10, 0, 0, 1], [10, 0, 0, 2], 6, b.len() as u16);
            let mut p = Packet::new_checked(&mut b[..]).unwrap();
            p.fill_checksum(pseudo);
            prop_assert!(p.verify_checksum(pseudo));
            prop_assert_eq!(Repr::parse(&p), r);
            let (h, _) = etherparse::TcpHeader::from_slice(&b).unwrap();
            prop_assert_eq!((h.source_port, h.destination_port, h.sequence_number, h.acknowledgment_number),
                            (sp, dp, seq, ack));
            prop_assert_eq!((h.fin, h.syn, h.rst, h.psh, h.ack, h.urg, h.ece, h.cwr),
                ((fl & flags::FIN) != 0, (fl & flags::SYN) != 0, (fl & flags::RST) != 0, (fl & flags::PSH) != 0,
                 (fl & flags::ACK) != 0, (fl & flags::URG) != 0, (fl & flags::ECE) != 0, (fl & flags::CWR) != 0));
            let expect = h.calc_checksum_ipv4_raw([10, 0, 0, 1], [10, 0, 0, 2], &payload).unwrap();
            prop_assert_eq!(h.checksum, expect);
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let _ = (p.payload(), p.options(), p.verify_checksum(0));
            }
        }
    }
}
