//! Device builds of small kernel crates at the seam between `#[kernel]`'s generated code and
//! the user's (audit 2026-11-27, P1): the kernel body is type-checked as the `fn` the user
//! wrote, on the GPU build too. Code under `#[cfg(target_arch = "nvptx64")]` is compiled only
//! by the device build, so these checks build for nvptx64 through the builder; the host copy of
//! the same cases is in tests/compile_fail/seams/ (trybuild).
//!
//! Every entry form is covered: a plain kernel, a generic kernel's instances, a cluster kernel
//! (`cluster_dims`), a kernel with launch bounds (the form a cooperative launch uses: on the
//! device a cooperative kernel is a plain entry, only its launch differs), a programmatic
//! dependent launch secondary (`wait_for_prerequisites`), a matrix output with a `cols(..)`
//! width, and an `unsafe fn` kernel (raw pointers), which keeps its meaning.

#[path = "common/ptx.rs"]
mod ptx_text;
#[path = "common/scratch_crate.rs"]
mod scratch_crate;
use ptx_text::entry_body;

use std::path::PathBuf;

use ferrocuda_builder::{Arch, BuildError, KernelBuilder};

/// One unsafe operation per entry form, each without an `unsafe` block, each only in the
/// device build. Before the fix (the body pasted into the generated `unsafe extern "ptx-kernel"
/// fn`) this crate built without an error or a warning; the marker comment names each line.
const UNSAFE_CONTEXT: &str = r#"#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
use ferrocuda_device::global::{DisjointMatrix, DisjointSlice, unique_cell, unique_index};
use ferrocuda_device::kernel;

#[kernel]
pub fn plain(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 1;
    }
    #[cfg(target_arch = "nvptx64")]
    {
        *out.get_unchecked_mut(1usize << 33) = 7; // P1:plain
    }
}

#[kernel(instances(u32, f32))]
pub fn generic<T: bytemuck::Pod + Default>(mut out: DisjointSlice<T>) {
    #[cfg(target_arch = "nvptx64")]
    {
        *out.get_unchecked_mut(1usize << 33) = T::default(); // P1:generic
    }
}

#[kernel(cluster_dims(2))]
pub fn cluster(mut out: DisjointSlice<u32>) {
    ferrocuda_device::cluster::sync();
    if let Some(o) = out.get_mut(unique_index()) {
        *o = ferrocuda_device::cluster::block_rank();
    }
    #[cfg(target_arch = "nvptx64")]
    {
        let mut local = 0u32;
        let pointer = &mut local as *mut u32;
        *pointer.add(1 << 20) = 7; // P1:cluster
    }
}

#[kernel(launch_bounds(256, 2))]
pub fn cooperative(flag: u32, mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = flag;
    }
    #[cfg(target_arch = "nvptx64")]
    {
        if flag == 7 {
            core::hint::unreachable_unchecked(); // P1:cooperative
        }
    }
}

#[kernel]
pub fn pdl(x: &[u32], mut out: DisjointSlice<u32>) {
    ferrocuda_device::grid_dependency::wait_for_prerequisites();
    let i = unique_index();
    #[cfg(target_arch = "nvptx64")]
    {
        *out.get_unchecked_mut(i.get() + 1) = x.len() as u32; // P1:pdl
    }
}

#[kernel(cols(out = width))]
pub fn matrix(width: u32, mut out: DisjointMatrix<u32>) {
    if let Some(o) = out.get_mut(unique_cell()) {
        *o = width;
    }
    #[cfg(target_arch = "nvptx64")]
    {
        let bytes = [b'o', b'k'];
        let _text = core::str::from_utf8_unchecked(&bytes); // P1:matrix
    }
}

#[kernel(cols(out = core::num::NonZeroU32::new_unchecked(4).get()))] // P1:cols
pub fn width_from_unsafe(mut out: DisjointMatrix<u32>) {
    if let Some(o) = out.get_mut(unique_cell()) {
        *o = 1;
    }
}
"#;

/// Every entry form under `#![forbid(unsafe_code)]`, with device-only code: nothing the macro
/// generates may trip the lint (its own `unsafe` is not the user's), and nothing of the user's
/// may hide in it.
const FORBID_UNSAFE_CODE: &str = r#"#![forbid(unsafe_code)]
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
use ferrocuda_device::global::{AtomicSlice, DisjointMatrix, DisjointSlice, unique_cell, unique_index};
use ferrocuda_device::kernel;

