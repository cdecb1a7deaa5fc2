//! A hash of the inner flow, for the outer UDP/TCP source port (entropy for
//! RSS and ECMP: RFC 7348 § 5, RFC 8926 § 3.3) and for spreading flows over
//! threads.
//!
//! The hash covers what identifies a flow: MAC addresses, then (skipping
//! VLAN tags) IP addresses, protocol and L4 ports, the ports only on
//! unfragmented or first-fragment packets. It is the same for every packet
//! of a flow, which keeps a flow on one path and one thread (no reordering).

use crate::{be16, ethernet, vlan};

const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// One step per 64-bit word (rotate, xor, multiply: FxHash's step), with a
/// single avalanche at the end; enough for entropy, not a defence against
/// chosen flows.
#[inline(always)]
fn step(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(K)
}

#[inline(always)]
fn finish(mut z: u64) -> u32 {
    // SplitMix64's finalizer, so every input bit reaches the high bits that
    // `source_port` uses.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

#[inline(always)]
fn word(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = b.len().min(8);
    w[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(w)
}

/// Hash an Ethernet frame's flow. Never fails: a frame too short or of an
/// unknown type hashes on whatever fields it has. IP frames hash on the
/// 5-tuple (as the kernel's skb hash does), others on MACs and EtherType.
#[inline]
pub fn hash_frame(frame: &[u8]) -> u32 {
    if frame.len() < ethernet::HEADER_LEN {
        return finish(step(0, word(frame)));
    }
    let mut h = 0;
    let mut et = be16(frame, 12);
    let mut at = ethernet::HEADER_LEN;
    while (et == 0x8100 || et == 0x88a8) && frame.len() >= at + vlan::TAG_LEN {
        h = step(h, (be16(frame, at) & 0x0fff) as u64);
        et = be16(frame, at + 2);
        at += vlan::TAG_LEN;
    }
    match hash_l3(h, et, &frame[at..]) {
        Some(h) => finish(h),
        None => finish(step(
            step(step(h, word(&frame[..8])), word(&frame[8..12])),
            et as u64,
        )),
    }
}

/// Hash an L3 packet of EtherType `et` onto the running hash `h`; `None` if
/// it is not IPv4/IPv6 or too short to be.
#[inline]
pub fn hash_l3(mut h: u64, et: u16, ip: &[u8]) -> Option<u64> {
    let (proto, l4) = match et {
        0x0800 if ip.len() >= 20 => {
            h = step(h, word(&ip[12..20]));
            let ihl = ((ip[0] & 0x0f) as usize) * 4;
            let frag = be16(ip, 6) & 0x1fff;
            let l4 = if frag == 0 && ip.len() >= ihl {
                &ip[ihl..]
            } else {
                &[][..]
            };
            (ip[9], l4)
        }
        0x86dd if ip.len() >= 40 => {
            for i in 0..4 {
                h = step(h, word(&ip[8 + 8 * i..16 + 8 * i]));
            }
            (ip[6], &ip[40..])
        }
        _ => return None,
    };
    let ports = if matches!(proto, 6 | 17 | 132) && l4.len() >= 4 {
        word(&l4[..4])
    } else {
        0
    };
    Some(step(h, ports ^ ((proto as u64) << 32)))
}

/// The outer source port for a flow hash: within `[min, max]`; RFC 7348
/// § 5 and RFC 8926 § 3.3 recommend the dynamic range 49152-65535.
#[inline]
pub fn source_port(hash: u32, min: u16, max: u16) -> u16 {
    let span = (max.saturating_sub(min)) as u32 + 1;
    min + (((hash as u64 * span as u64) >> 32) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(sport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12] = 0x08;
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f
    }

    #[test]
    fn same_flow_same_hash_other_flow_other_hash() {
        assert_eq!(hash_frame(&frame(1000)), hash_frame(&frame(1000)));
        let distinct: std::collections::HashSet<_> = (0..1000u16)
            .map(|p| source_port(hash_frame(&frame(p)), 49152, 65535))
            .collect();
        // 1000 flows over 16384 ports: expect ~970 distinct; a broken hash gives few.
        assert!(distinct.len() > 900, "{}", distinct.len());
        assert!(distinct.iter().all(|&p| p >= 49152));
    }

    #[test]
    fn never_panics_on_short_frames() {
        for n in 0..60 {
            let f = frame(1);
            hash_frame(&f[..n.min(f.len())]);
        }
    }
}
