//! Whether each initializer holds the data its declared shape needs: `raw_data`, the typed
//! field of its element type, or the length of its external data must be the size of
//! `product(dims)` elements. A model that claims two billion elements and holds 128 bytes is
//! refused when it is loaded, naming the initializer, instead of being counted, built or run.

use super::dtype::{data_type, dtype_bits, dtype_name};
use super::external::{external_ref, is_external};
use super::pb::tensor_proto::DataType;
use super::pb::{GraphProto, TensorProto};
use anyhow::{bail, Result};

/// Checks every initializer of `graph`. `held_elsewhere(i)` is the length of initializer `i`'s
/// `raw_data` when the decoder left it in the file (see
/// [`DeferredWeights`](super::deferred_weights::DeferredWeights)), `None` otherwise.
pub(crate) fn check_initializer_data(
    graph: &GraphProto,
    held_elsewhere: impl Fn(usize) -> Option<u64>,
) -> Result<()> {
    for (i, tensor) in graph.initializer.iter().enumerate() {
        check_tensor(tensor, held_elsewhere(i))?;
    }
    Ok(())
}

/// The element count of `tensor`'s dims, refusing negative dims and counts past 64 bits.
fn declared_elements(tensor: &TensorProto) -> Result<u64> {
    let mut count = 1u64;
    for &d in &tensor.dims {
        let Ok(d) = u64::try_from(d) else {
            bail!(
                "initializer '{}' has dims {:?}: a dimension is negative",
                tensor.name,
                tensor.dims
            );
        };
        let Some(next) = count.checked_mul(d) else {
            bail!(
                "initializer '{}' has dims {:?}: more elements than 64 bits can count",
                tensor.name,
                tensor.dims
            );
        };
        count = next;
    }
    Ok(count)
}

/// Checks one initializer; `deferred` is its `raw_data` length when that was left in the file.
fn check_tensor(tensor: &TensorProto, deferred: Option<u64>) -> Result<()> {
    let count = declared_elements(tensor)?;
    if tensor.segment.is_some() {
        // A segment of a tensor split across several protos holds only part of it.
        return Ok(());
    }
    let dtype = dtype_name(tensor.data_type);
    let needed = match dtype_bits(tensor.data_type) {
        Some(bits) => match count.checked_mul(bits) {
            Some(total) => Some(total.div_ceil(8)),
            None => bail!(
                "initializer '{}' has dims {:?}: more bytes of {dtype} than 64 bits can count",
                tensor.name,
                tensor.dims
            ),
        },
        None => None,
    };
    let shape = || format!("dims {:?}, {count} {dtype} elements", tensor.dims);
    if is_external(tensor) {
        // Without a length field the length is computed from the dims; the file's size is
        // checked against it with the other external data.
        let held = external_ref(tensor)?.length;
        if let Some(needed) = needed.filter(|&n| n != held) {
            bail!(
                "initializer '{}' ({}) needs {needed} bytes, but its external data length is {held}",
                tensor.name,
                shape()
            );
        }
        return Ok(());
    }
    let raw = deferred.unwrap_or(tensor.raw_data.len() as u64);
    if raw > 0 || count == 0 {
        if let Some(needed) = needed.filter(|&n| n != raw) {
            bail!(
                "initializer '{}' ({}) needs {needed} bytes, but its raw data holds {raw}",
                tensor.name,
                shape()
            );
        }
        return Ok(());
    }
    let Some((held, per_element, field)) = typed_values(tensor) else {
        return Ok(());
    };
    // INT4/UINT4/FLOAT4 values are packed two to a typed value.
    let expected = if needed.is_some_and(|n| n < count) {
        count.div_ceil(2)
    } else {
        count.saturating_mul(per_element)
    };
    if held != expected {
        bail!(
            "initializer '{}' ({}) needs {expected} values in {field}, but it holds {held}",
            tensor.name,
            shape()
        );
    }
    Ok(())
}

