//! cuBLASLt matmuls with fused epilogues (bias, ReLU, GELU) on ferrocuda buffers.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::marker::PhantomData;

use cudarc::cublaslt::sys as lt;

use super::gemm::{self, Compute, ElementType, Gemm, GemmElement, GemmOutput, MatrixLayout};
use crate::context::Handle;
use crate::error::{Error, Result};
use crate::memory::DeviceBuffer;
use crate::memory::view::{DeviceRead, DeviceWrite, SliceArg};
use crate::stream::Stream;

/// The workspace each [`CublasLt`] handle owns: 32 MiB, what NVIDIA recommends for Hopper.
pub const WORKSPACE_BYTES: usize = 32 << 20;

/// At most this many cached plans (descriptors and the chosen algorithm) per handle; beyond
/// it the cache starts over, so a program cycling through many shapes does not grow forever.
const MAX_PLANS: usize = 256;

/// What cuBLASLt applies to `alpha · op(a) · op(b) + beta · c` before writing `c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EpilogueKind {
    /// Nothing (`CUBLASLT_EPILOGUE_DEFAULT`).
    None,
    /// `max(x, 0)`.
    Relu,
    /// GELU, tanh approximation: `0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))`.
    Gelu,
    /// `x + bias[row]`.
    Bias,
    /// `max(x + bias[row], 0)`.
    BiasRelu,
    /// `gelu(x + bias[row])`.
    BiasGelu,
}

impl EpilogueKind {
    /// True when the epilogue reads a bias vector.
    pub fn has_bias(self) -> bool {
        matches!(self, EpilogueKind::Bias | EpilogueKind::BiasRelu | EpilogueKind::BiasGelu)
    }

    fn raw(self) -> lt::cublasLtEpilogue_t {
        use lt::cublasLtEpilogue_t as E;
        match self {
            EpilogueKind::None => E::CUBLASLT_EPILOGUE_DEFAULT,
            EpilogueKind::Relu => E::CUBLASLT_EPILOGUE_RELU,
            EpilogueKind::Gelu => E::CUBLASLT_EPILOGUE_GELU,
            EpilogueKind::Bias => E::CUBLASLT_EPILOGUE_BIAS,
            EpilogueKind::BiasRelu => E::CUBLASLT_EPILOGUE_RELU_BIAS,
            EpilogueKind::BiasGelu => E::CUBLASLT_EPILOGUE_GELU_BIAS,
        }
    }
}

/// The epilogue of a [`CublasLt::matmul`], with its bias vector (device memory of the output
/// type, one value per row of `c`, read by the matmul and declared so).
pub struct Epilogue<'a, T> {
    kind: EpilogueKind,
    bias: Option<SliceArg<'a>>,
    _bias: PhantomData<&'a [T]>,
}

impl<'a, T> Epilogue<'a, T> {
    /// No epilogue: a plain matmul.
    pub fn none() -> Self {
        Epilogue { kind: EpilogueKind::None, bias: None, _bias: PhantomData }
    }

    /// ReLU.
    pub fn relu() -> Self {
        Epilogue { kind: EpilogueKind::Relu, bias: None, _bias: PhantomData }
    }

    /// GELU (tanh approximation).
    pub fn gelu() -> Self {
        Epilogue { kind: EpilogueKind::Gelu, bias: None, _bias: PhantomData }
    }

    /// Adds `bias[row]` to every column (`bias` holds at least `m` values).
    pub fn bias(bias: &'a (impl DeviceRead<T> + ?Sized)) -> Self {
        Epilogue { kind: EpilogueKind::Bias, bias: Some(bias.kernel_arg()), _bias: PhantomData }
    }

    /// Bias, then ReLU.
    pub fn bias_relu(bias: &'a (impl DeviceRead<T> + ?Sized)) -> Self {
        Epilogue { kind: EpilogueKind::BiasRelu, bias: Some(bias.kernel_arg()), _bias: PhantomData }
    }

    /// Bias, then GELU (tanh approximation).
    pub fn bias_gelu(bias: &'a (impl DeviceRead<T> + ?Sized)) -> Self {
        Epilogue { kind: EpilogueKind::BiasGelu, bias: Some(bias.kernel_arg()), _bias: PhantomData }
    }

    /// Which epilogue.
    pub fn kind(&self) -> EpilogueKind {
        self.kind
    }
}

