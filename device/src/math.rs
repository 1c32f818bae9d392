//! Floating-point math for kernels: `use ferrocuda_device::math::DeviceFloat;` gives `f32` and
//! `f64` the methods of `std` that `core` lacks on the GPU (`x.sqrt()`, `x.exp()`, ...), and
//! [`FastMath`] gives `f32` the hardware approximations, named `fast_*` so that the loss of
//! accuracy is visible where they are used.
//!
//! What each compiles to on the GPU, and its accuracy (measured against the host's `std` on
//! random inputs by `tests/gpu_device_lib.rs`; "ulp" = units in the last place):
//!
//! | methods | GPU code | accuracy |
//! | --- | --- | --- |
//! | `sqrt`, `mul_add` | `sqrt.rn`, `fma.rn` | correctly rounded (0 ulp) |
//! | `floor`, `ceil`, `trunc`, `round` | `cvt.rmi`/`cvt.rpi`/`cvt.rzi`, `round` half away from zero | exact |
//! | `rsqrt` (`f32`) | `rsqrt.approx.f32`: CUDA's `rsqrtf`, in every mode (`.ftz` under fast math) | ≤ 2 ulp (write `1.0 / x.sqrt()` for ≤ 1 ulp) |
//! | `rsqrt` (`f64`) | `1 / sqrt.rn` (two roundings) | ≤ 1 ulp |
//! | `f32` `exp`, `erf` | as nvcc's `expf`/`erff`: one `ex2.approx.ftz` after nvcc's range reduction (`exp`: 12 instructions) or polynomial (`erf`, branch-free) | ≤ 4 ulp asserted (CUDA documents 2); simulated with an exact `ex2`: `exp` 1.5 ulp, `erf` 1 ulp |
//! | `exp2`, `exp_m1`, `ln`, `log2`, `log10`, `ln_1p`, `sin`, `cos`, `tan`, `asin`, `acos`, `atan`, `atan2`, `cbrt`, `hypot`, `powf`, `erfc` (and every `f64` function, `exp` and `erf` included) | the `libm` crate (a port of musl's libm), compiled to plain PTX arithmetic | musl's: ≤ 1 ulp for most, up to a few ulp for `tan`, `pow`, `erf`, hyperbolics near their limits |
//! | `f32` `sinh`, `cosh`, `tanh` | as nvcc's `sinhf`/`coshf`/`tanhf`: `sinh`, `cosh` around one `ex2.approx.ftz` after an exact reduction by `ln 2`, with an approximate division; `tanh` branch-free, an odd polynomial below 0.6, else `1 - 2 rcp.approx(ex2.approx(2|x| log2 e) + 1)`, no division | ≤ 4 ulp asserted; measured on an H100: `sinh` 3, `cosh` 1.6e-7 relative (nvcc's documented: 2-3); `tanh`'s sequence with exact `ex2`/`rcp`: 1.81 ulp over every `f32` (audit 2026-11-28c; the H100's 3 ulp were the earlier, dividing `tanh`'s) |
//! | `powi` | square-and-multiply | a few ulp for large exponents, like `std` |
//! | [`FastMath`]: `fast_exp2`, `fast_log2`, `fast_sin`, `fast_cos`, `fast_sqrt`, `fast_rsqrt`, `fast_recip` | one `ex2/lg2/sin/cos/sqrt/rsqrt/rcp.approx.ftz.f32` (the SFU) | ~2 ulp (ex2/lg2/sqrt/rsqrt/rcp); sin/cos absolute error ~2^-21 on [-π, π] |
//! | `fast_exp`, `fast_exp10`, `fast_ln`, `fast_log10`, `fast_powf` | `ex2.approx` / `lg2.approx` with a scale | as above plus one rounding (`fast_powf`: error grows with `|y·log2 x|`) |
//! | `fast_tan` | `sin.approx`, `cos.approx`, `div.approx` | as sin/cos, larger near the poles |
//! | `fast_cosh`, `fast_sinh` | one `ex2.approx.ftz` after an exact reduction by `ln 2`, one `div.approx.ftz` (and an odd polynomial for `sinh` below 1): 18 and 33 PTX instructions, nvcc's `coshf`/`sinhf` 24 and 37 | ~3 ulp (asserted: 2^-21 relative) |
//! | `fast_tanh` | `tanh.approx.f32`, sm_75 and newer only (refused at compile time on older targets) | relative error up to 2^-10.987 |
//! | `fast_div` | `div.approx.ftz.f32` (CUDA `__fdividef`) | ~2 ulp for `|d|` in [2^-126, 2^126] |
//!
//! ## `--use_fast_math`
//!
//! `KernelBuilder::fast_math(true)` is nvcc's `--use_fast_math` for a kernel crate, function by
//! function as nvcc 13 compiles it (checked against nvcc's PTX by `tests/fast_math_nvcc.rs`):
//!
//! | `f32` method | CUDA under `--use_fast_math` | nvcc 13's PTX | ours |
//! | --- | --- | --- | --- |
//! | `sqrt`, `rsqrt` | `sqrtf`, `rsqrtf` | `sqrt.approx.ftz`, `rsqrt.approx.ftz` | the same |
//! | `exp`, `exp2` | `expf` (= `__expf`), `exp2f` | `mul` + `ex2.approx.ftz`, `ex2.approx.ftz` | the same |
//! | `ln`, `log2`, `log10` | `logf`, `log2f`, `log10f` | `lg2.approx.ftz` (+ `mul`) | the same |
//! | `sin`, `cos`, `tan` | `sinf`, `cosf`, `tanf` | `sin/cos.approx.ftz`; `tan`: both + `div.approx.ftz` | the same |
//! | `powf` | `powf` (= `__powf`) | `lg2.approx.ftz`, `mul`, `ex2.approx.ftz` | the same |
//! | `tanh` | `tanhf` | one `tanh.approx.f32` | the same (sm_75+; precise below, where nvcc 13 has no target) |
//! | `cosh`, `sinh` | `coshf`, `sinhf` | software around one `ex2.approx.ftz` and one `div.approx.ftz` (24, 37 instructions) | [`FastMath::fast_cosh`]/[`fast_sinh`](FastMath::fast_sinh) (18, 33) |
//! | `/`, `1.0 / y` | `x / y`, `1.0f / y` (`-prec-div=false`) | `div.approx.ftz`, `rcp.approx.ftz` | the same (LLVM writes them without `.ftz`; the builder adds it) |
//! | `cbrt`, `exp_m1`, `ln_1p`, `asin`, `acos`, `atan`, `atan2`, `hypot`, `erf`, `erfc` | the same names | software (with SFU steps inside) | software (libm; its divisions `div.approx.ftz`) |
//! | every `f64` method | the same | precise | precise |
//!
//! It sets `cfg(ferrocuda_fast_math)` and has LLVM compile `f32` `/` as `div.approx.f32` and
//! `1.0 / y` as `rcp.approx.f32` (`-nvptx-prec-divf32=0`, nvcc's `-prec-div=false`); the builder
//! then writes both `.ftz`, as nvcc's `--use_fast_math` (which implies `-ftz=true`) has them:
//! without it ptxas wraps every one in a denormal check and a rescaling (`FSETP`, `FSEL`, two
//! `FMUL`), which made llm.c's GELU backward 0.85x nvcc's (issue 30's second port). One
//! difference is left: plain `+`, `*` do not flush denormals (rustc cannot ask LLVM for `.ftz`
//! arithmetic; it costs nothing on sm_90); the `fast_*` methods do. Test code that needs to know reads `cfg!(ferrocuda_fast_math)`.
//!
//! On the host the methods are `std`'s (more exact where they differ), so the CPU executor
//! runs the same kernel source.

