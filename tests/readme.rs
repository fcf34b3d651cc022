//! The README against the tool it describes: the quick start's commands exist and parse with
//! trtkit's own command-line grammar, the output printed under them is of those same commands,
//! every `trtkit` line of the README parses, the tour shows every subcommand and links its page,
//! and the README stays one that fits a newcomer's first read (at most 250 lines).

use clap::{CommandFactory, Parser};
use std::path::Path;
use trtkit::cli::Cli;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn readme() -> String {
    std::fs::read_to_string(Path::new(ROOT).join("README.md")).expect("README.md")
}

/// The text under the heading `## title`, up to the next heading of that level.
fn section<'a>(text: &'a str, title: &str) -> &'a str {
    let head = format!("\n## {title}\n");
    let start = text
        .find(&head)
        .unwrap_or_else(|| panic!("README has no '## {title}'"))
        + head.len();
    let rest = &text[start..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

/// The lines of every fenced block of `lang` in `text`, block by block (indented fences too).
fn blocks(text: &str, lang: &str) -> Vec<Vec<String>> {
    let mut out = vec![];
    let mut current: Option<Vec<String>> = None;
    for line in text.lines() {
        let t = line.trim();
        match &mut current {
            None if t == format!("```{lang}") => current = Some(vec![]),
            Some(_) if t == "```" => out.extend(current.take()),
            Some(lines) => lines.push(t.to_string()),
            None => {}
        }
    }
    out
}

/// Parses a `trtkit …` line as the shell would split it (the README's lines need no quoting).
fn parses(line: &str) -> Result<(), String> {
    Cli::try_parse_from(line.split_whitespace())
        .map(|_| ())
        .map_err(|e| format!("`{line}` does not parse: {e}"))
}

#[test]
fn the_quick_start_commands_exist_and_parse() {
    let text = readme();
    let quick = section(&text, "Quick start");
    let typed = blocks(quick, "sh");
    assert_eq!(typed.len(), 1, "one block of commands in the quick start");
    let typed = &typed[0];
    assert_eq!(
        typed,
        &[
            "bash scripts/quickstart.sh",
            "cd orientation",
            "trtkit build --fp16 --input-shape -1 3 224 224",
            "trtkit validate --dataset val/",
            "trtkit compare --rtol 1e-3",
        ]
    );
    // The script is there and makes the folder the next line enters.
    let script = std::fs::read_to_string(Path::new(ROOT).join("scripts/quickstart.sh")).unwrap();
    assert!(script.contains(r#"dest="${1:-orientation}""#));
    for line in typed.iter().filter(|l| l.starts_with("trtkit ")) {
        parses(line).unwrap();
    }
    // The output shown is of exactly these commands, in this order.
    let shown = blocks(quick, "text");
    assert_eq!(shown.len(), 1, "one block of output in the quick start");
    let prompts: Vec<&str> = shown[0]
        .iter()
        .filter_map(|l| l.strip_prefix("$ "))
        .collect();
    assert_eq!(
        prompts,
        typed.iter().map(String::as_str).collect::<Vec<_>>()
    );
    // The parse check can fail: a flag no command has is refused.
    assert!(parses("trtkit validate --dataset val/ --no-such-flag").is_err());
}

#[test]
fn every_trtkit_line_of_the_readme_parses_and_the_tour_covers_every_subcommand() {
    let text = readme();
    let lines: Vec<String> = blocks(&text, "sh")
        .into_iter()
        .flatten()
        .filter(|l| l.starts_with("trtkit "))
        .collect();
    let failures: Vec<String> = lines.iter().filter_map(|l| parses(l).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    let tour = section(&text, "Tour");
    let examples: Vec<String> = blocks(tour, "sh").into_iter().flatten().collect();
    for sub in Cli::command().get_subcommands() {
        let name = sub.get_name();
        if sub.is_hide_set() || name == "help" {
            continue;
        }
        assert!(
            examples.iter().any(
                |l| l.starts_with(&format!("trtkit {name} ")) || *l == format!("trtkit {name}")
            ),
            "the tour has no example of `trtkit {name}`"
        );
        let page = format!("docs/{name}.md");
        assert!(
            tour.contains(&format!("]({page})")),
            "the tour does not link {page}"
        );
    }
}

#[test]
fn the_readme_is_short_and_its_links_resolve() {
    let text = readme();
    let n = text.lines().count();
    assert!(
        n <= 250,
        "README.md has {n} lines; keep it to 250 and move details to docs/"
    );
    let mut links = 0;
    for part in text.split("](").skip(1) {
        let target = &part[..part.find(')').unwrap_or(part.len())];
        if target.starts_with("http") {
            continue;
        }
        let file = target.split('#').next().unwrap();
        assert!(
            Path::new(ROOT).join(file).is_file(),
            "README links {target}, which does not exist"
        );
        links += 1;
    }
    assert!(links >= 11, "the tour links a page per subcommand");
}

/// The README's test command is one line, it is what CI runs last (after its style checks), and
/// the script it runs installs what the tests need before running them: a newcomer and CI run
/// the same thing.
#[test]
fn ci_runs_the_readmes_test_command_and_it_sets_up_first() {
    let text = readme();
    let typed = blocks(section(&text, "Run the tests"), "sh");
    assert_eq!(typed.len(), 1, "one block in 'Run the tests'");
    assert_eq!(
        typed[0].len(),
        1,
        "the test command is one line: {:?}",
        typed[0]
    );
    let command = &typed[0][0];

    let ci = std::fs::read_to_string(Path::new(ROOT).join(".ci/run")).expect(".ci/run");
    let last = ci
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with('#'))
        .expect(".ci/run has commands");
    assert_eq!(
        last, command,
        ".ci/run's last command is the README's test command"
    );

    let script = command
        .strip_prefix("bash ")
        .expect("the test command runs a script with bash");
    let body = std::fs::read_to_string(Path::new(ROOT).join(script)).expect("the test script");
    let setup = body
        .find("scripts/test-setup.sh")
        .expect("the script sets up");
    let tests = body
        .find("cargo nextest run")
        .expect("the script runs the tests");
    assert!(setup < tests, "set-up comes before the tests");
}
