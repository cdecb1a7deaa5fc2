//! Every input the fuzzers kept (fuzz/corpus/<target>/) runs again here on
//! the stable toolchain, so a regression shows up in `cargo test`.

use std::path::Path;

#[test]
fn fuzz_corpora_still_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut ran = 0;
    for (name, target) in tunlab_wire::fuzz_targets::TARGETS {
        let dir = root.join(name);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for e in entries {
            let path = e.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let r = std::panic::catch_unwind(|| target(&data));
            assert!(r.is_ok(), "fuzz target {name} panics on {}", path.display());
            ran += 1;
        }
    }
    assert!(ran > 0, "no corpus found under {}", root.display());
}
