//! Where `unsafe` may be written: the crate denies it, and only a few narrow modules that wrap
//! foreign calls are allowed it, each block with a `// SAFETY:` line. No raw device address is a
//! public field, and the accessor that yields one is called only inside those modules. Read from
//! the sources, so new `unsafe` elsewhere fails here.

mod support;

use std::path::{Path, PathBuf};
use support::rust_files;

/// The files allowed `unsafe`, relative to `src/`, and the module declarations that allow it.
const UNSAFE_FILES: &[(&str, &str)] = &[
    ("cuda/sys.rs", "mod sys;"),
    ("cuda/memory.rs", "pub mod memory;"),
    ("cuda/launch.rs", "mod launch;"),
    ("cuda/ort_stream.rs", "pub mod ort_stream;"),
    ("trt/ffi.rs", "mod ffi;"),
    ("trt/sys.rs", "mod sys;"),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every library source file, as its path under `src/` (with `/`) and its text.
fn sources() -> Vec<(String, String)> {
    let mut files = vec![];
    rust_files(&src(), &mut files);
    files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(src()).unwrap();
            let rel = rel.to_string_lossy().replace('\\', "/");
            (rel, std::fs::read_to_string(f).unwrap())
        })
        .collect()
}

/// A line's code: without its comment (a `//` outside a string literal ends the code) and with
/// the insides of its string literals left out.
fn code_of(line: &str) -> String {
    let mut out = String::new();
    let mut in_str = false;
    let mut prev = ' ';
    for c in line.chars() {
        if c == '"' && prev != '\\' {
            in_str = !in_str;
            out.push(c);
        } else if !in_str && c == '/' && prev == '/' {
            out.pop();
            return out;
        } else if !in_str {
            out.push(c);
        }
        prev = c;
    }
    out
}

/// Whether `code` holds `word` as a whole identifier.
fn has_word(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(i, _)| {
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        let before = code[..i].chars().next_back().is_none_or(|c| !ident(c));
        let after = code[i + word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !ident(c));
        before && after
    })
}

/// The 1-based lines of `text` whose code uses the `unsafe` keyword (an `unsafe fn` type in a
/// generic argument included), outside string literals and comments.
fn unsafe_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let code = code_of(l);
            has_word(&code, "unsafe") && !code.contains("unsafe_code")
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// The `unsafe` blocks and impls of `text` with no `// SAFETY:` comment on their line or in
/// the comment lines right above it (a block opened in an expression may sit below the
/// statement's first line; up to three code lines are looked past).
fn without_safety_note(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    unsafe_lines(text)
        .into_iter()
        .filter(|&n| {
            let line = lines[n - 1];
            let code = code_of(line);
            // A function-pointer type (`unsafe extern "C" fn`) is not a block.
            if code.contains("unsafe extern") {
                return false;
            }
            let mut code_seen = 0;
            for (k, l) in lines[..n].iter().enumerate().rev() {
                let t = l.trim_start();
                if t.contains("SAFETY") {
                    return false;
                }
                if !t.starts_with("//") {
                    // Another block's note does not cover this one.
                    if k + 1 != n && has_word(&code_of(l), "unsafe") {
                        break;
                    }
                    code_seen += 1;
                    if code_seen > 4 {
                        break;
                    }
                }
            }
            true
        })
        .collect()
}

#[test]
fn unsafe_code_lives_only_in_the_ffi_modules() {
    let allowed: Vec<&str> = UNSAFE_FILES.iter().map(|(f, _)| *f).collect();
    let mut found = vec![];
    for (file, text) in sources() {
        if !allowed.contains(&file.as_str()) && !unsafe_lines(&text).is_empty() {
            found.push((file, unsafe_lines(&text)));
        }
    }
    assert_eq!(found, vec![], "`unsafe` outside the ffi modules");
    let sources = sources();
    for file in &allowed {
        assert!(
            sources.iter().any(|(f, _)| f == file),
            "{file} is allowed `unsafe` but does not exist"
        );
    }
}

#[test]
fn unsafe_is_allowed_only_on_the_ffi_module_declarations() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    assert!(lib.contains("#![deny(unsafe_code)]"));
    for (file, text) in sources() {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = code_of(line);
            assert!(
                !code.contains("#![allow(unsafe_code)]"),
                "{file}:{}: a whole module opts out of the deny",
                i + 1
            );
            if code.contains("allow(unsafe_code)") {
                let folder = file.rsplit_once('/').map_or("", |(d, _)| d);
                let next = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
                let declares_allowed = UNSAFE_FILES.iter().any(|(f, decl)| {
                    f.rsplit_once('/').map_or("", |(d, _)| d) == folder
                        && *decl == next
                        && file.ends_with("mod.rs")
                });
                assert!(
                    declares_allowed,
                    "{file}:{}: `allow(unsafe_code)` on {next:?}, not an ffi module",
                    i + 1
                );
            }
        }
    }
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    for (file, _) in UNSAFE_FILES {
        let text = std::fs::read_to_string(src().join(file)).unwrap();
        assert_eq!(
            without_safety_note(&text),
            Vec::<usize>::new(),
            "{file}: `unsafe` without a `// SAFETY:` line"
        );
    }
}

#[test]
fn no_raw_device_address_is_public_and_only_ffi_modules_read_one() {
    let allowed: Vec<&str> = UNSAFE_FILES.iter().map(|(f, _)| *f).collect();
    for (file, text) in sources() {
        for (i, line) in text.lines().enumerate() {
            let code = code_of(line);
            assert!(
                !code.contains("pub ptr:"),
                "{file}:{}: a public raw address field",
                i + 1
            );
            if code.contains(".device_ptr()") {
                assert!(
                    allowed.contains(&file.as_str()),
                    "{file}:{}: a raw device address read outside the ffi modules",
                    i + 1
                );
            }
        }
    }
}

#[test]
fn the_readers_see_unsafe_code_and_missing_notes() {
    let text = "fn a() {\n    // unsafe in a comment\n    let s = \"unsafe\";\n    unsafe { f() }\n}\n\n// SAFETY: checked above.\nunsafe impl Send for X {}\nunsafe impl Sync for X {}\nlet _u = unsafe_code;\n";
    assert_eq!(unsafe_lines(text), vec![4, 8, 9]);
    assert_eq!(without_safety_note(text), vec![4, 9]);
    assert_eq!(code_of("let x = 1; // unsafe"), "let x = 1; ");
    assert_eq!(code_of("let u = \"http://x\"; // y"), "let u = \"\"; ");
    assert!(has_word("x = unsafe {", "unsafe"));
    assert!(!has_word("not_unsafe_here", "unsafe"));
}
