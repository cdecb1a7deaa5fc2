//! tunlab's application layers above the packet formats: for now the
//! capture reader and the decoder behind `tunlab decode`. The binary
//! (`main.rs`) only parses arguments and calls in here.

pub mod capture;
pub mod decode;

/// Decode arbitrary bytes as a frame and render it both ways; the body of
/// the `decode_frame` fuzz target and of its corpus regression test.
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) {
    let f = decode::decode_frame(1, data, data.len());
    let mut s = String::new();
    decode::render_text(&f, &mut s);
    serde_json::to_string(&f).expect("decoded frames serialize");
}
