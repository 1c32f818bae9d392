//! Does a module's kernel match its typed launcher? Its full-signature fingerprint (U7) and
//! its parameter sizes.

use std::ffi::CString;

use cudarc::driver::sys;

use crate::KernelSignature;
use crate::driver;
use crate::error::{Error, Result};
use crate::loader::driver_version;
use crate::module::raw::RawModule;

/// Compares the kernel's fingerprint global (`#[kernel]` writes one per entry point) with the
/// launcher's (U7). A module without the global (not built by `#[kernel]`) passes: its loader
/// vouched for it (`load_ptx` is `unsafe`).
pub(crate) fn check_fingerprint(raw: &RawModule, signature: &KernelSignature, module: &str) -> Result<()> {
    if signature.fingerprint == 0 {
        return Ok(());
    }
    let global = format!("{}{}", crate::FINGERPRINT_SYMBOL_PREFIX, signature.symbol);
    // A fingerprint is one `u64`; a global of another size is not ours.
    let Some((address, 8)) = locate_global(raw, &global) else { return Ok(()) };
    let mut found = [0u64];
    read_words(address, &mut found)?;
    let [found] = found;
    if found != signature.fingerprint {
        return Err(Error::KernelSignatureMismatch {
            kernel: signature.symbol.to_string(),
            module: module.to_string(),
            detail: format!(
                "the module's kernel was built with another signature than the launcher's `{}` (fingerprint {found:#018x}, launcher {:#018x}): element types differ even where sizes match",
                signature.canonical, signature.fingerprint
            ),
        });
    }
    Ok(())
}

/// Copies `words.len()` `u64`s from the device global at `address` (at least that long), on a
/// non-blocking stream of its own: a copy on the legacy default stream (`cuMemcpyDtoH`) would
/// join, and so invalidate, a capture in progress on a stream created with `CU_STREAM_DEFAULT`,
/// and a kernel's first launch (which checks) may come inside a capture.
fn read_words(address: sys::CUdeviceptr, words: &mut [u64]) -> Result<()> {
    read_words_batch(&mut [(address, words)])
}

/// [`read_words`] for many globals at once: every copy queued on one non-blocking stream and
/// waited for once (a module load reads two globals per kernel: one stream, not hundreds).
fn read_words_batch(copies: &mut [(sys::CUdeviceptr, &mut [u64])]) -> Result<()> {
    if copies.iter().all(|(_, words)| words.is_empty()) {
        return Ok(());
    }
    let mut stream = std::ptr::null_mut();
    // SAFETY: writes one stream handle (of the bound context), destroyed below.
    unsafe { driver::stream::create_with_priority(&mut stream, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32, 0) }?;
    let mut copied = Ok(());
    for (address, words) in copies.iter_mut().filter(|(_, words)| !words.is_empty()) {
        // SAFETY: each global holds at least `words.len()` u64s (the callers' size checks);
        // `words` is writable for as many and outlives the copy, which the synchronisation
        // below completes before this function returns (also when a later copy fails to queue).
        copied = unsafe { driver::memory::memcpy_dtoh_async(words.as_mut_ptr().cast(), *address, words.len() * 8, stream) };
        if copied.is_err() {
            break;
        }
    }
    // SAFETY: the stream was created above and is alive.
    let synchronised = unsafe { driver::stream::synchronize(stream) };
    // SAFETY: created above, destroyed once, its work complete (or failed).
    let _ = unsafe { driver::stream::destroy(stream) };
    copied?;
    synchronised?;
    Ok(())
}

/// Compares the kernel's layout global (`#[kernel]` writes one per entry point with
/// parameters: each parameter's element size, alignment and constant `cols(..)` widths, as the
/// device build resolved them) with the launcher's, computed by the host build (Q1, Q2: a `cfg`
/// may give one name another type, or one `cols(..)` another width, on each build; the
/// fingerprint, made from tokens, cannot see it). A module without the global passes, as for
/// the fingerprint. Reads the module's memory now (an embedded module's kernels are checked
/// against the [`CheckTables`] read when it was loaded instead).
pub(crate) fn check_layout(raw: &RawModule, signature: &KernelSignature, module: &str) -> Result<()> {
    check_layout_in(&mut |global| read_global(raw, global), signature, module)
}

