//! The namespace tests of the switch on the kernel (eBPF) datapath: the
//! same two-node lab and the same configurations as switch_netns.rs, with
//! `datapath = "ebpf"` and the tenants on veth ports.
//!
//! ```text
//!  netns ta             netns hv1                               netns hv2             netns tb
//!  192.168.7.1 ─veth─ [TC: tl_from_tenant] ─veth─ 172.31.0.1 ═══ 172.31.0.2 ─veth─ [TC] ─veth─ 192.168.7.2
//!                     [tunlab switch: slow path, upcall TAP]      [tl_from_underlay]
//! ```
//!
//! Each test checks that traffic passes both ways and that the kernel
//! carried it (its hit, encap and decap counters), not only the slow
//! path. Needs root; namespaces and processes are removed on success and
//! failure.

mod common;

use common::*;
use tunlab_netio::netns::Netns;

/// Tenants on devices the switch did not make (veths made beforehand, as
/// a container runtime does), attached as `type = "system"` ports; they
/// are left in place when the switch stops.
#[test]
fn system_ports() {
    two_nodes("geneve", false, Datapath::KernelSystem);
}

#[test]
fn system_ports_ipv6_underlay() {
    two_nodes("vxlan", true, Datapath::KernelSystem);
}

/// Once `del-flows` has returned nothing is forwarded by an entry the
/// kernel still holds; once `add-flow` has returned traffic flows again.
#[test]
fn flow_changes_revalidate() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &on_kernel(&c1), &on_kernel(&c2));
    traffic_both_ways(&l, "before the change");
    let sock = l.dir.join("n1.ctl");
    let (ok, _, err) = ctl(&sock, &["del-flows", "in_port=1"]);
    assert!(ok, "{err}");
    let st = node_stats(&l.dir, "n1");
    let before = counter(&st, "kernel_encap");
    // The old entry never forwards again: it was given the new decision
    // in place (no rule: drop), or it is stale (its generation is gone),
    // or swept (a miss).
    let unused = |st: &tunlab_ctl::Stats| {
        counter(st, "kernel_stale") + counter(st, "kernel_miss") + counter(st, "kernel_drop_action")
    };
    let unused_before = unused(&st);
    assert!(
        !udp_echo(&l.ta, &l.tb, "192.168.7.2", 5, 1),
        "forwarded after del-flows"
    );
    let st = node_stats(&l.dir, "n1");
    assert_eq!(counter(&st, "kernel_encap"), before, "{st}");
    assert!(unused(&st) > unused_before, "{st}");
    let (ok, _, err) = ctl(&sock, &["add-flow", "in_port=1 actions=output:10"]);
    assert!(ok, "{err}");
    assert!(
        udp_echo(&l.ta, &l.tb, "192.168.7.2", 5, 6),
        "after add-flow"
    );
    drop((s1.stop(), s2.stop()));
}

