/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * From a frame to its flow key, field for field as dp::extract does in
 * user space (crates/dp/src/extract.rs): the switch installs entries under
 * keys it extracted itself, so the two must agree or the fast path only
 * ever misses. tests in crates/ebpf check that they agree.
 */
#ifndef TUNLAB_KEY_H
#define TUNLAB_KEY_H
#include "stats.h"

static __always_inline __u64 mac48(const __u8 *b)
{
	return ((__u64)b[0] << 40) | ((__u64)b[1] << 32) | ((__u64)b[2] << 24) |
	       ((__u64)b[3] << 16) | ((__u64)b[4] << 8) | (__u64)b[5];
}

static __always_inline __u32 be32_at(const __u8 *b)
{
	return ((__u32)b[0] << 24) | ((__u32)b[1] << 16) | ((__u32)b[2] << 8) | b[3];
}

static __always_inline __u64 be64_at(const __u8 *b)
{
	return ((__u64)be32_at(b) << 32) | be32_at(b + 4);
}

#define TL_MAX_TAGS 4
/* Marks `accel` as present (a TCI of 0 is a tag too). */
#define TL_ACCEL 0x10000

/* What extraction learnt about where the frame's headers end. */
struct tl_frame {
	__u32 l4;	/* offset of the L4 header, 0 if none */
	__u32 proto;	/* its IP protocol */
};

/*
 * The frame at `off`, ending at `end`; `accel` is an outer VLAN tag the
 * kernel already took out of the data (skb->vlan_tci | TL_ACCEL), 0 for
 * none.
 * Returns 0, or -1 if the frame has more tags than the fast path walks
 * (such a frame is never cached).
 */
static __always_inline int extract_frame(struct __sk_buff *skb, __u32 off, __u32 end,
					 struct tl_key *k, __u32 accel, struct tl_frame *fr)
{
	__u8 eth[14];

	if (end < off + 14 || bpf_skb_load_bytes(skb, off, eth, 14))
		return 0;
	k->w[2] |= mac48(eth);
	k->w[1] |= mac48(eth + 6);
	__u32 et = ((__u32)eth[12] << 8) | eth[13];
	__u32 at = off + 14;
	int first = 1;
	if (accel & TL_ACCEL) {
		k->w[0] |= (__u64)((accel & 0xffff) | 0x1000) << 48;
		first = 0;
	}
	for (int i = 0; i < TL_MAX_TAGS; i++) {
		__u8 tag[4];
		if (et != ETH_P_8021Q && et != ETH_P_8021AD)
			break;
		if (end < at + 4 || bpf_skb_load_bytes(skb, at, tag, 4))
			break;
		if (first) {
			k->w[0] |= (__u64)((((__u32)tag[0] << 8) | tag[1]) | 0x1000) << 48;
			first = 0;
		}
		et = ((__u32)tag[2] << 8) | tag[3];
		at += 4;
	}
	if (et == ETH_P_8021Q || et == ETH_P_8021AD) {
		if (end >= at + 4)
			return -1;
	}
	k->w[0] |= (__u64)et << 32;

