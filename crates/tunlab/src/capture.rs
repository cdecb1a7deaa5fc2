//! Reading captures: pcap and pcapng through the `pcap-file` crate.

use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::DataLink;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

/// Why a capture could not be read to its end.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("cannot open: {0}")]
    Open(#[from] std::io::Error),
    #[error("not a pcap or pcapng file (magic number {0:02x?})")]
    NotCapture([u8; 4]),
    #[error("link type {0:?} is not one tunlab decodes (Ethernet, Linux cooked v1 and v2, raw IP, null/loopback)")]
    LinkType(DataLink),
    #[error("damaged after frame {after}: {reason}")]
    Damaged { after: usize, reason: String },
}

/// What a capture's frames begin with (its link type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Ethernet; `fcs`: bytes of frame check sequence kept at the end of
    /// each frame, when the file says (pcap's FCS-length bits).
    Ethernet { fcs: usize },
    /// Linux cooked capture, v1 (`tcpdump -i any` before libpcap 1.10).
    LinuxSll,
    /// Linux cooked capture, v2.
    LinuxSll2,
    /// An IPv4 or IPv6 packet, no link header.
    RawIp,
    /// BSD loopback: a 4-byte address family, in the writer's byte order
    /// (`NULL`) or in network order (`LOOP`).
    Loopback,
}

impl Link {
    /// The link of a pcap header's link-type field (its low 16 bits; the
    /// top ones may say how long an FCS each frame keeps), or of a pcapng
    /// interface's link type.
    pub fn of(raw: u32) -> Option<Link> {
        // libpcap's LT_FCS_LENGTH_PRESENT and LT_FCS_LENGTH: a count of
        // 16-bit words.
        let fcs = if raw & 0x0400_0000 != 0 {
            ((raw >> 28) & 0xf) as usize * 2
        } else {
            0
        };
        Some(match DataLink::from(raw & 0xffff) {
            DataLink::ETHERNET => Link::Ethernet { fcs },
            DataLink::LINUX_SLL => Link::LinuxSll,
            DataLink::LINUX_SLL2 => Link::LinuxSll2,
            DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => Link::RawIp,
            DataLink::NULL | DataLink::LOOP => Link::Loopback,
            _ => return None,
        })
    }
}

/// One captured frame, as the file holds it.
#[derive(Debug)]
pub struct Record<'a> {
    /// From 1.
    pub number: usize,
    pub data: &'a [u8],
    /// Its length on the wire.
    pub original: usize,
    pub link: Link,
    /// What was unusual in the record's header.
    pub odd: &'a [String],
}

