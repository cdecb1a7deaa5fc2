//! Geneve (RFC 8926), with option TLVs and OVN's logical-port option.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Ver|  Opt Len  |O|C|    Rsvd.  |          Protocol Type        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        Virtual Network Identifier (VNI)       |    Reserved   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Variable-Length Options                    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! One option (RFC 8926 § 3.5):
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          Option Class         |C|    Type     |R|R|R| Length  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |              Variable-Length Option Data (Length * 4)         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! `Opt Len` and an option's `Length` count 4-byte words, so the options
//! area holds at most 63 * 4 = 252 bytes and one option at most 31 * 4 = 124
//! bytes of data.

use crate::error::{need, Error, ErrorKind, Layer, Result};
use crate::ethernet::EtherType;
use crate::{be16, be32, put16, Vni};

pub const HEADER_LEN: usize = 8;
/// The largest options area (RFC 8926 § 3.4: 6-bit length in 4-byte words).
pub const MAX_OPTIONS_LEN: usize = 63 * 4;
/// The largest option data (5-bit length in 4-byte words).
pub const MAX_OPTION_DATA_LEN: usize = 31 * 4;
/// RFC 8926 § 3.3: the IANA-assigned destination port.
pub const UDP_PORT: u16 = 6081;

/// The option class of OVN (Open Virtual Networking).
pub const OVN_CLASS: u16 = 0x0102;
/// The option type OVN uses for logical ports; its high (critical) bit is set.
pub const OVN_TYPE: u8 = 0x80;

/// An option type: the high bit is the critical bit (RFC 8926 § 3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OptType(pub u8);

impl OptType {
    /// "If the receiving endpoint does not recognize this option and this bit
    /// is set, the packet MUST be dropped" (RFC 8926 § 3.5).
    #[inline]
    pub const fn critical(self) -> bool {
        self.0 & 0x80 != 0
    }
}

/// A zero-copy view of a Geneve header and its options.
#[derive(Debug, Clone)]
pub struct Packet<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks the fixed header, that the options area fits, and that the
    /// option TLVs exactly tile it. Afterwards no accessor panics and
    /// [`Packet::options`] yields only well-formed options.
    #[inline]
    pub fn new_checked(buf: T) -> Result<Packet<T>> {
        Self::new_checked_known(buf, |_, _| true)
    }

    /// [`Packet::new_checked`] and [`Packet::check_critical`] in one pass
    /// over the options, for the receive path: also fails with
    /// [`ErrorKind::UnknownCriticalOption`] on a critical option that is not
    /// `known(class, type)` (RFC 8926 § 3.5).
    #[inline]
    pub fn new_checked_known(buf: T, known: impl Fn(u16, OptType) -> bool) -> Result<Packet<T>> {
        let b = buf.as_ref();
        need(Layer::Geneve, "header", b, 0, HEADER_LEN)?;
        let opt_len = ((b[0] & 0x3f) as usize) * 4;
        need(Layer::Geneve, "options", b, HEADER_LEN, opt_len)?;
        let mut at = HEADER_LEN;
        let end = HEADER_LEN + opt_len;
        while at < end {
            if end - at < 4 {
                return Err(Error::truncated(
                    Layer::Geneve,
                    "option header",
                    at,
                    4,
                    end - at,
                ));
            }
            let data_len = ((b[at + 3] & 0x1f) as usize) * 4;
            if end - at - 4 < data_len {
                return Err(Error::truncated(
                    Layer::Geneve,
                    "option data",
                    at + 4,
                    data_len,
                    end - at - 4,
                ));
            }
            let class = be16(b, at);
            let typ = OptType(b[at + 2]);
            if typ.critical() && !known(class, typ) {
                return Err(Error::new(
                    Layer::Geneve,
                    at,
                    ErrorKind::UnknownCriticalOption { class, typ: typ.0 },
                ));
            }
            at += 4 + data_len;
        }
        Ok(Packet { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    /// The 2-bit version; RFC 8926 defines only 0.
    #[inline]
    pub fn version(&self) -> u8 {
        self.b()[0] >> 6
    }
    /// The options area length in bytes.
    #[inline]
    pub fn options_len(&self) -> usize {
        ((self.b()[0] & 0x3f) as usize) * 4
    }
    /// O: an OAM (control) packet, not tenant data.
    #[inline]
    pub fn oam(&self) -> bool {
        self.b()[1] & 0x80 != 0
    }
    /// C: one or more options have the critical bit set.
    #[inline]
    pub fn critical(&self) -> bool {
        self.b()[1] & 0x40 != 0
    }
    /// The six reserved bits after O and C.
    #[inline]
    pub fn reserved1(&self) -> u8 {
        self.b()[1] & 0x3f
    }
    #[inline]
    pub fn protocol(&self) -> EtherType {
        be16(self.b(), 2).into()
    }
    #[inline]
    pub fn vni(&self) -> Vni {
        Vni::from_masked(be32(self.b(), 4) >> 8)
    }
    #[inline]
    pub fn reserved2(&self) -> u8 {
        self.b()[7]
    }
    /// The raw options area.
    #[inline]
    pub fn options_bytes(&self) -> &[u8] {
        &self.b()[HEADER_LEN..HEADER_LEN + self.options_len()]
    }
    #[inline]
    pub fn options(&self) -> Options<'_> {
        Options {
            rest: self.options_bytes(),
        }
    }
    /// Length of the header with its options.
    #[inline]
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options_len()
    }
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }

    /// RFC 8926 § 3.5: fail with [`ErrorKind::UnknownCriticalOption`] if any
    /// option with the critical bit set is not `known(class, type)`.
    /// Non-critical unknown options are skipped.
    #[inline]
    pub fn check_critical(&self, known: impl Fn(u16, OptType) -> bool) -> Result<()> {
        let mut at = HEADER_LEN;
        for o in self.options() {
            if o.opt_type().critical() && !known(o.class(), o.opt_type()) {
                return Err(Error::new(
                    Layer::Geneve,
                    at,
                    ErrorKind::UnknownCriticalOption {
                        class: o.class(),
                        typ: o.opt_type().0,
                    },
                ));
            }
            at += o.len();
        }
        Ok(())
    }

    /// OVN's logical ports, if the OVN option is present.
    #[inline]
    pub fn ovn(&self) -> Option<OvnPorts> {
        self.options()
            .find(|o| o.class() == OVN_CLASS && o.opt_type() == OptType(OVN_TYPE))
            .and_then(|o| OvnPorts::from_data(o.data()))
    }
}

