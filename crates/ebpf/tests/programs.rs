//! The kernel datapath's programs on this kernel, through
//! BPF_PROG_TEST_RUN: bytes in, verdict and bytes out, checked against
//! wire (which builds and pops the same packets in user space) and dp
//! (which computes the flow key the switch installs under). Needs root,
//! as CI has.

use std::net::IpAddr;
use tunlab_bpf::test_run::{run_tc, TC_ACT_OK, TC_ACT_REDIRECT, TC_ACT_SHOT};
use tunlab_dp::{extract, extract_tunnel, FlowKey, TlvMap};
use tunlab_ebpf::datapath::{FROM_TENANT, FROM_UNDERLAY};
use tunlab_ebpf::maps::{self, Flow, Op, TunnelKey, TunnelPortEntry};
use tunlab_ebpf::KernelDatapath;
use tunlab_wire::geneve::{OptType, OptionRepr, OptionsBuf, OvnPorts, OVN_CLASS, OVN_TYPE};
use tunlab_wire::tunnel::{
    self, EncapSpec, HeaderTemplate, PopConfig, PushMeta, TunnelKind, TunnelMetadata,
};
use tunlab_wire::PacketBuf;

/// A tenant TCP segment: Ethernet, IPv4, TCP with 32 bytes of payload.
fn tenant_frame() -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 20 + 32];
    f[0..6].copy_from_slice(&[0xfa, 0x16, 0x3e, 0xa0, 0x1f, 0x28]);
    f[6..12].copy_from_slice(&[0xfa, 0x16, 0x3e, 0x7f, 0xa1, 0x49]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&72u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&[192, 168, 2, 1]);
    ip[16..20].copy_from_slice(&[192, 168, 2, 181]);
    let tcp = &mut f[34..54];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
    tcp[12] = 0x50;
    f
}

fn ovn_option() -> OptionsBuf {
    let mut o = OptionsBuf::new();
    o.push(OptionRepr {
        class: OVN_CLASS,
        opt_type: OptType(OVN_TYPE),
        data: &OvnPorts::new(3, 2).unwrap().data(),
    })
    .unwrap();
    o
}

fn encapsulate(
    kind: TunnelKind,
    src: &str,
    dst: &str,
    options: OptionsBuf,
    inner: &[u8],
) -> Vec<u8> {
    encapsulate_csum(kind, src, dst, options, inner, false)
}

/// As wire pushes it, with the outer UDP checksum on or off.
fn encapsulate_csum(
    kind: TunnelKind,
    src: &str,
    dst: &str,
    options: OptionsBuf,
    inner: &[u8],
    csum: bool,
) -> Vec<u8> {
    let mut spec = EncapSpec::new(kind, src.parse().unwrap(), dst.parse().unwrap(), Some(6));
    spec.geneve_options = options;
    spec.csum = csum;
    let t = HeaderTemplate::build(&spec).unwrap();
    let mut p = PacketBuf::new(vec![0u8; 256 + inner.len()], 256);
    p.extend(inner).unwrap();
    tunnel::push(&t, &mut p, PushMeta::default()).unwrap();
    p.data().to_vec()
}

fn tlv() -> TlvMap {
    let mut t = TlvMap::default();
    t.add("{class=0x0102,type=0x80,len=4}->tun_metadata0")
        .unwrap();
    t
}

/// The key the switch would install under for this packet from the
/// underlay on tunnel port `ofport`: wire pops it, dp extracts.
fn user_space_key(packet: &[u8], kind: TunnelKind, ofport: u32) -> FlowKey {
    let mut p = PacketBuf::with_range(packet.to_vec(), 0, packet.len()).unwrap();
    let mut meta = TunnelMetadata::default();
    let cfg = PopConfig {
        gre_as_nvgre: kind == TunnelKind::Nvgre,
        ..PopConfig::default()
    };
    let t = tlv();
    tunnel::pop(&mut p, &cfg, |c, ty| t.knows(c, ty), &mut meta).unwrap();
    let mut k = FlowKey::default();
    extract(p.data(), ofport, &mut k);
    extract_tunnel(&meta, &t, &mut k);
    k
}