#[kernel]
pub fn plain(x: &[u32], mut out: DisjointSlice<u32>) {
    let i = unique_index();
    if let (Some(o), Some(v)) = (out.get_mut(i), x.get(i.get())) {
        *o = *v + 1;
    }
}

#[kernel(instances(u32, f32))]
pub fn generic<T: bytemuck::Pod + Default>(mut out: DisjointSlice<T>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = T::default();
    }
}

#[kernel(cluster_dims(2))]
pub fn cluster(mut out: DisjointSlice<u32>) {
    ferrocuda_device::cluster::sync();
    if let Some(o) = out.get_mut(unique_index()) {
        *o = ferrocuda_device::cluster::block_rank();
    }
}

#[kernel(launch_bounds(256, 2))]
pub fn cooperative(counts: AtomicSlice<u32>) {
    counts.fetch_add(0, 1);
}

#[kernel(same_len(x, out))]
pub fn pdl(x: &[u32], mut out: DisjointSlice<u32>) {
    ferrocuda_device::grid_dependency::wait_for_prerequisites();
    let i = unique_index();
    if let (Some(o), Some(v)) = (out.get_mut(i), x.get(i.get())) {
        *o = *v;
    }
}

const WIDTH: u32 = 16;

#[kernel(cols(a = width, b = WIDTH * 2))]
pub fn matrix(width: u32, mut a: DisjointMatrix<u32>, mut b: DisjointMatrix<u32>) {
    let cell = unique_cell();
    if let Some(o) = a.get_mut(cell) {
        *o = width;
    }
    if let Some(o) = b.get_mut(cell) {
        *o = WIDTH;
    }
}

/// Named like the crate root's `plain` (P13): its own PTX name makes both entries.
pub mod other {
    use ferrocuda_device::global::{DisjointSlice, unique_index};
    use ferrocuda_device::kernel;

    #[kernel(name = "plain_in_other")]
    pub fn plain(mut out: DisjointSlice<u32>) {
        if let Some(o) = out.get_mut(unique_index()) {
            *o = 2;
        }
    }
}
"#;

/// An `unsafe fn` kernel (raw pointers) keeps its meaning: its body follows the edition's
/// rules, so an unsafe operation without an `unsafe` block is `unsafe_op_in_unsafe_fn`'s
/// warning in edition 2024 (an error where the crate denies the lint), and the builder
/// forwards that warning, code and notes included.
const UNSAFE_FN: &str = r#"#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
use ferrocuda_device::kernel;

/// # Safety
/// `p` points to device memory valid for a write.
#[kernel]
pub unsafe fn raw_store(p: *mut u32) {
    *p = 1; // P1:unsafe_fn
}
"#;

/// Audit 2026-11-27b, Q3: a `cols(..)` width given only to the device build (`cfg_attr`) was
/// expanded inside the generated `unsafe extern "ptx-kernel" fn` entry, where an unsafe call
/// is only `unsafe_op_in_unsafe_fn`'s warning: the crate built under `forbid(unsafe_code)`.
const DEVICE_ONLY_WIDTH: &str = r#"#![forbid(unsafe_code)]
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
use ferrocuda_device::global::{DisjointMatrix, unique_cell};
use ferrocuda_device::kernel;

#[cfg_attr(target_arch = "nvptx64", kernel(cols(out = core::num::NonZeroU32::new_unchecked(8).get())))] // P1:q3
#[cfg_attr(not(target_arch = "nvptx64"), kernel(cols(out = 8)))]
pub fn device_only_width(mut out: DisjointMatrix<u32>) {
    if let Some(o) = out.get_mut(unique_cell()) {
        *o = 1;
    }
}
"#;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A kernel crate `name` holding `source`, depending on this checkout's device library (and
/// bytemuck for the generic kernels), with the workspace's lock file.
fn kernel_crate(name: &str, source: &str) -> PathBuf {
    scratch_crate::kernel_crate(name, source, "bytemuck = { version = \"1\", features = [\"derive\"] }\n")
}

/// The 1-based line of `source` carrying the marker comment `// P1:<form>`.
fn line_of(source: &str, form: &str) -> usize {
    let marker = format!("// P1:{form}");
    source.lines().position(|l| l.contains(&marker)).unwrap_or_else(|| panic!("no {marker}")) + 1
}

fn build(name: &str, source: &str) -> Result<ferrocuda_builder::Artifacts, BuildError> {
    let dir = kernel_crate(name, source);
    // A target directory shared between tests keeps `core` built once.
    let target = workspace().join("target/ferrocuda-test-device");
    KernelBuilder::new(&dir).arch(Arch::SM_90).out_dir(&dir).target_dir(&target).build()
}