	__u32 proto = 0, l4 = 0;
	int has_l4 = 0;
	if (et == ETH_P_IP) {
		__u8 ip[20];
		if (end < at + 20 || bpf_skb_load_bytes(skb, at, ip, 20))
			return 0;
		k->w[3] |= (__u64)be32_at(ip + 12) | ((__u64)be32_at(ip + 16) << 32);
		proto = ip[9];
		k->w[1] |= ((__u64)proto << 48) | ((__u64)ip[1] << 56);
		__u32 ihl = (ip[0] & 0x0f) * 4;
		__u32 frag = (((__u32)ip[6] << 8) | ip[7]) & 0x1fff;
		if (!frag && end >= at + ihl) {
			l4 = at + ihl;
			has_l4 = 1;
		}
	} else if (et == ETH_P_IPV6) {
		__u8 ip6[40];
		if (end < at + 40 || bpf_skb_load_bytes(skb, at, ip6, 40))
			return 0;
		k->w[7] = be64_at(ip6 + 8);
		k->w[8] = be64_at(ip6 + 16);
		k->w[9] = be64_at(ip6 + 24);
		k->w[10] = be64_at(ip6 + 32);
		proto = ip6[6];
		__u32 tos = ((((__u32)ip6[0] << 8) | ip6[1]) >> 4) & 0xff;
		k->w[1] |= ((__u64)proto << 48) | ((__u64)tos << 56);
		l4 = at + 40;
		has_l4 = 1;
	} else if (et == ETH_P_ARP) {
		__u8 arp[28];
		if (end < at + 28 || bpf_skb_load_bytes(skb, at, arp, 28))
			return 0;
		/* OVS: nw_proto is the opcode, nw_src/nw_dst the IPs. */
		k->w[1] |= (__u64)arp[7] << 48;
		k->w[3] |= (__u64)be32_at(arp + 14) | ((__u64)be32_at(arp + 24) << 32);
		return 0;
	}
	if (!has_l4)
		return 0;
	fr->l4 = l4;
	fr->proto = proto;
	__u8 p[4];
	if ((proto == 6 || proto == 17 || proto == 132) && end >= l4 + 4) {
		if (bpf_skb_load_bytes(skb, l4, p, 4))
			return 0;
		k->w[2] |= (__u64)(((__u32)p[0] << 8) | p[1]) << 48;
		k->w[4] |= ((__u32)p[2] << 8) | p[3];
	} else if ((proto == 1 || proto == 58) && end >= l4 + 2) {
		/* OVS: ICMP type and code in tp_src and tp_dst. */
		if (bpf_skb_load_bytes(skb, l4, p, 2))
			return 0;
		k->w[2] |= (__u64)p[0] << 48;
		k->w[4] |= p[1];
	}
	return 0;
}

/* The entry for `k` under mask `id`, if one of generation `g` is cached
 * (an older one sets *stale). */
static __always_inline struct tl_flow *probe_mask(struct tl_key *k, __u32 id, __u64 g,
						  int *stale)
{
	struct tl_mask *m = bpf_map_lookup_elem(&tl_mask, &id);
	if (!m)
		return NULL;
	__u32 n = m->n;
	if (n == 0 || n > TL_CKEY_WORDS)
		return NULL;
	/* k is the per-CPU key buffer: 32 words, so any index modulo 32 is
	 * in it (idx < TL_KEY_WORDS always; past n, pm is 0). The cache key
	 * is packed into the buffer's spare words, past the flow key (the
	 * stack, with the mask search's callback on top, has no room for it,
	 * and another map lookup per packet would cost more). */
	__u64 *kw = (__u64 *)k;
	struct tl_ckey *ck = (struct tl_ckey *)(kw + TL_CKEY_AT);
#pragma unroll
	for (int i = 0; i < TL_CKEY_WORDS; i++)
		ck->w[i] = kw[m->idx[i] & (TL_KEYBUF_WORDS - 1)] & m->pm[i];
	ck->w[0] |= (__u64)id << TL_MASK_ID_SHIFT;
	struct tl_flow *f = bpf_map_lookup_elem(&tl_flows, ck);
	if (!f)
		return NULL;
	if (f->generation != g) {
		*stale = 1;
		return NULL;
	}
	return f;
}

/* A hit under mask `id` after the hint missed: remembered for this hash,
 * and counted for the mask's place in the order (a hit through the hint
 * does not depend on the order, and costs no count). */
static __always_inline struct tl_flow *hit_searched(struct tl_flow *f, __u32 id, __u32 *hint)
{
	if (hint)
		*hint = id;
	__u64 *h = bpf_map_lookup_elem(&tl_mask_hits, &id);
	if (h)
		*h += 1;
	count(TL_STAT_HIT);
	return f;
}

/* What the search through the masks (a bpf_loop callback, verified once
 * however many masks there are) shares with its caller. */
struct tl_probe_ctx {
	__u64 g;
	__u32 first;	/* tried already */
	__u32 numbered;
	__u32 found;	/* the mask of the entry found; TL_MAX_MASKS: none */
	__u32 stale;
};

/* Try the i-th mask of the order; 1 stops the search. The key is this
 * CPU's key buffer, looked up again (a per-CPU array lookup is a few
 * instructions once the verifier inlines it). */