/// How many values `tensor` holds in the typed field of its element type, how many of them
/// one element takes (two for complex numbers), and the field's name; `None` for an unknown
/// element type.
fn typed_values(tensor: &TensorProto) -> Option<(u64, u64, &'static str)> {
    use DataType::*;
    let len = |v: usize| v as u64;
    Some(match data_type(tensor.data_type)? {
        Float => (len(tensor.float_data.len()), 1, "float_data"),
        Complex64 => (len(tensor.float_data.len()), 2, "float_data"),
        Double => (len(tensor.double_data.len()), 1, "double_data"),
        Complex128 => (len(tensor.double_data.len()), 2, "double_data"),
        Int64 => (len(tensor.int64_data.len()), 1, "int64_data"),
        Uint32 | Uint64 => (len(tensor.uint64_data.len()), 1, "uint64_data"),
        String => (len(tensor.string_data.len()), 1, "string_data"),
        Undefined => return None,
        _ => (len(tensor.int32_data.len()), 1, "int32_data"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::pb::tensor_proto::DataLocation;
    use crate::onnx::pb::StringStringEntryProto;

    fn tensor(dims: Vec<i64>, code: DataType) -> TensorProto {
        TensorProto {
            name: "w".into(),
            dims,
            data_type: code as i32,
            ..Default::default()
        }
    }

    fn error(t: &TensorProto, deferred: Option<u64>) -> String {
        format!("{:#}", check_tensor(t, deferred).unwrap_err())
    }

    #[test]
    fn raw_data_must_fill_the_shape() {
        let mut t = tensor(vec![2, 3], DataType::Float);
        t.raw_data = vec![0; 24];
        assert!(check_tensor(&t, None).is_ok());
        t.raw_data.truncate(20);
        assert!(
            error(&t, None).contains("needs 24 bytes"),
            "{}",
            error(&t, None)
        );
        // Left in the file by the decoder: its length there counts.
        t.raw_data.clear();
        assert!(check_tensor(&t, Some(24)).is_ok());
        assert!(error(&t, Some(128)).contains("holds 128"));
        let mut huge = tensor(vec![2_000_000_000], DataType::Float);
        huge.raw_data = vec![0; 128];
        let e = error(&huge, None);
        assert!(e.contains("'w'") && e.contains("8000000000"), "{e}");
    }

    #[test]
    fn typed_data_must_fill_the_shape() {
        let mut t = tensor(vec![3], DataType::Int64);
        t.int64_data = vec![1, 2, 3];
        assert!(check_tensor(&t, None).is_ok());
        t.int64_data.pop();
        assert!(error(&t, None).contains("int64_data"));
        let mut c = tensor(vec![2], DataType::Complex64);
        c.float_data = vec![0.0; 4];
        assert!(check_tensor(&c, None).is_ok());
        let mut i4 = tensor(vec![5], DataType::Int4);
        i4.int32_data = vec![0; 3];
        assert!(check_tensor(&i4, None).is_ok());
        // No data at all for a non-empty shape.
        let empty = tensor(vec![4], DataType::Float);
        assert!(error(&empty, None).contains("holds 0"));
        assert!(check_tensor(&tensor(vec![0, 4], DataType::Float), None).is_ok());
    }

    #[test]
    fn external_lengths_and_bad_dims() {
        let mut t = tensor(vec![2, 3], DataType::Float);
        t.data_location = Some(DataLocation::External as i32);
        t.external_data = vec![
            StringStringEntryProto {
                key: "location".into(),
                value: "w.bin".into(),
            },
            StringStringEntryProto {
                key: "length".into(),
                value: "8".into(),
            },
        ];
        assert!(error(&t, None).contains("external data length is 8"));
        t.external_data.pop();
        assert!(check_tensor(&t, None).is_ok());
        assert!(error(&tensor(vec![-1, 3], DataType::Float), None).contains("negative"));
        let over = tensor(vec![i64::MAX, i64::MAX], DataType::Float);
        assert!(error(&over, None).contains("64 bits"));
        let wide = tensor(vec![i64::MAX], DataType::Double);
        assert!(error(&wide, None).contains("64 bits"));
    }
}