/// Regression (P1): a kernel's body ran inside the generated `unsafe extern "ptx-kernel" fn`,
/// so on the device an unsafe operation compiled with no `unsafe` written, without even a
/// warning (the audit's kernel wrote outside its view, faulted, and raced on an H100). Now each
/// entry form refuses it with E0133, at the user's line. The `cols(..)` width expression, which
/// was expanded inside a generated `unsafe` block, is refused as well.
#[test]
fn p1_device_only_unsafe_operations_need_an_unsafe_block_in_every_entry_form() {
    let error = build("p1-unsafe-context", UNSAFE_CONTEXT).expect_err("the crate has unsafe operations without `unsafe`");
    let message = ferrocuda_builder::strip_ansi(&error.to_string());
    assert!(matches!(error, BuildError::Compile { .. }), "{message}");
    for form in ["plain", "generic", "cluster", "cooperative", "pdl", "matrix", "cols"] {
        let line = line_of(UNSAFE_CONTEXT, form);
        let at = format!("src/lib.rs:{line}:");
        let position = message.find(&at).unwrap_or_else(|| panic!("no error at {at} ({form}):\n{message}"));
        // The error whose location this is: the last `error` line before it.
        let heading = message[..position].lines().rev().find(|l| l.starts_with("error")).unwrap_or("");
        assert!(heading.starts_with("error[E0133]:") && heading.contains("requires unsafe block"), "{form} at {at}: {heading}\n{message}");
    }
    // One error for each generic instance would be two; rustc reports the function once. The
    // cluster line holds two (the `add` call and the dereference). The `cols` width is an
    // error since Q3 (a `const` item outside the entry); before, in the `unsafe fn` entry, it
    // was a warning, and the heading search above found the previous form's error.
    assert_eq!(message.matches("error[E0133]").count(), 8, "{message}");
    assert!(!message.contains("warning[E0133]"), "no user expression inside the generated `unsafe fn`: {message}");
}

/// `#![forbid(unsafe_code)]` in a kernel crate: every entry form builds for the device (the
/// macro's own `unsafe` is attributed to the macro, the user's code has none), and the PTX has
/// every entry.
#[test]
fn p1_a_kernel_crate_that_forbids_unsafe_code_builds_for_the_device() {
    let artifacts = build("p1-forbid-unsafe-code", FORBID_UNSAFE_CODE).unwrap_or_else(|e| panic!("{}", ferrocuda_builder::strip_ansi(&e.to_string())));
    let ptx = std::fs::read_to_string(&artifacts.ptx[0].1).unwrap();
    for entry in ["plain", "generic_u32", "generic_f32", "cluster", "cooperative", "pdl", "matrix", "plain_in_other"] {
        let _ = entry_body(&ptx, entry);
    }
    assert!(!artifacts.warnings.iter().any(|w| w.contains("unsafe")), "{:#?}", artifacts.warnings);
}

/// An `unsafe fn` kernel keeps its meaning (its body is the user's `unsafe fn`, under the
/// edition's `unsafe_op_in_unsafe_fn`), and the device build's coded warning reaches the user:
/// `warning[E0133]` with its location and notes (the builder forwarded only lines starting
/// `warning:`, and only their first line).
#[test]
fn p1_an_unsafe_fn_kernel_keeps_the_editions_rules_and_its_coded_warning_is_forwarded() {
    let artifacts = build("p1-unsafe-fn", UNSAFE_FN).unwrap_or_else(|e| panic!("{}", ferrocuda_builder::strip_ansi(&e.to_string())));
    let line = line_of(UNSAFE_FN, "unsafe_fn");
    let warning =
        artifacts.warnings.iter().find(|w| w.starts_with("warning[E0133]")).unwrap_or_else(|| panic!("no warning[E0133] among {:#?}", artifacts.warnings));
    assert!(warning.contains(&format!("src/lib.rs:{line}:")), "{warning}");
    assert!(warning.contains("dereference of raw pointer is unsafe and requires unsafe block"), "{warning}");
    assert!(warning.lines().count() > 3 && warning.contains("= note:"), "the whole rendering, notes included: {warning}");

    // Denying the lint makes it an error, as in any `unsafe fn` the user writes.
    let denied = format!("#![deny(unsafe_op_in_unsafe_fn)]\n{UNSAFE_FN}");
    let error = build("p1-unsafe-fn-denied", &denied).expect_err("the lint is denied");
    let message = ferrocuda_builder::strip_ansi(&error.to_string());
    assert!(message.contains("error[E0133]") && message.contains(&format!("src/lib.rs:{}:", line + 1)), "{message}");
}

