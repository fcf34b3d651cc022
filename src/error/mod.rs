//! The one error users act on and code decides by: a [`TypedError`] says what is wrong in the
//! library's own terms (its message), may carry an [`ErrorKind`] (the condition other code acts
//! on: no GPU, TensorRT missing, out of memory, …), a [`Hint`] (what the user can change: a
//! [`Setting`], a free axis to size, the load check to skip, or "the call itself is wrong"), and
//! the error that caused it. Code that decides by the condition asks [`kind_of`], never the
//! message's words, so a reworded message cannot change what the code does; the command line
//! turns the hint into its flag by [`hint_of`], one lookup instead of a downcast per error type.
//! Imports nothing of the crate.

mod setting;

pub use setting::Setting;

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
    /// The samples asked for would not fit in the memory left, checked before allocating them.
    TooLargeForMemory,
    /// The backend could not take the model (it did not parse or convert it).
    BackendRefusedModel,
    /// No workspace in the current folder or its parents, or one whose model is ambiguous.
    NoWorkspace,
    /// An input axis has no size, and the run needs one.
    UnfixedAxis,
}

/// An input axis left free (named or unknown), as a hint says it: enough to spell every flag
/// that fixes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreeAxis {
    /// The input.
    pub tensor: String,
    /// The axis, from 0.
    pub axis: usize,
    /// The axis's name in the model, if it has one.
    pub symbol: Option<String>,
    /// The input's whole shape: `Some(size)` where fixed, `None` where free.
    pub shape: Vec<Option<usize>>,
}

/// What the user can change to get past an error, in the library's terms; the command line
/// names the flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hint {
    /// A different value of this setting fixes it.
    Change(Setting),
    /// A smaller value of this setting fixes it: the call asked for too much (a mistake in how
    /// trtkit was called).
    Lower(Setting),
    /// This setting works only on a backend that enqueues on trtkit's CUDA streams; the
    /// message says which backend was asked for (a mistake in how trtkit was called).
    NeedsGpuBackend(Setting),
    /// The value given to this setting does not fit (a mistake in how trtkit was called); the
    /// message says why.
    Wrong(Setting),
    /// An input axis needs a size.
    SizeAxis(FreeAxis),
    /// An input declares no shape at all: it must be given whole.
    GiveShape,
    /// A rewritten model failed its load check: give its free axes sizes for the check (when
    /// `free_axes`), or skip the check.
    SkipCheck {
        /// Whether the check ran with axes left free.
        free_axes: bool,
    },
    /// The call itself is wrong (a mistake in how trtkit was called), with no one setting to
    /// name: the message says what.
    Usage,
}

impl Hint {
    /// Whether the error is a mistake in how trtkit was called (exit code 2) rather than a
    /// failure.
    pub(crate) fn is_usage(&self) -> bool {
        matches!(
            self,
            Hint::Lower(_) | Hint::NeedsGpuBackend(_) | Hint::Wrong(_) | Hint::Usage
        )
    }
}

/// An error users can act on: its message, and what kind it is, what fixes it and what caused
/// it where those are known. Shows its message (and, with `{:#}`, its cause after it).
#[derive(Debug)]
pub struct TypedError {
    kind: Option<ErrorKind>,
    hint: Option<Hint>,
    message: String,
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

impl TypedError {
    /// An error of `kind` that says `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> TypedError {
        TypedError {
            kind: Some(kind),
            hint: None,
            message: message.into(),
            source: None,
        }
    }

    /// An error that says `message`, which `hint` says how to fix.
    pub fn hinted(hint: Hint, message: impl Into<String>) -> TypedError {
        TypedError {
            kind: None,
            hint: Some(hint),
            message: message.into(),
            source: None,
        }
    }

    /// The same error, with `hint` saying how to fix it.
    pub(crate) fn with_hint(self, hint: Hint) -> TypedError {
        TypedError {
            hint: Some(hint),
            ..self
        }
    }

