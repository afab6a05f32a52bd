//! A hash map keyed by message sequence number, with a hasher fitted to such numbers.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes message sequence numbers with one multiplication (Fibonacci hashing), which spreads
/// consecutive numbers over the whole hash. Sequence numbers are the model's own, so no
/// protection against chosen keys is needed.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*byte)).wrapping_mul(FIBONACCI);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(FIBONACCI);
    }
}

/// 2^64 divided by the golden ratio, odd.
const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;

/// A map keyed by message sequence number.
pub(super) type SeqMap<V> = HashMap<u64, V, BuildHasherDefault<SeqHasher>>;
