//! `hopper-gemm`: the library's Hopper bf16 GEMM (`ferrocuda_kernels_hopper::gemm`) against
//! cuBLAS (`cublasGemmEx`, bf16 in/out, f32 compute) and against the same algorithm in CUDA C++
//! (`bench/hopper/cuda/gemm_bf16_tn.cu`, compiled here by NVRTC for sm_90a) on the same GPU in
//! one run, plus the tensor-map round-trip test, the TMA loads and stores of ranks 1, 3, 4 and
//! 5, the swizzled 2-D TMA store and the data-movement probes.
//!
//! Ours runs as safe calls of the library: `library` is
//! `ferrocuda_kernels::gemm::hopper_gemm_bf16` as a program calls it (checks, two tensor maps
//! built and copied to the device in stream order per call, the launch, the table's
//! schedule); every other name is `GemmEngine::hopper_gemm_bf16_with` (the engine's cached
//! maps, what `gemm` runs) with one schedule of `SCHEDULES` (plain, balanced grid, tiles in
//! bands along M, clusters of two sharing B by multicast). Burst (20 launches after 1 s idle)
//! and sustained (400 per event pair) windows carry the SM clock and power that `nvidia-smi`
//! sampled during them.
//!
//! ```text
//! hopper-gemm [--sizes 4096,8192] [--runs 20] [--json FILE] [--twin-cubin FILE] [--schedules a,b,...]
//! ```
//! `--schedules` times only the named schedules of `SCHEDULES` (beside `library`, the twin and
//! cuBLAS).
//! `--twin-cubin` writes NVRTC's cubin of the CUDA C++ twin (for `nvdisasm`; default
//! `hopper-gemm-twin.cubin`).
//! For each size: fresh random bf16 inputs in [-1, 1); C poisoned with NaN before the first
//! launch; 2048 sampled entries checked against an f64 host reference with the bound
//! `|c - ref| <= 2^-8 |ref| + 2^-16 sum_k |a_ik b_jk|` (bf16 output rounding plus f32
//! accumulation); the whole C compared with cuBLAS's; then CUDA-event timings (median),
//! interleaved run by run: isolated (one launch per event pair, synchronised after each) and
//! steady state (20 launches back to back per event pair, as cuBLAS users time it).
//! Exit status 1 when a check fails.
#![allow(clippy::result_large_err)]

use std::ffi::c_void;
use std::process::ExitCode;

use ferrocuda_bench::nvrtc;
use ferrocuda_device::half::bf16;
use ferrocuda_host::{
    Context, Cublas, DeviceBuffer, Event, Function, Gemm, JitOptions, MatrixLayout, Module, Stream, TensorDataType, TensorMap, TensorSwizzle, sys,
};
use ferrocuda_kernels::gemm::{GemmEngine, HopperSchedule, HopperStore, hopper_gemm_bf16};
use ferrocuda_kernels_hopper::gemm::{
    BK, BM, BN, SHARED_BYTES, STORE_STAGES, STORE3_STAGES, THREADS, gemm_bf16_tn, gemm_bf16_tn_cluster2, gemm_bf16_tn_store, gemm_bf16_tn_store_cluster2,
    gemm_bf16_tn_store3, gemm_bf16_tn_store3_cluster2, store_shared_bytes,
};
use hopper_kernels::tma_probes::COPY_TILE;

type Res<T> = Result<T, String>;

/// The CUDA C++ twin of `gemm_bf16_tn`: the same tiles, pipeline and instructions.
const TWIN_SOURCE: &str = include_str!("../../cuda/gemm_bf16_tn.cu");
/// Its kernel, with `gemm_bf16_tn`'s former parameters (maps, C, m, n, k).
const TWIN_KERNEL: &str = "gemm_bf16_tn_cpp";

/// The sm_90 schedules timed through `GemmEngine::hopper_gemm_bf16_with` (cached maps): `bal`
/// a balanced grid (as few blocks as keep the waves), `gN` tiles in bands of N along M (tile
/// pairs for `cl2`), `cl2` clusters of two blocks sharing B by multicast, `tma` the copy-engine
/// epilogue (4-stage ring, half tiles staged), `tma3` the same with a 3-stage ring and whole
/// tiles staged; without `tma`: direct stores (sessions 12-13's kernels). `--schedules`
/// picks some (default: all).
const SCHEDULES: &[(&str, HopperSchedule)] = &[
    ("plain", HopperSchedule::PLAIN),
    ("bal", schedule(false, 0, HopperStore::Direct)),
    ("g8-bal", schedule(false, 8, HopperStore::Direct)),
    ("g16-bal", schedule(false, 16, HopperStore::Direct)),
    ("cl2-bal", schedule(true, 0, HopperStore::Direct)),
    ("cl2-g4-bal", schedule(true, 4, HopperStore::Direct)),
    ("cl2-g8-bal", schedule(true, 8, HopperStore::Direct)),
    ("tma-bal", schedule(false, 0, HopperStore::Tma)),
    ("tma-g8-bal", schedule(false, 8, HopperStore::Tma)),
    ("tma-g16-bal", schedule(false, 16, HopperStore::Tma)),
    ("tma3-g8-bal", schedule(false, 8, HopperStore::Tma3)),
    ("tma3-g16-bal", schedule(false, 16, HopperStore::Tma3)),
    ("cl2-tma-bal", schedule(true, 0, HopperStore::Tma)),
    ("cl2-tma-g4-bal", schedule(true, 4, HopperStore::Tma)),
    ("cl2-tma-g8-bal", schedule(true, 8, HopperStore::Tma)),
    ("cl2-tma3-g8-bal", schedule(true, 8, HopperStore::Tma3)),
];

/// A balanced-grid schedule.
const fn schedule(cluster: bool, group: u32, store: HopperStore) -> HopperSchedule {
    HopperSchedule { cluster, group, balanced_grid: true, store }
}

/// The schedules `--schedules` picked (all when absent).
static PICKED: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();

/// The schedules this run times, in `SCHEDULES`' order.
fn picked_schedules() -> impl Iterator<Item = &'static (&'static str, HopperSchedule)> {
    SCHEDULES.iter().filter(|(name, _)| PICKED.get().is_none_or(|picked| picked.contains(name)))
}

/// Progress on stderr with the time since start: on the first GPU runs (2026-11-23, H100 and
/// H200) the program stopped printing after loading the module and was killed after 200 s, so
/// every step says where it is.
fn trace(what: &str) {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    eprintln!("[{:8.3} s] {what}", start.elapsed().as_secs_f64());
}

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// A small deterministic generator (xorshift64*), one stream per matrix.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [-1, 1), rounded to bf16.
    fn bf16(&mut self) -> bf16 {
        let unit = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        bf16::from_f32(2.0 * unit - 1.0)
    }
}

/// The raw handle of `stream`, for this benchmark's raw launches and cuBLAS handle: taken
/// through the door with nothing declared, because the benchmark orders its buffers itself
/// (one stream, synchronised before every host access).
fn raw_stream(stream: &Stream) -> sys::CUstream {
    stream.enqueue("hopper_gemm raw work", &[], |s| Ok::<_, ferrocuda_host::Error>(s.get())).expect("binding the stream's context")
}

/// Launches `function` with raw parameters.
///
/// # Safety
/// `params` match the kernel's parameters in number, order and type, and the buffers they
/// point to satisfy the kernel's contract.
unsafe fn launch(function: &Function, stream: &Stream, grid: (u32, u32), block: u32, shared: u32, params: &mut [*mut c_void]) -> Res<()> {
    // SAFETY: the caller's contract; the function and stream belong to the current context.
    let code =
        unsafe { sys::cuLaunchKernel(function.raw(), grid.0, grid.1, 1, block, 1, 1, shared, raw_stream(stream), params.as_mut_ptr(), std::ptr::null_mut()) };
    if code != sys::CUresult::CUDA_SUCCESS {
        return Err(format!("cuLaunchKernel({}) failed: {code:?}", function.name()));
    }
    Ok(())
}

