// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * tunlab's kernel datapath: three TC programs (clsact ingress, direct
 * action) that forward the flows the switch has cached and send the rest
 * up to it.
 *
 *   tenant veth ──► tl_from_tenant ──► hit: push tunnel, redirect to the
 *                                      underlay; or redirect to a veth
 *                                      miss: redirect to the port's upcall
 *                                      TAP, which `tunlab switch` reads
 *   underlay    ──► tl_from_underlay ─► hit: pop, redirect into the
 *                                      tenant's namespace (redirect_peer)
 *                                      miss: on up the stack to the
 *                                      switch's tunnel socket
 *   upcall TAP  ──► tl_inject ────────► what the switch sends to a tenant
 *                                      port: redirect to its veth
 *
 * The slow path forwards a miss itself and installs the entry, so the
 * first packet of a flow is never lost.
 */
#include "decap.h"
#include "encap.h"
#include "police.h"
#include "stats.h"

char _license[] SEC("license") = "Dual BSD/GPL";

/* Counted as the tenant frame (before a push, after a pop), as the slow
 * path and OVS count: `n` packets (segs() before any adjust) of `len`
 * bytes. */
static __always_inline void account(struct tl_flow *f, __u32 n, __u32 len)
{
	__sync_fetch_and_add(&f->packets, n);
	__sync_fetch_and_add(&f->bytes, len);
	__u32 now = (__u32)(bpf_ktime_get_coarse_ns() >> TL_USED_SHIFT);
	/* A store only when the millisecond changed: the line stays clean
	 * in the other CPU's cache most of the time. */
	if (f->used != now)
		f->used = now;
}

/* Deliver a frame to a tenant: straight into its namespace for IP
 * (redirect_peer skips the veth's backlog), through the veth otherwise,
 * whose receive re-reads the frame's ethertype. */
static __always_inline int to_tenant(struct __sk_buff *skb, __u32 ifindex, int ip)
{
	return ip ? bpf_redirect_peer(ifindex, 0) : bpf_redirect(ifindex, 0);
}

/* A flow whose actions are drop (or that no rule matched): a tenant
 * frame of `n` packets and `len` bytes in from `in_port`. */
static __always_inline int drop(struct tl_flow *f, __u32 n, __u32 in_port, __u32 len)
{
	account(f, n, len);
	port_rx(in_port, n, len, 1);
	count(TL_STAT_DROP_ACTION);
	return TC_ACT_SHOT;
}

/*
 * Apply the VLAN edits in front of a flow's output; returns the output
 * op's index, or -1 if the entry is malformed or an edit failed (the
 * frame may be half edited: drop it).
 */
static __always_inline int vlan_ops(struct __sk_buff *skb, struct tl_flow *f)
{
	__u32 n = f->n_ops;
	if (n == 0 || n > TL_MAX_OPS)
		return -1;
#pragma unroll
	for (int i = 0; i < TL_MAX_OPS - 1; i++) {
		if (i + 1 >= n)
			return i;
		struct tl_op op = f->ops[i];
		if (op.kind == TL_OP_PUSH_VLAN) {
			if (bpf_skb_vlan_push(skb, bpf_htons(op.arg16), op.arg))
				return -1;
		} else if (op.kind == TL_OP_POP_VLAN) {
			if (bpf_skb_vlan_pop(skb))
				return -1;
		} else {
			return -1;
		}
	}
	return TL_MAX_OPS - 1;
}

/* The frame's output, after its VLAN edits: `len` bytes in from
 * `in_port`. */