static long probe_nth(__u32 i, void *data)
{
	struct tl_probe_ctx *c = data;
	__u32 zero = 0;
	struct tl_mask_order *order = bpf_map_lookup_elem(&tl_mask_order, &zero);
	struct tl_key *k = bpf_map_lookup_elem(&tl_keybuf, &zero);
	if (!order || !k || i >= order->count || i >= TL_MAX_MASKS)
		return 1;
	/* The same i, masked where clang cannot fold the mask away (it knows
	 * i < TL_MAX_MASKS; the verifier must see it on the register used). */
	__u64 j = i;
	asm volatile("%[j] &= %[m]" : [j] "+r"(j) : [m] "i"(TL_MAX_MASKS - 1));
	__u32 id = order->id[j];
	if (id == c->first || id >= TL_MAX_MASKS || (id != 0 && !c->numbered))
		return 0;
	int stale = 0;
	if (probe_mask(k, id, c->g, &stale)) {
		c->found = id;
		return 1;
	}
	if (stale)
		c->stale = 1;
	return 0;
}

/* Look the key (this CPU's key buffer) up under each mask in use, the one
 * this hash last matched first; NULL on a miss or a stale entry. */
static __always_inline struct tl_flow *lookup_flow(struct tl_key *k, __u32 hash)
{
	__u32 zero = 0;
	/* The generation before the masks: the switch writes them the other
	 * way round, so an entry of the new generation is never looked up
	 * under an old mask. */
	__u64 *gen = bpf_map_lookup_elem(&tl_generation, &zero);
	if (!gen)
		return NULL;
	__u64 g = *gen;
	/* Masks other than 0 carry their number in the in_port's top byte. */
	__u32 numbered = (k->w[0] & 0xffffffff) < (1u << TL_MASK_ID_SHIFT);
	int stale = 0;
	__u32 slot = hash & (TL_MASK_HINTS - 1);
	__u32 *hint = bpf_map_lookup_elem(&tl_mask_hint, &slot);
	__u32 first = hint ? *hint : TL_MAX_MASKS;
	struct tl_flow *f;
	if (first < TL_MAX_MASKS && (first == 0 || numbered)) {
		f = probe_mask(k, first, g, &stale);
		if (f) {
			count(TL_STAT_HIT);
			return f;
		}
	}
	struct tl_probe_ctx c = {
		.g = g,
		.first = first,
		.numbered = numbered,
		.found = TL_MAX_MASKS,
	};
	bpf_loop(TL_MAX_MASKS, probe_nth, &c, 0);
	/* Found under c.found: looked up again here, where the entry's
	 * pointer can be kept (a callback cannot hand one out). */
	__u32 id = c.found;
	if (id < TL_MAX_MASKS) {
		f = probe_mask(k, id, g, &stale);
		if (f)
			return hit_searched(f, id, hint);
	}
	struct tl_mask *union_ = bpf_map_lookup_elem(&tl_mask, &zero);
	if (union_ && union_->n > TL_CKEY_WORDS)
		count(TL_STAT_SLOW_WIDE_MASK);
	count(stale || c.stale ? TL_STAT_STALE : TL_STAT_MISS);
	return NULL;
}

/* Every TL_SAMPLE_EVERY-th hit on this CPU: its whole key into the ring
 * of samples (see tl_samples). One add per packet otherwise. */
static __always_inline void sample_key(struct tl_key *k)
{
	__u64 *kw = (__u64 *)k;
	__u64 n = kw[TL_SAMPLE_COUNT_AT] + 1;
	kw[TL_SAMPLE_COUNT_AT] = n;
	if (n & (TL_SAMPLE_EVERY - 1))
		return;
	__u32 slot = (__u32)(n / TL_SAMPLE_EVERY) & (TL_SAMPLES - 1);
	struct tl_key *s = bpf_map_lookup_elem(&tl_samples, &slot);
	if (s)
		__builtin_memcpy(s, k, sizeof(*s));
}

/* Every program's lookup: the frame at [at, end) of `skb` read into `k`
 * (whose first word the caller set: the in-port), then its cached flow.
 * TL_FLOW_SLOW: a frame the fast path does not read (the slow path's);
 * TL_FLOW_MISS: none cached; TL_FLOW_HIT: *f is the flow. */
#define TL_FLOW_HIT 0
#define TL_FLOW_SLOW 1
#define TL_FLOW_MISS 2
static __always_inline int find_flow(struct __sk_buff *skb, __u32 at, __u32 end, __u32 accel,
				     struct tl_key *k, struct tl_frame *fr, struct tl_flow **f)
{
	if (extract_frame(skb, at, end, k, accel, fr))
		return TL_FLOW_SLOW;
	*f = lookup_flow(k, skb->hash);
	if (!*f)
		return TL_FLOW_MISS;
	sample_key(k);
	return TL_FLOW_HIT;
}

#endif
