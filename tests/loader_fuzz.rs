//! Property tests of the model loader on truncated and bit-flipped models: never a panic,
//! and every truncation is refused with a one-line message.

use proptest::prelude::*;
use trtkit::onnx::model::decode_model;
use trtkit::onnx::{test_models, OnnxModel};

fn classifier_bytes() -> Vec<u8> {
    OnnxModel::from_proto(test_models::classifier(None), "c.onnx").to_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_truncation_is_refused(cut in 0usize..1_000_000) {
        let bytes = classifier_bytes();
        let cut = cut % bytes.len();
        let err = decode_model(&bytes[..cut]).expect_err("a truncated model must not load");
        let text = format!("{err:#}");
        prop_assert!(!text.contains('\n'), "multi-line error: {}", text);
    }

    #[test]
    fn bit_flips_never_panic(flips in proptest::collection::vec((0usize..1_000_000, 0u8..8), 1..8)) {
        let mut bytes = classifier_bytes();
        let len = bytes.len();
        for (pos, bit) in flips {
            bytes[pos % len] ^= 1 << bit;
        }
        if let Err(err) = decode_model(&bytes) {
            let text = format!("{err:#}");
            prop_assert!(!text.is_empty());
        }
    }
}

#[test]
fn the_intact_model_decodes() {
    assert!(decode_model(&classifier_bytes()).is_ok());
}