/// A source of a module's check globals: the words of the named global, `None` when the
/// module has none (the device, or [`CheckTables`]).
pub(crate) type GlobalSource<'a> = dyn FnMut(&str) -> Result<Option<Vec<u64>>> + 'a;

/// [`check_layout`] with the module's check globals read through `global`.
pub(crate) fn check_layout_in(global: &mut GlobalSource<'_>, signature: &KernelSignature, module: &str) -> Result<()> {
    if signature.layout.is_empty() {
        return Ok(());
    }
    let Some(found) = global(&format!("{}{}", crate::LAYOUT_SYMBOL_PREFIX, signature.symbol))? else { return Ok(()) };
    if let Some(detail) = layout_difference(signature, &found) {
        return Err(Error::KernelSignatureMismatch { kernel: signature.symbol.to_string(), module: module.to_string(), detail });
    }
    check_type_names(global, signature, module)
}

/// The second half of the first-launch check: the device build's table of element type names
/// (`__ferrocuda_types_<symbol>`, hashed) against the host build's (audit 2026-11-27b: a
/// `cfg`-chosen `u32` on the host and `f32` on the device have one layout). A module without
/// the table (not built by `#[kernel]`, or by an older one) is not checked.
fn check_type_names(global: &mut GlobalSource<'_>, signature: &KernelSignature, module: &str) -> Result<()> {
    if signature.type_names.is_empty() {
        return Ok(());
    }
    let Some(found) = global(&format!("{}{}", crate::TYPES_SYMBOL_PREFIX, signature.symbol))? else { return Ok(()) };
    match type_name_difference(signature, &found) {
        None => Ok(()),
        Some(detail) => Err(Error::KernelSignatureMismatch { kernel: signature.symbol.to_string(), module: module.to_string(), detail }),
    }
}

/// The words of the module global `name` (whole `u64`s), read from the device now; `None`
/// when the module has no such global.
fn read_global(raw: &RawModule, name: &str) -> Result<Option<Vec<u64>>> {
    let Some((address, bytes)) = locate_global(raw, name) else { return Ok(None) };
    let mut found = vec![0u64; bytes / 8];
    read_words(address, &mut found)?;
    Ok(Some(found))
}

/// The address and size in bytes of the global `name` of the module `raw` (`None` when the
/// module has no such global; not asked for when its image rules the name out). Readers keep
/// whole `u64`s of it.
fn locate_global(raw: &RawModule, name: &str) -> Option<(sys::CUdeviceptr, usize)> {
    if !raw.symbols.may_hold(name) {
        return None;
    }
    let name = CString::new(name).ok()?;
    let (mut address, mut bytes) = (0, 0);
    // SAFETY: looks a global up by a NUL-terminated name in a loaded module.
    unsafe { driver::module::get_global(&mut address, &mut bytes, raw.raw, name.as_ptr()) }.ok()?;
    Some((address, bytes))
}

/// The check globals (layout and type-name tables) of every kernel of an embedded module, read
/// once when the module is loaded, before any of its kernels runs (P12, s9-p12): a kernel's
/// first launch then compares with these host copies and reads no device memory. A read at
/// the first launch is a copy the host waits for while the context's earlier work runs; behind
/// a kernel that never ends (`spin_for(u64::MAX)`, then the first launch of `mark_blocks`)
/// nothing bounds that wait, and the launch, which the caller takes for asynchronous, could
/// block the host before its `synchronize_timeout` is reached. A global the tables lack (a
/// driver before 12.4 lists no kernels, a failed read) is read from the device at the first
/// launch, as for explicit modules: the check is never skipped for want of a table.
#[derive(Default)]
pub(crate) struct CheckTables {
    /// Each check global of the module read at load: its name and its words.
    tables: Vec<(String, Vec<u64>)>,
}