/// Megaflow masks of whole words that between them keep every word of
/// the kernel's key, each within what the cache key packs: a frame's key,
/// hit under each, agrees with user space's in every field the programs
/// extract.
fn covering_masks() -> [FlowKey; 2] {
    let words = tunlab_dp::key::DP_WORDS;
    let max = maps::CKEY_WORDS;
    let mut a = FlowKey::default();
    let mut b = FlowKey::default();
    for i in 0..words {
        if i < max {
            a.w[i] = u64::MAX;
        }
        if i == 0 || i >= max {
            b.w[i] = u64::MAX;
        }
    }
    [a, b]
}

/// The first of [`covering_masks`], for tests that need one.
fn wide() -> FlowKey {
    covering_masks()[0]
}

fn datapath_for(kind: TunnelKind, family: u8) -> KernelDatapath {
    let mut dp = KernelDatapath::load(1024, 16, None).expect("programs load (run as root)");
    let (proto, dport, k) = match kind {
        TunnelKind::Geneve => (17, 6081, maps::KIND_GENEVE),
        TunnelKind::Vxlan => (17, 4789, maps::KIND_VXLAN),
        TunnelKind::Gre => (47, 0, maps::KIND_GRE),
        TunnelKind::Nvgre => (47, 0, maps::KIND_NVGRE),
        _ => unreachable!(),
    };
    dp.add_tunnel(
        TunnelKey {
            proto,
            family,
            dport,
            remote: [0; 16],
        },
        TunnelPortEntry {
            ofport: 10,
            kind: k,
            remote_any: 1,
            local_any: 1,
            ..TunnelPortEntry::default()
        },
    )
    .unwrap();
    dp.set_tlv(&[(OVN_CLASS, OVN_TYPE, 0)]).unwrap();
    dp.revalidate(&wide()).unwrap();
    dp
}

/// The tenant frame in Geneve over IPv4 with OVN's option.
fn geneve_ovn_packet() -> Vec<u8> {
    encapsulate(
        TunnelKind::Geneve,
        "172.17.2.163",
        "172.17.2.60",
        ovn_option(),
        &tenant_frame(),
    )
}

fn output_port(ifindex: u32) -> Flow {
    let mut f = Flow {
        n_ops: 1,
        ..Flow::default()
    };
    f.ops[0] = Op {
        kind: maps::OP_OUTPUT_PORT,
        arg: ifindex,
        ..Op::default()
    };
    f
}

fn stat(dp: &KernelDatapath, name: &str) -> u64 {
    dp.stats()
        .unwrap()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
}

/// Every fast-path encapsulation, IPv4 and IPv6 underlays: a miss goes
/// up untouched; once the switch's key is installed the same packet is
/// decapsulated to exactly the tenant frame and redirected.
#[test]
fn decapsulation_matches_user_space() {
    let cases = [
        (
            TunnelKind::Geneve,
            "172.17.2.163",
            "172.17.2.60",
            ovn_option(),
        ),
        (TunnelKind::Geneve, "fd00::1", "fd00::2", ovn_option()),
        (
            TunnelKind::Geneve,
            "172.17.2.163",
            "172.17.2.60",
            OptionsBuf::new(),
        ),
        (
            TunnelKind::Vxlan,
            "172.17.2.163",
            "172.17.2.60",
            OptionsBuf::new(),
        ),
        (TunnelKind::Vxlan, "fd00::1", "fd00::2", OptionsBuf::new()),
        (
            TunnelKind::Gre,
            "172.17.2.163",
            "172.17.2.60",
            OptionsBuf::new(),
        ),
        (
            TunnelKind::Nvgre,
            "172.17.2.163",
            "172.17.2.60",
            OptionsBuf::new(),
        ),
    ];
    for ((kind, src, dst, opts), mask) in cases
        .into_iter()
        .flat_map(|c| covering_masks().map(|m| (c, m)))
    {
        let family = if src.parse::<IpAddr>().unwrap().is_ipv4() {
            4
        } else {
            6
        };
        let mut dp = datapath_for(kind, family);
        dp.revalidate(&mask).unwrap();
        let inner = tenant_frame();
        let pkt = encapsulate(kind, src, dst, opts, &inner);
        let prog = dp.program_fd(FROM_UNDERLAY).unwrap();
        let miss = run_tc(prog, &pkt, 0).unwrap();
        assert_eq!(miss.verdict, TC_ACT_OK, "{kind:?} {src}: a miss goes up");
        assert_eq!(miss.packet, pkt, "{kind:?} {src}: untouched");

        let key = user_space_key(&pkt, kind, 10);
        dp.install(&key, output_port(1)).unwrap();
        let prog = dp.program_fd(FROM_UNDERLAY).unwrap();
        let hit = run_tc(prog, &pkt, 0).unwrap();
        assert_eq!(hit.verdict, TC_ACT_REDIRECT, "{kind:?} {src}: hit");
        assert_eq!(hit.packet, inner, "{kind:?} {src}: decapsulated");
        assert_eq!(
            (stat(&dp, "hit"), stat(&dp, "decap")),
            (1, 1),
            "{kind:?} {src}"
        );
        let flows = dp.flows().unwrap();
        assert_eq!(flows.len(), 1);
        // Counted as the tenant frame, as the userspace path and OVS count.
        assert_eq!(
            (flows[0].1.packets, flows[0].1.bytes),
            (1, inner.len() as u64)
        );
    }
}

