//! Cache hints on global loads and stores: CUDA's `__ldcs`, `__ldcg`, `__ldca`, `__ldlu`,
//! `__stcs`, `__stcg`, `__stwt`, the L1 eviction priorities and the L2 cache policies of
//! `createpolicy` (CUDA's `cuda::annotated_ptr` / `__ldg` with a policy).
//!
//! ```ignore
//! use ferrocuda_device::cache::{self, Load, Store};
//! // Read once, write once: keep the streams from evicting what the kernel reuses.
//! let v = cache::load(&x[i.get()], Load::Streaming);          // __ldcs: ld.global.cs
//! cache::store(&mut out[i], v * 2.0, Store::Streaming);        // __stcs: st.global.cs
//! ```
//!
//! | CUDA | here | PTX | SASS (sm_90; nvcc's for the CUDA name) | what the cache does |
//! | --- | --- | --- | --- | --- |
//! | `v = x[i]` (`float4`), `__ldg(p)` | `vector::load16(&x[i])` (16 bytes), `x[i]` | `ld.global.nc` on an input, else `ld.global` | `LDG.E.128.CONSTANT` / `LDG.E.128` | the default: L1 and L2, weak |
//! | `__ldca(p)` | `load(r, Load::CacheAll)` | `ld.global.ca` | `LDG.E.128.STRONG.SM` | L1 and L2, but a *strong* (SM-scope) load: not the default |
//! | `__ldcg(p)` | `load(r, Load::CacheGlobal)` | `ld.global.cg` | `LDG.E.128.STRONG.GPU` | L2 only, bypass L1 (strong, GPU scope) |
//! | `__ldcs(p)` | `load(r, Load::Streaming)` | `ld.global.cs` | `LDG.E.EF.128` | evict first: data read once |
//! | `__ldlu(p)` | `load(r, Load::LastUse)` | `ld.global.lu` | `LDG.E.LU.128` | last use (on global memory: as `.cs`) |
//! | `ld.global.L1::evict_first` | `load(r, Load::EvictFirst)` | same | | L1 evicts this line first |
//! | `ld.global.L1::evict_last` | `load(r, Load::EvictLast)` | same | | L1 keeps this line longest |
//! | `ld.global.L1::no_allocate` | `load(r, Load::NoAllocate)` | same | | not cached in L1 |
//! | `__stwb(p, v)` | `*r = v`, `vector::store16(r, v)` | `st.global` | `STG.E.128` | write back (the default) |
//! | `__stcg(p, v)` | `store(r, v, Store::CacheGlobal)` | `st.global.cg` | | L2 only |
//! | `__stcs(p, v)` | `store(r, v, Store::Streaming)` | `st.global.cs` | `STG.E.EF.128` | evict first |
//! | `__stwt(p, v)` | `store(r, v, Store::WriteThrough)` | `st.global.wt` | | write through to memory |
//! | `createpolicy` + `ld.global.L2::cache_hint` | `load_with_policy(r, CachePolicy::evict_last())` | same (sm_80) | | L2 keeps (or drops first) the line |
//!
//! The SASS column is pinned by `p30_5_cache_operators_compile_to_what_nvcc_gives_their_cuda_names`
//! (tests/port_patterns_ptx.rs) against nvcc's (bench/results/cache-operators-nvcc.txt). A
//! plain load wants no hint at all: `Load::CacheAll` is CUDA's `__ldca`, which on sm_70 and
//! newer is a strong load, not the default one.
//!
//! # Safety by construction
//!
//! The safe functions take a reference, `&T` for loads (an input element: `&x[i]`) and
//! `&mut T` for stores (an output element: `&mut out[i]` of a `DisjointSlice`), so the
//! element is valid, aligned and not written by anyone else, exactly as for a plain access.
//! One more thing needs proving: the hinted instructions name the global state space, and a
//! reference may also point at a local or shared variable (where `.cs` means "last use" and
//! may drop the line). Each call therefore asks LLVM whether the address is global
//! (`llvm.nvvm.isspacep.global`) and falls back to a plain access when not. For a slice that
//! is a kernel parameter LLVM knows the answer, so the test folds away: the PTX is the one
//! hinted instruction, as nvcc's (checked by `tests/port_gaps_ptx.rs`). The `unsafe`
//! [`load_global`]/[`store_global`] skip the test for pointers you know are global.
//!
//! Element types: any `bytemuck::Pod` of 2, 4, 8 or 16 bytes aligned to its size (`f32`,
//! `u64`, a `#[repr(C, align(16))]` `Float4`, ...); 16-byte ones move as one `.v4.b32`
//! access. Other sizes fail to compile.
//!
//! On the CPU executor the hints are plain reads and writes (there is no cache to steer).

