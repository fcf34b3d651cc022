//! Where ONNX Runtime ran each node, read from its profile: per execution provider, the op
//! types it ran and how many of each; and which of them compute in INT8. A Q/DQ model on the
//! CUDA provider keeps its QuantizeLinear/DequantizeLinear pairs around float kernels, so its
//! "INT8" cells measure fake quantization unless an integer op shows up here.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Op types that compute in 8-bit integers (ONNX's integer ops and ONNX Runtime's fused
/// quantized kernels).
fn is_integer_op(op: &str) -> bool {
    op.starts_with("QLinear")
        || op.starts_with("QOrdered")
        || op.ends_with("Integer")
        || op.starts_with("DynamicQuantize")
        || op == "QAttention"
}

/// Per provider, per op type, how many nodes ran there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Placement {
    /// `CUDAExecutionProvider` → `Conv` → 53.
    pub(crate) providers: BTreeMap<String, BTreeMap<String, usize>>,
}

impl Placement {
    /// Reads the node events of an ONNX Runtime profile (a JSON array of trace events; node
    /// events have `cat: "Node"` and `args.op_name`, `args.provider`), counting each node once.
    pub(crate) fn from_profile(text: &str) -> Result<Placement> {
        let events: Vec<serde_json::Value> =
            serde_json::from_str(text).context("an ONNX Runtime profile is a JSON array")?;
        let mut seen = std::collections::BTreeSet::new();
        let mut providers: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        for e in &events {
            if e["cat"] != "Node" {
                continue;
            }
            let name = e["name"].as_str().unwrap_or_default();
            let Some(node) = name.strip_suffix("_kernel_time") else {
                continue;
            };
            let (Some(op), Some(provider)) = (
                e["args"]["op_name"].as_str(),
                e["args"]["provider"].as_str(),
            ) else {
                continue;
            };
            if seen.insert(node.to_string()) {
                *providers
                    .entry(provider.to_string())
                    .or_default()
                    .entry(op.to_string())
                    .or_default() += 1;
            }
        }
        Ok(Placement { providers })
    }

    /// Reads a profile file.
    pub(crate) fn from_file(path: &Path) -> Result<Placement> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read the profile", path.display()))?;
        Placement::from_profile(&text).with_context(|| path.display().to_string())
    }

    /// The op types that computed in INT8, with their counts.
    pub(crate) fn integer_ops(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for ops in self.providers.values() {
            for (op, n) in ops.iter().filter(|(op, _)| is_integer_op(op)) {
                *out.entry(op.clone()).or_default() += n;
            }
        }
        out
    }

    /// One line per provider (`CUDA: Conv×53, DequantizeLinear×108`), then what ran in INT8.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .providers
            .iter()
            .map(|(provider, ops)| {
                let ops: Vec<String> = ops.iter().map(|(op, n)| format!("{op}×{n}")).collect();
                format!(
                    "ONNX Runtime ran on {}: {}",
                    provider.trim_end_matches("ExecutionProvider"),
                    ops.join(", ")
                )
            })
            .collect();
        let integer = self.integer_ops();
        out.push(if integer.is_empty() {
            "INT8 arithmetic: none; ONNX Runtime runs the QuantizeLinear/DequantizeLinear pairs as such around float kernels (fake quantization), so this INT8 cell measures that, not INT8 kernels".into()
        } else {
            let ops: Vec<String> = integer.iter().map(|(op, n)| format!("{op}×{n}")).collect();
            format!("INT8 arithmetic: {}", ops.join(", "))
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = r#"[
        {"cat":"Session","name":"model_run","args":{}},
        {"cat":"Node","name":"conv1_fence_before","args":{"op_name":"Conv"}},
        {"cat":"Node","name":"conv1_kernel_time","args":{"op_name":"Conv","provider":"CUDAExecutionProvider"}},
        {"cat":"Node","name":"dq1_kernel_time","args":{"op_name":"DequantizeLinear","provider":"CUDAExecutionProvider"}},
        {"cat":"Node","name":"dq2_kernel_time","args":{"op_name":"DequantizeLinear","provider":"CUDAExecutionProvider"}},
        {"cat":"Node","name":"dq1_kernel_time","args":{"op_name":"DequantizeLinear","provider":"CUDAExecutionProvider"}},
        {"cat":"Node","name":"shape_kernel_time","args":{"op_name":"Shape","provider":"CPUExecutionProvider"}}
    ]"#;

    #[test]
    fn nodes_are_counted_once_per_provider_and_op() {
        let p = Placement::from_profile(PROFILE).unwrap();
        let cuda = &p.providers["CUDAExecutionProvider"];
        assert_eq!(cuda["Conv"], 1);
        assert_eq!(cuda["DequantizeLinear"], 2);
        assert_eq!(p.providers["CPUExecutionProvider"]["Shape"], 1);
        assert!(p.integer_ops().is_empty());
        let lines = p.lines();
        assert_eq!(lines[0], "ONNX Runtime ran on CPU: Shape×1");
        assert_eq!(
            lines[1],
            "ONNX Runtime ran on CUDA: Conv×1, DequantizeLinear×2"
        );
        assert!(lines[2].contains("INT8 arithmetic: none"));
    }

    #[test]
    fn integer_kernels_are_named() {
        let text = r#"[{"cat":"Node","name":"c_kernel_time","args":{"op_name":"QLinearConv","provider":"CPUExecutionProvider"}},
                       {"cat":"Node","name":"m_kernel_time","args":{"op_name":"MatMulInteger","provider":"CUDAExecutionProvider"}}]"#;
        let p = Placement::from_profile(text).unwrap();
        let ops = p.integer_ops();
        assert_eq!(ops["QLinearConv"], 1);
        assert_eq!(ops["MatMulInteger"], 1);
        assert_eq!(
            p.lines().last().unwrap(),
            "INT8 arithmetic: MatMulInteger×1, QLinearConv×1"
        );
        assert!(Placement::from_profile("{}").is_err());
    }
}
