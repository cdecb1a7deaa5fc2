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
    #[error("link type {0:?} is not Ethernet; tunlab decodes Ethernet captures only")]
    LinkType(DataLink),
    #[error("damaged after frame {after}: {reason}")]
    Damaged { after: usize, reason: String },
}

/// Call `f(number, data, original_len)` for every Ethernet frame, numbered
/// from 1. Frames read before damage is found are still delivered.
pub fn for_each_frame(
    path: &Path,
    mut f: impl FnMut(usize, &[u8], usize),
) -> Result<(), CaptureError> {
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
            let link = r.header().datalink;
            if link != DataLink::ETHERNET {
                return Err(CaptureError::LinkType(link));
            }
            while let Some(p) = r.next_packet() {
                let p = p.map_err(|e| damaged(n, e))?;
                n += 1;
                f(n, &p.data, p.orig_len as usize);
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
                match links.get(iface) {
                    Some(&DataLink::ETHERNET) => {}
                    Some(&other) => return Err(CaptureError::LinkType(other)),
                    None => {
                        return Err(CaptureError::Damaged {
                            after: n,
                            reason: format!(
                                "packet on interface {iface}, which was never described"
                            ),
                        })
                    }
                }
                n += 1;
                f(n, &data, orig);
            }
        }
        other => return Err(CaptureError::NotCapture(other)),
    }
    Ok(())
}
