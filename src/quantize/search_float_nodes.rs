//! What a build reads back of a target search's result (kept, or its `--json` report) to leave
//! the same nodes in float: the precision the search was for and those nodes, nothing else.

use crate::tensor::Precision;
use serde::Deserialize;

/// What a build reads back of a kept search result (or of a search's `--json` report): the
/// precision the search was for, told by which all-in-that-precision score it has, and the
/// nodes it left in float.
#[derive(Debug, Deserialize)]
pub(crate) struct FloatNodesOfSearch {
    /// The nodes the search left in float.
    pub float_nodes: Vec<String>,
    /// Which search it was.
    #[serde(flatten)]
    searched: SearchedPrecision,
}

/// The precision of a search, from the score only its report has.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum SearchedPrecision {
    /// An INT8 search's report has `full_int8`.
    Int8 {
        #[allow(dead_code)]
        full_int8: serde::de::IgnoredAny,
    },
    /// An FP16 search's report has `full_fp16`.
    Fp16 {
        #[allow(dead_code)]
        full_fp16: serde::de::IgnoredAny,
    },
}

impl FloatNodesOfSearch {
    /// The precision the search was for.
    pub fn precision(&self) -> Precision {
        match self.searched {
            SearchedPrecision::Int8 { .. } => Precision::Int8,
            SearchedPrecision::Fp16 { .. } => Precision::Fp16,
        }
    }
}
