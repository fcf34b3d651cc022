//! The conformance table (markdown) and `expected.tsv`, read and written.

use super::cells::{Cell, COMMANDS};
use super::outcome::{phrase, shorten, Expected, Outcome};
use std::collections::HashMap;

/// One model's row: its name and one cell per command.
pub type Row = (String, Vec<Cell>);

/// A cell as the table shows it: ✓, the refusal's phrase, `RAW:` and what it was, or n/a; then
/// the wall time.
fn cell_text(cell: &Cell) -> String {
    let text = match &cell.outcome {
        Outcome::Ok => "✓".to_string(),
        Outcome::Refused(line) => format!("refused: {}", phrase(line)),
        Outcome::Raw(what) => format!("**RAW** {}", shorten(what, 60)),
        Outcome::NotRun(why) => return format!("n/a ({why})"),
    };
    format!("{} ({:.1} s)", text.replace('|', "\\|"), cell.seconds)
}

/// The whole table as markdown, with a count of each kind of outcome under it and the first
/// line each failed command printed (`corpus`, the corpus folder, left out of it).
pub fn markdown(rows: &[Row], corpus: &str) -> String {
    let mut md = format!("| model | {} |\n", COMMANDS.join(" | "));
    md += &format!("|---|{}\n", "---|".repeat(COMMANDS.len()));
    let (mut ok, mut refused, mut raw) = (0, 0, 0);
    for (name, cells) in rows {
        let texts: Vec<String> = cells.iter().map(cell_text).collect();
        md += &format!("| {name} | {} |\n", texts.join(" | "));
        for c in cells {
            match c.outcome {
                Outcome::Ok => ok += 1,
                Outcome::Refused(_) => refused += 1,
                Outcome::Raw(_) => raw += 1,
                Outcome::NotRun(_) => {}
            }
        }
    }
    let total: f64 = rows.iter().flat_map(|r| &r.1).map(|c| c.seconds).sum();
    md += &format!(
        "\n{ok} ✓, {refused} refused, {raw} raw errors; {total:.0} s of commands in all.\n"
    );
    md += "\nWhat each refusal and raw error printed first:\n\n";
    for (name, cells) in rows {
        for (command, cell) in COMMANDS.iter().zip(cells) {
            if !cell.first_line.is_empty() {
                let line = shorten(&cell.first_line.replace(corpus, ""), 240);
                md += &format!("- {name} {command}: `{}`\n", line.replace('`', "'"));
            }
        }
    }
    md
}

/// `expected.tsv` as a map from (model, command) to what it expects.
pub fn read_expected(text: &str) -> HashMap<(String, String), Expected> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut cols = l.splitn(3, '\t');
            let (model, command, expected) = (
                cols.next().unwrap(),
                cols.next().unwrap_or(""),
                cols.next().unwrap_or(""),
            );
            let expected = Expected::parse(expected)
                .unwrap_or_else(|| panic!("expected.tsv: cannot read {l:?}"));
            ((model.to_string(), command.to_string()), expected)
        })
        .collect()
}

/// `expected.tsv` written from what was observed.
pub fn bless(rows: &[Row]) -> String {
    let mut tsv = String::from(
        "# What each command does to each corpus model (tests/model_corpus.rs): ok, refused: \
         PHRASE (a one-line refusal containing PHRASE), raw: WHAT (a raw error still to fix: \
         a known gap, let pass and shown), n/a: WHY. Rewritten by TRTKIT_CORPUS_BLESS=1.\n\
         #model\tcommand\texpected\n",
    );
    for (name, cells) in rows {
        for (command, cell) in COMMANDS.iter().zip(cells) {
            let expected = Expected::of(&cell.outcome).to_text();
            tsv += &format!("{name}\t{command}\t{expected}\n");
        }
    }
    tsv
}

/// Every cell that differs from `expected`, one line each: a raw error passes only where
/// `expected` lists it as a known gap (`raw: …`).
pub fn problems(rows: &[Row], expected: &HashMap<(String, String), Expected>) -> Vec<String> {
    let mut out = vec![];
    for (name, cells) in rows {
        for (command, cell) in COMMANDS.iter().zip(cells) {
            let observed = Expected::of(&cell.outcome).to_text();
            match expected.get(&(name.clone(), command.to_string())) {
                None => out.push(format!(
                    "{name} {command}: not in expected.tsv ({observed})"
                )),
                Some(e) if !e.matches(&cell.outcome) => out.push(format!(
                    "{name} {command}: expected {}, got {observed}",
                    e.to_text()
                )),
                _ => {}
            }
        }
    }
    out
}