/// An outer UDP checksum is verified in the kernel (IPv4 and IPv6, every
/// length up to past one 512-byte piece, odd ones included): a right one
/// is decapsulated, a wrong one goes up to the slow path, which counts it.
#[test]
fn outer_udp_checksums_are_verified() {
    for (src, dst) in [("172.17.2.163", "172.17.2.60"), ("fd00::1", "fd00::2")] {
        let family = if src.contains(':') { 6 } else { 4 };
        let mut dp = datapath_for(TunnelKind::Vxlan, family);
        let mut mask = FlowKey::default();
        mask.set(tunlab_dp::key::f::IN_PORT, u32::MAX as u64);
        dp.revalidate(&mask).unwrap();
        let mut k = FlowKey::default();
        k.set(tunlab_dp::key::f::IN_PORT, 10);
        dp.install(&k, output_port(1)).unwrap();
        for extra in [0usize, 1, 2, 3, 500, 1001, 1400] {
            let mut inner = tenant_frame();
            inner.extend((0..extra).map(|i| (i * 7) as u8));
            let pkt =
                encapsulate_csum(TunnelKind::Vxlan, src, dst, OptionsBuf::new(), &inner, true);
            let l4 = if family == 4 { 34 } else { 54 };
            assert_ne!(&pkt[l4 + 6..l4 + 8], &[0, 0], "a checksum was written");
            let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
            assert_eq!(
                (r.verdict, &r.packet),
                (TC_ACT_REDIRECT, &inner),
                "{src} +{extra}"
            );
            let mut bad = pkt.clone();
            let last = bad.len() - 1;
            bad[last] ^= 0x40;
            let before = stat(&dp, "slow_csum_not_verified");
            let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &bad, 0).unwrap();
            assert_eq!(
                (r.verdict, &r.packet),
                (TC_ACT_OK, &bad),
                "{src} +{extra} corrupted"
            );
            assert_eq!(stat(&dp, "slow_csum_not_verified"), before + 1);
        }
    }
}

/// After a revalidation, what was installed no longer forwards.
#[test]
fn revalidation_retires_entries() {
    let mut dp = datapath_for(TunnelKind::Geneve, 4);
    let pkt = geneve_ovn_packet();
    dp.install(
        &user_space_key(&pkt, TunnelKind::Geneve, 10),
        output_port(1),
    )
    .unwrap();
    let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
    assert_eq!(r.verdict, TC_ACT_REDIRECT);
    dp.revalidate(&wide()).unwrap();
    let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
    assert_eq!(r.verdict, TC_ACT_OK);
    assert_eq!(stat(&dp, "stale"), 1);
    assert!(dp.flows().unwrap().is_empty());
}

/// A megaflow mask: an entry installed for one TCP source port serves
/// another when the table never looks at ports.
#[test]
fn masked_entries_cover_their_megaflow() {
    let mut dp = datapath_for(TunnelKind::Vxlan, 4);
    let mut mask = FlowKey::default();
    mask.set(tunlab_dp::key::f::IN_PORT, u32::MAX as u64);
    mask.set(tunlab_dp::key::f::TUN_ID, u64::MAX);
    dp.revalidate(&mask).unwrap();
    let a = encapsulate(
        TunnelKind::Vxlan,
        "172.17.2.163",
        "172.17.2.60",
        OptionsBuf::new(),
        &tenant_frame(),
    );
    let mut other = tenant_frame();
    other[34..36].copy_from_slice(&40001u16.to_be_bytes());
    let b = encapsulate(
        TunnelKind::Vxlan,
        "172.17.2.163",
        "172.17.2.60",
        OptionsBuf::new(),
        &other,
    );
    let k = user_space_key(&a, TunnelKind::Vxlan, 10).masked(&mask);
    dp.install(&k, output_port(1)).unwrap();
    let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &b, 0).unwrap();
    assert_eq!((r.verdict, r.packet), (TC_ACT_REDIRECT, other));
}

