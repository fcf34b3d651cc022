//! Number formatting and CSV fields, shared by every report.

pub use crate::units::bytes;

/// A count with thousands separators: `25,557,032`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A number with four significant digits (`12346`, `1234`, `12.35`, `0.01235`, `-2.500`),
/// `0` for zero, scientific notation below 1e-3 where fixed decimals would print only zeros
/// (`1.235e-7`), and `-` when it is not finite: every table's numbers, measurements and errors
/// alike.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a == 0.0 {
        return "0".into();
    }
    if a < 1e-3 {
        return format!("{v:.3e}");
    }
    let decimals = if a >= 1000.0 {
        0
    } else {
        (3 - a.log10().floor() as i32).clamp(1, 6) as usize
    };
    format!("{v:.decimals$}")
}

/// Serializes a value as pretty JSON followed by a newline, for `--json` output.
pub fn json<T: serde::Serialize>(value: &T) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

/// One CSV field (RFC 4180): quoted, its quotes doubled, when it holds a comma, a quote, a
/// carriage return or a line feed; as it is otherwise.
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_only_when_they_must_be() {
        assert_eq!(csv_field("resnet50.onnx"), "resnet50.onnx");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("line\nbreak"), "\"line\nbreak\"");
        assert_eq!(csv_field("cr\rhere"), "\"cr\rhere\"");
    }

    #[test]
    fn formats_sizes_and_counts() {
        assert_eq!(count(25_557_032), "25,557,032");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
    }

    #[test]
    fn numbers_keep_four_significant_digits() {
        assert_eq!(num(12345.6), "12346");
        assert_eq!(num(1234.4), "1234");
        assert_eq!(num(12.346), "12.35");
        assert_eq!(num(0.012346), "0.01235");
        assert_eq!(num(0.0012346), "0.001235");
        assert_eq!(num(1.2346e-7), "1.235e-7");
        assert_eq!(num(-2.5), "-2.500");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(f64::NAN), "-");
        assert_eq!(num(f64::INFINITY), "-");
    }
}
