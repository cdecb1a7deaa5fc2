//! Faults under load, on either datapath: the underlay link down and up,
//! the underlay MTU lowered, a tenant port deleted. Each keeps the other
//! traffic going; the kernel and userspace test files run each on theirs.

use super::*;

/// A TCP stream from ta to tb for `secs`, written as fast as it goes; the
/// receiver's bytes per 100 ms. Panics if the connection breaks.
fn tcp_stream_bins(l: &Lab, secs: f64) -> std::thread::JoinHandle<Vec<u64>> {
    use std::io::{Read, Write};
    let server = in_ns(l.tb.name(), move || {
        let listener = std::net::TcpListener::bind("192.168.7.2:7002").unwrap();
        let (mut c, _) = listener.accept().unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let start = std::time::Instant::now();
        let mut bins = vec![0u64; (secs * 10.0) as usize + 20];
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = retry_eintr(|| c.read(&mut buf)).expect("the stream broke (receiver)");
            if n == 0 {
                break;
            }
            let i = (start.elapsed().as_millis() / 100) as usize;
            if let Some(b) = bins.get_mut(i) {
                *b += n as u64;
            }
        }
        bins
    });
    let client = in_ns(l.ta.name(), move || {
        let mut c = None;
        for _ in 0..50 {
            match std::net::TcpStream::connect("192.168.7.2:7002") {
                Ok(s) => {
                    c = Some(s);
                    break;
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
            }
        }
        let mut c = c.expect("connect through the node");
        // A stalled path fails the test instead of hanging it.
        c.set_write_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let buf = vec![0x5au8; 1 << 16];
        let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
        while std::time::Instant::now() < end {
            c.write_all(&buf).expect("the stream broke (sender)");
        }
    });
    std::thread::spawn(move || {
        client.join().expect("sender");
        server.join().expect("receiver")
    })
}

/// The underlay link goes down for a second under a TCP stream and comes
/// back: the connection survives (TCP retransmits what was lost), data
/// flows again once the link is up, and the node still answers.
pub fn underlay_down_and_up_under_load(dp: Datapath) {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &dp.config(&l.hv1, c1), &dp.config(&l.hv2, c2));
    traffic_both_ways(&l, "before the fault");
    let stream = tcp_stream_bins(&l, 6.0);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    l.hv1.ip(&["link", "set", &l.u1, "down"]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    l.hv1.ip(&["link", "set", &l.u1, "up"]).unwrap();
    let bins = stream.join().expect("the TCP connection survived");
    // Down from bin 15 to 25; allow TCP's back-off (up to 2 s) to resume.
    let after: u64 = bins[45..60].iter().sum();
    eprintln!("underlay down/up: bins {bins:?}");
    assert!(
        bins[5..15].iter().sum::<u64>() > 0,
        "no data before the fault"
    );
    assert!(
        after > 0,
        "no data in the last 1.5 s after the link came back: {bins:?}"
    );
    assert!(
        ctl(&l.dir.join("n1.ctl"), &["show"]).0,
        "n1 stopped answering"
    );
    traffic_both_ways(&l, "after the link came back");
    drop((s1.stop(), s2.stop()));
}

/// The underlay MTU is lowered under a TCP stream: the node answers the
/// now too-big frames with ICMP "fragmentation needed" carrying the new
/// path MTU, the tenant's TCP lowers its segment size, and the stream goes
/// on.
pub fn underlay_mtu_lowered_under_load(dp: Datapath) {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &dp.config(&l.hv1, c1), &dp.config(&l.hv2, c2));
    traffic_both_ways(&l, "before the change");
    let stream = tcp_stream_bins(&l, 6.0);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for (ns, dev) in [(&l.hv1, &l.u1), (&l.hv2, &l.u2)] {
        ns.ip(&["link", "set", dev, "mtu", "1400"]).unwrap();
    }
    let bins = stream.join().expect("the TCP connection survived");
    eprintln!("underlay MTU 1500 -> 1400: bins {bins:?}");
    let after: u64 = bins[40..60].iter().sum();
    assert!(
        after > 0,
        "the stream stalled after the MTU change: {bins:?}"
    );
    // The tenant learnt the smaller path MTU from the node's ICMP answer.
    let route = l.ta.ip(&["route", "get", "192.168.7.2"]).unwrap();
    let st = node_stats(&l.dir, "n1");
    let answered = if dp.on_kernel() {
        counter(&st, "kernel_too_big")
    } else {
        counter(&st, "dropped too_big_icmp_sent")
    };
    assert!(answered > 0, "no too-big answer counted: {st}");
    let err = s1.stop();
    assert!(err.contains("underlay MTU now 1400 (was 1500)"), "{err}");
    assert!(
        route.contains(" mtu 1"),
        "no path MTU in the tenant: {route}"
    );
    eprintln!("tenant's route after the change: {}", route.trim());
    s2.stop();
}

