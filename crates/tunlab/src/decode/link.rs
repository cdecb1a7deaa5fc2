//! The link layers a capture may begin with besides plain Ethernet:
//! Ethernet with its FCS kept, Linux cooked captures (v1 and v2: what
//! `tcpdump -i any` writes), raw IP and BSD null/loopback.

use super::{ethertype_note, finish, hex, DecodeAs, Frame, Layer, Walk};
use crate::capture::{Link, Record};
use tunlab_wire::ethernet::EtherType;

/// Decode one captured frame by its file's link type.
pub fn decode_record(r: &Record<'_>, ports: &DecodeAs) -> Frame {
    let mut w = Walk {
        frame: r.data,
        layers: Vec::new(),
        ports,
    };
    let mut fcs = None;
    let step = match r.link {
        Link::Ethernet { fcs: n } => {
            // A file that does not say its frames keep their FCS (pcap's
            // FCS bits unset, as NIC drivers' captures often are) may
            // still hold one: four last bytes that are the CRC-32 of the
            // rest are one (a chance of 2^-32 otherwise).
            let n = if n == 0 && ends_in_fcs(r.data) { 4 } else { n };
            if n > 0 && r.data.len() >= 14 + n {
                let (frame, kept) = r.data.split_at(r.data.len() - n);
                w.frame = frame;
                fcs = Some(fcs_layer(frame, kept));
            }
            w.ethernet(0).map_err(|e| e.to_string())
        }
        Link::LinuxSll => w.sll(),
        Link::LinuxSll2 => w.sll2(),
        Link::RawIp => w.raw_ip(0),
        Link::Loopback => w.loopback(),
    };
    let mut layers = w.layers;
    layers.extend(fcs);
    let mut f = finish(r.number, r.data.len(), r.original, layers, step.err());
    f.capture_notes = r.odd.to_vec();
    f
}

/// Whether the last four bytes of `data` are the CRC-32 of the rest.
fn ends_in_fcs(data: &[u8]) -> bool {
    data.len() >= 18 && {
        let (frame, kept) = data.split_at(data.len() - 4);
        <[u8; 4]>::try_from(kept).is_ok_and(|b| u32::from_le_bytes(b) == crc32fast::hash(frame))
    }
}

/// The frame check sequence kept after `frame`, checked where it is
/// Ethernet's CRC-32 (4 bytes, least significant byte first).
fn fcs_layer(frame: &[u8], kept: &[u8]) -> Layer {
    let mut l = Layer::new("FCS", frame.len());
    if let Ok(b) = <[u8; 4]>::try_from(kept) {
        let got = u32::from_le_bytes(b);
        let want = crc32fast::hash(frame);
        l.text("fcs", format!("0x{got:08x}"));
        if got == want {
            l.note("correct");
        } else {
            l.note("incorrect");
            l.warnings.push(format!(
                "fcs 0x{got:08x} is incorrect (0x{want:08x} expected)"
            ));
        }
    } else {
        l.text("fcs", hex(kept))
            .note(format!("{} bytes, not checked", kept.len()));
    }
    l
}

