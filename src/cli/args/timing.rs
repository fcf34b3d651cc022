//! Warm-up and measured amounts. `--warmup N` means one thing everywhere: N warm-up runs of
//! the model (iterations in `run`, batches in `validate`), left out of the figures.

use crate::cuda::harness::Amount;
use crate::jobs::validate::WarmupBatches;
use crate::number;
use clap::Args;

/// How long `run` warms up and measures, per batch size.
#[derive(Clone, Debug, Args)]
pub struct TimingArgs {
    /// Warm-up iterations before measuring.
    #[arg(long, default_value = "10", value_parser = warmup_iterations, alias = "warmup-iterations", conflicts_with = "warmup_seconds")]
    pub warmup: u64,
    /// Warm up for this many seconds instead of a number of iterations.
    #[arg(long, value_name = "SECONDS", value_parser = number::seconds)]
    pub(crate) warmup_seconds: Option<f64>,
    /// Measured iterations per batch size.
    #[arg(long, default_value_t = 100, conflicts_with = "duration")]
    pub iterations: u64,
    /// Measure for this many seconds instead of a number of iterations.
    #[arg(long, value_name = "SECONDS", value_parser = number::seconds)]
    pub duration: Option<f64>,
}

impl TimingArgs {
    /// The warm-up amount.
    pub fn warmup(&self) -> Amount {
        self.warmup_seconds
            .map(Amount::Seconds)
            .unwrap_or(Amount::Iterations(self.warmup))
    }

    /// The measured amount.
    pub fn measure(&self) -> Amount {
        self.duration
            .map(Amount::Seconds)
            .unwrap_or(Amount::Iterations(self.iterations))
    }

    /// Checks what clap cannot: a positive iteration count and positive, finite seconds.
    pub fn check(&self) -> Result<(), String> {
        if self.iterations == 0 {
            return Err("--iterations must be at least 1".into());
        }
        for (flag, v) in [
            ("--duration", self.duration),
            ("--warmup-seconds", self.warmup_seconds),
        ] {
            if let Some(s) = v {
                if !(s.is_finite() && s > 0.0) {
                    return Err(format!("{flag} takes a positive number of seconds"));
                }
            }
        }
        Ok(())
    }
}

/// `run --warmup N`: a whole number of iterations. A number with a fraction is refused with
/// the flag that takes seconds (`--warmup-seconds`).
fn warmup_iterations(text: &str) -> Result<u64, String> {
    text.parse::<u64>().map_err(|_| match text.parse::<f64>() {
        Ok(_) => {
            format!("--warmup counts iterations; for {text} seconds use --warmup-seconds {text}")
        }
        Err(_) => format!("'{text}' is not a number of iterations"),
    })
}

/// `validate --warmup N`: N warm-up batches. A fraction in [0, 1) is the old meaning (a share
/// of the batches), still read for one release with a warning.
pub(crate) fn warmup_batches(text: &str) -> Result<WarmupBatches, String> {
    if let Ok(n) = text.parse::<usize>() {
        return Ok(WarmupBatches::Count(n));
    }
    match text.parse::<f64>() {
        Ok(f) if (0.0..1.0).contains(&f) => {
            tracing::warn!("--warmup {text}: a fraction of the batches is deprecated; --warmup counts batches now");
            Ok(WarmupBatches::Fraction(f))
        }
        _ => Err(format!("'{text}' is not a number of batches")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_counts_runs_and_says_so_for_old_values() {
        assert_eq!(warmup_iterations("5"), Ok(5));
        assert!(warmup_iterations("2.5")
            .unwrap_err()
            .contains("--warmup-seconds 2.5"));
        assert_eq!(warmup_batches("3"), Ok(WarmupBatches::Count(3)));
        assert_eq!(warmup_batches("0.2"), Ok(WarmupBatches::Fraction(0.2)));
        assert!(warmup_batches("1.5").is_err());
    }
}