/// RFC 8926 § 3.5: a critical option the TLV map does not know is
/// dropped and counted, whatever the cache holds.
#[test]
fn unknown_critical_option_is_dropped() {
    let dp = datapath_for(TunnelKind::Geneve, 4);
    let mut o = OptionsBuf::new();
    o.push(OptionRepr {
        class: 0x0105,
        opt_type: OptType(0x81),
        data: &[1, 2, 3, 4],
    })
    .unwrap();
    let pkt = encapsulate(
        TunnelKind::Geneve,
        "172.17.2.163",
        "172.17.2.60",
        o,
        &tenant_frame(),
    );
    let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
    assert_eq!(r.verdict, TC_ACT_SHOT);
    assert_eq!(stat(&dp, "drop_unknown_critical_option"), 1);
}

/// Frames that are not tunnel packets for this node pass to the stack.
#[test]
fn other_traffic_passes() {
    let dp = datapath_for(TunnelKind::Geneve, 4);
    let mut pkt = encapsulate(
        TunnelKind::Vxlan,
        "172.17.2.163",
        "172.17.2.60",
        OptionsBuf::new(),
        &tenant_frame(),
    );
    let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
    assert_eq!((r.verdict, &r.packet), (TC_ACT_OK, &pkt));
    for n in [0, 13, 14, 30, 40, 60] {
        pkt.truncate(n.min(pkt.len()));
        if pkt.len() < 14 {
            continue; // the kernel refuses runs shorter than Ethernet
        }
        let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
        assert_eq!(r.verdict, TC_ACT_OK, "{n} bytes");
    }
}

/// A frame from an unknown device, or a miss from a tenant port, is never
/// forwarded by the fast path.
#[test]
fn tenant_misses_go_up() {
    let mut dp = datapath_for(TunnelKind::Geneve, 4);
    // Every map's typed view checks its value size against the C one.
    dp.template(&maps::Template::default()).unwrap();
    let r = run_tc(dp.program_fd(FROM_TENANT).unwrap(), &tenant_frame(), 1).unwrap();
    assert_eq!(r.verdict, TC_ACT_OK, "not a tenant port");
    // The loopback device (ifindex 1) as tenant port 1, upcall TAP 99.
    dp.set_port_entry(
        1,
        maps::PortEntry {
            ofport: 1,
            role: maps::ROLE_VETH,
            peer_ifindex: 99,
            policed: 0,
        },
    )
    .unwrap();
    let r = run_tc(dp.program_fd(FROM_TENANT).unwrap(), &tenant_frame(), 1).unwrap();
    assert_eq!(r.verdict, TC_ACT_REDIRECT, "a miss goes to the upcall TAP");
    assert_eq!(stat(&dp, "upcall"), 1);
    // Installed as a drop, the same frame is dropped here.
    let mut k = FlowKey::default();
    extract(&tenant_frame(), 1, &mut k);
    dp.install(&k, Flow::default()).unwrap();
    let r = run_tc(dp.program_fd(FROM_TENANT).unwrap(), &tenant_frame(), 1).unwrap();
    assert_eq!(r.verdict, TC_ACT_SHOT);
}