impl CheckTables {
    /// Reads the check globals of `functions`, every kernel of the loaded module `raw` (the
    /// module's context is current); `None` (the kernels could not be listed): empty tables.
    pub(crate) fn read(raw: &RawModule, functions: Option<&[sys::CUfunction]>) -> Self {
        let mut found = Vec::new();
        for &function in functions.unwrap_or_default() {
            let mut name = std::ptr::null();
            // SAFETY: writes one pointer to the kernel's NUL-terminated name, owned by the driver.
            if unsafe { driver::function::get_name(&mut name, function) }.is_err() || name.is_null() {
                continue;
            }
            // SAFETY: a NUL-terminated string the driver keeps while the module is loaded.
            let symbol = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned();
            for prefix in [crate::LAYOUT_SYMBOL_PREFIX, crate::TYPES_SYMBOL_PREFIX] {
                let global = format!("{prefix}{symbol}");
                if let Some((address, bytes)) = locate_global(raw, &global) {
                    found.push((global, address, vec![0u64; bytes / 8]));
                }
            }
        }
        // One stream and one wait for all of them; a failed read leaves the tables empty, and
        // each kernel's first launch then reads its globals itself (never skipped).
        let mut copies: Vec<_> = found.iter_mut().map(|(_, address, words)| (*address, words.as_mut_slice())).collect();
        if read_words_batch(&mut copies).is_err() {
            return CheckTables::default();
        }
        CheckTables { tables: found.into_iter().map(|(global, _, words)| (global, words)).collect() }
    }

    /// The words of the check global `name` of the module `raw` (`None` when the module has no
    /// such global): from the tables, else from the device.
    pub(crate) fn global(&self, raw: &RawModule, name: &str) -> Result<Option<Vec<u64>>> {
        match self.lookup(name) {
            Some(words) => Ok(Some(words)),
            None => read_global(raw, name),
        }
    }

    /// The words the tables hold for `name` (unit-tested).
    fn lookup(&self, name: &str) -> Option<Vec<u64>> {
        self.tables.iter().find(|(global, _)| global == name).map(|(_, words)| words.clone())
    }
}

/// Compares the host build's element type names (`signature.type_names`) with the device
/// build's keys: `None` when they agree (or are unknown), else the first parameter whose type
/// differs, as a sentence for the error.
pub(crate) fn type_name_difference(signature: &KernelSignature, device: &[u64]) -> Option<String> {
    if signature.type_names.is_empty() || signature.type_names.len() != device.len() {
        return None;
    }
    // The host build's key of each type: its `LayoutKey` (F1) where the launcher has the
    // keys, else the key of its name.
    let host_key = |index: usize, name: &str| match signature.type_keys.get(index) {
        Some(Some(key)) if signature.type_keys.len() == device.len() => key(),
        _ => crate::type_key(name),
    };
    // A launcher with keys (every `#[kernel]` since session 10) pairs with a device table the
    // same macro wrote, where every parameter has a key (tensor maps too, G17R-4) and the real
    // `key_of` never gives 0: a 0 on either side was written by something else (a renamed
    // `::ferrocuda_device` whose `key_of` returns 0, G19R-1), so it no longer means "unknown".
    // Only a launcher without keys (older) leaves a device 0 unchecked.
    let keyed = signature.type_keys.len() == device.len() && !signature.type_keys.is_empty();
    let (index, name) = signature.type_names.iter().zip(device).enumerate().find_map(|(index, (host, &key))| {
        let name = host.map(|f| f())?;
        let host_key = host_key(index, name);
        let differs = host_key != key && key != 0;
        let zero = keyed && matches!(signature.type_keys.get(index), Some(Some(_))) && (key == 0 || host_key == 0);
        (differs || zero).then_some((index, name))
    })?;
    let param = signature.param_names.get(index).copied().unwrap_or("?");
    Some(format!(
        "parameter `{param}` (#{index}) of `{}`: its element (or value) type is `{name}` in the host build but another type of the same size and \
         alignment in the device build (its name differs, or, for a type with a `LayoutKey`, its fields' names, order, offsets or \
         types), or, for an output, another partition (`DisjointSlice<T, P>` with another `P`); the host and the device builds must see the same types: a `cfg`/`cfg_attr` on `target_arch` (or another cfg the \
         two builds set differently) gives them different ones",
        signature.symbol
    ))
}

