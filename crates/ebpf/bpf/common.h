/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * tunlab's kernel datapath: what the programs and their loader share.
 *
 * Every struct here has a twin in crates/ebpf/src/maps.rs with the same
 * layout (checked there by size tests); change both together.
 */
#ifndef TUNLAB_COMMON_H
#define TUNLAB_COMMON_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Debian 12's uapi headers predate these adjust-room flags (Linux 6.3). */
#ifndef BPF_F_ADJ_ROOM_DECAP_L3_IPV4
#define BPF_F_ADJ_ROOM_DECAP_L3_IPV4 (1ULL << 7)
#define BPF_F_ADJ_ROOM_DECAP_L3_IPV6 (1ULL << 8)
#endif

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define ETH_P_ARP 0x0806
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8
#define ETH_P_TEB 0x6558

/*
 * The flow key, word for word dp::key::FlowKey (crates/dp/src/key.rs):
 *   w0  in_port | dl_type << 32 | vlan_tci << 48
 *   w1  dl_src | nw_proto << 48 | nw_tos << 56
 *   w2  dl_dst | tp_src << 48
 *   w3  nw_src | nw_dst << 32
 *   w4  tp_dst | tun_family << 16
 *   w5  tun_id
 *   w6  tun_src | tun_dst << 32
 *   w7..w10   ipv6_src hi/lo, ipv6_dst hi/lo
 *   w11..w14  tun_ipv6_src hi/lo, tun_ipv6_dst hi/lo
 *   w15..w18  tun_metadata0..7, two to a word (even ones low)
 * Numbers are kept as values (a MAC is its 48 bits, an address its
 * 32 bits), never in network byte order.
 */
#define TL_KEY_WORDS 19
struct tl_key {
	__u64 w[TL_KEY_WORDS];
};

/*
 * The flow cache's key: only the words the megaflow mask keeps, packed
 * (word i is key word idx[i]; unused ones 0), as OVS hashes a subtable's
 * masked words only. 80 bytes where the whole key is 152: with the
 * kernel's 48-byte element header and the 64-byte value, an entry is
 * three cache lines, where a million flows miss every one of them.
 */
#define TL_CKEY_WORDS 10
struct tl_ckey {
	__u64 w[TL_CKEY_WORDS];
};

/* A megaflow mask, and which of its words the cache key packs. A mask
 * of more than TL_CKEY_WORDS words (n = TL_MASK_TOO_WIDE) caches nothing;
 * n = 0: the slot is unused.
 *
 * The cache holds flows under up to TL_MAX_MASKS masks, each flow under
 * the mask its own classification produced (OVS's megaflows). Mask 0 is
 * the union of every rule's mask, for flows the switch cannot give a mask
 * of their own (all slots taken). A cache key names its mask in the top
 * byte of its in_port (word 0, bits 24..31: ports the kernel serves are
 * numbered below 2^24), so that two masks packing the same words never
 * share an entry; mask 0's number is 0, so its keys are packed as they
 * always were. */
#define TL_MASK_TOO_WIDE 0xff
#define TL_MAX_MASKS 16
#define TL_MASK_ID_SHIFT 24
struct tl_mask {
	struct tl_key m;
	__u8 idx[TL_CKEY_WORDS];
	__u8 n;
	__u8 pad[5];
	/* m's words in packing order (pm[i] = m.w[idx[i]], 0 past n): a
	 * key is packed without a branch, which keeps the verifier's paths
	 * through a lookup of many masks few. */
	__u64 pm[TL_CKEY_WORDS];
};

/* The masks in use, in the order a lookup tries them. */
struct tl_mask_order {
	__u32 count;
	__u8 id[TL_MAX_MASKS];
};

/* Per CPU, by the low bits of the packet's hash: the mask that matched
 * last (OVS's per-CPU mask cache), tried first. */
#define TL_MASK_HINTS 256

/* A flow's actions, compiled by the switch from its rule's ops. */
enum tl_op_kind {
	/* Decapsulated or local frame to a tenant veth (arg: its ifindex). */
	TL_OP_OUTPUT_PORT = 1,
	/* Push the outer headers of template `arg` and send to the underlay. */
	TL_OP_OUTPUT_TUNNEL = 2,
	/* Push a VLAN tag: TPID arg16 (host order), TCI arg. */
	TL_OP_PUSH_VLAN = 3,
	/* Pop the outermost VLAN tag. */
	TL_OP_POP_VLAN = 4,
	/* Out of a device as the frame is (a QinQ port's underlay). */
	TL_OP_OUTPUT_DEV = 5,
};

#define TL_MAX_OPS 4
struct tl_op {
	__u8 kind;
	__u8 flags;
	/* push_vlan: the TPID; an output: its ofport (for the port's
	 * counters; 0: not counted). */
	__u16 arg16;
	__u32 arg;
};

/* What the kernel forwarded or dropped itself, per port (the slow path
 * counts what it handles): OVS's vport statistics. A frame that goes up
 * is not counted here. */
struct tl_port_stats {
	__u64 rx_packets;
	__u64 rx_bytes;
	__u64 tx_packets;
	__u64 tx_bytes;
	__u64 rx_dropped;
};

