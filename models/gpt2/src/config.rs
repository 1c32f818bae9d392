//! The model's hyperparameters.

/// A GPT-2 shape: the fields of llm.c's checkpoint header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Longest sequence the position table holds (`T` may be shorter).
    pub max_seq: usize,
    /// Vocabulary (50257 for GPT-2).
    pub vocab: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Attention heads per block.
    pub heads: usize,
    /// Channels (model width).
    pub channels: usize,
    /// The vocabulary padded for aligned GEMMs (50304 = 128 x 393 for GPT-2). Padded rows of
    /// the token table are zero and never win: their logits are pushed to -1e30 before the
    /// cross-entropy, so the loss and gradients equal those of the unpadded model.
    pub padded_vocab: usize,
}

impl Config {
    /// GPT-2 small: 124M parameters.
    pub fn gpt2_124m() -> Config {
        Config { max_seq: 1024, vocab: 50257, layers: 12, heads: 12, channels: 768, padded_vocab: 50304 }
    }

    /// The CPU executor's test model: 2 layers, 2 heads of 32, context 16, vocabulary 61
    /// padded to 64.
    pub fn tiny() -> Config {
        Config { max_seq: 16, vocab: 61, layers: 2, heads: 2, channels: 64, padded_vocab: 64 }
    }

    /// A configuration by name: `124m` (also `gpt2`) or `tiny`.
    pub fn named(name: &str) -> Option<Config> {
        match name {
            "124m" | "gpt2" | "d12" => Some(Config::gpt2_124m()),
            "tiny" => Some(Config::tiny()),
            _ => None,
        }
    }

    /// Elements per head.
    pub fn head_dim(&self) -> usize {
        self.channels / self.heads
    }

    /// Refuses shapes the kernels cannot run, saying why.
    pub fn check(&self) -> Result<(), String> {
        let c = self.channels;
        if !c.is_multiple_of(8) {
            return Err(format!("channels {c} must be a multiple of 8 (16-byte aligned bf16 tensors)"));
        }
        if self.heads == 0 || !c.is_multiple_of(self.heads) {
            return Err(format!("channels {c} must be a multiple of heads {}", self.heads));
        }
        let d = self.head_dim();
        if !d.is_multiple_of(32) || d > 256 {
            return Err(format!("head dim {d} must be a multiple of 32 up to 256 (the attention kernels' shapes)"));
        }
        if self.padded_vocab < self.vocab || self.layers == 0 || self.max_seq == 0 {
            return Err(format!("bad configuration {self:?}"));
        }
        Ok(())
    }
}
