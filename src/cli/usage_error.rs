//! How a mistake in the way trtkit was called is told apart from a failure: such an error is an
//! error whose hint says so ([`Hint::is_usage`]): made here by [`usage`] for the command line's
//! own checks, or by the library for a value it finds wrong. It exits with code 2.

use crate::error::{hints, Hint, TypedError};

/// A usage error saying `what`: a message, or an error (a library's check of a flag value)
/// whose whole chain becomes one line.
pub fn usage(what: impl std::fmt::Display) -> anyhow::Error {
    TypedError::hinted(Hint::Usage, format!("{what:#}")).into()
}

/// Whether any part of `err` says it is a mistake in how trtkit was called (exit code 2).
pub(crate) fn is_usage(err: &anyhow::Error) -> bool {
    hints(err).any(Hint::is_usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_or_an_error_chain_becomes_one_usage_error() {
        let plain = usage("--batch-size must be at least 1");
        assert!(is_usage(&plain));
        assert_eq!(plain.to_string(), "--batch-size must be at least 1");
        let chained = usage(anyhow::anyhow!("bad dims").context("--dim seq=0"));
        assert!(is_usage(&chained));
        assert_eq!(chained.to_string(), "--dim seq=0: bad dims");
        let wrapped = chained.context("m.onnx");
        assert!(is_usage(&wrapped));
        assert!(!is_usage(&anyhow::anyhow!("disk full")));
        let failure = crate::error::fix_with(crate::error::Setting::Labels, "no labels");
        assert!(!is_usage(&failure));
    }
}
