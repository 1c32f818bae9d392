//! Host side of the attention benchmark and GPU test (not on the device): a problem's data on
//! the GPU (random Q, K, V; O, LSE; the tensor maps), its launch and its check against the f64
//! reference of [`crate::attention`].

use ferrocuda_device::half::bf16;
use ferrocuda_host::{Context, DeviceBuffer, DevicePtr, LaunchConfig, Stream, TensorDataType, TensorMap, TensorSwizzle};

use crate::attention::{
    BM, BOX, ForwardArgs, ForwardKernel, STAGES, STAGES_DEEP, THREADS, forward_kernel, reference_row, shared_bytes, shared_bytes_ostage, shared_bytes_q2,
    within_bound,
};

/// Errors as text (this is test and benchmark code).
pub type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// The ring depth of kernel `name` (the `_s3` kernels: 3).
pub fn stages(name: &str) -> u32 {
    if name.ends_with("_s3") { STAGES_DEEP } else { STAGES }
}

/// xorshift64*, uniform bf16 in [-1, 1).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Two values from one draw (24 bits each).
    pub fn bf16_pair(&mut self) -> [bf16; 2] {
        let bits = self.next_u64();
        let unit = |x: u64| 2.0 * ((x & 0xff_ffff) as f32 / (1u64 << 24) as f32) - 1.0;
        [bf16::from_f32(unit(bits >> 40)), bf16::from_f32(unit(bits >> 16))]
    }
}

