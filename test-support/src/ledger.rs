//! Ledgers of processed message ids, and what they say about the messages sent.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// An append-only file of processed message ids, one line each. Every line is written with
/// one `write` call before [`append`](Self::append) returns, so it survives the process being
/// killed the moment after.
#[derive(Debug)]
pub struct LedgerFile {
    file: Mutex<File>,
    lines: AtomicU64,
}

impl LedgerFile {
    /// Opens `path` for appending, creating it when missing.
    ///
    /// # Errors
    ///
    /// When the file cannot be opened.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            file: Mutex::new(file),
            lines: AtomicU64::new(0),
        })
    }

    /// Appends `id` and a newline in one write, and flushes.
    ///
    /// # Errors
    ///
    /// When the write fails.
    pub fn append(&self, id: &str) -> std::io::Result<()> {
        let line = format!("{id}\n");
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        file.write_all(line.as_bytes())?;
        file.flush()?;
        self.lines.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Lines appended by this process.
    pub fn lines(&self) -> u64 {
        self.lines.load(Ordering::Relaxed)
    }
}

/// Reads a ledger file: how often each message id was processed. A missing file is empty.
///
/// # Errors
///
/// When the file exists and cannot be read.
pub fn read(path: &Path) -> std::io::Result<HashMap<String, u32>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let mut counts = HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        *counts.entry(line.to_owned()).or_insert(0) += 1;
    }
    Ok(counts)
}

/// Adds the counts of `other` into `into`: the ledgers of several consumers of one queue.
pub fn merge(into: &mut HashMap<String, u32>, other: &HashMap<String, u32>) {
    for (id, n) in other {
        *into.entry(id.clone()).or_insert(0) += n;
    }
}

/// What became of the messages sent, by the ledgers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Messages sent.
    pub sent: usize,
    /// Sent messages processed at least once.
    pub processed: usize,
    /// Sent messages processed more than once.
    pub duplicated: usize,
    /// Processings beyond the first, summed over the sent messages.
    pub duplicates: u64,
    /// Sent messages never processed.
    pub unprocessed: usize,
    /// Processed ids that were never sent (a message of another queue would be a bug).
    pub strangers: usize,
}

impl Tally {
    /// Compares the message ids `sent` with the processing counts of `ledger`.
    pub fn of(sent: &[String], ledger: &HashMap<String, u32>) -> Self {
        let mut tally = Self {
            sent: sent.len(),
            ..Self::default()
        };
        for id in sent {
            match ledger.get(id) {
                Some(&n) if n > 0 => {
                    tally.processed += 1;
                    if n > 1 {
                        tally.duplicated += 1;
                        tally.duplicates += u64::from(n - 1);
                    }
                }
                _ => tally.unprocessed += 1,
            }
        }
        let sent: HashSet<&String> = sent.iter().collect();
        tally.strangers = ledger.keys().filter(|id| !sent.contains(id)).count();
        tally
    }

    /// Whether every message was processed exactly once: none of them `lost` (as the scenario
    /// counts a loss) and none processed twice.
    ///
    /// # Errors
    ///
    /// Naming how many were lost, or else how many were processed twice.
    pub fn ensure_exactly_once(&self, lost: u64) -> anyhow::Result<()> {
        anyhow::ensure!(lost == 0, "{lost} messages lost");
        anyhow::ensure!(
            self.duplicates == 0,
            "{} messages processed twice",
            self.duplicated
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(ids: &[&str]) -> HashMap<String, u32> {
        let mut counts = HashMap::new();
        for id in ids {
            *counts.entry((*id).to_owned()).or_insert(0) += 1;
        }
        counts
    }

    #[test]
    fn tally_counts_processed_unprocessed_duplicates_and_strangers() {
        let sent: Vec<String> = ["a", "b", "c", "d"].map(str::to_owned).to_vec();
        let mut ledger = counts(&["a", "b", "b"]);
        merge(&mut ledger, &counts(&["b", "c", "x"]));
        let tally = Tally::of(&sent, &ledger);
        assert_eq!(
            tally,
            Tally {
                sent: 4,
                processed: 3,
                duplicated: 1,
                duplicates: 2,
                unprocessed: 1,
                strangers: 1,
            }
        );
    }

    #[test]
    fn a_ledger_file_reads_back_what_was_appended() -> std::io::Result<()> {
        let path = std::env::temp_dir().join(format!("ledger-test-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let ledger = LedgerFile::open(&path)?;
        for id in ["m1", "m2", "m1"] {
            ledger.append(id)?;
        }
        assert_eq!(ledger.lines(), 3);
        assert_eq!(read(&path)?, counts(&["m1", "m2", "m1"]));
        std::fs::remove_file(&path)?;
        assert!(read(&path)?.is_empty(), "a missing ledger is empty");
        Ok(())
    }
}
