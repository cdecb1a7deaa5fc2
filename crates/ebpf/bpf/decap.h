/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Tunnel pop: read the outer and tunnel headers of a packet
 * from the underlay and fill the key's tunnel fields, as wire::tunnel::pop
 * and dp::extract_tunnel do in user space.
 *
 * The fast path takes only what it fully understands: anything else
 * (IPv4 options, fragments, IPv6 extension headers, a UDP checksum to
 * verify, GRE checksums or routing, Geneve carrying IP directly, a bad
 * version or option tiling) goes up to the slow path, which checks it and
 * counts its drop reason. The one thing dropped here is a Geneve option
 * marked critical that the TLV map does not know (RFC 8926 § 3.5).
 */
#ifndef TUNLAB_DECAP_H
#define TUNLAB_DECAP_H
#include "checksum.h"
#include "key.h"

#define IPPROTO_GRE 47
#define TL_MAX_OPTIONS 8

enum tl_pop_result {
	TL_POP_OK = 0,
	TL_POP_NOT_OURS = 1, /* not a tunnel packet for this node */
	TL_POP_SLOW = 2,     /* ours, but for the slow path */
	TL_POP_DROP = 3,     /* counted and dropped */
};

struct tl_outer {
	__u32 inner_at; /* where the tenant frame starts */
	__u32 end;	/* where it ends */
	__u32 ofport;
};

static __always_inline void set_metadata(struct tl_key *k, __u32 n, __u64 v)
{
	switch (n) {
	case 0: k->w[15] = (k->w[15] & 0xffffffff00000000ULL) | v; break;
	case 1: k->w[15] = (k->w[15] & 0xffffffffULL) | (v << 32); break;
	case 2: k->w[16] = (k->w[16] & 0xffffffff00000000ULL) | v; break;
	case 3: k->w[16] = (k->w[16] & 0xffffffffULL) | (v << 32); break;
	case 4: k->w[17] = (k->w[17] & 0xffffffff00000000ULL) | v; break;
	case 5: k->w[17] = (k->w[17] & 0xffffffffULL) | (v << 32); break;
	case 6: k->w[18] = (k->w[18] & 0xffffffff00000000ULL) | v; break;
	case 7: k->w[18] = (k->w[18] & 0xffffffffULL) | (v << 32); break;
	}
}

static __always_inline int geneve_options(struct __sk_buff *skb, __u32 at, __u32 end,
					  struct tl_key *k)
{
	for (int i = 0; i < TL_MAX_OPTIONS; i++) {
		__u8 o[8];
		if (at >= end)
			return TL_POP_OK;
		if (at + 4 > end || bpf_skb_load_bytes(skb, at, o, 4))
			return TL_POP_SLOW;
		__u32 dlen = (o[3] & 0x1f) * 4;
		if (at + 4 + dlen > end)
			return TL_POP_SLOW;
		__u32 ct = ((__u32)o[0] << 16) | ((__u32)o[1] << 8) | o[2];
		__u32 *n = bpf_map_lookup_elem(&tl_tlv, &ct);
		if (!n) {
			if (o[2] & 0x80) {
				count(TL_STAT_DROP_CRITICAL_OPTION);
				return TL_POP_DROP;
			}
		} else {
			__u64 v = 0;
			if (dlen >= 4) {
				if (bpf_skb_load_bytes(skb, at + 4, o + 4, 4))
					return TL_POP_SLOW;
				v = be32_at(o + 4);
			}
			set_metadata(k, *n, v);
		}
		at += 4 + dlen;
	}
	return at == end ? TL_POP_OK : TL_POP_SLOW;
}

static __always_inline int differ16(const __u8 *a, const __u8 *b)
{
	__u32 d = 0;
#pragma unroll
	for (int i = 0; i < 16; i++)
		d |= a[i] ^ b[i];
	return d != 0;
}

