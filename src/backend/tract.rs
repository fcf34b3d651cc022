//! The tract backend: pure-Rust ONNX inference, the reference every other backend is
//! compared against. Always available on the CPU.

use super::{Backend, ElemType, HostTensor, IoSpec, RunOutput, TensorData};
use crate::onnx::shape::{apply_input_shapes, set_batch, Batch, InputShape};
use crate::onnx::tensor_info::Dim;
use crate::onnx::OnnxModel;
use anyhow::{bail, Context, Result};
use std::sync::Arc;
use std::time::Instant;
use tract_onnx::prelude::*;

/// How to prepare a model for tract.
#[derive(Clone, Debug, Default)]
pub struct TractOptions {
    /// `--input-shape` overrides, applied before anything else.
    pub input_shapes: Vec<InputShape>,
    /// Fix the batch axis to this size (a dynamic model then runs as a static one).
    pub batch: Option<usize>,
}

/// A model prepared for tract on the CPU.
pub struct TractBackend {
    plan: Arc<TypedRunnableModel>,
    inputs: Vec<IoSpec>,
    outputs: Vec<IoSpec>,
}

fn elem_type_of(dt: DatumType, what: &str) -> Result<ElemType> {
    Ok(match dt {
        DatumType::F32 => ElemType::F32,
        DatumType::F16 => ElemType::F16,
        DatumType::F64 => ElemType::F64,
        DatumType::I64 => ElemType::I64,
        DatumType::I32 => ElemType::I32,
        DatumType::I8 => ElemType::I8,
        DatumType::U8 => ElemType::U8,
        DatumType::Bool => ElemType::Bool,
        other => bail!("{what} has element type {other:?}, which trtkit does not carry"),
    })
}

fn spec_of(name: &str, fact: &TypedFact) -> Result<IoSpec> {
    let dims = fact
        .shape
        .iter()
        .map(|d| match d.to_i64() {
            Ok(n) => Dim::Fixed(n),
            Err(_) => Dim::Symbol(d.to_string()),
        })
        .collect();
    Ok(IoSpec {
        name: name.to_string(),
        elem_type: elem_type_of(fact.datum_type, name)?,
        dims,
    })
}

fn to_tract(t: &HostTensor) -> Result<Tensor> {
    let shape = &t.shape;
    Ok(match &t.data {
        TensorData::F32(v) => Tensor::from_shape(shape, v)?,
        TensorData::F16(v) => Tensor::from_shape(shape, v)?,
        TensorData::F64(v) => Tensor::from_shape(shape, v)?,
        TensorData::I64(v) => Tensor::from_shape(shape, v)?,
        TensorData::I32(v) => Tensor::from_shape(shape, v)?,
        TensorData::I8(v) => Tensor::from_shape(shape, v)?,
        TensorData::U8(v) => Tensor::from_shape(shape, v)?,
        TensorData::Bool(v) => Tensor::from_shape(shape, v)?,
    })
}

fn from_tract(name: &str, t: &Tensor) -> Result<HostTensor> {
    let shape = t.shape().to_vec();
    let plain = t
        .try_as_plain_ram()
        .map_err(|e| anyhow::anyhow!("output '{name}': {e}"))?;
    let data = match t.datum_type() {
        DatumType::F32 => TensorData::F32(plain.as_slice::<f32>()?.to_vec()),
        DatumType::F16 => TensorData::F16(plain.as_slice::<half::f16>()?.to_vec()),
        DatumType::F64 => TensorData::F64(plain.as_slice::<f64>()?.to_vec()),
        DatumType::I64 => TensorData::I64(plain.as_slice::<i64>()?.to_vec()),
        DatumType::I32 => TensorData::I32(plain.as_slice::<i32>()?.to_vec()),
        DatumType::I8 => TensorData::I8(plain.as_slice::<i8>()?.to_vec()),
        DatumType::U8 => TensorData::U8(plain.as_slice::<u8>()?.to_vec()),
        DatumType::Bool => TensorData::Bool(plain.as_slice::<bool>()?.to_vec()),
        other => bail!("output '{name}' has element type {other:?}, which trtkit does not carry"),
    };
    HostTensor::new(name, shape, data)
}