/// cuBLAS through ferrocuda's typed GEMM (the same `cublasGemmEx` call as a C++ user's:
/// bf16 in and out, f32 compute, `CUBLAS_GEMM_DEFAULT`), on the benchmark's stream.
struct Blas(Cublas);

impl Blas {
    fn new(stream: &Stream) -> Res<Self> {
        if !Cublas::is_available() {
            return Err("libcublas not found: add /usr/local/cuda/lib64 to LD_LIBRARY_PATH".into());
        }
        Ok(Blas(Cublas::new(stream).map_err(err("cuBLAS handle"))?))
    }

    /// Row-major `C (m x n) = A (m x k) · Bᵀ` with B n x k row-major, bf16 in and out, f32
    /// compute. Column-major view: `Cᵀ (n x m) = op_T(B as k x n) · (A as k x m)`.
    fn gemm_tn(&self, a: &DeviceBuffer<bf16>, b: &DeviceBuffer<bf16>, c: &mut DeviceBuffer<bf16>, m: i32, n: i32, k: i32) -> Res<()> {
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let gemm = Gemm::<bf16, bf16>::new(MatrixLayout::col_major(k, n).transposed(), MatrixLayout::col_major(k, m), MatrixLayout::col_major(n, m))
            .map_err(err("GEMM description"))?;
        self.0.gemm(&gemm, 1.0, b, a, 0.0, c).map_err(err("cublasGemmEx"))
    }
}

fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    let mid = times.len() / 2;
    if times.len().is_multiple_of(2) { (times[mid - 1] + times[mid]) / 2.0 } else { times[mid] }
}

/// The TMA round trip: a 256 x 512 bf16 array copied tile by tile through shared memory by
/// `tma_copy_tile` (tensor map in global memory + `fence.proxy.tensormap` acquire). Exact.
fn tma_round_trip(context: &Context, stream: &Stream, module: &Module) -> Res<String> {
    let (rows, cols) = (256u32, 512u32);
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let input: Vec<bf16> = (0..rows * cols).map(|_| rng.bf16()).collect();
    let src = DeviceBuffer::from_slice(context, &input).map_err(err("upload"))?;
    let mut dst = DeviceBuffer::<bf16>::zeroed(context, input.len()).map_err(err("alloc"))?;
    dst.fill_async(bf16::from_bits(0xffff), stream).map_err(err("poison"))?;
    let map = TensorMap::tiled_2d(&src, TensorDataType::Bf16, rows as u64, cols as u64, COPY_TILE, COPY_TILE, TensorSwizzle::None)
        .map_err(err("cuTensorMapEncodeTiled"))?;
    let map_dev = map.to_device_untracked(context).map_err(err("map upload"))?;
    let function = module.function("tma_copy_tile").map_err(err("tma_copy_tile"))?;
    let shared = COPY_TILE * COPY_TILE * 2 + 8 + 1024;
    function.set_max_dynamic_shared_bytes(shared).map_err(err("smem attribute"))?;
    let (mut p_map, mut p_out, mut p_width) = (map_dev.device_ptr(), dst.device_ptr(), cols);
    let mut params = [(&mut p_map as *mut u64).cast(), (&mut p_out as *mut u64).cast(), (&mut p_width as *mut u32).cast()];
    // SAFETY: (map, out, width) as the kernel declares; the grid covers the array exactly.
    unsafe { launch(&function, stream, (cols / COPY_TILE, rows / COPY_TILE), 128, shared, &mut params)? };
    wait_idle(stream, "tma_copy_tile", 20.0)?;
    let output = dst.to_vec().map_err(err("download"))?;
    let wrong = output.iter().zip(&input).filter(|(a, b)| a != b).count();
    if wrong > 0 {
        return Err(format!("TMA round trip: {wrong} of {} elements differ", input.len()));
    }
    Ok(format!("TMA round trip (tensor map in global memory, {rows}x{cols} bf16, {}x{} boxes): exact, {} elements", COPY_TILE, COPY_TILE, input.len()))
}

/// TMA loads of ranks 1, 3, 4 and 5 (`probe_tma_rank_loads`): one box from each of four
/// packed u16 arrays of distinct values, maps from `TensorMap::tiled`, every element of every
/// box compared with the box computed here from its coordinates. Exact.
fn tma_rank_loads(context: &Context, stream: &Stream, module: &Module) -> Res<String> {
    use hopper_kernels::probes::{TMA_RANK_LOADS, TMA_RANK_SHARED_BYTES, TMA_RANK_TOTAL_BYTES, tma_rank_value};
    let (_sources, maps) = rank_arrays(context, tma_rank_value)?;
    let words = TMA_RANK_TOTAL_BYTES as usize / 4;
    let mut out = DeviceBuffer::<u32>::zeroed(context, words).map_err(err("alloc"))?;
    out.fill_async(0xffff_ffff, stream).map_err(err("poison"))?;
    let function = module.function("probe_tma_rank_loads").map_err(err("probe_tma_rank_loads"))?;
    let mut pointers: Vec<u64> = maps.iter().map(|m| m.device_ptr()).collect();
    pointers.push(out.device_ptr());
    let mut params: Vec<*mut c_void> = pointers.iter_mut().map(|p| (p as *mut u64).cast()).collect();
    // SAFETY: (m1, m3, m4, m5, out) as the kernel declares: map `k` describes source `k` (alive
    // until the wait below) with load `k`'s shape and box; `out` holds every box; one block of
    // 128 threads with the shared memory it asks for (under 48 KiB).
    unsafe { launch(&function, stream, (1, 1), 128, TMA_RANK_SHARED_BYTES, &mut params)? };
    wait_idle(stream, "probe_tma_rank_loads", 20.0)?;
    let got: Vec<u16> = out.to_vec().map_err(err("download"))?.iter().flat_map(|w| [*w as u16, (*w >> 16) as u16]).collect();
    let (mut at, mut problems) = (0, Vec::new());
    for (k, load) in TMA_RANK_LOADS.iter().enumerate() {
        let count = load.box_len();
        // Element `e` of the box, innermost first.
        let wrong = (0..count).filter(|&e| got[at + e] != tma_rank_value(k, load.box_element(e))).count();
        if wrong > 0 {
            problems.push(format!("rank {}: {wrong} of {count} elements differ", load.dims.len()));
        }
        at += count;
    }
    if !problems.is_empty() {
        return Err(format!("TMA loads of rank 1, 3, 4, 5: {}", problems.join("; ")));
    }
    Ok(format!("TMA loads of rank 1, 3, 4, 5: exact ({at} elements in 4 boxes)"))
}

type RankArrays = (Vec<DeviceBuffer<u16>>, Vec<DeviceBuffer<[u64; 16]>>);

