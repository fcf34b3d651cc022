//! One dimension of a tensor as a model declares it: fixed, named (symbolic) or unknown.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// One dimension of a tensor as the model declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A fixed size.
    Fixed(i64),
    /// A named symbolic size, e.g. `batch`.
    Symbol(String),
    /// Neither a size nor a name.
    Unknown,
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Symbol(s) => write!(f, "{s}"),
            Dim::Unknown => write!(f, "?"),
        }
    }
}

/// In JSON a dim is a number (fixed), a name (symbolic) or `"?"` (unknown).
impl Serialize for Dim {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Dim::Fixed(n) => s.serialize_i64(*n),
            Dim::Symbol(name) => s.serialize_str(name),
            Dim::Unknown => s.serialize_str("?"),
        }
    }
}

impl<'de> Deserialize<'de> for Dim {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Fixed(i64),
            Name(String),
        }
        Ok(match Raw::deserialize(d)? {
            Raw::Fixed(n) => Dim::Fixed(n),
            Raw::Name(name) if name == "?" => Dim::Unknown,
            Raw::Name(name) => Dim::Symbol(name),
        })
    }
}

/// Formats dims the way trtkit prints shapes: `batch×3×224×224`, `scalar` for rank 0.
pub(crate) fn format_dims(dims: &[Dim]) -> String {
    if dims.is_empty() {
        return "scalar".into();
    }
    dims.iter()
        .map(Dim::to_string)
        .collect::<Vec<_>>()
        .join("×")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_round_trip_through_json() {
        let dims = vec![Dim::Symbol("batch".into()), Dim::Fixed(3), Dim::Unknown];
        let text = serde_json::to_string(&dims).unwrap();
        assert_eq!(text, r#"["batch",3,"?"]"#);
        assert_eq!(serde_json::from_str::<Vec<Dim>>(&text).unwrap(), dims);
        assert_eq!(format_dims(&dims), "batch×3×?");
        assert_eq!(format_dims(&[]), "scalar");
    }
}
