//! Open vSwitch 3.1's `ovs-ofctl` on the wire (tests/golden/
//! ovs-ofctl-3.1-messages.txt): every message it sent frames whole, its
//! HELLO agrees with ours on the version it asked for, and the rest of
//! the session keeps that version.

use tunlab_wire::openflow::{self as of, Message};

fn unhex(s: &str) -> Vec<u8> {
    tunlab_wire::from_hex(s).expect("hex")
}

#[test]
fn ovs_ofctl_sessions_frame_and_agree() {
    let text = include_str!("golden/ovs-ofctl-3.1-messages.txt");
    let mut sessions = 0;
    for block in text.split("\n$ ").skip(1) {
        let mut lines = block.lines();
        let command = lines.next().unwrap();
        let want = if command.contains("-O OpenFlow13") {
            of::OF13
        } else {
            of::OF10
        };
        let msgs: Vec<Vec<u8>> = lines
            .take_while(|l| !l.is_empty() && !l.starts_with('#'))
            .map(unhex)
            .collect();
        assert!(msgs.len() >= 2, "{command}");
        let stream = msgs.concat();
        let mut at = 0;
        for (i, m) in msgs.iter().enumerate() {
            assert_eq!(
                of::frame(&stream[at..]).unwrap(),
                Some(m.len()),
                "{command}: message {i}"
            );
            let v = Message::new_checked(&stream[at..]).unwrap();
            assert_eq!(v.version(), want, "{command}: message {i}");
            if i == 0 {
                assert_eq!(v.msg_type(), of::HELLO);
                let b = of::hello_bitmap(&v).unwrap();
                let ours = of::version_bitmap(&[of::OF10, of::OF13]);
                assert_eq!(of::agree(ours, v.version(), b), Some(want), "{command}");
            }
            at += m.len();
        }
        assert_eq!(at, stream.len());
        sessions += 1;
    }
    assert_eq!(sessions, 7);
}
