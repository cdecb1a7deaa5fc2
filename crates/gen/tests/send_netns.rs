//! The generator on a real wire: a veth pair between two namespaces of its
//! own (removed on drop). Needs root, as CI has.
//!
//! ```text
//!  netns tlgen-PID-0                 netns tlgen-PID-1
//!  [TX rings] tlg0 ═════ veth ═════ tlg1 [RX ring, counter]
//! ```

use std::sync::atomic::AtomicBool;
use tunlab_gen::pool::Pool;
use tunlab_gen::send::{self, Endpoint, Hook, Io, Limit, Live, Measured, Spec};
use tunlab_gen::topo::Wire;
use tunlab_gen::Sizes;

fn try_send(
    io: Io,
    desc: &str,
    sizes: Sizes,
    threads: usize,
    rate: f64,
    n: u64,
) -> (Pool, Result<Measured, String>) {
    try_send_hooked(io, None, desc, sizes, threads, rate, n)
}

/// As [`try_send`], with the in-kernel counter at `hook`.
fn try_send_hooked(
    io: Io,
    hook: Option<Hook>,
    desc: &str,
    sizes: Sizes,
    threads: usize,
    rate: f64,
    n: u64,
) -> (Pool, Result<Measured, String>) {
    let b = tunlab_gen::builder(desc, sizes).unwrap();
    let pool = Pool::new(&b, threads, 7).unwrap();
    let wire = Wire::create(pool.max_len()).unwrap();
    let spec = Spec {
        tx: wire.tx(),
        rx: Some(wire.rx()),
        rate_pps: Some(rate),
        limit: Limit::Count(n),
        io,
        count_hook: hook,
    };
    let m = send::run(&pool, &spec, &AtomicBool::new(false), &Live::default());
    (pool, m)
}

fn send(io: Io, desc: &str, sizes: Sizes, threads: usize, rate: f64, n: u64) -> (Pool, Measured) {
    let (pool, m) = try_send(io, desc, sizes, threads, rate, n);
    (pool, m.unwrap())
}

#[test]
fn every_frame_sent_at_a_low_rate_arrives_once_in_its_flow() {
    // The ring; the in-kernel counter where veth has it cheapest (TC),
    // and in veth's XDP.
    for (io, hook) in [
        (Io::Packet, None),
        (Io::Xdp, None),
        (Io::Xdp, Some(Hook::Xdp)),
    ] {
        every_frame_arrives_once(io, hook);
    }
}

fn every_frame_arrives_once(io: Io, hook: Option<Hook>) {
    // 4 x 3 x 2 = 24 flows, two sending threads.
    let (_, m) = try_send_hooked(
        io,
        hook,
        "Ether()/IP(src=10.0.0.1-10.0.0.4,dst=[10.1.0.1,10.1.0.2,10.1.0.3])/UDP(dport=1000-1001)",
        Sizes::Fixed(64),
        2,
        20_000.0,
        12_000,
    );
    let m = m.unwrap();
    // veth has no zero-copy AF_XDP: copy mode, and it says so.
    let expect = match io {
        Io::Xdp => "xdp (copy)",
        _ => "packet",
    };
    assert_eq!(m.io, expect);
    // Counted in the kernel (TC on veth unless XDP is asked for; veth has
    // the driver's XDP) or through the RX ring; the figures below are the
    // same every way.
    let counted = match (io, hook) {
        (Io::Xdp, None) => "tc",
        (Io::Xdp, Some(_)) => "xdp (driver)",
        _ => "packet",
    };
    assert_eq!(m.rx_io, counted);
    assert_eq!(m.tx_packets, 12_000);
    assert_eq!(m.rx_packets, 12_000, "{m:?}");
    assert_eq!(
        (m.lost, m.duplicates, m.reordered, m.rx_ring_drops),
        (0, 0, 0, 0)
    );
    assert_eq!(m.flows, 24);
    assert_eq!(m.flows_with_loss, 0);
    assert!(
        m.per_flow.iter().all(|&(t, r)| t == 500 && r == 500),
        "{:?}",
        m.per_flow
    );
    assert_eq!(m.tx_bytes, 12_000 * 64);
    assert_eq!(m.rx_bytes, m.tx_bytes);
    // 12000 frames at 20 kfps take 0.6 s; the rate was held.
    assert!(
        m.duration_s > 0.55 && m.duration_s < 1.5,
        "{}",
        m.duration_s
    );
    let l = m.latency.expect("latency");
    assert_eq!(l.samples, 12_000);
    assert!(
        l.min_us > 0.0 && l.min_us <= l.p50_us && l.p99_us <= l.max_us,
        "{l:?}"
    );
}