/// Regression (audit 2026-11-27b, Q3): a constant `cols(..)` width is bound in a `const` item
/// beside the kernel, outside the generated `unsafe fn` entry, on the device build as on the
/// host: an unsafe call in a width given only to the device build is E0133 at the user's
/// line (it built, with a warning, before).
#[test]
fn q3_a_device_only_cols_width_is_not_inside_the_unsafe_entry() {
    let error = build("q3-device-only-width", DEVICE_ONLY_WIDTH).expect_err("the width calls an unsafe fn without `unsafe`");
    let message = ferrocuda_builder::strip_ansi(&error.to_string());
    assert!(matches!(error, BuildError::Compile { .. }), "{message}");
    let at = format!("src/lib.rs:{}:", line_of(DEVICE_ONLY_WIDTH, "q3"));
    let position = message.find(&at).unwrap_or_else(|| panic!("no error at {at}:\n{message}"));
    let heading = message[..position].lines().rev().find(|l| l.starts_with("error")).unwrap_or("");
    assert!(heading.starts_with("error[E0133]:") && heading.contains("requires unsafe block"), "{heading}\n{message}");
}

/// The start of both G19R-1 rename crates: a macro makes `::ferrocuda_device` the crate itself
/// (the builder's text check of `extern crate` items does not see it), re-exporting the real
/// device crate but for a `key_of` that returns 0 ("unknown"), and `Word`, plain data in the
/// host build and a `&'static mut u32` in the device build. A macro, so that `concat!` joins it.
macro_rules! renamed_device_prelude {
    () => {
        r#"#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
macro_rules! rename {
    ($name:ident) => {
        extern crate self as $name;
    };
}
rename!(ferrocuda_device);
pub use real_device::*;
pub mod __private {
    pub use real_device::__private::*;
    pub const fn key_of<T: ?Sized>() -> u64 {
        0
    }
}

#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Word(pub u64);

#[cfg(target_arch = "nvptx64")]
#[repr(C)]
pub struct Word(pub &'static mut u32);
"#
    };
}

/// G19R-1 (audit 2026-11-28g), the device half: a kernel crate whose `::ferrocuda_device` is a
/// module of its own (`extern crate self as ferrocuda_device;`, written through a macro so the
/// builder's text check of `extern crate` items does not see it: that check is defence in
/// depth), re-exporting the real device crate but for a `key_of` without a bound that returns
/// 0. Its by-value parameter is plain data in the host build and a `&'static mut u32` in the
/// device build. Before session 20 the device build compiled (the entry took the parameter as
/// the device build's type, bounded by nothing but the renamed `key_of`) and a safe launch wrote
/// 42 wherever the host's integer pointed. Now the entry rebuilds the parameter through the
/// device crate's `by_value`, bounded by `Pod`, and the device build refuses the reference.
const RENAMED_DEVICE_BY_VALUE: &str = concat!(
    renamed_device_prelude!(),
    r#"
impl Word {
    #[inline(always)]
    fn poke(self) {
        #[cfg(target_arch = "nvptx64")]
        {
            *self.0 = 42;
        }
    }
}

#[real_device::kernel]
pub fn poke(w: Word) { // G19R-1:word
    w.poke();
}
"#
);

#[test]
fn g19r_1_a_renamed_device_runtime_gets_no_reference_by_value_on_the_device() {
    let error = build_with_real_device_as("g19r1-renamed-device", RENAMED_DEVICE_BY_VALUE)
        .expect_err("G19R-1: the device build took a `&'static mut u32` by value from a host integer");
    let message = ferrocuda_builder::strip_ansi(&error.to_string());
    println!("{message}");
    assert!(matches!(error, BuildError::Compile { .. }), "{message}");
    assert!(message.contains("error[E0277]") && message.contains("Pod"), "refused for `Pod`, the device crate's own bound: {message}");
    let line = RENAMED_DEVICE_BY_VALUE.lines().position(|l| l.contains("// G19R-1:word")).unwrap() + 1;
    assert!(message.contains(&format!("src/lib.rs:{line}:")), "at the parameter's type: {message}");
}

/// A kernel crate `name` holding `source` that depends on the device library as `real_device`
/// (so that a macro can make `::ferrocuda_device` the crate itself, as G19R-1's rename written so
/// that the builder's text check does not see it), built for sm_90.
fn build_with_real_device_as(name: &str, source: &str) -> Result<ferrocuda_builder::Artifacts, BuildError> {
    let workspace = workspace();
    let dir = workspace.join("target/test-scratch").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n[lib]\ncrate-type = [\"rlib\"]\n\
             [dependencies]\nreal_device = {{ package = \"ferrocuda-device\", path = \"{}\" }}\n\
             bytemuck = {{ version = \"1\", features = [\"derive\"] }}\n[workspace]\n",
            workspace.join("device").display()
        ),
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), source).unwrap();
    std::fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let target = workspace.join("target/ferrocuda-test-device");
    KernelBuilder::new(&dir).arch(Arch::SM_90).out_dir(&dir).target_dir(&target).build()
}