/// One option TLV, borrowed from the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneveOption<'a> {
    bytes: &'a [u8],
}

impl<'a> GeneveOption<'a> {
    #[inline]
    pub fn class(&self) -> u16 {
        be16(self.bytes, 0)
    }
    #[inline]
    pub fn opt_type(&self) -> OptType {
        OptType(self.bytes[2])
    }
    /// The three reserved bits before the length.
    #[inline]
    pub fn reserved(&self) -> u8 {
        self.bytes[3] >> 5
    }
    /// The data length in 4-byte words, as on the wire.
    #[inline]
    pub fn len_words(&self) -> u8 {
        self.bytes[3] & 0x1f
    }
    #[inline]
    pub fn data(&self) -> &'a [u8] {
        &self.bytes[4..]
    }
    /// Length of the whole TLV in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }
    /// The whole TLV as on the wire.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// An iterator over option TLVs. It never allocates; on an options area that
/// was not checked by [`Packet::new_checked`] it stops at the first option
/// that does not fit.
#[derive(Debug, Clone)]
pub struct Options<'a> {
    rest: &'a [u8],
}

impl<'a> Options<'a> {
    /// Iterate over a raw options area (as kept in tunnel metadata).
    #[inline]
    pub fn new(area: &'a [u8]) -> Options<'a> {
        Options { rest: area }
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = GeneveOption<'a>;
    fn next(&mut self) -> Option<GeneveOption<'a>> {
        if self.rest.len() < 4 {
            return None;
        }
        let n = 4 + ((self.rest[3] & 0x1f) as usize) * 4;
        if n > self.rest.len() {
            self.rest = &[];
            return None;
        }
        let (o, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(GeneveOption { bytes: o })
    }
}

/// An option as plain values, for building.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionRepr<'a> {
    pub class: u16,
    pub opt_type: OptType,
    /// Option data; a multiple of 4 bytes, at most 124.
    pub data: &'a [u8],
}

impl OptionRepr<'_> {
    #[inline]
    pub fn buffer_len(&self) -> usize {
        4 + self.data.len()
    }