impl<T> std::fmt::Debug for Epilogue<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epilogue").field("kind", &self.kind).field("bias_len", &self.bias.map(|b| b.len)).finish()
    }
}

fn check(call: &'static str, status: lt::cublasStatus_t) -> Result<()> {
    if status == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS { Ok(()) } else { Err(Error::Library { library: "cuBLASLt", call, status: format!("{status:?}") }) }
}

/// What selects a cached plan: everything the descriptors and the heuristic depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PlanKey {
    types: (ElementType, ElementType),
    compute: Compute,
    layouts: [MatrixLayout; 3],
    epilogue: EpilogueKind,
    /// The alignment (bytes, at most 256) of the `a`, `b`, `c` pointers: algorithms that need
    /// more are excluded by the heuristic's preference.
    alignments: [u32; 3],
}

/// The descriptors of one matmul and the algorithm the heuristic chose for it.
struct Plan {
    desc: lt::cublasLtMatmulDesc_t,
    layouts: [lt::cublasLtMatrixLayout_t; 3],
    algo: lt::cublasLtMatmulAlgo_t,
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: each was created by `Plan::new` (or is null) and is destroyed once; these are
        // host-side descriptors (cuBLASLt copies what it needs at each call).
        unsafe {
            for layout in self.layouts {
                if !layout.is_null() {
                    lt::cublasLtMatrixLayoutDestroy(layout);
                }
            }
            if !self.desc.is_null() {
                lt::cublasLtMatmulDescDestroy(self.desc);
            }
        }
    }
}

/// A preference descriptor, destroyed on every path.
struct Preference(lt::cublasLtMatmulPreference_t);

impl Drop for Preference {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: created by `cublasLtMatmulPreferenceCreate`, destroyed once.
            unsafe { lt::cublasLtMatmulPreferenceDestroy(self.0) };
        }
    }
}

/// Sets a descriptor attribute from a plain value.
fn set<T>(call: &'static str, value: &T, setter: impl FnOnce(*const c_void, usize) -> lt::cublasStatus_t) -> Result<()> {
    check(call, setter((value as *const T).cast(), std::mem::size_of::<T>()))
}

fn lt_type(ty: ElementType) -> lt::cudaDataType {
    match ty {
        ElementType::F32 => lt::cudaDataType::CUDA_R_32F,
        ElementType::F16 => lt::cudaDataType::CUDA_R_16F,
        ElementType::Bf16 => lt::cudaDataType::CUDA_R_16BF,
    }
}

/// The largest power of two (at most 256) dividing a device address.
fn alignment(ptr: u64) -> u32 {
    if ptr == 0 { 256 } else { 1u32 << ptr.trailing_zeros().min(8) }
}