/// Session 21, the slice half of G19R-1: the g19r_1 crate's rename (`::ferrocuda_device` made the
/// crate itself through a macro, re-exporting the real one but for a `key_of` that returns 0,
/// "unknown") with the look-alike type as a *slice element* (a plain and an optional input)
/// instead of by value. The entry rebuilt slices with `core::slice::from_raw_parts` for the
/// device build's element type, bounded by nothing in that build (the `Pod` check lives in the
/// host's launcher module; the type tables are the device build's own), so this crate built and
/// its kernels read the host's integers as `&'static mut u32`s and loaded through them. Now
/// the entry rebuilds every slice through the device crate's `input`, bounded by `Pod` there.
const RENAMED_DEVICE_SLICE_ELEMENTS: &str = concat!(
    renamed_device_prelude!(),
    r#"
use real_device::global::{DisjointSlice, unique_index};

/// What the element holds: on the device, what its reference points to.
#[inline(always)]
fn peek(w: &Word) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    return *w.0;
    #[cfg(not(target_arch = "nvptx64"))]
    return w.0 as u32;
}

#[real_device::kernel]
pub fn poke_slice(x: &[Word], mut out: DisjointSlice<u32>) { // S21:slice
    if let (Some(w), Some(o)) = (x.first(), out.get_mut(unique_index())) {
        *o = peek(w);
    }
}

#[real_device::kernel]
pub fn poke_optional(x: Option<&[Word]>, mut out: DisjointSlice<u32>) { // S21:optional
    if let (Some(w), Some(o)) = (x.and_then(|x| x.first()), out.get_mut(unique_index())) {
        *o = peek(w);
    }
}
"#
);

#[test]
fn s21_g19r_1_a_renamed_device_runtime_gets_no_reference_as_a_slice_element_on_the_device() {
    let error = build_with_real_device_as("s21-renamed-device-slices", RENAMED_DEVICE_SLICE_ELEMENTS)
        .expect_err("session 21: the device build read host integers as `&'static mut u32` slice elements");
    let message = ferrocuda_builder::strip_ansi(&error.to_string());
    println!("{message}");
    assert!(matches!(error, BuildError::Compile { .. }), "{message}");
    // Reported at each kernel's attribute (the rebuild is generated code), naming the bound.
    for form in ["slice", "optional"] {
        let line = RENAMED_DEVICE_SLICE_ELEMENTS.lines().position(|l| l.contains(&format!("// S21:{form}"))).unwrap();
        let at = format!("src/lib.rs:{line}:");
        let position = message.find(&at).unwrap_or_else(|| panic!("no error at {at} ({form}):\n{message}"));
        let heading = message[..position].lines().rev().find(|l| l.starts_with("error")).unwrap_or("");
        assert!(
            heading.starts_with("error[E0277]") && heading.contains("Pod"),
            "{form}: refused for `Pod`, the device crate's own bound: {heading}\n{message}"
        );
    }
    assert_eq!(message.matches("required by a bound in `ferrocuda_device::global::__private::input`").count(), 2, "{message}");
}