use bytemuck::Pod;

/// A cache hint for a load (see the module docs' table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// `ld.global.ca` (`__ldca`): cache in all levels, as a strong SM-scope load
    /// (`LDG.E.STRONG.SM`, as nvcc compiles `__ldca`). Not the default load: for that, index
    /// (`x[i]`) or use [`vector::load16`](crate::vector::load16).
    CacheAll,
    /// `ld.global.cg` (`__ldcg`): cache in L2, not L1 (`LDG.E.STRONG.GPU`).
    CacheGlobal,
    /// `ld.global.cs` (`__ldcs`): streaming, likely read once (evict-first).
    Streaming,
    /// `ld.global.lu` (`__ldlu`): last use.
    LastUse,
    /// `ld.global.L1::evict_first`.
    EvictFirst,
    /// `ld.global.L1::evict_last`.
    EvictLast,
    /// `ld.global.L1::no_allocate`.
    NoAllocate,
}

/// A cache hint for a store (see the module docs' table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// `st.global.cg` (`__stcg`): cache in L2, not L1.
    CacheGlobal,
    /// `st.global.cs` (`__stcs`): streaming, likely accessed once (evict-first).
    Streaming,
    /// `st.global.wt` (`__stwt`): write through to system memory.
    WriteThrough,
    /// `st.global.L1::evict_first`.
    EvictFirst,
    /// `st.global.L1::evict_last`.
    EvictLast,
    /// `st.global.L1::no_allocate`.
    NoAllocate,
}

/// An L2 cache policy (`createpolicy`, a 64-bit descriptor), for [`load_with_policy`] and
/// [`store_with_policy`]: what L2 does with the lines those accesses touch. Needs sm_80.
#[derive(Debug, Clone, Copy)]
pub struct CachePolicy(u64);

macro_rules! policy {
    ($(#[$doc:meta])* $name:ident, $ptx:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() -> CachePolicy
        where
            crate::arch::Target: crate::arch::Sm80,
        {
            #[cfg(target_arch = "nvptx64")]
            {
                let policy: u64;
                // SAFETY: computes a descriptor; no memory access.
                unsafe { core::arch::asm!(concat!("createpolicy.fractional.", $ptx, ".b64 {p}, 1.0;"), p = out(reg64) policy, options(pure, nomem, nostack)) };
                CachePolicy(policy)
            }
            #[cfg(not(target_arch = "nvptx64"))]
            CachePolicy(0)
        }
    };
}

impl CachePolicy {
    policy!(
        /// L2 keeps these lines longest (`L2::evict_last`): data reused by later accesses or
        /// kernels (weights, a lookup table) while a stream passes by.
        evict_last,
        "L2::evict_last"
    );
    policy!(
        /// L2 evicts these lines first (`L2::evict_first`): data used once.
        evict_first,
        "L2::evict_first"
    );
    policy!(
        /// The normal policy (`L2::evict_normal`).
        evict_normal,
        "L2::evict_normal"
    );
    policy!(
        /// Leave the lines' priority as it is (`L2::evict_unchanged`).
        evict_unchanged,
        "L2::evict_unchanged"
    );

    /// The 64-bit descriptor (for inline PTX).
    pub fn descriptor(self) -> u64 {
        self.0
    }
}

/// Whether `T` can be moved by one hinted access: 2, 4, 8 or 16 bytes, aligned to its size.
const fn supported<T>() -> bool {
    let (size, align) = (core::mem::size_of::<T>(), core::mem::align_of::<T>());
    matches!(size, 2 | 4 | 8 | 16) && align >= size
}

/// The compile-time check of [`supported`], with the message a user sees.
macro_rules! check_element {
    ($t:ty) => {
        const { assert!(supported::<$t>(), "cache hints move 2, 4, 8 or 16-byte elements aligned to their size (use a #[repr(C, align(16))] type for 16 bytes)") }
    };
}

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    /// LLVM's `isspacep.global`: folded to `true` where LLVM knows the address space (kernel
    /// parameters), one `isspacep` otherwise.
    #[link_name = "llvm.nvvm.isspacep.global"]
    fn isspacep_global(pointer: *const u8) -> bool;
}

