//! A small seeded random number generator (SplitMix64), so a run's fault
//! schedule and the workers' hold times replay from the printed seed.
//!
//! ```text
//! let mut rng = Rng::new(42);
//! let pause = rng.between(Duration::from_millis(50), Duration::from_millis(500));
//! ```
//!
//! Not for anything secret: it only has to spread faults around.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A seed for a fresh run: the OS's randomness, else the clock.
    pub fn fresh_seed() -> u64 {
        let mut bytes = [0u8; 8];
        if getrandom_fill(&mut bytes) {
            // Keep seeds short enough to type back in.
            return u64::from_le_bytes(bytes) % 1_000_000_000;
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        (nanos ^ u64::from(std::process::id())) % 1_000_000_000
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 for n = 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        if hi <= lo {
            return lo;
        }
        let span = (hi - lo).as_micros() as u64;
        lo + Duration::from_micros(self.below(span + 1))
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len() as u64) as usize)
    }

    /// A seed for a child generator, so that adding draws in one place does
    /// not shift every other.
    pub fn fork(&mut self) -> u64 {
        self.next_u64()
    }
}

fn getrandom_fill(bytes: &mut [u8]) -> bool {
    // /dev/urandom instead of another dependency: only a seed is needed.
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(bytes))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_draws() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut c = Rng::new(8);
        assert_ne!(Rng::new(7).next_u64(), c.next_u64());
    }

    #[test]
    fn ranges_are_respected() {
        let mut rng = Rng::new(1);
        let (lo, hi) = (Duration::from_millis(10), Duration::from_millis(20));
        for _ in 0..1000 {
            let d = rng.between(lo, hi);
            assert!(d >= lo && d <= hi);
            assert!(rng.below(3) < 3);
        }
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.pick::<u8>(&[]), None);
    }
}