/// Rule changes are revalidated flow by flow, each cached flow against
/// its own megaflow mask: the flows a change does not decide differently
/// keep forwarding in the kernel, one it decides differently under the
/// same mask takes its new actions in place (never a miss), and a rule of
/// a new shape adds a mask instead of emptying the cache; only a flow
/// whose mask no longer covers the new decision goes.
#[test]
fn a_change_that_keeps_the_mask_keeps_the_other_flows() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &on_kernel(&c1), &on_kernel(&c2));
    let sock = l.dir.join("n1.ctl");
    let cached = || {
        let (ok, out, err) = ctl(&sock, &["dump-flows", "--datapath"]);
        assert!(ok, "{err}");
        out.lines().count()
    };
    let change = |args: &[&str]| {
        let (ok, _, err) = ctl(&sock, args);
        assert!(ok, "{args:?}: {err}");
        node_stats(&l.dir, "n1")
    };
    let (each, fresh, replaced) = (
        "kernel_changes_revalidated_each_flow",
        "kernel_changes_new_generation",
        "kernel_flows_replaced_in_place",
    );
    traffic_both_ways(&l, "before the changes");
    // The rules are in_port (+ tun_id): one flow each way.
    let n0 = cached();
    assert_eq!(n0, 2, "{}", ctl(&sock, &["dump-flows", "--datapath"]).1);
    let st0 = node_stats(&l.dir, "n1");

    // Another VNI dropped: the same fields, nothing cached decided anew.
    let st = change(&["add-flow", "priority=50,in_port=10,tun_id=99 actions=drop"]);
    assert_eq!(counter(&st, each), counter(&st0, each) + 1, "{st}");
    assert_eq!(counter(&st, fresh), counter(&st0, fresh), "{st}");
    assert_eq!(
        cached(),
        n0,
        "a change that decides no cached flow anew flushed them"
    );
    traffic_both_ways(&l, "after a change that keeps the mask");
    let st1 = node_stats(&l.dir, "n1");
    assert_eq!(
        counter(&st1, "kernel_miss"),
        counter(&st, "kernel_miss"),
        "the kept flows missed: {st1}"
    );

    // The tenant's side now dropped, by a rule of the same shape: that
    // flow drops in the kernel from now on (replaced in place), the
    // other stays.
    let st = change(&["add-flow", "priority=40000,in_port=1 actions=drop"]);
    assert_eq!(cached(), n0);
    assert_eq!(counter(&st, replaced), counter(&st1, replaced) + 1, "{st}");
    assert!(
        !udp_echo(&l.ta, &l.tb, "192.168.7.2", 3, 1),
        "forwarded by a flow the change decided anew"
    );
    let st2 = node_stats(&l.dir, "n1");
    assert!(
        counter(&st2, "kernel_drop_action") > counter(&st, "kernel_drop_action"),
        "the replaced flow did not drop in the kernel: {st2}"
    );
    change(&["del-flows", "--strict", "priority=40000,in_port=1"]);
    traffic_both_ways(&l, "after the drop rule went");

    // A field no rule matched before, under the rules that decide the
    // cached flows: a new shape, and still no flow goes.
    let st3 = node_stats(&l.dir, "n1");
    let st = change(&[
        "add-flow",
        "priority=60,udp,in_port=1,tp_dst=7 actions=drop",
    ]);
    assert_eq!(counter(&st, fresh), counter(&st3, fresh), "{st}");
    assert_eq!(cached(), n0, "a rule of a new shape emptied the cache");
    traffic_both_ways(&l, "after a rule of a new shape");
    let st4 = node_stats(&l.dir, "n1");
    assert_eq!(
        counter(&st4, "kernel_miss"),
        counter(&st, "kernel_miss"),
        "the kept flows missed: {st4}"
    );

    // The same shape over the tenant's rule: the tenant's flow now
    // depends on the protocol, which its mask does not hold. The packets
    // known to ride it (the one that made it, those the kernel sampled)
    // are decided again, and their entries put in under a mask of the new
    // shape before the old entry goes (make-before-break): nothing is
    // deleted, and at least as many flows as before are cached. (Whether
    // the pings then miss depends on which packet made the entry, an ARP
    // or a ping: the TCP test below asserts that a busy flow does not.)
    let st = change(&[
        "add-flow",
        "priority=40001,udp,in_port=1,tp_dst=7 actions=drop",
    ]);
    assert_eq!(counter(&st, fresh), counter(&st3, fresh), "{st}");
    let rebuilt = "kernel_flows_rebuilt_before_break";
    assert_eq!(counter(&st, rebuilt), counter(&st4, rebuilt) + 1, "{st}");
    assert_eq!(counter(&st, "kernel_flows_deleted_by_change"), 0, "{st}");
    assert!(cached() >= n0);
    traffic_both_ways(&l, "after a rule of a new shape above the others");
    let st5 = node_stats(&l.dir, "n1");
    assert!(counter(&st5, "kernel_masks") >= 2, "{st5}");
    drop((s1.stop(), s2.stop()));
}

