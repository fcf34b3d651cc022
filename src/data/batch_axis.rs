//! Splitting host tensors along the batch axis and joining them back.

use crate::tensor::{HostTensor, TensorData};
use anyhow::{bail, Result};

fn slice_data(data: &TensorData, from: usize, to: usize) -> TensorData {
    match data {
        TensorData::F32(v) => TensorData::F32(v[from..to].to_vec()),
        TensorData::F16(v) => TensorData::F16(v[from..to].to_vec()),
        TensorData::F64(v) => TensorData::F64(v[from..to].to_vec()),
        TensorData::I64(v) => TensorData::I64(v[from..to].to_vec()),
        TensorData::I32(v) => TensorData::I32(v[from..to].to_vec()),
        TensorData::I8(v) => TensorData::I8(v[from..to].to_vec()),
        TensorData::U8(v) => TensorData::U8(v[from..to].to_vec()),
        TensorData::Bool(v) => TensorData::Bool(v[from..to].to_vec()),
    }
}

fn extend_data(into: &mut TensorData, from: &TensorData) -> Result<()> {
    match (into, from) {
        (TensorData::F32(a), TensorData::F32(b)) => a.extend_from_slice(b),
        (TensorData::F16(a), TensorData::F16(b)) => a.extend_from_slice(b),
        (TensorData::F64(a), TensorData::F64(b)) => a.extend_from_slice(b),
        (TensorData::I64(a), TensorData::I64(b)) => a.extend_from_slice(b),
        (TensorData::I32(a), TensorData::I32(b)) => a.extend_from_slice(b),
        (TensorData::I8(a), TensorData::I8(b)) => a.extend_from_slice(b),
        (TensorData::U8(a), TensorData::U8(b)) => a.extend_from_slice(b),
        (TensorData::Bool(a), TensorData::Bool(b)) => a.extend_from_slice(b),
        (a, b) => bail!(
            "cannot join {} and {} tensors",
            a.elem_type(),
            b.elem_type()
        ),
    }
    Ok(())
}

/// Appends elements `from..to` of `src` to `into` (the same element type).
fn push_range(into: &mut TensorData, src: &TensorData, from: usize, to: usize) -> Result<()> {
    match (into, src) {
        (TensorData::F32(a), TensorData::F32(b)) => a.extend_from_slice(&b[from..to]),
        (TensorData::F16(a), TensorData::F16(b)) => a.extend_from_slice(&b[from..to]),
        (TensorData::F64(a), TensorData::F64(b)) => a.extend_from_slice(&b[from..to]),
        (TensorData::I64(a), TensorData::I64(b)) => a.extend_from_slice(&b[from..to]),
        (TensorData::I32(a), TensorData::I32(b)) => a.extend_from_slice(&b[from..to]),
        (TensorData::I8(a), TensorData::I8(b)) => a.extend_from_slice(&b[from..to]),
        (TensorData::U8(a), TensorData::U8(b)) => a.extend_from_slice(&b[from..to]),
        (TensorData::Bool(a), TensorData::Bool(b)) => a.extend_from_slice(&b[from..to]),
        (a, b) => bail!(
            "cannot join {} and {} tensors",
            a.elem_type(),
            b.elem_type()
        ),
    }
    Ok(())
}

/// The sizes around axis `axis` of `shape`: (blocks before it, its length, elements per step).
fn around(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}

/// The batch axis `axis` of `t`, checked against its rank.
fn checked_axis(t: &HostTensor, axis: usize) -> Result<usize> {
    if axis >= t.shape.len() {
        if t.shape.is_empty() {
            bail!("tensor '{}' is a scalar: it has no batch axis", t.name);
        }
        bail!(
            "tensor '{}' has shape {:?}: it has no axis {axis} to hold the samples",
            t.name,
            t.shape
        );
    }
    Ok(axis)
}

/// `t` with the samples `rows` (indices along `axis`) in that order.
fn gather(t: &HostTensor, axis: usize, rows: &[usize]) -> Result<HostTensor> {
    let axis = checked_axis(t, axis)?;
    let (outer, n, inner) = around(&t.shape, axis);
    let mut data = slice_data(&t.data, 0, 0);
    for o in 0..outer {
        // Runs of consecutive rows are copied in one piece.
        let mut i = 0;
        while i < rows.len() {
            let mut j = i + 1;
            while j < rows.len() && rows[j] == rows[j - 1] + 1 {
                j += 1;
            }
            let from = (o * n + rows[i]) * inner;
            let to = (o * n + rows[j - 1] + 1) * inner;
            push_range(&mut data, &t.data, from, to)?;
            i = j;
        }
    }
    let mut shape = t.shape.clone();
    shape[axis] = rows.len();
    HostTensor::new(t.name.clone(), shape, data)
}

