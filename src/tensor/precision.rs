//! The precision a model or an engine computes at: the name every command, plan, journal and
//! report uses, written and parsed in one place.

use serde::{Deserialize, Serialize};

/// The precision an engine was built at (the rewrite applied before the build).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// The model as it is.
    Fp32,
    /// trtkit's FP16 rewrite (float16 weights and computation).
    Fp16,
    /// trtkit's Q/DQ rewrite with calibrated scales.
    Int8,
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Int8 => "int8",
        })
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    /// Reads what `Display` writes (surrounding blanks ignored).
    fn from_str(text: &str) -> Result<Precision, String> {
        match text.trim() {
            "fp32" => Ok(Precision::Fp32),
            "fp16" => Ok(Precision::Fp16),
            "int8" => Ok(Precision::Int8),
            other => Err(format!(
                "unknown precision {other:?}: expected fp32, fp16 or int8"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Precision;

    #[test]
    fn every_precision_parses_back_from_its_name() {
        for p in [Precision::Fp32, Precision::Fp16, Precision::Int8] {
            assert_eq!(p.to_string().parse::<Precision>(), Ok(p));
        }
        let err = "bf16".parse::<Precision>().unwrap_err();
        assert!(
            err.contains("\"bf16\"") && err.contains("fp32, fp16 or int8"),
            "{err}"
        );
    }
}
