/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The PVP tenant's reflector in XDP: every frame goes back out of the
 * interface it came in on with its Ethernet addresses swapped, as
 * testpmd's macswap does in the TRex article's VM, without the frame
 * reaching user space. Counts what it reflected, per CPU.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char _license[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rfl_count SEC(".maps");

SEC("xdp")
int tl_reflect(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if ((void *)(p + 12) > end)
		return XDP_PASS;
	__u8 dst[6];
	__builtin_memcpy(dst, p, 6);
	__builtin_memcpy(p, p + 6, 6);
	__builtin_memcpy(p + 6, dst, 6);
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&rfl_count, &zero);
	if (n)
		*n += 1;
	return XDP_TX;
}
