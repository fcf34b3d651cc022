//! The fused operators' weights: Q, K and V's columns side by side in one `[hidden_in, 3·w]`
//! weight and one `[3·w]` bias, and float16 copies of float32 LayerNorm weights; float32 or
//! float16, whichever way the tensors are stored.

use super::attention::Projection;
use super::graph_view::floats;
use crate::onnx::dtype::data_type;
use crate::onnx::pb::tensor_proto::{DataLocation, DataType};
use crate::onnx::pb::TensorProto;
use crate::onnx::tensor_values::tensor_values;
use half::f16;
use std::borrow::Cow;

/// A float tensor's bytes, little-endian, and its element size; `None` for other types,
/// external data, or values that do not fill the dims.
fn element_bytes(t: &TensorProto) -> Option<(usize, Cow<'_, [u8]>)> {
    if t.data_location == Some(DataLocation::External as i32) {
        return None;
    }
    let size = match data_type(t.data_type)? {
        DataType::Float => 4,
        DataType::Float16 => 2,
        _ => return None,
    };
    let count = t
        .dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))?;
    let bytes = if t.raw_data.is_empty() {
        Cow::Owned(tensor_values(t, &t.name).ok()?.to_le_bytes())
    } else {
        Cow::Borrowed(t.raw_data.as_slice())
    };
    (bytes.len() == count * size).then_some((size, bytes))
}

/// The Q, K and V weights' chosen columns side by side (`[hidden_in, 3·w]`) and their biases
/// (`[3·w]`), named `names`; `None` where the tensors differ in type or rows.
pub(super) fn pack_qkv<'a>(
    projections: &[Projection; 3],
    find: impl Fn(&str) -> Option<&'a TensorProto>,
    names: (String, String),
) -> Option<(TensorProto, TensorProto)> {
    let mut weights = Vec::new();
    let mut biases = Vec::new();
    for p in projections {
        let (w, b) = (find(&p.weight)?, find(&p.bias)?);
        weights.push((w, element_bytes(w)?, p.columns));
        biases.push((element_bytes(b)?, p.columns));
    }
    let (first, ..) = weights[0];
    let size = weights[0].1 .0;
    let rows = usize::try_from(first.dims[0]).ok()?;
    let same = |t: &TensorProto| t.data_type == first.data_type && t.dims[0] == first.dims[0];
    if !weights.iter().all(|(w, (s, _), _)| same(w) && *s == size)
        || !biases.iter().all(|((s, _), _)| *s == size)
    {
        return None;
    }
    let width: usize = projections.iter().map(|p| p.columns.1).sum();
    let mut w_out = Vec::with_capacity(rows * width * size);
    for r in 0..rows {
        for (w, (_, bytes), (start, count)) in &weights {
            let cols = usize::try_from(w.dims[1]).ok()?;
            let from = (r * cols + start) * size;
            w_out.extend_from_slice(bytes.get(from..from + count * size)?);
        }
    }
    let mut b_out = Vec::with_capacity(width * size);
    for ((_, bytes), (start, count)) in &biases {
        b_out.extend_from_slice(bytes.get(start * size..(start + count) * size)?);
    }
    let tensor = |name: String, dims: Vec<i64>, raw_data: Vec<u8>| TensorProto {
        name,
        dims,
        data_type: first.data_type,
        raw_data,
        ..Default::default()
    };
    Some((
        tensor(names.0, vec![rows as i64, width as i64], w_out),
        tensor(names.1, vec![width as i64], b_out),
    ))
}

/// `t` as a float16 tensor named `name` (a float32 LayerNorm weight a float16 fused node reads).
pub(super) fn as_float16(t: &TensorProto, name: String) -> Option<TensorProto> {
    let values = floats(t)?;
    Some(TensorProto {
        name,
        dims: t.dims.clone(),
        data_type: DataType::Float16 as i32,
        raw_data: values
            .iter()
            .flat_map(|v| f16::from_f32(*v).to_le_bytes())
            .collect(),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::graph_builder::tensor_f32;

    #[test]
    fn columns_of_three_weights_sit_side_by_side_row_by_row() {
        // Two rows; Q takes columns 1..3 of a 4-wide weight, K and V all of 2-wide ones.
        let q = tensor_f32("q", &[2, 4], &[0., 1., 2., 3., 10., 11., 12., 13.]);
        let k = tensor_f32("k", &[2, 2], &[4., 5., 14., 15.]);
        let v = tensor_f32("v", &[2, 2], &[6., 7., 16., 17.]);
        let qb = tensor_f32("qb", &[4], &[0., 1., 2., 3.]);
        let kb = tensor_f32("kb", &[2], &[4., 5.]);
        let vb = tensor_f32("vb", &[2], &[6., 7.]);
        let all = [q, k, v, qb, kb, vb];
        let find = |n: &str| all.iter().find(|t| t.name == n);
        let p = |w: &str, b: &str, columns| Projection {
            weight: w.into(),
            bias: b.into(),
            columns,
        };
        let projections = [
            p("q", "qb", (1, 2)),
            p("k", "kb", (0, 2)),
            p("v", "vb", (0, 2)),
        ];
        let (w, b) = pack_qkv(&projections, find, ("w".into(), "b".into())).unwrap();
        assert_eq!(w.dims, [2, 6]);
        assert_eq!(
            floats(&w).unwrap(),
            [1., 2., 4., 5., 6., 7., 11., 12., 14., 15., 16., 17.]
        );
        assert_eq!(floats(&b).unwrap(), [1., 2., 4., 5., 6., 7.]);
        // A K weight with other rows cannot sit beside them.
        let short = tensor_f32("k", &[1, 2], &[4., 5.]);
        let all = [
            all[0].clone(),
            short,
            all[2].clone(),
            all[3].clone(),
            all[4].clone(),
            all[5].clone(),
        ];
        let find = |n: &str| all.iter().find(|t| t.name == n);
        assert!(pack_qkv(&projections, find, ("w".into(), "b".into())).is_none());
    }
}