/// Rules of new shapes added above the tenant's rule and removed again,
/// twice a second under a TCP stream: each shape makes the stream's
/// cached flow depend on a field its mask left out, and each time the
/// flow is rebuilt under a new mask before its old entry goes. No cached
/// flow becomes a miss (counted), and the stream never stops.
#[test]
fn rules_of_new_shapes_under_a_tcp_stream_turn_no_flow_into_a_miss() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &on_kernel(&c1), &on_kernel(&c2));
    traffic_both_ways(&l, "before the stream");
    let sock = l.dir.join("n1.ctl");
    // None of these is the stream's: each only adds a field to what the
    // tenant's flow depends on.
    let shapes = [
        "udp,in_port=1,tp_dst=9",
        "tcp,in_port=1,tp_src=9",
        "tcp,in_port=1,tp_dst=9",
        "ip,in_port=1,nw_src=10.9.9.9",
        "ip,in_port=1,nw_dst=10.9.9.9",
        "ip,in_port=1,nw_tos=8",
        "in_port=1,dl_src=02:00:00:00:00:99",
        "in_port=1,dl_dst=02:00:00:00:00:99",
    ];
    let stream = iperf3_intervals(&l, 8);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let st0 = node_stats(&l.dir, "n1");
    for shape in shapes.iter().cycle().take(2 * shapes.len()) {
        let rule = format!("priority=40001,{shape}");
        let (ok, _, err) = ctl(&sock, &["add-flow", &format!("{rule} actions=drop")]);
        assert!(ok, "{rule}: {err}");
        std::thread::sleep(std::time::Duration::from_millis(150));
        let (ok, _, err) = ctl(&sock, &["del-flows", "--strict", &rule]);
        assert!(ok, "{rule}: {err}");
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    let st = node_stats(&l.dir, "n1");
    let intervals = stream.join().expect("the stream");
    let gaps = empty_intervals(&intervals);
    assert!(gaps.is_empty(), "100-ms intervals without data: {gaps:?}");
    let d = |name: &str| counter(&st, name) - counter(&st0, name);
    eprintln!(
        "{} changes: rebuilt {}, replaced {}, deleted {}, misses {}",
        4 * shapes.len(),
        d("kernel_flows_rebuilt_before_break"),
        d("kernel_flows_replaced_in_place"),
        d("kernel_flows_deleted_by_change"),
        d("kernel_miss")
    );
    assert_eq!(
        d("kernel_changes_revalidated_each_flow"),
        4 * shapes.len() as u64,
        "{st}"
    );
    assert_eq!(d("kernel_flows_deleted_by_change"), 0, "{st}");
    // Each shape once (its second time the mask holds its field).
    assert!(
        d("kernel_flows_rebuilt_before_break") >= shapes.len() as u64,
        "{st}"
    );
    // A break-before-make would miss once per rebuild; an ARP refresh
    // may miss on its own.
    assert!(d("kernel_miss") <= 2, "the stream's flow missed: {st}");
    drop((s1.stop(), s2.stop()));
}

/// Two VXLAN ports on one UDP port, to different remotes: each has its
/// decapsulation entry under its remote, so adding and removing the second
/// leaves the first one's traffic in the kernel.
#[test]
fn tunnel_ports_sharing_a_udp_port() {
    let l = lab();
    let (n1, n2) = pair_configs(&l, "vxlan");
    let dp = Datapath::Kernel;
    let (s1, s2) = start_pair(&l, &dp.config(&l.hv1, n1), &dp.config(&l.hv2, n2));
    let c1 = l.dir.join("n1.ctl");
    assert!(udp_echo(&l.ta, &l.tb, "192.168.7.2", 5, 6));
    let x = "x-n1 ofport=12 type=vxlan local_ip=172.31.0.1 remote_ip=172.31.0.9 key=6";
    let (ok, _, err) = ctl(&c1, &["add-port", x]);
    assert!(ok, "{err}");
    // Another port on the same UDP port, to another remote: the entries
    // are keyed by remote too, so the first port's traffic stays in the
    // kernel (it went up to the slow path when one entry served the key).
    let st = node_stats(&l.dir, "n1");
    let (decap0, slow0) = (
        counter(&st, "kernel_decap"),
        counter(&st, "kernel_slow_unknown_remote"),
    );
    assert!(udp_echo(&l.ta, &l.tb, "192.168.7.2", 10, 6));
    // The first reply misses (a new generation) and is the slow path's.
    let st = node_stats(&l.dir, "n1");
    assert!(counter(&st, "kernel_decap") >= decap0 + 8, "{st}");
    assert_eq!(counter(&st, "kernel_slow_unknown_remote"), slow0, "{st}");
    // The added port goes: its entry with it, the first port's stays.
    let (ok, _, err) = ctl(&c1, &["del-port", "x-n1"]);
    assert!(ok, "{err}");
    let decap0 = counter(&node_stats(&l.dir, "n1"), "kernel_decap");
    assert!(udp_echo(&l.ta, &l.tb, "192.168.7.2", 10, 6));
    let st = node_stats(&l.dir, "n1");
    assert!(counter(&st, "kernel_decap") >= decap0 + 8, "{st}");
    // A source neither port names is still counted as unknown (the
    // any-remote entry); the unknown_remote test sends such packets.
    s1.stop();
    s2.stop();
}