    /// Write the TLV into `b`; the data must be a multiple of 4 bytes and at
    /// most 124 bytes long.
    #[inline]
    pub fn emit(&self, b: &mut [u8]) -> Result<usize> {
        if !self.data.len().is_multiple_of(4) || self.data.len() > MAX_OPTION_DATA_LEN {
            return Err(Error::invalid(
                Layer::Geneve,
                "option length",
                3,
                "option data must be a multiple of 4 bytes, at most 124",
            ));
        }
        let n = self.buffer_len();
        if b.len() < n {
            return Err(Error::new(
                Layer::Geneve,
                0,
                ErrorKind::NoRoom {
                    field: "options",
                    needed: n,
                    available: b.len(),
                },
            ));
        }
        put16(b, 0, self.class);
        b[2] = self.opt_type.0;
        b[3] = (self.data.len() / 4) as u8;
        b[4..n].copy_from_slice(self.data);
        Ok(n)
    }
}

/// A built options area, up to 252 bytes, kept inline so tunnel metadata and
/// header templates need no allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct OptionsBuf {
    bytes: [u8; MAX_OPTIONS_LEN],
    len: u8,
}

impl Default for OptionsBuf {
    fn default() -> OptionsBuf {
        OptionsBuf {
            bytes: [0; MAX_OPTIONS_LEN],
            len: 0,
        }
    }
}

impl std::fmt::Debug for OptionsBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl OptionsBuf {
    #[inline]
    pub fn new() -> OptionsBuf {
        OptionsBuf::default()
    }

    /// Copy a raw options area (already checked to tile into TLVs).
    #[inline]
    pub fn from_area(area: &[u8]) -> Result<OptionsBuf> {
        let mut o = OptionsBuf::default();
        o.set(area)?;
        Ok(o)
    }

    /// Replace the contents with a raw options area, copying only its bytes
    /// (the per-packet path: no zeroing of the whole 252-byte array).
    #[inline]
    pub fn set(&mut self, area: &[u8]) -> Result<()> {
        if area.len() > MAX_OPTIONS_LEN || !area.len().is_multiple_of(4) {
            return Err(Error::invalid(
                Layer::Geneve,
                "options",
                0,
                "options area must be a multiple of 4 bytes, at most 252",
            ));
        }
        // Word by word: options are a few words long, and this avoids a
        // library memcpy call per packet.
        for (d, s) in self.bytes.chunks_exact_mut(4).zip(area.chunks_exact(4)) {
            d.copy_from_slice(s);
        }
        self.len = area.len() as u8;
        Ok(())
    }

    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Append one option; fails if it does not fit the 252-byte area.
    #[inline]
    pub fn push(&mut self, opt: OptionRepr<'_>) -> Result<()> {
        let at = self.len as usize;
        let n = opt.emit(&mut self.bytes[at..])?;
        self.len += n as u8;
        Ok(())
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline]
    pub fn iter(&self) -> Options<'_> {
        Options::new(self.as_bytes())
    }
    /// Does any option have its critical bit set (the header's C bit)?
    #[inline]
    pub fn any_critical(&self) -> bool {
        self.iter().any(|o| o.opt_type().critical())
    }
}

/// OVN's logical ports (class 0x0102, type 0x80, 4 bytes of data): a reserved
/// bit, the 15-bit logical ingress port, then the 16-bit logical egress port
/// (ovn-architecture(7), "Tunnel Encapsulations").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OvnPorts {
    ingress: u16,
    pub egress: u16,
}

impl OvnPorts {
    pub const MAX_INGRESS: u16 = 0x7fff;

