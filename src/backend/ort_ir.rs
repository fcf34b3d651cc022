//! What ONNX Runtime reads: the newest IR version and opset of the release trtkit loads
//! (1.31.1), and the IR version lowered in the copy it gets of a model saved by a newer `onnx`
//! that uses nothing the older IR lacks (the file itself is never changed).

use crate::onnx::ir_version::check_lowerable;
use crate::onnx::OnnxModel;
use anyhow::{bail, Result};

/// The newest IR version ONNX Runtime 1.31.1 reads ("Unsupported model IR version: 14").
pub(crate) const MAX_IR: i64 = 13;

/// The newest default-domain opset ONNX Runtime 1.31.1 runs.
pub(crate) const MAX_OPSET: i64 = 26;

/// Why ONNX Runtime cannot read `model` even with its IR version lowered; `None` when it can.
pub fn refusal(model: &OnnxModel) -> Option<String> {
    let opset = model.opset();
    if opset > MAX_OPSET {
        return Some(format!(
            "the model imports opset {opset}, and ONNX Runtime 1.31.1 runs opsets up to {MAX_OPSET}"
        ));
    }
    let ir = model.proto.ir_version;
    if ir > MAX_IR {
        if let Err(why) = check_lowerable(&model.proto, MAX_IR) {
            return Some(format!(
                "the model has IR version {ir}, ONNX Runtime 1.31.1 reads up to {MAX_IR}, and {why}"
            ));
        }
    }
    None
}

/// Lowers the IR version of `model` (an in-memory copy) to [`MAX_IR`] where it is newer and
/// uses nothing IR [`MAX_IR`] lacks, with a note in the log; an error, naming the file, says why
/// ONNX Runtime cannot read it otherwise.
pub(crate) fn lower_for_ort(model: &mut OnnxModel) -> Result<()> {
    let shown = model.path.display();
    if let Some(why) = refusal(model) {
        bail!("{shown}: ONNX Runtime cannot run it: {why}; try --backend tract");
    }
    let ir = model.proto.ir_version;
    if ir > MAX_IR {
        tracing::info!(
            "{shown}: ONNX Runtime reads IR versions up to {MAX_IR}; it gets a copy marked IR {MAX_IR} (the model uses nothing IR {ir} added; the file is unchanged)"
        );
        model.proto.ir_version = MAX_IR;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::test_models::classifier;

    fn model(ir: i64, opset: i64) -> OnnxModel {
        let mut proto = classifier(None);
        proto.ir_version = ir;
        proto.opset_import[0].version = opset;
        OnnxModel::from_proto(proto, "m.onnx")
    }

    #[test]
    fn ir_14_without_new_types_is_lowered_in_the_copy() {
        let mut m = model(14, 17);
        lower_for_ort(&mut m).unwrap();
        assert_eq!(m.proto.ir_version, MAX_IR);
        let mut old = model(8, 17);
        lower_for_ort(&mut old).unwrap();
        assert_eq!(old.proto.ir_version, 8);
    }

    #[test]
    fn what_ort_cannot_read_is_refused_with_the_reason() {
        let err = lower_for_ort(&mut model(15, 17)).unwrap_err().to_string();
        assert!(
            err.contains("m.onnx") && err.contains("IR version 15"),
            "{err}"
        );
        let err = refusal(&model(13, 27)).unwrap();
        assert!(err.contains("opset 27"), "{err}");
    }
}
