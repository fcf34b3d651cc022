//! This machine as trtkit's records, lock files and temporary file names name it: its host
//! name, and whether one of its processes still runs.

use std::path::Path;
use std::sync::OnceLock;

/// This host's name: the kernel's (`/proc/sys/kernel/hostname`), else `$HOSTNAME`, else
/// `unknown`. Read once per process.
pub fn name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "unknown".into())
    })
}

/// Whether process `pid` of this host still runs; `None` where this system does not show its
/// processes (no `/proc`), so that no caller mistakes "cannot tell" for "gone".
pub(crate) fn process_alive(pid: u32) -> Option<bool> {
    if !Path::new("/proc/self").exists() {
        return None;
    }
    Some(pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_lives_and_an_ended_one_does_not() {
        assert!(!name().is_empty());
        assert_eq!(process_alive(std::process::id()), Some(true));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(process_alive(pid), Some(false));
    }
}
