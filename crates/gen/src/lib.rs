//! The generator (`tunlab gen`): packets described the way scapy users
//! write them, many flows from ranges and lists, frame sizes from 64 to
//! 9000 bytes or IMIX.
//!
//! Layers: [`spec`] reads the text into layers, fields and values with
//! their positions; [`layer`] knows each layer's fields, checks values and
//! says what is allowed; [`build`] turns a checked description into bytes
//! per flow and packet.
//!
//! Sending: [`pool`] builds every frame of a run once; [`sig`] is the
//! signature each frame carries in its last 16 bytes; [`send`] runs sender
//! threads on AF_PACKET TX rings and a receiver on an RX ring, feeding
//! [`count`]; [`ndr`] searches for the zero-loss rate; [`topo`] makes the
//! generator's own veth wire when no interface is given; [`reflect`] is
//! the tenant of a PVP test, sending every frame back.

pub mod build;
pub mod count;
pub mod layer;
pub mod ndr;
pub mod pool;
pub mod reflect;
pub mod send;
pub mod sig;
pub mod spec;
pub mod topo;
pub mod xdp;

pub use build::{Builder, Rng, Sizes};
pub use layer::Stack;

/// A description from a profile file: `#` starts a comment, and the
/// layers may be spread over lines.
pub fn read_profile(text: &str) -> String {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// Check a description and frame sizes; the error shows the description
/// with a caret under what is wrong.
pub fn builder(text: &str, sizes: Sizes) -> Result<Builder, String> {
    let stack = Stack::parse(text).map_err(|e| e.show(text))?;
    Builder::new(stack, sizes)
}

/// Packets 0..count: packet n belongs to flow n mod flows, so every flow
/// gets its turn before any repeats.
pub fn packets(b: &Builder, count: u64, seed: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut rng = Rng::new(seed);
    (0..count).map(move |n| {
        let mut out = Vec::new();
        b.build(n as u128, n, &mut rng, &mut out);
        out
    })
}

/// The fuzz target's body (fuzz/fuzz_targets/gen_parse.rs): any text is
/// read without panicking; what reads builds packets of the size asked.
#[doc(hidden)]
pub fn fuzz_parse(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(stack) = Stack::parse(&text) else {
        return;
    };
    for sizes in [Sizes::Natural, Sizes::Fixed(1518)] {
        let Ok(b) = Builder::new(stack.clone(), sizes.clone()) else {
            continue;
        };
        let mut out = Vec::new();
        for n in 0..3u64 {
            b.build(n as u128, n, &mut Rng::new(n), &mut out);
            match sizes {
                Sizes::Fixed(s) => assert_eq!(out.len(), s - build::FCS),
                _ => assert_eq!(out.len(), b.min_frame() - build::FCS),
            }
        }
    }
}

/// The fuzz target's body for what arrives from outside while sending
/// (fuzz/fuzz_targets/gen_receive.rs): any frame is counted without
/// panicking and lands in exactly one count; any text given as a rate or
/// an interface is read without panicking.
#[doc(hidden)]
pub fn fuzz_receive(data: &[u8]) {
    let (head, frame) = data.split_at(data.len().min(2));
    let flows = u32::from(*head.first().unwrap_or(&1)).max(1);
    let streams = usize::from(*head.get(1).unwrap_or(&1) % 8).max(1);
    let mut c = count::Counter::new(flows, streams);
    for rx_ns in [0, u64::MAX] {
        c.frame(frame, frame.len(), rx_ns);
    }
    assert_eq!(c.rx + c.dups + c.foreign, 2);
    assert!(c.per_flow.iter().sum::<u64>() == c.rx);
    let text = String::from_utf8_lossy(data);
    let _ = send::Rate::parse(&text).map(|r| r.pps(64.0));
    let _ = send::Endpoint::parse(&text);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_files_allow_comments_and_lines() {
        let t = "# the article's packet\nEther()/  # outer\nIP()/UDP()\n";
        assert_eq!(read_profile(t), "Ether()/  \nIP()/UDP()");
        assert!(builder(&read_profile(t), Sizes::Natural).is_ok());
    }

    #[test]
    fn errors_show_a_caret() {
        let e = builder("Ether()/IP(ttl=x)", Sizes::Natural).unwrap_err();
        assert!(e.ends_with("Ether()/IP(ttl=x)\n                 ^"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_read_without_panic(s in "\\PC{0,80}") {
            fuzz_parse(s.as_bytes());
        }

        #[test]
        fn text_from_the_grammar_is_read_without_panic(
            s in "(Ether|IP|UDP|GENEVE|VXLAN|pad|Dot1Q|TCP|STT|GRE)(\\((vni|src|dst|opt|sport|key|load)=(1|0x10|10\\.0\\.0\\.1-10\\.0\\.0\\.9|\\[1,2\\]|ovn\\(ingress=1\\)|b\"ab\"|random)\\))?(/(Ether|IP|IPv6|UDP|GENEVE|VXLAN|NVGRE|Raw|pad)(\\(\\))?){0,6}"
        ) {
            fuzz_parse(s.as_bytes());
        }
    }
}
