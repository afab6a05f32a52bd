//! Memory of a process, from `/proc/<pid>/status`.

/// Resident memory of a process, KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// Resident set size now (`VmRSS`).
    pub rss_kib: u64,
    /// Peak resident set size (`VmHWM`).
    pub peak_rss_kib: u64,
}

/// This process's memory; zeros where `/proc` is not there.
pub fn own() -> Memory {
    read("/proc/self/status")
}

/// The memory of process `pid`; zeros when it is gone.
pub fn of_pid(pid: u32) -> Memory {
    read(&format!("/proc/{pid}/status"))
}

fn read(path: &str) -> Memory {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Memory::default();
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    Memory {
        rss_kib: field("VmRSS:"),
        peak_rss_kib: field("VmHWM:"),
    }
}

/// KiB as MiB, for tables.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_resident_memory() {
        let memory = super::own();
        assert!(memory.rss_kib > 0, "{memory:?}");
        assert!(memory.peak_rss_kib >= memory.rss_kib, "{memory:?}");
    }
}
