//! TensorRT's error lines, read into what a user can act on. The builder logs
//! `[CALL: ]Error Code N: KIND (DETAIL[ In FUNCTION at FILE:LINE])`; a refusal says the kind and
//! the detail, names the internal function only for an internal error, and adds what trtkit
//! knows of the cases real models hit.

use crate::onnx::pb::GraphProto;
use crate::onnx::subgraphs::holds_subgraph;

/// One error TensorRT logged, taken apart.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LoggedError {
    /// What kind of error TensorRT says it is (`API Usage Error`, `Internal Error`).
    pub kind: String,
    /// What it says went wrong, without where in its sources.
    pub detail: String,
    /// The TensorRT function that failed (`makeScopeNodesContiguous`), when it says.
    pub function: Option<String>,
}

/// Reads one logged error line; `None` when it is not in TensorRT's `Error Code` form.
pub(crate) fn read_logged_error(line: &str) -> Option<LoggedError> {
    let (_, rest) = line.split_once("Error Code ")?;
    let (code, rest) = rest.split_once(": ")?;
    if code.is_empty() || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (kind, detail) = match rest.split_once(" (") {
        Some((kind, detail)) => (kind, detail.strip_suffix(')').unwrap_or(detail)),
        None => (rest, ""),
    };
    let (detail, function) = match detail.rsplit_once(" In ") {
        Some((detail, place)) if place.contains(" at ") => {
            let function = place.split(" at ").next().unwrap_or(place);
            (detail, Some(function.trim().to_string()))
        }
        _ => (detail, None),
    };
    Some(LoggedError {
        kind: kind.trim().to_string(),
        detail: detail.trim().trim_end_matches('.').to_string(),
        function,
    })
}

impl LoggedError {
    /// The error as one clause: `internal error in FUNCTION: DETAIL`, `api usage error: DETAIL`.
    pub(crate) fn clause(&self) -> String {
        let kind = self.kind.to_lowercase();
        match (&self.function, kind.starts_with("internal")) {
            (Some(f), true) => format!("{kind} in {f}: {}", self.detail),
            _ if self.detail.is_empty() => kind,
            _ => format!("{kind}: {}", self.detail),
        }
    }

    /// What trtkit knows of this error on a model like `graph`, as a clause to add.
    pub(crate) fn hint(&self, graph: &GraphProto) -> Option<String> {
        if self.detail.starts_with("Quantized constant") {
            return Some(
                "the model keeps INT8 weights that it widens itself (Cast, Mul) instead of \
                 through DequantizeLinear, which is the only way TensorRT reads them; build the \
                 float model instead, or its trtkit quantize --int8 rewrite"
                    .into(),
            );
        }
        if self.detail.contains("workspace memory") {
            return Some(
                "the builder ran out of workspace memory: raise --workspace (MiB), or leave it \
                 out to let TensorRT choose"
                    .into(),
            );
        }
        if self.kind.to_lowercase().starts_with("internal") {
            let holder = graph.node.iter().find(|n| holds_subgraph(n));
            return Some(match holder {
                Some(n) => format!(
                    "a check inside TensorRT-RTX failed, not one of the model's; the model's {} \
                     '{}' holds a subgraph, which is where TensorRT-RTX orders nodes by scope",
                    n.op_type, n.name
                ),
                None => "a check inside TensorRT-RTX failed, not one of the model's".into(),
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_detail_and_function_are_read_apart() {
        let e = read_logged_error(
            "[graphScope.cpp::makeScopeNodesContiguous::812] Error Code 2: Internal Error \
             (Assertion newNodeOrder.size() == g.nodes.size() failed.  In \
             makeScopeNodesContiguous at /_src/optimizer/common/graphScope.cpp:812)",
        )
        .unwrap();
        assert_eq!(e.kind, "Internal Error");
        assert_eq!(
            e.detail,
            "Assertion newNodeOrder.size() == g.nodes.size() failed"
        );
        assert_eq!(e.function.as_deref(), Some("makeScopeNodesContiguous"));
        assert_eq!(
            e.clause(),
            "internal error in makeScopeNodesContiguous: Assertion newNodeOrder.size() == \
             g.nodes.size() failed"
        );
        let usage = read_logged_error(
            "IBuilder::buildSerializedNetwork: Error Code 4: API Usage Error (Quantized constant \
             (w_q) is only allowed before DQ. In matchQuantizedConstantPluginOrDQ at \
             /_src/optimizer/common/rewrite/qdqGraphOptimizer.cpp:4327)",
        )
        .unwrap();
        assert_eq!(
            usage.clause(),
            "api usage error: Quantized constant (w_q) is only allowed before DQ"
        );
        assert!(usage
            .hint(&GraphProto::default())
            .unwrap()
            .contains("DequantizeLinear"));
        let workspace = read_logged_error(
            "Error Code 2: Internal Error (Assertion mContext.maxScratchSize > 0 failed. Compiling \
             this graph requires workspace memory greater than 0. In createMyelinGraph at x.cpp:1)",
        )
        .unwrap();
        assert!(workspace
            .hint(&GraphProto::default())
            .unwrap()
            .contains("--workspace"));
        assert_eq!(read_logged_error("Error Code x: nothing"), None);
        assert_eq!(read_logged_error("no code here"), None);
    }
}