/// The revalidator deletes cached flows no CPU has used for max_idle_ms
/// (OVS's max-idle): after traffic stops, the kernel's flow cache empties,
/// the deletions are counted, and the next packets are a miss that the
/// slow path installs again.
#[test]
fn idle_flows_expire() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let idle = |c: &str| on_kernel(c).replacen("[switch]\n", "[switch]\nmax_idle_ms = 300\n", 1);
    let (s1, s2) = start_pair(&l, &idle(&c1), &idle(&c2));
    let sock = l.dir.join("n1.ctl");
    let cached = || {
        let (ok, out, err) = ctl(&sock, &["dump-flows", "--datapath"]);
        assert!(ok, "{err}");
        out.lines().count()
    };
    traffic_both_ways(&l, "before going idle");
    assert!(cached() > 0, "traffic left nothing in the kernel's cache");
    // Idle for twice the limit plus a sweep interval.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while cached() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(cached(), 0, "idle flows stayed in the cache");
    let st = node_stats(&l.dir, "n1");
    let deleted = st.revalidator.map_or(0, |r| r.idle_deleted);
    assert!(deleted > 0, "{st}");
    let installed = counter(&st, "kernel_installed");
    traffic_both_ways(&l, "after the flows expired");
    assert!(counter(&node_stats(&l.dir, "n1"), "kernel_installed") > installed);
    assert_kernel_carried(&l.dir, "n1", "after the flows expired");
    drop((s1.stop(), s2.stop()));
}

/// A bpf filesystem of the test's own, mounted in the root mount namespace
/// (a switch under `ip netns exec` has a private /sys, whose pins would
/// die with it); unmounted when dropped.
struct Bpffs(std::path::PathBuf);

impl Bpffs {
    fn mount(l: &Lab) -> Bpffs {
        let dir = std::path::PathBuf::from(format!(
            "/run/tunlab-test-bpffs-{}",
            l.dir.file_name().unwrap().to_string_lossy()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "bpf", "bpf"])
            .arg(&dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount -t bpf at {}", dir.display());
        Bpffs(dir)
    }
}

/// A Geneve pair on the kernel datapath, n1 pinning under `fs`; n1's
/// configuration (to restart it with) and both switches.
fn pinned_pair(l: &Lab, fs: &Bpffs) -> (String, Switch, Switch) {
    let (c1, c2) = pair_configs(l, "geneve");
    let c1 = on_kernel(&c1).replacen(
        "[switch]\n",
        &format!("[switch]\nbpf_pin_dir = \"{}\"\n", fs.0.display()),
        1,
    );
    let (s1, s2) = start_pair(l, &c1, &on_kernel(&c2));
    (c1, s1, s2)
}

impl Drop for Bpffs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// iperf3 from ta to tb for `secs` with 100-ms interval reports; the bytes
/// of each interval. Panics if iperf3 fails (the connection broke).
fn iperf3_intervals(l: &Lab, secs: u32) -> std::thread::JoinHandle<Vec<u64>> {
    use std::process::{Command, Stdio};
    let server = Command::new("ip")
        .args([
            "netns",
            "exec",
            l.tb.name(),
            "iperf3",
            "-s",
            "-1",
            "-p",
            "7003",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 (scripts/install-deps installs it)");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let ta = l.ta.name().to_string();
    std::thread::spawn(move || {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ta,
                "iperf3",
                "-c",
                "192.168.7.2",
                "-p",
                "7003",
            ])
            .args(["-t", &secs.to_string(), "-i", "0.1", "--json"])
            .output()
            .unwrap();
        let mut server = server;
        let _ = server.kill();
        let _ = server.wait();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert!(
            out.status.success(),
            "iperf3 failed (the connection broke?): {}",
            json["error"]
        );
        json["intervals"]
            .as_array()
            .expect("iperf3 intervals")
            .iter()
            .map(|i| i["sum"]["bytes"].as_u64().unwrap_or(0))
            .collect()
    })
}

/// The indices of iperf3's 100-ms intervals that carried no data (each
/// asserted empty-free by the caller, with its own context).
fn empty_intervals(intervals: &[u64]) -> Vec<usize> {
    intervals
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == 0)
        .map(|(i, _)| i)
        .collect()
}

/// The restarted switch's word on its adopted flows (`N, deleted M`),
/// asserting that some were kept and none deleted.
fn kept_every_adopted_flow(err: &str) -> String {
    // The log line's fields: `... event=adopted_flows_revalidated node=n1
    // kept=N replaced=R deleted=D`.
    let line = err
        .lines()
        .find(|l| l.contains("event=adopted_flows_revalidated"))
        .unwrap_or_else(|| panic!("no per-flow revalidation: {err}"));
    let field = |k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}="))?.parse().ok())
            .unwrap_or_else(|| panic!("no {k}= in {line}"))
    };
    let (kept, deleted) = (field("kept"), field("deleted"));
    assert!(kept > 0 && deleted == 0, "{line}");
    format!("{kept}, replaced {}, deleted {deleted}", field("replaced"))
}

/// Where a switch in namespace `ns` named `node` pins under `base`.
fn pins_of(base: &std::path::Path, ns: &Netns, node: &str) -> std::path::PathBuf {
    let file = std::path::PathBuf::from(format!("/run/netns/{}", ns.name()));
    let cookie = tunlab_netio::netns::cookie_of(&file).unwrap();
    base.join(format!("netns-{cookie}")).join(node)
}

