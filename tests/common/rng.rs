//! A small deterministic generator (xorshift64*) for test inputs, so a failure reproduces from
//! its seed. Included by the tests that need it (`#[path = "common/rng.rs"] mod rng;`).
#![allow(dead_code)]

/// xorshift64*: `Rng(seed)` with any non-zero seed.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u32) -> u32 {
        (self.next() >> 33) as u32 % n
    }

    /// An `f32` in `low..high`, from 24 random bits.
    pub fn uniform_f32(&mut self, low: f32, high: f32) -> f32 {
        low + (high - low) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }

    /// An `f64` in `low..high`, from 53 random bits.
    pub fn uniform_f64(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}
