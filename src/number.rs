//! The one value parser of every float flag: a number that is finite (no NaN, no ±inf), and for
//! some flags within a range, so a bad value is a usage error at parse time, before anything
//! runs or is written. clap names the flag and the value in its error line. Shared by `cli` and
//! `bench`'s settings (which are flags too); imports nothing else of the crate.

use std::time::Duration;

/// What a float flag accepts beyond being finite.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bound {
    /// Any finite number.
    Any,
    /// Zero or more.
    NonNegative,
    /// Within `[low, high]`.
    Within(f64, f64),
    /// Zero or more seconds that a `Duration` can hold.
    Seconds,
}

/// Reads `text` as a finite number that meets `bound`; the error says what was expected.
fn checked(text: &str, bound: Bound) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a number"))?;
    if !v.is_finite() {
        return Err(format!("{text} is not a finite number"));
    }
    match bound {
        Bound::Any => Ok(v),
        Bound::NonNegative if v >= 0.0 => Ok(v),
        Bound::NonNegative => Err(format!("{text} is negative; expected 0 or more")),
        Bound::Within(low, high) if (low..=high).contains(&v) => Ok(v),
        Bound::Within(low, high) => Err(format!("{text} is outside [{low}, {high}]")),
        Bound::Seconds if v < 0.0 => Err(format!("{text} is negative; expected 0 or more seconds")),
        Bound::Seconds => seconds_value(v)
            .map(|_| v)
            .map_err(|_| format!("{text} seconds is more than a timer can hold")),
    }
}

/// Whether `v` seconds is a duration this program can wait: not negative, not beyond what a
/// `Duration` holds. The error says why not.
pub(crate) fn seconds_value(v: f64) -> Result<Duration, String> {
    if v < 0.0 {
        return Err(format!("{v:?} is negative; expected 0 or more seconds"));
    }
    Duration::try_from_secs_f64(v)
        .map_err(|_| format!("{v:?} seconds is more than a timer can hold"))
}

/// A finite `f64`.
pub fn finite(text: &str) -> Result<f64, String> {
    checked(text, Bound::Any)
}

/// A finite `f32` (a value beyond `f32`'s range is refused, not turned into ±inf).
pub(crate) fn finite_f32(text: &str) -> Result<f32, String> {
    let v = checked(text, Bound::Any)?;
    let narrow = v as f32;
    if !narrow.is_finite() {
        return Err(format!("{text} is beyond the range of a 32-bit float"));
    }
    Ok(narrow)
}

/// A finite `f64`, zero or more.
pub(crate) fn non_negative(text: &str) -> Result<f64, String> {
    checked(text, Bound::NonNegative)
}

/// A percentage: finite, within [0, 100].
pub(crate) fn percent(text: &str) -> Result<f64, String> {
    checked(text, Bound::Within(0.0, 100.0))
}

/// A number of seconds: finite, zero or more, and no more than a `Duration` can hold.
pub fn seconds(text: &str) -> Result<f64, String> {
    checked(text, Bound::Seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_values_are_refused_everywhere() {
        for bad in ["NaN", "nan", "inf", "-inf", "infinity", "1e400"] {
            assert!(finite(bad).is_err(), "{bad}");
            assert!(finite_f32(bad).is_err(), "{bad}");
            assert!(non_negative(bad).is_err(), "{bad}");
            assert!(percent(bad).is_err(), "{bad}");
            assert!(seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges_hold() {
        assert_eq!(finite("-2.5"), Ok(-2.5));
        assert!(finite_f32("1e39").is_err());
        assert!(non_negative("-0.1").is_err());
        assert_eq!(non_negative("0"), Ok(0.0));
        assert_eq!(percent("99.9"), Ok(99.9));
        assert!(percent("100.1").is_err() && percent("-1").is_err());
    }

    #[test]
    fn seconds_must_fit_a_duration() {
        assert_eq!(seconds("1e9"), Ok(1e9));
        assert!(seconds("1e20").is_err());
        assert!(seconds("-1").is_err());
        assert!(seconds_value(1e20).is_err());
    }
}
