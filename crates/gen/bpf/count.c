/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The generator's counter in XDP: each frame's 16-byte signature (its
 * last bytes, crates/gen/src/sig.rs) is read where the frame arrives, and
 * counted per flow and per sending stream without the frame being copied
 * to user space, as the AF_PACKET receiver (crates/gen/src/count.rs)
 * counts it:
 *
 *   - frames and wire bytes (FCS included) with the run's signature, per
 *     flow; frames without it ("foreign");
 *   - duplicates and reordering per stream (RFC 4737: a frame is
 *     reordered when a later-sent frame of its stream arrived first),
 *     over a window of the last CNT_WINDOW sequence numbers, shared by
 *     the CPUs (atomic exchange and compare-and-swap);
 *   - one-way latency from this CPU's clock (TAI, shifted to the
 *     sender's CLOCK_REALTIME by the loader), in the receiver's
 *     histogram buckets: 16 per power of two.
 *
 * Then the frame is dropped, or passed on (cfg.pass). The same count
 * runs in XDP (tl_count) or on TC ingress (tl_count_tc).
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

char _license[] SEC("license") = "Dual BSD/GPL";

#define SIG_LEN 16
#define SIG_MAGIC 0x7e4c
/* Sequence numbers a stream's window remembers (a power of two). */
#define CNT_WINDOW (1u << 20)
/* Latencies at or above this are not latencies (count.rs does the same). */
#define MAX_LATENCY_NS (1u << 31)
#define BUCKETS (32 * 16)

/* Filled by the loader before the program is attached. */
struct cnt_cfg {
	__u32 streams;
	__u32 flows;
	/* CLOCK_REALTIME - CLOCK_TAI, ns. */
	__s64 realtime_minus_tai;
	__u32 pass;
	__u32 _pad;
};

/* Per CPU; the loader adds the CPUs up. */
struct cnt_totals {
	__u64 rx;
	__u64 rx_bytes;
	__u64 dups;
	__u64 reordered;
	__u64 foreign;
	__u64 lat_n;
	__u64 lat_sum;
	__u64 lat_min;
	__u64 lat_max;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cnt_cfg);
} cnt_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cnt_totals);
} cnt_totals SEC(".maps");

/* Frames per flow (sized by the loader). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} cnt_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} cnt_latency SEC(".maps");

/* Per stream: one past the highest sequence number seen. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cnt_next SEC(".maps");

/* Per stream, CNT_WINDOW slots: slot seq % CNT_WINDOW holds seq + 1 of
 * the last frame that fell there (0: none). Sized by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cnt_seen SEC(".maps");

static __always_inline __u32 be32(const __u8 *b)
{
	return ((__u32)b[0] << 24) | ((__u32)b[1] << 16) | ((__u32)b[2] << 8) | b[3];
}

/* count.rs's bucket(): 16 linear sub-buckets per power of two. */
static __always_inline __u32 bucket(__u32 ns)
{
	if (ns < 16)
		return ns;
	__u32 exp = 0, v = ns;
	if (v >> 16) { v >>= 16; exp += 16; }
	if (v >> 8) { v >>= 8; exp += 8; }
	if (v >> 4) { v >>= 4; exp += 4; }
	if (v >> 2) { v >>= 2; exp += 2; }
	if (v >> 1) { exp += 1; }
	__u32 sub = (ns >> (exp - 4)) & 15;
	return (exp - 3) * 16 + sub;
}

/* What count() made of a frame. */
enum cnt_result { CNT_FOREIGN, CNT_COUNTED };

/* Count one frame of `len` bytes whose signature (its last SIG_LEN
 * bytes) is `s`, or say it is not the run's. */
