//! Exposing intermediate tensors as graph outputs, so one run of the model returns them.

use super::pass::{Pass, PassReport};
pub(crate) use super::report::Source;
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::tensor_info::unshaped_value_info;
use crate::onnx::OnnxModel;
use anyhow::{bail, Result};

/// The capture pass: every tensor of `names` that is not already a graph input or output
/// becomes an extra float32 graph output (no shape declared; the backend infers it).
///
/// Its report ([`PassReport::Capture`]) says where each tensor appears in a run.
#[derive(Clone, Debug)]
pub(crate) struct Capture {
    /// The tensors to capture, in the order their sources are reported.
    pub names: Vec<String>,
}

impl Pass for Capture {
    fn name(&self) -> &'static str {
        "capture"
    }

    fn run(&self, model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let (model, sources) = expose(model, &self.names)?;
        Ok((model, PassReport::Capture { sources }))
    }
}

/// Adds the tensors of `names` as outputs; returns the model and each tensor's source.
fn expose(model: OnnxModel, names: &[String]) -> Result<(OnnxModel, Vec<(String, Source)>)> {
    let mut out = model;
    let produced: std::collections::HashSet<String> = out
        .graph()
        .node
        .iter()
        .flat_map(|n| n.output.iter().cloned())
        .collect();
    let mut sources = Vec::with_capacity(names.len());
    for name in names {
        let g = out.graph_mut();
        let source = if let Some(i) = g.input.iter().position(|v| &v.name == name) {
            Source::Input(i)
        } else if let Some(i) = g.output.iter().position(|v| &v.name == name) {
            Source::Output(i)
        } else if produced.contains(name) {
            g.output
                .push(unshaped_value_info(name, DataType::Float as i32));
            Source::Output(g.output.len() - 1)
        } else {
            bail!("tensor '{name}' is neither a graph input nor produced by any node");
        };
        sources.push((name.clone(), source));
    }
    Ok((out, sources))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::tract::{TractBackend, TractOptions};
    use crate::backend::Backend;
    use crate::onnx::test_models;
    use crate::tensor::{HostTensor, TensorData};

    #[test]
    fn captured_tensors_come_out_of_a_tract_run() {
        let m = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let names = vec!["input".to_string(), "flat".into(), "logits".into()];
        let (cap, report) = Capture { names }.run(m.clone()).unwrap();
        let PassReport::Capture { sources } = report else {
            panic!("{report:?}")
        };
        assert_eq!(
            sources.iter().map(|s| s.1).collect::<Vec<_>>(),
            vec![Source::Input(0), Source::Output(1), Source::Output(0)]
        );
        let mut b = TractBackend::load(
            &cap,
            &TractOptions {
                batch: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
        let x = HostTensor::new(
            "input",
            vec![2, 3, 16, 16],
            TensorData::F32(test_models::deterministic_weights(1, 1536, 1.0)),
        )
        .unwrap();
        let out = b.run(&[x]).unwrap();
        assert_eq!(out.outputs[1].shape, vec![2, 512]);
        let nope = Capture {
            names: vec!["nope".into()],
        };
        assert!(nope.run(m).is_err());
    }
}
