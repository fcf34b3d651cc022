//! The one shape of every ONNX rewrite: a pass takes a model, gives a model and a report.
//!
//! A model changes only through passes, and a job that changes a model declares the list it
//! runs ([`run_passes`]), or runs the one it needs ([`run_pass`]); each pass holds its own
//! options and is tested on its own. Every report of a pass run either way reaches the log at
//! debug level (`-vv`), the model's file and the pass named, so no rewrite changes a model
//! unseen; callers that act on a report take it from [`run_passes`] or [`Pass::run`].
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
        log_report(*pass, &next, &report);
        model = next;
        reports.push(report);
    }
    Ok((model, reports))
}

/// Runs one pass on `model` for a caller that needs only the model: its report goes to the log
/// as [`run_passes`]'s do. The pass's error is returned as it is, for the caller to place.
pub(crate) fn run_pass(model: OnnxModel, pass: &dyn Pass) -> Result<OnnxModel> {
    let (model, report) = pass.run(model)?;
    log_report(pass, &model, &report);
    Ok(model)
}

/// Logs what `pass` did to `model`, at debug level (the report is written only when shown).
fn log_report(pass: &dyn Pass, model: &OnnxModel, report: &PassReport) {
    tracing::debug!(
        "{}: {} pass: {}",
        model.path.display(),
        pass.name(),
        serde_json::to_string(report).unwrap_or_else(|e| format!("(report not written: {e})"))
    );
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
    fn one_pass_gives_its_model_and_its_own_error() {
        let m = OnnxModel::from_proto(crate::onnx::test_models::classifier(None), "c.onnx");
        assert_eq!(run_pass(m.clone(), &Rename("a")).unwrap().graph().name, "a");
        let err = run_pass(m, &Fail).unwrap_err();
        assert_eq!(format!("{err:#}"), "no good");
    }

    /// A log sink for one test: what the subscriber writes, kept.
    #[derive(Clone, Default)]
    struct Kept(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Kept {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_report_reaches_the_debug_log_and_only_there() {
        let m = OnnxModel::from_proto(crate::onnx::test_models::classifier(None), "c.onnx");
        let logged = |level: tracing::Level| {
            let kept = Kept::default();
            let sink = kept.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(level)
                .with_writer(move || sink.clone())
                .finish();
            tracing::subscriber::with_default(subscriber, || {
                run_pass(m.clone(), &Rename("a")).unwrap();
                run_passes(m.clone(), &[&Rename("b")]).unwrap();
            });
            let text = kept.0.lock().unwrap().clone();
            String::from_utf8(text).unwrap()
        };
        let debug = logged(tracing::Level::DEBUG);
        let line = r#"c.onnx: rename pass: {"pass":"input-shapes","changed":[]}"#;
        assert_eq!(debug.matches(line).count(), 2, "{debug}");
        assert_eq!(logged(tracing::Level::INFO), "");
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
