//! What a saved-outputs archive says of the inputs it was made from. `--save-outputs` and
//! `--save-reference` add one entry, `trtkit.inputs`: the comparison's own description of its
//! inputs ("64 random samples, uniform [0, 1), seed 0"), as uint8 text. A later comparison that
//! reads the archive as a side and draws random inputs checks it against its own draw, so outputs
//! of other inputs (another `--seed`, another `--range`) are refused instead of compared. An
//! archive without the entry (numpy's, an older trtkit's) is read as it is.

use crate::tensor::{HostTensor, TensorData};
use anyhow::{bail, Result};
use std::path::Path;

/// The entry's name in the archive (`trtkit.inputs.npy`).
pub(crate) const ENTRY: &str = "trtkit.inputs";

/// The entry that says the outputs were made from inputs described as `note`.
pub(crate) fn stamp(note: &str) -> Result<HostTensor> {
    let bytes = note.as_bytes().to_vec();
    HostTensor::new(ENTRY, vec![bytes.len()], TensorData::U8(bytes))
}

/// Takes the entry out of a saved archive's tensors: the description it holds, if it is there.
pub(crate) fn take_stamp(tensors: &mut Vec<HostTensor>) -> Option<String> {
    let at = tensors.iter().position(|t| t.name == ENTRY)?;
    let entry = tensors.remove(at);
    match &entry.data {
        TensorData::U8(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        _ => None,
    }
}

/// Whether `note` describes seeded random samples (whose draw the description pins down).
fn random_draw(note: &str) -> bool {
    note.contains(" random samples, ")
}

/// Refuses the saved outputs at `path`, made from inputs described as `saved`, when this
/// comparison draws other random inputs (`now`). Where either side's inputs came from a file
/// (`--inputs`, perhaps the very inputs `--save-inputs` kept), the description cannot tell, and
/// the outputs are compared as before.
pub(crate) fn check_same_inputs(path: &Path, saved: Option<&str>, now: &str) -> Result<()> {
    match saved {
        Some(saved) if saved != now && random_draw(saved) && random_draw(now) => bail!(
            "{}: these outputs were saved from other inputs ({saved}) than this comparison's \
             ({now}); compare on the same inputs: the same --seed, --num-samples and --range, \
             or --inputs with what --save-inputs saved",
            path.display()
        ),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_goes_in_comes_out_and_is_checked() {
        let note = "4 random samples, uniform [0, 1), seed 0";
        let mut saved = vec![stamp(note).unwrap()];
        assert_eq!(take_stamp(&mut saved).as_deref(), Some(note));
        assert!(saved.is_empty());
        assert_eq!(take_stamp(&mut saved), None);
        let path = Path::new("out.npz");
        assert!(check_same_inputs(path, Some(note), note).is_ok());
        assert!(check_same_inputs(path, None, "anything").is_ok());
        assert!(check_same_inputs(path, Some(note), "in.npz").is_ok());
        let other = "4 random samples, uniform [0, 1), seed 1";
        let err = check_same_inputs(path, Some(note), other)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("out.npz: ") && err.contains("seed 1"),
            "{err}"
        );
    }
}
