//! No library code decides by the words of an error: a condition other code acts on is an
//! `error::ErrorKind`, found with `kind_of`, so rewording a message cannot change what
//! trtkit does. And the command line reads what fixes an error from its `error::Hint`, never by
//! downcasting to one error type after another. Read from the sources: a `.contains(` applied to an error's text outside the
//! unit tests fails here. Where words are all there is (another program's: TensorRT's log, a
//! crashed child's stderr), the line says why with a comment starting with [`MARKER`], on it or
//! on the line before.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use support::rust_files;

/// The comment that marks a search through another program's words.
const MARKER: &str = "reads words, not a kind:";

/// Names an error's text goes by in this crate.
const ERROR_NAMES: &[&str] = &[
    "e", "err", "error", "errors", "msg", "message", "reason", "why", "said", "stderr", "cause",
];

/// Whether `line` searches an error's text with `.contains(`: the receiver names an error or
/// turns one into text (`to_string()`, `format!("{e…`).
fn searches_error_text(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or("");
    let mut rest = code;
    while let Some(at) = rest.find(".contains(") {
        let receiver = receiver_of(&rest[..at]);
        let names_error = receiver
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|word| ERROR_NAMES.contains(&word));
        if names_error || receiver.contains("to_string()") || receiver.contains("format!(\"{e") {
            return true;
        }
        rest = &rest[at + 1..];
    }
    false
}

/// The expression that ends `before` (what a method called next is called on): back to the
/// first space, `(`, `,`, `|`, `&`, `=`, `{` or `;` outside parentheses.
fn receiver_of(before: &str) -> &str {
    let mut depth = 0i32;
    for (i, c) in before.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' if depth > 0 => depth -= 1,
            ' ' | '\t' | '(' | ',' | '|' | '&' | '=' | '{' | ';' if depth == 0 => {
                return &before[i + c.len_utf8()..]
            }
            _ => {}
        }
    }
    before
}

/// The folder a module file's child modules live in (`a/mod.rs` → `a/`, `a/b.rs` → `a/b/`).
fn children_dir(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap();
    match path.file_stem().and_then(|s| s.to_str()) {
        Some("mod" | "lib" | "main") => dir.to_path_buf(),
        Some(stem) => dir.join(stem),
        None => dir.to_path_buf(),
    }
}

/// The lines of `text` outside items under `#[cfg(test)]` (inline test modules and test-only
/// functions), numbered from 1, and the names of the test modules kept in files of their own.
fn library_lines(text: &str) -> (Vec<(usize, &str)>, Vec<String>) {
    let (mut kept, mut test_files) = (vec![], vec![]);
    let mut lines = text.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            kept.push((i + 1, line));
            continue;
        }
        // Skip the item under the attribute: one line ending in `;`, or up to its closing brace.
        let mut depth = 0i64;
        let mut opened = false;
        for (_, item) in lines.by_ref() {
            let t = item.trim();
            if !opened && t.ends_with(';') && !t.contains('{') {
                if let Some(name) = t
                    .trim_end_matches(';')
                    .split_whitespace()
                    .skip_while(|w| *w != "mod")
                    .nth(1)
                {
                    test_files.push(name.to_string());
                }
                break;
            }
            depth += item.matches('{').count() as i64 - item.matches('}').count() as i64;
            opened |= item.contains('{');
            if opened && depth <= 0 {
                break;
            }
        }
    }
    (kept, test_files)
}

/// Every line of library code in `src/` that searches an error's text without the marker.
fn offending_lines(src: &Path) -> Vec<String> {
    lines_where(src, |line, previous| {
        searches_error_text(line) && !line.contains(MARKER) && !previous.contains(MARKER)
    })
}

/// Whether `line` asks an error whether it is of some type.
fn downcasts(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or("");
    [".downcast_ref", ".downcast::<", ".is::<"]
        .iter()
        .any(|call| code.contains(call))
}