/*
 * A cached flow. Only an entry whose generation is the table's current
 * one is used: the switch bumps the generation on every change to the
 * flow table, the TLV map or the ports, so nothing stale forwards once a
 * change has returned, without walking a million entries.
 *
 * One value for all CPUs, stored in the hash element right after the key
 * (a per-CPU value is a separate allocation: one more cache miss per
 * packet with a million flows); the counters are added atomically.
 */
struct tl_flow {
	__u64 generation;
	__u64 packets;
	__u64 bytes;
	__u32 n_ops; /* 0: drop */
	/* When a packet last used the entry, in units of 2^20 ns of the
	 * coarse monotonic clock (wraps after 52 days; compared modulo 2^32):
	 * the switch's revalidator deletes idle entries. */
	__u32 used;
	struct tl_op ops[TL_MAX_OPS];
};
#define TL_USED_SHIFT 20

/* Outer headers of one tunnel destination, built once by the switch
 * (OVS's "build" step); per packet only lengths, the IPv4 checksum and
 * the UDP source port are patched ("push"). */
#define TL_TMPL_MAX 128
enum tl_tunnel_kind {
	TL_GENEVE = 1,
	TL_VXLAN = 2,
	TL_GRE = 3,
	TL_NVGRE = 4,
};
struct tl_template {
	__u8 kind;
	__u8 family;	/* 4 or 6 */
	__u8 len;	/* bytes of hdr: outer IP .. tunnel header and options */
	__u8 l4_off;	/* offset of the UDP or GRE header in hdr */
	__u32 ifindex;	/* underlay device the frame leaves by */
	__u16 mtu;	/* its MTU: what the outer IP packet may be */
	__u16 pad;
	__u32 local4;
	__u32 remote4;	/* network byte order, as in the header */
	/* Right after the 20 bytes above, so that a hit on an IPv4 tunnel
	 * reads one cache line of the template (of 10^5 destinations, most
	 * are not in any CPU cache). */
	__u8 hdr[TL_TMPL_MAX];
	__u8 local6[16];
	__u8 remote6[16];
};

/* A tenant-side netdev: its veth (packets from the tenant) or its
 * upcall TAP (packets the switch sends to the tenant). */
enum tl_port_role {
	TL_ROLE_VETH = 1,
	TL_ROLE_UPCALL = 2,
	/* An underlay device carrying a QinQ port's 802.1ad frames. */
	TL_ROLE_QINQ = 3,
};
struct tl_port {
	__u32 ofport;
	__u32 role;
	/* veth, QinQ underlay: the upcall TAP a miss goes to; upcall TAP:
	 * the device what the switch writes there leaves by. */
	__u32 peer_ifindex;
	/* A tenant port with a tl_police entry (so others skip the lookup). */
	__u32 policed;
};

/* Tunnel ports the underlay program decapsulates for: a port with a fixed
 * remote under its remote (IPv4 in the first 4 bytes), and every port also
 * under remote 0, the entry for sources no port names (a port with a
 * flow-chosen remote, or the unknown-remote check). */
struct tl_tunnel_key {
	__u8 proto;	/* IPPROTO_UDP or IPPROTO_GRE */
	__u8 family;
	__u16 dport;	/* host order; 0 for GRE */
	__u8 remote[16];
};
/* A tunnel key (VNI, GRE key) under a tl_tunnels key: which of several
 * ports that differ only in their key a frame belongs to. */
struct tl_tunnel_id_key {
	struct tl_tunnel_key tk;
	__u32 id;
};
struct tl_tunnel_port {
	__u32 ofport;
	__u8 kind;
	__u8 remote_any; /* remote_ip = "flow": any outer source */
	__u8 local_any;	 /* local_ip = 0.0.0.0 / :: */
	__u8 pad;
	__u32 local4;
	__u32 remote4;
	__u8 local6[16];
	__u8 remote6[16];
};

/* Geneve option -> tun_metadataN, as `add-tlv-map` set it. */
#define TL_TLV_FIELDS 8
struct tl_tlv {
	__u16 class; /* host order */
	__u8 type;
	__u8 valid;
};

/* Per-CPU counters, by index. Names in crates/ebpf/src/maps.rs. */
/*
 * A tenant port's ingress policer (OVS's ingress_policing_rate/burst): a
 * token bucket of bytes, refilled at `rate` bytes a second up to `burst`.
 */
struct tl_police {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 rate;
	__u64 burst;
	__u64 tokens;
	__u64 last_ns;
};

enum tl_stat {
	TL_STAT_TENANT_RX = 0,
	TL_STAT_UNDERLAY_RX,
	TL_STAT_HIT,
	TL_STAT_MISS,
	TL_STAT_STALE,
	TL_STAT_UPCALL,
	TL_STAT_INJECT,
	TL_STAT_ENCAP,
	TL_STAT_DECAP,
	TL_STAT_DROP_ACTION,
	TL_STAT_DROP_CRITICAL_OPTION,
	TL_STAT_SLOW_NO_ROUTE,
	TL_STAT_SLOW_NOT_FAST,
	TL_STAT_SLOW_UNKNOWN_REMOTE,
	TL_STAT_ERR_ADJUST,
	TL_STAT_NOT_TUNNEL,
	TL_STAT_TOO_BIG,
	TL_STAT_SLOW_CSUM,
	TL_STAT_DROP_POLICED,
	TL_STAT_SLOW_WIDE_MASK,
	TL_STAT_COUNT,
};

#endif