static __always_inline int output(struct __sk_buff *skb, struct tl_flow *f, __u32 len,
				  __u32 in_port)
{
	__u32 n = segs(skb);
	int last = vlan_ops(skb, f);
	if (last < 0 || last >= TL_MAX_OPS) {
		count(TL_STAT_ERR_ADJUST);
		port_rx(in_port, n, len, 1);
		return TC_ACT_SHOT;
	}
	struct tl_op op = f->ops[last];
	__u32 proto = bpf_ntohs(skb->protocol);
	account(f, n, len);
	if (op.kind == TL_OP_OUTPUT_PORT || op.kind == TL_OP_OUTPUT_DEV) {
		port_rx(in_port, n, len, 0);
		port_tx(op.arg16, n, skb->len);
	}
	switch (op.kind) {
	case TL_OP_OUTPUT_PORT:
		return to_tenant(skb, op.arg,
				 !skb->vlan_present && (proto == ETH_P_IP || proto == ETH_P_IPV6));
	case TL_OP_OUTPUT_DEV:
		return bpf_redirect(op.arg, 0);
	}
	count(TL_STAT_ERR_ADJUST);
	port_rx(in_port, n, len, 1);
	return TC_ACT_SHOT;
}

SEC("classifier")
int tl_from_tenant(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	struct tl_port *port = bpf_map_lookup_elem(&tl_ports, &ifindex);
	if (!port || port->role != TL_ROLE_VETH)
		return TC_ACT_OK;
	count(TL_STAT_TENANT_RX);
	if (port->policed) {
		struct tl_police *pol = bpf_map_lookup_elem(&tl_police, &ifindex);
		if (pol && !police(pol, skb->len)) {
			count(TL_STAT_DROP_POLICED);
			port_rx(port->ofport, segs(skb), skb->len, 1);
			return TC_ACT_SHOT;
		}
	}
	__u32 upcall = port->peer_ifindex;

	/* A tag the kernel took out would have to go back in before the
	 * frame is encapsulated: such frames take the slow path for now. */
	if (skb->vlan_present)
		goto slow;

	struct tl_key *k = key_buf();
	struct tl_frame fr = {};
	if (!k)
		goto slow;
	k->w[0] = port->ofport;
	__u32 in_port = port->ofport;
	struct tl_flow *f = NULL;
	int found = find_flow(skb, 0, skb->len, 0, k, &fr, &f);
	if (found == TL_FLOW_SLOW)
		goto slow;
	if (found != TL_FLOW_HIT || !f)
		goto up;
	__u32 n = segs(skb);
	if (f->n_ops == 0)
		return drop(f, n, in_port, skb->len);
	struct tl_op op = f->ops[0];
	if (op.kind == TL_OP_OUTPUT_TUNNEL) {
		__u32 idx = op.arg;
		struct tl_template *t = bpf_map_lookup_elem(&tl_templates, &idx);
		if (!t)
			goto slow;
		__u32 out = 0, len = skb->len;
		int r = push_tunnel(skb, t, &fr, &out);
		if (r == TL_PUSH_NO_ROUTE) {
			count(TL_STAT_SLOW_NO_ROUTE);
			goto up;
		}
		if (r == TL_PUSH_TOO_BIG) {
			count(TL_STAT_TOO_BIG);
			goto up;
		}
		if (r != TL_PUSH_OK) {
			count(TL_STAT_ERR_ADJUST);
			port_rx(in_port, n, len, 1);
			return TC_ACT_SHOT;
		}
		account(f, n, len);
		/* Tunnel ports count the tenant frame, as the slow path does. */
		port_rx(in_port, n, len, 0);
		port_tx(op.arg16, n, len);
		count(TL_STAT_ENCAP);
		return bpf_redirect_neigh(out, NULL, 0, 0);
	}
	return output(skb, f, skb->len, in_port);
slow:
	count(TL_STAT_SLOW_NOT_FAST);
up:
	count(TL_STAT_UPCALL);
	return bpf_redirect(upcall, 0);
}

/*
 * An 802.1ad frame on a QinQ port's underlay device (the kernel took its
 * S-tag out of the data): its flow, or up through the port's upcall TAP,
 * which hands the switch the frame with the tag back in place. A global
 * function: the verifier checks it once, apart from the tunnel path.
 */
