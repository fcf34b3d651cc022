//! How a mistake in the way trtkit was called is told apart from a failure: every such error is
//! made by [`usage`], and exits with code 2.

/// A mistake in how trtkit was called (exit code 2), as opposed to a failure (exit code 1).
/// Made only by [`usage`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(String);

/// A usage error saying `what`: a message, or an error (a library's check of a flag value)
/// whose whole chain becomes one line.
pub fn usage(what: impl std::fmt::Display) -> anyhow::Error {
    UsageError(format!("{what:#}")).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_or_an_error_chain_becomes_one_usage_error() {
        let plain = usage("--batch-size must be at least 1");
        assert!(plain.is::<UsageError>());
        assert_eq!(plain.to_string(), "--batch-size must be at least 1");
        let chained = usage(anyhow::anyhow!("bad dims").context("--dim seq=0"));
        assert!(chained.is::<UsageError>());
        assert_eq!(chained.to_string(), "--dim seq=0: bad dims");
    }
}
