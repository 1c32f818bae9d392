//! Checkpoints: the model in llm.c's file format, and the optimizer state in this crate's own.
//!
//! **Model file** (llm.c's `gpt2_124M.bin` / `gpt2_124M_bf16.bin`): a header of 256
//! little-endian `i32` — `[0]` magic 20240326, `[1]` version (1: `f32` parameters, 3: `bf16`),
//! `[2]` max sequence length, `[3]` vocabulary, `[4]` layers, `[5]` heads, `[6]` channels,
//! `[7]` padded vocabulary — then every parameter in [`Layout`](crate::layout::Layout) order.
//!
//! **State file** (ours, written beside the model as `<model>.state`): a header of 256
//! little-endian `i64` — `[0]` magic 20261127, `[1]` version 1, `[2]` the optimizer steps
//! taken, `[3]` the number of parameters `N`, `[4]` the data loader's position, `[5]` the
//! world size that wrote it — then three arrays of `N` little-endian `f32`: the master
//! weights, AdamW's first moments `m`, its second moments `v`. A resumed run restores all
//! three and continues the step count (AdamW's bias corrections) and the data position.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use half::bf16;

use crate::Result;
use crate::config::Config;

/// The first header word of a model file.
pub const MODEL_MAGIC: i32 = 20240326;
/// Model file version with `f32` parameters.
pub const VERSION_F32: i32 = 1;
/// Model file version with `bf16` parameters.
pub const VERSION_BF16: i32 = 3;
/// The first header word of a state file.
pub const STATE_MAGIC: i64 = 20261127;

/// Reads a model file: its configuration and its parameters widened to `f32`.
pub fn read_model(path: &Path) -> Result<(Config, Vec<f32>)> {
    let mut file = std::io::BufReader::new(std::fs::File::open(path).map_err(|e| format!("cannot open checkpoint {}: {e}", path.display()))?);
    let mut header = [0u8; 1024];
    file.read_exact(&mut header).map_err(|e| format!("{}: shorter than a checkpoint header: {e}", path.display()))?;
    let word = |i: usize| i32::from_le_bytes(header[4 * i..4 * i + 4].try_into().unwrap());
    if word(0) != MODEL_MAGIC {
        return Err(format!("{}: magic {} is not llm.c's model magic {MODEL_MAGIC}", path.display(), word(0)).into());
    }
    let version = word(1);
    let dim = |i: usize| usize::try_from(word(i)).map_err(|_| format!("{}: negative header field {i}", path.display()));
    let config = Config { max_seq: dim(2)?, vocab: dim(3)?, layers: dim(4)?, heads: dim(5)?, channels: dim(6)?, padded_vocab: dim(7)? };
    config.check().map_err(|e| format!("{}: {e}", path.display()))?;
    let n = crate::layout::Layout::new(&config).total();
    let params = match version {
        VERSION_F32 => {
            let mut bytes = vec![0u8; n * 4];
            file.read_exact(&mut bytes).map_err(|e| format!("{}: truncated ({n} f32 parameters expected): {e}", path.display()))?;
            bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
        }
        VERSION_BF16 => {
            let mut bytes = vec![0u8; n * 2];
            file.read_exact(&mut bytes).map_err(|e| format!("{}: truncated ({n} bf16 parameters expected): {e}", path.display()))?;
            bytes.chunks_exact(2).map(|b| bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()).collect()
        }
        v => return Err(format!("{}: model version {v} unsupported (1: f32, 3: bf16)", path.display()).into()),
    };
    Ok((config, params))
}

/// Writes a model file with `f32` (`bf16 == false`) or `bf16` parameters.
pub fn write_model(path: &Path, config: &Config, params: &[f32], bf16_params: bool) -> Result<()> {
    let mut header = [0i32; 256];
    header[0] = MODEL_MAGIC;
    header[1] = if bf16_params { VERSION_BF16 } else { VERSION_F32 };
    let fields = [config.max_seq, config.vocab, config.layers, config.heads, config.channels, config.padded_vocab];
    for (h, f) in header[2..8].iter_mut().zip(fields) {
        *h = i32::try_from(f).map_err(|_| "configuration field too large")?;
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?);
    out.write_all(bytemuck::cast_slice(&header))?;
    if bf16_params {
        for p in params {
            out.write_all(&bf16::from_f32(*p).to_bits().to_le_bytes())?;
        }
    } else {
        for p in params {
            out.write_all(&p.to_le_bytes())?;
        }
    }
    out.flush()?;
    Ok(())
}

/// What a state file holds.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    /// Optimizer steps taken.
    pub step: u32,
    /// The data loader's position.
    pub position: usize,
    /// World size of the run that wrote it.
    pub world: usize,
    /// `f32` master weights.
    pub master: Vec<f32>,
    /// AdamW first moments.
    pub m: Vec<f32>,
    /// AdamW second moments.
    pub v: Vec<f32>,
}

/// The state file that goes with model file `model`.
pub fn state_path(model: &Path) -> PathBuf {
    let mut s = model.as_os_str().to_owned();
    s.push(".state");
    PathBuf::from(s)
}

/// Writes a state file.
pub fn write_state(path: &Path, state: &State) -> Result<()> {
    let mut header = [0i64; 256];
    header[0] = STATE_MAGIC;
    header[1] = 1;
    header[2] = state.step as i64;
    header[3] = state.master.len() as i64;
    header[4] = state.position as i64;
    header[5] = state.world as i64;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?);
    out.write_all(bytemuck::cast_slice(&header))?;
    for array in [&state.master, &state.m, &state.v] {
        for x in array.iter() {
            out.write_all(&x.to_le_bytes())?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Reads a state file of `n` parameters.
pub fn read_state(path: &Path, n: usize) -> Result<State> {
    let mut file = std::io::BufReader::new(std::fs::File::open(path).map_err(|e| format!("cannot open optimizer state {}: {e}", path.display()))?);
    let mut header = [0u8; 2048];
    file.read_exact(&mut header)?;
    let word = |i: usize| i64::from_le_bytes(header[8 * i..8 * i + 8].try_into().unwrap());
    if word(0) != STATE_MAGIC || word(1) != 1 {
        return Err(format!("{}: not a version-1 ferrocuda-gpt2 state file (magic {}, version {})", path.display(), word(0), word(1)).into());
    }
    if word(3) != n as i64 {
        return Err(format!("{}: {} parameters, the model has {n}", path.display(), word(3)).into());
    }
    let mut read = || -> Result<Vec<f32>> {
        let mut bytes = vec![0u8; n * 4];
        file.read_exact(&mut bytes).map_err(|e| format!("{}: truncated: {e}", path.display()))?;
        Ok(bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect())
    };
    let (master, m, v) = (read()?, read()?, read()?);
    Ok(State { step: word(2) as u32, position: word(4) as usize, world: word(5) as usize, master, m, v })
}