/// Whether `pointer` is in the global state space (always on the host: host memory stands
/// for global memory there).
#[inline(always)]
fn is_global<T>(pointer: *const T) -> bool {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a query about an address; nothing is accessed.
    unsafe {
        isspacep_global(pointer.cast())
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = pointer;
        true
    }
}

/// `*src` with the hint `hint` (see the module docs): safe for any reference, the hint applied
/// where `src` is in global memory.
#[inline(always)]
pub fn load<T: Pod>(src: &T, hint: Load) -> T {
    check_element!(T);
    if is_global(src) {
        // SAFETY: a reference is valid, aligned and not written during its life; the address
        // is global (checked above).
        unsafe { load_global(src, hint) }
    } else {
        *src
    }
}

/// `*dst = value` with the hint `hint` (see the module docs): safe for any exclusive
/// reference, such as an output element `&mut out[i]`.
#[inline(always)]
pub fn store<T: Pod>(dst: &mut T, value: T, hint: Store) {
    check_element!(T);
    if is_global(dst) {
        // SAFETY: an exclusive reference is valid and aligned, and no one else accesses the
        // element; the address is global (checked above).
        unsafe { store_global(dst, value, hint) }
    } else {
        *dst = value;
    }
}

/// Asks for the line holding `*src` to be brought into L2 (`prefetch.global.L2`) so that a
/// later load of it waits for L2, not DRAM: a kernel that walks rows can start the next row's
/// traffic before the block reductions of this one, with no register to hold it. A hint: it
/// returns nothing, cannot fault, and does nothing outside global memory or on the CPU.
#[inline(always)]
pub fn prefetch_l2<T: Pod>(src: &T) {
    if is_global(src) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: a prefetch reads nothing into the program and writes nothing; the address is
        // a live reference's, in global memory (checked above).
        unsafe {
            core::arch::asm!("prefetch.global.L2 [{p}];", p = in(reg64) src as *const T, options(nostack, readonly, preserves_flags))
        };
    }
}

/// `*src` through L2 policy `policy` (`ld.global.L2::cache_hint`; sm_80).
#[inline(always)]
pub fn load_with_policy<T: Pod>(src: &T, policy: CachePolicy) -> T {
    check_element!(T);
    if is_global(src) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: as in `load`; `policy` exists only where `createpolicy` does (sm_80).
        return unsafe { raw::load_policy(src, policy.0) };
    }
    let _ = policy;
    *src
}

/// `*dst = value` through L2 policy `policy` (`st.global.L2::cache_hint`; sm_80).
#[inline(always)]
pub fn store_with_policy<T: Pod>(dst: &mut T, value: T, policy: CachePolicy) {
    check_element!(T);
    if is_global(dst) {
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: as in `store`.
            unsafe { raw::store_policy(dst, value, policy.0) };
            return;
        }
    }
    let _ = policy;
    *dst = value;
}

/// `*src` with `hint`, without the state-space test: CUDA's `__ldcs(p)` and friends exactly.
///
/// # Safety
/// `src` points to a `T` in global memory (a device allocation), aligned, readable, and not
/// written by any thread while this load may run.
#[inline(always)]
pub unsafe fn load_global<T: Pod>(src: *const T, hint: Load) -> T {
    check_element!(T);
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        raw::load(src, hint)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = hint;
        crate::cpu::hooks::check_global_alignment(src as usize, core::mem::size_of::<T>(), "ld.global (cache::load_global)");
        // SAFETY: the caller's contract.
        unsafe { src.read() }
    }
}