/// Polls until `stream` is idle, at most `seconds` (a hang is reported, not waited out).
pub fn wait_idle(stream: &Stream, what: &str, seconds: f64) -> Res<()> {
    let start = std::time::Instant::now();
    while !stream.is_idle().map_err(err(what))? {
        if start.elapsed().as_secs_f64() > seconds {
            return Err(format!("HANG: {what} did not finish within {seconds} s"));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    stream.synchronize().map_err(err(what))
}

/// One problem's device data: Q, K, V (and their host copies for the reference), O, LSE and
/// the three tensor maps. Private fields: the launch relies on the maps describing these
/// buffers.
pub struct Problem {
    d: u32,
    heads: u32,
    seq_len: u32,
    q: Vec<bf16>,
    k: Vec<bf16>,
    v: Vec<bf16>,
    buffers: [DeviceBuffer<bf16>; 3],
    o: DeviceBuffer<bf16>,
    lse: DeviceBuffer<f32>,
    /// The Q, K and V maps, one after the other (48 words, 256-byte aligned).
    maps: DeviceBuffer<u64>,
}

/// The forward instance `name` of `ferrocuda-kernels-hopper` (its typed launcher), with its
/// dynamic shared memory allowed in `context`.
pub fn kernel(context: &Context, name: &str) -> Res<&'static ForwardKernel> {
    let kernel = forward_kernel(name).ok_or_else(|| format!("{name}: no attention forward instance of that name"))?;
    let function = (kernel.function)(context).map_err(err("loading the kernels"))?;
    function.set_max_dynamic_shared_bytes(shared_bytes_of(name)).map_err(err("smem attribute"))?;
    Ok(kernel)
}

/// The dynamic shared memory of instance `name`.
pub fn shared_bytes_of(name: &str) -> u32 {
    let d = if name.starts_with("attention_d128") { 128 } else { 64 };
    if name.ends_with("_q2") {
        shared_bytes_q2(d, stages(name))
    } else if name.ends_with("_ostg") || name.ends_with("_obulk") {
        shared_bytes_ostage(d, stages(name))
    } else {
        shared_bytes(d, stages(name))
    }
}

impl Problem {
    /// The host copies of Q, K and V (`[heads, seq_len, d]`).
    pub fn inputs(&self) -> [&[bf16]; 3] {
        [&self.q, &self.k, &self.v]
    }

    /// O as the last launch left it (after synchronising `stream`-ordered work: `to_vec` waits).
    pub fn output(&self) -> Res<Vec<bf16>> {
        self.o.to_vec().map_err(err("download O"))
    }

    /// Fresh random Q, K, V (uniform in [-1, 1), from `seed`) of `batch_heads` heads of `seq_len`
    /// rows of `d` columns, uploaded, with their tensor maps and O and LSE buffers.
    pub fn new(context: &Context, d: u32, batch_heads: u32, seq_len: u32, seed: u64) -> Res<Problem> {
        let len = (batch_heads * seq_len * d) as usize;
        let mut rng = Rng(seed);
        let mut random = || -> Vec<bf16> { (0..len.div_ceil(2)).flat_map(|_| rng.bf16_pair()).take(len).collect() };
        let (q, k, v) = (random(), random(), random());
        let upload = |x: &[bf16]| DeviceBuffer::from_slice(context, x).map_err(err("upload"));
        let buffers = [upload(&q)?, upload(&k)?, upload(&v)?];
        let dims = [d as u64, seq_len as u64, batch_heads as u64];
        let mut words = Vec::with_capacity(48);
        for b in &buffers {
            words.extend(TensorMap::tiled(b, TensorDataType::Bf16, &dims, &BOX, TensorSwizzle::B128).map_err(err("cuTensorMapEncodeTiled"))?.words());
        }
        let maps = DeviceBuffer::from_slice(context, &words).map_err(err("map upload"))?;
        let o = DeviceBuffer::<bf16>::zeroed(context, len).map_err(err("alloc O"))?;
        let lse = DeviceBuffer::<f32>::zeroed(context, (batch_heads * seq_len) as usize).map_err(err("alloc LSE"))?;
        Ok(Problem { d, heads: batch_heads, seq_len, q, k, v, buffers, o, lse, maps })
    }

    /// Launches `kernel` (an `attention_d{D}*` instance, from [`kernel`]) once on `stream`,
    /// through its typed launcher: the launch declares Q, K, V and the maps (read) and O, LSE
    /// and the persistent instances' counter (written), so no synchronisation is the caller's.
    pub fn launch(&mut self, kernel: &ForwardKernel, stream: &Stream, counter: &mut DeviceBuffer<u32>) -> Res<()> {
        let name = kernel.name;
        if !name.starts_with(&format!("attention_d{}", self.d)) || name.starts_with(&format!("attention_d{}", self.d * 10)) {
            return Err(format!("{name} is no attention kernel of head dimension {}", self.d));
        }
        let persistent = name.contains("_persistent");
        let grid = if persistent {
            let sms = stream.context().device().multiprocessor_count().map_err(err("SMs"))?;
            ((self.seq_len.div_ceil(BM) * self.heads).min(sms).max(1), 1)
        } else {
            (self.seq_len.div_ceil(BM), self.heads)
        };
        if persistent {
            counter.fill_async(0, stream).map_err(err("zero the counter"))?;
        }
        let config = LaunchConfig::new(grid, THREADS).with_shared_bytes(shared_bytes_of(name));
        let [q, k, v] = &self.buffers;
        let args = ForwardArgs {
            maps: DevicePtr::from_address(self.maps.device_ptr()),
            map_words: &self.maps,
            q,
            k,
            v,
            o: &mut self.o,
            lse: &mut self.lse,
            seq_len: self.seq_len,
            scale_log2: (1.0 / (self.d as f32).sqrt()) * std::f32::consts::LOG2_E,
            heads: self.heads,
            next: counter,
        };
        // SAFETY: the kernel's contract (the maps; it checks the rest): `maps` holds, from its
        // start, maps of exactly Q, K and V (`[heads, seq_len, d]` bf16, box `BOX`, 128-byte
        // swizzle; made by `new` from these buffers, which `self` keeps), written once by `new`
        // and read by launches only.
        unsafe { (kernel.launch)(stream, config, args) }.map_err(err(name))
    }

    /// Poisons O and LSE, runs once, compares `rows` sampled rows (first and last included; every
    /// row when `rows` is at least heads x seq_len) with the f64 reference. Returns a report line; Err when a row is off.
    pub fn check(&mut self, kernel: &ForwardKernel, stream: &Stream, causal: bool, rows: usize) -> Res<String> {
        self.o.fill_async(bf16::from_bits(0x7fc1), stream).map_err(err("poison O"))?;
        self.lse.fill_async(f32::NAN, stream).map_err(err("poison LSE"))?;
        let mut counter = DeviceBuffer::<u32>::zeroed(stream.context(), 1).map_err(err("alloc the counter"))?;
        self.launch(kernel, stream, &mut counter)?;
        wait_idle(stream, kernel.name, 30.0)?;
        let (o, lse) = (self.o.to_vec().map_err(err("download O"))?, self.lse.to_vec().map_err(err("download LSE"))?);
        let (d, s) = (self.d as usize, self.seq_len as usize);
        let mut pick = Rng(0x5eed ^ (s as u64) << 8 ^ d as u64);
        let mut worst = 0.0f64;
        // Every row when `rows` covers them all, else a sample (the first and last included).
        let every = rows >= self.heads as usize * s;
        let count = if every { self.heads as usize * s } else { rows };
        for i in 0..count {
            let (head, row) = match i {
                _ if every => (i / s, i % s),
                0 => (0, 0),
                1 => (self.heads as usize - 1, s - 1),
                _ => ((pick.next_u64() % self.heads as u64) as usize, (pick.next_u64() % s as u64) as usize),
            };
            let reference = reference_row(&self.q, &self.k, &self.v, d, s, head, row, causal);
            let at = (head * s + row) * d;
            let got: Vec<f32> = o[at..at + d].iter().map(|x| x.to_f32()).collect();
            match within_bound(&reference, &got, lse[head * s + row]) {
                Ok(ratio) => worst = worst.max(ratio),
                Err(why) => return Err(format!("{}: head {head} row {row}: {why}", kernel.name)),
            }
        }
        let which = if every { "all" } else { "sampled" };
        Ok(format!("{count} {which} rows within the bound vs f64 (worst error/bound {worst:.3})"))
    }
}