/// Call `f` for every frame, numbered from 1. Record headers are read
/// liberally, as tshark reads them (a captured length over the original
/// length or the file's snap length is trusted; the record says what was
/// odd). Frames read before damage is found are still delivered.
pub fn for_each_frame(path: &Path, mut f: impl FnMut(&Record<'_>)) -> Result<(), CaptureError> {
    let mut file = File::open(path)?;
    let mut magic = [0u8; 4];
    file.read_exact(&mut magic)?;
    drop(file);
    let file = BufReader::new(File::open(path)?);
    let damaged = |after: usize, e: pcap_file::PcapError| CaptureError::Damaged {
        after,
        reason: e.to_string(),
    };
    let mut n = 0;
    match magic {
        [0xd4, 0xc3, 0xb2, 0xa1]
        | [0xa1, 0xb2, 0xc3, 0xd4]
        | [0x4d, 0x3c, 0xb2, 0xa1]
        | [0xa1, 0xb2, 0x3c, 0x4d] => {
            let mut r = PcapReader::new(file).map_err(|e| damaged(0, e))?;
            let header = r.header();
            let link = Link::of(u32::from(header.datalink))
                .ok_or(CaptureError::LinkType(header.datalink))?;
            let mut odd = Vec::new();
            while let Some(p) = r.next_raw_packet() {
                let p = p.map_err(|e| damaged(n, e))?;
                n += 1;
                let original = record_oddities(p.incl_len, p.orig_len, header.snaplen, &mut odd);
                f(&Record {
                    number: n,
                    data: &p.data,
                    original,
                    link,
                    odd: &odd,
                });
            }
        }
        [0x0a, 0x0d, 0x0d, 0x0a] => {
            let mut r = PcapNgReader::new(file).map_err(|e| damaged(0, e))?;
            let mut links: Vec<DataLink> = Vec::new();
            while let Some(b) = r.next_block() {
                let b = b.map_err(|e| damaged(n, e))?;
                let (iface, data, orig) = match b {
                    Block::InterfaceDescription(i) => {
                        links.push(i.linktype);
                        continue;
                    }
                    Block::EnhancedPacket(p) => (
                        p.interface_id as usize,
                        p.data.into_owned(),
                        p.original_len as usize,
                    ),
                    Block::SimplePacket(p) => (0, p.data.into_owned(), p.original_len as usize),
                    _ => continue,
                };
                let link = match links.get(iface) {
                    Some(&l) => Link::of(u32::from(l)).ok_or(CaptureError::LinkType(l))?,
                    None => {
                        return Err(CaptureError::Damaged {
                            after: n,
                            reason: format!(
                                "packet on interface {iface}, which was never described"
                            ),
                        })
                    }
                };
                n += 1;
                f(&Record {
                    number: n,
                    data: &data,
                    original: orig,
                    link,
                    odd: &[],
                });
            }
        }
        other => return Err(CaptureError::NotCapture(other)),
    }
    Ok(())
}

/// What is odd in a pcap record's lengths, into `odd` (cleared first), and
/// the original length to report: tshark trusts the captured length, so a
/// record that claims to hold more than was on the wire is taken whole.
fn record_oddities(incl: u32, orig: u32, snaplen: u32, odd: &mut Vec<String>) -> usize {
    odd.clear();
    if incl > orig {
        odd.push(format!(
            "the record holds {incl} bytes of a frame it says was {orig} bytes on the wire: all {incl} are decoded"
        ));
    }
    if incl > snaplen {
        odd.push(format!(
            "the record holds {incl} bytes, over the file's snap length of {snaplen}"
        ));
    }
    incl.max(orig) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A little-endian pcap file: its header (Ethernet, `snaplen`) and
    /// records of (captured length field, original length field, data).
    fn pcap(snaplen: u32, records: &[(u32, u32, Vec<u8>)]) -> Vec<u8> {
        let mut b = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
        b.extend_from_slice(&2u16.to_le_bytes());
        b.extend_from_slice(&4u16.to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&snaplen.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        for (incl, orig, data) in records {
            b.extend_from_slice(&[0; 8]);
            b.extend_from_slice(&incl.to_le_bytes());
            b.extend_from_slice(&orig.to_le_bytes());
            b.extend_from_slice(data);
        }
        b
    }

    #[test]
    fn odd_record_lengths_are_read_and_noted_not_fatal() {
        let frame = vec![0xabu8; 60];
        let file = pcap(
            0,
            &[
                (60, 40, frame.clone()),
                (60, 60, frame.clone()),
                (60, 1500, frame),
            ],
        );
        let path = std::env::temp_dir().join(format!("tunlab-odd-{}.pcap", std::process::id()));
        std::fs::write(&path, file).unwrap();
        let mut seen = Vec::new();
        let r = for_each_frame(&path, |r| {
            seen.push((r.number, r.data.len(), r.original, r.odd.to_vec()));
        });
        let _ = std::fs::remove_file(&path);
        r.unwrap();
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert_eq!((seen[0].1, seen[0].2), (60, 60));
        assert!(
            seen[0].3[0].contains("holds 60 bytes of a frame it says was 40"),
            "{seen:?}"
        );
        assert!(
            seen[1].3[0].contains("over the file's snap length of 0"),
            "{seen:?}"
        );
        assert_eq!(seen[2].2, 1500);
    }

    #[test]
    fn a_record_cut_short_by_the_end_of_the_file_is_damage() {
        let file = pcap(65535, &[(60, 60, vec![0; 60]), (60, 60, vec![0; 10])]);
        let path = std::env::temp_dir().join(format!("tunlab-cut-{}.pcap", std::process::id()));
        std::fs::write(&path, file).unwrap();
        let mut n = 0;
        let r = for_each_frame(&path, |_| n += 1);
        let _ = std::fs::remove_file(&path);
        assert_eq!(n, 1);
        assert!(
            matches!(r, Err(CaptureError::Damaged { after: 1, .. })),
            "{r:?}"
        );
    }
}
