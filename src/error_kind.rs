//! Errors that carry their kind: the conditions other code acts on (no GPU, a GPU that cannot
//! run the engine, TensorRT missing, a batch outside the engine's profile, out of memory, a
//! backend that refused the model) are raised as a [`TypedError`] with an [`ErrorKind`] and the
//! message users read. Code that decides by the condition asks [`kind_of`], never the message's
//! words, so a reworded message cannot change what the code does. It imports nothing of the
//! crate.

use serde::{Deserialize, Serialize};
use std::error::Error as StdError;
use std::fmt;

/// The conditions code acts on, whatever their message says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// No GPU can be used here: no CUDA driver, or the driver sees no GPU.
    NoGpu,
    /// The GPU is there, but the engine's TensorRT flavour does not run on it.
    GpuCannotRunEngine,
    /// The TensorRT libraries needed to run or build an engine were not found.
    TensorRtMissing,
    /// A batch the engine's optimization profile does not take.
    BatchOutsideProfile,
    /// An allocation on the GPU found too little memory free.
    OutOfMemory,
    /// The backend could not take the model (it did not parse or convert it).
    BackendRefusedModel,
}

/// An error of a known [`ErrorKind`]: it shows its message (and, after it, what caused it).
#[derive(Debug)]
pub(crate) struct TypedError {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

impl TypedError {
    /// An error of `kind` that says `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> TypedError {
        TypedError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    #[cfg(test)]
    /// An error of `kind` that says `message`, caused by `source` (shown after it by `{:#}`).
    pub(crate) fn caused_by(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> TypedError {
        TypedError {
            kind,
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// Its kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Its own message, without its cause.
    #[cfg(test)]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for TypedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for TypedError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

/// The kind of the first [`TypedError`] in `err`: the error itself, a context added to it, or
/// any cause beneath; `None` when no part of it has a kind.
pub fn kind_of(err: &anyhow::Error) -> Option<ErrorKind> {
    err.downcast_ref::<TypedError>()
        .or_else(|| err.chain().find_map(|e| e.downcast_ref::<TypedError>()))
        .map(TypedError::kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn the_kind_is_found_wherever_it_sits() {
        let root: anyhow::Error = TypedError::new(ErrorKind::NoGpu, "no GPU here").into();
        assert_eq!(kind_of(&root), Some(ErrorKind::NoGpu));
        let wrapped = root.context("m.engine").context("validate");
        assert_eq!(kind_of(&wrapped), Some(ErrorKind::NoGpu));
        assert_eq!(format!("{wrapped:#}"), "validate: m.engine: no GPU here");

        let missing: anyhow::Result<()> = Err(anyhow::anyhow!("libtensorrt_rtx.so.1: not found"));
        let as_context = missing
            .with_context(|| TypedError::new(ErrorKind::TensorRtMissing, "running it needs X"))
            .context("m.engine")
            .unwrap_err();
        assert_eq!(kind_of(&as_context), Some(ErrorKind::TensorRtMissing));
        assert_eq!(
            format!("{as_context:#}"),
            "m.engine: running it needs X: libtensorrt_rtx.so.1: not found"
        );

        let plain = anyhow::anyhow!("out of GPU memory, says the text");
        assert_eq!(kind_of(&plain), None);
    }

    #[test]
    fn a_cause_is_shown_after_the_message() {
        let e: anyhow::Error = TypedError::caused_by(
            ErrorKind::BackendRefusedModel,
            "m.onnx: ONNX Runtime refused it",
            anyhow::anyhow!("bad node").context("session"),
        )
        .into();
        assert_eq!(kind_of(&e), Some(ErrorKind::BackendRefusedModel));
        assert_eq!(format!("{e}"), "m.onnx: ONNX Runtime refused it");
        assert_eq!(
            format!("{e:#}"),
            "m.onnx: ONNX Runtime refused it: session: bad node"
        );
        let t = e.downcast_ref::<TypedError>().unwrap();
        assert_eq!(t.message(), "m.onnx: ONNX Runtime refused it");
    }
}