impl Plan {
    fn new(handle: lt::cublasLtHandle_t, key: &PlanKey) -> Result<Plan> {
        let mut plan = Plan { desc: std::ptr::null_mut(), layouts: [std::ptr::null_mut(); 3], algo: lt::cublasLtMatmulAlgo_t { data: [0; 8] } };
        let compute = match key.compute {
            Compute::F32 => lt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            Compute::Tf32 => lt::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        };
        let (ty_in, ty_out) = (lt_type(key.types.0), lt_type(key.types.1));
        // SAFETY: writes one handle, owned by `plan` (destroyed in its Drop).
        check("cublasLtMatmulDescCreate", unsafe { lt::cublasLtMatmulDescCreate(&mut plan.desc, compute, lt::cudaDataType::CUDA_R_32F) })?;
        let desc = plan.desc;
        use lt::cublasLtMatmulDescAttributes_t as D;
        // SAFETY (each `set` below): the attribute's documented type and size are passed.
        let attribute = |attr: D| move |ptr: *const c_void, size: usize| unsafe { lt::cublasLtMatmulDescSetAttribute(desc, attr, ptr, size) };
        let op = |t: bool| if t { 1i32 } else { 0i32 }; // CUBLAS_OP_T / CUBLAS_OP_N (int32)
        set("cublasLtMatmulDescSetAttribute(TRANSA)", &op(key.layouts[0].transpose), attribute(D::CUBLASLT_MATMUL_DESC_TRANSA))?;
        set("cublasLtMatmulDescSetAttribute(TRANSB)", &op(key.layouts[1].transpose), attribute(D::CUBLASLT_MATMUL_DESC_TRANSB))?;
        set("cublasLtMatmulDescSetAttribute(EPILOGUE)", &(key.epilogue.raw() as u32), attribute(D::CUBLASLT_MATMUL_DESC_EPILOGUE))?;
        if key.epilogue.has_bias() {
            set("cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)", &(ty_out as i32), attribute(D::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE))?;
        }
        for (i, (layout, ty)) in key.layouts.iter().zip([ty_in, ty_in, ty_out]).enumerate() {
            // SAFETY: writes one handle, owned by `plan`; the sizes were checked by `Gemm`.
            check("cublasLtMatrixLayoutCreate", unsafe {
                lt::cublasLtMatrixLayoutCreate(&mut plan.layouts[i], ty, layout.rows as u64, layout.cols as u64, layout.ld as i64)
            })?;
        }
        let mut preference = Preference(std::ptr::null_mut());
        // SAFETY: writes one handle, destroyed by `Preference`'s Drop.
        check("cublasLtMatmulPreferenceCreate", unsafe { lt::cublasLtMatmulPreferenceCreate(&mut preference.0) })?;
        let pref = preference.0;
        use lt::cublasLtMatmulPreferenceAttributes_t as P;
        // SAFETY (each `set` below): the attribute's documented type (uint64 / uint32).
        let pref_attribute = |attr: P| move |ptr: *const c_void, size: usize| unsafe { lt::cublasLtMatmulPreferenceSetAttribute(pref, attr, ptr, size) };
        set(
            "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)",
            &(WORKSPACE_BYTES as u64),
            pref_attribute(P::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES),
        )?;
        let [align_a, align_b, align_c] = key.alignments;
        for (attr, align) in [
            (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a),
            (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b),
            (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c),
            (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c),
        ] {
            set("cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)", &align, pref_attribute(attr))?;
        }
        // SAFETY: an all-zero heuristic result is a valid value of this plain C struct.
        let mut result: lt::cublasLtMatmulHeuristicResult_t = unsafe { std::mem::zeroed() };
        let mut found = 0;
        let [la, lb, lc] = plan.layouts;
        // SAFETY: every descriptor is alive; writes at most one result and one count.
        let status = unsafe { lt::cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, lc, lc, pref, 1, &mut result, &mut found) };
        if status == lt::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED || (status == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS && found == 0) {
            return Err(Error::InvalidGemm {
                problem: format!(
                    "cuBLASLt has no algorithm for {:?} inputs -> {:?} output with epilogue {:?} ({:?} compute, layouts {:?}, pointer alignments {:?} bytes); \
                     try Cublas::gemm, another epilogue or 16-byte-aligned buffers",
                    key.types.0, key.types.1, key.epilogue, key.compute, key.layouts, key.alignments
                ),
            });
        }
        check("cublasLtMatmulAlgoGetHeuristic", status)?;
        check("cublasLtMatmulAlgoGetHeuristic (result)", result.state)?;
        if result.workspaceSize > WORKSPACE_BYTES {
            return Err(Error::Library {
                library: "cuBLASLt",
                call: "cublasLtMatmulAlgoGetHeuristic",
                status: "an algorithm needing more workspace than allowed".into(),
            });
        }
        plan.algo = result.algo;
        Ok(plan)
    }
}

/// A cuBLASLt handle whose matmuls go to one stream, with its own workspace (a device buffer
/// used on that stream only, declared as written by every matmul) and a cache of plans: the
/// descriptors and the algorithm the heuristic chose, per shape, types, epilogue and pointer
/// alignment.
///
/// `Send` but not `Sync` (the plan cache is a `RefCell`): one thread at a time queues through
/// it, so the workspace is never declared by two threads at once.
pub struct CublasLt {
    handle: lt::cublasLtHandle_t,
    stream: Stream,
    workspace: DeviceBuffer<u8>,
    plans: RefCell<HashMap<PlanKey, Plan>>,
}

// SAFETY: the cuBLASLt handle and descriptors may move between threads (they are used from one
// thread at a time: the type is not `Sync`).
unsafe impl Send for CublasLt {}

impl CublasLt {
    /// True when libcublasLt can be loaded.
    pub fn is_available() -> bool {
        crate::loader::library_present(crate::loader::CudaLibrary::CublasLt)
    }