/// `std`'s floating-point methods for kernels (see the module docs for cost and accuracy).
pub trait DeviceFloat: Copy {
    /// Square root.
    fn sqrt(self) -> Self;
    /// `1 / sqrt(x)`.
    fn rsqrt(self) -> Self;
    /// Cube root.
    fn cbrt(self) -> Self;
    /// `e^x`.
    fn exp(self) -> Self;
    /// `2^x`.
    fn exp2(self) -> Self;
    /// `e^x - 1`, accurate near 0.
    fn exp_m1(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// Base-2 logarithm.
    fn log2(self) -> Self;
    /// Base-10 logarithm.
    fn log10(self) -> Self;
    /// `ln(1 + x)`, accurate near 0.
    fn ln_1p(self) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// Tangent.
    fn tan(self) -> Self;
    /// Arcsine.
    fn asin(self) -> Self;
    /// Arccosine.
    fn acos(self) -> Self;
    /// Arctangent.
    fn atan(self) -> Self;
    /// Four-quadrant arctangent of `self / other`.
    fn atan2(self, other: Self) -> Self;
    /// Hyperbolic sine.
    fn sinh(self) -> Self;
    /// Hyperbolic cosine.
    fn cosh(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// `sqrt(self² + other²)` without undue overflow.
    fn hypot(self, other: Self) -> Self;
    /// `self^n` for a float exponent.
    fn powf(self, n: Self) -> Self;
    /// `self^n` for an integer exponent.
    fn powi(self, n: i32) -> Self;
    /// Error function.
    fn erf(self) -> Self;
    /// Complementary error function `1 - erf(x)`.
    fn erfc(self) -> Self;
    /// Largest integer ≤ `self`.
    fn floor(self) -> Self;
    /// Smallest integer ≥ `self`.
    fn ceil(self) -> Self;
    /// Nearest integer, halves away from zero.
    fn round(self) -> Self;
    /// Nearest integer, halves to even: CUDA's `rintf`/`nearbyintf` (one `cvt.rni`). With
    /// `as i8`/`as i32` after it, CUDA's `__float2int_rn` and `cvt.rni.sat.s8.f32` (Rust's `as`
    /// saturates and maps NaN to 0, as `.sat` does).
    fn round_ties_even(self) -> Self;
    /// Integer part.
    fn trunc(self) -> Self;
    /// `self * a + b` with one rounding (`fma.rn`).
    fn mul_add(self, a: Self, b: Self) -> Self;
}

/// One approximate `f32` instruction of one operand.
#[cfg(target_arch = "nvptx64")]
macro_rules! approx {
    ($op:literal, $x:expr) => {{
        let r: f32;
        // SAFETY: arithmetic only.
        unsafe { core::arch::asm!(concat!($op, " {r}, {x};"), r = out(reg32) r, x = in(reg32) $x, options(pure, nomem, nostack)) };
        r
    }};
}

#[cfg(target_arch = "nvptx64")]
macro_rules! device_float {
    ($t:ty, $reg:ident, $sfx:literal, sqrt = $sqrt:literal, rsqrt = $rsqrt:expr,
     { $($method:ident => $libm:ident;)* }, { $($method2:ident => $libm2:ident;)* },
     fast { $($fast:ident => $fastf:ident;)* }, fast2 { $($fast2:ident => $fastf2:ident;)* }
     $(, own { $($own:ident => $ownf:path;)* })?) => {
        impl DeviceFloat for $t {
            $(#[inline(always)] fn $method(self) -> Self { libm::$libm(self) })*
            $($(#[inline(always)] fn $own(self) -> Self { $ownf(self) })*)?
            $(#[inline(always)] fn $method2(self, other: Self) -> Self { libm::$libm2(self, other) })*
            $(#[inline(always)] fn $fast(self) -> Self { FastMath::$fastf(self) })*
            $(#[inline(always)] fn $fast2(self, other: Self) -> Self { FastMath::$fastf2(self, other) })*
            #[inline(always)]
            fn sqrt(self) -> Self {
                let r: $t;
                // SAFETY: arithmetic only.
                unsafe { core::arch::asm!(concat!($sqrt, " {r}, {x};"), r = out($reg) r, x = in($reg) self, options(pure, nomem, nostack)) };
                r
            }
            #[inline(always)]
            fn rsqrt(self) -> Self { let f: fn($t) -> $t = $rsqrt; f(self) }
            #[inline(always)]
            fn powi(self, n: i32) -> Self {
                let (mut base, mut e, mut acc) = (self, n.unsigned_abs(), 1.0 as $t);
                while e > 0 {
                    if e & 1 == 1 { acc *= base; }
                    base *= base;
                    e >>= 1;
                }
                if n < 0 { 1.0 / acc } else { acc }
            }
            #[inline(always)]
            fn floor(self) -> Self { device_float!(@cvt $reg, $sfx, "rmi", self) }
            #[inline(always)]
            fn ceil(self) -> Self { device_float!(@cvt $reg, $sfx, "rpi", self) }
            #[inline(always)]
            fn trunc(self) -> Self { device_float!(@cvt $reg, $sfx, "rzi", self) }
            #[inline(always)]
            fn round_ties_even(self) -> Self { device_float!(@cvt $reg, $sfx, "rni", self) }
            #[inline(always)]
            fn round(self) -> Self {
                // Halves away from zero, like std (PTX's cvt.rni rounds halves to even).
                let t = self.trunc();
                if (self - t).abs() >= 0.5 { t + (1.0 as $t).copysign(self) } else { t }
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                let r: $t;
                // SAFETY: arithmetic only.
                unsafe { core::arch::asm!(concat!("fma.rn.", $sfx, " {r}, {x}, {a}, {b};"), r = out($reg) r, x = in($reg) self, a = in($reg) a, b = in($reg) b, options(pure, nomem, nostack)) };
                r
            }
        }
    };
    (@cvt $reg:ident, $sfx:literal, $mode:literal, $x:expr) => {{
        let r;
        // SAFETY: arithmetic only.
        unsafe { core::arch::asm!(concat!("cvt.", $mode, ".", $sfx, ".", $sfx, " {r}, {x};"), r = out($reg) r, x = in($reg) $x, options(pure, nomem, nostack)) };
        r
    }};
}

// The precise f32 functions (the default). `rsqrt` is CUDA's `rsqrtf`: `rsqrt.approx.f32`
// in every mode (nvcc never computes it as `1 / sqrt`).
#[cfg(all(target_arch = "nvptx64", not(ferrocuda_fast_math)))]
device_float!(f32, reg32, "f32", sqrt = "sqrt.rn.f32", rsqrt = |x: f32| approx!("rsqrt.approx.f32", x), {
    cbrt => cbrtf; exp2 => exp2f; exp_m1 => expm1f; ln => logf; log2 => log2f; log10 => log10f;
    ln_1p => log1pf; sin => sinf; cos => cosf; tan => tanf; asin => asinf; acos => acosf; atan => atanf;
    erfc => erfcf;
}, { atan2 => atan2f; hypot => hypotf; powf => powf; }, fast {}, fast2 {},
    own { cosh => hyperbolic::cosh; sinh => hyperbolic::sinh; tanh => hyperbolic::tanh; exp => nvcc_f32::exp; erf => nvcc_f32::erf; });

// `--use_fast_math` (`KernelBuilder::fast_math(true)`), function by function as nvcc 13 compiles
// it (the table in the module docs, checked against nvcc's PTX by tests/fast_math_nvcc.rs):
// `sqrtf`, `rsqrtf`, `expf`, `exp2f`, `logf`, `log2f`, `log10f`, `sinf`, `cosf`, `tanf`, `powf`
// become the special-function unit's approximation, `tanhf` one `tanh.approx.f32` (sm_75 and
// newer; nvcc 13 has no older target), `coshf`/`sinhf` an `ex2.approx` and an approximate
// division; the rest stays software, as there.
#[cfg(all(target_arch = "nvptx64", ferrocuda_fast_math, ferrocuda_sm = "75"))]
device_float!(f32, reg32, "f32", sqrt = "sqrt.approx.ftz.f32", rsqrt = |x: f32| x.fast_rsqrt(), {
    cbrt => cbrtf; exp_m1 => expm1f;
    ln_1p => log1pf; asin => asinf; acos => acosf; atan => atanf;
    erf => erff; erfc => erfcf;
}, { atan2 => atan2f; hypot => hypotf; }, fast {
    exp => fast_exp; exp2 => fast_exp2; ln => fast_ln; log2 => fast_log2; log10 => fast_log10;
    sin => fast_sin; cos => fast_cos; tan => fast_tan; cosh => fast_cosh; sinh => fast_sinh; tanh => fast_tanh;
}, fast2 { powf => fast_powf; });

// The same below sm_75, which has no `tanh.approx`: `tanh` is the precise one there.
#[cfg(all(target_arch = "nvptx64", ferrocuda_fast_math, not(ferrocuda_sm = "75")))]
device_float!(f32, reg32, "f32", sqrt = "sqrt.approx.ftz.f32", rsqrt = |x: f32| x.fast_rsqrt(), {
    cbrt => cbrtf; exp_m1 => expm1f;
    ln_1p => log1pf; asin => asinf; acos => acosf; atan => atanf;
    erf => erff; erfc => erfcf;
}, { atan2 => atan2f; hypot => hypotf; }, fast {
    exp => fast_exp; exp2 => fast_exp2; ln => fast_ln; log2 => fast_log2; log10 => fast_log10;
    sin => fast_sin; cos => fast_cos; tan => fast_tan; cosh => fast_cosh; sinh => fast_sinh;
}, fast2 { powf => fast_powf; }, own { tanh => hyperbolic::tanh; });

#[cfg(target_arch = "nvptx64")]
device_float!(f64, reg64, "f64", sqrt = "sqrt.rn.f64", rsqrt = |x: f64| 1.0 / x.sqrt(), {
    cbrt => cbrt; exp => exp; exp2 => exp2; exp_m1 => expm1; ln => log; log2 => log2; log10 => log10;
    ln_1p => log1p; sin => sin; cos => cos; tan => tan; asin => asin; acos => acos; atan => atan;
    sinh => sinh; cosh => cosh; tanh => tanh; erf => erf; erfc => erfc;
}, { atan2 => atan2; hypot => hypot; powf => pow; }, fast {}, fast2 {});

#[cfg(not(target_arch = "nvptx64"))]
macro_rules! host_float {
    ($t:ty, $erf:path, $erfc:path) => {
        impl DeviceFloat for $t {
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn rsqrt(self) -> Self {
                1.0 / <$t>::sqrt(self)
            }
            fn cbrt(self) -> Self {
                <$t>::cbrt(self)
            }
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            fn exp2(self) -> Self {
                <$t>::exp2(self)
            }
            fn exp_m1(self) -> Self {
                <$t>::exp_m1(self)
            }
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            fn log2(self) -> Self {
                <$t>::log2(self)
            }
            fn log10(self) -> Self {
                <$t>::log10(self)
            }
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            fn asin(self) -> Self {
                <$t>::asin(self)
            }
            fn acos(self) -> Self {
                <$t>::acos(self)
            }
            fn atan(self) -> Self {
                <$t>::atan(self)
            }
            fn atan2(self, other: Self) -> Self {
                <$t>::atan2(self, other)
            }
            fn sinh(self) -> Self {
                <$t>::sinh(self)
            }
            fn cosh(self) -> Self {
                <$t>::cosh(self)
            }
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            fn hypot(self, other: Self) -> Self {
                <$t>::hypot(self, other)
            }
            fn powf(self, n: Self) -> Self {
                <$t>::powf(self, n)
            }
            fn powi(self, n: i32) -> Self {
                <$t>::powi(self, n)
            }
            fn erf(self) -> Self {
                $erf(self)
            }
            fn erfc(self) -> Self {
                $erfc(self)
            }
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            fn round(self) -> Self {
                <$t>::round(self)
            }
            fn trunc(self) -> Self {
                <$t>::trunc(self)
            }
            fn round_ties_even(self) -> Self {
                <$t>::round_ties_even(self)
            }
            fn mul_add(self, a: Self, b: Self) -> Self {
                <$t>::mul_add(self, a, b)
            }
        }
    };
}

#[cfg(not(target_arch = "nvptx64"))]
host_float!(f32, libm::erff, libm::erfcf);
#[cfg(not(target_arch = "nvptx64"))]
host_float!(f64, libm::erf, libm::erfc);

/// `f32` to integer conversions that round to nearest even and saturate, in one instruction:
/// CUDA's `__float2int_rn` and the `cvt.rni.sat` that quantisation kernels write in inline PTX
/// (vLLM's `float_to_int8_rn`). `x.round_ties_even() as i8` computes the same value, but LLVM
/// lowers Rust's saturating `as` to a clamp, a NaN test and a truncating conversion (about 8
/// instructions a value: vLLM's int8 quantiser ran at 0.78x nvcc's with it, issue 30). NaN
/// converts to 0, as Rust's `as` does.
pub trait FloatToInt: Copy {
    /// Nearest `i8`, ties to even, saturated to `[-128, 127]` (`cvt.rni.sat.s8.f32`).
    fn to_i8_rn_sat(self) -> i8;
    /// Nearest `i32`, ties to even, saturated (`cvt.rni.sat.s32.f32`; CUDA's `__float2int_rn`).
    fn to_i32_rn_sat(self) -> i32;
}

#[cfg(target_arch = "nvptx64")]
impl FloatToInt for f32 {
    #[inline(always)]
    fn to_i8_rn_sat(self) -> i8 {
        let r: u32;
        // SAFETY: arithmetic only; PTX sign-extends the `.s8` result into the 32-bit register.
        unsafe { core::arch::asm!("cvt.rni.sat.s8.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) self, options(pure, nomem, nostack)) };
        r as i8
    }
    #[inline(always)]
    fn to_i32_rn_sat(self) -> i32 {
        let r: i32;
        // SAFETY: arithmetic only.
        unsafe { core::arch::asm!("cvt.rni.sat.s32.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) self, options(pure, nomem, nostack)) };
        r
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl FloatToInt for f32 {
    fn to_i8_rn_sat(self) -> i8 {
        self.round_ties_even() as i8
    }
    fn to_i32_rn_sat(self) -> i32 {
        self.round_ties_even() as i32
    }
}

/// Hardware approximations for `f32` (the special-function unit): much faster than
/// [`DeviceFloat`]'s methods, less accurate (see the module docs). Denormal inputs and results
/// flush to zero (the `.ftz` forms, as under nvcc's `--use_fast_math`). These are CUDA's
/// `__expf`, `__logf`, `__sinf`, `__fdividef`, ... (the table in docs/performance.md).
pub trait FastMath: Copy {
    /// `2^x` (`ex2.approx.ftz.f32`; CUDA `exp2f` under fast math).
    fn fast_exp2(self) -> Self;
    /// `e^x` as `2^(x·log2 e)` (CUDA `__expf`).
    fn fast_exp(self) -> Self;
    /// `10^x` as `2^(x·log2 10)` (CUDA `__exp10f`).
    fn fast_exp10(self) -> Self;
    /// `log2(x)` (`lg2.approx.ftz.f32`; CUDA `__log2f`).
    fn fast_log2(self) -> Self;
    /// `ln(x)` as `log2(x)·ln 2` (CUDA `__logf`).
    fn fast_ln(self) -> Self;
    /// `log10(x)` as `log2(x)·log10 2` (CUDA `__log10f`).
    fn fast_log10(self) -> Self;
    /// `sin(x)` (`sin.approx.ftz.f32`; CUDA `__sinf`), best on [-π, π].
    fn fast_sin(self) -> Self;
    /// `cos(x)` (`cos.approx.ftz.f32`; CUDA `__cosf`), best on [-π, π].
    fn fast_cos(self) -> Self;
    /// `tan(x)` as `sin(x) / cos(x)` (CUDA `__tanf`), best on [-π/2, π/2] away from the poles.
    fn fast_tan(self) -> Self;
    /// `sqrt(x)` (`sqrt.approx.ftz.f32`; CUDA `sqrtf` under `-prec-sqrt=false`).
    fn fast_sqrt(self) -> Self;
    /// `1/sqrt(x)` (`rsqrt.approx.ftz.f32`: CUDA's `rsqrtf` under fast math; not `__frsqrt_rn`,
    /// which is correctly rounded and has no twin here: `1.0 / x.sqrt()` is within 1 ulp).
    fn fast_rsqrt(self) -> Self;
    /// `1/x` (`rcp.approx.ftz.f32`).
    fn fast_recip(self) -> Self;
    /// `x^y` as `2^(y·log2 x)` (CUDA `__powf`): for `x > 0`; NaN for negative `x`.
    fn fast_powf(self, y: Self) -> Self;
    /// `cosh(x)` from one `ex2.approx.ftz.f32` (after an exact range reduction by `ln 2`) and one
    /// `div.approx.ftz.f32`: what nvcc's `coshf` is made of (it has no `__coshf`). ~3 ulp.
    fn fast_cosh(self) -> Self;
    /// `sinh(x)`: an odd polynomial for `|x| < 1`, else as [`fast_cosh`](Self::fast_cosh)
    /// with the difference; what nvcc's `sinhf` is made of. ~3 ulp.
    fn fast_sinh(self) -> Self;
    /// `tanh(x)` (`tanh.approx.f32`, relative error up to 2^-10.987). Needs sm_75: a device build for
    /// an older GPU refuses the call at compile time ([`crate::arch`]).
    fn fast_tanh(self) -> Self
    where
        crate::arch::Target: crate::arch::Sm75;
    /// `self / d` (`div.approx.ftz.f32`; CUDA `__fdividef`): ~2 ulp for `|d|` in
    /// [2^-126, 2^126]; 0 when `|d|` is beyond 2^126.
    ///
    /// nvcc's bits alone, not after an add: ptxas lowers it to `MUFU.RCP` + `FMUL.FTZ`, and
    /// under nvcc's `--use_fast_math` (every operation `.ftz`) fuses that multiply with a
    /// following add, `x / c - y` becoming `fma(x, rcp(c), -y)`; our `+`/`-` are not `.ftz`, so
    /// `x.fast_div(c) - y` stays a rounded quotient then a subtraction. For nvcc's bits there,
    /// write `x.mul_add(c.fast_recip(), -y)` (docs/performance.md, porting table).
    fn fast_div(self, d: Self) -> Self;
}

#[cfg(target_arch = "nvptx64")]
impl FastMath for f32 {
    #[inline(always)]
    fn fast_exp2(self) -> f32 {
        approx!("ex2.approx.ftz.f32", self)
    }
    #[inline(always)]
    fn fast_exp(self) -> f32 {
        (self * core::f32::consts::LOG2_E).fast_exp2()
    }
    #[inline(always)]
    fn fast_exp10(self) -> f32 {
        (self * core::f32::consts::LOG2_10).fast_exp2()
    }
    #[inline(always)]
    fn fast_log2(self) -> f32 {
        approx!("lg2.approx.ftz.f32", self)
    }
    #[inline(always)]
    fn fast_ln(self) -> f32 {
        self.fast_log2() * core::f32::consts::LN_2
    }
    #[inline(always)]
    fn fast_log10(self) -> f32 {
        self.fast_log2() * core::f32::consts::LOG10_2
    }
    #[inline(always)]
    fn fast_sin(self) -> f32 {
        approx!("sin.approx.ftz.f32", self)
    }
    #[inline(always)]
    fn fast_cos(self) -> f32 {
        approx!("cos.approx.ftz.f32", self)
    }
    #[inline(always)]
    fn fast_tan(self) -> f32 {
        self.fast_sin().fast_div(self.fast_cos())
    }
    #[inline(always)]
    fn fast_sqrt(self) -> f32 {
        approx!("sqrt.approx.ftz.f32", self)
    }
    #[inline(always)]
    fn fast_rsqrt(self) -> f32 {
        approx!("rsqrt.approx.ftz.f32", self)
    }
    #[inline(always)]
    fn fast_recip(self) -> f32 {
        approx!("rcp.approx.ftz.f32", self)
    }
    #[inline(always)]
    fn fast_powf(self, y: f32) -> f32 {
        (y * self.fast_log2()).fast_exp2()
    }
    #[inline(always)]
    fn fast_cosh(self) -> f32 {
        // cosh x = h + 1/(4h) with h = e^|x| / 2 (1/(4h) vanishes, as it should, once h is
        // infinite; a NaN stays NaN).
        let h = half_exp_abs(self);
        h + 0.25f32.fast_div(h)
    }
    #[inline(always)]
    fn fast_sinh(self) -> f32 {
        let a = self.abs();
        // |x| < 1: x + x^3/3! + ... + x^11/11! (Horner in x^2; the next term is below 0.5 ulp).
        let s = a * a;
        let p = s.mul_add(1.0 / 39_916_800.0, 1.0 / 362_880.0);
        let p = s.mul_add(p, 1.0 / 5040.0);
        let p = s.mul_add(p, 1.0 / 120.0);
        let p = s.mul_add(p, 1.0 / 6.0);
        let small = (s * p).mul_add(a, a);
        // Otherwise h - 1/(4h), h = e^|x| / 2 (no cancellation worth a bit for |x| >= 1).
        let h = half_exp_abs(self);
        let large = h - 0.25f32.fast_div(h);
        (if a < 1.0 { small } else { large }).copysign(self)
    }
    #[inline(always)]
    fn fast_tanh(self) -> f32
    where
        crate::arch::Target: crate::arch::Sm75,
    {
        approx!("tanh.approx.f32", self)
    }
    #[inline(always)]
    fn fast_div(self, d: f32) -> f32 {
        let r: f32;
        // SAFETY: arithmetic only.
        unsafe { core::arch::asm!("div.approx.ftz.f32 {r}, {x}, {d};", r = out(reg32) r, x = in(reg32) self, d = in(reg32) d, options(pure, nomem, nostack)) };
        r
    }
}

/// `e^|x| / 2` for [`FastMath::fast_cosh`] and [`FastMath::fast_sinh`]: `|x| = n ln 2 + r` with
/// `n = round(|x| log2 e)` (clamped to 128, so that `2^(n-1)` is a finite float) and `r` exact
/// (Cody and Waite's two-part `ln 2`), then `2^(r log2 e)` by one `ex2.approx.ftz.f32` (its
/// argument is small, so its ~2 ulp are the whole error) times `2^(n-1)` built from the bits.
/// Past the clamp `r` grows and the product overflows to infinity exactly where `cosh` does.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn half_exp_abs(x: f32) -> f32 {
    const LN2_HI: f32 = f32::from_bits(0x3F31_7200); // 0.693145752: n * LN2_HI is exact
    const LN2_LO: f32 = f32::from_bits(0x35BF_BE8E); // ln 2 - LN2_HI
    let a = x.abs();
    let n: f32 = device_float!(@cvt reg32, "f32", "rni", a.min(88.5) * core::f32::consts::LOG2_E);
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, a));
    (r * core::f32::consts::LOG2_E).fast_exp2() * pow2_minus_one(n)
}

/// `2^(n-1)` for an integer-valued `n` in [0, 128], from the bits of `n + 1.5 * 2^23 + 126`: `n`
/// lands in the low mantissa bits (exactly), whose low 9 bits shifted by 23 are the exponent
/// field of `2^(n-1)`. One `FADD` and one shift, as nvcc's `coshf` builds its power of two, where
/// `n as u32` was an `F2I` on the conversion pipe (a quarter of the FMA rate) in every call:
/// llm.c's GELU backward, eight `coshf` a thread, ran at 0.85x nvcc's with it (issue 30,
/// bench/ports2/RESULTS.md).
#[cfg(any(target_arch = "nvptx64", test))]
#[inline(always)]
fn pow2_minus_one(n: f32) -> f32 {
    const SCALE_BIAS: f32 = 12_583_038.0; // 0x4B40_007E: 1.5 * 2^23 + 126
    f32::from_bits((n + SCALE_BIAS).to_bits() << 23)
}

/// `f32` `exp` and `erf` as nvcc 13 compiles `expf` and `erff` without fast math (read from
/// its SASS for sm_90): branch-free sequences around one `ex2.approx` each, where libm's
/// software functions made ported kernels 0.57x (vLLM's `moeSoftmax`, `expf`) and 0.31x (vLLM's
/// `gelu_and_mul`, `erff`) of nvcc's (issue 30, bench/results/h200-2026-11-27-s9-ports-run1.txt).
/// CUDA documents both at 2 ulp; tests/cpu_device_lib.rs checks them on the GPU against the
/// host's.
#[cfg(target_arch = "nvptx64")]
// Under fast math the f32 methods take the approximations: unused here, not worth a warning in
// every fast-math user's build (each one reached the user as 7 `cargo:warning`s).
#[cfg_attr(ferrocuda_fast_math, allow(dead_code))]
mod nvcc_f32 {
    use super::{DeviceFloat, FastMath};

    /// `fma.rn.sat.f32`: `a * b + c` clamped to `[0, 1]`.
    #[inline(always)]
    fn fma_sat(a: f32, b: f32, c: f32) -> f32 {
        let r: f32;
        // SAFETY: arithmetic only.
        unsafe {
            core::arch::asm!("fma.rn.sat.f32 {r}, {a}, {b}, {c};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, options(pure, nomem, nostack))
        };
        r
    }

    /// `fma.rm.f32`: `a * b + c` rounded towards minus infinity.
    #[inline(always)]
    fn fma_rm(a: f32, b: f32, c: f32) -> f32 {
        let r: f32;
        // SAFETY: arithmetic only.
        unsafe {
            core::arch::asm!("fma.rm.f32 {r}, {a}, {b}, {c};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, options(pure, nomem, nostack))
        };
        r
    }

    /// `e^x = 2^k 2^r`: `k = floor(x log2 e)` clamped to `[-126, 126]` by a rounding trick
    /// (`fma.rm` into the mantissa of `1.5 2^23`), `r = x log2 e - k` with `log2 e` in two parts,
    /// `2^r` by `ex2.approx`, `2^k` from `k`'s bits. Overflow gives infinity, underflow 0 or a
    /// denormal, NaN stays NaN.
    #[inline(always)]
    pub(super) fn exp(x: f32) -> f32 {
        let t = fma_sat(x, f32::from_bits(0x3bbb_989d), 0.5); // x log2(e) / 252 + 1/2
        let j = fma_rm(t, 252.0, f32::from_bits(0x4b40_0001)); // 1.5 2^23 + 1 + floor(252 t)
        let k = j - f32::from_bits(0x4b40_007f); // floor(252 t) - 126
        let r = x.mul_add(f32::from_bits(0x3fb8_aa3b), -k); // x log2(e) - k
        let r = x.mul_add(f32::from_bits(0x32a5_7060), r); // + x (log2(e)'s low part)
        let scale = f32::from_bits(j.to_bits() << 23); // 2^k: the low bits of j's mantissa
        r.fast_exp2() * scale
    }

    /// `erf x`: below `|x| = 1.00296` an odd polynomial (`x + x p(x^2)`), above `1 - 2^(-|x| (1 +
    /// q(|x|)))` with `x`'s sign; both Horner forms share one chain of fused multiply-adds whose
    /// coefficients are selected.
    #[inline(always)]
    pub(super) fn erf(x: f32) -> f32 {
        let a = x.abs();
        let large = a >= f32::from_bits(0x3f80_60fe);
        let c = |small: u32, big: u32| f32::from_bits(if large { big } else { small });
        let v = if large { a } else { x * x };
        let p = v.mul_add(c(0x38b1_e96a, 0x38eb_4c3a), c(0xba57_4d20, 0xbaae_005b));
        let p = v.mul_add(p, c(0x3baa_d5ea, 0x3c09_919f));
        let p = v.mul_add(p, c(0xbcdc_1be7, 0xbd24_d99a));
        let p = v.mul_add(p, c(0x3de7_18af, 0x3e23_5519));
        let p = v.mul_add(p, c(0xbec0_93ac, 0x3f69_b4f9));
        let p = v.mul_add(p, c(0x3e03_75d3, 0x3f21_0a14));
        let w = if large { -a } else { x };
        let p = p.mul_add(w, w);
        if large { (1.0 - p.fast_exp2()).copysign(x) } else { p }
    }
}

/// `f32` `cosh`, `sinh` and `tanh` as nvcc's `coshf`, `sinhf` and `tanhf` compute them by
/// default: around one `ex2.approx` (after an exact range reduction, [`half_exp_abs`], for
/// `cosh`/`sinh`), not libm's software `expf`/`expm1f` (which made a GELU backward 0.74x nvcc's). Within 4 ulp
/// (asserted on the GPU by tests/cpu_device_lib.rs, against the host's `std`).
#[cfg(any(target_arch = "nvptx64", test))]
#[cfg_attr(any(ferrocuda_fast_math, not(target_arch = "nvptx64")), allow(dead_code, unused_imports))]
mod hyperbolic {
    use super::{DeviceFloat, FastMath};

    /// `cosh x = h + 1/(4h)`, `h = e^|x| / 2` (as [`FastMath::fast_cosh`]; nvcc's `coshf` also
    /// divides approximately).
    #[inline(always)]
    pub(super) fn cosh(x: f32) -> f32 {
        x.fast_cosh()
    }

    /// An odd polynomial below 1, `h - 1/(4h)` above (as [`FastMath::fast_sinh`]).
    #[inline(always)]
    pub(super) fn sinh(x: f32) -> f32 {
        x.fast_sinh()
    }

    /// `tanh x` as nvcc's default `tanhf` computes it (read from nvcc 13's SASS, issue 30's
    /// held-out port): both arms computed, one selected, no branch and no division. Below 0.6 an
    /// odd polynomial `x + x^3 p(x^2)`; from 0.6 `1 - 2 / (e^(2|x|) + 1)` with one `ex2.approx`
    /// and one `rcp.approx`, exactly 1 from `|x| >= 9.01` (where `2 / (e^(2|x|) + 1)` is below
    /// half an ulp of 1), with `x`'s sign. NaN stays NaN (the polynomial arm is taken for it);
    /// `-0` gives `-0`.
    /// The correctly rounded division this replaces cost a GELU-and-mul 226 SASS instructions
    /// against nvcc's 65.
    #[inline(always)]
    pub(super) fn tanh(x: f32) -> f32 {
        let a = x.abs();
        let e = (a * f32::from_bits(0x4038_aa3b)).fast_exp2(); // e^(2a) = 2^(2a log2 e)
        let r = (e + 1.0).fast_recip();
        let large = if a >= f32::from_bits(0x4110_2cb4) { 1.0 } else { (-2.0f32).mul_add(r, 1.0) };
        let large = large.copysign(x);
        let s = x * x;
        let p = s.mul_add(f32::from_bits(0x3c80_f082), -f32::from_bits(0x3d56_3cae));
        let p = s.mul_add(p, f32::from_bits(0x3e08_5941));
        let p = s.mul_add(p, -f32::from_bits(0x3eaa_a9ed));
        // `s p + 0`, not `s p`: for `x = -0` the product is `-0`, and `-0 * -0 + -0` would be
        // `+0`; nvcc's `fma(p, s, 0)` makes it `+0`, so that `+0 * -0 + -0 = -0` keeps the
        // sign (audit 2026-11-28c G15-3). LLVM keeps an `fma` with a `+0` addend.
        let t = p.mul_add(s, 0.0);
        let small = t.mul_add(x, x);
        if a >= 0.6 { large } else { small }
    }
}

/// On the host the approximations are the precise functions, except that denormal results
/// flush to zero as on the GPU (`.ftz`), so a kernel that depends on flushing behaves alike.
#[cfg(not(target_arch = "nvptx64"))]
impl FastMath for f32 {
    fn fast_exp2(self) -> f32 {
        ftz(ftz(self).exp2())
    }
    fn fast_exp(self) -> f32 {
        ftz(ftz(self).exp())
    }
    fn fast_exp10(self) -> f32 {
        ftz(10f32.powf(ftz(self)))
    }
    fn fast_log2(self) -> f32 {
        ftz(self).log2()
    }
    fn fast_ln(self) -> f32 {
        ftz(self).ln()
    }
    fn fast_log10(self) -> f32 {
        ftz(self).log10()
    }
    fn fast_sin(self) -> f32 {
        ftz(ftz(self).sin())
    }
    fn fast_cos(self) -> f32 {
        ftz(self).cos()
    }
    fn fast_tan(self) -> f32 {
        ftz(ftz(self).tan())
    }
    fn fast_sqrt(self) -> f32 {
        ftz(self).sqrt()
    }
    fn fast_rsqrt(self) -> f32 {
        1.0 / ftz(self).sqrt()
    }
    fn fast_recip(self) -> f32 {
        ftz(1.0 / ftz(self))
    }
    fn fast_powf(self, y: f32) -> f32 {
        ftz(ftz(self).powf(ftz(y)))
    }
    fn fast_cosh(self) -> f32 {
        ftz(self).cosh()
    }
    fn fast_sinh(self) -> f32 {
        ftz(ftz(self).sinh())
    }
    fn fast_tanh(self) -> f32 {
        self.tanh()
    }
    fn fast_div(self, d: f32) -> f32 {
        ftz(ftz(self) / ftz(d))
    }
}

/// `x` with a denormal flushed to a zero of the same sign (what `.ftz` does to inputs and
/// results).
#[cfg(not(target_arch = "nvptx64"))]
fn ftz(x: f32) -> f32 {
    if x != 0.0 && x.abs() < f32::MIN_POSITIVE { 0.0f32.copysign(x) } else { x }
}

#[cfg(test)]
mod tests {
    use super::hyperbolic;

    /// `|y - t|` in units of the last place of `f32` at `t` (the spacing of the binade of `t`
    /// rounded to `f32`; subnormal spacing below it).
    fn ulps(y: f32, t: f64) -> f64 {
        let binade = ((t as f32).abs().to_bits() >> 23) as i32;
        let ulp = if binade == 0 { f64::from(f32::from_bits(1)) } else { 2f64.powi(binade - 127 - 23) };
        (f64::from(y) - t).abs() / ulp
    }

    /// G15-3 (audit 2026-11-28c): the precise `f32::tanh` (nvcc's branch-free `tanhf`) gave `+0`
    /// for `-0` (`-0 * (s p) + -0` with `s p = -0`); nvcc's `fma(p, s, 0)` keeps the sign. And the
    /// special values: `±inf` give `±1`, NaN stays NaN, subnormals come back unchanged (the
    /// polynomial arm; no flush), `±0.6` and `±9.0109` (the thresholds) take the arms nvcc's do.
    #[test]
    fn g15_3_tanh_keeps_the_sign_of_zero_and_the_special_values() {
        assert_eq!(hyperbolic::tanh(-0.0).to_bits(), (-0.0f32).to_bits(), "tanh(-0) must be -0");
        assert_eq!(hyperbolic::tanh(0.0).to_bits(), 0);
        assert_eq!(hyperbolic::tanh(f32::INFINITY), 1.0);
        assert_eq!(hyperbolic::tanh(f32::NEG_INFINITY), -1.0);
        assert!(hyperbolic::tanh(f32::NAN).is_nan());
        assert!(hyperbolic::tanh(-f32::NAN).is_nan());
        for bits in [1u32, 2, 0x0040_0000, 0x007f_ffff] {
            for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                assert_eq!(hyperbolic::tanh(x).to_bits(), x.to_bits(), "subnormal {x:e}");
            }
        }
        // From the threshold on, exactly 1 with the sign; just below it, the largest f32 below 1.
        let big = f32::from_bits(0x4110_2cb4);
        assert_eq!(hyperbolic::tanh(big), 1.0);
        assert_eq!(hyperbolic::tanh(-big), -1.0);
        assert_eq!(hyperbolic::tanh(f32::from_bits(0x4110_2cb3)), f32::from_bits(0x3f7f_ffff));
        assert_eq!(hyperbolic::tanh(f32::MAX), 1.0);
    }

    /// G15-3: the documented accuracy. With the SFU steps exact (the host's `fast_exp2` and
    /// `fast_recip` round correctly and flush denormals, as `.ftz` does), the sequence is within
    /// 2 ulp of `f64::tanh` everywhere: every 509th `f32` of each sign, and every `f32` within
    /// 2^14 ulps of 0.6 and of the 9.0109 threshold on both sides. Exhaustively (all 2^32
    /// inputs, audit/2026-11-28c): at most 1.81 ulp (at 0.48394, the polynomial arm); the
    /// `1 - 2 rcp(e^(2|x|) + 1)` arm at most 1.70 ulp (at 0.60063). On a GPU the `ex2.approx`
    /// and `rcp.approx` errors come on top (the module table's 4 ulp bound).
    #[test]
    fn g15_3_tanh_is_within_2_ulp_of_the_exact_value_over_the_f32_range() {
        let mut worst = (0.0f64, 0.0f32);
        let mut check = |bits: u32| {
            for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                if x.is_nan() {
                    continue;
                }
                let e = ulps(hyperbolic::tanh(x), f64::from(x).tanh());
                if e > worst.0 {
                    worst = (e, x);
                }
            }
        };
        (0..=0x7f80_0000u32).step_by(509).for_each(&mut check);
        for threshold in [0.6f32.to_bits(), 0x4110_2cb4] {
            (threshold - (1 << 14)..threshold + (1 << 14)).for_each(&mut check);
        }
        assert!(worst.0 <= 2.0, "tanh({:e}) is {:.3} ulp from the exact value", worst.1, worst.0);
    }

    /// The bit trick of `pow2_minus_one` is `2^(n-1)` exactly over the range `half_exp_abs`
    /// gives it (`n = round(min(|x|, 88.5) log2 e)`: 0 to 128).
    #[test]
    fn pow2_minus_one_is_exact_for_every_exponent_cosh_uses() {
        for n in 0..=128 {
            assert_eq!(super::pow2_minus_one(n as f32), 2f32.powi(n - 1), "n = {n}");
        }
    }
}
