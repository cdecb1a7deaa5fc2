//! IPv4 (RFC 791).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version|  IHL  |    DSCP   |ECN|          Total Length         |
//! |         Identification        |Flags|      Fragment Offset    |
//! |  Time to Live |    Protocol   |         Header Checksum       |
//! |                       Source Address                          |
//! |                    Destination Address                        |
//! |                    Options (IHL > 5)                          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use crate::checksum;
use crate::error::{need, Error, Layer, Result};
use crate::{be16, put16};
use std::net::Ipv4Addr;

mod field {
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;

/// IP protocol numbers (IANA) that tunlab knows; shared with IPv6's Next Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpProtocol {
    Icmp,
    Tcp,
    Udp,
    Gre,
    Icmpv6,
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> IpProtocol {
        match v {
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            47 => IpProtocol::Gre,
            58 => IpProtocol::Icmpv6,
            o => IpProtocol::Unknown(o),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(v: IpProtocol) -> u8 {
        match v {
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Gre => 47,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Unknown(o) => o,
        }
    }
}

impl IpProtocol {
    #[inline]
    pub fn name(self) -> &'static str {
        match self {
            IpProtocol::Icmp => "icmp",
            IpProtocol::Tcp => "tcp",
            IpProtocol::Udp => "udp",
            IpProtocol::Gre => "gre",
            IpProtocol::Icmpv6 => "icmpv6",
            IpProtocol::Unknown(_) => "unknown",
        }
    }
}

/// Don't Fragment and More Fragments flag bits within the flags/offset word.
pub const FLAG_DF: u16 = 0x4000;
pub const FLAG_MF: u16 = 0x2000;

/// A zero-copy view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Packet<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Check version, IHL and total length against the buffer. Trailing bytes
    /// beyond the total length (Ethernet padding) are allowed and ignored by
    /// [`Packet::payload`].
    #[inline]
    pub fn new_checked(buf: T) -> Result<Packet<T>> {
        let b = buf.as_ref();
        need(Layer::Ipv4, "header", b, 0, HEADER_LEN)?;
        if b[0] >> 4 != 4 {
            return Err(Error::invalid(Layer::Ipv4, "version", 0, "not 4"));
        }
        let ihl = ((b[0] & 0x0f) as usize) * 4;
        if ihl < HEADER_LEN {
            return Err(Error::invalid(Layer::Ipv4, "ihl", 0, "less than 5 words"));
        }
        need(Layer::Ipv4, "options", b, 0, ihl)?;
        let total = be16(b, field::LENGTH) as usize;
        if total < ihl {
            return Err(Error::invalid(
                Layer::Ipv4,
                "total length",
                field::LENGTH,
                "shorter than the header",
            ));
        }
        need(Layer::Ipv4, "total length", b, 0, total)?;
        Ok(Packet { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    #[inline]
    pub fn header_len(&self) -> usize {
        ((self.b()[field::VER_IHL] & 0x0f) as usize) * 4
    }
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.b()[field::TOS] >> 2
    }
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.b()[field::TOS] & 3
    }
    #[inline]
    pub fn tos(&self) -> u8 {
        self.b()[field::TOS]
    }
    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(self.b(), field::LENGTH)
    }
    #[inline]
    pub fn ident(&self) -> u16 {
        be16(self.b(), field::IDENT)
    }
    #[inline]
    pub fn dont_frag(&self) -> bool {
        be16(self.b(), field::FLAGS_FRAG) & FLAG_DF != 0
    }
    #[inline]
    pub fn more_frags(&self) -> bool {
        be16(self.b(), field::FLAGS_FRAG) & FLAG_MF != 0
    }
    /// The reserved ("evil") flag bit.
    #[inline]
    pub fn reserved_flag(&self) -> bool {
        be16(self.b(), field::FLAGS_FRAG) & 0x8000 != 0
    }
    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (be16(self.b(), field::FLAGS_FRAG) & 0x1fff) * 8
    }
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }
    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        self.b()[field::PROTOCOL].into()
    }
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM)
    }
    #[inline]
    pub fn src(&self) -> Ipv4Addr {
        let b = self.b();
        Ipv4Addr::new(b[12], b[13], b[14], b[15])
    }
    #[inline]
    pub fn dst(&self) -> Ipv4Addr {
        let b = self.b();
        Ipv4Addr::new(b[16], b[17], b[18], b[19])
    }
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.b()[HEADER_LEN..self.header_len()]
    }
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(&self.b()[..self.header_len()])
    }
    /// The payload, up to the total length (Ethernet padding excluded).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..self.total_len() as usize]
    }
    /// The whole packet up to the total length.
    #[inline]
    pub fn packet(&self) -> &[u8] {
        &self.b()[..self.total_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    pub fn set_total_len(&mut self, v: u16) {
        put16(self.buf.as_mut(), field::LENGTH, v);
    }
    #[inline]
    pub fn set_ttl(&mut self, v: u8) {
        self.buf.as_mut()[field::TTL] = v;
    }
    /// Recompute the header checksum.
    #[inline]
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len();
        let b = self.buf.as_mut();
        put16(b, field::CHECKSUM, 0);
        let c = checksum::checksum(&b[..hl]);
        put16(b, field::CHECKSUM, c);
    }
}

