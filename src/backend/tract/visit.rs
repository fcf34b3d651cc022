//! Visiting outputs as tract computes them: float32 outputs handed to an
//! [`OutputVisitor`] (only the real samples of a padded piece), visit-only outputs that tract
//! frees after their last reader, and the CPU plan run node by node that visits each output
//! right after its node.

use super::convert::to_tract;
use crate::backend::OutputVisitor;
use crate::tensor::{HostTensor, IoSpec};
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use tract_onnx::prelude::*;

/// The error when output `name` of a piece does not have the piece's `step` samples on axis 0.
pub(super) fn no_batch_axis(name: &str, step: usize) -> String {
    format!("output '{name}' has no batch axis of {step}: run this model single-threaded, at its own batch size")
}

/// Hands the float32 outputs of one run to `visit`. With `chunk = Some((step, real))` the run
/// was a chunk of `step` samples of which the first `real` are real; only those are visited.
pub(super) fn visit_f32(
    out: &TVec<TValue>,
    specs: &[IoSpec],
    chunk: Option<(usize, usize)>,
    visit: &OutputVisitor,
) -> Result<()> {
    for (i, (t, spec)) in out.iter().zip(specs).enumerate() {
        visit_one(i, t, spec, chunk, visit)?;
    }
    Ok(())
}

/// Hands output `i` to `visit` if it is float32 (only its real samples, as [`visit_f32`]).
pub(super) fn visit_one(
    i: usize,
    t: &Tensor,
    spec: &IoSpec,
    chunk: Option<(usize, usize)>,
    visit: &OutputVisitor,
) -> Result<()> {
    if t.datum_type() != DatumType::F32 {
        return Ok(());
    }
    let plain = t
        .try_as_plain_ram()
        .map_err(|e| anyhow::anyhow!("output '{}': {e}", spec.name))?;
    let values = plain.as_slice::<f32>()?;
    let values = match chunk {
        None => values,
        Some((step, real)) => {
            if t.shape().first() != Some(&step) {
                bail!("{}", no_batch_axis(&spec.name, step));
            }
            &values[..values.len() / step * real]
        }
    };
    visit(i, values)
}

/// Makes the outputs of `model` from index `from` on ordinary tensors, so that tract frees each
/// after its last reader: all but those nothing reads (they stay outputs, or they would not be
/// computed) and those the outputs before `from` do not need. Returns, in the order tract now
/// returns them, the index (among all the outputs) of each output kept.
pub(super) fn keep_only_needed_outputs(model: &mut TypedModel, from: usize) -> Result<Vec<usize>> {
    let all = model.outputs.clone();
    let read = |o: &OutletId| !model.outlet_successors(*o).is_empty();
    let mut kept: Vec<usize> = (0..all.len())
        .filter(|&i| i < from || !read(&all[i]))
        .collect();
    let outlets = |kept: &[usize]| kept.iter().map(|&i| all[i]).collect::<Vec<_>>();
    let tract_err = |e: TractError| anyhow::anyhow!("{e:#}");
    model
        .select_output_outlets(&outlets(&kept))
        .map_err(tract_err)?;
    let computed: std::collections::HashSet<usize> =
        model.eval_order().map_err(tract_err)?.into_iter().collect();
    let uncomputed: Vec<usize> = (0..all.len())
        .filter(|i| !kept.contains(i) && !computed.contains(&all[*i].node))
        .collect();
    kept.extend(uncomputed);
    model
        .select_output_outlets(&outlets(&kept))
        .map_err(tract_err)?;
    Ok(kept)
}

/// A CPU plan with, for each node, the model outputs it produces, so that a run can hand each
/// output to a visitor right after its node, not after the whole run.
pub(super) struct CpuPlan {
    plan: Arc<TypedRunnableModel>,
    /// `(node, [(slot, output index)])` for every node that produces a model output (visit-only
    /// ones included).
    outputs_of: HashMap<usize, Vec<(usize, usize)>>,
    /// The output index of each output the plan returns.
    pub(super) kept: Vec<usize>,
}

impl CpuPlan {
    /// `outputs`: every model output, visit-only ones included; `kept`: the output index of
    /// each output `plan` returns.
    pub(super) fn new(
        plan: Arc<TypedRunnableModel>,
        outputs: &[OutletId],
        kept: Vec<usize>,
    ) -> Self {
        let mut outputs_of: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
        for (i, o) in outputs.iter().enumerate() {
            outputs_of.entry(o.node).or_default().push((o.slot, i));
        }
        CpuPlan {
            plan,
            outputs_of,
            kept,
        }
    }

    /// Runs `inputs` node by node, visiting each float32 output as its node produces it;
    /// outputs no node evaluation produced (none are expected) are visited after the run.
    pub(super) fn run_visit(
        &self,
        inputs: &[HostTensor],
        specs: &[IoSpec],
        chunk: Option<(usize, usize)>,
        visit: &OutputVisitor,
    ) -> Result<()> {
        let values: TVec<TValue> = inputs
            .iter()
            .map(|t| Ok(to_tract(t)?.into()))
            .collect::<Result<_>>()?;
        let mut visited = vec![false; specs.len()];
        let mut state = tract_onnx::tract_core::plan::SimpleState::new(&self.plan)
            .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let out = state
            .run_plan_with_eval(values, |ctx, op_state, node, inputs| -> Result<_> {
                let out = tract_onnx::tract_core::plan::eval(ctx, op_state, node, inputs)?;
                for &(slot, i) in self.outputs_of.get(&node.id).into_iter().flatten() {
                    visit_one(i, &out[slot], &specs[i], chunk, visit)?;
                    visited[i] = true;
                }
                Ok(out)
            })
            .map_err(|e| anyhow::anyhow!("{e:#}"))
            .context("tract inference failed")?;
        for (&i, t) in self.kept.iter().zip(out.iter()) {
            if !visited[i] {
                visit_one(i, t, &specs[i], chunk, visit)?;
                visited[i] = true;
            }
        }
        if let Some(i) = visited.iter().position(|v| !v) {
            bail!("tract did not compute output '{}'", specs[i].name);
        }
        Ok(())
    }
}