/// A tenant frame: Ethernet from fa:16:3e:7f:a1:49 of type `et`, then `l3`.
fn tenant_eth(et: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = tenant_frame()[..12].to_vec();
    f.extend_from_slice(&et.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

/// IPv6 from fe80::1 to fe80::2, next header `nh`, then `rest`.
fn tenant_ipv6(nh: u8, rest: &[u8]) -> Vec<u8> {
    let mut ip = vec![0x60, 0, 0, 1];
    ip.extend_from_slice(&(rest.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[nh, 64]);
    for last in [1, 2] {
        ip.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last]);
    }
    ip.extend_from_slice(rest);
    tenant_eth(0x86dd, &ip)
}

/// Frames whose keys hold fields only user space extracts (ARP and ND
/// addresses, fragments, TTL, TCP flags, the flow label): the programs
/// extract the rest of each key as user space does, so an entry installed
/// under user space's key is hit. But for an IPv6 first fragment: user
/// space reads the protocol and ports behind the fragment header, as OVS
/// does, the programs read nw_proto 44 and no ports, as for a later
/// fragment, whose entry then answers the first fragment too (so the
/// switch keeps flows that read an IPv6 fragment's L4 fields out of the
/// cache).
#[test]
fn tenant_keys_agree_with_user_space_on_what_the_programs_extract() {
    let udp = [0x07, 0xd0, 0, 53, 0, 16, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 2];
    arp.extend_from_slice(&tenant_frame()[6..12]);
    arp.extend_from_slice(&[10, 0, 0, 1, 2, 0, 0, 0, 0, 0xb, 10, 0, 0, 2]);
    let mut ns = vec![135, 0, 0, 0, 0, 0, 0, 0];
    ns.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    ns.extend_from_slice(&[1, 1, 2, 0, 0, 0, 0, 0xa]);
    let mut later4 = tenant_frame();
    later4[14 + 6..14 + 8].copy_from_slice(&185u16.to_be_bytes());
    let fragment = |offlg: u16| {
        let mut f = vec![17, 0];
        f.extend_from_slice(&offlg.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 7]);
        f.extend_from_slice(&udp);
        f
    };
    let later6 = tenant_ipv6(44, &fragment(185 << 3));
    let first6 = tenant_ipv6(44, &fragment(1));
    let agree = [
        ("ipv4 tcp", tenant_frame()),
        ("arp", tenant_eth(0x0806, &arp)),
        ("nd ns", tenant_ipv6(58, &ns)),
        ("ipv4 later fragment", later4),
        ("ipv6 udp", tenant_ipv6(17, &udp)),
        ("ipv6 later fragment", later6.clone()),
    ];
    let key = |frame: &[u8]| {
        let mut k = FlowKey::default();
        extract(frame, 1, &mut k);
        k
    };
    for mask in covering_masks() {
        let mut dp = datapath_for(TunnelKind::Geneve, 4);
        // The loopback device (ifindex 1) as tenant port 1, upcall TAP 99.
        dp.set_port_entry(
            1,
            maps::PortEntry {
                ofport: 1,
                role: maps::ROLE_VETH,
                peer_ifindex: 99,
                policed: 0,
            },
        )
        .unwrap();
        let run = |dp: &KernelDatapath, frame: &[u8]| {
            run_tc(dp.program_fd(FROM_TENANT).unwrap(), frame, 1)
                .unwrap()
                .verdict
        };
        // Each frame alone in the cache (a new generation each), as a drop.
        for (name, frame) in &agree {
            dp.revalidate(&mask).unwrap();
            dp.install(&key(frame), Flow::default()).unwrap();
            assert_eq!(run(&dp, frame), TC_ACT_SHOT, "{name}");
        }
        let reads_l4 = mask.get(tunlab_dp::key::f::NW_PROTO) != 0;
        dp.revalidate(&mask).unwrap();
        dp.install(&key(&first6), Flow::default()).unwrap();
        let own = if reads_l4 {
            TC_ACT_REDIRECT
        } else {
            TC_ACT_SHOT
        };
        assert_eq!(run(&dp, &first6), own, "first fragment, its own entry");
        if reads_l4 {
            dp.revalidate(&mask).unwrap();
            dp.install(&key(&later6), Flow::default()).unwrap();
            assert_eq!(run(&dp, &first6), TC_ACT_SHOT, "the later one's entry");
        }
    }
}