static __always_inline enum cnt_result count(const __u8 *s, __u32 len)
{
	__u32 zero = 0;
	struct cnt_cfg *cfg = bpf_map_lookup_elem(&cnt_cfg, &zero);
	struct cnt_totals *t = bpf_map_lookup_elem(&cnt_totals, &zero);
	if (!cfg || !t)
		return CNT_FOREIGN;
	if ((((__u32)s[0] << 8) | s[1]) != SIG_MAGIC)
		goto foreign;
	__u32 id = be32(s + 4), seq = be32(s + 8), ts = be32(s + 12);
	__u32 stream = id >> 24, flow = id & 0xffffff;
	if (stream >= cfg->streams || flow >= cfg->flows)
		goto foreign;
	__u32 *next = bpf_map_lookup_elem(&cnt_next, &stream);
	__u32 slot_key = stream * CNT_WINDOW + (seq & (CNT_WINDOW - 1));
	__u32 *slot = bpf_map_lookup_elem(&cnt_seen, &slot_key);
	if (!next || !slot)
		goto foreign;
	if (__sync_lock_test_and_set(slot, seq + 1) == seq + 1) {
		t->dups += 1;
		return CNT_COUNTED;
	}
	/* Raise the stream's high mark, or count the frame as late. */
	__u32 seen = *next;
	int late = 0;
	for (int i = 0; i < 4; i++) {
		if (seq < seen) {
			late = 1;
			break;
		}
		__u32 was = __sync_val_compare_and_swap(next, seen, seq + 1);
		if (was == seen)
			break;
		seen = was;
	}
	if (late)
		t->reordered += 1;
	t->rx += 1;
	t->rx_bytes += len + 4;
	__u64 *f = bpf_map_lookup_elem(&cnt_flows, &flow);
	if (f)
		*f += 1;
	__u64 now = bpf_ktime_get_tai_ns() + cfg->realtime_minus_tai;
	__u32 lat = (__u32)now - ts;
	if (lat < MAX_LATENCY_NS) {
		__u32 b = bucket(lat);
		__u64 *c = bpf_map_lookup_elem(&cnt_latency, &b);
		if (c)
			*c += 1;
		t->lat_n += 1;
		t->lat_sum += lat;
		if (t->lat_min == 0 || lat < t->lat_min)
			t->lat_min = lat;
		if (lat > t->lat_max)
			t->lat_max = lat;
	}
	return CNT_COUNTED;
foreign:
	t->foreign += 1;
	return CNT_FOREIGN;
}

/* A frame too short to carry a signature. */
static __always_inline void count_foreign(void)
{
	__u32 zero = 0;
	struct cnt_totals *t = bpf_map_lookup_elem(&cnt_totals, &zero);
	if (t)
		t->foreign += 1;
}

/* Drop counted frames unless the loader asked to pass them. */
static __always_inline int passing(void)
{
	__u32 zero = 0;
	struct cnt_cfg *cfg = bpf_map_lookup_elem(&cnt_cfg, &zero);
	return cfg && cfg->pass;
}

/* The largest frame whose signature is read in place (beyond it, or in
 * a frame that is not linear, it is copied out). */
#define MAX_IN_PLACE 16384

/* In XDP: where a NIC's driver runs it, before any socket buffer. */
SEC("xdp")
int tl_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 len = end - data;
	__u8 copy[SIG_LEN];
	const __u8 *s = copy;
	if (len < SIG_LEN) {
		count_foreign();
		return XDP_PASS;
	}
	__u32 off = len - SIG_LEN;
	if (off < MAX_IN_PLACE && data + off + SIG_LEN <= end)
		s = data + off;
	else if (bpf_xdp_load_bytes(ctx, off, copy, SIG_LEN)) {
		count_foreign();
		return XDP_PASS;
	}
	if (count(s, len) == CNT_FOREIGN || passing())
		return XDP_PASS;
	return XDP_DROP;
}

/* On TC ingress: the socket buffer as it arrived. On veth, whose XDP
 * first copies a frame that lacks XDP's 256 bytes of headroom into a page
 * of its own, this is the cheaper hook. */
SEC("classifier")
int tl_count_tc(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u32 len = skb->len;
	__u8 copy[SIG_LEN];
	const __u8 *s = copy;
	if (len < SIG_LEN) {
		count_foreign();
		return TC_ACT_OK;
	}
	__u32 off = len - SIG_LEN;
	if (off < MAX_IN_PLACE && data + off + SIG_LEN <= end)
		s = data + off;
	else if (bpf_skb_load_bytes(skb, off, copy, SIG_LEN)) {
		count_foreign();
		return TC_ACT_OK;
	}
	/* The stack took the outer 802.1Q tag out of the frame before TC:
	 * count the bytes the wire carried. */
	if (count(s, len + (skb->vlan_present ? 4 : 0)) == CNT_FOREIGN || passing())
		return TC_ACT_OK;
	return TC_ACT_SHOT;
}