impl TractBackend {
    /// Prepares `model` (shape overrides, batch, parse, optimize) for running on the CPU.
    pub fn load(model: &OnnxModel, options: &TractOptions) -> Result<Self> {
        let mut model = model.clone();
        if !options.input_shapes.is_empty() {
            apply_input_shapes(&mut model, &options.input_shapes)?;
        }
        if let Some(n) = options.batch {
            set_batch(&mut model, Batch::Static(n as i64))?;
        }
        let shown = model.path.display().to_string();
        let dir = model.base_dir().to_string_lossy().into_owned();
        let parsed = tract_onnx::onnx()
            .with_ignore_value_info(true)
            .parse(&model.proto, Some(&dir))
            .map_err(|e| anyhow::anyhow!("{e:#}"))
            .with_context(|| format!("{shown}: tract cannot load the model"))?;
        let typed = parsed
            .model
            .into_optimized()
            .map_err(|e| anyhow::anyhow!("{e:#}"))
            .with_context(|| format!("{shown}: tract cannot analyse the model"))?;
        let names = |outlets: &[OutletId]| -> Vec<String> {
            outlets
                .iter()
                .map(|o| typed.node(o.node).name.clone())
                .collect()
        };
        let input_names = names(&typed.inputs);
        let output_names: Vec<String> = typed
            .outputs
            .iter()
            .map(|o| {
                typed
                    .outlet_label(*o)
                    .map(String::from)
                    .unwrap_or_else(|| typed.node(o.node).name.clone())
            })
            .collect();
        let inputs = input_names
            .iter()
            .enumerate()
            .map(|(i, n)| spec_of(n, typed.input_fact(i)?))
            .collect::<Result<Vec<_>>>()?;
        let outputs = output_names
            .iter()
            .enumerate()
            .map(|(i, n)| spec_of(n, typed.output_fact(i)?))
            .collect::<Result<Vec<_>>>()?;
        let plan = typed
            .into_runnable_with_options(&Default::default())
            .map_err(|e| anyhow::anyhow!("{e:#}"))
            .with_context(|| format!("{shown}: tract cannot prepare the model"))?;
        Ok(TractBackend {
            plan,
            inputs,
            outputs,
        })
    }
}

impl Backend for TractBackend {
    fn name(&self) -> String {
        "tract-cpu".into()
    }

    fn inputs(&self) -> &[IoSpec] {
        &self.inputs
    }

    fn outputs(&self) -> &[IoSpec] {
        &self.outputs
    }

    fn run(&mut self, inputs: &[HostTensor]) -> Result<RunOutput> {
        if inputs.len() != self.inputs.len() {
            bail!(
                "the model takes {} inputs, got {}",
                self.inputs.len(),
                inputs.len()
            );
        }
        let values: TVec<TValue> = inputs
            .iter()
            .map(|t| Ok(to_tract(t)?.into()))
            .collect::<Result<_>>()?;
        let start = Instant::now();
        let out = self
            .plan
            .run(values)
            .map_err(|e| anyhow::anyhow!("{e:#}"))
            .context("tract inference failed")?;
        let elapsed = start.elapsed();
        let outputs = out
            .iter()
            .zip(&self.outputs)
            .map(|(t, spec)| from_tract(&spec.name, t))
            .collect::<Result<_>>()?;
        Ok(RunOutput { outputs, elapsed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::test_models;

    #[test]
    fn runs_the_two_input_model() {
        let model = OnnxModel::from_proto(test_models::two_input(None), "two.onnx");
        let mut b = TractBackend::load(
            &model,
            &TractOptions {
                batch: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(b.inputs().len(), 2);
        assert_eq!(b.inputs()[0].dims, vec![Dim::Fixed(2), Dim::Fixed(4)]);
        let a = HostTensor::new(
            "a",
            vec![2, 4],
            TensorData::F32(vec![1.0, -2.0, 3.0, -4.0, 0.5, 0.5, 0.5, 0.5]),
        )
        .unwrap();
        let bb = HostTensor::new("b", vec![2, 4], TensorData::F32(vec![1.0; 8])).unwrap();
        let out = b.run(&[a, bb]).unwrap();
        assert_eq!(out.outputs[0].name, "sum");
        assert_eq!(
            out.outputs[0].data,
            TensorData::F32(vec![2.0, 0.0, 4.0, 0.0, 1.5, 1.5, 1.5, 1.5])
        );
        assert_eq!(
            out.outputs[1].data,
            TensorData::F32(vec![1.0, -2.0, 3.0, -4.0, 0.5, 0.5, 0.5, 0.5])
        );
    }

    #[test]
    fn runs_the_classifier_at_batch_3() {
        let model = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let mut b = TractBackend::load(
            &model,
            &TractOptions {
                batch: Some(3),
                ..Default::default()
            },
        )
        .unwrap();
        let x = HostTensor::new(
            "input",
            vec![3, 3, 16, 16],
            TensorData::F32(test_models::deterministic_weights(9, 3 * 768, 1.0)),
        )
        .unwrap();
        let out = b.run(&[x]).unwrap();
        assert_eq!(out.outputs[0].shape, vec![3, 10]);
    }
}
