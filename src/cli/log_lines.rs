//! Where log lines go: standard error, each warning once. A search that rewrites a model many
//! times (the FP16 and INT8 target searches, a calibration's passes) meets the same fact each
//! time (a weight clamped to ±65504, a pattern that matches nothing); saying it eight times buries
//! the rest.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::sync::Mutex;
use tracing_subscriber::fmt::MakeWriter;

/// The warnings said so far, by the hash of their text.
static SAID: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

/// Makes the writers of the log: standard error, each warning line once.
#[derive(Clone, Copy, Debug, Default)]
pub struct WarningsOnce;

/// One log event's writer (the formatter writes each event whole, in one call); `warning`:
/// the event is a warning, written only the first time its line is seen.
pub struct EventWriter {
    warning: bool,
}

/// Whether events of `level` are said once: warnings; every other line is always written.
fn said_once(level: &tracing::Level) -> bool {
    *level == tracing::Level::WARN
}

/// Whether `line`, a formatted warning, is said for the first time in this process.
fn first_time(line: &[u8]) -> bool {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    line.hash(&mut hasher);
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    said.get_or_insert_with(HashSet::new)
        .insert(hasher.finish())
}

impl Write for EventWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.warning || first_time(buf) {
            std::io::stderr().write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> MakeWriter<'a> for WarningsOnce {
    type Writer = EventWriter;

    fn make_writer(&'a self) -> Self::Writer {
        EventWriter { warning: false }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        EventWriter {
            warning: said_once(meta.level()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_said_once() {
        let warning = b" WARN initializer 'w_test_once' was clamped\n";
        assert!(first_time(warning));
        assert!(!first_time(warning));
        assert!(first_time(
            b" WARN initializer 'other_test_once' was clamped\n"
        ));
    }
}