/// A tenant port deleted while it carries UDP load (about 20 kpps): the other tenant's
/// TCP stream through the same node never stops, the port's devices and
/// programs go, and the node keeps answering.
pub fn tenant_port_deleted_under_load(dp: Datapath) {
    let l = lab();
    // The first tenant over VXLAN, the added one over Geneve (as in
    // ports_added_and_removed_at_run_time).
    let (c1, c2) = pair_configs(&l, "vxlan");
    let (s1, s2) = start_pair(&l, &dp.config(&l.hv1, c1), &dp.config(&l.hv2, c2));
    let (k1, k2) = (l.dir.join("n1.ctl"), l.dir.join("n2.ctl"));
    add_tenant_over_geneve(&l, &k1, &k2, dp.tenant_kind());
    traffic_both_ways(&l, "before the deletion");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = in_ns(l.ta.name(), {
        let stop = stop.clone();
        move || {
            let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
            let mut sent = 0u64;
            // About 20,000 datagrams a second: load, not a flood that
            // would starve everything on two CPUs (see docs/results/reliability.md).
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for _ in 0..100 {
                    // Errors once the device is gone are the point.
                    if s.send_to(&[0u8; 1000], "192.168.8.2:9").is_ok() {
                        sent += 1;
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            sent
        }
    });
    let stream = tcp_stream_bins(&l, 5.0);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (ok, _, err) = ctl(&k1, &["del-port", "tap5-n1"]);
    assert!(ok, "{err}");
    let bins = stream
        .join()
        .expect("the other tenant's connection survived");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flooded = flood.join().unwrap();
    let empty: Vec<usize> = (3..49).filter(|&i| bins[i] == 0).collect();
    eprintln!("tenant deleted under a load of {flooded} datagrams; empty 100-ms bins of the other tenant: {empty:?}");
    assert!(flooded > 1000, "the deleted port carried no load");
    assert!(
        empty.is_empty(),
        "the other tenant's stream stopped: {bins:?}"
    );
    let (ok, show, _) = ctl(&k1, &["show"]);
    assert!(ok && !show.contains("tap5-n1"), "{show}");
    for ns in [&l.hv1, &l.ta] {
        assert!(
            ns.ip(&["link", "show", "tap5-n1"]).is_err(),
            "the deleted port's device is still in {}",
            ns.name()
        );
    }
    traffic_both_ways(&l, "after the deletion");
    drop((s1.stop(), s2.stop()));
}

/// A tenant floods (UDP as fast as one thread sends) through a port
/// policed at 20 Mbit/s (`ingress_policing_rate`, as OVS): what passes
/// stays near the rate, the rest is counted as policed, and the other
/// tenant's TCP stream through the same node never stops.
pub fn policed_flood_leaves_the_other_tenant_alone(dp: Datapath) {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "vxlan");
    let (s1, s2) = start_pair(&l, &dp.config(&l.hv1, c1), &dp.config(&l.hv2, c2));
    let (k1, k2) = (l.dir.join("n1.ctl"), l.dir.join("n2.ctl"));
    add_tenant_with(
        &l,
        &k1,
        &k2,
        dp.tenant_kind(),
        "geneve",
        "ingress_policing_rate=20000 ingress_policing_burst=2000",
    );
    traffic_both_ways(&l, "before the flood");
    let rx_before = tenant_rx(&l.tb, "tap5-n2");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = in_ns(l.ta.name(), {
        let stop = stop.clone();
        move || {
            let s = std::net::UdpSocket::bind("192.168.8.1:0").unwrap();
            let mut sent = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if s.send_to(&[0u8; 1000], "192.168.8.2:9").is_ok() {
                    sent += 1;
                }
            }
            sent
        }
    });
    let t0 = std::time::Instant::now();
    let bins = tcp_stream_bins(&l, 5.0)
        .join()
        .expect("the other tenant's connection survived");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flooded = flood.join().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let through = tenant_rx(&l.tb, "tap5-n2") - rx_before;
    let st = node_stats(&l.dir, "n1");
    let policed = if dp.on_kernel() {
        counter(&st, "kernel_drop_policed")
    } else {
        counter(&st, "dropped policed")
    };
    let empty: Vec<usize> = (3..49).filter(|&i| bins[i] == 0).collect();
    // 1042-byte frames at 20 Mbit/s: about 2,400 a second, plus the burst.
    let allowed = (20e6 / 8.0 / 1042.0 * secs * 1.25) as u64 + 300;
    eprintln!(
        "policed flood: {flooded} sent in {secs:.1} s, {through} through (allowed {allowed}), {policed} policed; the other tenant's empty 100-ms bins: {empty:?}, {} MB",
        bins.iter().sum::<u64>() >> 20
    );
    assert!(
        flooded > 10 * through,
        "the flood was not a flood: {flooded} sent, {through} through"
    );
    assert!(
        through <= allowed,
        "{through} frames through a 20 Mbit/s policer in {secs:.1} s"
    );
    assert!(
        through > allowed / 4,
        "the policer let too little through: {through}"
    );
    assert!(policed > 0, "nothing counted as policed: {st}");
    assert!(
        empty.is_empty(),
        "the other tenant's stream stopped: {bins:?}"
    );
    drop((s1.stop(), s2.stop()));
}
