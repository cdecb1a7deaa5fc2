//! tunlab's application layers above the packet formats: for now the
//! capture reader and the decoder behind `tunlab decode`. The binary
//! (`main.rs`) only parses arguments and calls in here.

pub mod capture;
pub mod decode;

/// Decode arbitrary bytes as a frame of every link type the decoder
/// reads and render each both ways; the body of the `decode_frame` fuzz
/// target and of its corpus regression test.
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) {
    use capture::Link;
    let links = [
        Link::Ethernet { fcs: 0 },
        Link::Ethernet { fcs: 4 },
        Link::Ethernet { fcs: 2 },
        Link::LinuxSll,
        Link::LinuxSll2,
        Link::RawIp,
        Link::Loopback,
    ];
    let ports = decode::DecodeAs::default();
    for link in links {
        let r = capture::Record {
            number: 1,
            data,
            original: data.len(),
            link,
            odd: &[],
        };
        let f = decode::decode_record(&r, &ports);
        let mut s = String::new();
        decode::render_text(&f, &mut s);
        serde_json::to_string(&f).expect("decoded frames serialize");
    }
}