static __always_inline int pop_outer(struct __sk_buff *skb, struct tl_key *k, struct tl_outer *out)
{
	__u32 eth_proto = bpf_ntohs(skb->protocol);
	struct tl_tunnel_key tk = {};
	__u32 l4, end = skb->len;
	__u8 ip[40];
	int gso = skb->gso_size != 0;

	if (eth_proto == ETH_P_IP) {
		if (bpf_skb_load_bytes(skb, ETH_HLEN, ip, 20))
			return TL_POP_NOT_OURS;
		if (ip[9] != IPPROTO_UDP && ip[9] != IPPROTO_GRE)
			return TL_POP_NOT_OURS;
		if (ip[0] != 0x45 || (((__u32)ip[6] << 8 | ip[7]) & 0x3fff))
			return TL_POP_SLOW; /* options or a fragment */
		tk.family = 4;
		tk.proto = ip[9];
		l4 = ETH_HLEN + 20;
		__u32 tot = ((__u32)ip[2] << 8) | ip[3];
		if (!gso && ETH_HLEN + tot < end)
			end = ETH_HLEN + tot;
		k->w[4] |= 4ULL << 16;
		k->w[6] = (__u64)be32_at(ip + 12) | ((__u64)be32_at(ip + 16) << 32);
	} else if (eth_proto == ETH_P_IPV6) {
		if (bpf_skb_load_bytes(skb, ETH_HLEN, ip, 40))
			return TL_POP_NOT_OURS;
		if (ip[6] != IPPROTO_UDP && ip[6] != IPPROTO_GRE)
			return TL_POP_NOT_OURS;
		tk.family = 6;
		tk.proto = ip[6];
		l4 = ETH_HLEN + 40;
		__u32 plen = ((__u32)ip[4] << 8) | ip[5];
		if (!gso && l4 + plen < end)
			end = l4 + plen;
		k->w[4] |= 6ULL << 16;
		k->w[11] = be64_at(ip + 8);
		k->w[12] = be64_at(ip + 16);
		k->w[13] = be64_at(ip + 24);
		k->w[14] = be64_at(ip + 32);
	} else {
		return TL_POP_NOT_OURS;
	}

	__u8 h[8];
	__u32 tun_at;
	if (tk.proto == IPPROTO_UDP) {
		if (bpf_skb_load_bytes(skb, l4, h, 8))
			return TL_POP_NOT_OURS;
		tk.dport = ((__u16)h[2] << 8) | h[3];
		tun_at = l4 + 8;
	} else {
		tun_at = l4;
	}
	/* The port for this remote, else the entry for any remote. */
	if (tk.family == 4)
		__builtin_memcpy(tk.remote, ip + 12, 4);
	else
		__builtin_memcpy(tk.remote, ip + 8, 16);
	struct tl_tunnel_port *tp = bpf_map_lookup_elem(&tl_tunnels, &tk);
	if (!tp) {
		__builtin_memset(tk.remote, 0, sizeof(tk.remote));
		tp = bpf_map_lookup_elem(&tl_tunnels, &tk);
	}
	if (!tp)
		return TL_POP_NOT_OURS;

	/* Addressed to this node, from a remote this port accepts. */
	if (tk.family == 4) {
		if (!tp->local_any && bpf_htonl((__u32)(k->w[6] >> 32)) != tp->local4)
			return TL_POP_NOT_OURS;
		if (!tp->remote_any && bpf_htonl((__u32)k->w[6]) != tp->remote4) {
			count(TL_STAT_SLOW_UNKNOWN_REMOTE);
			return TL_POP_SLOW;
		}
	} else {
		if (!tp->local_any && differ16(ip + 24, tp->local6))
			return TL_POP_NOT_OURS;
		if (!tp->remote_any && differ16(ip + 8, tp->remote6)) {
			count(TL_STAT_SLOW_UNKNOWN_REMOTE);
			return TL_POP_SLOW;
		}
	}
	if (tk.proto == IPPROTO_UDP) {
		__u32 ulen = ((__u32)h[4] << 8) | h[5];
		/* A checksum to verify, unless the kernel has: a GSO packet is
		 * from this machine (its checksum partial) or was joined by a
		 * driver that checked every segment, and CHECKSUM_UNNECESSARY
		 * says a device checked it. */
		if ((h[6] | h[7]) && !gso && bpf_csum_level(skb, BPF_CSUM_LEVEL_QUERY) < 0 &&
		    !tl_udp_csum_ok(skb, l4, ulen, udp_pseudo_sum(ip, tk.family == 6, ulen))) {
			count(TL_STAT_SLOW_CSUM);
			return TL_POP_SLOW;
		}
		if (!gso && l4 + ulen < end)
			end = l4 + ulen;
	}

	__u8 t[8];
	if (bpf_skb_load_bytes(skb, tun_at, t, tk.proto == IPPROTO_UDP ? 8 : 4))
		return TL_POP_SLOW;
	switch (tp->kind) {
	case TL_GENEVE: {
		__u32 optlen = (t[0] & 0x3f) * 4;
		if ((t[0] >> 6) != 0 || t[2] != 0x65 || t[3] != 0x58)
			return TL_POP_SLOW;
		k->w[5] = ((__u32)t[4] << 16) | ((__u32)t[5] << 8) | t[6];
		int r = geneve_options(skb, tun_at + 8, tun_at + 8 + optlen, k);
		if (r != TL_POP_OK)
			return r;
		out->inner_at = tun_at + 8 + optlen;
		break;
	}
	case TL_VXLAN:
		if (!(t[0] & 0x08))
			return TL_POP_SLOW;
		k->w[5] = ((__u32)t[4] << 16) | ((__u32)t[5] << 8) | t[6];
		out->inner_at = tun_at + 8;
		break;
	case TL_GRE:
	case TL_NVGRE: {
		__u32 flags = ((__u32)t[0] << 8) | t[1];
		/* No checksum, no routing, version 0, Ethernet inside. */
		if ((flags & 0xc007) || t[2] != 0x65 || t[3] != 0x58)
			return TL_POP_SLOW;
		__u32 at = tun_at + 4;
		__u64 id = 0;
		if (flags & 0x2000) {
			__u8 key[4];
			if (bpf_skb_load_bytes(skb, at, key, 4))
				return TL_POP_SLOW;
			id = be32_at(key);
			at += 4;
		}
		if (flags & 0x1000)
			at += 4;
		/* NVGRE: the key is VSID << 8 | FlowID (RFC 7637 § 3.2). */
		if (tp->kind == TL_NVGRE && (flags & 0x2000) && !(flags & 0x1000))
			id >>= 8;
		k->w[5] = id;
		out->inner_at = at;
		break;
	}
	default:
		return TL_POP_SLOW;
	}
	out->end = end;
	out->ofport = tp->ofport;
	/* Ports that differ only in their key share the tl_tunnels entry:
	 * the key names the port. */
	struct tl_tunnel_id_key ik = {};
	ik.tk = tk;
	ik.id = (__u32)k->w[5];
	__u32 *owner = bpf_map_lookup_elem(&tl_tunnel_ids, &ik);
	if (owner)
		out->ofport = *owner;
	return TL_POP_OK;
}

