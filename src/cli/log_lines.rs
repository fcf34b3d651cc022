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

/// One log event's writer (the formatter writes each event whole, in one call).
pub struct EventWriter;

/// Whether `line`, a formatted log event, should be written: anything but a warning, or a
/// warning not said before.
fn first_time(line: &[u8]) -> bool {
    let is_warning = line.windows(4).any(|w| w == b"WARN");
    if !is_warning {
        return true;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    line.hash(&mut hasher);
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    said.get_or_insert_with(HashSet::new)
        .insert(hasher.finish())
}

impl Write for EventWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if first_time(buf) {
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
        EventWriter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_written_once_and_other_lines_always() {
        let warning = b" WARN initializer 'w_test_once' was clamped\n";
        assert!(first_time(warning));
        assert!(!first_time(warning));
        assert!(first_time(
            b" WARN initializer 'other_test_once' was clamped\n"
        ));
        let info = b" INFO opened the model\n";
        assert!(first_time(info) && first_time(info));
    }
}