/// The number of samples `t` holds on `axis`.
pub(crate) fn samples_on(t: &HostTensor, axis: usize) -> Result<usize> {
    Ok(t.shape[checked_axis(t, axis)?])
}

/// Samples `start..start + len` of `t` along its batch axis `axis`; when fewer remain, the last
/// sample is repeated so that the result always has `len` samples (a fixed-batch backend needs
/// that). A tensor with no batch axis (`None`) is the same for every batch: it comes back whole.
pub(crate) fn slice_padded_on(
    t: &HostTensor,
    axis: Option<usize>,
    start: usize,
    len: usize,
) -> Result<HostTensor> {
    let Some(axis) = axis else {
        return Ok(t.clone());
    };
    let n = samples_on(t, axis)?;
    if start >= n {
        bail!(
            "tensor '{}': sample {start} is past its {n} samples",
            t.name
        );
    }
    let end = (start + len).min(n);
    let rows: Vec<usize> = (start..start + len).map(|r| r.min(end - 1)).collect();
    gather(t, axis, &rows)
}

/// The samples `rows` of `t` along its batch axis `axis`, in that order (the whole tensor when
/// it has none).
pub(crate) fn select_rows_on(
    t: &HostTensor,
    axis: Option<usize>,
    rows: &[usize],
) -> Result<HostTensor> {
    let Some(axis) = axis else {
        return Ok(t.clone());
    };
    let n = samples_on(t, axis)?;
    if let Some(r) = rows.iter().find(|&&r| r >= n) {
        bail!("tensor '{}': sample {r} is past its {n} samples", t.name);
    }
    gather(t, axis, rows)
}

/// The first `keep` samples of `t` along `axis` (drops padding).
pub(crate) fn truncate_on(t: HostTensor, axis: Option<usize>, keep: usize) -> Result<HostTensor> {
    match axis {
        Some(k) if t.shape.get(k) != Some(&keep) => slice_padded_on(&t, axis, 0, keep),
        _ => Ok(t),
    }
}

/// Joins tensors with the same name, dtype and other dims along their batch axis `axis`. Tensors
/// with no batch axis (`None`) are the same for every batch: the first is kept.
pub(crate) fn concat_on(parts: Vec<HostTensor>, axis: Option<usize>) -> Result<HostTensor> {
    let mut iter = parts.into_iter();
    let Some(first) = iter.next() else {
        bail!("nothing to join");
    };
    let Some(axis) = axis else {
        return Ok(first);
    };
    let axis = checked_axis(&first, axis)?;
    let rest: Vec<HostTensor> = iter.collect();
    if rest.is_empty() {
        return Ok(first);
    }
    let others = |s: &[usize]| -> Vec<usize> {
        let mut s = s.to_vec();
        s.remove(axis);
        s
    };
    for p in &rest {
        if p.shape.len() != first.shape.len() || others(&p.shape) != others(&first.shape) {
            bail!(
                "tensor '{}': cannot join shapes {:?} and {:?} along axis {axis}",
                first.name,
                first.shape,
                p.shape
            );
        }
    }
    let mut shape = first.shape.clone();
    shape[axis] += rest.iter().map(|p| p.shape[axis]).sum::<usize>();
    if axis == 0 {
        let mut data = first.data;
        for p in &rest {
            extend_data(&mut data, &p.data)?;
        }
        return HostTensor::new(first.name, shape, data);
    }
    let (outer, _, inner) = around(&first.shape, axis);
    let mut data = slice_data(&first.data, 0, 0);
    for o in 0..outer {
        for p in std::iter::once(&first).chain(&rest) {
            let block = p.shape[axis] * inner;
            push_range(&mut data, &p.data, o * block, (o + 1) * block)?;
        }
    }
    HostTensor::new(first.name, shape, data)
}

/// [`slice_padded_on`] along axis 0.
pub(crate) fn slice_padded(t: &HostTensor, start: usize, len: usize) -> Result<HostTensor> {
    slice_padded_on(t, Some(0), start, len)
}

/// [`select_rows_on`] along axis 0.
pub(crate) fn select_rows(t: &HostTensor, rows: &[usize]) -> Result<HostTensor> {
    select_rows_on(t, Some(0), rows)
}

/// [`truncate_on`] along axis 0.
pub fn truncate(t: HostTensor, keep: usize) -> Result<HostTensor> {
    truncate_on(t, Some(0), keep)
}

/// [`concat_on`] along axis 0.
pub fn concat(parts: Vec<HostTensor>) -> Result<HostTensor> {
    concat_on(parts, Some(0))
}

#[cfg(test)]
mod tests;
