use super::*;

#[test]
fn slices_pads_and_joins() {
    let t = HostTensor::new("x", vec![3, 2], TensorData::I64(vec![0, 1, 2, 3, 4, 5])).unwrap();
    let a = slice_padded_on(&t, Some(0), 0, 2).unwrap();
    assert_eq!(a.data, TensorData::I64(vec![0, 1, 2, 3]));
    let b = slice_padded_on(&t, Some(0), 2, 2).unwrap();
    assert_eq!(b.shape, vec![2, 2]);
    assert_eq!(b.data, TensorData::I64(vec![4, 5, 4, 5]));
    let joined = concat_on(vec![a, truncate_on(b, Some(0), 1).unwrap()], Some(0)).unwrap();
    assert_eq!(joined, t);
    assert!(slice_padded_on(&t, Some(0), 3, 1).is_err());
    let other = HostTensor::new("x", vec![1, 3], TensorData::I64(vec![0; 3])).unwrap();
    assert!(concat_on(vec![t.clone(), other], Some(0)).is_err());
    let picked = select_rows_on(&t, Some(0), &[2, 0]).unwrap();
    assert_eq!(picked.shape, vec![2, 2]);
    assert_eq!(picked.data, TensorData::I64(vec![4, 5, 0, 1]));
    assert!(select_rows_on(&t, Some(0), &[3]).is_err());
}

/// A state `[2, N, 2]` with N = 3: value = 100·layer + 10·sample + hidden.
fn state() -> HostTensor {
    let mut v = vec![];
    for layer in 0..2 {
        for sample in 0..3 {
            for h in 0..2 {
                v.push((100 * layer + 10 * sample + h) as f32);
            }
        }
    }
    HostTensor::new("state", vec![2, 3, 2], TensorData::F32(v)).unwrap()
}

#[test]
fn a_state_is_sliced_padded_and_joined_on_axis_1() {
    let s = state();
    let first = slice_padded_on(&s, Some(1), 0, 2).unwrap();
    assert_eq!(first.shape, [2, 2, 2]);
    assert_eq!(
        first.data.to_f64(),
        [0., 1., 10., 11., 100., 101., 110., 111.]
    );
    // The last batch holds one sample, padded by repeating it.
    let last = slice_padded_on(&s, Some(1), 2, 2).unwrap();
    assert_eq!(
        last.data.to_f64(),
        [20., 21., 20., 21., 120., 121., 120., 121.]
    );
    let last = truncate_on(last, Some(1), 1).unwrap();
    assert_eq!(last.shape, [2, 1, 2]);
    assert_eq!(concat_on(vec![first, last], Some(1)).unwrap(), s);
    let picked = select_rows_on(&s, Some(1), &[2, 0]).unwrap();
    assert_eq!(
        picked.data.to_f64(),
        [20., 21., 0., 1., 120., 121., 100., 101.]
    );
    assert_eq!(samples_on(&s, 1).unwrap(), 3);
    // Shapes that differ off the batch axis do not join.
    let other = HostTensor::new("state", vec![3, 1, 2], TensorData::F32(vec![0.; 6])).unwrap();
    let err = concat_on(vec![s.clone(), other], Some(1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor 'state': cannot join shapes [2, 3, 2] and [3, 1, 2] along axis 1"
    );
    assert!(slice_padded_on(&s, Some(3), 0, 1).is_err());
}

#[test]
fn a_tensor_with_no_batch_axis_is_the_same_for_every_batch() {
    let sr = HostTensor::new("sr", vec![], TensorData::I64(vec![16000])).unwrap();
    assert_eq!(slice_padded_on(&sr, None, 5, 4).unwrap(), sr);
    assert_eq!(select_rows_on(&sr, None, &[9]).unwrap(), sr);
    assert_eq!(concat_on(vec![sr.clone(), sr.clone()], None).unwrap(), sr);
    let err = slice_padded_on(&sr, Some(0), 0, 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor 'sr' is a scalar: it has no batch axis"
    );
}
