//! 8-byte packs: four `bf16`/`f16` in one 8-byte aligned plain-data type, vLLM's `vec_n_t<T,
//! 4>` of 16-bit floats (its 8-byte stores of four `bf16`, `uint2`, `float2`-sized accesses).
//!
//! The half of [`pack16`](crate::pack16) for kernels that move 8 bytes a thread: each pack moves
//! in one 64-bit access ([`load`](Bf16x4::load): `ld.global.nc.b64` on a kernel's input slice,
//! `LDG.E.64.CONSTANT`; [`store`](Bf16x4::store): `st.global.b64`, `STG.E.64`), and converts to
//! and from `f32` in pairs (`cvt.rn.bf16x2.f32`, nvcc's `F2FP.BF16.F32.PACK_AB`).
//!
//! ```
//! use ferrocuda_device::half::bf16;
//! use ferrocuda_device::pack8::Bf16x4;
//! let v = Bf16x4::from_f32s([1.5, -2.0, 0.25, 3.0]);
//! assert_eq!(v.to_f32s(), [1.5, -2.0, 0.25, 3.0]);
//! assert_eq!(v.get(1), bf16::from_f32(-2.0));
//! ```

use crate::half::{Bf16x2, F16x2, bf16, f16};

/// The unit of the packs' accesses: one 64-bit integer, so that a load or store is one 8-byte
/// access whatever LLVM's vectoriser proves.
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Word8(u64);

macro_rules! half_pack8 {
    ($(#[$doc:meta])* $name:ident, $pair:ident, $elem:ident) => {
        $(#[$doc])*
        ///
        /// Element `i` is at byte `2 i` (the low half of pair `i / 2` when `i` is even).
        #[repr(C, align(8))]
        #[derive(Clone, Copy, Default, Debug, bytemuck::Pod, bytemuck::Zeroable, crate::LayoutKey)]
        pub struct $name(pub [$pair; 2]);

        impl $name {
            /// The packs of `values` (host code), or `None` when `values.len()` is not a
            /// multiple of 4.
            #[cfg(not(target_arch = "nvptx64"))]
            pub fn collect(values: &[$elem]) -> Option<Vec<Self>> {
                let (packs, rest) = values.as_chunks::<4>();
                rest.is_empty().then(|| packs.iter().map(|p| bytemuck::cast::<[$elem; 4], Self>(*p)).collect())
            }

            /// The packs' values in memory order, as one slice (no copy).
            #[inline(always)]
            pub fn elements(packs: &[Self]) -> &[$elem] {
                bytemuck::cast_slice(packs)
            }

            /// `*src` in one 8-byte load: `ld.global.nc.b64` on an element of a kernel's input
            /// slice (`LDG.E.64.CONSTANT`), the plain 8-byte load of the state space otherwise.
            #[inline(always)]
            pub fn load(src: &Self) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: `src` is a valid, 8-byte aligned pack of 8 bytes, readable as one
                    // `Word8`; every bit pattern is a valid pack.
                    bytemuck::cast(unsafe { (src as *const Self).cast::<Word8>().read() }.0)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    *src
                }
            }

            /// Writes `self` to `*dst` in one 8-byte store (`st.global.b64`, `STG.E.64`).
            #[inline(always)]
            pub fn store(self, dst: &mut Self) {
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: `dst` is a valid, exclusive, 8-byte aligned pack of 8 bytes.
                    unsafe { (dst as *mut Self).cast::<Word8>().write(Word8(bytemuck::cast(self))) };
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    *dst = self;
                }
            }

            /// From two pairs (element `2 k` is `pairs[k].lo()`).
            #[inline(always)]
            pub const fn from_pairs(pairs: [$pair; 2]) -> Self {
                $name(pairs)
            }

            /// The two pairs, for packed arithmetic.
            #[inline(always)]
            pub const fn pairs(self) -> [$pair; 2] {
                self.0
            }

            /// From four values in memory order.
            #[inline(always)]
            pub fn from_array(values: [$elem; 4]) -> Self {
                bytemuck::cast(values)
            }

            /// The four values in memory order.
            #[inline(always)]
            pub fn to_array(self) -> [$elem; 4] {
                bytemuck::cast(self)
            }

            /// All four values `value`.
            #[inline(always)]
            pub const fn splat(value: $elem) -> Self {
                $name([$pair::splat(value); 2])
            }

            /// Element `i` (`i < 4`; panics otherwise, as an array index does).
            #[inline(always)]
            pub fn get(self, i: usize) -> $elem {
                let pair = self.0[i / 2];
                if i % 2 == 0 { pair.lo() } else { pair.hi() }
            }

            /// The four values widened to `f32` (exact), in memory order.
            #[inline(always)]
            pub fn to_f32s(self) -> [f32; 4] {
                let (a, b) = self.0[0].to_f32s();
                let (c, d) = self.0[1].to_f32s();
                [a, b, c, d]
            }

            /// Four `f32` rounded to nearest even in pairs (`cvt.rn.bf16x2.f32` /
            /// `cvt.rn.f16x2.f32`, nvcc's `F2FP.*.PACK_AB`; software below sm_80 for bf16).
            #[inline(always)]
            pub fn from_f32s(values: [f32; 4]) -> Self {
                $name([$pair::from_f32s(values[0], values[1]), $pair::from_f32s(values[2], values[3])])
            }
        }
    };
}

half_pack8!(
    /// Four `bf16` in one 8-byte aligned pack: vLLM's `vec_n_t<c10::BFloat16, 4>`, two
    /// [`Bf16x2`].
    Bf16x4,
    Bf16x2,
    bf16
);

half_pack8!(
    /// Four `f16` in one 8-byte aligned pack (`vec_n_t<c10::Half, 4>`), two [`F16x2`].
    F16x4,
    F16x2,
    f16
);