/// One packed u16 array per load of `TMA_RANK_LOADS`, element `i` of array `k` = `fill(k, i)`,
/// and a tensor map of the load's shape and box over each (in device memory).
fn rank_arrays(context: &Context, fill: fn(usize, usize) -> u16) -> Res<RankArrays> {
    use hopper_kernels::probes::TMA_RANK_LOADS;
    let (mut arrays, mut maps) = (Vec::new(), Vec::new());
    for (k, load) in TMA_RANK_LOADS.iter().enumerate() {
        let data: Vec<u16> = (0..load.array_len()).map(|i| fill(k, i)).collect();
        let buffer = DeviceBuffer::from_slice(context, &data).map_err(err("upload"))?;
        let map = TensorMap::tiled(&buffer, TensorDataType::U16, load.dims, load.box_dims, TensorSwizzle::None)
            .map_err(|e| format!("cuTensorMapEncodeTiled (rank {}): {e}", load.dims.len()))?;
        maps.push(map.to_device_untracked(context).map_err(err("map upload"))?);
        arrays.push(buffer);
    }
    Ok((arrays, maps))
}

/// `probe_tma_rank_stores`: each rank's box loaded by TMA and stored back by the TMA store of
/// the same rank into an array poisoned with 0xffff: the box's elements must arrive, the rest
/// stay untouched.
fn tma_rank_stores(context: &Context, stream: &Stream, module: &Module) -> Res<String> {
    use hopper_kernels::probes::{TMA_RANK_LOADS, TMA_RANK_SHARED_BYTES, tma_rank_value};
    const UNTOUCHED: u16 = 0xffff;
    let (_sources, load_maps) = rank_arrays(context, tma_rank_value)?;
    let (destinations, store_maps) = rank_arrays(context, |_, _| UNTOUCHED)?;
    let function = module.function("probe_tma_rank_stores").map_err(err("probe_tma_rank_stores"))?;
    let mut pointers: Vec<u64> = load_maps.iter().chain(&store_maps).map(|m| m.device_ptr()).collect();
    let mut params: Vec<*mut c_void> = pointers.iter_mut().map(|p| (p as *mut u64).cast()).collect();
    // SAFETY: (l1, l3, l4, l5, s1, s3, s4, s5) as the kernel declares: load map `k` describes
    // source `k`, store map `k` destination `k` (both alive until the wait below, the
    // destinations touched by nothing else), with load `k`'s shape and box; one block of 128
    // threads with the shared memory it asks for (under 48 KiB).
    unsafe { launch(&function, stream, (1, 1), 128, TMA_RANK_SHARED_BYTES, &mut params)? };
    wait_idle(stream, "probe_tma_rank_stores", 20.0)?;
    let (mut stored, mut problems) = (0, Vec::new());
    for (k, load) in TMA_RANK_LOADS.iter().enumerate() {
        let got = destinations[k].to_vec().map_err(err("download"))?;
        let mut wrong = 0;
        for (i, &g) in got.iter().enumerate() {
            let inside = load.contains(i);
            stored += usize::from(inside);
            wrong += usize::from(g != if inside { tma_rank_value(k, i) } else { UNTOUCHED });
        }
        if wrong > 0 {
            problems.push(format!("rank {}: {wrong} of {} elements wrong", load.dims.len(), got.len()));
        }
    }
    if !problems.is_empty() {
        return Err(format!("TMA stores of rank 1, 3, 4, 5: {}", problems.join("; ")));
    }
    Ok(format!("TMA stores of rank 1, 3, 4, 5: exact ({stored} elements stored in 4 boxes, the rest untouched)"))
}

/// `probe_tma_store`: a 64x64 bf16 box written to shared memory with the 128-byte swizzle and
/// stored by one TMA store at a corner of an 80x96 array poisoned with 0xffff: the part inside
/// the array must hold the box's values (the swizzle undone), the rest stay untouched.
fn tma_store_check(context: &Context, stream: &Stream, module: &Module) -> Res<String> {
    use hopper_kernels::probes::{TMA_STORE_AT, TMA_STORE_BOX, TMA_STORE_COLS, TMA_STORE_ROWS, TMA_STORE_SHARED_BYTES, tma_store_value};
    let (rows, cols, side) = (TMA_STORE_ROWS, TMA_STORE_COLS, TMA_STORE_BOX);
    let mut array = DeviceBuffer::<bf16>::zeroed(context, (rows * cols) as usize).map_err(err("alloc"))?;
    array.fill_async(bf16::from_bits(0xffff), stream).map_err(err("poison"))?;
    let map = TensorMap::tiled_2d(&array, TensorDataType::Bf16, rows as u64, cols as u64, side, side, TensorSwizzle::B128)
        .map_err(err("store map"))?
        .to_device_untracked(context)
        .map_err(err("map upload"))?;
    let function = module.function("probe_tma_store").map_err(err("probe_tma_store"))?;
    let (mut pm, mut px, mut py) = (map.device_ptr(), TMA_STORE_AT.0, TMA_STORE_AT.1);
    let mut params: [*mut c_void; 3] = [(&mut pm as *mut u64).cast(), (&mut px as *mut i32).cast(), (&mut py as *mut i32).cast()];
    // SAFETY: (map, x, y) as the kernel declares: the map describes `array` (alive until the
    // wait below, touched by nothing else meanwhile) with a 64x64 box and the 128-byte swizzle;
    // one block of 128 threads with the shared memory it asks for (under 48 KiB).
    unsafe { launch(&function, stream, (1, 1), 128, TMA_STORE_SHARED_BYTES, &mut params)? };
    wait_idle(stream, "probe_tma_store", 20.0)?;
    let got = array.to_vec().map_err(err("download"))?;
    let (x, y) = (TMA_STORE_AT.0 as u32, TMA_STORE_AT.1 as u32);
    let (mut stored, mut wrong) = (0, 0);
    for row in 0..rows {
        for col in 0..cols {
            let inside = (y..y + side).contains(&row) && (x..x + side).contains(&col);
            let want = if inside { tma_store_value(row - y, col - x) } else { 0xffff };
            stored += usize::from(inside);
            wrong += usize::from(got[(row * cols + col) as usize].to_bits() != want);
        }
    }
    if wrong > 0 {
        return Err(format!("TMA store (2-D, 128-byte swizzle, clipped at the array's edge): {wrong} of {} elements wrong", rows * cols));
    }
    Ok(format!(
        "TMA store (2-D, 128-byte swizzle, clipped at the array's edge): exact ({stored} elements stored, {} left untouched)",
        rows * cols - stored as u32
    ))
}

/// One `wgmma` m64n64k16 with A from shared memory and one with A from registers, operands
/// stored by threads at the 128-byte-swizzled addresses (`probe_wgmma_tile`): exact results
/// (quarter-integer inputs) check the descriptor and swizzle model independently of TMA.
fn wgmma_tile(context: &Context, stream: &Stream, module: &Module) -> Res<String> {
    use hopper_kernels::probes::WGMMA_TILE_SHARED_BYTES;
    let mut rng = Rng(0x0bad_cafe);
    let mut quarter = || bf16::from_f32(((rng.next() >> 60) as f32 - 8.0) / 4.0);
    let a: Vec<bf16> = (0..64 * 16).map(|_| quarter()).collect();
    let b: Vec<bf16> = (0..64 * 16).map(|_| quarter()).collect();
    let (da, db) = (DeviceBuffer::from_slice(context, &a).map_err(err("upload"))?, DeviceBuffer::from_slice(context, &b).map_err(err("upload"))?);
    let mut ss = DeviceBuffer::<f32>::zeroed(context, 64 * 64).map_err(err("alloc"))?;
    let mut rs = DeviceBuffer::<f32>::zeroed(context, 64 * 64).map_err(err("alloc"))?;
    ss.fill_async(f32::NAN, stream).map_err(err("poison"))?;
    rs.fill_async(f32::NAN, stream).map_err(err("poison"))?;
    let function = module.function("probe_wgmma_tile").map_err(err("probe_wgmma_tile"))?;
    let (mut pa, mut pb, mut pss, mut prs) = (da.device_ptr(), db.device_ptr(), ss.device_ptr(), rs.device_ptr());
    let mut params = [(&mut pa as *mut u64).cast(), (&mut pb as *mut u64).cast(), (&mut pss as *mut u64).cast(), (&mut prs as *mut u64).cast()];
    // SAFETY: (a, b, out_ss, out_rs) as the kernel declares, with the sizes it needs; one block
    // of 128 threads.
    unsafe { launch(&function, stream, (1, 1), 128, WGMMA_TILE_SHARED_BYTES, &mut params)? };
    wait_idle(stream, "probe_wgmma_tile", 20.0)?;
    let (ss, rs) = (ss.to_vec().map_err(err("download"))?, rs.to_vec().map_err(err("download"))?);
    let mut wrong = (0, 0);
    for i in 0..64 {
        for j in 0..64 {
            let expected: f32 = (0..16).map(|k| a[i * 16 + k].to_f32() * b[j * 16 + k].to_f32()).sum();
            wrong.0 += usize::from(ss[i * 64 + j] != expected);
            wrong.1 += usize::from(rs[i * 64 + j] != expected);
        }
    }
    if wrong != (0, 0) {
        return Err(format!("wgmma tile: {} (A in shared memory) and {} (A in registers) of 4096 elements wrong", wrong.0, wrong.1));
    }
    Ok("wgmma m64n64k16 tile, A from shared memory and from registers, thread-written 128-byte swizzle: exact".into())
}

