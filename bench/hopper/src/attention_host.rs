//! Host side of the attention benchmark and GPU test (not on the device): a problem's data on
//! the GPU (random Q, K, V; O, LSE; the tensor maps), its launch and its check against the f64
//! reference of [`crate::attention`].

use std::ffi::c_void;

use ferrocuda_device::half::bf16;
use ferrocuda_host::{Context, DeviceBuffer, DeviceRead, Function, Stream, TensorDataType, TensorMap, TensorSwizzle, sys};

use crate::attention::{BM, BOX, STAGES, STAGES_DEEP, THREADS, reference_row, shared_bytes, within_bound};

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
/// the three tensor maps. Private fields: the launch relies on the buffers' sizes matching the
/// shape.
pub struct Problem {
    d: u32,
    heads: u32,
    seq_len: u32,
    q: Vec<bf16>,
    k: Vec<bf16>,
    v: Vec<bf16>,
    // Kept alive while the maps point into them.
    _buffers: [DeviceBuffer<bf16>; 3],
    o: DeviceBuffer<bf16>,
    lse: DeviceBuffer<f32>,
    maps: [DeviceBuffer<[u64; 16]>; 3],
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
        let map = |b: &DeviceBuffer<bf16>| -> Res<DeviceBuffer<[u64; 16]>> {
            TensorMap::tiled(b, TensorDataType::Bf16, &dims, &BOX, TensorSwizzle::B128)
                .map_err(err("cuTensorMapEncodeTiled"))?
                .to_device_untracked(context)
                .map_err(err("map upload"))
        };
        let maps = [map(&buffers[0])?, map(&buffers[1])?, map(&buffers[2])?];
        let o = DeviceBuffer::<bf16>::zeroed(context, len).map_err(err("alloc O"))?;
        let lse = DeviceBuffer::<f32>::zeroed(context, (batch_heads * seq_len) as usize).map_err(err("alloc LSE"))?;
        Ok(Problem { d, heads: batch_heads, seq_len, q, k, v, _buffers: buffers, o, lse, maps })
    }

    /// Launches `function` (an `attention_d{D}*` kernel of this module) once on `stream`.
    ///
    /// # Safety
    /// `function` is one of this module's attention kernels with this problem's head dimension
    /// (checked by name), and `stream` is synchronised before `self` is dropped (the kernel reads
    /// and writes its buffers).
    pub unsafe fn launch(&self, function: &Function, stream: &Stream) -> Res<()> {
        if !function.name().starts_with(&format!("attention_d{}", self.d)) || function.name().starts_with(&format!("attention_d{}", self.d * 10)) {
            return Err(format!("{} is no attention kernel of head dimension {}", function.name(), self.d));
        }
        let [mut pq, mut pk, mut pv] = [self.maps[0].device_ptr(), self.maps[1].device_ptr(), self.maps[2].device_ptr()];
        let (mut po, mut pl, mut ps) = (self.o.device_ptr(), self.lse.device_ptr(), self.seq_len);
        let mut scale_log2 = (1.0 / (self.d as f32).sqrt()) * std::f32::consts::LOG2_E;
        let mut params: [*mut c_void; 7] = [
            (&mut pq as *mut u64).cast(),
            (&mut pk as *mut u64).cast(),
            (&mut pv as *mut u64).cast(),
            (&mut po as *mut u64).cast(),
            (&mut pl as *mut u64).cast(),
            (&mut ps as *mut u32).cast(),
            (&mut scale_log2 as *mut f32).cast(),
        ];
        let shared = shared_bytes(self.d, stages(function.name()));
        // Through the door: the kernel reads Q, K, V (through the maps) and writes O and LSE.
        let [q, k, v] = &self._buffers;
        // SAFETY: `o` and `lse` are this problem's own buffers, used by its one caller at a time
        // (this benchmark's thread): nothing else declares work on them between this declaration
        // and the launch below (`SliceArg::write` refuses a write declared through `&`, G16R-12).
        let (o, lse) = unsafe { (self.o.kernel_arg().write_shared("o"), self.lse.kernel_arg().write_shared("lse")) };
        let accesses = [q.kernel_arg().read("q"), k.kernel_arg().read("k"), v.kernel_arg().read("v"), o, lse];
        let code = stream
            .enqueue("attention", &accesses, |raw| {
                // SAFETY: the kernel's seven parameters in order: the maps describe Q, K, V
                // ([B·H, S, D] bf16, box [64, 128, 1], 128-byte swizzle; the buffers live in
                // `self`), O and LSE hold B·H·S·D bf16 and B·H·S f32; the grid, block and shared
                // memory are the kernel's; the function was built for this head dimension (the
                // caller picks it by name).
                Ok::<_, ferrocuda_host::Error>(unsafe {
                    sys::cuLaunchKernel(
                        function.raw(),
                        self.seq_len.div_ceil(BM),
                        self.heads,
                        1,
                        THREADS,
                        1,
                        1,
                        shared,
                        raw.get(),
                        params.as_mut_ptr(),
                        std::ptr::null_mut(),
                    )
                })
            })
            .map_err(err("declare the attention's buffers"))?;
        if code != sys::CUresult::CUDA_SUCCESS {
            return Err(format!("cuLaunchKernel({}) failed: {code:?}", function.name()));
        }
        Ok(())
    }

    /// Poisons O and LSE, runs once, compares `rows` sampled rows (first and last included; every
    /// row when `rows` is at least heads x seq_len) with the f64 reference. Returns a report line; Err when a row is off.
    pub fn check(&mut self, function: &Function, stream: &Stream, causal: bool, rows: usize) -> Res<String> {
        self.o.fill_async(bf16::from_bits(0x7fc1), stream).map_err(err("poison O"))?;
        self.lse.fill_async(f32::NAN, stream).map_err(err("poison LSE"))?;
        // SAFETY: the caller passes a kernel of this module (the name is checked); the stream is
        // synchronised below before anything else happens to `self`.
        unsafe { self.launch(function, stream)? };
        wait_idle(stream, function.name(), 30.0)?;
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
                Err(why) => return Err(format!("{}: head {head} row {row}: {why}", function.name())),
            }
        }
        let which = if every { "all" } else { "sampled" };
        Ok(format!("{count} {which} rows within the bound vs f64 (worst error/bound {worst:.3})"))
    }
}
