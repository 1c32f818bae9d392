//! GPT-2 training on ferrocuda's kernels.
#![allow(missing_docs)]
pub mod backend;
pub mod checkpoint;
pub mod config;
pub mod data;
pub mod layout;
pub mod own;

/// Errors of the trainer: each says what went wrong and what to do.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;
pub mod cpu;
pub mod gpu;
pub mod model;
pub mod train;
