//! 16-byte packs: eight `bf16`/`f16`, sixteen `i8`/`u8`, four `f32` in one 16-byte aligned
//! plain-data type, CUDA's `float4`/`int4` and llm.c's `x128`/`f128`, vLLM's `vec_n_t<T, 16 /
//! sizeof(T)>`.
//!
//! Why: every port of a vectorised CUDA kernel defined its own (issue 30's seventh port: an
//! `X128`, a `Bf16x8` and an `I8x16` in two crates, each with its `Pod`, `LayoutKey` and
//! widening helpers). These are the library's, usable as kernel slice and output elements
//! (`&[Bf16x8]`, `DisjointSlice<I8x16, BlockRows>`), moved in one 128-bit access by
//! [`load`](Bf16x8::load)/[`store`](Bf16x8::store) (which are [`vector::load16`] and
//! [`vector::store16`]: `LDG.E.128`, `.CONSTANT` on a kernel's input slice).
//!
//! Register pressure: [`to_f32s`](Bf16x8::to_f32s) widens all eight values at once (eight
//! registers where the pack took four). Where a kernel holds two packs or more, work pair by
//! pair ([`pairs`](Bf16x8::pairs), [`Bf16x2`]'s arithmetic): the seventh port's static int8
//! quantiser took 38 registers with two packs widened up front, one 1024-thread block per SM
//! (0.62x nvcc), and 31 registers pair by pair (docs/performance.md, "registers and
//! occupancy").
//!
//! ```
//! use ferrocuda_device::half::bf16;
//! use ferrocuda_device::pack16::Bf16x8;
//! let v = Bf16x8::from_array([bf16::from_f32(1.5); 8]);
//! assert_eq!(v.get(7).to_f32(), 1.5);
//! assert_eq!(Bf16x8::from_f32s(v.to_f32s()).to_words(), v.to_words());
//! ```

use crate::half::{Bf16x2, F16x2, bf16, f16};
use crate::vector;

macro_rules! load_store {
    ($name:ident, $elem:ty, $n:literal) => {
        impl $name {
            /// The packs of `values` (host code: a `Vec<bf16>` made into the `Vec<Bf16x8>` a
            /// `launch_cpu` takes), or `None` when `values.len()` is not a multiple of the
            /// pack's element count. (bytemuck's `pod_collect_to_vec` needs its `alloc`
            /// feature, which the workspace does not turn on.)
            #[cfg(not(target_arch = "nvptx64"))]
            pub fn collect(values: &[$elem]) -> Option<Vec<Self>> {
                let (packs, rest) = values.as_chunks::<$n>();
                rest.is_empty().then(|| packs.iter().map(|p| bytemuck::cast::<[$elem; $n], Self>(*p)).collect())
            }

            /// The packs' values in memory order, as one slice (no copy).
            #[inline(always)]
            pub fn elements(packs: &[Self]) -> &[$elem] {
                bytemuck::cast_slice(packs)
            }

            /// `*src` in one 16-byte load ([`vector::load16`]): `ld.global.nc.v4` on an element
            /// of a kernel's input slice, the plain 16-byte load of the state space otherwise.
            #[inline(always)]
            pub fn load(src: &Self) -> Self {
                vector::load16(src)
            }

            /// Writes `self` to `*dst` in one 16-byte store ([`vector::store16`]).
            #[inline(always)]
            pub fn store(self, dst: &mut Self) {
                vector::store16(dst, self)
            }

            /// The 16 bytes as four 32-bit words (for shared memory's 16-byte accesses:
            /// [`SharedSliceX4`](crate::shared_vector::SharedSliceX4)).
            #[inline(always)]
            pub fn to_words(self) -> [u32; 4] {
                bytemuck::cast(self)
            }

            /// From four 32-bit words (the inverse of [`to_words`](Self::to_words)).
            #[inline(always)]
            pub fn from_words(words: [u32; 4]) -> Self {
                bytemuck::cast(words)
            }
        }
    };
}