/*
 * Tunnel pop, second half: remove everything between the outer Ethernet
 * header and the inner frame at `inner` (and anything past `end`), then
 * write the inner Ethernet header where the outer one was. `ip`: the
 * inner frame is untagged IPv4 or IPv6 of `inner_type`, which the kernel
 * is told (its GSO state follows). Returns 0, TL_STRIP_SLOW (nothing was
 * changed that the slow path cannot take), or TL_STRIP_BROKEN (the frame
 * was changed and cannot be sent on).
 */
#define TL_STRIP_SLOW 1
#define TL_STRIP_BROKEN 2
static __always_inline int strip_outer(struct __sk_buff *skb, __u32 inner, __u32 end, int ip,
				       __u32 inner_type)
{
	__u8 eth[ETH_HLEN];
	if (bpf_skb_load_bytes(skb, inner, eth, ETH_HLEN))
		return TL_STRIP_SLOW;
	__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO;
	if (ip)
		flags |= inner_type == ETH_P_IP ? BPF_F_ADJ_ROOM_DECAP_L3_IPV4
						: BPF_F_ADJ_ROOM_DECAP_L3_IPV6;
	if (end < skb->len && bpf_skb_change_tail(skb, end, 0))
		return TL_STRIP_SLOW;
	if (bpf_skb_adjust_room(skb, -(__s32)inner, BPF_ADJ_ROOM_MAC, flags)) {
		count(TL_STAT_ERR_ADJUST);
		return TL_STRIP_SLOW;
	}
	if (bpf_skb_store_bytes(skb, 0, eth, ETH_HLEN, 0)) {
		count(TL_STAT_ERR_ADJUST);
		return TL_STRIP_BROKEN;
	}
	return 0;
}

#endif