    /// A handle whose matmuls are queued on `stream`, with a [`WORKSPACE_BYTES`] workspace in
    /// `stream`'s context; [`Error::LibraryUnavailable`] when libcublasLt cannot be loaded.
    pub fn new(stream: &Stream) -> Result<Self> {
        if !Self::is_available() {
            return Err(Error::LibraryUnavailable { library: "cuBLASLt (libcublasLt)" });
        }
        let _bound = stream.context().bind()?;
        // cuBLASLt loads its kernels into the context, which may wait for its work (E2).
        stream.context().refuse_after_timeout(|| "CublasLt::new (cublasLtCreate)".to_string())?;
        let workspace = DeviceBuffer::<u8>::zeroed(stream.context(), WORKSPACE_BYTES)?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: writes one handle, destroyed in Drop.
        check("cublasLtCreate", unsafe { lt::cublasLtCreate(&mut handle) })?;
        Ok(CublasLt { handle, stream: stream.clone(), workspace, plans: RefCell::new(HashMap::new()) })
    }

    /// The stream the handle's work goes to.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// How many plans are cached (one per distinct shape, types, epilogue and alignment).
    pub fn cached_plans(&self) -> usize {
        self.plans.borrow().len()
    }

    /// Queues `c = epilogue(alpha · op(a) · op(b) + beta · c)` with `cublasLtMatmul`, where the
    /// epilogue may add a bias vector (`bias[row]`, at least `m` values of the output type) and
    /// apply ReLU or GELU. The algorithm comes from cuBLASLt's heuristic, asked once per shape
    /// (types, layouts, epilogue, pointer alignment) and cached.
    ///
    /// Fails with [`Error::InvalidGemm`] when a buffer is too short for its layout, the bias is
    /// shorter than `m` or not 16-byte aligned, the GEMM is batched (use [`Cublas::gemm`](crate::Cublas::gemm)),
    /// or cuBLASLt has no algorithm for the combination; [`Error::Library`] when cuBLASLt
    /// refuses the call.
    #[allow(clippy::too_many_arguments)]
    pub fn matmul<In: GemmElement, Out: GemmOutput<In>>(
        &self,
        gemm: &Gemm<In, Out>,
        epilogue: Epilogue<'_, Out>,
        alpha: f32,
        a: &(impl DeviceRead<In> + ?Sized),
        b: &(impl DeviceRead<In> + ?Sized),
        beta: f32,
        c: &mut (impl DeviceWrite<Out> + ?Sized),
    ) -> Result<()> {
        let (a, b, c) = (a.kernel_arg(), b.kernel_arg(), c.kernel_arg_mut());
        gemm.check_lengths(a.len, b.len, c.len)?;
        if gemm.batch().is_some() {
            return Err(Error::InvalidGemm { problem: "CublasLt::matmul takes unbatched GEMMs; run a strided batch with Cublas::gemm".into() });
        }
        let (m, _, _) = gemm.shape();
        if let Some(bias) = epilogue.bias {
            if bias.len < m {
                return Err(Error::InvalidGemm { problem: format!("the bias holds {} values but c has {m} rows (one bias value per row)", bias.len) });
            }
            if bias.ptr % 16 != 0 && m > 0 {
                return Err(Error::InvalidGemm {
                    problem: format!(
                        "the bias starts at {:#x}, not 16-byte aligned: pass a whole buffer or a view starting at a multiple of 16 bytes",
                        bias.ptr
                    ),
                });
            }
        }
        if gemm.is_empty() {
            return Ok(());
        }
        let key = PlanKey {
            types: (In::TYPE, Out::TYPE),
            compute: gemm.compute(),
            layouts: gemm.layouts(),
            epilogue: epilogue.kind,
            alignments: [alignment(a.ptr), alignment(b.ptr), alignment(c.ptr)],
        };
        gemm::to_i32("m", m)?; // checked by Gemm::new
        let mut plans = self.plans.borrow_mut();
        if !plans.contains_key(&key) {
            if plans.len() >= MAX_PLANS {
                plans.clear();
            }
            // Bound for the heuristic query (session 22's audit of the calls that relied on a
            // primary context staying current after an earlier bind: none may now).
            let plan = {
                let _bound = self.stream.context().bind()?;
                Plan::new(self.handle, &key)?
            };
            plans.insert(key, plan);
        }
        let plan = &plans[&key];
        if let Some(bias) = epilogue.bias {
            let pointer = bias.ptr as *const c_void;
            // SAFETY: the attribute is a device pointer (8 bytes); cuBLASLt reads it at the call.
            set("cublasLtMatmulDescSetAttribute(BIAS_POINTER)", &pointer, |ptr, size| unsafe {
                lt::cublasLtMatmulDescSetAttribute(plan.desc, lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER, ptr, size)
            })?;
        }
        let workspace = self.workspace.kernel_arg();
        // SAFETY: the workspace is this handle's own, and the handle is `Send`, not `Sync`: no
        // other code declares work on it while this matmul is declared and queued.
        let workspace_write = unsafe { workspace.write_shared("cuBLASLt workspace") };
        let mut accesses = [a.read("a"), b.read("b"), c.write("c"), workspace_write, workspace_write];
        let declared = match epilogue.bias {
            Some(bias) => {
                accesses[4] = bias.read("bias");
                5
            }
            None => 4,
        };
        let (alpha, beta) = ((&alpha as *const f32).cast::<c_void>(), (&beta as *const f32).cast::<c_void>());
        let (pa, pb, pc) = (a.ptr as *const c_void, b.ptr as *const c_void, c.ptr as *mut c_void);
        let (handle, desc, [la, lb, lc], algo) = (self.handle, plan.desc, plan.layouts, &plan.algo);
        let workspace_ptr = workspace.ptr as *mut c_void;
        // SAFETY: the layouts' elements lie within `a`, `b`, `c` (checked above), the bias holds
        // `m` values and is 16-byte aligned, the algorithm was chosen for these pointers'
        // alignment and at most WORKSPACE_BYTES of workspace; every buffer is in the stream's
        // context (the door refused others) and stays allocated until this work is done (their
        // release waits for this stream). `c` is exclusive (C and D are the same matrix, which
        // cuBLASLt allows in place); the workspace is used by this handle's stream alone (and
        // declared written, so even another stream would be ordered). alpha/beta are host f32
        // values (the descriptor's default host pointer mode, f32 scale type).
        self.stream.enqueue("cublasLtMatmul", &accesses[..declared], |stream| {
            check("cublasLtMatmul", unsafe {
                lt::cublasLtMatmul(
                    handle,
                    desc,
                    alpha,
                    pa,
                    la,
                    pb,
                    lb,
                    beta,
                    pc,
                    lc,
                    pc,
                    lc,
                    algo,
                    workspace_ptr,
                    WORKSPACE_BYTES,
                    stream.get() as lt::cudaStream_t,
                )
            })
        })
    }
}

