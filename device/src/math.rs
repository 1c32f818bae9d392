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
//! | `rsqrt` | `1 / sqrt.rn` (two roundings) | ≤ 1 ulp |
//! | `exp`, `exp2`, `exp_m1`, `ln`, `log2`, `log10`, `ln_1p`, `sin`, `cos`, `tan`, `asin`, `acos`, `atan`, `atan2`, `sinh`, `cosh`, `tanh`, `cbrt`, `hypot`, `powf`, `erf`, `erfc` | the `libm` crate (a port of musl's libm), compiled to plain PTX arithmetic | musl's: ≤ 1 ulp for most, up to a few ulp for `tan`, `pow`, `erf`, hyperbolics near their limits |
//! | `powi` | square-and-multiply | a few ulp for large exponents, like `std` |
//! | [`FastMath`]: `fast_exp2`, `fast_log2`, `fast_sin`, `fast_cos`, `fast_rsqrt`, `fast_recip` | one `ex2/lg2/sin/cos/rsqrt/rcp.approx.ftz.f32` (the SFU) | ~2 ulp (ex2/lg2/rsqrt/rcp); sin/cos absolute error ~2^-21 on [-π, π] |
//! | `fast_exp`, `fast_ln` | `ex2.approx` / `lg2.approx` with a scale | as above plus one rounding |
//! | `fast_tanh` | `tanh.approx.f32` on sm_75+ | absolute error ~2^-11 |
//! | `fast_div` | `div.approx.f32` | ~2 ulp |
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
    /// Integer part.
    fn trunc(self) -> Self;
    /// `self * a + b` with one rounding (`fma.rn`).
    fn mul_add(self, a: Self, b: Self) -> Self;
}

#[cfg(target_arch = "nvptx64")]
macro_rules! device_float {
    ($t:ty, $reg:ident, $sfx:literal, { $($method:ident => $libm:ident;)* }, { $($method2:ident => $libm2:ident;)* }) => {
        impl DeviceFloat for $t {
            $(#[inline(always)] fn $method(self) -> Self { libm::$libm(self) })*
            $(#[inline(always)] fn $method2(self, other: Self) -> Self { libm::$libm2(self, other) })*
            #[inline(always)]
            fn sqrt(self) -> Self {
                let r: $t;
                // SAFETY: arithmetic only.
                unsafe { core::arch::asm!(concat!("sqrt.rn.", $sfx, " {r}, {x};"), r = out($reg) r, x = in($reg) self, options(pure, nomem, nostack)) };
                r
            }
            #[inline(always)]
            fn rsqrt(self) -> Self { 1.0 / self.sqrt() }
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

#[cfg(target_arch = "nvptx64")]
device_float!(f32, reg32, "f32", {
    cbrt => cbrtf; exp => expf; exp2 => exp2f; exp_m1 => expm1f; ln => logf; log2 => log2f; log10 => log10f;
    ln_1p => log1pf; sin => sinf; cos => cosf; tan => tanf; asin => asinf; acos => acosf; atan => atanf;
    sinh => sinhf; cosh => coshf; tanh => tanhf; erf => erff; erfc => erfcf;
}, { atan2 => atan2f; hypot => hypotf; powf => powf; });

#[cfg(target_arch = "nvptx64")]
device_float!(f64, reg64, "f64", {
    cbrt => cbrt; exp => exp; exp2 => exp2; exp_m1 => expm1; ln => log; log2 => log2; log10 => log10;
    ln_1p => log1p; sin => sin; cos => cos; tan => tan; asin => asin; acos => acos; atan => atan;
    sinh => sinh; cosh => cosh; tanh => tanh; erf => erf; erfc => erfc;
}, { atan2 => atan2; hypot => hypot; powf => pow; });

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

/// Hardware approximations for `f32` (the special-function unit): much faster than
/// [`DeviceFloat`]'s methods, less accurate (see the module docs). Denormals flush to zero.
pub trait FastMath: Copy {
    /// `2^x` (`ex2.approx.ftz.f32`).
    fn fast_exp2(self) -> Self;
    /// `e^x` as `2^(x·log2 e)`.
    fn fast_exp(self) -> Self;
    /// `log2(x)` (`lg2.approx.ftz.f32`).
    fn fast_log2(self) -> Self;
    /// `ln(x)` as `log2(x)·ln 2`.
    fn fast_ln(self) -> Self;
    /// `sin(x)` (`sin.approx.ftz.f32`), best on [-π, π].
    fn fast_sin(self) -> Self;
    /// `cos(x)` (`cos.approx.ftz.f32`), best on [-π, π].
    fn fast_cos(self) -> Self;
    /// `1/sqrt(x)` (`rsqrt.approx.ftz.f32`).
    fn fast_rsqrt(self) -> Self;
    /// `1/x` (`rcp.approx.ftz.f32`).
    fn fast_recip(self) -> Self;
    /// `tanh(x)` (`tanh.approx.f32` on sm_75 and newer; the precise one on older targets).
    fn fast_tanh(self) -> Self;
    /// `self / d` (`div.approx.f32`).
    fn fast_div(self, d: Self) -> Self;
}

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
    fn fast_log2(self) -> f32 {
        approx!("lg2.approx.ftz.f32", self)
    }
    #[inline(always)]
    fn fast_ln(self) -> f32 {
        self.fast_log2() * core::f32::consts::LN_2
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
    fn fast_rsqrt(self) -> f32 {
        approx!("rsqrt.approx.ftz.f32", self)
    }
    #[inline(always)]
    fn fast_recip(self) -> f32 {
        approx!("rcp.approx.ftz.f32", self)
    }
    #[inline(always)]
    fn fast_tanh(self) -> f32 {
        #[cfg(ferrocuda_sm = "75")]
        {
            approx!("tanh.approx.f32", self)
        }
        #[cfg(not(ferrocuda_sm = "75"))]
        {
            DeviceFloat::tanh(self)
        }
    }
    #[inline(always)]
    fn fast_div(self, d: f32) -> f32 {
        let r: f32;
        // SAFETY: arithmetic only.
        unsafe { core::arch::asm!("div.approx.f32 {r}, {x}, {d};", r = out(reg32) r, x = in(reg32) self, d = in(reg32) d, options(pure, nomem, nostack)) };
        r
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl FastMath for f32 {
    fn fast_exp2(self) -> f32 {
        self.exp2()
    }
    fn fast_exp(self) -> f32 {
        self.exp()
    }
    fn fast_log2(self) -> f32 {
        self.log2()
    }
    fn fast_ln(self) -> f32 {
        self.ln()
    }
    fn fast_sin(self) -> f32 {
        self.sin()
    }
    fn fast_cos(self) -> f32 {
        self.cos()
    }
    fn fast_rsqrt(self) -> f32 {
        1.0 / self.sqrt()
    }
    fn fast_recip(self) -> f32 {
        1.0 / self
    }
    fn fast_tanh(self) -> f32 {
        self.tanh()
    }
    fn fast_div(self, d: f32) -> f32 {
        self / d
    }
}
