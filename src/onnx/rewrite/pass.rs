//! The one shape of every ONNX rewrite: a pass takes a model, gives a model and a report.
//!
//! A model changes only through passes, and a job that changes a model declares the list it
//! runs ([`run_passes`]); each pass holds its own options and is tested on its own.
//!
//! The passes: [`InputShapes`](crate::onnx::shape::InputShapes) and
//! [`FixBatch`](crate::onnx::shape::FixBatch) (input declarations),
//! [`Fp16`](super::fp16::Fp16) (float16 autocast),
//! [`Fp16Emulation`](super::fp16_emulate::Fp16Emulation) (FP16 numerics computed in float32),
//! [`LiftConstantWeights`](super::constant_weights::LiftConstantWeights) (Constant weights made
//! initializers),
//! [`Qdq`](super::qdq::Qdq) (INT8 Q/DQ insertion), [`Equalize`](super::equalize::Equalize)
//! (cross-layer equalisation) and [`Capture`](super::capture::Capture) (activations as extra
//! outputs).

pub(crate) use super::report::PassReport;
use crate::onnx::OnnxModel;
use anyhow::{Context, Result};

/// A model-to-model rewrite with its options.
pub trait Pass {
    /// Short name of the pass (`input-shapes`, `fp16`, …), as errors and reports name it.
    fn name(&self) -> &'static str;

    /// Rewrites `model`; the report says what changed.
    fn run(&self, model: OnnxModel) -> Result<(OnnxModel, PassReport)>;
}

/// Runs `passes` in order on `model`; the error names the pass that failed.
pub(crate) fn run_passes(
    model: OnnxModel,
    passes: &[&dyn Pass],
) -> Result<(OnnxModel, Vec<PassReport>)> {
    let mut model = model;
    let mut reports = Vec::with_capacity(passes.len());
    for pass in passes {
        let (next, report) = pass
            .run(model)
            .with_context(|| format!("{} pass", pass.name()))?;
        model = next;
        reports.push(report);
    }
    Ok((model, reports))
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::bail;

    struct Rename(&'static str);

    impl Pass for Rename {
        fn name(&self) -> &'static str {
            "rename"
        }
        fn run(&self, mut model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
            model.graph_mut().name = self.0.into();
            Ok((model, PassReport::InputShapes { changed: vec![] }))
        }
    }

    struct Fail;

    impl Pass for Fail {
        fn name(&self) -> &'static str {
            "fail"
        }
        fn run(&self, _: OnnxModel) -> Result<(OnnxModel, PassReport)> {
            bail!("no good")
        }
    }

    #[test]
    fn runs_in_order_and_names_the_failing_pass() {
        let m = OnnxModel::from_proto(crate::onnx::test_models::classifier(None), "c.onnx");
        let (out, reports) = run_passes(m.clone(), &[&Rename("a"), &Rename("b")]).unwrap();
        assert_eq!(out.graph().name, "b");
        assert_eq!(reports.len(), 2);
        let err = run_passes(m, &[&Rename("a"), &Fail]).unwrap_err();
        assert_eq!(format!("{err:#}"), "fail pass: no good");
    }

    #[test]
    fn reports_round_trip_through_json() {
        let r = PassReport::FixBatch {
            batch: Some(8),
            changed: vec!["input".into()],
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"pass\":\"fix-batch\""), "{text}");
        assert_eq!(serde_json::from_str::<PassReport>(&text).unwrap(), r);
    }
}
