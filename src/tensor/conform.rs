//! Host tensors conformed to the float types a model takes: a float32 tensor feeds a float16
//! input (a graph written with `--fp16-io`) as float16, and back. Only float tensors convert,
//! to another float type; integer and bool tensors never do.

use super::{ElemType, HostTensor, IoSpec, TensorData};
use half::f16;
use half::slice::HalfFloatSliceExt;
use std::borrow::Cow;

/// One input converted from one float type to another, to the type its model takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FloatConversion {
    /// The input.
    pub input: String,
    /// The element type it came in.
    pub from: ElemType,
    /// The element type the model takes.
    pub to: ElemType,
}

/// Whether a tensor of `have` can feed an input that takes `want`: the same type, or two float
/// types (converted on the way in).
pub fn feeds(have: ElemType, want: ElemType) -> bool {
    have == want || (have.is_float() && want.is_float())
}

impl TensorData {
    /// The elements as `to`, where both are float types (float16 rounds to nearest); `None`
    /// for any other pair.
    pub(crate) fn to_float(&self, to: ElemType) -> Option<TensorData> {
        if !self.elem_type().is_float() || !to.is_float() {
            return None;
        }
        Some(match (self, to) {
            (same, t) if same.elem_type() == t => same.clone(),
            (TensorData::F32(v), ElemType::F16) => {
                let mut narrow = vec![f16::ZERO; v.len()];
                narrow.convert_from_f32_slice(v);
                TensorData::F16(narrow)
            }
            (TensorData::F64(v), ElemType::F16) => {
                TensorData::F16(v.iter().map(|&x| f16::from_f64(x)).collect())
            }
            (wide, ElemType::F64) => TensorData::F64(wide.to_f64()),
            (other, _) => TensorData::F32(other.as_f32().into_owned()),
        })
    }
}

/// `tensors` with every float tensor whose input (the spec of its name) takes another float
/// type converted to that type, and the conversions made; borrowed as given when none is
/// needed. Tensors of other types, and tensors no spec names, are left as they are (the
/// backend says what is wrong with them).
pub(crate) fn conform_floats<'t>(
    tensors: &'t [HostTensor],
    specs: &[IoSpec],
) -> (Cow<'t, [HostTensor]>, Vec<FloatConversion>) {
    let wanted = |t: &HostTensor| -> Option<ElemType> {
        let want = specs.iter().find(|s| s.name == t.name)?.elem_type;
        (t.elem_type() != want && feeds(t.elem_type(), want)).then_some(want)
    };
    if !tensors.iter().any(|t| wanted(t).is_some()) {
        return (Cow::Borrowed(tensors), vec![]);
    }
    let mut conversions = vec![];
    let conformed = tensors
        .iter()
        .map(
            |t| match wanted(t).and_then(|to| Some((to, t.data.to_float(to)?))) {
                Some((to, data)) => {
                    conversions.push(FloatConversion {
                        input: t.name.clone(),
                        from: t.elem_type(),
                        to,
                    });
                    HostTensor {
                        name: t.name.clone(),
                        shape: t.shape.clone(),
                        data,
                    }
                }
                None => t.clone(),
            },
        )
        .collect();
    (Cow::Owned(conformed), conversions)
}

/// What the reports say of `conversions` made for `side`: `inputs converted float32 → float16
/// for A` (each pair of types once); `None` when there were none.
pub(crate) fn conversion_note(conversions: &[FloatConversion], side: &str) -> Option<String> {
    let mut pairs: Vec<(ElemType, ElemType)> = vec![];
    for c in conversions {
        if !pairs.contains(&(c.from, c.to)) {
            pairs.push((c.from, c.to));
        }
    }
    if pairs.is_empty() {
        return None;
    }
    let pairs: Vec<String> = pairs
        .iter()
        .map(|(from, to)| format!("{from} → {to}"))
        .collect();
    Some(format!("inputs converted {} for {side}", pairs.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Dim;

    fn spec(name: &str, elem_type: ElemType) -> IoSpec {
        IoSpec {
            name: name.into(),
            elem_type,
            dims: vec![Dim::Fixed(2)],
        }
    }

    fn tensor(name: &str, data: TensorData) -> HostTensor {
        HostTensor::new(name, vec![2], data).unwrap()
    }

    #[test]
    fn float_inputs_take_the_models_float_type_and_integers_never_convert() {
        let given = [
            tensor("x", TensorData::F32(vec![0.1, 70000.0])),
            tensor("ids", TensorData::I64(vec![3, 4])),
            tensor("h", TensorData::F16(vec![f16::from_f32(0.5), f16::ONE])),
        ];
        let specs = [
            spec("x", ElemType::F16),
            spec("ids", ElemType::I32),
            spec("h", ElemType::F32),
        ];
        let (fed, conversions) = conform_floats(&given, &specs);
        assert!(matches!(fed, Cow::Owned(_)));
        assert_eq!(
            fed[0].data,
            TensorData::F16(vec![f16::from_f32(0.1), f16::INFINITY])
        );
        assert_eq!(fed[1], given[1], "an integer input is never converted");
        assert_eq!(fed[2].data, TensorData::F32(vec![0.5, 1.0]));
        let pairs: Vec<_> = conversions.iter().map(|c| (c.from, c.to)).collect();
        assert_eq!(
            pairs,
            [
                (ElemType::F32, ElemType::F16),
                (ElemType::F16, ElemType::F32)
            ]
        );
        assert_eq!(
            conversion_note(&conversions, "A").unwrap(),
            "inputs converted float32 → float16, float16 → float32 for A"
        );
        assert_eq!(
            conversion_note(&conversions[..1], "B").unwrap(),
            "inputs converted float32 → float16 for B"
        );
    }

    #[test]
    fn tensors_that_fit_are_borrowed_and_no_note_is_made() {
        let given = [tensor("x", TensorData::F32(vec![1.0, 2.0]))];
        let (fed, conversions) = conform_floats(&given, &[spec("x", ElemType::F32)]);
        assert!(matches!(fed, Cow::Borrowed(_)));
        assert!(conversions.is_empty());
        assert_eq!(conversion_note(&conversions, "A"), None);
        // No spec of its name: left for the backend to refuse.
        let (fed, conversions) = conform_floats(&given, &[spec("y", ElemType::F16)]);
        assert_eq!(fed[0], given[0]);
        assert!(conversions.is_empty());
    }

    #[test]
    fn only_float_pairs_feed_each_other() {
        assert!(feeds(ElemType::F32, ElemType::F16));
        assert!(feeds(ElemType::F64, ElemType::F32));
        assert!(feeds(ElemType::I64, ElemType::I64));
        assert!(!feeds(ElemType::F32, ElemType::I64));
        assert!(!feeds(ElemType::I32, ElemType::I64));
        let wide = TensorData::F16(vec![f16::from_f32(-2.5)]);
        assert_eq!(
            wide.to_float(ElemType::F64),
            Some(TensorData::F64(vec![-2.5]))
        );
        assert_eq!(TensorData::I8(vec![1]).to_float(ElemType::F32), None);
    }
}
