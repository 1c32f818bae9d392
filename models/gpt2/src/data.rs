//! Token shards in llm.c's format, a structured synthetic corpus, and the batch loader.
//!
//! A shard is a header of 256 little-endian `i32` (`[0]` the magic 20240520, `[1]` the
//! version 1, `[2]` the number of tokens) followed by the tokens as little-endian `u16`.

use std::io::{Read, Write};
use std::path::Path;

use crate::Result;
use crate::layout::Rng;

/// The first header word of a token shard.
pub const SHARD_MAGIC: i32 = 20240520;
/// The shard version llm.c writes for GPT-2 tokens (`u16`).
pub const SHARD_VERSION: i32 = 1;

/// Reads a token shard.
pub fn read_shard(path: &Path) -> Result<Vec<u16>> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot open token shard {}: {e}", path.display()))?;
    let mut header = [0u8; 1024];
    file.read_exact(&mut header).map_err(|e| format!("{}: shorter than a shard header (1024 bytes): {e}", path.display()))?;
    let word = |i: usize| i32::from_le_bytes(header[4 * i..4 * i + 4].try_into().unwrap());
    if word(0) != SHARD_MAGIC {
        return Err(format!("{}: magic {} is not a token shard's {SHARD_MAGIC} (llm.c's dev/data scripts write them)", path.display(), word(0)).into());
    }
    if word(1) != SHARD_VERSION {
        return Err(format!("{}: shard version {} unsupported (want {SHARD_VERSION}: u16 tokens)", path.display(), word(1)).into());
    }
    let count = usize::try_from(word(2)).map_err(|_| format!("{}: negative token count", path.display()))?;
    let mut bytes = vec![0u8; count * 2];
    file.read_exact(&mut bytes).map_err(|e| format!("{}: header says {count} tokens but the file is shorter: {e}", path.display()))?;
    Ok(bytes.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect())
}

/// Writes `tokens` as a shard.
pub fn write_shard(path: &Path, tokens: &[u16]) -> Result<()> {
    let mut header = [0i32; 256];
    header[0] = SHARD_MAGIC;
    header[1] = SHARD_VERSION;
    header[2] = i32::try_from(tokens.len()).map_err(|_| "too many tokens for one shard")?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?);
    out.write_all(bytemuck::cast_slice(&header))?;
    for t in tokens {
        out.write_all(&t.to_le_bytes())?;
    }
    out.flush()?;
    Ok(())
}

/// A generated corpus with structure a model can learn: runs of arithmetic progressions
/// (`s, s + k, s + 2k, ...` modulo `alphabet`, `k` in 1..=3, runs of 4 to 32 tokens), each
/// run starting with a random token. After two tokens of a run the next is determined, so the
/// loss falls well below `ln(alphabet)`.
pub fn synthetic_corpus(tokens: usize, alphabet: usize, seed: u64) -> Vec<u16> {
    let alphabet = alphabet.clamp(2, 65536) as u64;
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(tokens);
    while out.len() < tokens {
        let start = rng.next_u64() % alphabet;
        let step = 1 + rng.next_u64() % 3;
        let run = 4 + rng.next_u64() % 29;
        for i in 0..run {
            if out.len() == tokens {
                break;
            }
            out.push(((start + i * step) % alphabet) as u16);
        }
    }
    out
}

/// Batches of `batch x seq` inputs and their next-token targets from a token stream, the
/// ranks of a data-parallel job taking interleaved windows (llm.c's loader without shuffling).
#[derive(Clone, Debug)]
pub struct Loader {
    tokens: Vec<u16>,
    batch: usize,
    seq: usize,
    rank: usize,
    world: usize,
    position: usize,
}

impl Loader {
    /// A loader over `tokens` for rank `rank` of `world`.
    pub fn new(tokens: Vec<u16>, batch: usize, seq: usize, rank: usize, world: usize) -> Result<Loader> {
        let need = world * batch * seq + 1;
        if tokens.len() < need {
            return Err(format!("{} tokens are too few for {world} rank(s) x batch {batch} x seq {seq} (+1)", tokens.len()).into());
        }
        Ok(Loader { tokens, batch, seq, rank, world, position: rank * batch * seq })
    }

    /// The next batch: inputs and targets, `batch * seq` each (as `u32`, the kernels' type).
    pub fn next_batch(&mut self) -> (Vec<u32>, Vec<u32>) {
        let n = self.batch * self.seq;
        if self.position + n + 1 > self.tokens.len() {
            self.position = self.rank * n;
        }
        let window = &self.tokens[self.position..self.position + n + 1];
        self.position += self.world * n;
        (window[..n].iter().map(|&t| t as u32).collect(), window[1..].iter().map(|&t| t as u32).collect())
    }

    /// Where the next batch starts (saved with a checkpoint so a resumed run sees the same data).
    pub fn position(&self) -> usize {
        self.position
    }

    /// Continues from a saved position.
    pub fn seek(&mut self, position: usize) {
        self.position = position;
    }
}
