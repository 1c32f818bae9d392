//! Plain Rust references of the ported kernels (what the CPU-executor tests and the GPU
//! harness check the ports and the twins against), and the shapes the harness times.

pub mod reference;
