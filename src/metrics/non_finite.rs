//! Metrics that may be NaN or ±Inf, in JSON: finite values as numbers, the rest as the strings
//! `"NaN"`, `"inf"` and `"-inf"`. serde_json writes a non-finite float as `null`, which a
//! report read back (`report`, `bench` resuming its journal) could not take as a number, and
//! which says nothing of what the value was. For `#[serde(with = "...")]` on an `f64` field.

use serde::{Deserialize, Deserializer, Serializer};

/// Writes `v` as a number when finite, else as `"NaN"`, `"inf"` or `"-inf"`.
pub(crate) fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
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
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    read(Written::deserialize(d)?)
}

fn read<E: serde::de::Error>(written: Written) -> Result<f64, E> {
    match written {
        Written::Number(v) => Ok(v),
        Written::Null(()) => Ok(f64::NAN),
        Written::Text(t) => match t.as_str() {
            "NaN" | "nan" => Ok(f64::NAN),
            "inf" | "Infinity" => Ok(f64::INFINITY),
            "-inf" | "-Infinity" => Ok(f64::NEG_INFINITY),
            other => Err(E::custom(format!(
                "expected a number, \"NaN\", \"inf\" or \"-inf\", got \"{other}\""
            ))),
        },
    }
}

/// The same for a `[f64; 2]` field (an interval).
pub mod pair {
    use serde::ser::SerializeTuple;
    use serde::{Deserialize, Deserializer, Serializer};

    struct One(f64);

    impl serde::Serialize for One {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            super::serialize(&self.0, s)
        }
    }

    /// Writes both ends as [`super::serialize`] does.
    pub(crate) fn serialize<S: Serializer>(v: &[f64; 2], s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(&One(v[0]))?;
        t.serialize_element(&One(v[1]))?;
        t.end()
    }

    /// Reads what [`serialize`] writes.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 2], D::Error> {
        let [a, b] = <[super::Written; 2]>::deserialize(d)?;
        Ok([super::read(a)?, super::read(b)?])
    }
}

/// The same for an `Option<f64>` field: `None` is written as `null` and read back from it.
pub mod option {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `Some(v)` as [`super::serialize`] does, `None` as `null`.
    pub(crate) fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => super::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    /// Reads what [`serialize`] writes.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        match Option::<super::Written>::deserialize(d)? {
            None => Ok(None),
            Some(w) => super::read(w).map(Some),
        }
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
        #[derive(Serialize, Deserialize)]
        struct O {
            #[serde(with = "super::option")]
            v: Option<f64>,
        }
        for v in [None, Some(2.0), Some(f64::INFINITY)] {
            let back: O = serde_json::from_str(&serde_json::to_string(&O { v }).unwrap()).unwrap();
            assert_eq!(back.v, v);
        }
        let old: M = serde_json::from_str("{\"v\":null}").unwrap();
        assert!(old.v.is_nan());
        assert!(serde_json::from_str::<M>("{\"v\":\"x\"}").is_err());
    }
}
