//! Metrics that may be NaN or ±Inf, in JSON: finite values as numbers, the rest as the strings
//! `"NaN"`, `"inf"` and `"-inf"`. serde_json writes a non-finite float as `null`, which a
//! report read back (`report`, `bench` resuming its journal) could not take as a number, and
//! which says nothing of what the value was. For `#[serde(with = "...")]` on an `f64` field.

use serde::{Deserialize, Deserializer, Serializer};

/// Writes `v` as a number when finite, else as `"NaN"`, `"inf"` or `"-inf"`.
pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else if v.is_nan() {
        s.serialize_str("NaN")
    } else if *v > 0.0 {
        s.serialize_str("inf")
    } else {
        s.serialize_str("-inf")
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Number(f64),
    Text(String),
    Null(()),
}

/// Reads what [`serialize`] writes; `null` (an older report's NaN) reads as NaN.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match Written::deserialize(d)? {
        Written::Number(v) => Ok(v),
        Written::Null(()) => Ok(f64::NAN),
        Written::Text(t) => match t.as_str() {
            "NaN" | "nan" => Ok(f64::NAN),
            "inf" | "Infinity" => Ok(f64::INFINITY),
            "-inf" | "-Infinity" => Ok(f64::NEG_INFINITY),
            other => Err(serde::de::Error::custom(format!(
                "expected a number, \"NaN\", \"inf\" or \"-inf\", got \"{other}\""
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    struct M {
        #[serde(with = "super")]
        v: f64,
    }

    #[test]
    fn non_finite_values_round_trip_as_strings() {
        for (v, text) in [
            (1.5, "{\"v\":1.5}"),
            (f64::INFINITY, "{\"v\":\"inf\"}"),
            (f64::NEG_INFINITY, "{\"v\":\"-inf\"}"),
            (f64::NAN, "{\"v\":\"NaN\"}"),
        ] {
            let written = serde_json::to_string(&M { v }).unwrap();
            assert_eq!(written, text);
            let back: M = serde_json::from_str(&written).unwrap();
            assert!(back.v == v || (v.is_nan() && back.v.is_nan()));
        }
        let old: M = serde_json::from_str("{\"v\":null}").unwrap();
        assert!(old.v.is_nan());
        assert!(serde_json::from_str::<M>("{\"v\":\"x\"}").is_err());
    }
}