/// `kill -9` of a kernel-datapath switch under a TCP stream, then a
/// restart, both started as the README shows (`ip netns exec`, whose
/// private mount namespace has its own /sys) with the default
/// configuration: the pins are in the host's bpffs, the pinned programs
/// and maps forward the cached flow while the switch is down, the new
/// process adopts them (its program swapped into each pinned link) and
/// revalidates, and the stream never stops. A normal stop then leaves no
/// program, link or pin behind.
#[test]
fn restart_after_kill_keeps_the_stream() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (c1, c2) = (on_kernel(&c1), on_kernel(&c2));
    assert!(!c1.contains("bpf_pin_dir"), "{c1}");
    let (s1, s2) = start_pair(&l, &c1, &c2);
    traffic_both_ways(&l, "before the kill");
    let pins = pins_of(std::path::Path::new("/sys/fs/bpf/tunlab"), &l.hv1, "n1");
    assert!(pins.join("tl_flows").exists(), "maps are not pinned");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(pins.join("tl_flows"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "pinned maps must be root's alone");

    let stream = iperf3_intervals(&l, 5);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    s1.kill9();
    let down = counter_while_down(&l);
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let s1 = Switch::start(l.hv1.name(), &c1, &l.dir, "n1");
    s1.wait_ready();
    let intervals = stream.join().expect("the TCP connection survived");
    let total: u64 = intervals.iter().sum();
    // iperf3's own 100-ms interval reports: none without data.
    let empty = empty_intervals(&intervals);
    eprintln!(
        "restart: iperf3 moved {} MB in 5 s, {} intervals of 100 ms, without data: {empty:?}; while down the kernel carried {down} packets",
        total >> 20,
        intervals.len()
    );
    assert!(intervals.len() >= 45, "{intervals:?}");
    assert!(
        empty.is_empty(),
        "iperf3 reported intervals without data {empty:?}: {intervals:?}"
    );
    assert!(down > 0, "nothing forwarded while the switch was down");
    traffic_both_ways(&l, "after the restart");
    let err = s1.stop();
    assert!(
        err.contains("adopting the kernel datapath pinned at"),
        "{err}"
    );
    // The default configuration's datapath: auto, which said what it took.
    assert!(
        err.contains("datapath auto: ebpf (this kernel runs tunlab's TC programs)"),
        "{err}"
    );
    // The adopted flows were checked one by one against the same rules:
    // the stream's flows kept, none turned into misses.
    let kept = kept_every_adopted_flow(&err);
    eprintln!("adopted flows: kept {kept}");
    // The killed switch's upcall TAP went with it; its entry too.
    assert!(
        err.contains("forgot 1 port entries of the previous run"),
        "{err}"
    );
    // A normal stop removes every pin and detaches every program.
    assert!(!pins.exists(), "{} left behind", pins.display());
    let net = attached_programs(&l.hv1, &[]);
    assert!(!net.contains("tl_"), "programs left attached in hv1: {net}");
    s2.stop();
}

/// `systemctl restart` of the packaged unit (its `ExecStart` has
/// `--keep-datapath`): SIGTERM under a TCP stream, a normal exit that
/// leaves the pinned datapath forwarding, a new start that adopts it, and
/// the stream never stops. `--cleanup` then removes what the last stop
/// kept, and refuses while the node runs.
#[test]
fn a_stop_with_keep_datapath_then_a_start_keeps_the_stream() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (c1, c2) = (on_kernel(&c1), on_kernel(&c2));
    let keep = ["--keep-datapath"];
    let s1 = Switch::start_with(l.hv1.name(), &c1, &l.dir, "n1", &keep);
    let s2 = Switch::start(l.hv2.name(), &c2, &l.dir, "n2");
    s1.wait_ready();
    s2.wait_ready();
    traffic_both_ways(&l, "before the restart");
    let pins = pins_of(std::path::Path::new("/sys/fs/bpf/tunlab"), &l.hv1, "n1");

    let stream = iperf3_intervals(&l, 5);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let said = s1.stop();
    assert!(said.contains("event=datapath_kept"), "{said}");
    assert!(pins.join("tl_flows").exists(), "the stop removed the pins");
    let down = counter_while_down(&l);
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let s1 = Switch::start_with(l.hv1.name(), &c1, &l.dir, "n1", &keep);
    s1.wait_ready();
    let intervals = stream.join().expect("the TCP connection survived");
    let empty = empty_intervals(&intervals);
    eprintln!(
        "stop and start: {} intervals of 100 ms, without data: {empty:?}; while stopped the kernel carried {down} packets",
        intervals.len()
    );
    assert!(intervals.len() >= 45, "{intervals:?}");
    assert!(
        empty.is_empty(),
        "intervals without data {empty:?}: {intervals:?}"
    );
    assert!(down > 0, "nothing forwarded while the switch was stopped");
    traffic_both_ways(&l, "after the restart");

    let cleanup = |ns: &str| {
        switch_command(ns, &l.dir.join("n1.toml"))
            .arg("--cleanup")
            .output()
            .unwrap()
    };
    let busy = cleanup(l.hv1.name());
    let text = String::from_utf8_lossy(&busy.stderr);
    assert!(
        !busy.status.success() && text.contains("is running"),
        "{text}"
    );
    let said = s1.stop();
    assert!(
        said.contains("adopting the kernel datapath pinned at"),
        "{said}"
    );
    assert!(pins.exists(), "the second stop removed the pins");
    let done = cleanup(l.hv1.name());
    let text = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{text}");
    assert!(!pins.exists(), "{} left behind", pins.display());
    let net = attached_programs(&l.hv1, &[]);
    assert!(!net.contains("tl_"), "programs left attached in hv1: {net}");
    assert!(
        l.hv1.ip(&["link", "show", "tap-n1"]).is_err(),
        "the veth port left"
    );
    s2.stop();
}