    /// `None` if `ingress` does not fit in 15 bits.
    #[inline]
    pub const fn new(ingress: u16, egress: u16) -> Option<OvnPorts> {
        if ingress <= Self::MAX_INGRESS {
            Some(OvnPorts { ingress, egress })
        } else {
            None
        }
    }
    #[inline]
    pub const fn ingress(&self) -> u16 {
        self.ingress
    }
    /// The 32-bit option value, as `tun_metadata0` carries it in OVS.
    #[inline]
    pub const fn to_u32(self) -> u32 {
        ((self.ingress as u32) << 16) | self.egress as u32
    }
    /// Decode the 32-bit value; the reserved top bit is ignored.
    #[inline]
    pub const fn from_u32(v: u32) -> OvnPorts {
        OvnPorts {
            ingress: ((v >> 16) & 0x7fff) as u16,
            egress: v as u16,
        }
    }
    /// Decode option data; `None` unless it is exactly 4 bytes.
    #[inline]
    pub fn from_data(d: &[u8]) -> Option<OvnPorts> {
        if d.len() != 4 {
            return None;
        }
        Some(OvnPorts::from_u32(be32(d, 0)))
    }
    #[inline]
    pub const fn data(self) -> [u8; 4] {
        self.to_u32().to_be_bytes()
    }
}

/// A Geneve header as plain values; the options are a raw TLV area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    pub version: u8,
    pub oam: bool,
    /// The C bit. When building through [`crate::tunnel`] it is set from the
    /// options; here it is written as given so that any value can be tested.
    pub critical: bool,
    pub reserved1: u8,
    pub protocol: EtherType,
    pub vni: Vni,
    pub reserved2: u8,
    pub options: &'a [u8],
}

impl<'a> Repr<'a> {
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &'a Packet<T>) -> Repr<'a> {
        Repr {
            version: p.version(),
            oam: p.oam(),
            critical: p.critical(),
            reserved1: p.reserved1(),
            protocol: p.protocol(),
            vni: p.vni(),
            reserved2: p.reserved2(),
            options: p.options_bytes(),
        }
    }

    #[inline]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    /// Write header and options into `b`. The options must be a multiple of 4
    /// bytes and at most 252; version and reserved values are masked to their
    /// field widths.
    #[inline]
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        let ol = self.options.len();
        if !ol.is_multiple_of(4) || ol > MAX_OPTIONS_LEN {
            return Err(Error::invalid(
                Layer::Geneve,
                "options",
                0,
                "options area must be a multiple of 4 bytes, at most 252",
            ));
        }
        need(Layer::Geneve, "header", b, 0, self.buffer_len())?;
        b[0] = ((self.version & 3) << 6) | (ol / 4) as u8;
        b[1] = ((self.oam as u8) << 7) | ((self.critical as u8) << 6) | (self.reserved1 & 0x3f);
        put16(b, 2, self.protocol.into());
        let w = (self.vni.get() << 8) | self.reserved2 as u32;
        b[4..8].copy_from_slice(&w.to_be_bytes());
        b[HEADER_LEN..HEADER_LEN + ol].copy_from_slice(self.options);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The Geneve header of the TRex article's packet: optionlen 2, TEB,
    /// VNI 6, OVN option with ingress 3, egress 2.
    const ARTICLE: [u8; 16] = [
        0x02, 0x00, 0x65, 0x58, 0x00, 0x00, 0x06, 0x00, 0x01, 0x02, 0x80, 0x01, 0x00, 0x03, 0x00,
        0x02,
    ];

