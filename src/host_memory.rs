//! This process's memory as the kernel counts it (Linux's `/proc/self/status`), and the
//! memory the machine can still give it (`/proc/meminfo`).

/// Peak resident memory of this process so far, in bytes (Linux; `None` elsewhere).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Memory the kernel can give without swapping (`MemAvailable` in `/proc/meminfo`), in bytes
/// (Linux; `None` elsewhere).
pub(crate) fn available_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn some_memory_is_available() {
        assert!(super::available_bytes().unwrap() > 1 << 20);
    }

    #[test]
    fn the_peak_grows_with_memory_touched() {
        let before = super::peak_rss_bytes().unwrap();
        let big = vec![1u8; 64 << 20];
        let after = super::peak_rss_bytes().unwrap();
        assert!(after >= before && after >= 64 << 20, "{before} → {after}");
        assert_eq!(big.iter().map(|&b| b as usize).sum::<usize>(), 64 << 20);
    }
}