/// `*dst = value` with `hint`, without the state-space test: CUDA's `__stcs(p, v)` and friends.
///
/// # Safety
/// `dst` points to a `T` in global memory, aligned, writable, and accessed by no other thread
/// while this store may run.
#[inline(always)]
pub unsafe fn store_global<T: Pod>(dst: *mut T, value: T, hint: Store) {
    check_element!(T);
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        raw::store(dst, value, hint)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = hint;
        crate::cpu::hooks::check_global_alignment(dst as usize, core::mem::size_of::<T>(), "st.global (cache::store_global)");
        // SAFETY: the caller's contract.
        unsafe { dst.write(value) }
    }
}

/// The instructions: one `asm!` per hint and width, selected by a `match` on constants that
/// folds away when inlined.
#[cfg(target_arch = "nvptx64")]
mod raw {
    use super::{Load, Store};

    /// Reads `T` from the bits of a same-sized integer (`T: Pod`, sizes checked by the caller).
    #[inline(always)]
    unsafe fn from_bits<B: Copy, T: Copy>(bits: B) -> T {
        // SAFETY: the caller matched the sizes; every bit pattern is a valid `T` (Pod).
        unsafe { core::mem::transmute_copy::<B, T>(&bits) }
    }

    macro_rules! load_width {
        ($p:expr, $op:literal, $size:expr) => {
            match $size {
                2 => {
                    let r: u16;
                    core::arch::asm!(concat!("ld.global", $op, ".b16 {r}, [{p}];"), r = out(reg16) r, p = in(reg64) $p, options(nostack, readonly, pure, preserves_flags));
                    from_bits(r)
                }
                4 => {
                    let r: u32;
                    core::arch::asm!(concat!("ld.global", $op, ".b32 {r}, [{p}];"), r = out(reg32) r, p = in(reg64) $p, options(nostack, readonly, pure, preserves_flags));
                    from_bits(r)
                }
                8 => {
                    let r: u64;
                    core::arch::asm!(concat!("ld.global", $op, ".b64 {r}, [{p}];"), r = out(reg64) r, p = in(reg64) $p, options(nostack, readonly, pure, preserves_flags));
                    from_bits(r)
                }
                _ => {
                    let (a, b, c, d): (u32, u32, u32, u32);
                    core::arch::asm!(concat!("ld.global", $op, ".v4.b32 {{{a}, {b}, {c}, {d}}}, [{p}];"), a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
                        p = in(reg64) $p, options(nostack, readonly, pure, preserves_flags));
                    from_bits([a, b, c, d])
                }
            }
        };
    }

    macro_rules! store_width {
        ($p:expr, $v:expr, $op:literal, $size:expr) => {
            match $size {
                2 => core::arch::asm!(concat!("st.global", $op, ".b16 [{p}], {v};"), v = in(reg16) from_bits::<_, u16>($v), p = in(reg64) $p, options(nostack, preserves_flags)),
                4 => core::arch::asm!(concat!("st.global", $op, ".b32 [{p}], {v};"), v = in(reg32) from_bits::<_, u32>($v), p = in(reg64) $p, options(nostack, preserves_flags)),
                8 => core::arch::asm!(concat!("st.global", $op, ".b64 [{p}], {v};"), v = in(reg64) from_bits::<_, u64>($v), p = in(reg64) $p, options(nostack, preserves_flags)),
                _ => {
                    let [a, b, c, d]: [u32; 4] = from_bits($v);
                    core::arch::asm!(concat!("st.global", $op, ".v4.b32 [{p}], {{{a}, {b}, {c}, {d}}};"), a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, d = in(reg32) d,
                        p = in(reg64) $p, options(nostack, preserves_flags))
                }
            }
        };
    }

    /// # Safety
    /// As [`super::load_global`]; `T` is 2, 4, 8 or 16 bytes aligned to its size.
    #[inline(always)]
    pub(super) unsafe fn load<T: Copy>(src: *const T, hint: Load) -> T {
        let size = core::mem::size_of::<T>();
        // SAFETY: the caller's contract; the width matches `T`'s size.
        unsafe {
            match hint {
                Load::CacheAll => load_width!(src, ".ca", size),
                Load::CacheGlobal => load_width!(src, ".cg", size),
                Load::Streaming => load_width!(src, ".cs", size),
                Load::LastUse => load_width!(src, ".lu", size),
                Load::EvictFirst => load_width!(src, ".L1::evict_first", size),
                Load::EvictLast => load_width!(src, ".L1::evict_last", size),
                Load::NoAllocate => load_width!(src, ".L1::no_allocate", size),
            }
        }
    }

