//! Number formatting shared by every report.

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

/// Serializes a value as pretty JSON followed by a newline, for `--json` output.
pub fn json<T: serde::Serialize>(value: &T) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_sizes_and_counts() {
        assert_eq!(count(25_557_032), "25,557,032");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
    }
}
