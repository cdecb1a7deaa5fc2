/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Tunnel push: put a template's outer headers in front of a tenant frame
 * and hand it to the underlay device.
 *
 * IPv4 and IPv6 frames grow with bpf_skb_adjust_room at the MAC layer and
 * the ENCAP flags, so that a 64 KB GSO super-frame stays whole and the
 * kernel segments it (as UDP-tunnel or GRE GSO) only where a device must.
 * The frame leaves through bpf_redirect_neigh: the kernel routes it by
 * its outer header (without the forwarding a FIB lookup from the ingress
 * side would ask of the node) and resolves the next hop's MAC, queueing
 * the frame while ARP or ND answers.
 */
#ifndef TUNLAB_ENCAP_H
#define TUNLAB_ENCAP_H
#include "key.h"


enum tl_push_result {
	TL_PUSH_OK = 0,
	TL_PUSH_NO_ROUTE = 1, /* nothing changed: the slow path can have it */
	TL_PUSH_FAILED = 2,   /* the frame is half changed: drop it */
	TL_PUSH_TOO_BIG = 3,  /* nothing changed: the slow path answers ICMP */
};

/*
 * Would the outer packet (or, for a GSO super-frame, each of its
 * segments) exceed the underlay's MTU? Checked before anything changes,
 * so that such a frame goes up whole and the slow path answers it with
 * ICMP fragmentation-needed / packet-too-big, as the userspace path does.
 */
static __always_inline int too_big(struct __sk_buff *skb, struct tl_template *t,
				   const struct tl_frame *fr)
{
	__u32 over = t->len + ETH_HLEN; /* outer headers and the inner Ethernet */
	__u32 mtu = t->mtu;
	if (!mtu)
		return 0;
	if (!skb->gso_size)
		return skb->len - ETH_HLEN + over > mtu;
	/* A TCP super-frame: one segment is its headers and gso_size bytes. */
	if (fr->proto != 6 || !fr->l4)
		return 1;
	__u8 doff;
	if (bpf_skb_load_bytes(skb, fr->l4 + 12, &doff, 1))
		return 1;
	__u32 seg = fr->l4 - ETH_HLEN + (doff >> 4) * 4 + skb->gso_size;
	return seg + over > mtu;
}

static __always_inline void store16(struct __sk_buff *skb, __u32 off, __u32 v)
{
	__u16 be = bpf_htons((__u16)v);
	bpf_skb_store_bytes(skb, off, &be, 2, 0);
}

static __always_inline int push_tunnel(struct __sk_buff *skb, struct tl_template *t,
				       const struct tl_frame *fr, __u32 *out_ifindex)
{
	__u32 hlen = t->len;
	if (hlen < 28 || hlen > TL_TMPL_MAX)
		return TL_PUSH_FAILED;
	__u32 l4 = t->l4_off;
	if (l4 > 40)
		return TL_PUSH_FAILED;

	/* Only IP frames: the kernel's neighbour output (below) routes by
	 * the outer header and refuses anything else; ARP and other
	 * non-IP frames take the slow path. */
	__u32 proto = bpf_ntohs(skb->protocol);
	if (proto != ETH_P_IP && proto != ETH_P_IPV6)
		return TL_PUSH_NO_ROUTE;
	if (too_big(skb, t, fr))
		return TL_PUSH_TOO_BIG;

	/* The tenant flow's hash, before the headers change: the outer UDP
	 * source port, so that receivers' RSS and ECMP see the flows
	 * (RFC 8926 § 3.3, RFC 7348 § 5). */
	__u32 hash = bpf_get_hash_recalc(skb);
	__u8 inner_eth[ETH_HLEN];
	if (bpf_skb_load_bytes(skb, 0, inner_eth, ETH_HLEN))
		return TL_PUSH_NO_ROUTE;

	__u32 room = hlen + ETH_HLEN;
	{
		__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L2_ETH |
			      BPF_F_ADJ_ROOM_ENCAP_L2(ETH_HLEN);
		flags |= t->family == 4 ? BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 : BPF_F_ADJ_ROOM_ENCAP_L3_IPV6;
		flags |= (t->kind == TL_GRE || t->kind == TL_NVGRE) ? BPF_F_ADJ_ROOM_ENCAP_L4_GRE
								      : BPF_F_ADJ_ROOM_ENCAP_L4_UDP;
		if (bpf_skb_adjust_room(skb, room, BPF_ADJ_ROOM_MAC, flags))
			return TL_PUSH_NO_ROUTE;
		/* The tenant's Ethernet header, now the inner one. */
		if (bpf_skb_store_bytes(skb, ETH_HLEN + hlen, inner_eth, ETH_HLEN, 0))
			return TL_PUSH_FAILED;
	}
	if (bpf_skb_store_bytes(skb, ETH_HLEN, t->hdr, hlen, 0))
		return TL_PUSH_FAILED;

	/* Lengths. A GSO super-frame may be longer than 16 bits can say:
	 * segmentation writes every segment's own. */
	__u32 l3len = skb->len - ETH_HLEN;
	__u32 tot = l3len > 0xffff ? 0xffff : l3len;
	if (t->family == 4) {
		store16(skb, ETH_HLEN + 2, tot);
		/* The template's checksum covers a total length of 0. */
		__u32 sum = (~(((__u32)t->hdr[10] << 8) | t->hdr[11]) & 0xffff) + tot;
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		store16(skb, ETH_HLEN + 10, ~sum & 0xffff);
	} else {
		__u32 plen = l3len - 40;
		store16(skb, ETH_HLEN + 4, plen > 0xffff ? 0xffff : plen);
	}
	if (t->kind == TL_GENEVE || t->kind == TL_VXLAN) {
		__u32 ulen = l3len - l4;
		store16(skb, ETH_HLEN + l4, 49152 | (hash & 0x3fff));
		store16(skb, ETH_HLEN + l4 + 4, ulen > 0xffff ? 0xffff : ulen);
	}

	/* A placeholder Ethernet header (unicast, the outer ethertype): the
	 * kernel's neighbour output replaces it. */
	__u8 eth[ETH_HLEN] = {};
	eth[12] = t->family == 4 ? 0x08 : 0x86;
	eth[13] = t->family == 4 ? 0x00 : 0xdd;
	if (bpf_skb_store_bytes(skb, 0, eth, ETH_HLEN, 0))
		return TL_PUSH_FAILED;
	*out_ifindex = t->ifindex;
	return TL_PUSH_OK;
}

#endif
