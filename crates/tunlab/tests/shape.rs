//! The shape the code and its documents keep: the README a front page (at
//! most 250 lines) whose relative links, and docs/'s, point at files that
//! exist (anchors are not followed: a link names a page); no source file
//! over 800 lines outside its unit tests, no function over 120 lines.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Markdown files: the README and everything under docs/.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out
}

/// The targets of `[text](target)` and `![alt](target)` outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn the_readme_fits_on_a_few_screens() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let n = text.lines().count();
    assert!(
        n <= 250,
        "README.md has {n} lines; the details belong in docs/"
    );
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let file = target.split('#').next().unwrap_or_default();
            let dir = page.parent().unwrap();
            if !dir.join(file).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
}

/// Every Rust source file of the crates (not their tests/ folders).
fn sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// The lines before a file's unit tests (`#[cfg(test)]` then `mod`).
fn code_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0].starts_with("#[cfg(test)]") && w[1].starts_with("mod "))
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// Each function's name and length: from its `fn` line to the closing
/// brace at the same indentation.
fn functions(lines: &[&str]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let indent = &l[..l.len() - t.len()];
        let sig = [
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "fn ",
            "const fn ",
            "unsafe fn ",
        ]
        .iter()
        .find_map(|p| t.strip_prefix(p));
        let Some(rest) = sig else { continue };
        if l.trim_end().ends_with(';') {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{indent}}}");
        if let Some(n) = lines[i + 1..].iter().position(|x| *x == close) {
            out.push((name, n + 2));
        }
    }
    out
}

#[test]
fn no_source_file_or_function_grows_past_its_limit() {
    let mut over = Vec::new();
    for f in sources() {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines = code_lines(&text);
        if lines.len() > 800 {
            over.push(format!(
                "{}: {} lines (800 at most)",
                f.display(),
                lines.len()
            ));
        }
        for (name, n) in functions(&lines) {
            if n > 120 {
                over.push(format!(
                    "{}: fn {name}: {n} lines (120 at most)",
                    f.display()
                ));
            }
        }
    }
    assert!(
        over.is_empty(),
        "split these where their parts have names:\n{}",
        over.join("\n")
    );
}

#[test]
fn the_size_reader_counts_code_and_functions() {
    let text = "fn a() {\n    1\n}\n    pub(super) fn b(x: u8) -> u8 {\n        x\n    }\nfn decl();\n#[cfg(test)]\nmod tests {\nfn c() {\n}\n}\n";
    let lines = code_lines(text);
    assert_eq!(lines.len(), 7);
    assert_eq!(
        functions(&lines),
        [("a".to_string(), 3), ("b".to_string(), 3)]
    );
}

#[test]
fn the_link_reader_finds_links_and_skips_code() {
    let t = "see [a](docs/a.md) and ![b](x.png)\n```\n[c](nope.md)\n```\n[d](#top)";
    assert_eq!(links(t), ["docs/a.md", "x.png", "#top"]);
}
