//! This process's memory as the kernel counts it (Linux's `/proc/self/status`).

/// Peak resident memory of this process so far, in bytes (Linux; `None` elsewhere).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_peak_grows_with_memory_touched() {
        let before = super::peak_rss_bytes().unwrap();
        let big = vec![1u8; 64 << 20];
        let after = super::peak_rss_bytes().unwrap();
        assert!(after >= before && after >= 64 << 20, "{before} → {after}");
        assert_eq!(big.iter().map(|&b| b as usize).sum::<usize>(), 64 << 20);
    }
}
