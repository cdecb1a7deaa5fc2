//! A TAP inside a network namespace of its own, talking to the kernel:
//!
//! ```text
//!   netns tunlab-t-<pid>-0
//!   +--------------------------------------+
//!   |  kernel 10.77.0.1/24  <->  tap0      |
//!   |                           ^  |       |
//!   |              test thread: |  v       |
//!   |        writes ARP request  reads ARP reply
//!   +--------------------------------------+
//! ```
//!
//! Needs root (CI runs as root). The namespace is removed on success and
//! failure; a killed run's namespace is swept by the next run.

use std::time::{Duration, Instant};
use tunlab_netio::netns::{self, Netns};
use tunlab_netio::tap::{Tap, TapOptions, VNET_HDR_LEN};
use tunlab_wire::arp;
use tunlab_wire::ethernet::{self, EtherType, MacAddr};

#[test]
fn kernel_answers_arp_through_the_tap() {
    let ns =
        Netns::create("tunlab-t", 0).expect("create a network namespace (needs root and iproute2)");
    let name = ns.name().to_string();
    let worker = std::thread::spawn(move || -> Result<Vec<u8>, String> {
        netns::enter(&name).map_err(|e| e.to_string())?;
        let tap = Tap::open("tap0", TapOptions::default()).map_err(|e| e.to_string())?;
        netns::ip(&name, &["link", "set", "tap0", "up"]).map_err(|e| e.to_string())?;
        netns::ip(&name, &["addr", "add", "10.77.0.1/24", "dev", "tap0"])
            .map_err(|e| e.to_string())?;
        let me = MacAddr([0x02, 0, 0, 0, 0x77, 0x02]);
        let mut frame = vec![0u8; VNET_HDR_LEN + 14 + 28];
        ethernet::Repr {
            dst: MacAddr::BROADCAST,
            src: me,
            ethertype: EtherType::Arp,
        }
        .emit(&mut frame[VNET_HDR_LEN..]);
        arp::Repr {
            operation: arp::OP_REQUEST,
            sender_mac: me,
            sender_ip: "10.77.0.2".parse().unwrap(),
            target_mac: MacAddr([0; 6]),
            target_ip: "10.77.0.1".parse().unwrap(),
        }
        .emit(&mut frame[VNET_HDR_LEN + 14..]);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut buf = vec![0u8; 65536];
        // The interface may drop the first frame while it comes up: resend.
        let mut next_send = Instant::now();
        while Instant::now() < deadline {
            if Instant::now() >= next_send {
                tap.send(&frame).map_err(|e| e.to_string())?;
                next_send = Instant::now() + Duration::from_millis(300);
            }
            if let Some(n) = tap.recv(&mut buf).map_err(|e| e.to_string())? {
                let f = &buf[VNET_HDR_LEN..n];
                if f.len() >= 42 && f[12..14] == [0x08, 0x06] && f[20..22] == [0, 2] {
                    return Ok(f.to_vec());
                }
            } else {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Err("no ARP reply within 5 s".into())
    });
    let reply = worker.join().expect("worker thread").expect("ARP reply");
    let a = arp::Packet::new_checked(&reply[14..]).unwrap();
    assert_eq!(a.sender_ip().to_string(), "10.77.0.1");
    assert_eq!(a.target_mac(), MacAddr([0x02, 0, 0, 0, 0x77, 0x02]));
    drop(ns);
}
