//! The control socket at scale and under abuse (issue 16): 100,000 rules
//! loaded from a file, and a thousand concurrent clients, many of them
//! broken, while tenant traffic goes on. Needs root (namespaces).

mod common;

use common::*;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// 100,000 rules of the shape a node with one rule per remote VM holds:
/// a tenant MAC sent to its own tunnel endpoint.
fn endpoint_rules(n: u32) -> String {
    let mut text = String::from("# one rule per remote VM\n");
    for i in 0..n {
        let [_, b, c, d] = i.to_be_bytes();
        writeln!(
            text,
            "priority=200,in_port=1,dl_dst=02:00:00:{b:02x}:{c:02x}:{d:02x} actions=set_field:10.{b}.{c}.{d}->tun_dst,output:10"
        )
        .unwrap();
    }
    text
}

#[test]
fn add_flows_loads_a_hundred_thousand_rules() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &c1, &c2);
    let file = l.dir.join("rules.txt");
    std::fs::write(&file, endpoint_rules(100_000)).unwrap();
    let (ok, out, err) = ctl(s1.ctl_path(), &["add-flows", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with("added 100000 rules (0 replaced existing ones) in "),
        "{out}"
    );
    eprintln!("add-flows, 100,000 rules: {out}");
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    assert_eq!(dump.lines().count(), 100_002);
    // The tenants' own traffic (MACs outside the 100,000) still crosses.
    traffic_both_ways(&l, "geneve with 100,000 more rules");

    // One bad line rejects the whole file, naming the file and the line.
    let mut bad = endpoint_rules(10);
    bad.push_str("in_port=1,nw_dst=10.0.0.300 actions=drop\n");
    std::fs::write(&file, bad).unwrap();
    let (ok, _, err) = ctl(s1.ctl_path(), &["add-flows", file.to_str().unwrap()]);
    assert!(
        !ok && err.contains("rules.txt: line 12:") && err.contains("10.0.0.300"),
        "{err}"
    );
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    assert_eq!(dump.lines().count(), 100_002);
    s1.stop();
    s2.stop();
}

/// The fewest descriptors the switch holds over one second.
fn settled_fds(s: &Switch) -> usize {
    (0..20)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(50));
            s.open_fds()
        })
        .min()
        .unwrap()
}

/// Send `bytes` (then, if `close`, end the request), return the reply.
fn raw(path: &std::path::Path, bytes: &[u8], close: bool) -> String {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let _ = s.write_all(bytes);
    if close {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    reply
}

#[test]
fn a_thousand_clients_good_and_broken_while_traffic_flows() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &c1, &c2);
    // Warm up: the first requests allocate what later ones reuse.
    for _ in 0..3 {
        assert!(ctl(s1.ctl_path(), &["show"]).0);
    }
    let fds = settled_fds(&s1);
    let storm_over = AtomicBool::new(false);
    std::thread::scope(|scope| {
        // TCP transfers back to back for as long as the storm lasts.
        let traffic = scope.spawn(|| {
            let mut rounds = 0;
            while !storm_over.load(Ordering::Relaxed) || rounds == 0 {
                let (sent, received) = tcp_transfer(&l.ta, &l.tb, "192.168.7.2");
                assert_eq!(sent, received, "TCP transfer {rounds} during the storm");
                rounds += 1;
            }
            rounds
        });
        storm(s1.ctl_path());
        storm_over.store(true, Ordering::Relaxed);
        let rounds = traffic.join().expect("every transfer arrived whole");
        eprintln!("{rounds} TCP transfers of 2 MB crossed during the storm");
    });
    // A leak stays; a descriptor opened for a moment (a request being
    // answered, the MTU being re-read) does not, so compare the fewest
    // open over a second before and after.
    let after = settled_fds(&s1);
    assert!(
        after <= fds,
        "file descriptors leaked: {fds} before, {after} after"
    );
    let (_, dump, _) = ctl(s1.ctl_path(), &["dump-flows"]);
    assert_eq!(dump.lines().count(), 3, "{dump}");
    traffic_both_ways(&l, "geneve after the storm");
    s1.stop();
    s2.stop();
}

