/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* What the programs count: per port (packets as the wire carries them,
 * bytes, drops) and per event (tl_stats, read by `tunlab ctl stats`). */
#ifndef TUNLAB_STATS_H
#define TUNLAB_STATS_H
#include "maps.h"

/* A port's counters, made on first use; NULL for ofport 0 (not counted)
 * or if the map is full. */
static __always_inline struct tl_port_stats *port_stats(__u32 ofport)
{
	if (!ofport)
		return NULL;
	struct tl_port_stats *s = bpf_map_lookup_elem(&tl_port_stats, &ofport);
	if (s)
		return s;
	struct tl_port_stats zero = {};
	bpf_map_update_elem(&tl_port_stats, &ofport, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&tl_port_stats, &ofport);
}

/* Packets an skb stands for: a GSO super-frame counts its segments, as
 * the wire (and the slow path) would see them. Read it before an adjust
 * of the room: that leaves gso_segs at 0 for the stack to work out. */
static __always_inline __u32 segs(struct __sk_buff *skb)
{
	return skb->gso_segs ? skb->gso_segs : 1;
}

/* A frame of `n` packets (see segs()) and `len` bytes in from `ofport`,
 * handled here; dropped or not. */
static __always_inline void port_rx(__u32 ofport, __u32 n, __u32 len, int dropped)
{
	struct tl_port_stats *s = port_stats(ofport);
	if (!s)
		return;
	s->rx_packets += n;
	s->rx_bytes += len;
	if (dropped)
		s->rx_dropped += n;
}

/* A frame of `n` packets and `len` bytes out of `ofport`. */
static __always_inline void port_tx(__u32 ofport, __u32 n, __u32 len)
{
	struct tl_port_stats *s = port_stats(ofport);
	if (s) {
		s->tx_packets += n;
		s->tx_bytes += len;
	}
}

static __always_inline void count(__u32 what)
{
	__u64 *c = bpf_map_lookup_elem(&tl_stats, &what);
	if (c)
		*c += 1;
}

#endif
