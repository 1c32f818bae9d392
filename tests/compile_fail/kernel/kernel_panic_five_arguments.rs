// `kernel_panic!` keeps at most 4 arguments (the panic record's value slots, issue 20): a fifth
// is a compile error, not a value silently lost on the GPU.
fn check(a: u32, b: u32, c: u32, d: u32, e: u32) {
    if a > b {
        ferrocuda_device::kernel_panic!("{} {} {} {} {}", a, b, c, d, e);
    }
}

fn main() {
    check(1, 2, 3, 4, 5);
}