/// "needs N bytes, only M available" for a link header.
fn short(layer: &str, needs: usize, has: usize) -> String {
    format!("{layer}: header: needs {needs} bytes, only {has} available (at byte offset 0)")
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

impl Walk<'_> {
    /// Linux cooked v1: packet type, ARPHRD type, address length, eight
    /// bytes of address, protocol; 16 bytes.
    fn sll(&mut self) -> Result<(), String> {
        let b = self.frame;
        if b.len() < 16 {
            return Err(short("linux sll", 16, b.len()));
        }
        let halen = (be16(b, 4) as usize).min(8);
        let proto = EtherType::from(be16(b, 14));
        let mut l = Layer::new("Linux SLL", 0);
        l.int("pkttype", be16(b, 0))
            .note(pkttype_note(be16(b, 0)))
            .int("hatype", be16(b, 2))
            .int("halen", be16(b, 4))
            .text("src", hex(&b[6..6 + halen]))
            .int("proto", u16::from(proto))
            .note(ethertype_note(proto));
        self.layers.push(l);
        self.after_ethertype(proto, 16).map_err(|e| e.to_string())
    }

    /// Linux cooked v2: protocol, reserved, interface index, ARPHRD type,
    /// packet type, address length, eight bytes of address; 20 bytes.
    fn sll2(&mut self) -> Result<(), String> {
        let b = self.frame;
        if b.len() < 20 {
            return Err(short("linux sll2", 20, b.len()));
        }
        let proto = EtherType::from(be16(b, 0));
        let halen = (b[11] as usize).min(8);
        let mut l = Layer::new("Linux SLL2", 0);
        l.int("proto", u16::from(proto))
            .note(ethertype_note(proto))
            .int("ifindex", u32::from_be_bytes([b[4], b[5], b[6], b[7]]))
            .int("hatype", be16(b, 8))
            .int("pkttype", b[10])
            .note(pkttype_note(b[10].into()))
            .int("halen", b[11])
            .text("src", hex(&b[12..12 + halen]));
        self.layers.push(l);
        self.after_ethertype(proto, 20).map_err(|e| e.to_string())
    }

    /// An IP packet with no link header: its version says which.
    fn raw_ip(&mut self, at: usize) -> Result<(), String> {
        let Some(&first) = self.frame.get(at) else {
            return Err(short("raw ip", 1, 0));
        };
        match first >> 4 {
            4 => self.ipv4(at),
            6 => self.ipv6(at),
            v => {
                return Err(format!(
                    "raw ip: version: {v} is neither 4 nor 6 (at byte offset {at})"
                ))
            }
        }
        .map_err(|e| e.to_string())
    }

    /// BSD null/loopback: the address family in 4 bytes, in the byte
    /// order of the host that wrote it (read both ways: a family is small).
    fn loopback(&mut self) -> Result<(), String> {
        let b = self.frame;
        let Some(family) = b.get(..4) else {
            return Err(short("loopback", 4, b.len()));
        };
        let le = u32::from_le_bytes([family[0], family[1], family[2], family[3]]);
        let family = if le < 0x1_0000 { le } else { le.swap_bytes() };
        let mut l = Layer::new("Loopback", 0);
        l.int("family", family).note(match family {
            2 => "IPv4",
            10 | 24 | 28 | 30 => "IPv6",
            _ => "",
        });
        self.layers.push(l);
        match family {
            2 | 10 | 24 | 28 | 30 => self.raw_ip(4),
            _ => {
                self.raw(4, b.len());
                Ok(())
            }
        }
    }
}