/// Every line of library code in `src/` (outside the unit tests) for which `offends(line, the
/// line before)` holds.
fn lines_where(src: &Path, offends: impl Fn(&str, &str) -> bool) -> Vec<String> {
    let mut files = vec![];
    rust_files(src, &mut files);
    files.sort();
    let texts: Vec<String> = files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let mut test_only = BTreeSet::new();
    for (path, text) in files.iter().zip(&texts) {
        for name in library_lines(text).1 {
            let dir = children_dir(path);
            test_only.insert(dir.join(format!("{name}.rs")));
            test_only.insert(dir.join(&name));
        }
    }
    let mut found = vec![];
    for (path, text) in files.iter().zip(&texts) {
        if test_only.iter().any(|t| path.starts_with(t)) {
            continue;
        }
        let (lines, _) = library_lines(text);
        let mut previous = "";
        for (n, line) in lines {
            if offends(line, previous) {
                found.push(format!("{}:{n}: {}", path.display(), line.trim()));
            }
            previous = line;
        }
    }
    found
}

#[test]
fn no_library_code_decides_by_an_errors_words() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = offending_lines(&src);
    assert!(
        found.is_empty(),
        "give the condition an error::ErrorKind and ask kind_of instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_command_line_reads_hints_and_downcasts_no_error_type() {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let found = lines_where(&cli, |line, _| downcasts(line));
    assert!(
        found.is_empty(),
        "give the error an error::Hint and read it with hinted/hint_of instead:\n{}",
        found.join("\n")
    );
    for bad in [
        "if let Some(e) = cause.downcast_ref::<TooLargeForMemory>() {",
        "        if e.is::<NoWorkspace>() {",
        "match e.downcast::<Verdict>() {",
    ] {
        assert!(downcasts(bad), "{bad}");
    }
    for fine in [
        "let Some(hinted) = hinted(&err) else {",
        "// e.is::<X>() in a comment",
    ] {
        assert!(!downcasts(fine), "{fine}");
    }
}

#[test]
fn the_rule_tells_error_text_from_other_searches() {
    for bad in [
        r#"if e.to_string().contains("x") {"#,
        r#"    .find(|err| err.contains("has none usable"))"#,
        r#"let oom = format!("{e:#}").contains("out of memory");"#,
        r#"if message.to_ascii_lowercase().contains("cannot run") {"#,
        r#"Some(r) if reason.contains("Plugin not found") => 1,"#,
        r#"let alloc = stderr.contains("memory allocation of");"#,
        r#"if !err.to_string().to_lowercase().contains("x") {"#,
        r#"let hit = names.contains(&n) || msg.contains(n);"#,
    ] {
        assert!(searches_error_text(bad), "{bad}");
    }
    for fine in [
        r#"let keep = names.contains(&graph.initializer[*i].name);"#,
        r#"Some(f) if !(0.0..1.0).contains(&f) => Err(UsageError(format!("#,
        r#"|| computes16.contains(format!("{}_matmul", n.name).as_str())"#,
        r#"let e = message.len(); // not a search"#,
        r#".is_some_and(|e| ENGINE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))"#,
        r#"if why.len() > 3 && names.contains(&why) {"#,
        r#"// err.contains("x") in a comment"#,
    ] {
        assert!(!searches_error_text(fine), "{fine}");
    }
}

#[test]
fn test_items_are_left_out_and_planted_lines_are_found() {
    let text = r#"fn a(e: &str) -> bool {
    e.contains("x")
}
#[cfg(test)]
fn helper(e: &str) -> bool {
    e.contains("y")
}
#[cfg(test)]
mod tests {
    fn t(err: &str) {
        assert!(err.contains("z"));
    }
}
#[cfg(test)]
mod more_tests;
// reads words, not a kind: TensorRT's log
fn b(said: &str) -> bool { said.contains("w") }
"#;
    let (lines, tests) = library_lines(text);
    let hits: Vec<usize> = lines
        .iter()
        .filter(|(_, l)| searches_error_text(l))
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(hits, vec![2, 17]);
    assert_eq!(tests, vec!["more_tests".to_string()]);

    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("m");
    std::fs::create_dir_all(sub.join("more_tests")).unwrap();
    std::fs::write(sub.join("mod.rs"), text).unwrap();
    std::fs::write(
        sub.join("more_tests").join("deep.rs"),
        "fn d(e: &str) -> bool { e.contains(\"q\") }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("planted.rs"),
        "fn p(e: anyhow::Error) -> bool {\n    e.to_string().contains(\"x\")\n}\n",
    )
    .unwrap();
    let found = offending_lines(dir.path());
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].ends_with("m/mod.rs:2: e.contains(\"x\")"),
        "{found:#?}"
    );
    assert!(
        found[1].ends_with("planted.rs:2: e.to_string().contains(\"x\")"),
        "{found:#?}"
    );
}
