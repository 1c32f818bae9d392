// Audit 2026-11-28c, G15-3: the precise f32 tanh sequence (device/src/math.rs, hyperbolic::tanh,
// before the -0 fix) with exact ex2/rcp, against f64::tanh, over every f32 (`./tanh_ulp 1`;
// `./tanh_ulp 64` samples every 64th). Build: rustc -O tanh_ulp.rs. Result (2026-11-28):
// worst 1.8127 ulp at 0x3ef7c762 (small arm), large arm 1.7046 at 0x3f19c2e4; tanh(-0) = +0.
fn ftz(x: f32) -> f32 { if x != 0.0 && x.abs() < f32::MIN_POSITIVE { 0.0f32.copysign(x) } else { x } }
fn fe2(x: f32) -> f32 { ftz(ftz(x).exp2()) }
fn frcp(x: f32) -> f32 { ftz(1.0 / ftz(x)) }
fn tanh_lib(x: f32) -> f32 {
    let a = x.abs();
    let e = fe2(a * f32::from_bits(0x4038_aa3b));
    let r = frcp(e + 1.0);
    let large = if a >= f32::from_bits(0x4110_2cb4) { 1.0 } else { (-2.0f32).mul_add(r, 1.0) };
    let large = large.copysign(x);
    let s = x * x;
    let p = s.mul_add(f32::from_bits(0x3c80_f082), -f32::from_bits(0x3d56_3cae));
    let p = s.mul_add(p, f32::from_bits(0x3e08_5941));
    let p = s.mul_add(p, -f32::from_bits(0x3eaa_a9ed));
    let small = x.mul_add(s * p, x);
    if a >= 0.6 { large } else { small }
}
// ulp error of f32 result y against exact value t (f64), in units of ulp(f32 at t)
fn ulp_err(y: f32, t: f64) -> f64 {
    let tf = t as f32; // nearest
    let ulp = if tf == 0.0 { f64::from(f32::from_bits(1)) } else {
        let b = tf.abs().to_bits();
        // ulp = spacing above |tf| rounded-down power
        let e = (b >> 23) as i32; if e == 0 { f64::from(f32::from_bits(1)) } else { 2f64.powi(e - 127 - 23) }
    };
    (y as f64 - t).abs() / ulp
}
fn main() {
    let step: u32 = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(1);
    let mut worst = (0.0f64, 0.0f32);
    let mut worst_small = (0.0f64, 0.0f32);
    let mut worst_large = (0.0f64, 0.0f32);
    let mut bits: u32 = 0;
    let mut n: u64 = 0;
    loop {
        for sign in [0u32, 0x8000_0000] {
            let x = f32::from_bits(bits | sign);
            let y = tanh_lib(x);
            if x.is_nan() { assert!(y.is_nan()); continue; }
            let t = (x as f64).tanh();
            let e = ulp_err(y, t);
            n += 1;
            if e > worst.0 { worst = (e, x); }
            if x.abs() < 0.6 { if e > worst_small.0 { worst_small = (e, x); } } else if e > worst_large.0 { worst_large = (e, x); }
        }
        match bits.checked_add(step) { Some(b) if b <= 0x7fff_ffff => bits = b, _ => break }
    }
    println!("n={n} worst={:.4} ulp at x={:e} ({:#010x}); small arm worst {:.4} at {:e}; large arm worst {:.4} at {:e} ({:#010x})",
        worst.0, worst.1, worst.1.to_bits(), worst_small.0, worst_small.1, worst_large.0, worst_large.1, worst_large.1.to_bits());
    for x in [0.0f32, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-45, -1e-45, 1.1754942e-38, 0.6, 0.59999996, 9.01, 9.0099993, 9.010001, -9.01] {
        let y = tanh_lib(x);
        println!("x={x:e} ({:#010x}) -> {y:e} ({:#010x}) std {:e} ({:#010x})", x.to_bits(), y.to_bits(), x.tanh(), x.tanh().to_bits());
    }
}