    /// # Safety
    /// As [`super::store_global`]; `T` as for [`load`].
    #[inline(always)]
    pub(super) unsafe fn store<T: Copy>(dst: *mut T, value: T, hint: Store) {
        let size = core::mem::size_of::<T>();
        // SAFETY: the caller's contract; the width matches `T`'s size.
        unsafe {
            match hint {
                Store::CacheGlobal => store_width!(dst, value, ".cg", size),
                Store::Streaming => store_width!(dst, value, ".cs", size),
                Store::WriteThrough => store_width!(dst, value, ".wt", size),
                Store::EvictFirst => store_width!(dst, value, ".L1::evict_first", size),
                Store::EvictLast => store_width!(dst, value, ".L1::evict_last", size),
                Store::NoAllocate => store_width!(dst, value, ".L1::no_allocate", size),
            }
        }
    }

    /// # Safety
    /// As [`load`], and `policy` came from `createpolicy`.
    #[inline(always)]
    pub(super) unsafe fn load_policy<T: Copy>(src: *const T, policy: u64) -> T {
        let size = core::mem::size_of::<T>();
        // SAFETY: the caller's contract.
        unsafe {
            match size {
                2 => {
                    let r: u16;
                    core::arch::asm!("ld.global.L2::cache_hint.b16 {r}, [{p}], {c};", r = out(reg16) r, p = in(reg64) src, c = in(reg64) policy, options(nostack, readonly, pure));
                    from_bits(r)
                }
                4 => {
                    let r: u32;
                    core::arch::asm!("ld.global.L2::cache_hint.b32 {r}, [{p}], {c};", r = out(reg32) r, p = in(reg64) src, c = in(reg64) policy, options(nostack, readonly, pure));
                    from_bits(r)
                }
                8 => {
                    let r: u64;
                    core::arch::asm!("ld.global.L2::cache_hint.b64 {r}, [{p}], {c};", r = out(reg64) r, p = in(reg64) src, c = in(reg64) policy, options(nostack, readonly, pure));
                    from_bits(r)
                }
                _ => {
                    let (a, b, c, d): (u32, u32, u32, u32);
                    core::arch::asm!("ld.global.L2::cache_hint.v4.b32 {{{a}, {b}, {c}, {d}}}, [{p}], {q};", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
                        p = in(reg64) src, q = in(reg64) policy, options(nostack, readonly, pure));
                    from_bits([a, b, c, d])
                }
            }
        }
    }

    /// # Safety
    /// As [`store`], and `policy` came from `createpolicy`.
    #[inline(always)]
    pub(super) unsafe fn store_policy<T: Copy>(dst: *mut T, value: T, policy: u64) {
        let size = core::mem::size_of::<T>();
        // SAFETY: the caller's contract.
        unsafe {
            match size {
                2 => {
                    core::arch::asm!("st.global.L2::cache_hint.b16 [{p}], {v}, {c};", v = in(reg16) from_bits::<_, u16>(value), p = in(reg64) dst, c = in(reg64) policy, options(nostack))
                }
                4 => {
                    core::arch::asm!("st.global.L2::cache_hint.b32 [{p}], {v}, {c};", v = in(reg32) from_bits::<_, u32>(value), p = in(reg64) dst, c = in(reg64) policy, options(nostack))
                }
                8 => {
                    core::arch::asm!("st.global.L2::cache_hint.b64 [{p}], {v}, {c};", v = in(reg64) from_bits::<_, u64>(value), p = in(reg64) dst, c = in(reg64) policy, options(nostack))
                }
                _ => {
                    let [a, b, c, d]: [u32; 4] = from_bits(value);
                    core::arch::asm!("st.global.L2::cache_hint.v4.b32 [{p}], {{{a}, {b}, {c}, {d}}}, {q};", a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, d = in(reg32) d,
                        p = in(reg64) dst, q = in(reg64) policy, options(nostack))
                }
            }
        }
    }
}