/// Compares the launcher's layout (`signature.layout`) with the one a device module holds for
/// the kernel: `None` when they agree (or the launcher's is unknown), else what differs,
/// naming the parameter, as a sentence for the error.
pub(crate) fn layout_difference(signature: &KernelSignature, device: &[u64]) -> Option<String> {
    const FIX: &str = "the host and the device builds must see the same types and `cols(..)` widths: \
                       a `cfg`/`cfg_attr` on `target_arch` (or another cfg the two builds set differently) gives them different ones";
    if signature.layout.is_empty() || signature.layout == device {
        return None;
    }
    if signature.layout.len() != device.len() {
        return Some(format!(
            "the module's kernel has {} parameters, the launcher {}; {FIX}",
            device.len() / crate::LAYOUT_WORDS,
            signature.layout.len() / crate::LAYOUT_WORDS
        ));
    }
    let chunks = signature.layout.chunks(crate::LAYOUT_WORDS).zip(device.chunks(crate::LAYOUT_WORDS));
    let (index, (host, gpu)) = chunks.enumerate().find(|(_, (h, d))| h != d)?;
    let name = signature.param_names.get(index).copied().unwrap_or("?");
    let detail = if host[..2] != gpu[..2] {
        format!(
            "its element (or value) type is {} bytes, align {}, in the host build but {} bytes, align {}, in the device build",
            host[0], host[1], gpu[0], gpu[1]
        )
    } else {
        let widths = |w: u64| format!("({}, {})", w & 0xffff_ffff, w >> 32);
        format!("its constant `cols(..)` width is {} in the host build but {} in the device build", widths(host[2]), widths(gpu[2]))
    };
    Some(format!("parameter `{name}` (#{index}) of `{}`: {detail}; {FIX}", signature.symbol))
}