/// A thousand concurrent clients, most of them broken in one way or
/// another; each must get the answer its request deserves.
fn storm(path: &std::path::Path) {
    let oversized = vec![b'x'; 100_000];
    let cases: Vec<(Vec<u8>, bool, &str)> = vec![
        (b"show\n".to_vec(), false, "OK\n"),
        (
            b"\x00\x01\xfe\xff garbage\n".to_vec(),
            false,
            "ERROR\nrequest is not UTF-8",
        ),
        (oversized, false, "ERROR\nrequest line longer than"),
        (b"dump-flows\n".to_vec(), false, "OK\n"),
        (
            b"add-flow priority=3,in_port=1,tcp,tp_dst=9 actions=drop\n".to_vec(),
            false,
            "OK\n",
        ),
        (
            b"add-flow in_port=1 actions=output:\n".to_vec(),
            false,
            "ERROR\n",
        ),
        (
            b"add-flows 50\nin_port=1".to_vec(),
            true,
            "ERROR\nadd-flows body ended after 9 of 50",
        ),
        (
            b"stats".to_vec(),
            true,
            "ERROR\nrequest ended after 5 bytes",
        ),
    ];
    let clients: Vec<_> = (0..1000)
        .map(|i| {
            // Eight of the thousand hold the line open half-written (each
            // costs the others LINE_DEADLINE).
            let (bytes, close, want) = if i % 125 == 0 {
                (b"dump-fl".to_vec(), false, "ERROR\nincomplete request")
            } else {
                cases[i % cases.len()].clone()
            };
            let path = path.to_path_buf();
            std::thread::spawn(move || {
                let reply = raw(&path, &bytes, close);
                assert!(
                    reply.starts_with(want),
                    "client {i}: want {want:?}, got {reply:?}"
                );
            })
        })
        .collect();
    let failed = clients.into_iter().filter_map(|c| c.join().err()).count();
    assert_eq!(failed, 0, "clients without the right answer");
}

