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

/// Samples `start..start + len` of `t` along axis 0; when fewer remain, the last sample is
/// repeated so that the result always has `len` samples (a fixed-batch backend needs that).
pub(crate) fn slice_padded(t: &HostTensor, start: usize, len: usize) -> Result<HostTensor> {
    let Some(&n) = t.shape.first() else {
        bail!("tensor '{}' is a scalar: it has no batch axis", t.name);
    };
    if start >= n {
        bail!(
            "tensor '{}': sample {start} is past its {n} samples",
            t.name
        );
    }
    let per = t.shape[1..].iter().product::<usize>();
    let end = (start + len).min(n);
    let mut data = slice_data(&t.data, start * per, end * per);
    let last = slice_data(&t.data, (end - 1) * per, end * per);
    for _ in end..start + len {
        extend_data(&mut data, &last)?;
    }
    let mut shape = t.shape.clone();
    shape[0] = len;
    HostTensor::new(t.name.clone(), shape, data)
}

/// The samples `rows` of `t` along axis 0, in that order.
pub(crate) fn select_rows(t: &HostTensor, rows: &[usize]) -> Result<HostTensor> {
    let Some(&n) = t.shape.first() else {
        bail!("tensor '{}' is a scalar: it has no batch axis", t.name);
    };
    let per = t.shape[1..].iter().product::<usize>();
    let mut data = slice_data(&t.data, 0, 0);
    for &r in rows {
        if r >= n {
            bail!("tensor '{}': sample {r} is past its {n} samples", t.name);
        }
        extend_data(&mut data, &slice_data(&t.data, r * per, (r + 1) * per))?;
    }
    let mut shape = t.shape.clone();
    shape[0] = rows.len();
    HostTensor::new(t.name.clone(), shape, data)
}

/// The first `keep` samples of `t` (drops padding).
pub fn truncate(t: HostTensor, keep: usize) -> Result<HostTensor> {
    if t.shape.first() == Some(&keep) {
        return Ok(t);
    }
    slice_padded(&t, 0, keep)
}

/// Joins tensors with the same name, dtype and trailing dims along axis 0.
pub fn concat(parts: Vec<HostTensor>) -> Result<HostTensor> {
    let mut iter = parts.into_iter();
    let Some(mut first) = iter.next() else {
        bail!("nothing to join");
    };
    if first.shape.is_empty() {
        bail!("tensor '{}' is a scalar: it has no batch axis", first.name);
    }
    for p in iter {
        if p.shape.len() != first.shape.len() || p.shape[1..] != first.shape[1..] {
            bail!(
                "tensor '{}': cannot join shapes {:?} and {:?}",
                first.name,
                first.shape,
                p.shape
            );
        }
        extend_data(&mut first.data, &p.data)?;
        first.shape[0] += p.shape[0];
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_pads_and_joins() {
        let t = HostTensor::new("x", vec![3, 2], TensorData::I64(vec![0, 1, 2, 3, 4, 5])).unwrap();
        let a = slice_padded(&t, 0, 2).unwrap();
        assert_eq!(a.data, TensorData::I64(vec![0, 1, 2, 3]));
        let b = slice_padded(&t, 2, 2).unwrap();
        assert_eq!(b.shape, vec![2, 2]);
        assert_eq!(b.data, TensorData::I64(vec![4, 5, 4, 5]));
        let joined = concat(vec![a, truncate(b, 1).unwrap()]).unwrap();
        assert_eq!(joined, t);
        assert!(slice_padded(&t, 3, 1).is_err());
        let other = HostTensor::new("x", vec![1, 3], TensorData::I64(vec![0; 3])).unwrap();
        assert!(concat(vec![t.clone(), other]).is_err());
        let picked = select_rows(&t, &[2, 0]).unwrap();
        assert_eq!(picked.shape, vec![2, 2]);
        assert_eq!(picked.data, TensorData::I64(vec![4, 5, 0, 1]));
        assert!(select_rows(&t, &[3]).is_err());
    }
}
