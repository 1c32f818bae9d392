//! Host side of the eighth port: see the tests and `examples/ports8_bench.rs`.