/// The revalidator's batched sweep over more entries than one batch
/// holds: every entry seen once, the stale ones deleted (in batches),
/// the fresh ones kept, and the idle ones deleted once the limit passes.
#[test]
fn the_batched_sweep_sees_every_entry_once() {
    let n = 3 * tunlab_ebpf::datapath::BATCH + 123;
    // Room to spare: the sweep would evict over 90 % of the capacity.
    let mut dp = KernelDatapath::load(4 * n as u32, 16, None).expect("programs load (run as root)");
    dp.revalidate(&wide()).unwrap();
    let key = |i: usize| {
        let mut k = FlowKey::default();
        k.w[0] = i as u64 + 1;
        k.w[3] = (i as u64) << 7;
        k
    };
    for i in 0..n {
        dp.install(&key(i), output_port(1)).unwrap();
    }
    // A new generation: all of the above are stale; then as many fresh.
    dp.revalidate(&wide()).unwrap();
    for i in n..2 * n {
        dp.install(&key(i), output_port(1)).unwrap();
    }
    let mut sweeper = dp.sweeper().unwrap();
    let s = sweeper.sweep(std::time::Duration::from_secs(60)).unwrap();
    assert_eq!((s.seen, s.stale, s.idle), (2 * n as u64, n as u64, 0));
    assert_eq!(dp.flows().unwrap().len(), n);
    let s = sweeper.sweep(std::time::Duration::from_secs(60)).unwrap();
    assert_eq!((s.seen, s.stale, s.idle), (n as u64, 0, 0));
    // Idle for longer than 1 ms (the clock counts about 1 ms).
    std::thread::sleep(std::time::Duration::from_millis(20));
    let s = sweeper.sweep(std::time::Duration::from_millis(1)).unwrap();
    assert_eq!((s.seen, s.stale, s.idle), (n as u64, 0, n as u64));
    assert!(dp.flows().unwrap().is_empty());
}

/// A megaflow mask of more words than the cache key packs caches
/// nothing: installs are refused by name, and every packet is a miss the
/// programs count as such (the slow path still forwards it).
#[test]
fn a_mask_too_wide_for_the_cache_key_sends_everything_up() {
    let mut dp = datapath_for(TunnelKind::Geneve, 4);
    let mut mask = wide();
    mask.w[maps::CKEY_WORDS] = u64::MAX;
    dp.revalidate(&mask).unwrap();
    let pkt = geneve_ovn_packet();
    let key = user_space_key(&pkt, TunnelKind::Geneve, 10);
    assert!(matches!(
        dp.install(&key, output_port(1)),
        Err(tunlab_ebpf::datapath::Error::MaskTooWide { words: 11, max: 10 })
    ));
    let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
    assert_eq!((r.verdict, &r.packet), (TC_ACT_OK, &pkt));
    assert_eq!((stat(&dp, "slow_wide_mask"), stat(&dp, "miss")), (1, 1));
    // Back to a mask that fits: cached again.
    dp.revalidate(&wide()).unwrap();
    dp.install(&key, output_port(1)).unwrap();
    let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
    assert_eq!(r.verdict, TC_ACT_REDIRECT);
}

