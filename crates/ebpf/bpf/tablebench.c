/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Not the datapath: an experiment on the flow cache's table. What one
 * cached flow's lookup costs the kernel when the cache holds many flows
 * and each lookup names another (the table is in no CPU cache), in
 *   mode 0: the datapath's table, a BPF hash map (not preallocated,
 *           80-byte packed keys: a bucket, then an element);
 *   mode 3: the same with 32-byte keys (a map per key width);
 *   mode 1: open addressing in one BPF array of 128-byte slots (key,
 *           counters and actions in one slot: one miss, vmalloc'ed 4 KiB
 *           pages);
 *   mode 4: the same slots split into arrays of TB_INNER slots that the
 *           kernel allocates from its slab (huge pages);
 *   mode 2: no lookup (the loop's own cost).
 * Each lookup's key depends on the last lookup's result, so that lookups
 * wait for memory one after the other as packets do (a loop of
 * independent lookups overlaps their misses). Keys come at random or in
 * the order they were put in (as scripts/scale's generator sends them).
 * benches/table.rs fills the tables and runs tb_run.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#define TB_KEY_WORDS 10
struct tb_key {
	__u64 w[TB_KEY_WORDS];
};
struct tb_flow {
	__u64 generation, packets, bytes;
	__u32 n_ops, used;
	__u64 ops[4];
};
#define TB_SLOT_WORDS 6
struct tb_slot {
	__u64 w[TB_SLOT_WORDS];
	__u64 tag; /* the key's hash; 0: empty */
	struct tb_flow flow;
	__u64 pad;
};
struct tb_conf {
	__u64 flows;	/* keys 0 .. flows-1 are in the tables */
	__u64 seed;
	__u32 mode;	/* see the top of this file */
	__u32 bits;	/* the open table has 2^bits slots */
	__u32 seq;	/* 1: keys in the order they were put in, not at random */
	__u32 pad;
	__u64 found;	/* out: lookups that found their key */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024); /* set by the bench */
	__type(key, struct tb_key);
	__type(value, struct tb_flow);
} tb_hash SEC(".maps");

struct tb_key4 {
	__u64 w[4];
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024); /* set by the bench */
	__type(key, struct tb_key4);
	__type(value, struct tb_flow);
} tb_hash4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024); /* set by the bench */
	__type(key, __u32);
	__type(value, struct tb_slot);
} tb_open SEC(".maps");

/* The open table split into arrays of TB_INNER slots, each small enough
 * for the kernel to allocate from its slab (kmalloc, at most 32 KiB: the
 * direct mapping, huge pages) rather than vmalloc's 4 KiB pages. */
#define TB_INNER 240
struct tb_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TB_INNER);
	__type(key, __u32);
	__type(value, struct tb_slot);
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);	/* set by the bench */
	__type(key, __u32);
	__array(values, struct tb_inner);
} tb_outer SEC(".maps");


struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tb_conf);
} tb_conf SEC(".maps");

static __always_inline __u64 mix(__u64 x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* The key numbered j (benches/table.rs builds the same). */
static __always_inline void key_of(__u64 j, struct tb_key *k)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->w[0] = 1;
	k->w[1] = 0x110800;
	k->w[2] = j;
	k->w[3] = j * 0x9e3779b97f4a7c15ULL;
}

/* The open table's hash of a key's first four words; never 0. */
static __always_inline __u64 slot_hash(const struct tb_key *k)
{
	__u64 h = mix(k->w[0] ^ mix(k->w[1] ^ mix(k->w[2] ^ mix(k->w[3]))));
	return h | 1;
}

#define TB_PROBES 64
/* Slot `idx` of the open table: in its one array (mode 1), or in the
 * array of the split table that holds it (mode 4). */
static __always_inline struct tb_slot *slot_at(__u32 mode, __u32 idx)
{
	if (mode != 4)
		return bpf_map_lookup_elem(&tb_open, &idx);
	__u32 o = idx / TB_INNER, in = idx % TB_INNER;
	void *inner = bpf_map_lookup_elem(&tb_outer, &o);
	if (!inner)
		return NULL;
	return bpf_map_lookup_elem(inner, &in);
}

/* Linear probing from the key's home slot. */
static __always_inline struct tb_flow *open_lookup(const struct tb_key *k, __u32 bits,
						   __u32 mode)
{
	__u64 h = slot_hash(k);
	__u32 mask = (1u << (bits & 31)) - 1;
	__u32 at = (__u32)(h >> 32) & mask;
	for (int i = 0; i < TB_PROBES; i++) {
		struct tb_slot *s = slot_at(mode, (at + i) & mask);
		if (!s || s->tag == 0)
			return NULL;
		if (s->tag == h && s->w[0] == k->w[0] && s->w[1] == k->w[1] &&
		    s->w[2] == k->w[2] && s->w[3] == k->w[3])
			return &s->flow;
	}
	return NULL;
}

struct tb_ctx {
	struct tb_conf *c;
	__u64 found;
	/* From the last lookup's flow (always 0): the next key depends on
	 * it, so that lookups do not overlap (a packet's lookup waits for
	 * its memory; a loop's would overlap the next ones). */
	__u64 dep;
};

static long one(__u32 i, void *data)
{
	struct tb_ctx *x = data;
	struct tb_conf *c = x->c;
	struct tb_key k;
	__u64 n = c->seed + i + x->dep;
	__u64 j = c->flows <= 1 ? x->dep : c->seq ? n % c->flows : mix(n) % c->flows;
	key_of(j, &k);
	struct tb_flow *f = NULL;
	if (c->mode == 0)
		f = bpf_map_lookup_elem(&tb_hash, &k);
	else if (c->mode == 1 || c->mode == 4)
		f = open_lookup(&k, c->bits, c->mode);
	else if (c->mode == 3)
		f = bpf_map_lookup_elem(&tb_hash4, &k);
	else
		x->found += k.w[3] & 1;
	if (f) {
		x->dep = f->n_ops;
		__sync_fetch_and_add(&f->packets, 1);
		__sync_fetch_and_add(&f->bytes, 64);
		f->used = (__u32)i;
		x->found++;
	}
	return 0;
}

/* One run: the packet's first byte times 4096 lookups, keys drawn from
 * the configuration's seed. */
SEC("classifier")
int tb_run(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct tb_conf *c = bpf_map_lookup_elem(&tb_conf, &zero);
	if (!c)
		return TC_ACT_OK;
	__u8 n = 0;
	if (bpf_skb_load_bytes(skb, 0, &n, 1))
		return TC_ACT_OK;
	struct tb_ctx x = { .c = c };
	bpf_loop((__u32)n * 4096, one, &x, 0);
	c->found = x.found;
	c->seed += (__u32)n * 4096;
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