/// Scrape `http://ADDR/metrics` from inside `ns` and parse it with the
/// Prometheus client's own OpenMetrics parser: the families and samples as
/// JSON (`{family: [[sample name, labels, value], ...]}`), or its error.
fn scrape_and_parse(ns: &str, addr: &str) -> Result<serde_json::Value, String> {
    let script = format!(
        r#"
import json, urllib.request
from prometheus_client.openmetrics.parser import text_string_to_metric_families
with urllib.request.urlopen("http://{addr}/metrics", timeout=5) as r:
    assert r.headers["Content-Type"].startswith("application/openmetrics-text"), r.headers["Content-Type"]
    text = r.read().decode()
out = {{}}
for fam in text_string_to_metric_families(text):
    out[fam.name] = [[s.name, s.labels, s.value] for s in fam.samples]
print(json.dumps(out))
"#
    );
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c", &script])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// The value of the sample of `family` whose labels include `labels`.
fn sample(m: &serde_json::Value, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    m[family].as_array()?.iter().find_map(|s| {
        let l = &s[1];
        labels
            .iter()
            .all(|(k, v)| l[*k] == *v)
            .then(|| s[2].as_f64())
            .flatten()
    })
}

/// `metrics = "127.0.0.1:9476"` on the kernel datapath, the switch started
/// as the README shows: a scrape parses with Prometheus's own parser, its
/// counters agree with what the tenants sent, and a request that is not a
/// scrape gets an HTTP error while the switch forwards on.
#[test]
fn metrics_are_scraped_and_parsed_by_prometheus_client() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let addr = "127.0.0.1:9476";
    let c1 = on_kernel(&c1).replacen(
        "[switch]\n",
        &format!("[switch]\nmetrics = \"{addr}\"\n"),
        1,
    );
    let (s1, s2) = start_pair(&l, &c1, &on_kernel(&c2));
    traffic_both_ways(&l, "before the scrape");
    let m = scrape_and_parse(l.hv1.name(), addr).unwrap_or_else(|e| panic!("scrape: {e}"));
    let tenant = [("port", "tap-n1")];
    let rx = sample(&m, "tunlab_port_receive_bytes", &tenant).unwrap_or_default();
    assert!(
        rx > 2e6,
        "the tenant sent 2 MB over its port, metrics say {rx} bytes: {m}"
    );
    let hits = sample(
        &m,
        "tunlab_flow_lookups",
        &[("datapath", "kernel"), ("result", "hit")],
    );
    assert!(hits.unwrap_or_default() > 100.0, "{m}");
    assert!(
        sample(&m, "tunlab_kernel_masks", &[]).unwrap_or_default() >= 1.0,
        "{m}"
    );
    assert!(
        sample(&m, "tunlab_resident_memory_bytes", &[]).unwrap_or_default() > 1e6,
        "{m}"
    );
    // The counters are the ones `tunlab ctl stats` shows.
    let st = s1.stats();
    let row = st.ports.iter().find(|p| p.name == "tap-n1").unwrap();
    assert!(
        row.rx_bytes as f64 >= rx,
        "ctl {} < metrics {rx}",
        row.rx_bytes
    );
    // Not a scrape: refused with HTTP errors, and the switch goes on.
    for (req, status) in [
        ("GET /other HTTP/1.1\r\n\r\n", "404"),
        ("POST /metrics HTTP/1.1\r\n\r\n", "405"),
        ("\x16\x03\x01 garbage\r\n\r\n", "405"),
    ] {
        let hex: String = req.bytes().map(|b| format!("{b:02x}")).collect();
        let script = format!(
            "import socket; s=socket.create_connection(('127.0.0.1', 9476)); s.sendall(bytes.fromhex('{hex}')); r=b''.join(iter(lambda: s.recv(4096), b'')); print(r.decode('latin-1'))"
        );
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", l.hv1.name(), "python3", "-c", &script])
            .output()
            .unwrap();
        let head = String::from_utf8_lossy(&out.stdout);
        assert!(
            head.starts_with(&format!("HTTP/1.1 {status} ")),
            "{req:?}: {head}"
        );
    }
    // A client that connects and says nothing costs the switch half a
    // second, not its control loop: traffic and scrapes go on.
    let silent = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            l.hv1.name(),
            "python3",
            "-c",
            "import socket,time; s=socket.create_connection(('127.0.0.1', 9476)); time.sleep(3)",
        ])
        .spawn()
        .unwrap();
    // And one that trickles a byte every 0.2 s for 10 s: it too is cut off
    // after half a second, so the scrape below (5-s timeout) is answered.
    let trickle = std::process::Command::new("ip")
        .args(["netns", "exec", l.hv1.name(), "python3", "-c",
            "import socket,time\ns=socket.create_connection(('127.0.0.1', 9476))\ntry:\n  for _ in range(50): s.send(b'G'); time.sleep(0.2)\nexcept OSError: pass"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    scrape_and_parse(l.hv1.name(), addr)
        .unwrap_or_else(|e| panic!("scrape beside a trickling client: {e}"));
    traffic_both_ways(&l, "beside a silent metrics client");
    let again = scrape_and_parse(l.hv1.name(), addr).unwrap_or_else(|e| panic!("scrape: {e}"));
    let rx2 = sample(&again, "tunlab_port_receive_bytes", &tenant).unwrap_or_default();
    assert!(rx2 > rx, "counters did not move: {rx} then {rx2}");
    let _ = silent.wait_with_output();
    let _ = trickle.wait_with_output();
    drop((s1.stop(), s2.stop()));
}

/// `systemctl reload` sends SIGHUP: the node reads its file again and
/// applies what can change while it runs (a port added, then removed; a
/// rule of the file added, then deleted), leaves the rules added at run
/// time alone, names what waits for a restart (`workers`), and keeps
/// everything when the file does not read, while the tenants' traffic
/// goes on.
#[test]
fn sighup_applies_the_changed_file_and_names_what_waits_for_a_restart() {
    let l = lab();
    let (c1, c2) = pair_configs(&l, "geneve");
    let (s1, s2) = start_pair(&l, &c1, &c2);
    let file = l.dir.join("n1.toml");
    let original = std::fs::read_to_string(&file).unwrap();
    let (ok, _, err) = ctl(
        s1.ctl_path(),
        &["add-flow", "priority=9,udp,tp_dst=9 actions=drop"],
    );
    assert!(ok, "{err}");
    let hup = || {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(s1.pid() as i32),
            nix::sys::signal::Signal::SIGHUP,
        )
        .unwrap()
    };
    // Wait until `show` says what `done` wants (a reload is applied on the
    // switch's next turn, within 100 ms).
    let until = |what: &str, done: &dyn Fn(&str) -> bool| -> String {
        let end = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let (_, show, _) = ctl(s1.ctl_path(), &["show"]);
            let (_, flows, _) = ctl(s1.ctl_path(), &["dump-flows"]);
            let both = show + &flows;
            if done(&both) {
                return both;
            }
            assert!(std::time::Instant::now() < end, "{what}: {both}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let tap = format!("tlr{}", std::process::id() % 100_000);
    let grown = original
        .replacen("[switch]\n", "[switch]\nworkers = 2\n", 1)
        .replacen(
            "flows = [\n",
            "flows = [\n  \"priority=60,udp,tp_dst=60 actions=drop\",\n",
            1,
        )
        + &format!("\n[[port]]\nname = \"{tap}\"\nofport = 5\ntype = \"tap\"\n");
    std::fs::write(&file, &grown).unwrap();
    hup();
    let now = until("the added port and rule", &|s| {
        s.contains(&tap) && s.contains("priority=60,udp")
    });
    assert!(
        now.contains("priority=9,udp"),
        "the run-time rule went: {now}"
    );
    assert!(l.hv1.ip(&["link", "show", &tap]).is_ok(), "no TAP {tap}");
    traffic_both_ways(&l, "after the first reload");

    // Back to the original file: the port and the file's rule go, the
    // run-time rule stays.
    std::fs::write(&file, &original).unwrap();
    hup();
    let now = until("the port and rule removed", &|s| {
        !s.contains(&tap) && !s.contains("priority=60,udp")
    });
    assert!(
        now.contains("priority=9,udp"),
        "the run-time rule went: {now}"
    );
    assert!(l.hv1.ip(&["link", "show", &tap]).is_err(), "TAP {tap} left");

    // A file that does not read changes nothing.
    std::fs::write(&file, "[switch]\nname = \n").unwrap();
    hup();
    std::thread::sleep(Duration::from_millis(500));
    let (ok, show, _) = ctl(s1.ctl_path(), &["show"]);
    assert!(
        ok && show.contains("tap-n1") && show.contains("t-n1"),
        "{show}"
    );
    traffic_both_ways(&l, "after a reload of a broken file");
    std::fs::write(&file, &original).unwrap();

    let log = s1.stop();
    let reloads: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("event=config_reloaded"))
        .collect();
    assert_eq!(reloads.len(), 2, "{log}");
    assert!(
        reloads[0].contains(&format!("ports added: {tap}"))
            && reloads[0].contains("1 added or replaced")
            && reloads[0].contains("not applied until a restart: workers"),
        "{}",
        reloads[0]
    );
    assert!(
        reloads[1].contains(&format!("removed: {tap}"))
            && reloads[1].contains("1 deleted")
            && !reloads[1].contains("not applied until a restart"),
        "{}",
        reloads[1]
    );
    assert!(
        log.contains("event=config_reload_failed") && log.contains("n1.toml"),
        "{log}"
    );
    drop(s2.stop());
}