__attribute__((noinline)) int tl_from_qinq(struct __sk_buff *skb)
{
	if (!skb)
		return TC_ACT_OK;
	__u32 ifindex = skb->ifindex;
	struct tl_port *port = bpf_map_lookup_elem(&tl_ports, &ifindex);
	if (!port || port->role != TL_ROLE_QINQ || skb->vlan_proto != bpf_htons(ETH_P_8021AD)) {
		count(TL_STAT_NOT_TUNNEL);
		return TC_ACT_OK;
	}
	__u32 upcall = port->peer_ifindex;
	struct tl_key *k = key_buf();
	struct tl_frame fr = {};
	if (!k)
		goto up;
	k->w[0] = port->ofport;
	struct tl_flow *f = NULL;
	int found = find_flow(skb, 0, skb->len, (skb->vlan_tci & 0xffff) | TL_ACCEL, k, &fr, &f);
	if (found == TL_FLOW_SLOW)
		count(TL_STAT_SLOW_NOT_FAST);
	if (found != TL_FLOW_HIT || !f)
		goto up;
	if (f->n_ops == 0)
		return drop(f, segs(skb), port->ofport, skb->len);
	count(TL_STAT_DECAP);
	return output(skb, f, skb->len, port->ofport);
up:
	count(TL_STAT_UPCALL);
	return bpf_redirect(upcall, 0);
}

SEC("classifier")
int tl_from_underlay(struct __sk_buff *skb)
{
	struct tl_outer o = {};

	count(TL_STAT_UNDERLAY_RX);
	if (skb->vlan_present)
		return tl_from_qinq(skb);
	struct tl_key *k = key_buf();
	if (!k)
		return TC_ACT_OK;
	int r = pop_outer(skb, k, &o);
	if (r == TL_POP_NOT_OURS) {
		count(TL_STAT_NOT_TUNNEL);
		return TC_ACT_OK;
	}
	if (r == TL_POP_DROP)
		return TC_ACT_SHOT;
	if (r != TL_POP_OK)
		goto slow;
	k->w[0] |= o.ofport;
	__u32 inner = o.inner_at;
	if (inner > 400)
		goto slow;
	/* The tunnel port counts the tenant frame, as the slow path does. */
	__u32 inner_len = o.end - inner;
	struct tl_frame fr = {};
	struct tl_flow *f = NULL;
	int found = find_flow(skb, inner, o.end, 0, k, &fr, &f);
	if (found == TL_FLOW_SLOW)
		goto slow;
	if (found != TL_FLOW_HIT || !f)
		goto up;
	__u32 inner_type = (__u32)(k->w[0] >> 32) & 0xffff;
	__u32 tagged = (__u32)(k->w[0] >> 48) & 0x1000;
	/* The packets the frame stands for, before the pop clears it. */
	__u32 n = segs(skb);
	if (f->n_ops == 0)
		return drop(f, n, o.ofport, inner_len);
	/* A tenant's veth (into its namespace) or a system port's device
	 * (out through it); anything else is the slow path's. */
	struct tl_op op = f->ops[0];
	if (op.kind != TL_OP_OUTPUT_PORT && op.kind != TL_OP_OUTPUT_DEV)
		goto slow;

	int ip = !tagged && (inner_type == ETH_P_IP || inner_type == ETH_P_IPV6);
	int stripped = strip_outer(skb, inner, o.end, ip, inner_type);
	if (stripped == TL_STRIP_SLOW)
		goto slow;
	if (stripped == TL_STRIP_BROKEN) {
		port_rx(o.ofport, n, inner_len, 1);
		return TC_ACT_SHOT;
	}
	account(f, n, skb->len);
	port_rx(o.ofport, n, skb->len, 0);
	port_tx(op.arg16, n, skb->len);
	count(TL_STAT_DECAP);
	if (op.kind == TL_OP_OUTPUT_DEV)
		return bpf_redirect(op.arg, 0);
	return to_tenant(skb, op.arg, ip);
slow:
	count(TL_STAT_SLOW_NOT_FAST);
up:
	count(TL_STAT_UPCALL);
	return TC_ACT_OK;
}

SEC("classifier")
int tl_inject(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	struct tl_port *port = bpf_map_lookup_elem(&tl_ports, &ifindex);
	if (!port || port->role != TL_ROLE_UPCALL)
		return TC_ACT_SHOT;
	count(TL_STAT_INJECT);
	return bpf_redirect(port->peer_ifindex, 0);
}