/// Session 21, G19R-1's last residual: a kernel crate that makes `::core` its own. rustc refuses
/// an `extern crate .. as core;` written by a macro ("macro-expanded `extern crate` items cannot
/// shadow names passed with `--extern`"), and the builder refuses `extern crate self as core;`
/// as text (since session 21 also `r#core`), but not with a comment inside the item. The crate's `core` re-exports
/// the real modules but for `cell`, whose `UnsafeCell::get` returns an address of the crate's
/// choosing. The entry took each output's address parameter as `&::core::cell::UnsafeCell<..>`
/// and gave `.get().cast()` to the real `output` inside generated `unsafe`: this crate built,
/// and its safe kernel stored 42 at 0xdead0000 whatever buffer the launch lent. Now the entry
/// names `core` through `extern crate core as __ferrocuda_core;` in its own block (the crate
/// loader's `core`, not the name `::core` resolves to) and hands the parameter itself to
/// `output`: the build is harmless, and the store's address is the parameter's.
const RENAMED_CORE: &str = r#"#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
extern crate core as real_core;
#[cfg(target_arch = "nvptx64")]
extern crate self as core /* the builder's text check reads three words */;
#[cfg(target_arch = "nvptx64")]
pub use real_core::{any, arch, ffi, hint, marker, mem, num, option, panic, primitive, ptr, result, slice};
#[cfg(target_arch = "nvptx64")]
pub mod cell {
    pub struct UnsafeCell<T: ?Sized>(T);
    impl<T> UnsafeCell<T> {
        pub fn get(&self) -> *mut T {
            0xdead_0000usize as *mut T
        }
    }
}
use ferrocuda_device::global::{DisjointSlice, unique_index};

#[ferrocuda_device::kernel]
pub fn store_42(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 42;
    }
}
"#;

#[test]
fn s21_g19r_1_a_crate_that_makes_core_its_own_chooses_no_output_address() {
    let manifest_dir = kernel_crate("s21-renamed-core", RENAMED_CORE);
    // The builder's text check does not see this form (defence in depth; what holds is below).
    let target = workspace().join("target/ferrocuda-test-device");
    let artifacts = KernelBuilder::new(&manifest_dir)
        .arch(Arch::SM_90)
        .out_dir(&manifest_dir)
        .target_dir(&target)
        .build()
        .unwrap_or_else(|e| panic!("the crate builds (its `core` is now harmless): {}", ferrocuda_builder::strip_ansi(&e.to_string())));
    let ptx = std::fs::read_to_string(&artifacts.ptx[0].1).unwrap();
    let body = entry_body(&ptx, "store_42");
    println!("{body}");
    assert!(!body.contains("3735879680") && !body.to_ascii_lowercase().contains("dead0000"), "the crate's `UnsafeCell::get` chose the address: {body}");
    assert!(body.contains("[store_42_param_0]"), "the store's address is the parameter's: {body}");
    assert!(body.contains("st.global") && body.contains(", 42;"), "the kernel stores 42: {body}");
}

/// Session 21, `reqntid(n)`: the g19r_1 crate's rename with the launch-bounds marker made a
/// no-op (`::ferrocuda_device::launch_bounds!` is the crate's own macro). The entry told the
/// compiler the block was `(128, 1, 1)` while the PTX had no `.reqntid`, so nothing refused a
/// launch of 64-thread blocks (the launchers' check is reached through the same renamable
/// paths): the index was computed with the constant 128 (`shl.b32 .., 7`) for blocks of 64.
/// Now the assumption is the device crate's `__assume_reqntid::<128>`, whose comment in the
/// entry's body the builder turns into `.reqntid 128, 1, 1`: the directive is there without the
/// marker.
const RENAMED_LAUNCH_BOUNDS: &str = r#"#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
macro_rules! rename {
    ($name:ident) => {
        extern crate self as $name;
    };
}
rename!(ferrocuda_device);
pub use real_device::*;
#[macro_export]
macro_rules! launch_bounds {
    ($($anything:tt)*) => {};
}
use real_device::global::{DisjointSlice, unique_index};

#[real_device::kernel(reqntid(128))]
pub fn exact_128(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 2;
    }
}
"#;

#[test]
fn s21_a_renamed_launch_bounds_marker_leaves_no_reqntid_assumption_without_its_directive() {
    let artifacts = build_with_real_device_as("s21-renamed-launch-bounds", RENAMED_LAUNCH_BOUNDS)
        .unwrap_or_else(|e| panic!("{}", ferrocuda_builder::strip_ansi(&e.to_string())));
    let ptx = std::fs::read_to_string(&artifacts.ptx[0].1).unwrap();
    assert!(!ptx.contains("__ferrocuda_launch_bounds__"), "the marker is the crate's no-op");
    let start = ptx.find(".entry exact_128(").expect("the entry");
    let header = &ptx[start..start + ptx[start..].find("\n{").unwrap()];
    println!("{header}");
    assert!(header.contains(".reqntid 128, 1, 1"), "session 21: the entry assumes 128 threads, so its PTX must require them: {header}");
    assert!(ptx.contains("// ferrocuda.reqntid 128"), "the device crate's comment, which the directive comes from");
}