macro_rules! half_pack {
    ($(#[$doc:meta])* $name:ident, $pair:ident, $elem:ident) => {
        $(#[$doc])*
        ///
        /// Element `i` is at byte `2 i` (the low half of pair `i / 2` when `i` is even).
        #[repr(C, align(16))]
        #[derive(Clone, Copy, Default, Debug, bytemuck::Pod, bytemuck::Zeroable, crate::LayoutKey)]
        pub struct $name(pub [$pair; 4]);

        load_store!($name, $elem, 8);

        impl $name {
            /// From four pairs (element `2 k` is `pairs[k].lo()`).
            #[inline(always)]
            pub const fn from_pairs(pairs: [$pair; 4]) -> Self {
                $name(pairs)
            }

            /// The four pairs, for packed arithmetic (two values per instruction, two per
            /// register).
            #[inline(always)]
            pub const fn pairs(self) -> [$pair; 4] {
                self.0
            }

            /// From eight values in memory order.
            #[inline(always)]
            pub fn from_array(values: [$elem; 8]) -> Self {
                bytemuck::cast(values)
            }

            /// The eight values in memory order.
            #[inline(always)]
            pub fn to_array(self) -> [$elem; 8] {
                bytemuck::cast(self)
            }

            /// All eight values `value`.
            #[inline(always)]
            pub const fn splat(value: $elem) -> Self {
                $name([$pair::splat(value); 4])
            }

            /// Element `i` (`i < 8`; panics otherwise, as an array index does).
            #[inline(always)]
            pub fn get(self, i: usize) -> $elem {
                let pair = self.0[i / 2];
                if i % 2 == 0 { pair.lo() } else { pair.hi() }
            }

            /// Sets element `i` (`i < 8`; panics otherwise).
            #[inline(always)]
            pub fn set(&mut self, i: usize, value: $elem) {
                let pair = self.0[i / 2];
                self.0[i / 2] = if i % 2 == 0 { $pair::new(value, pair.hi()) } else { $pair::new(pair.lo(), value) };
            }

            /// The eight values widened to `f32` (exact), in memory order. Eight registers:
            /// see the [module](self) on register pressure.
            #[inline(always)]
            pub fn to_f32s(self) -> [f32; 8] {
                let mut out = [0.0f32; 8];
                let mut k = 0;
                while k < 4 {
                    let (lo, hi) = self.0[k].to_f32s();
                    out[2 * k] = lo;
                    out[2 * k + 1] = hi;
                    k += 1;
                }
                out
            }

            /// Eight `f32` rounded to nearest even in pairs (`cvt.rn.bf16x2.f32` /
            /// `cvt.rn.f16x2.f32`, nvcc's `F2FP.*.PACK_AB`).
            #[inline(always)]
            pub fn from_f32s(values: [f32; 8]) -> Self {
                let mut out = [$pair::default(); 4];
                let mut k = 0;
                while k < 4 {
                    out[k] = $pair::from_f32s(values[2 * k], values[2 * k + 1]);
                    k += 1;
                }
                $name(out)
            }
        }
    };
}

half_pack!(
    /// Eight `bf16` in one 16-byte aligned pack: llm.c's `x128` (`Packed128<__nv_bfloat16>`),
    /// four [`Bf16x2`].
    Bf16x8,
    Bf16x2,
    bf16
);

half_pack!(
    /// Eight `f16` in one 16-byte aligned pack (`Packed128<half>`), four [`F16x2`].
    F16x8,
    F16x2,
    f16
);

macro_rules! array_pack {
    ($(#[$doc:meta])* $name:ident, $elem:ty, $n:literal) => {
        $(#[$doc])*
        #[repr(C, align(16))]
        #[derive(Clone, Copy, Default, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable, crate::LayoutKey)]
        pub struct $name(pub [$elem; $n]);

        load_store!($name, $elem, $n);

        impl $name {
            /// From the values in memory order.
            #[inline(always)]
            pub const fn from_array(values: [$elem; $n]) -> Self {
                $name(values)
            }

            /// The values in memory order.
            #[inline(always)]
            pub const fn to_array(self) -> [$elem; $n] {
                self.0
            }

            /// Every value `value`.
            #[inline(always)]
            pub const fn splat(value: $elem) -> Self {
                $name([value; $n])
            }

            /// Element `i` (panics when `i` is out of range, as an array index does).
            #[inline(always)]
            pub fn get(self, i: usize) -> $elem {
                self.0[i]
            }

            /// Sets element `i` (panics when `i` is out of range).
            #[inline(always)]
            pub fn set(&mut self, i: usize, value: $elem) {
                self.0[i] = value;
            }
        }
    };
}

array_pack!(
    /// Sixteen `i8` in one 16-byte aligned pack (vLLM's `vec_n_t<int8_t, 16>`, CUDA's `char4`
    /// x 4).
    I8x16,
    i8,
    16
);

array_pack!(
    /// Sixteen `u8` in one 16-byte aligned pack (`uchar4` x 4, `uint4` as bytes).
    U8x16,
    u8,
    16
);

array_pack!(
    /// Four `f32` in one 16-byte aligned pack: CUDA's `float4`, llm.c's `f128`.
    F32x4,
    f32,
    4
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_are_16_bytes_aligned_to_16() {
        fn check<T>() {
            assert_eq!((core::mem::size_of::<T>(), core::mem::align_of::<T>()), (16, 16));
        }
        check::<Bf16x8>();
        check::<F16x8>();
        check::<I8x16>();
        check::<U8x16>();
        check::<F32x4>();
    }

    #[test]
    fn half_pack_elements_are_in_memory_order() {
        let values: [bf16; 8] = core::array::from_fn(|i| bf16::from_f32(i as f32 - 3.5));
        let mut v = Bf16x8::from_array(values);
        for (i, x) in values.iter().enumerate() {
            assert_eq!(v.get(i).to_bits(), x.to_bits(), "element {i}");
            assert_eq!(v.to_f32s()[i], x.to_f32());
        }
        assert_eq!(v.pairs()[1].lo().to_bits(), values[2].to_bits());
        v.set(5, bf16::from_f32(100.0));
        assert_eq!(v.get(5).to_f32(), 100.0);
        assert_eq!(v.get(4).to_bits(), values[4].to_bits(), "the other half of the pair is kept");
        assert_eq!(Bf16x8::from_words(v.to_words()).to_array().map(|x| x.to_bits()), v.to_array().map(|x| x.to_bits()));
        let h = F16x8::from_f32s([0.5, 1.0, 2.0, 3.0, -1.0, 0.25, 8.0, 65504.0]);
        assert_eq!(h.to_f32s(), [0.5, 1.0, 2.0, 3.0, -1.0, 0.25, 8.0, 65504.0]);
    }

    /// On the host, `load`/`store` are the CPU executor's checked 16-byte accesses.
    #[test]
    fn load_and_store_move_the_whole_pack() {
        let src = [I8x16::from_array(core::array::from_fn(|i| i as i8 - 8)), I8x16::splat(3)];
        let mut dst = [I8x16::default(); 2];
        I8x16::load(&src[0]).store(&mut dst[1]);
        assert_eq!(dst[1], src[0]);
        assert_eq!(dst[0], I8x16::default());
        let f = F32x4::from_array([1.0, 2.0, 3.0, 4.0]);
        assert_eq!(F32x4::from_words(f.to_words()), f);
    }

    /// Host packing (issue 30's seventh port, gap 9): a multiple of the pack's count packs,
    /// anything else is refused; `elements` gives the values back in order.
    #[test]
    fn p30_ports7_gap9_host_vectors_pack_and_unpack() {
        let values: Vec<bf16> = (0..24).map(|i| bf16::from_f32(i as f32)).collect();
        let packs = Bf16x8::collect(&values).expect("24 = 3 packs");
        assert_eq!(packs.len(), 3);
        assert_eq!(packs[2].get(7).to_f32(), 23.0);
        assert_eq!(Bf16x8::elements(&packs).iter().map(|x| x.to_f32()).collect::<Vec<_>>(), values.iter().map(|x| x.to_f32()).collect::<Vec<_>>());
        assert!(Bf16x8::collect(&values[..23]).is_none());
        let bytes: Vec<i8> = (0..32).map(|i| i as i8 - 16).collect();
        assert_eq!(I8x16::elements(&I8x16::collect(&bytes).expect("2 packs")), &bytes[..]);
        assert!(F32x4::collect(&[1.0; 6]).is_none());
    }
}