    #[test]
    fn parse_article_header() {
        let p = Packet::new_checked(&ARTICLE[..]).unwrap();
        assert_eq!(p.version(), 0);
        assert_eq!(p.options_len(), 8);
        assert_eq!(p.protocol(), EtherType::TransEtherBridging);
        assert_eq!(p.vni().get(), 6);
        let o: Vec<_> = p.options().collect();
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].class(), OVN_CLASS);
        assert!(o[0].opt_type().critical());
        assert_eq!(p.ovn(), OvnPorts::new(3, 2));
    }

    #[test]
    fn emit_article_header() {
        let mut opts = OptionsBuf::new();
        opts.push(OptionRepr {
            class: OVN_CLASS,
            opt_type: OptType(OVN_TYPE),
            data: &OvnPorts::new(3, 2).unwrap().data(),
        })
        .unwrap();
        let r = Repr {
            version: 0,
            oam: false,
            critical: false,
            reserved1: 0,
            protocol: EtherType::TransEtherBridging,
            vni: Vni::new(6).unwrap(),
            reserved2: 0,
            options: opts.as_bytes(),
        };
        let mut b = [0xa5u8; 16];
        r.emit(&mut b).unwrap();
        assert_eq!(b, ARTICLE);
    }

    #[test]
    fn critical_options() {
        let p = Packet::new_checked(&ARTICLE[..]).unwrap();
        let e = p.check_critical(|_, _| false).unwrap_err();
        assert_eq!(
            e.kind,
            ErrorKind::UnknownCriticalOption {
                class: 0x0102,
                typ: 0x80
            }
        );
        assert_eq!(e.offset, 8);
        p.check_critical(|c, t| c == OVN_CLASS && t == OptType(OVN_TYPE))
            .unwrap();
        // A non-critical unknown option is skipped.
        let mut nc = ARTICLE;
        nc[10] = 0x05;
        Packet::new_checked(&nc[..])
            .unwrap()
            .check_critical(|_, _| false)
            .unwrap();
    }

    #[test]
    fn malformed_options_are_refused_with_offset() {
        // Option claims 2 words of data but the area holds 1.
        let mut b = ARTICLE;
        b[11] = 0x02;
        let e = Packet::new_checked(&b[..]).unwrap_err();
        assert_eq!((e.layer, e.offset), (Layer::Geneve, 12));
        assert!(e.to_string().contains("option data"), "{e}");
        // Options area longer than the packet.
        let mut b = ARTICLE;
        b[0] = 0x03;
        let e = Packet::new_checked(&b[..]).unwrap_err();
        assert!(
            e.to_string().contains("options: needs 12 bytes, only 8"),
            "{e}"
        );
    }

    #[test]
    fn option_limits() {
        let big = [0u8; 128];
        let mut o = OptionsBuf::new();
        assert!(o
            .push(OptionRepr {
                class: 1,
                opt_type: OptType(1),
                data: &big
            })
            .is_err());
        assert!(o
            .push(OptionRepr {
                class: 1,
                opt_type: OptType(1),
                data: &big[..3]
            })
            .is_err());
        // 124 + 4 = 128 fits; a second 128 does not fit in 252.
        o.push(OptionRepr {
            class: 1,
            opt_type: OptType(1),
            data: &big[..124],
        })
        .unwrap();
        o.push(OptionRepr {
            class: 1,
            opt_type: OptType(1),
            data: &big[..116],
        })
        .unwrap();
        assert_eq!(o.len(), 248);
        assert!(o
            .push(OptionRepr {
                class: 1,
                opt_type: OptType(1),
                data: &big[..4]
            })
            .is_err());
    }

    fn any_options() -> impl Strategy<Value = Vec<(u16, u8, Vec<u8>)>> {
        proptest::collection::vec(
            (
                any::<u16>(),
                any::<u8>(),
                (0usize..8).prop_flat_map(|w| proptest::collection::vec(any::<u8>(), w * 4)),
            ),
            0..4,
        )
    }

    proptest! {
        #[test]
        fn roundtrip_every_field(
            version in 0u8..4, oam in any::<bool>(), crit in any::<bool>(), r1 in 0u8..64,
            proto in any::<u16>(), vni in 0u32..=Vni::MAX, r2 in any::<u8>(), opts in any_options()
        ) {
            let mut ob = OptionsBuf::new();
            for (c, t, d) in &opts {
                ob.push(OptionRepr { class: *c, opt_type: OptType(*t), data: d }).unwrap();
            }
            let r = Repr { version, oam, critical: crit, reserved1: r1, protocol: proto.into(),
                           vni: Vni::new(vni).unwrap(), reserved2: r2, options: ob.as_bytes() };
            let mut b = vec![0xa5u8; r.buffer_len()];
            r.emit(&mut b).unwrap();
            let p = Packet::new_checked(&b[..]).unwrap();
            prop_assert_eq!(Repr::parse(&p), r);
            let parsed: Vec<_> = p.options().map(|o| (o.class(), o.opt_type().0, o.data().to_vec())).collect();
            prop_assert_eq!(parsed, opts);
        }

        #[test]
        fn ovn_value_roundtrip(i in 0u16..=0x7fff, e in any::<u16>()) {
            let o = OvnPorts::new(i, e).unwrap();
            prop_assert_eq!(OvnPorts::from_data(&o.data()), Some(o));
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let n: usize = p.options().map(|o| o.len()).sum();
                prop_assert_eq!(n, p.options_len());
                let _ = (p.payload(), p.ovn(), p.check_critical(|_, _| false));
            }
        }
    }
}