/// The data-movement probes on the GPU, each against what its instruction must produce:
/// `probe_copy16` (`ld.global.nc.v4` + `st.global.v4`), `probe_cp_async` (`cp.async.cg` +
/// commit/wait), `probe_ldmatrix` (`stmatrix` then `ldmatrix` x4 at the same rows: the
/// fragments come back unchanged) and `probe_unroll`'s `elect.sync` (one lane per warp).
fn data_movement_probes(context: &Context, stream: &Stream, module: &Module) -> Res<String> {
    const THREADS: u32 = 128;
    let mut rng = Rng(0x00c0_ffee);
    let words: Vec<u32> = (0..4 * THREADS).map(|_| rng.next() as u32).collect();
    let src = DeviceBuffer::from_slice(context, &words).map_err(err("upload"))?;
    let run = |name: &str, block: u32, shared: u32, params: &mut [*mut c_void]| -> Res<()> {
        let function = module.function(name).map_err(err(name))?;
        // SAFETY: each caller passes the parameters `name` declares, with the sizes its
        // contract asks for (see the buffers below), and one block of `block` threads.
        unsafe { launch(&function, stream, (1, 1), block, shared, params)? };
        wait_idle(stream, name, 20.0)
    };
    let mut problems = Vec::new();

    let copy = DeviceBuffer::<u32>::zeroed(context, words.len()).map_err(err("alloc"))?;
    let (mut pd, mut ps) = (copy.device_ptr(), src.device_ptr());
    run("probe_copy16", THREADS, 0, &mut [(&mut pd as *mut u64).cast(), (&mut ps as *mut u64).cast()])?;
    if copy.to_vec().map_err(err("download"))? != words {
        problems.push("probe_copy16: the copy differs from the source");
    }

    let firsts = DeviceBuffer::<u32>::zeroed(context, THREADS as usize).map_err(err("alloc"))?;
    let (mut ps, mut pd) = (src.device_ptr(), firsts.device_ptr());
    run("probe_cp_async", THREADS, 16 * THREADS, &mut [(&mut ps as *mut u64).cast(), (&mut pd as *mut u64).cast()])?;
    let expected: Vec<u32> = (0..THREADS as usize).map(|t| words[4 * t]).collect();
    if firsts.to_vec().map_err(err("download"))? != expected {
        problems.push("probe_cp_async: a thread did not read back the first word of its 16 bytes");
    }

    let fragments = DeviceBuffer::<u32>::zeroed(context, 128).map_err(err("alloc"))?;
    let mut pd = fragments.device_ptr();
    run("probe_ldmatrix", 32, 512, &mut [(&mut pd as *mut u64).cast()])?;
    let expected: Vec<u32> = (0..32u32).flat_map(|lane| [lane, lane + 32, lane + 64, lane + 96]).collect();
    if fragments.to_vec().map_err(err("download"))? != expected {
        problems.push("probe_ldmatrix: stmatrix + ldmatrix did not give the fragments back");
    }

    let out = DeviceBuffer::<f32>::zeroed(context, 32 * THREADS as usize).map_err(err("alloc"))?;
    let elected = DeviceBuffer::<u32>::zeroed(context, THREADS as usize).map_err(err("alloc"))?;
    let (mut po, mut pe, mut px, mut steps) = (out.device_ptr(), elected.device_ptr(), 0.5f32, 3u32);
    let mut params = [(&mut po as *mut u64).cast(), (&mut pe as *mut u64).cast(), (&mut px as *mut f32).cast(), (&mut steps as *mut u32).cast()];
    run("probe_unroll", THREADS, 0, &mut params)?;
    let elected = elected.to_vec().map_err(err("download"))?;
    let per_warp: Vec<u32> = elected.chunks(32).map(|warp| warp.iter().sum()).collect();
    if per_warp.iter().any(|&n| n != 1) {
        problems.push("elect.sync: not exactly one lane per warp elected");
    }
    // acc[i] after `steps` rounds of acc = acc * x + (i + step), from 0.
    let values = out.to_vec().map_err(err("download"))?;
    let expect = |i: usize| (0..3u32).fold(0.0f32, |acc, step| acc * 0.5 + (i as u32 + step) as f32);
    if (0..THREADS as usize).any(|t| (0..32).any(|i| values[32 * t + i] != expect(i))) {
        problems.push("probe_unroll: the unrolled register array has wrong values");
    }
    if problems.is_empty() {
        Ok("data movement on the GPU: copy16, cp.async (commit/wait), stmatrix+ldmatrix x4, elect.sync, unroll: all exact".into())
    } else {
        Err(problems.join("; "))
    }
}

