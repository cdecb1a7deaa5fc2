/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Internet checksums the decapsulation verifies: an outer UDP datagram's
 * (RFC 768, RFC 8200 § 8.1) against its pseudo-header's sum. */
#ifndef TUNLAB_CHECKSUM_H
#define TUNLAB_CHECKSUM_H
#include "maps.h"

#define IPPROTO_UDP 17

static __always_inline __u32 fold(__s64 sum)
{
	__u64 s = (__u64)sum & 0xffffffffULL;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u32)s;
}

/*
 * Is the outer UDP checksum right? The datagram (at most 9216 bytes) is
 * summed in 512-byte pieces onto `seed`, the pseudo-header's sum (RFC 768,
 * RFC 8200 § 8.1). A checksum the kernel left partial (from a sender on
 * this machine) does not verify: such packets take the slow path, whose
 * socket trusts the kernel. A global function, so the verifier checks it
 * once rather than on every path that reaches it.
 */
__attribute__((noinline)) int tl_udp_csum_ok(struct __sk_buff *skb, __u32 l4, __u32 ulen,
					     __u32 seed)
{
	__u32 zero = 0;
	struct tl_scratch *sc = bpf_map_lookup_elem(&tl_scratch, &zero);
	if (!sc || !skb || ulen < 8 || ulen > 18 * TL_CSUM_CHUNK)
		return 0;
	__s64 sum = seed;
	for (int i = 0; i < 18; i++) {
		__u32 done = i * TL_CSUM_CHUNK;
		if (done >= ulen)
			break;
		__u32 n = ulen - done;
		if (n >= TL_CSUM_CHUNK) {
			if (bpf_skb_load_bytes(skb, l4 + done, sc->b, TL_CSUM_CHUNK))
				return 0;
			sum = bpf_csum_diff(NULL, 0, (__be32 *)sc->b, TL_CSUM_CHUNK, sum);
		} else {
			/* The last piece: whole 32-bit words, then the one to
			 * three bytes left, zero-padded. */
			__u32 words = n & (TL_CSUM_CHUNK - 4);
			if (words) {
				if (bpf_skb_load_bytes(skb, l4 + done, sc->b, words))
					return 0;
				sum = bpf_csum_diff(NULL, 0, (__be32 *)sc->b, words, sum);
			}
			__u32 rest = n & 3;
			if (rest) {
				__u8 tail[4] = {};
				if (bpf_skb_load_bytes(skb, l4 + done + words, tail, rest))
					return 0;
				sum = bpf_csum_diff(NULL, 0, (__be32 *)tail, 4, sum);
			}
		}
		if (sum < 0)
			return 0;
	}
	return fold(sum) == 0xffff;
}

/* The pseudo-header's sum for a UDP datagram of `ulen` bytes. */
static __always_inline __u32 udp_pseudo_sum(const __u8 *ip, int v6, __u32 ulen)
{
	__u8 ph[40] = {};
	__s64 sum;
	if (v6) {
		__builtin_memcpy(ph, ip + 8, 32);
		ph[34] = ulen >> 8;
		ph[35] = ulen & 0xff;
		ph[39] = IPPROTO_UDP;
		sum = bpf_csum_diff(NULL, 0, (__be32 *)ph, 40, 0);
	} else {
		__builtin_memcpy(ph, ip + 12, 8);
		ph[9] = IPPROTO_UDP;
		ph[10] = ulen >> 8;
		ph[11] = ulen & 0xff;
		sum = bpf_csum_diff(NULL, 0, (__be32 *)ph, 12, 0);
	}
	return sum < 0 ? 0 : fold(sum);
}

#endif
