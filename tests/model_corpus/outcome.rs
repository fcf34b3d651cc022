//! What one command did to one model: ✓, a clean refusal, or a raw error, and whether that is
//! what `expected.tsv` says it should be.

use std::process::ExitStatus;

/// Texts that only a backend, a panic or a debugger prints: a line carrying one of them is a raw
/// error even when it is a single line and names the file.
const RAW_TEXTS: &[&str] = &[
    "panicked",
    "RUST_BACKTRACE",
    "stack backtrace",
    "Failed analyse",
    "Impossible to unify",
    "Undetermined symbol",
    "ONNXRuntimeError",
    "Translating node",
    "Evaluating #",
    "Wiring root graph",
    "TDim",
    "Unimplemented(",
    "TypeInferenceError",
    "IBuilder::",
    "Error Code ",
];

/// One cell's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Exit 0.
    Ok,
    /// Exit 1 or 2, one line naming the model file, no backend text: the line itself.
    Refused(String),
    /// Anything else: a short description (panic message, signal, first line).
    Raw(String),
    /// Not run: why.
    NotRun(&'static str),
}

/// Classifies a finished command from its exit status and stderr; `files` are the names of the
/// model files the command was given (a refusal must name one of them).
pub fn classify(status: Option<ExitStatus>, stderr: &str, files: &[&str]) -> Outcome {
    let Some(status) = status else {
        return Outcome::Raw("timed out".into());
    };
    if status.success() {
        return Outcome::Ok;
    }
    let lines: Vec<&str> = stderr.trim_end().lines().collect();
    let Some(code) = status.code() else {
        return Outcome::Raw(format!("killed by a signal ({status})"));
    };
    if let Some(i) = lines.iter().position(|l| l.contains("panicked")) {
        let msg = lines.get(i + 1).copied().unwrap_or(lines[i]);
        return Outcome::Raw(format!("panic: {}", shorten(msg, 70)));
    }
    let raw_text = RAW_TEXTS
        .iter()
        .find(|t| stderr.contains(*t))
        .or_else(|| has_node_reference(stderr).then_some(&"#N \"node\""));
    let names_file = files.iter().any(|f| stderr.contains(f));
    match (lines.as_slice(), raw_text) {
        ([line], None) if (code == 1 || code == 2) && names_file => {
            Outcome::Refused(line.to_string())
        }
        (_, Some(text)) => Outcome::Raw(format!("{text}: {}", shorten(first(&lines), 60))),
        _ if !names_file => Outcome::Raw(format!("no file named: {}", shorten(first(&lines), 60))),
        _ => Outcome::Raw(format!(
            "exit {code}, {} lines: {}",
            lines.len(),
            shorten(first(&lines), 60)
        )),
    }
}

fn first<'a>(lines: &[&'a str]) -> &'a str {
    lines.first().copied().unwrap_or("(nothing on stderr)")
}

/// Whether `text` holds one of tract's node references: `#123 "name"`.
fn has_node_reference(text: &str) -> bool {
    text.match_indices('#').any(|(i, _)| {
        let rest = &text[i + 1..];
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with(" \"")
    })
}

/// At most `max` characters of `text`, cut at a word boundary, `…` where cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    let cut = cut.rsplit_once(' ').map_or(cut.as_str(), |(head, _)| head);
    format!("{cut}…")
}

/// A short phrase of a refusal line that is part of it: the line without `error: ` and the
/// leading parts that name files, up to the first `;`, at most 50 characters.
pub fn phrase(line: &str) -> String {
    let mut rest = line.strip_prefix("error: ").unwrap_or(line);
    while let Some((head, tail)) = rest.split_once(": ") {
        if !(head.contains(".onnx") || head.contains('/')) {
            break;
        }
        rest = tail;
    }
    let clause = rest.split(';').next().unwrap_or(rest).trim();
    if clause.chars().count() <= 50 {
        return clause.to_string();
    }
    let cut: String = clause.chars().take(50).collect();
    cut.rsplit_once(' ')
        .map_or(cut.as_str(), |(head, _)| head)
        .to_string()
}

/// What `expected.tsv` says of a cell.
#[derive(Clone, Debug, PartialEq)]
pub enum Expected {
    /// `ok`.
    Ok,
    /// `refused: PHRASE`: a refusal whose line contains PHRASE.
    Refused(String),
    /// `raw: TEXT`: a raw error, a known gap that the test lets pass and the table shows.
    Raw(String),
    /// `n/a: WHY`.
    NotRun(String),
}

impl Expected {
    /// Parses the third column of `expected.tsv`.
    pub fn parse(text: &str) -> Option<Expected> {
        if text == "ok" {
            return Some(Expected::Ok);
        }
        let (kind, rest) = text.split_once(": ")?;
        let rest = rest.to_string();
        match kind {
            "refused" => Some(Expected::Refused(rest)),
            "raw" => Some(Expected::Raw(rest)),
            "n/a" => Some(Expected::NotRun(rest)),
            _ => None,
        }
    }

    /// What bless writes for an observed outcome.
    pub fn of(outcome: &Outcome) -> Expected {
        match outcome {
            Outcome::Ok => Expected::Ok,
            Outcome::Refused(line) => Expected::Refused(phrase(line)),
            Outcome::Raw(text) => Expected::Raw(text.clone()),
            Outcome::NotRun(why) => Expected::NotRun(why.to_string()),
        }
    }

    /// The third column of `expected.tsv`.
    pub fn to_text(&self) -> String {
        match self {
            Expected::Ok => "ok".into(),
            Expected::Refused(p) => format!("refused: {p}"),
            Expected::Raw(t) => format!("raw: {}", t.replace(['\t', '\n'], " ")),
            Expected::NotRun(w) => format!("n/a: {w}"),
        }
    }

    /// Whether `outcome` is what this expects (any raw error matches `raw: …`).
    pub fn matches(&self, outcome: &Outcome) -> bool {
        match (self, outcome) {
            (Expected::Ok, Outcome::Ok) => true,
            (Expected::Refused(p), Outcome::Refused(line)) => line.contains(p.as_str()),
            (Expected::Raw(_), Outcome::Raw(_)) => true,
            (Expected::NotRun(w), Outcome::NotRun(why)) => w == why,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_references_and_phrases() {
        assert!(has_node_reference(
            "Failed analyse for node #663 \"p2o.Concat.0\""
        ));
        assert!(!has_node_reference("batch #3 of 4"));
        let line = "error: /x/m.onnx: calibration batch 0: tract did not compute output 'R'";
        assert_eq!(
            phrase(line),
            "calibration batch 0: tract did not compute output"
        );
        let two = "error: /x/m.onnx with cal/m.cache: cannot raise the opset; re-export it";
        assert_eq!(phrase(two), "cannot raise the opset");
        assert!(
            Expected::of(&Outcome::Refused(line.into())).matches(&Outcome::Refused(line.into()))
        );
    }
}