/// Polls until `stream` is idle, at most `seconds`: a kernel that hangs is reported instead of
/// blocking the run (the process must then exit: the context cannot be used any more).
fn wait_idle(stream: &Stream, what: &str, seconds: f64) -> Res<()> {
    let start = std::time::Instant::now();
    while !stream.is_idle().map_err(err(what))? {
        if start.elapsed().as_secs_f64() > seconds {
            return Err(format!("HANG: {what} did not finish within {seconds} s"));
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    stream.synchronize().map_err(err(what))
}

/// Which ways of handing a tensor map to a kernel work on this GPU (`probe_tma_diag`; the
/// constant-memory way is printed but no longer used: the library's GEMM takes its maps from
/// global memory, one pair per call, so a process may run any number of GEMMs).
struct MapPaths {
    global: bool,
}

/// Runs `probe_tma_diag` in each mode (bounded waits: it always finishes) and prints what it saw.
fn tma_diag(context: &Context, stream: &Stream, module: &Module) -> Res<MapPaths> {
    let (rows, cols) = (256u32, 512u32);
    let mut rng = Rng(0x0000_d1a9_d1a9);
    let input: Vec<bf16> = (0..rows * cols).map(|_| rng.bf16()).collect();
    trace("diag: uploading");
    let src = DeviceBuffer::from_slice(context, &input).map_err(err("upload"))?;
    trace("diag: encoding the tensor map");
    let map = TensorMap::tiled_2d(&src, TensorDataType::Bf16, rows as u64, cols as u64, 64, 64, TensorSwizzle::None).map_err(err("cuTensorMapEncodeTiled"))?;
    let map_dev = map.to_device_untracked(context).map_err(err("map upload"))?;
    trace("diag: writing the constant-memory map");
    module.global::<[u64; 16]>("hopper_const_map_a").map_err(err("const map symbol"))?.write(&map.words()).map_err(err("const map write"))?;
    trace("diag: looking up probe_tma_diag");
    let function = module.function("probe_tma_diag").map_err(err("probe_tma_diag"))?;
    let shared = 8192 + 8 + 1024;
    function.set_max_dynamic_shared_bytes(shared).map_err(err("smem attribute"))?;
    let names = [
        "mbarrier, plain arrival",
        "TMA, map in global memory, fence .gpu",
        "TMA, map in global memory, fence .sys",
        "TMA, map in constant memory",
        "1-D bulk copy, no map",
    ];
    let mut ok = [false; 5];
    for (mode, name) in names.iter().enumerate() {
        let out = DeviceBuffer::<u32>::zeroed(context, 2048).map_err(err("alloc"))?;
        let diag = DeviceBuffer::<u64>::zeroed(context, 19).map_err(err("alloc"))?;
        let (mut pm, mut ps, mut po, mut pd, mut md) = (map_dev.device_ptr(), src.device_ptr(), out.device_ptr(), diag.device_ptr(), mode as u32);
        let mut params = [
            (&mut pm as *mut u64).cast(),
            (&mut ps as *mut u64).cast(),
            (&mut po as *mut u64).cast(),
            (&mut pd as *mut u64).cast(),
            (&mut md as *mut u32).cast(),
        ];
        trace(&format!("diag {mode}: launching"));
        // SAFETY: parameters as `probe_tma_diag` declares them, with the sizes it needs.
        unsafe { launch(&function, stream, (1, 1), 128, shared, &mut params)? };
        trace(&format!("diag {mode}: launched, waiting"));
        wait_idle(stream, &format!("probe_tma_diag mode {mode}"), 20.0)?;
        trace(&format!("diag {mode}: finished"));
        let d = diag.to_vec().map_err(err("download"))?;
        let got = out.to_vec().map_err(err("download"))?;
        let tile_ok = match mode {
            0 => true,
            4 => got.iter().enumerate().all(|(i, w)| *w == (input[2 * i].to_bits() as u32 | (input[2 * i + 1].to_bits() as u32) << 16)),
            _ => (0..64).all(|r| {
                (0..32).all(|c2| {
                    got[r * 32 + c2] == (input[r * cols as usize + 2 * c2].to_bits() as u32 | (input[r * cols as usize + 2 * c2 + 1].to_bits() as u32) << 16)
                })
            }),
        };
        let map_seen = if mode == 4 || mode == 0 {
            String::new()
        } else {
            format!(", map as the kernel reads it {}", if d[2..18] == map.words() { "= host's" } else { "DIFFERS from host's" })
        };
        ok[mode] = d[0] == 1 && tile_ok;
        println!(
            "{} diag {mode} ({name}): wait {}, barrier word {:#018x}, {} tries, data {}{map_seen}",
            if ok[mode] { "PASS" } else { "FAIL" },
            if d[0] == 1 { "completed" } else { "TIMED OUT" },
            d[1],
            d[18],
            if tile_ok { "correct" } else { "wrong" }
        );
    }
    Ok(MapPaths { global: ok[1] })
}

struct SizeResult {
    lines: Vec<String>,
    json: String,
    ok: bool,
}

#[allow(clippy::too_many_arguments)] // one call site; the arguments are the run's shared state
fn run_size(
    context: &Context,
    stream: &Stream,
    sizes_first: u32,
    twin: Option<&Module>,
    blas: &Blas,
    side: u32,
    runs: usize,
    sm_count: u32,
    paths: &MapPaths,
    sampler: &Sampler,
) -> Res<SizeResult> {
    let (m, n, k) = (side, side, side);
    if k % 8 != 0 {
        return Err(format!("size {side}: the library's GEMM needs K a multiple of 8"));
    }
    let mut lines = Vec::new();
    let mut ok = true;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ side as u64);
    let a_host: Vec<bf16> = (0..m as usize * k as usize).map(|_| rng.bf16()).collect();
    let b_host: Vec<bf16> = (0..n as usize * k as usize).map(|_| rng.bf16()).collect();
    let a = DeviceBuffer::from_slice(context, &a_host).map_err(err("upload A"))?;
    let b = DeviceBuffer::from_slice(context, &b_host).map_err(err("upload B"))?;
    let mut c = DeviceBuffer::<bf16>::zeroed(context, m as usize * n as usize).map_err(err("alloc C"))?;
    let mut c_ref = DeviceBuffer::<bf16>::zeroed(context, m as usize * n as usize).map_err(err("alloc C ref"))?;
    let tiles = m.div_ceil(BM) * n.div_ceil(BN);
    let grid = tiles.min(sm_count);
    let flop = 2.0 * m as f64 * n as f64 * k as f64;
    if !paths.global {
        return Err("tensor maps in global memory do not work here (see the diag lines): the GEMM cannot run".into());
    }
    // `library`: the per-call form (maps built and copied per call, the table's schedule);
    // every other name: the engine's cached maps with that schedule.
    let mut kernels: Vec<&str> = vec!["library"];
    kernels.extend(picked_schedules().map(|(name, _)| *name));
    let engine = GemmEngine::new(stream).map_err(err("GemmEngine"))?;
    if side == sizes_first {
        let (store4, store3) = (store_shared_bytes(STORE_STAGES), store_shared_bytes(STORE3_STAGES));
        for (name, function, shared) in [
            ("gemm_bf16_tn", gemm_bf16_tn::function(context), SHARED_BYTES),
            ("gemm_bf16_tn_cluster2", gemm_bf16_tn_cluster2::function(context), SHARED_BYTES),
            ("gemm_bf16_tn_store", gemm_bf16_tn_store::function(context), store4),
            ("gemm_bf16_tn_store_cluster2", gemm_bf16_tn_store_cluster2::function(context), store4),
            ("gemm_bf16_tn_store3", gemm_bf16_tn_store3::function(context), store3),
            ("gemm_bf16_tn_store3_cluster2", gemm_bf16_tn_store3_cluster2::function(context), store3),
        ] {
            let function = function.map_err(err(name))?;
            function.set_max_dynamic_shared_bytes(shared).map_err(err("smem attribute"))?;
            let attributes = function.attributes().map_err(err("attributes"))?;
            lines.push(format!(
                "{name} (library kernel): {} registers at entry (setmaxnreg 24/240 at run time), {} B local, {shared} B dynamic smem, {THREADS} threads",
                attributes.registers, attributes.local_bytes,
            ));
        }
        lines
            .push(format!("grids at {side}^3: {}", picked_schedules().map(|(n, s)| format!("{n} {}", s.grid(tiles, sm_count))).collect::<Vec<_>>().join(", ")));
    }
    // The CUDA C++ twin: raw maps in global memory (its parameters: A map, B map, C, m, n, k);
    // it needs whole tiles.
    let whole_tiles = m % BM == 0 && n % BN == 0 && k % BK == 0;
    let (twin_a, twin_b) = if whole_tiles {
        let a_raw = TensorMap::tiled_2d(&a, TensorDataType::Bf16, m as u64, k as u64, BM, BK, TensorSwizzle::B128)
            .map_err(err("A map"))?
            .to_device_untracked(context)
            .map_err(err("A map upload"))?;
        let b_raw = TensorMap::tiled_2d(&b, TensorDataType::Bf16, n as u64, k as u64, BN, BK, TensorSwizzle::B128)
            .map_err(err("B map"))?
            .to_device_untracked(context)
            .map_err(err("B map upload"))?;
        (Some(a_raw), Some(b_raw))
    } else {
        (None, None)
    };
    let mut twin_function = None;
    if let (Some(twin), true) = (twin, whole_tiles) {
        let function = twin.function(TWIN_KERNEL).map_err(err(TWIN_KERNEL))?;
        function.set_max_dynamic_shared_bytes(SHARED_BYTES).map_err(err("smem attribute"))?;
        let attributes = function.attributes().map_err(err("attributes"))?;
        if side == sizes_first {
            lines.push(format!(
                "{TWIN_KERNEL} (CUDA C++, NVRTC): {} registers at entry, {} B local, {} B dynamic smem, {THREADS} threads, grid {grid}",
                attributes.registers, attributes.local_bytes, SHARED_BYTES
            ));
        }
        kernels.push(TWIN_KERNEL);
        twin_function = Some(function);
    }
    let ours = |name: &str, c: &mut DeviceBuffer<bf16>| -> Res<()> {
        match name {
            "library" => hopper_gemm_bf16(stream, &a, &b, c, m as usize, n as usize, k as usize).map_err(err("hopper_gemm_bf16")),
            name if name != TWIN_KERNEL => {
                let schedule = SCHEDULES.iter().find(|(n, _)| *n == name).expect("a listed schedule").1;
                engine.hopper_gemm_bf16_with(schedule, &a, &b, c, m as usize, n as usize, k as usize).map_err(err("GemmEngine::hopper_gemm_bf16_with"))
            }
            _ => {
                let (Some(function), Some(a_raw), Some(b_raw)) = (&twin_function, &twin_a, &twin_b) else { unreachable!("the twin runs on whole tiles") };
                let (mut pa, mut pb, mut pc, mut pm, mut pn, mut pk) = (a_raw.device_ptr(), b_raw.device_ptr(), c.device_ptr(), m, n, k);
                let mut params: [*mut c_void; 6] = [
                    (&mut pa as *mut u64).cast(),
                    (&mut pb as *mut u64).cast(),
                    (&mut pc as *mut u64).cast(),
                    (&mut pm as *mut u32).cast(),
                    (&mut pn as *mut u32).cast(),
                    (&mut pk as *mut u32).cast(),
                ];
                // SAFETY: the twin's six parameters (bench/hopper/cuda/gemm_bf16_tn.cu): the maps
                // describe A (m x k) and B (n x k) with its boxes and swizzle, C holds m*n bf16,
                // the shape is a multiple of the tile (checked above); one stream, synchronised
                // before every host access, orders the buffers.
                unsafe { launch(function, stream, (grid, 1), THREADS, SHARED_BYTES, &mut params) }
            }
        }
    };

    // Correctness of each variant: poison, run once, compare.
    blas.gemm_tn(&a, &b, &mut c_ref, m as i32, n as i32, k as i32)?;
    stream.synchronize().map_err(err("cuBLAS"))?;
    let reference = c_ref.to_vec().map_err(err("download C ref"))?;
    for name in &kernels {
        eprintln!("checking {name} at {side}^3 ...");
        c.fill_async(bf16::from_bits(0x7fc1), stream).map_err(err("poison C"))?;
        ours(name, &mut c)?;
        wait_idle(stream, name, 20.0)?;
        let got = c.to_vec().map_err(err("download C"))?;
        // Sampled host reference in f64.
        let mut worst = 0.0f64;
        let mut failures = 0;
        let mut pick = Rng(0x5151_5151 ^ side as u64);
        for _ in 0..2048 {
            let i = (pick.next() % m as u64) as usize;
            let j = (pick.next() % n as u64) as usize;
            let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
            for kk in 0..k as usize {
                let product = a_host[i * k as usize + kk].to_f32() as f64 * b_host[j * k as usize + kk].to_f32() as f64;
                exact += product;
                magnitude += product.abs();
            }
            let value = got[i * n as usize + j].to_f32() as f64;
            let bound = exact.abs() / 256.0 + magnitude / 65536.0;
            let error = (value - exact).abs();
            if error.is_nan() || error > bound {
                failures += 1;
            }
            worst = worst.max(error / bound);
        }
        // Whole matrix against cuBLAS (every element written, no NaN).
        let (mut diff2, mut ref2, mut nans, mut max_diff) = (0.0f64, 0.0f64, 0usize, 0.0f64);
        for (x, y) in got.iter().zip(&reference) {
            let (x, y) = (x.to_f32() as f64, y.to_f32() as f64);
            if x.is_nan() {
                nans += 1;
                continue;
            }
            diff2 += (x - y) * (x - y);
            ref2 += y * y;
            max_diff = max_diff.max((x - y).abs());
        }
        let rel = (diff2 / ref2).sqrt();
        let passed = failures == 0 && nans == 0 && rel < 1e-2;
        ok &= passed;
        lines.push(format!(
            "{side}^3 {name}: {} (sampled 2048 vs f64: {failures} outside bound, worst error/bound {worst:.3}; vs cuBLAS: rel Frobenius {rel:.2e}, max |diff| {max_diff:.3e}, {nans} NaN/unwritten)",
            if passed { "PASS" } else { "FAIL" }
        ));
    }

    // Timing, interleaved: ours (both variants) and cuBLAS, run by run.
    eprintln!("timing {side}^3 ({runs} runs + 3 warm-ups per implementation) ...");
    let (start, end) = (Event::new(context).map_err(err("event"))?, Event::new(context).map_err(err("event"))?);
    let ours_count = kernels.len();
    let mut times = vec![Vec::new(); ours_count + 1];
    for round in 0..runs + 3 {
        for (i, slot) in times.iter_mut().enumerate() {
            start.record(stream).map_err(err("record"))?;
            if i < ours_count {
                ours(kernels[i], &mut c)?;
            } else {
                blas.gemm_tn(&a, &b, &mut c_ref, m as i32, n as i32, k as i32)?;
            }
            end.record(stream).map_err(err("record"))?;
            end.synchronize().map_err(err("kernel"))?;
            if round >= 3 {
                slot.push(start.elapsed_ms(&end).map_err(err("elapsed"))? as f64);
            }
        }
    }
    let medians: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    let spread: Vec<f64> = times.iter().map(|t| (t[t.len() - 1] - t[0]) / t[t.len() / 2] * 100.0).collect();
    let cublas_tflops = flop / (medians[ours_count] * 1e-3) / 1e12;
    let mut json = format!("{{\"size\": {side}, \"cublas_ms\": {:.4}, \"cublas_tflops\": {cublas_tflops:.1}", medians[ours_count]);
    lines.push(format!(
        "{side}^3 cuBLAS (cublasGemmEx bf16, f32 compute): {:.3} ms, {cublas_tflops:.1} TFLOP/s (min..max spread {:.1}%)",
        medians[ours_count], spread[ours_count]
    ));
    for (i, name) in kernels.iter().enumerate() {
        let tflops = flop / (medians[i] * 1e-3) / 1e12;
        lines.push(format!(
            "{side}^3 {name}: {:.3} ms, {tflops:.1} TFLOP/s = {:.1}% of cuBLAS (spread {:.1}%)",
            medians[i],
            100.0 * tflops / cublas_tflops,
            spread[i]
        ));
        json += &format!(", \"{name}_ms\": {:.4}, \"{name}_tflops\": {tflops:.1}", medians[i]);
    }
    let position = |name: &str| kernels.iter().position(|k| *k == name);
    if let (Some(rust), Some(cpp)) = (position("plain"), position(TWIN_KERNEL)) {
        let ratio = medians[cpp] / medians[rust];
        lines.push(format!("{side}^3 Rust gemm_bf16_tn (plain) / CUDA C++ {TWIN_KERNEL}: {ratio:.3}x (the C++ time over the Rust time; > 1: Rust faster)"));
        json += &format!(", \"rust_over_cpp\": {ratio:.4}");
    }

    // Steady state, as cuBLAS users time it: `BATCH` launches back to back between one pair of
    // events (no synchronisation between them), the time per launch; median over `runs / 2`
    // (at least 5) batches, implementations interleaved batch by batch after one warm-up batch.
    const BATCH: usize = 20;
    let batches = (runs / 2).max(5);
    eprintln!("timing {side}^3 in steady state ({batches} batches of {BATCH} back-to-back launches per implementation) ...");
    let mut steady = vec![Vec::new(); ours_count + 1];
    for round in 0..batches + 1 {
        for (i, slot) in steady.iter_mut().enumerate() {
            start.record(stream).map_err(err("record"))?;
            for _ in 0..BATCH {
                if i < ours_count {
                    ours(kernels[i], &mut c)?;
                } else {
                    blas.gemm_tn(&a, &b, &mut c_ref, m as i32, n as i32, k as i32)?;
                }
            }
            end.record(stream).map_err(err("record"))?;
            end.synchronize().map_err(err("kernel"))?;
            if round >= 1 {
                slot.push(start.elapsed_ms(&end).map_err(err("elapsed"))? as f64 / BATCH as f64);
            }
        }
    }
    let steady_medians: Vec<f64> = steady.iter_mut().map(|t| median(t)).collect();
    let steady_spread: Vec<f64> = steady.iter().map(|t| (t[t.len() - 1] - t[0]) / t[t.len() / 2] * 100.0).collect();
    let cublas_steady = flop / (steady_medians[ours_count] * 1e-3) / 1e12;
    lines.push(format!(
        "{side}^3 steady state ({BATCH} back-to-back launches per event pair) cuBLAS: {:.3} ms, {cublas_steady:.1} TFLOP/s (spread {:.1}%)",
        steady_medians[ours_count], steady_spread[ours_count]
    ));
    json += &format!(", \"steady_batch\": {BATCH}, \"cublas_steady_tflops\": {cublas_steady:.1}");
    for (i, name) in kernels.iter().enumerate() {
        let tflops = flop / (steady_medians[i] * 1e-3) / 1e12;
        lines.push(format!(
            "{side}^3 steady state {name}: {:.3} ms, {tflops:.1} TFLOP/s = {:.1}% of cuBLAS (spread {:.1}%)",
            steady_medians[i],
            100.0 * tflops / cublas_steady,
            steady_spread[i]
        ));
        json += &format!(", \"{name}_steady_tflops\": {tflops:.1}");
    }

    // Burst and sustained (issue 31): published GEMM figures are bursts after an idle GPU
    // (fast.cu's harness: 20 back-to-back launches after 1 s idle), a training run is
    // sustained (400 back-to-back launches per event pair, after the burst). The SM clock and
    // power come from `nvidia-smi` sampling every 50 ms during the whole run (`Sampler`): the
    // median of the samples inside each window (or the first after its start, for windows
    // shorter than a sample), beside its figure.
    for (i, name) in kernels.iter().copied().chain(["cuBLAS"]).enumerate() {
        if name == TWIN_KERNEL {
            continue;
        }
        for (mode, launches) in [("burst", 20usize), ("sustained", 400)] {
            stream.synchronize().map_err(err("sync"))?;
            if mode == "burst" {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            let from = std::time::Instant::now();
            start.record(stream).map_err(err("record"))?;
            for _ in 0..launches {
                if i < ours_count {
                    ours(kernels[i], &mut c)?;
                } else {
                    blas.gemm_tn(&a, &b, &mut c_ref, m as i32, n as i32, k as i32)?;
                }
            }
            end.record(stream).map_err(err("record"))?;
            end.synchronize().map_err(err("kernel"))?;
            let to = std::time::Instant::now();
            let ms = start.elapsed_ms(&end).map_err(err("elapsed"))? as f64 / launches as f64;
            let (clocks, clock_json) = sampler.window(from, to);
            let tflops = flop / (ms * 1e-3) / 1e12;
            lines.push(format!("{side}^3 {mode} ({launches} launches) {name}: {ms:.4} ms, {tflops:.1} TFLOP/s; during it: {clocks}"));
            json += &format!(", \"{name}_{mode}_tflops\": {tflops:.1}, \"{name}_{mode}_clock\": {clock_json}");
        }
    }
    if let Some(maps) = Some(engine.tensor_maps_built()) {
        lines.push(format!(
            "{side}^3 GemmEngine: {maps} tensor maps built for all the engine's calls at this size (cached after the first call per schedule's boxes)"
        ));
    }
    json += "}";
    Ok(SizeResult { lines, json, ok })
}

/// `nvidia-smi` sampling the SM clock and power of GPU 0 every 50 ms in the background for the
/// whole run (`--query-gpu=clocks.sm,power.draw.instant -lms 50`), each sample stamped on
/// arrival.
struct Sampler {
    child: Option<std::process::Child>,
    samples: std::sync::Arc<std::sync::Mutex<Vec<(std::time::Instant, f64, f64)>>>,
}

impl Sampler {
    /// Starts `nvidia-smi` (a sampler without samples when it cannot start). Power is
    /// `power.draw.instant`: on recent drivers `power.draw` is a one-second average, which
    /// blurs windows shorter than a second with the idle time before them (session 13's run
    /// read 150-330 W that way); drivers without the field fall back to `power.draw`.
    fn start() -> Sampler {
        use std::io::BufRead;
        let samples = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let parse = |line: &str| {
            let mut fields = line.split(',').map(|f| f.trim().parse::<f64>());
            match (fields.next(), fields.next()) {
                (Some(Ok(clock)), Some(Ok(power))) => Some((clock, power)),
                _ => None,
            }
        };
        for field in ["power.draw.instant", "power.draw"] {
            let query = format!("--query-gpu=clocks.sm,{field}");
            let child = std::process::Command::new("nvidia-smi")
                .args([query.as_str(), "--format=csv,noheader,nounits", "-lms", "50", "-i", "0"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn();
            let mut child = match child {
                Ok(child) => child,
                Err(why) => {
                    println!("nvidia-smi sampler unavailable: {why}");
                    return Sampler { child: None, samples };
                }
            };
            let mut lines = std::io::BufReader::new(child.stdout.take().expect("piped")).lines();
            // The first line tells whether this field is known.
            let Some(first) = lines.next().and_then(Result::ok).and_then(|line| parse(&line)) else {
                let _ = child.kill();
                let _ = child.wait();
                continue;
            };
            println!("nvidia-smi sampler: clocks.sm and {field} every 50 ms");
            samples.lock().unwrap().push((std::time::Instant::now(), first.0, first.1));
            let sink = samples.clone();
            std::thread::spawn(move || {
                for (clock, power) in lines.map_while(Result::ok).filter_map(|line| parse(&line)) {
                    sink.lock().unwrap().push((std::time::Instant::now(), clock, power));
                }
            });
            // Let a few samples arrive before the first window.
            std::thread::sleep(std::time::Duration::from_millis(300));
            return Sampler { child: Some(child), samples };
        }
        println!("nvidia-smi sampler: no usable query (clocks.sm with power.draw.instant or power.draw)");
        Sampler { child: None, samples }
    }

    /// The SM clock and power during `from..to` as text and as JSON: medians (and ranges) of
    /// the samples inside (plus 60 ms of arrival delay), or the first sample after `from` when
    /// the window is shorter than a sample.
    fn window(&self, from: std::time::Instant, to: std::time::Instant) -> (String, String) {
        let samples = self.samples.lock().unwrap();
        let late = std::time::Duration::from_millis(60);
        let mut inside: Vec<(f64, f64)> = samples.iter().filter(|(t, _, _)| *t >= from && *t <= to + late).map(|&(_, c, p)| (c, p)).collect();
        let note = if inside.is_empty() {
            inside.extend(samples.iter().find(|(t, _, _)| *t >= from).map(|&(_, c, p)| (c, p)));
            "first sample after the start"
        } else {
            "samples inside"
        };
        if inside.is_empty() {
            return ("no nvidia-smi sample".into(), "null".into());
        }
        let mut clocks: Vec<f64> = inside.iter().map(|s| s.0).collect();
        let mut powers: Vec<f64> = inside.iter().map(|s| s.1).collect();
        let (count, c_lo, c_hi) = (clocks.len(), clocks.iter().copied().fold(f64::MAX, f64::min), clocks.iter().copied().fold(0.0, f64::max));
        let (clock, power) = (median(&mut clocks), median(&mut powers));
        (
            format!("SM clock {clock:.0} MHz ({c_lo:.0}..{c_hi:.0}), power {power:.0} W ({count} {note})"),
            format!("{{\"sm_mhz\": {clock:.0}, \"power_w\": {power:.0}, \"samples\": {count}}}"),
        )
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Prints a check's outcome as a `PASS` or `FAIL` line; true when it passed.
fn report(outcome: Res<String>) -> bool {
    match outcome {
        Ok(line) => {
            println!("PASS {line}");
            true
        }
        Err(why) => {
            println!("FAIL {why}");
            false
        }
    }
}

fn run() -> Res<bool> {
    let mut sizes = vec![4096u32, 8192];
    let mut runs = 20usize;
    let mut json_path = "hopper-gemm.json".to_string();
    let mut twin_cubin_path = "hopper-gemm-twin.cubin".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--sizes" => sizes = value.split(',').map(|s| s.trim().parse().map_err(|_| format!("bad size {s}"))).collect::<Res<_>>()?,
            "--runs" => runs = value.parse().map_err(|_| "--runs takes a number".to_string())?,
            "--json" => json_path = value,
            "--twin-cubin" => twin_cubin_path = value,
            "--schedules" => {
                let picked: Vec<&'static str> = value
                    .split(',')
                    .map(|name| SCHEDULES.iter().find(|(n, _)| *n == name.trim()).map(|(n, _)| *n).ok_or_else(|| format!("unknown schedule {name}")))
                    .collect::<Res<_>>()?;
                PICKED.set(picked).map_err(|_| "--schedules given twice".to_string())?;
            }
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: hopper-gemm [--sizes 4096,8192] [--runs 20] [--json FILE] [--twin-cubin FILE] [--schedules a,b,...]"
                ));
            }
        }
    }
    let context = Context::primary(0).map_err(err("opening GPU 0"))?;
    let device = context.device();
    let arch = device.arch().map_err(err("arch"))?;
    let sm_count = device.multiprocessor_count().map_err(err("SM count"))?;
    println!("device: {} (sm_{arch}, {sm_count} SMs)", device.name().map_err(err("name"))?);
    if arch != 90 {
        return Err(format!("these kernels are built for sm_90a (H100/H200); this GPU is sm_{arch}"));
    }
    println!("kernels: built by {}", hopper_kernels::KERNELS.toolchain);
    for &ferrocuda_host::KernelResources { arch, kernel, registers, spill_stores, spill_loads, stack_frame: stack, .. } in hopper_kernels::KERNELS.resources {
        println!("ptxas (sm_{arch}a): {kernel}: {registers} registers, {spill_stores} B spill stores, {spill_loads} B spill loads, {stack} B stack");
    }
    // `unsafe` (and the allow) because the host crate's next API makes module loading unsafe:
    // SAFETY: the image is this crate's own build (ptxas output, embedded unaltered); its
    // kernels are launched only through `launch` with the parameter lists they declare.
    trace("loading the module");
    // `hopper_const_map_a` is `.const` data the probes only read through its address (never
    // folded): the host writes the tensor map into it, which needs its name (session 23).
    let options = JitOptions::new().host_writable_globals(["hopper_const_map_a"]);
    #[allow(unused_unsafe)]
    let module = unsafe {
        match hopper_kernels::KERNELS.cubins.iter().find(|(a, _)| *a == 90) {
            Some((_, image)) => Module::load_binary(&context, "hopper_kernels", image, &options),
            None => Module::load_ptx(&context, "hopper_kernels", hopper_kernels::KERNELS.ptx[0].1, &options),
        }
    }
    .map_err(err("loading the kernels"))?;
    trace("module loaded");
    let stream = Stream::non_blocking(&context).map_err(err("stream"))?;
    trace("stream created");
    let mut ok = true;
    let paths = tma_diag(&context, &stream, &module)?;
    if paths.global {
        ok &= report(tma_round_trip(&context, &stream, &module));
        ok &= report(tma_rank_loads(&context, &stream, &module));
        ok &= report(tma_rank_stores(&context, &stream, &module));
        ok &= report(tma_store_check(&context, &stream, &module));
    } else {
        println!("FAIL tensor maps in global memory do not work here (diag 1): the global-memory variants are skipped");
        ok = false;
    }
    ok &= report(wgmma_tile(&context, &stream, &module));
    ok &= report(data_movement_probes(&context, &stream, &module));
    trace("compiling the CUDA C++ twin with NVRTC");
    // SAFETY: the twin's one kernel is launched only by `run_size`, with the six parameters
    // its source declares (the same as `gemm_bf16_tn`'s).
    let twin = match unsafe { nvrtc::compile(&context, "bench/hopper/cuda/gemm_bf16_tn.cu", TWIN_SOURCE, "sm_90a") } {
        Ok(compiled) => {
            println!("CUDA C++ twin: compiled by NVRTC {} for sm_90a in {:.0} ms", compiled.version, compiled.compile_ms);
            match std::fs::write(&twin_cubin_path, &compiled.cubin) {
                Ok(()) => println!("CUDA C++ twin: cubin written to {twin_cubin_path}"),
                Err(why) => println!("CUDA C++ twin: cubin not written to {twin_cubin_path}: {why}"),
            }
            Some(compiled.module)
        }
        Err(nvrtc::Unavailable::NoLibrary) => {
            println!("SKIP CUDA C++ twin: {}", nvrtc::Unavailable::NoLibrary);
            None
        }
        Err(why) => {
            println!("FAIL CUDA C++ twin: {why}");
            ok = false;
            None
        }
    };
    eprintln!("TMA round trip, TMA ranks, wgmma tile and data-movement probes done; creating the cuBLAS handle ...");
    let blas = Blas::new(&stream)?;
    let sampler = Sampler::start();
    let mut json = Vec::new();
    let sizes_first = sizes.first().copied().unwrap_or(0);
    for side in sizes {
        let result = run_size(&context, &stream, sizes_first, twin.as_ref(), &blas, side, runs, sm_count, &paths, &sampler)?;
        for line in &result.lines {
            println!("{line}");
        }
        ok &= result.ok;
        json.push(result.json);
    }
    drop(blas);
    std::fs::write(&json_path, format!("[{}]\n", json.join(",\n"))).map_err(err("writing JSON"))?;
    println!("JSON written to {json_path}");
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            println!("hopper-gemm: a check FAILED");
            ExitCode::FAILURE
        }
        Err(why) => {
            eprintln!("hopper-gemm failed: {why}");
            ExitCode::FAILURE
        }
    }
}