/// A restart with changed rules (same megaflow mask, one action changed):
/// the adopted flow whose action changed takes the new one in place, the
/// other is kept, and the new rule holds at once.
#[test]
fn restart_with_changed_rules_deletes_what_changed() {
    let l = lab();
    let fs = Bpffs::mount(&l);
    let (c1, s1, s2) = pinned_pair(&l, &fs);
    traffic_both_ways(&l, "before the kill");
    s1.kill9();
    // What comes back from the tunnel is now dropped.
    let changed = c1.replace(
        "\"in_port=10,tun_id=6 actions=output:1\"",
        "\"in_port=10,tun_id=6 actions=drop\"",
    );
    assert_ne!(changed, c1, "the rule to change is not in the config");
    let s1 = Switch::start(l.hv1.name(), &changed, &l.dir, "n1");
    s1.wait_ready();
    let echoed = udp_echo(&l.ta, &l.tb, "192.168.7.2", 5, 3);
    let st = node_stats(&l.dir, "n1");
    let err = s1.stop();
    assert!(
        !echoed,
        "an echo came back through the changed rule: {err}\n{st}"
    );
    assert!(
        err.contains("revalidated the adopted flows: kept 1, replaced 1, rebuilt 0, deleted 0"),
        "{err}"
    );
    s2.stop();
}