impl Drop for CublasLt {
    fn drop(&mut self) {
        let parts = Handle((self.handle, std::mem::take(self.plans.get_mut())));
        self.stream.context().release(crate::context::Released::CublasLt, move |context| {
            let (handle, plans) = parts.into_inner();
            drop(plans);
            // As `Cublas`'s drop (F12-2): no destroy that may wait for the device after a
            // reported timeout.
            if !crate::memory::leaks::may_release("cuBLASLt handle", context.timed_out(), "cublasLtDestroy (it may wait for the whole device)") {
                return;
            }
            if let Ok(_bound) = context.bind() {
                // SAFETY: created in `new`, destroyed once; queued matmuls still complete (the
                // workspace's release waits for the stream).
                unsafe { lt::cublasLtDestroy(handle) };
            }
        });
    }
}

impl std::fmt::Debug for CublasLt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CublasLt").field("handle", &self.handle).field("stream", &self.stream).field("cached_plans", &self.cached_plans()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_is_the_largest_power_of_two_up_to_256() {
        assert_eq!(alignment(0x7f00_0000_0000), 256);
        assert_eq!(alignment(0x7f00_0000_0002), 2);
        assert_eq!(alignment(0x7f00_0000_0010), 16);
        assert_eq!(alignment(0x7f00_0000_0080), 128);
    }

    #[test]
    fn only_bias_epilogues_have_a_bias() {
        let kinds = [EpilogueKind::None, EpilogueKind::Relu, EpilogueKind::Gelu, EpilogueKind::Bias, EpilogueKind::BiasRelu, EpilogueKind::BiasGelu];
        assert_eq!(kinds.map(EpilogueKind::has_bias), [false, false, false, true, true, true]);
        assert_eq!(Epilogue::<f32>::gelu().kind(), EpilogueKind::Gelu);
    }
}
