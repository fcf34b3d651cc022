//! What the rewrite passes report: one [`PassReport`] per pass run, and the reports of the passes
//! that say more than a count. A leaf of `onnx::rewrite`: the passes import it, it imports none
//! of them, so the pass trait and the passes do not name each other.

use serde::{Deserialize, Serialize};

/// What one pass changed in a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "pass", rename_all = "kebab-case")]
pub enum PassReport {
    /// Input shapes were written into the input declarations.
    InputShapes {
        /// The inputs whose declared shape changed.
        changed: Vec<String>,
    },
    /// Axis 0 of the inputs was fixed to a batch size or made dynamic.
    FixBatch {
        /// The batch size; `None` for a dynamic batch.
        batch: Option<i64>,
        /// The inputs whose declared shape changed.
        changed: Vec<String>,
    },
    /// The model was converted to float16.
    Fp16(Fp16Report),
    /// Q/DQ pairs were inserted.
    Qdq {
        /// Activation tensors quantized.
        activations: usize,
        /// Weights quantized per channel.
        weights: usize,
    },
    /// BatchNormalizations were folded into the convolutions before them.
    FoldBatchNorm {
        /// The folded BatchNormalization nodes' names.
        folded: Vec<String>,
    },
    /// Conv pairs were equalised.
    Equalize(EqualizeReport),
    /// A float16 graph was rewritten to compute in float32 with every float16 tensor rounded to
    /// float16 (FP16 numerics on a backend that would widen them).
    Fp16Emulation(Fp16EmulationReport),
    /// Tensors were exposed as graph outputs.
    Capture {
        /// `(tensor name, where it appears in a run of the new model)`, in the order asked.
        sources: Vec<(String, Source)>,
    },
    /// Attention blocks and residual LayerNorms were fused into ONNX Runtime's operators.
    TransformerFusion(TransformerFusionReport),
    /// Weights held in Constant nodes were moved into initializers.
    LiftConstantWeights {
        /// How many were moved.
        lifted: usize,
    },
    /// Tensors were marked as graph outputs with their own element types (layerwise compare).
    MarkOutputs {
        /// The tensors that became outputs, in order.
        marked: Vec<String>,
    },
}

/// What the rewrite did, for the command's report.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fp16Report {
    /// Initializers converted to float16.
    pub(crate) converted_initializers: usize,
    /// Initializers and Constant outputs with values beyond ±65504, clamped to it (names).
    pub(crate) clamped: Vec<String>,
    /// Casts inserted.
    pub(crate) casts: usize,
    /// Nodes computed in float32 (kept ops).
    pub(crate) kept_fp32_nodes: usize,
    /// The nodes kept in float32 by name or pattern, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_nodes: Vec<String>,
    /// What the user should know: a pattern that kept nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What the transformer fusion did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TransformerFusionReport {
    /// Self-attention blocks now one `com.microsoft.Attention` node each.
    pub attention: usize,
    /// Residual adds and LayerNorms now one `com.microsoft.SkipLayerNormalization` each.
    pub skip_layer_norms: usize,
    /// The attention softmaxes left unfused, each with why (`tensor: reason`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_alone: Vec<String>,
}

/// What the FP16 emulation did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fp16EmulationReport {
    /// Float16 tensors made by nodes that are now rounded to float16 after each.
    pub rounded: usize,
    /// Float16 initializers turned into float32 (the same values).
    pub(crate) converted_initializers: usize,
    /// Casts inserted.
    pub(crate) casts: usize,
}

/// What the equalisation did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EqualizeReport {
    /// BatchNormalizations folded into the convolutions before them first.
    pub(crate) folded_batch_norms: usize,
    /// `(first conv, second conv)` names of each pair.
    pub pairs: Vec<(String, String)>,
    /// Sweeps over the pairs until the scales settled.
    pub(crate) sweeps: usize,
    /// Largest-to-smallest output channel weight range of the pairs' first convs, the worst
    /// pair's, before the pass.
    pub(crate) spread_before: f32,
    /// The same after.
    pub(crate) spread_after: f32,
}

/// Where a captured tensor comes from in a run of the capture model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The graph input at this index (taken from the batch itself).
    Input(usize),
    /// The graph output at this index.
    Output(usize),
}