/// OVS's flow-restore-wait: a restart whose configuration has no rules
/// (they come back through `ctl add-flows` after the start, as a
/// controller or a saved-flows script would bring them) leaves the
/// adopted flows alone until `ctl flow-restore-wait off`; then each is
/// checked against the rules loaded by then and kept. The TCP stream
/// under it never stops. Without the wait the first revalidation would
/// see an empty table: a new mask, every flow a miss, and no rule to
/// forward the misses.
#[test]
fn restart_with_rules_added_later_waits_for_them() {
    let l = lab();
    let fs = Bpffs::mount(&l);
    let (c1, s1, s2) = pinned_pair(&l, &fs);
    traffic_both_ways(&l, "before the kill");
    let rules = "in_port=1 actions=output:10\nin_port=10,tun_id=6 actions=output:1\n";
    assert!(c1.contains("\"in_port=1 actions=output:10\""), "{c1}");
    let bare = c1
        .replace("  \"in_port=1 actions=output:10\",\n", "")
        .replace("  \"in_port=10,tun_id=6 actions=output:1\",\n", "")
        .replacen("[switch]\n", "[switch]\nflow_restore_wait = true\n", 1);
    assert!(bare.contains("flows = [\n]"), "{bare}");
    let file = l.dir.join("n1-rules.txt");
    std::fs::write(&file, rules).unwrap();

    let stream = iperf3_intervals(&l, 5);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    s1.kill9();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let s1 = Switch::start(l.hv1.name(), &bare, &l.dir, "n1");
    s1.wait_ready();
    let sock = l.dir.join("n1.ctl");
    let (ok, out, _) = ctl(&sock, &["flow-restore-wait"]);
    assert!(ok && out.contains("flow-restore-wait on"), "{out}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (ok, _, err) = ctl(&sock, &["add-flows", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let (ok, out, err) = ctl(&sock, &["flow-restore-wait", "off"]);
    assert!(
        ok && out.contains("revalidated against the rules loaded"),
        "{out}{err}"
    );
    let intervals = stream.join().expect("the TCP connection survived");
    let empty = empty_intervals(&intervals);
    assert!(intervals.len() >= 45, "{intervals:?}");
    assert!(
        empty.is_empty(),
        "iperf3 reported intervals without data {empty:?}: {intervals:?}"
    );
    traffic_both_ways(&l, "after the restore");
    let (ok, _, err) = ctl(&sock, &["flow-restore-wait", "on"]);
    assert!(!ok && err.contains("only at start"), "{err}");
    kept_every_adopted_flow(&s1.stop());
    s2.stop();
}

/// A switch started over maps another build pinned (here a flow cache
/// with the old 152-byte key, made with bpftool) does not adopt them: it
/// says why, makes its own, forwards, and its normal stop removes the pins.
#[test]
fn pins_of_another_build_are_not_adopted() {
    let l = lab();
    let fs = Bpffs::mount(&l);
    let pins = pins_of(&fs.0, &l.hv1, "n1");
    std::fs::create_dir_all(&pins).unwrap();
    let made = std::process::Command::new("bpftool")
        .args(["map", "create"])
        .arg(pins.join("tl_flows"))
        .args([
            "type", "lru_hash", "key", "152", "value", "64", "entries", "16", "name", "tl_flows",
        ])
        .status()
        .unwrap();
    assert!(made.success(), "bpftool map create");
    let (_, s1, s2) = pinned_pair(&l, &fs);
    traffic_both_ways(&l, "over another build's pins");
    let err = s1.stop();
    assert!(
        err.contains("are another build's (tl_flows has 152-byte keys"),
        "{err}"
    );
    assert!(!err.contains("adopting the kernel datapath"), "{err}");
    assert!(!pins.exists(), "{} left behind", pins.display());
    s2.stop();
}

/// A switch killed with no pins at all (`bpf_pin_dir = "none"`): its
/// datapath went with it, its veth pair stayed. The restart takes the pair
/// as it is (no "File exists") and forwards again.
#[test]
fn restart_without_pins_takes_the_veth_pair_left_behind() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let c1 = on_kernel(&c1).replacen("[switch]\n", "[switch]\nbpf_pin_dir = \"none\"\n", 1);
    let (s1, s2) = start_pair(&l, &c1, &on_kernel(&c2));
    traffic_both_ways(&l, "before the kill");
    s1.kill9();
    assert!(
        tunlab_netio::netns::ip(l.hv1.name(), &["link", "show", "dev", "tap-n1"]).is_ok(),
        "the killed switch's veth went with it: nothing left to take"
    );
    let s1 = Switch::start(l.hv1.name(), &c1, &l.dir, "n1");
    s1.wait_ready();
    traffic_both_ways(&l, "after a restart without pins");
    let err = s1.stop();
    assert!(!err.contains("adopting"), "{err}");
    s2.stop();
}

/// The pins of a network namespace that no longer exists (its switch was
/// killed, then the namespace deleted) are removed by the next switch
/// that starts over the same bpffs; a live namespace's are left alone.
#[test]
fn pins_of_a_deleted_namespace_are_removed_at_start() {
    let l = lab();
    let fs = Bpffs::mount(&l);
    let gone = Netns::create("tl-pins", 0).unwrap();
    let dead = pins_of(&fs.0, &gone, "old");
    let alive = pins_of(&fs.0, &l.ta, "other");
    for dir in [&dead, &alive] {
        std::fs::create_dir_all(dir).unwrap();
        let made = std::process::Command::new("bpftool")
            .args(["map", "create"])
            .arg(dir.join("tl_flows"))
            .args([
                "type", "hash", "key", "4", "value", "4", "entries", "4", "name", "tl_flows",
            ])
            .status()
            .unwrap();
        assert!(made.success(), "bpftool map create");
    }
    // Its killed switch's lock file, named by the namespace's cookie.
    let netns_dir = dead
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy();
    let cookie = netns_dir.trim_start_matches("netns-");
    let dead_lock = std::path::PathBuf::from(format!("/run/tunlab/pins-0-{cookie}-old.lock"));
    std::fs::create_dir_all("/run/tunlab").unwrap();
    std::fs::write(&dead_lock, "").unwrap();
    // A lock whose pins were on a bpffs that is gone: no folder at all.
    let gone_too = Netns::create("tl-pins", 1).unwrap();
    let file = std::path::PathBuf::from(format!("/run/netns/{}", gone_too.name()));
    let other = tunlab_netio::netns::cookie_of(&file).unwrap();
    let lone_lock = std::path::PathBuf::from(format!("/run/tunlab/pins-0-{other}-old.lock"));
    std::fs::write(&lone_lock, "").unwrap();
    drop(gone_too);
    drop(gone);
    let (_, s1, s2) = pinned_pair(&l, &fs);
    let err = s1.stop();
    assert!(
        !dead.parent().unwrap().exists(),
        "{} left: {err}",
        dead.display()
    );
    assert!(!dead_lock.exists(), "{} left: {err}", dead_lock.display());
    assert!(!lone_lock.exists(), "{} left: {err}", lone_lock.display());
    assert!(
        err.contains("the pins of a network namespace that no longer exists"),
        "{err}"
    );
    assert!(
        alive.join("tl_flows").exists(),
        "a live namespace's pins went: {err}"
    );
    let _ = std::fs::remove_file(alive.join("tl_flows"));
    let _ = std::fs::remove_dir(&alive);
    let _ = std::fs::remove_dir(alive.parent().unwrap());
    s2.stop();
}

