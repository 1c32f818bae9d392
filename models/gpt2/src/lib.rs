//! GPT-2 training on ferrocuda's kernels: the model (forward, backward), AdamW with `f32`
//! master weights, gradient clipping, llm.c's checkpoint and token-shard formats, written once
//! over a [`backend::Backend`] that runs on one GPU ([`gpu::Gpu`]) or on the CPU executor
//! ([`cpu::Cpu`]). The `gpt2` binary (`src/main.rs`) adds the command line and data-parallel
//! training over NCCL. See the crate's README.
//!
//! ```
//! use gpt2::{config::Config, cpu::Cpu, layout::{Layout, init_params}, model::Shape, train::{Hyper, Trainer}};
//! let config = Config::tiny();
//! let master = init_params(&Layout::new(&config), 1);
//! let shape = Shape { batch: 1, seq: 16 };
//! let mut trainer = Trainer::<Cpu, f32>::new(Cpu::new(), &config, shape, Hyper::default(), &master)?;
//! let tokens: Vec<u32> = (0..17).map(|i| i % 61).collect();
//! trainer.set_batch(&tokens[..16], &tokens[1..])?;
//! let loss = trainer.forward()?;
//! trainer.backward()?;
//! trainer.update()?;
//! assert!((loss - 61f32.ln()).abs() < 0.5);
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! ```

pub mod audit;
pub mod backend;
pub mod checkpoint;
pub mod config;
pub mod cpu;
pub mod data;
pub mod gpu;
pub mod layout;
pub mod model;
pub mod own;
pub mod train;

/// Errors of the trainer: each says what went wrong and what to do.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;