/// Linux's packet types (`PACKET_HOST` and the rest).
fn pkttype_note(t: u16) -> &'static str {
    match t {
        0 => "to us",
        1 => "broadcast",
        2 => "multicast",
        3 => "to another host",
        4 => "sent by us",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(f: &Frame) -> Vec<&str> {
        f.layers.iter().map(|l| l.name).collect()
    }

    fn decode(link: Link, data: &[u8]) -> Frame {
        let r = Record {
            number: 1,
            data,
            original: data.len(),
            link,
            odd: &[],
        };
        decode_record(&r, &DecodeAs::default())
    }

    /// An IPv4 header (20 bytes, no payload) from 10.0.0.1 to 10.0.0.2,
    /// its checksum right.
    fn ipv4() -> Vec<u8> {
        let mut h = vec![
            0x45, 0, 0, 20, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let sum: u32 = h
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
        h[10..12].copy_from_slice(&sum.to_be_bytes());
        h
    }

    #[test]
    fn each_link_header_leads_to_the_ip_packet() {
        let mut sll = vec![0, 4, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
        sll.extend(ipv4());
        let f = decode(Link::LinuxSll, &sll);
        assert_eq!(names(&f), ["Linux SLL", "IP"], "{:?}", f.error);
        let mut sll2 = vec![
            0x08, 0x00, 0, 0, 0, 0, 0, 7, 0, 1, 4, 6, 2, 0, 0, 0, 0, 1, 0, 0,
        ];
        sll2.extend(ipv4());
        assert_eq!(names(&decode(Link::LinuxSll2, &sll2)), ["Linux SLL2", "IP"]);
        assert_eq!(names(&decode(Link::RawIp, &ipv4())), ["IP"]);
        for family in [[2, 0, 0, 0], [0, 0, 0, 2]] {
            let mut null = family.to_vec();
            null.extend(ipv4());
            assert_eq!(names(&decode(Link::Loopback, &null)), ["Loopback", "IP"]);
        }
    }

    #[test]
    fn an_fcs_is_split_off_and_checked() {
        let mut frame = vec![0xff; 12];
        frame.extend([0x08, 0x00]);
        frame.extend(ipv4());
        let mut with = frame.clone();
        with.extend(crc32fast::hash(&frame).to_le_bytes());
        let f = decode(Link::Ethernet { fcs: 4 }, &with);
        assert_eq!(names(&f), ["Ethernet", "IP", "FCS"]);
        // Found by its CRC where the file does not say.
        let f = decode(Link::Ethernet { fcs: 0 }, &with);
        assert_eq!(names(&f), ["Ethernet", "IP", "FCS"]);
        let fcs = f.layers.last().unwrap();
        assert!(fcs.warnings.is_empty(), "{:?}", fcs.warnings);
        let last = with.len() - 1;
        with[last] ^= 1;
        let f = decode(Link::Ethernet { fcs: 4 }, &with);
        assert!(f.layers.last().unwrap().warnings[0].contains("is incorrect"));
    }

    #[test]
    fn a_jumbo_length_shorter_than_its_own_header_is_no_panic() {
        // IPv6, payload length 0, next header hop-by-hop; the jumbo option
        // says 2 bytes, less than the 8-byte option header itself.
        let mut p = vec![0x60, 0, 0, 0, 0, 0, 0, 64];
        p.extend([0u8; 32]);
        p.extend([6, 0, 0xc2, 4, 0, 0, 0, 2]);
        p.extend([0u8; 20]);
        let f = decode(Link::RawIp, &p);
        assert_eq!(names(&f)[..2], ["IPv6", "IPv6 Hop-by-Hop"]);
    }

    #[test]
    fn udp_of_length_0_in_a_jumbogram_takes_the_jumbo_length() -> Result<(), &'static str> {
        // IPv6 with a jumbo payload of 8 (hop-by-hop) + 8 (UDP) + 4 bytes,
        // UDP length 0 and no checksum (RFC 2675, section 4).
        let jumbo = |len: u8| {
            let mut p = vec![0x60, 0, 0, 0, 0, 0, 0, 64];
            p.extend([0u8; 32]);
            p.extend([17, 0, 0xc2, 4, 0, 0, 0, len]);
            p.extend([0x9c, 0x40, 0, 9, 0, 0, 0, 0, 1, 2, 3, 4]);
            p
        };
        let f = decode(Link::RawIp, &jumbo(20));
        assert_eq!(
            names(&f),
            ["IPv6", "IPv6 Hop-by-Hop", "UDP", "Raw"],
            "{:?}",
            f.error
        );
        let udp = &f.layers[2].fields;
        let len = udp.iter().find(|x| x.name == "len").ok_or("no UDP len")?;
        assert_eq!(
            len.note.as_deref(),
            Some("12 bytes, the IP layer's (RFC 2675)")
        );
        // Length 0 outside a jumbogram is still an error.
        let mut plain = jumbo(20);
        plain[6] = 17;
        plain[5] = 12;
        plain.drain(40..48);
        let error = decode(Link::RawIp, &plain).error;
        assert!(
            error.as_deref().is_some_and(|e| e.contains("udp: length")),
            "{error:?}"
        );
        Ok(())
    }

    #[test]
    fn short_or_strange_link_headers_are_errors_that_say_so() {
        let e = |link, data: &[u8]| decode(link, data).error.unwrap_or_default();
        assert!(
            e(Link::LinuxSll, &[0; 10]).starts_with("linux sll: header: needs 16 bytes, only 10")
        );
        assert!(e(Link::LinuxSll2, &[0; 3]).contains("needs 20 bytes"));
        assert!(e(Link::RawIp, &[0x50, 0]).contains("version: 5 is neither 4 nor 6"));
        assert!(e(Link::Loopback, &[2]).contains("needs 4 bytes"));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_under_any_link_decode_without_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..128)) {
            for link in [Link::Ethernet { fcs: 4 }, Link::LinuxSll, Link::LinuxSll2, Link::RawIp, Link::Loopback] {
                let f = decode(link, &data);
                let mut s = String::new();
                super::super::render_text(&f, &mut s);
            }
        }
    }
}