/// Compares the kernel's PTX parameters with what its launcher passes.
///
/// The driver tells the count only by failing: `cuFuncGetParamInfo` for the index past the
/// last parameter. compute-sanitizer reports failed calls as errors, so the count comes from
/// the image where it can: PTX text declares it, and when the module holds the kernel's layout
/// table [`check_layout`] has already compared it (one entry per parameter). Only a cubin or
/// fatbin not built by `#[kernel]` is still asked with that one failing call.
pub(crate) fn check_params(raw: &RawModule, function: sys::CUfunction, signature: &KernelSignature, module: &str) -> Result<()> {
    const PARAM_INFO: (u32, u32) = (12, 4);
    if driver_version()? < PARAM_INFO {
        return Ok(()); // cuFuncGetParamInfo does not exist before CUDA 12.4.
    }
    let mismatch = |detail: String| Error::KernelSignatureMismatch { kernel: signature.symbol.to_string(), module: module.to_string(), detail };
    let layout = format!("{}{}", crate::LAYOUT_SYMBOL_PREFIX, signature.symbol);
    let compared = !signature.layout.is_empty() && raw.symbols.is_known() && raw.symbols.may_hold(&layout);
    let count = raw.symbols.param_count(signature.symbol).or(compared.then_some(signature.param_sizes.len()));
    let mut found = Vec::new();
    loop {
        if count.is_some_and(|n| found.len() == n) {
            break;
        }
        let (mut offset, mut size) = (0, 0);
        // SAFETY: writes two sizes; an index past the last parameter returns an error.
        let info = unsafe { driver::function::get_param_info(function, found.len(), &mut offset, &mut size) };
        if info.is_err() || found.len() > 4096 {
            break;
        }
        found.push(size);
    }
    let expected = signature.param_sizes;
    if found.len() != expected.len() {
        return Err(mismatch(format!(
            "the module's kernel has {} parameters, the launcher passes {} (sizes in bytes: module {found:?}, launcher {expected:?})",
            found.len(),
            expected.len()
        )));
    }
    if let Some(i) = (0..found.len()).find(|&i| found[i] != expected[i]) {
        return Err(mismatch(format!("parameter {i} is {} bytes in the module but {} bytes in the launcher", found[i], expected[i])));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout_words;

    const fn concat(a: [u64; 3], b: [u64; 3]) -> [u64; 6] {
        [a[0], a[1], a[2], b[0], b[1], b[2]]
    }

    /// Q1: a `cfg` alias that is `u32` on the host and `u64` on the device has the same tokens
    /// (same fingerprint) but another layout, and the difference names the parameter.
    #[test]
    fn q1_layout_tells_resolved_element_types_apart() {
        const HOST: [u64; 6] = concat(layout_words(4, 4, [0, 0]), layout_words(4, 4, [0, 0]));
        const DEVICE: [u64; 6] = concat(layout_words(4, 4, [0, 0]), layout_words(8, 8, [0, 0]));
        let host = KernelSignature {
            layout: &HOST,
            param_names: &["x", "out"],
            ..KernelSignature::new("cfg_alias", &[8, 8, 8, 8], "cfg_alias(& [Elem],DisjointSlice < Elem >)")
        };
        assert_eq!(layout_difference(&host, &HOST), None);
        let why = layout_difference(&host, &DEVICE).expect("u32 on the host, u64 on the device must differ");
        assert!(why.contains("parameter `out` (#1)") && why.contains("4 bytes") && why.contains("8 bytes") && why.contains("same types"), "{why}");
        // Another parameter count is a difference too; an unknown host layout checks nothing.
        assert!(layout_difference(&host, &HOST[..3]).is_some());
        assert_eq!(layout_difference(&KernelSignature::new("k", &[], "k()"), &DEVICE), None);
    }

    /// Q1's same-size case (audit 2026-11-27b): `u32` on the host and `f32` on the device have
    /// one layout (4 bytes, align 4) but two type names; the difference names the parameter
    /// and the host's type.
    #[test]
    fn q1_same_size_cfg_types_are_told_apart_by_their_names() {
        const NAMES: [Option<fn() -> &'static str>; 2] = [Some(std::any::type_name::<f32>), Some(std::any::type_name::<u32>)];
        let host = KernelSignature { type_names: &NAMES, param_names: &["x", "out"], ..KernelSignature::new("cfg_same_size", &[8, 8, 8, 8], "") };
        let same = [crate::type_key("f32"), crate::type_key("u32")];
        assert_eq!(type_name_difference(&host, &same), None);
        let device = [crate::type_key("f32"), crate::type_key("f32")];
        let why = type_name_difference(&host, &device).expect("u32 on the host, f32 on the device must differ");
        assert!(why.contains("parameter `out` (#1)") && why.contains("`u32` in the host build") && why.contains("same types"), "{why}");
        let signed = [crate::type_key("f32"), crate::type_key("i32")];
        assert!(type_name_difference(&host, &signed).is_some(), "i32 and u32 differ too");
        // A tensor map (key 0) and an unknown table check nothing.
        assert_eq!(type_name_difference(&host, &[crate::type_key("f32"), 0]), None);
        assert_eq!(type_name_difference(&KernelSignature::new("k", &[], ""), &device), None);
    }

    /// P12 (s9-p12): the tables read when an embedded module is loaded answer a kernel's
    /// first-launch check without the device; a global they lack is left to the device (never
    /// taken for a module without the global). The check still finds a mismatch from the
    /// tables' words.
    #[test]
    fn p12_first_launch_checks_answer_from_the_tables_read_at_load() {
        const HOST: [u64; 3] = layout_words(4, 4, [0, 0]);
        let tables = |words: Vec<u64>| CheckTables { tables: vec![("__ferrocuda_layout_k".to_string(), words)] };
        let held = tables(HOST.to_vec());
        assert_eq!(held.lookup("__ferrocuda_layout_k"), Some(HOST.to_vec()));
        assert_eq!(held.lookup("__ferrocuda_types_k"), None, "not in the tables: read from the device");
        let signature = KernelSignature { layout: &HOST, param_names: &["x"], ..KernelSignature::new("k", &[8, 8], "") };
        let check = |tables: CheckTables| check_layout_in(&mut |g| Ok(tables.lookup(g)), &signature, "m");
        assert!(check(tables(HOST.to_vec())).is_ok());
        let other = check(tables(layout_words(8, 8, [0, 0]).to_vec()));
        assert!(matches!(other, Err(Error::KernelSignatureMismatch { .. })), "{other:?}");
    }

    /// F1 (audit 2026-11-27c): where the launcher has the host build's structural keys
    /// (`LayoutKey`: fields' names, offsets, types), those are compared, not the names: a
    /// struct `Pair` whose fields a `cfg` permutes on the device has one name in both builds
    /// but another key, and is told apart.
    #[test]
    fn f1_struct_fields_changed_by_a_cfg_are_told_apart_by_their_layout_keys() {
        const NAMES: [Option<fn() -> &'static str>; 2] = [Some(|| "kernels::Pair"), Some(std::any::type_name::<u32>)];
        const KEYS: [Option<fn() -> u64>; 2] = [Some(|| 0x1111), Some(|| 0x2222)];
        let host = KernelSignature { type_names: &NAMES, type_keys: &KEYS, param_names: &["p", "out"], ..KernelSignature::new("r1", &[8, 16], "") };
        assert_eq!(type_name_difference(&host, &[0x1111, 0x2222]), None);
        let permuted = [0x3333, 0x2222]; // the device build's key of its `Pair`: another field order
        let why = type_name_difference(&host, &permuted).expect("permuted fields must differ");
        assert!(why.contains("parameter `p` (#0)") && why.contains("`kernels::Pair` in the host build") && why.contains("fields"), "{why}");
        // The name's key no longer passes a keyed type: the device table holds keys, not names.
        assert!(type_name_difference(&host, &[crate::type_key("kernels::Pair"), 0x2222]).is_some());
    }

    /// G19R-1 (audit 2026-11-28g): a crate whose `::ferrocuda_device` is a shim with a
    /// `key_of` that returns 0 wrote 0 into the device table (and the launcher's key, made
    /// through the same path, was 0 too): "unknown", not compared, so the poke kernel's host
    /// `u64` and device `&'static mut u32` passed. A keyed launcher now refuses a 0 on either side;
    /// a launcher without keys (older) still leaves a device 0 unchecked.
    #[test]
    fn g19r_1_a_zero_type_key_on_either_side_is_refused() {
        const NAMES: [Option<fn() -> &'static str>; 1] = [Some(|| "g19r1_kernels::Word")];
        const REAL: [Option<fn() -> u64>; 1] = [Some(|| 0x1234)];
        const SHIM: [Option<fn() -> u64>; 1] = [Some(|| 0)];
        let real = KernelSignature { type_names: &NAMES, type_keys: &REAL, param_names: &["w"], ..KernelSignature::new("poke", &[8], "") };
        let why = type_name_difference(&real, &[0]).expect("a device key of 0 beside a real host key is refused");
        assert!(why.contains("parameter `w` (#0) of `poke`"), "{why}");
        assert_eq!(type_name_difference(&real, &[0x1234]), None, "equal real keys pass");
        let shim = KernelSignature { type_names: &NAMES, type_keys: &SHIM, param_names: &["w"], ..KernelSignature::new("poke", &[8], "") };
        assert!(type_name_difference(&shim, &[0]).is_some(), "the repro: 0 on both sides is refused, not 'unknown'");
        assert!(type_name_difference(&shim, &[0x1234]).is_some(), "a host key of 0 is refused");
        let older = KernelSignature { type_names: &NAMES, param_names: &["w"], ..KernelSignature::new("poke", &[8], "") };
        assert_eq!(type_name_difference(&older, &[0]), None, "a launcher without keys compares no device 0");
    }

    /// Q2: the same element type with another constant `cols(..)` width per build.
    #[test]
    fn q2_layout_tells_cols_widths_apart() {
        const HOST: [u64; 3] = layout_words(4, 4, [8, 0]);
        const DEVICE: [u64; 3] = layout_words(4, 4, [16, 0]);
        let host = KernelSignature { layout: &HOST, param_names: &["out"], ..KernelSignature::new("cfg_width", &[8, 8], "") };
        let why = layout_difference(&host, &DEVICE).expect("widths 8 and 16 must differ");
        assert!(why.contains("parameter `out`") && why.contains("(8, 0)") && why.contains("(16, 0)"), "{why}");
        assert_eq!(layout_words(4, 4, [3, 5])[2], 3 | 5 << 32);
    }
}