/// A cache nearly full: the sweep deletes the entries used longest ago
/// down to 75 % of its capacity and keeps the recent ones; a full cache
/// refuses installs by name (the revalidator makes room, not the kernel).
#[test]
fn a_nearly_full_cache_evicts_the_least_recently_used() {
    let mut dp = KernelDatapath::load(1000, 16, None).expect("programs load (run as root)");
    dp.revalidate(&wide()).unwrap();
    let key = |i: u64| {
        let mut k = FlowKey::default();
        k.w[0] = i + 1;
        k
    };
    for i in 0..1000 {
        dp.install(&key(i), output_port(1)).unwrap();
    }
    assert!(matches!(
        dp.install(&key(1000), output_port(1)),
        Err(tunlab_ebpf::datapath::Error::CacheFull)
    ));
    // 950 entries: 600 used 100 ms ago, then 350 now.
    for i in 950..1000 {
        dp.remove_flow(&key(i)).unwrap();
    }
    for i in 600..950 {
        dp.remove_flow(&key(i)).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    for i in 600..950 {
        dp.install(&key(i), output_port(1)).unwrap();
    }
    let mut sweeper = dp.sweeper().unwrap();
    let s = sweeper.sweep(std::time::Duration::from_secs(2)).unwrap();
    assert_eq!((s.seen, s.idle, s.stale, s.evicted), (950, 0, 0, 200));
    let left: std::collections::HashSet<u64> = dp
        .flows()
        .unwrap()
        .iter()
        .map(|(k, _)| k.w[0] - 1)
        .collect();
    assert_eq!(left.len(), 750);
    assert!((600..950).all(|i| left.contains(&i)), "a recent entry went");
    // Under 90 %: nothing more goes.
    let s = sweeper.sweep(std::time::Duration::from_secs(2)).unwrap();
    assert_eq!((s.seen, s.evicted), (750, 0));
}

/// What the kernel forwards or drops itself is counted on its ports
/// (OVS's vport statistics), the tenant frame's length on both sides;
/// a miss is not (the slow path counts what it handles).
#[test]
fn hits_and_drops_are_counted_on_their_ports() {
    let mut dp = datapath_for(TunnelKind::Geneve, 4);
    let pkt = geneve_ovn_packet();
    let inner = tenant_frame().len() as u64;
    run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
    assert!(dp.port_stats().unwrap().is_empty(), "a miss was counted");
    let key = user_space_key(&pkt, TunnelKind::Geneve, 10);
    let mut out = output_port(1);
    out.ops[0].arg16 = 2;
    dp.install(&key, out).unwrap();
    for _ in 0..3 {
        let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
        assert_eq!(r.verdict, TC_ACT_REDIRECT);
    }
    let by_port: std::collections::HashMap<u32, maps::PortCounters> =
        dp.port_stats().unwrap().into_iter().collect();
    assert_eq!(
        (
            by_port[&10].rx_packets,
            by_port[&10].rx_bytes,
            by_port[&10].rx_dropped
        ),
        (3, 3 * inner, 0)
    );
    assert_eq!(
        (by_port[&2].tx_packets, by_port[&2].tx_bytes),
        (3, 3 * inner)
    );
    // Installed as a drop: counted as the port's receive drop.
    dp.install(&key, Flow::default()).unwrap();
    let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
    assert_eq!(r.verdict, TC_ACT_SHOT);
    let by_port: std::collections::HashMap<u32, maps::PortCounters> =
        dp.port_stats().unwrap().into_iter().collect();
    assert_eq!((by_port[&10].rx_packets, by_port[&10].rx_dropped), (4, 1));
    dp.forget_port_stats(10);
    assert!(dp.port_stats().unwrap().iter().all(|(p, _)| *p != 10));
}

/// A VXLAN datapath whose union mask is the in-port alone, and `inner`
/// from the far host as it arrives: (datapath, the in-port mask, the
/// packet, its flow key).
fn vxlan_by_in_port(inner: &[u8]) -> (KernelDatapath, FlowKey, Vec<u8>, FlowKey) {
    use tunlab_dp::key::f;
    let mut dp = datapath_for(TunnelKind::Vxlan, 4);
    let mut in_port = FlowKey::default();
    in_port.set(f::IN_PORT, f::IN_PORT.max());
    dp.revalidate(&in_port).unwrap();
    let pkt = encapsulate(
        TunnelKind::Vxlan,
        "172.17.2.163",
        "172.17.2.60",
        OptionsBuf::new(),
        inner,
    );
    let key = user_space_key(&pkt, TunnelKind::Vxlan, 10);
    (dp, in_port, pkt, key)
}

/// Make-before-break, in the order the switch's revalidation takes it: a
/// flow cached under the in-port alone is put in again under a finer mask
/// with other actions, then its old entry goes. A frame of the flow never
/// misses: while both are in one of them answers (the per-CPU hint still
/// names the old mask), and once the old is gone the hint's miss falls
/// through to the new mask.
#[test]
fn a_flow_rebuilt_under_a_new_mask_never_misses() {
    use tunlab_dp::key::f;
    let (mut dp, in_port, pkt, key) = vxlan_by_in_port(&tenant_frame());
    let mut by_dst = in_port;
    by_dst.set(f::NW_DST, f::NW_DST.max());
    let run = |dp: &KernelDatapath| {
        let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
        assert_eq!(r.verdict, TC_ACT_REDIRECT, "a miss");
    };
    let old = dp.install_masked(&key, &in_port, output_port(1)).unwrap();
    run(&dp);
    let new = dp.install_masked(&key, &by_dst, output_port(2)).unwrap();
    assert_ne!(maps::mask_id(&old), maps::mask_id(&new));
    for _ in 0..3 {
        run(&dp);
    }
    dp.remove_packed(&old).unwrap();
    for _ in 0..3 {
        run(&dp);
    }
    assert_eq!((stat(&dp, "miss"), stat(&dp, "hit")), (0, 7));
    // The last three went by the new entry (its output is ifindex 2).
    let flows = dp.flows().unwrap();
    assert_eq!(flows.len(), 1);
    assert_eq!((flows[0].1.ops[0].arg, flows[0].1.packets), (2, 3));
}

/// Every 16th hit on a CPU leaves its whole key in the samples, though
/// the entry it hit keeps the in-port alone: the switch learns there which
/// microflows ride an entry made by another packet.
#[test]
fn hits_leave_samples_of_their_whole_keys() {
    let (mut dp, in_port, pkt, key) = vxlan_by_in_port(&tenant_frame());
    dp.install_masked(&key, &in_port, output_port(1)).unwrap();
    let prog = dp.program_fd(FROM_UNDERLAY).unwrap();
    // A few hits: no sample yet (a new datapath's count starts at 0).
    for _ in 0..3 {
        run_tc(prog, &pkt, 0).unwrap();
    }
    let before = dp.key_samples().unwrap();
    // One at a time: a repeated run would see the frame it decapsulated.
    for _ in 0..600 {
        assert_eq!(run_tc(prog, &pkt, 0).unwrap().verdict, TC_ACT_REDIRECT);
    }
    let samples = dp.key_samples().unwrap();
    // The programs' part of the key: the fields they extract.
    let key = FlowKey::from(maps::Key::from(&key));
    assert!(
        samples.contains(&key) && !before.contains(&key),
        "before {before:?}, after {samples:?}"
    );
}

/// Flows cached under masks of their own: each is found under its mask,
/// masks that pack the same words never answer for each other's entries
/// (the mask's number is in the key), and the order follows the hits.
#[test]
fn flows_under_several_masks_are_found_each_under_its_own() {
    use tunlab_dp::key::f;
    // A tenant frame to 0.0.0.0: its destination packs as 0.
    let mut inner = tenant_frame();
    inner[30..34].copy_from_slice(&[0, 0, 0, 0]);
    let (mut dp, in_port, pkt, key) = vxlan_by_in_port(&inner);
    let (mut by_src, mut by_dst) = (in_port, in_port);
    by_src.set(f::NW_SRC, f::NW_SRC.max());
    by_dst.set(f::NW_DST, f::NW_DST.max());
    // Under "destination": a flow to 10.0.0.7 (the mask is in use).
    let mut to_seven = key;
    to_seven.set(f::NW_DST, 0x0a00_0007);
    let b = maps::mask_id(
        &dp.install_masked(&to_seven, &by_dst, output_port(1))
            .unwrap(),
    );
    // Under "source" (the newest, tried first): a flow from 0.0.0.0,
    // which this frame is not.
    let mut from_zero = key;
    from_zero.set(f::NW_SRC, 0);
    let a = maps::mask_id(
        &dp.install_masked(&from_zero, &by_src, output_port(1))
            .unwrap(),
    );
    assert_eq!(dp.masks()[0], by_src);
    assert!(a != b && a != 0 && b != 0, "{a} {b}");
    assert_eq!(dp.masks().len(), 3);
    // Both masks keep word 3 alone: without its number, the "source"
    // entry (word 3 = 0) would answer this frame's "destination" probe.
    let prog = dp.program_fd(FROM_UNDERLAY).unwrap();
    let r = run_tc(prog, &pkt, 0).unwrap();
    assert_eq!(r.verdict, TC_ACT_OK, "a miss: no entry is this frame's");
    assert_eq!(stat(&dp, "hit"), 0);
    // Its own flow under "destination": found.
    let own = dp.install_masked(&key, &by_dst, output_port(1)).unwrap();
    assert_eq!(maps::mask_id(&own), b);
    for _ in 0..3 {
        let r = run_tc(dp.program_fd(FROM_UNDERLAY).unwrap(), &pkt, 0).unwrap();
        assert_eq!((r.verdict, &r.packet), (TC_ACT_REDIRECT, &inner));
    }
    assert_eq!(stat(&dp, "hit"), 3);
    let mut flows: Vec<FlowKey> = dp.flows().unwrap().into_iter().map(|(k, _)| k).collect();
    flows.sort_by_key(|k| k.w);
    let mut want = vec![
        from_zero.masked(&by_src),
        to_seven.masked(&by_dst),
        key.masked(&by_dst),
    ];
    want.sort_by_key(|k| k.w);
    assert_eq!(flows, want, "unpacked without the mask's number");
    // The mask with the hits goes first.
    assert!(dp.rebalance_masks().unwrap());
    assert_eq!(dp.masks()[0], by_dst);
    assert!(!dp.rebalance_masks().unwrap(), "no new hits, no new order");
    // A new generation forgets the masks but the union.
    dp.revalidate(&in_port).unwrap();
    assert_eq!(dp.masks(), vec![in_port]);
}