#[test]
fn the_articles_packet_jumbo_frames_and_imix_arrive_whole() {
    whole(Io::Packet, true);
    whole(Io::Xdp, false);
}

/// A UMEM frame holds 4096 bytes: `--io xdp` refuses jumbo frames by
/// name, and `--io auto` sends them through AF_PACKET and says why.
#[test]
fn xdp_refusals_are_named_and_auto_falls_back() {
    let article = "Ether()/IP()/UDP(dport=6081)/GENEVE(vni=6)/Ether()/IP()/UDP()/pad";
    let (_, e) = try_send(Io::Xdp, article, Sizes::Fixed(9000), 1, 10_000.0, 100);
    let e = e.unwrap_err();
    assert!(e.contains("--io xdp") && e.contains("4096"), "{e}");
    let (_, m) = send(Io::Auto, article, Sizes::Fixed(9000), 1, 10_000.0, 100);
    assert!(m.io.starts_with("packet (AF_XDP refused"), "{}", m.io);
    assert!(m.io.contains("4096"), "{}", m.io);
    assert_eq!((m.rx_packets, m.lost), (100, 0));
    // Where it is taken, auto is AF_XDP.
    let (_, m) = send(Io::Auto, article, Sizes::Fixed(128), 1, 10_000.0, 100);
    assert_eq!((m.io.as_str(), m.rx_packets), ("xdp (copy)", 100));
}

fn whole(io: Io, jumbo: bool) {
    let article = "Ether(src='40:a6:b7:0b:e9:b1',dst='fa:16:3e:40:4d:7d')/Dot1Q(vlan=177,type='IPv4')/IP(proto=17,src='172.17.2.163',dst='172.17.2.60')/UDP(sport=57025,dport=6081)/GENEVE(vni=6,opt=ovn(ingress=3,egress=2))/Ether(src='fa:16:3e:7f:a1:49',dst='fa:16:3e:a0:1f:28',type=0x0800)/IP(src='192.168.2.1',dst='192.168.2.181')/UDP(dport=1000,sport=2000)/pad";
    let plain = "Ether()/IP(src=10.0.0.1-10.0.0.5)/UDP()";
    for (desc, sizes) in [
        (article, Sizes::Fixed(128)),
        (article, Sizes::Fixed(9000)),
        (plain, Sizes::Imix),
    ] {
        if sizes == Sizes::Fixed(9000) && !jumbo {
            continue;
        }
        let (pool, m) = send(io, desc, sizes.clone(), 1, 10_000.0, 1200);
        assert_eq!((m.rx_packets, m.lost), (1200, 0), "{sizes:?}: {m:?}");
        assert_eq!(m.rx_bytes, m.tx_bytes, "{sizes:?}");
        if sizes == Sizes::Imix {
            // 100 rounds of 7x64 + 4x594 + 1x1518.
            assert_eq!(m.tx_bytes, 100 * (7 * 64 + 4 * 594 + 1518));
            assert_eq!(pool.len(), 60, "lcm of 5 flows and 12 sizes");
        }
    }
}

#[test]
fn a_missing_interface_is_named_and_nothing_hangs() {
    let b = tunlab_gen::builder("Ether()/IP()/UDP()", Sizes::Fixed(64)).unwrap();
    let pool = Pool::new(&b, 2, 1).unwrap();
    let wire = Wire::create(pool.max_len()).unwrap();
    let mut tx = wire.tx();
    tx.ifname = "tl-nope0".into();
    let spec = Spec {
        tx,
        rx: Some(wire.rx()),
        rate_pps: None,
        limit: Limit::Count(10),
        io: Io::Packet,
        count_hook: None,
    };
    let e = send::run(&pool, &spec, &AtomicBool::new(false), &Live::default()).unwrap_err();
    assert!(e.contains("tl-nope0"), "{e}");
    let spec = Spec {
        tx: wire.tx(),
        rx: Some(Endpoint {
            ifname: "tlg1".into(),
            netns: Some("tl-no-such-netns".into()),
        }),
        rate_pps: None,
        limit: Limit::Count(10),
        io: Io::Packet,
        count_hook: None,
    };
    let e = send::run(&pool, &spec, &AtomicBool::new(false), &Live::default()).unwrap_err();
    assert!(e.contains("tl-no-such-netns"), "{e}");
}