/// An IPv4 header without options, as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: IpProtocol,
    /// Length of the payload (after the header).
    pub payload_len: usize,
    pub tos: u8,
    pub ident: u16,
    pub dont_frag: bool,
    pub ttl: u8,
}

impl Repr {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            payload_len: p.total_len() as usize - p.header_len(),
            tos: p.tos(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            ttl: p.ttl(),
        }
    }

    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write a 20-byte header with its checksum into `b`.
    #[inline]
    pub fn emit(&self, b: &mut [u8]) {
        b[field::VER_IHL] = 0x45;
        b[field::TOS] = self.tos;
        put16(b, field::LENGTH, (HEADER_LEN + self.payload_len) as u16);
        put16(b, field::IDENT, self.ident);
        put16(
            b,
            field::FLAGS_FRAG,
            if self.dont_frag { FLAG_DF } else { 0 },
        );
        b[field::TTL] = self.ttl;
        b[field::PROTOCOL] = self.protocol.into();
        b[field::SRC..field::SRC + 4].copy_from_slice(&self.src.octets());
        b[field::DST..field::DST + 4].copy_from_slice(&self.dst.octets());
        put16(b, field::CHECKSUM, 0);
        let c = checksum::checksum(&b[..HEADER_LEN]);
        put16(b, field::CHECKSUM, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // 192.168.0.1 -> 192.168.0.199, UDP, ttl 64, DF, total 0x73; checksum b861.
    const GOLDEN: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn parse_golden() {
        let mut buf = GOLDEN.to_vec();
        buf.resize(0x73, 0);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum());
        assert!(p.dont_frag());
        assert_eq!(p.protocol(), IpProtocol::Udp);
        assert_eq!(p.payload().len(), 0x73 - 20);
    }

    #[test]
    fn emit_golden() {
        let r = Repr {
            src: Ipv4Addr::new(192, 168, 0, 1),
            dst: Ipv4Addr::new(192, 168, 0, 199),
            protocol: IpProtocol::Udp,
            payload_len: 0x73 - 20,
            tos: 0,
            ident: 0,
            dont_frag: true,
            ttl: 64,
        };
        let mut b = [0xa5u8; 20];
        r.emit(&mut b);
        assert_eq!(b, GOLDEN);
    }

    #[test]
    fn errors_name_field() {
        let mut buf = GOLDEN.to_vec();
        buf.resize(0x73, 0);
        assert!(Packet::new_checked(&buf[..0x72])
            .unwrap_err()
            .to_string()
            .contains("total length"));
        buf[0] = 0x44;
        assert!(Packet::new_checked(&buf[..])
            .unwrap_err()
            .to_string()
            .contains("ihl"));
        buf[0] = 0x65;
        assert!(Packet::new_checked(&buf[..])
            .unwrap_err()
            .to_string()
            .contains("version"));
    }

    proptest! {
        #[test]
        fn roundtrip_and_etherparse_agrees(
            src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(), proto in any::<u8>(),
            len in 0usize..1480, tos in any::<u8>(), ident in any::<u16>(), df in any::<bool>(), ttl in any::<u8>()
        ) {
            let r = Repr { src: src.into(), dst: dst.into(), protocol: proto.into(), payload_len: len,
                           tos, ident, dont_frag: df, ttl };
            let mut b = vec![0u8; 20 + len];
            r.emit(&mut b);
            let p = Packet::new_checked(&b[..]).unwrap();
            prop_assert!(p.verify_checksum());
            prop_assert_eq!(Repr::parse(&p), r);
            // etherparse is the independent reading.
            let (h, _) = etherparse::Ipv4Header::from_slice(&b).unwrap();
            prop_assert_eq!(h.source, src);
            prop_assert_eq!(h.destination, dst);
            prop_assert_eq!(h.protocol.0, proto);
            prop_assert_eq!(h.time_to_live, ttl);
            prop_assert_eq!(h.identification, ident);
            prop_assert_eq!(h.dont_fragment, df);
            prop_assert_eq!(h.header_checksum, h.calc_header_checksum());
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let _ = (p.payload(), p.options(), p.src(), p.frag_offset(), p.verify_checksum());
            }
        }
    }
}
