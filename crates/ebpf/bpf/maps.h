/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Every map of the kernel datapath, in one place (and the per-CPU key
 * buffer's accessor); what uses them is in a header of its own. Sizes marked "set by
 * the loader" are placeholders the loader overrides before creation. */
#ifndef TUNLAB_MAPS_H
#define TUNLAB_MAPS_H
#include "common.h"

/*
 * The flow cache: packed masked key -> actions. Not preallocated: entries
 * come from the kernel's slab, in its direct mapping (huge pages), where a
 * preallocated (and so every LRU) map's elements are vmalloc'ed in 4 KiB
 * pages, and with a million flows each lookup also missed the TLB (a
 * two-dimensional page walk in a VM). Nothing is evicted here: when the
 * cache nears max_entries the switch's revalidator deletes the entries
 * used longest ago (as OVS's revalidators keep the datapath under its
 * flow limit); an install into a full cache fails and that flow stays on
 * the slow path meanwhile.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024); /* set by the loader */
	__type(key, struct tl_ckey);
	__type(value, struct tl_flow);
} tl_flows SEC(".maps");

/* The megaflow masks, by number (see struct tl_mask). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TL_MAX_MASKS);
	__type(key, __u32);
	__type(value, struct tl_mask);
} tl_mask SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tl_mask_order);
} tl_mask_order SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TL_MASK_HINTS);
	__type(key, __u32);
	__type(value, __u32);
} tl_mask_hint SEC(".maps");

/* Per CPU: hits under each mask (the switch orders the masks by them). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TL_MAX_MASKS);
	__type(key, __u32);
	__type(value, __u64);
} tl_mask_hits SEC(".maps");

/* The flow table's generation (see struct tl_flow). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tl_generation SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096); /* set by the loader */
	__type(key, __u32);
	__type(value, struct tl_template);
} tl_templates SEC(".maps");

/* ifindex -> tenant port. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct tl_port);
} tl_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct tl_tunnel_key);
	__type(value, struct tl_tunnel_port);
} tl_tunnels SEC(".maps");

/* (tl_tunnels key, tunnel key) -> ofport of the port with that fixed key:
 * refines tl_tunnels, which holds one port per UDP port and remote. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct tl_tunnel_id_key);
	__type(value, __u32);
} tl_tunnel_ids SEC(".maps");

/* (class << 8 | type) -> tun_metadata index. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TL_TLV_FIELDS);
	__type(key, __u32);
	__type(value, __u32);
} tl_tlv SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TL_STAT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} tl_stats SEC(".maps");

/* Scratch room for checksumming a datagram in 512-byte pieces
 * (bpf_csum_diff takes at most 512 bytes at a time). */
#define TL_CSUM_CHUNK 512
struct tl_scratch {
	__u8 b[TL_CSUM_CHUNK];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tl_scratch);
} tl_scratch SEC(".maps");

/* The packet's flow key, built here rather than on the 512-byte BPF
 * stack (152 bytes; programs never nest on a CPU, their softirq or
 * bottom-half context sees to that). Room for 32 words: a mask's word
 * index, taken modulo 32, is in bounds without a check (see probe_mask),
 * and the cache key is packed in the spare words. */
#define TL_KEYBUF_WORDS 32
/* Where in the buffer a cache key is packed (words 20 to 29). */
#define TL_CKEY_AT 20
struct tl_keybuf {
	__u64 w[TL_KEYBUF_WORDS];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tl_keybuf);
} tl_keybuf SEC(".maps");

/*
 * Samples of the keys that hit: every TL_SAMPLE_EVERY-th hit on a CPU
 * copies its whole flow key into the next of TL_SAMPLES slots (a ring per
 * CPU; the count of hits, which picks the slot, is the key buffer's last
 * spare word).
 * A cached entry holds a masked key only; when a rule change makes an
 * entry depend on a field its mask left out, the switch decides the
 * microflows these samples name again and puts their entries in before
 * the old one goes, so a busy flow riding an entry made by another
 * packet (an ARP, a ping) does not miss.
 */
#define TL_SAMPLES 256
#define TL_SAMPLE_EVERY 16
#define TL_SAMPLE_COUNT_AT 31
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TL_SAMPLES);
	__type(key, __u32);
	__type(value, struct tl_key);
} tl_samples SEC(".maps");

/* This CPU's key, cleared. */
static __always_inline struct tl_key *key_buf(void)
{
	__u32 zero = 0;
	struct tl_key *k = bpf_map_lookup_elem(&tl_keybuf, &zero);
	if (k)
		__builtin_memset(k, 0, sizeof(*k));
	return k;
}

/* Tenant port ifindex -> its ingress policer (ports without one: none). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct tl_police);
} tl_police SEC(".maps");

/* ofport -> this CPU's counters of the port (see struct tl_port_stats). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct tl_port_stats);
} tl_port_stats SEC(".maps");

#endif
