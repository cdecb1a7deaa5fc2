/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A tenant port's ingress policer: a token bucket in bytes, as OVS's
 * ingress_policing_rate / _burst. */
#ifndef TUNLAB_POLICE_H
#define TUNLAB_POLICE_H
#include "maps.h"

/*
 * Whether a frame of `len` bytes fits the bucket now (taking its tokens
 * if so). Refill time is capped at a second, so rate x time never
 * overflows.
 */
static __always_inline int police(struct tl_police *p, __u32 len)
{
	__u64 now = bpf_ktime_get_ns();
	int pass = 0;
	bpf_spin_lock(&p->lock);
	__u64 elapsed = now - p->last_ns;
	if (elapsed > 1000000000ULL)
		elapsed = 1000000000ULL;
	__u64 tokens = p->tokens + elapsed * p->rate / 1000000000ULL;
	if (tokens > p->burst)
		tokens = p->burst;
	if (tokens >= len) {
		tokens -= len;
		pass = 1;
	}
	p->tokens = tokens;
	p->last_ns = now;
	bpf_spin_unlock(&p->lock);
	return pass;
}

#endif
