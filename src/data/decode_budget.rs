//! How many bytes a decoder may allocate for what a file says it holds (`.npz` entries, `.npy`
//! arrays): the one rule every decoder of untrusted files checks sizes against before it
//! allocates, so a crafted header or a deflate bomb is refused with a message instead of
//! aborting or exhausting the machine.

use crate::units;
use anyhow::{bail, Result};

/// The variable that sets the budget in bytes (`K`, `M`, `G` suffixes: binary units).
pub(crate) const BUDGET_ENV: &str = "TRTKIT_DECODE_BUDGET";

/// Used when the machine's available memory cannot be read.
const FALLBACK: u64 = 4 << 30;

/// A limit on the bytes one decoded file may take, and where the limit came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeBudget {
    /// The most bytes the decoded data of one file may take.
    pub bytes: u64,
    /// Whether `TRTKIT_DECODE_BUDGET` set it (else: half the available memory).
    pub from_env: bool,
}

impl DecodeBudget {
    /// The budget: `TRTKIT_DECODE_BUDGET` when set (a value that is not a size is an error),
    /// else half the memory the machine can give now (4 GiB where that cannot be read).
    pub fn current() -> Result<Self> {
        if let Ok(text) = std::env::var(BUDGET_ENV) {
            let Some(bytes) = parse_size(&text) else {
                bail!("{BUDGET_ENV}='{text}' is not a size (bytes, or a number with K, M or G)");
            };
            return Ok(DecodeBudget {
                bytes,
                from_env: true,
            });
        }
        let bytes = crate::host_memory::available_bytes().map_or(FALLBACK, |b| b / 2);
        Ok(DecodeBudget {
            bytes,
            from_env: false,
        })
    }

    /// How the budget reads in a message: its size and where it comes from.
    pub fn describe(&self) -> String {
        let source = if self.from_env {
            format!("set by {BUDGET_ENV}")
        } else {
            format!("half the available memory; {BUDGET_ENV} sets it")
        };
        format!(
            "the decoder budget of {} ({source})",
            units::bytes(self.bytes)
        )
    }

    /// Refuses `need` bytes of decoded data over the budget; `what` names the source and
    /// `thing` what needs them.
    pub fn check(&self, need: u64, what: &str, thing: &str) -> Result<()> {
        if need > self.bytes {
            bail!(
                "{what}: {thing} {} ({need} bytes), over {}",
                units::bytes(need),
                self.describe()
            );
        }
        Ok(())
    }
}

/// `"1024"`, `"64K"`, `"512M"`, `"2G"` as bytes (binary units); `None` when not a size.
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, shift) = match text.chars().last()?.to_ascii_uppercase() {
        'K' => (&text[..text.len() - 1], 10),
        'M' => (&text[..text.len() - 1], 20),
        'G' => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("1024"), Some(1024));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("99999999999999G"), None);
    }

    #[test]
    fn over_budget_names_the_source_and_the_budget() {
        let b = DecodeBudget {
            bytes: 1 << 20,
            from_env: false,
        };
        assert!(b
            .check(1 << 20, "a.npz", "entry 'x.npy' inflates to")
            .is_ok());
        let e = b
            .check(3 << 20, "a.npz", "entry 'x.npy' inflates to")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a.npz: entry 'x.npy' inflates to 3.0 MiB")
                && e.contains("decoder budget of 1.0 MiB")
                && e.contains(BUDGET_ENV),
            "{e}"
        );
    }
}
