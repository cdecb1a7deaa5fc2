//! The Internet checksum (RFC 1071) with incremental update (RFC 1624).
//!
//! Sums are kept as a folded `u32` accumulator so that partial sums over
//! pseudo-headers, headers and payloads can be added before the final fold.

/// Add `data` to the one's-complement accumulator `acc`.
///
/// The one's-complement sum does not depend on byte order (RFC 1071
/// § 2(B)): the bulk is summed as little-endian 32-bit words into eight
/// independent 64-bit lanes (no carry chain, so the compiler vectorises
/// it), and the folded result is byte-swapped back into network order. A
/// lane takes 2^32 words before it could overflow: 128 GiB per call.
#[inline]
pub fn sum(acc: u64, data: &[u8]) -> u64 {
    let mut lanes = [0u64; 8];
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        for (k, lane) in lanes.iter_mut().enumerate() {
            let w = [b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3]];
            *lane += u32::from_le_bytes(w) as u64;
        }
    }
    let rest = blocks.remainder();
    let mut words = rest.chunks_exact(4);
    let mut le = lanes.iter().fold(0u64, |a, &l| add64(a, l));
    for w in &mut words {
        le = add64(le, u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as u64);
    }
    let mut acc = add64(acc, fold(le).swap_bytes() as u64);
    // At most three bytes are left, starting at an even offset.
    let tail = words.remainder();
    if tail.len() >= 2 {
        acc = add64(acc, u16::from_be_bytes([tail[0], tail[1]]) as u64);
    }
    if tail.len() % 2 == 1 {
        acc = add64(acc, (tail[tail.len() - 1] as u64) << 8);
    }
    acc
}

#[inline(always)]
fn add64(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    s + carry as u64
}

/// Fold the accumulator to 16 bits (not yet complemented).
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// The checksum field value for `data`: the complement of its folded sum.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(0, data))
}

/// Finish an accumulator into a checksum field value.
#[inline]
pub fn finish(acc: u64) -> u16 {
    !fold(acc)
}

/// Does `data` (checksum field included) verify?
#[inline]
pub fn verify(data: &[u8]) -> bool {
    fold(sum(0, data)) == 0xffff
}

/// The partial sum of the IPv4 pseudo-header (RFC 768, RFC 793 § 3.1).
#[inline]
pub fn pseudo_v4(src: [u8; 4], dst: [u8; 4], proto: u8, len: u16) -> u64 {
    let mut acc = sum(0, &src);
    acc = sum(acc, &dst);
    add64(acc, proto as u64 + len as u64)
}

/// The partial sum of the IPv6 pseudo-header (RFC 8200 § 8.1).
#[inline]
pub fn pseudo_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, len: u32) -> u64 {
    let mut acc = sum(0, &src);
    acc = sum(acc, &dst);
    add64(
        acc,
        next_header as u64 + (len >> 16) as u64 + (len & 0xffff) as u64,
    )
}

/// RFC 1624 eqn. 3: the new checksum after a 16-bit word changed from
/// `old` to `new`.
#[inline]
pub fn update16(check: u16, old: u16, new: u16) -> u16 {
    let acc = (!check as u64) + (!old as u64) + new as u64;
    !fold(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        for c in data.chunks(2) {
            let w = if c.len() == 2 {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                (c[0] as u16) << 8
            };
            acc += w as u32;
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        !(acc as u16)
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 § 3: the sum of 0001 f203 f4f5 f6f7 is ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(0, &data)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn ipv4_header_known_value() {
        // A header with its checksum (0xb861) filled in, from Wikipedia's
        // IPv4 checksum worked example.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert!(verify(&h));
        let mut z = h;
        z[10] = 0;
        z[11] = 0;
        assert_eq!(checksum(&z), 0xb861);
    }

    proptest! {
        #[test]
        fn matches_reference(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            prop_assert_eq!(checksum(&data), reference(&data));
        }

        #[test]
        fn matches_reference_on_long_and_extreme_data(
            len in 0usize..9000,
            fill in prop_oneof![Just(0u8), Just(0xffu8), any::<u8>()],
            seed in any::<u64>(),
            noise in any::<bool>(),
        ) {
            // Long runs of 0x00 or 0xff reach the sums' carry and zero
            // cases; a sprinkle of other bytes mixes them.
            let mut x = seed | 1;
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if noise && x % 7 == 0 { x as u8 } else { fill }
                })
                .collect();
            prop_assert_eq!(checksum(&data), reference(&data));
        }

        #[test]
        fn split_sums_add(data in proptest::collection::vec(any::<u8>(), 0..300), cut in 0usize..150) {
            // Splitting at an even offset must not change the result.
            let cut = (cut * 2).min(data.len() & !1);
            let acc = sum(sum(0, &data[..cut]), &data[cut..]);
            prop_assert_eq!(finish(acc), checksum(&data));
        }

        #[test]
        fn incremental_update(mut data in proptest::collection::vec(any::<u8>(), 2..64), w in any::<u16>()) {
            let len = data.len() & !1;
            let data = &mut data[..len];
            let c0 = checksum(data);
            let old = u16::from_be_bytes([data[0], data[1]]);
            data[..2].copy_from_slice(&w.to_be_bytes());
            let c1 = checksum(data);
            // One's-complement has two zeros; compare folded values.
            let inc = update16(c0, old, w);
            prop_assert!(inc == c1 || (inc == 0xffff && c1 == 0) || (inc == 0 && c1 == 0xffff));
        }
    }
}