    /// The same error, caused by `source` (shown after the message by `{:#}`).
    pub(crate) fn caused_by(
        self,
        source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> TypedError {
        TypedError {
            source: Some(source.into()),
            ..self
        }
    }

    /// Its kind, if it has one.
    pub fn kind(&self) -> Option<ErrorKind> {
        self.kind
    }

    /// What fixes it, if that is known.
    pub fn hint(&self) -> Option<&Hint> {
        self.hint.as_ref()
    }

    /// Its own message, without its cause.
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

/// Every [`TypedError`] in `err`, outermost first: the error itself or a context added to it
/// (found by `err`'s own downcast), then the causes beneath.
fn typed_errors(err: &anyhow::Error) -> impl Iterator<Item = &TypedError> {
    let own = err.downcast_ref::<TypedError>();
    let own_ptr = own.map(|e| e as *const TypedError);
    own.into_iter().chain(
        err.chain()
            .filter_map(|e| e.downcast_ref::<TypedError>())
            .filter(move |e| Some(*e as *const TypedError) != own_ptr),
    )
}

/// The kind of the first [`TypedError`] in `err` that has one: the error itself, a context
/// added to it, or any cause beneath; `None` when no part of it has a kind.
pub fn kind_of(err: &anyhow::Error) -> Option<ErrorKind> {
    typed_errors(err).find_map(TypedError::kind)
}

/// The outermost [`TypedError`] in `err` that says how to fix it, for the command line to name
/// the flag; `None` when no part of it does.
pub fn hinted(err: &anyhow::Error) -> Option<&TypedError> {
    typed_errors(err).find(|e| e.hint.is_some())
}

/// Every hint in `err`, outermost first.
pub(crate) fn hints(err: &anyhow::Error) -> impl Iterator<Item = &Hint> {
    typed_errors(err).filter_map(TypedError::hint)
}

/// The hint of [`hinted`]: what fixes `err`, if any part of it says.
pub fn hint_of(err: &anyhow::Error) -> Option<&Hint> {
    hinted(err).and_then(TypedError::hint)
}

/// An `anyhow` error saying `message`, which a different value of `setting` fixes.
pub(crate) fn fix_with(setting: Setting, message: impl Into<String>) -> anyhow::Error {
    TypedError::hinted(Hint::Change(setting), message).into()
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
        let e: anyhow::Error = TypedError::new(
            ErrorKind::BackendRefusedModel,
            "m.onnx: ONNX Runtime refused it",
        )
        .caused_by(anyhow::anyhow!("bad node").context("session"))
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

    #[test]
    fn the_outermost_hint_is_the_one_read() {
        let inner: anyhow::Error =
            TypedError::hinted(Hint::Change(Setting::Crop), "crop too large").into();
        assert_eq!(hint_of(&inner), Some(&Hint::Change(Setting::Crop)));
        assert_eq!(kind_of(&inner), None);
        let wrapped = inner.context("m.onnx");
        assert_eq!(hint_of(&wrapped), Some(&Hint::Change(Setting::Crop)));
        assert_eq!(hinted(&wrapped).unwrap().message(), "crop too large");

        // A hinted context over a hinted cause: the context speaks for the whole.
        let outer = wrapped.context(TypedError::hinted(
            Hint::SkipCheck { free_axes: false },
            "the rewrite does not load",
        ));
        assert_eq!(hint_of(&outer), Some(&Hint::SkipCheck { free_axes: false }));
        assert!(!hint_of(&outer).unwrap().is_usage());

        // A kind and a hint on one error: each question finds its own answer.
        let both: anyhow::Error = TypedError::new(ErrorKind::TooLargeForMemory, "too big")
            .with_hint(Hint::Lower(Setting::BatchSize))
            .into();
        assert_eq!(kind_of(&both), Some(ErrorKind::TooLargeForMemory));
        assert!(hint_of(&both).unwrap().is_usage());
        assert_eq!(hint_of(&anyhow::anyhow!("disk full")), None);
        assert_eq!(
            fix_with(Setting::Labels, "no labels").to_string(),
            "no labels"
        );
    }
}