/// A normal stop leaves no folder of its own on the host's bpffs: the
/// node's, the namespace's and the base folder go once the last switch
/// using them has stopped. Both switches started as the README shows
/// (`ip netns exec`), their base a folder under /sys/fs/bpf of this test's
/// own, as the default `/sys/fs/bpf/tunlab` is.
#[test]
fn a_normal_stop_leaves_no_folder_behind() {
    let l = lab();
    let base = format!("/sys/fs/bpf/{}", l.hv1.name());
    let pin = |c: &str| {
        on_kernel(c).replacen(
            "[switch]\n",
            &format!("[switch]\nbpf_pin_dir = \"{base}\"\n"),
            1,
        )
    };
    // Whatever this test leaves, should it fail, goes with it.
    struct Left(std::path::PathBuf);
    impl Drop for Left {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let left = Left(base.clone().into());
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &pin(&c1), &pin(&c2));
    traffic_both_ways(&l, "pinned under a base of its own");
    // Seen from this process: the switches' bpffs is the host's, which
    // they mounted at /sys/fs/bpf if nothing was.
    let base = &left.0;
    assert!(pins_of(base, &l.hv1, "n1").join("tl_flows").exists());
    s1.stop();
    assert!(
        !pins_of(base, &l.hv1, "n1").parent().unwrap().exists(),
        "n1's namespace folder stayed after its last switch stopped"
    );
    assert!(base.exists(), "the base went while n2 still pins under it");
    s2.stop();
    assert!(!base.exists(), "{} left behind", base.display());
}

/// While n1 is down: packets that reached tb's tenant device in 300 ms
/// (carried by n1's pinned kernel datapath; n1 itself cannot be asked).
fn counter_while_down(l: &Lab) -> u64 {
    let rx = |ns: &Netns| tenant_rx(ns, "tap-n2");
    let before = rx(&l.tb);
    std::thread::sleep(std::time::Duration::from_millis(300));
    rx(&l.tb) - before
}

/// Two Geneve ports between the same hosts on one UDP port, differing
/// only in their VNI: the kernel tells their frames apart by VNI, so each
/// tenant's traffic stays in the kernel. (Keyed without the VNI, the port
/// added last took every frame, the other's never hit its cached flows,
/// and every packet was an upcall: a 2 MB transfer took 42 s.)
#[test]
fn ports_differing_only_in_vni_stay_in_the_kernel() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &on_kernel(&c1), &on_kernel(&c2));
    let (k1, k2) = (l.dir.join("n1.ctl"), l.dir.join("n2.ctl"));
    add_tenant_over_geneve(&l, &k1, &k2, "veth");
    let before = node_stats(&l.dir, "n2");
    let (sent, received) = tcp_transfer(&l.ta, &l.tb, "192.168.7.2");
    assert_eq!(sent, received);
    let after = node_stats(&l.dir, "n2");
    let d = |name: &str| counter(&after, name) - counter(&before, name);
    eprintln!(
        "2 MB over VNI 6 beside VNI 9: n2 kernel hits {}, misses {}",
        d("kernel_hit"),
        d("kernel_miss")
    );
    assert!(d("kernel_hit") > 20 * d("kernel_miss").max(1), "{after}");
    // And the second tenant, over VNI 9, still gets through.
    let ok9 = udp_echo(&l.ta, &l.tb, "192.168.8.2", 5, 6);
    assert!(ok9, "VNI 9 tenant; n2: {}", node_stats(&l.dir, "n2"));
    traffic_both_ways(&l, "VNI 6 tenant");
    drop((s1.stop(), s2.stop()));
}
