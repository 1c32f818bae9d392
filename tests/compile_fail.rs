//! Compile-fail tests: each file under `tests/compile_fail/` must fail to compile with the
//! error in its `.stderr` (regenerate with `TRYBUILD=overwrite` after checking the new text).
//!
//! `launch/`: misuse of a typed launcher (wrong element type, host data, `&` for `&mut`,
//! argument count, one output twice, raw pointers without `unsafe`, a programmatic dependent
//! launch without `unsafe` or by struct literal). `kernel/`: kernel
//! signatures `#[kernel]` rejects. `kernel_model/`: the unsound
//! kernels of audit findings U1/U2 (`stale_read`, `count_plain`, non-`Pod` elements) and the
//! ways around the output model that must not compile. `cublas/`: GEMM element-type pairings
//! cuBLAS does not support, TF32 for non-`f32` inputs, a bias of another type than the output,
//! the output passed as an input or as the bias. `borrowed/`: a slice lent by the cudarc
//! adapter's scope kept past the scope, its guard form without `unsafe` (P3). `seams/`: where
//! generated code meets the user's (audit 2026-11-27): P1, the kernel body never runs in a
//! generated `unsafe` context (the host copy; the device build is tests/macro_seams_build.rs),
//! and P13, two kernels with one PTX name; `seams/pass/` must compile and run.
//!
//! # What is compared (issue 28)
//!
//! rustc's text depends on the machine in one place we do not control: a note that points into
//! the standard library (`--> $RUST/core/src/marker.rs`) quotes the library's source lines only
//! when the host toolchain has `rust-src` (rustup's default profile does not install it). So
//! trybuild compiles copies of the cases (in `CARGO_TARGET_TMPDIR`, writing what rustc printed
//! beside them), and this test compares that text with the checked-in `.stderr` after
//! [`assertions`] has removed what depends on the machine: the quoted lines under an arrow into
//! `$RUST/` and the indentation of the gutter (its width follows the widest line number shown,
//! which those lines change). What each case asserts stays: the error, its code, its span and
//! label in the user's file, the notes and the help that says what to do.

use std::fs;
use std::path::{Path, PathBuf};

/// The case folders under `tests/compile_fail/`.
const GROUPS: &[&str] = &["launch", "kernel", "kernel_model", "cublas", "borrowed", "seams"];

#[test]
fn compile_fail() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases = manifest.join("tests/compile_fail");
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile_fail");
    // Read before trybuild's variable is set below: the user's own request to rewrite the files.
    let overwrite = std::env::var_os("TRYBUILD").is_some_and(|v| v == "overwrite");
    let _ = fs::remove_dir_all(&scratch);
    let mut copied = Vec::new();
    for group in GROUPS {
        fs::create_dir_all(scratch.join(group)).unwrap();
        for entry in fs::read_dir(cases.join(group)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                let copy = scratch.join(group).join(path.file_name().unwrap());
                fs::copy(&path, &copy).unwrap();
                copied.push((path, copy));
            }
        }
    }
    copied.sort();
    // trybuild writes the `.stderr` of a case that has none and still fails a case that compiles.
    // SAFETY: the other test of this binary never touches the environment, and nothing else
    // reads or writes it while this one runs.
    unsafe { std::env::set_var("TRYBUILD", "overwrite") };
    {
        let tests = trybuild::TestCases::new();
        for group in GROUPS {
            tests.compile_fail(scratch.join(group).join("*.rs"));
        }
        tests.pass(cases.join("seams/pass/*.rs"));
    } // trybuild builds and checks the cases when `tests` drops.

    let mut mismatches = Vec::new();
    for (case, copy) in &copied {
        let printed = fs::read_to_string(copy.with_extension("stderr")).unwrap_or_else(|e| panic!("trybuild wrote no stderr for {}: {e}", case.display()));
        // The copies' paths as rustc printed them (absolute: they are outside trybuild's
        // project), back to the cases' own, relative to the workspace.
        let printed =
            printed.replace(&format!("{}/", scratch.display()), "tests/compile_fail/").replace(&display_path(&scratch, manifest), "tests/compile_fail");
        let expected_path = case.with_extension("stderr");
        if overwrite {
            fs::write(&expected_path, &printed).unwrap();
            continue;
        }
        let expected = fs::read_to_string(&expected_path).unwrap_or_default();
        if assertions(&expected) != assertions(&printed) {
            mismatches.push(format!(
                "{}:\n--- expected (checked in, normalised) ---\n{}\n--- printed (normalised) ---\n{}",
                case.display(),
                assertions(&expected),
                assertions(&printed)
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} compile-fail cases printed other errors than expected (rerun with \
         TRYBUILD=overwrite and check the diff):\n\n{}",
        mismatches.len(),
        copied.len(),
        mismatches.join("\n\n")
    );
}

/// How rustc names a file under `dir`: relative to the workspace when it is inside it.
fn display_path(dir: &Path, workspace: &Path) -> String {
    let relative: PathBuf = dir.strip_prefix(workspace).map(Path::to_path_buf).unwrap_or_else(|_| dir.to_path_buf());
    relative.to_string_lossy().into_owned()
}

/// What a case asserts, from rustc's text: every line trimmed, blank gutter lines dropped, `$DIR/`
/// dropped, and
/// the source lines quoted under an arrow into the standard library (`--> $RUST/...` or
/// `::: $RUST/...`) dropped, since rustc prints them only when `rust-src` is installed (their
/// span's label, which rustc then prints as a note, is kept as that note), and two phrasings
/// that changed between rustc 1.95 and 1.97 made one ([`reworded`]).
fn assertions(stderr: &str) -> String {
    let mut kept = Vec::new();
    let mut in_library_quote = false;
    // trybuild writes paths inside the workspace as `$DIR/...`; outside it (a target directory
    // elsewhere) they stay absolute and were made relative above.
    let stderr = stderr.replace("$DIR/", "");
    for line in stderr.lines() {
        let line = line.trim();
        let is_arrow = line.starts_with("-->") || line.starts_with(":::");
        if is_arrow {
            in_library_quote = line.contains("$RUST/");
        } else if in_library_quote && is_quoted_source(line) {
            // Without the source, rustc prints a quote's label as a note instead.
            if let Some(label) = label_of(line) {
                kept.push(format!("= note: {label}"));
            }
            continue;
        } else {
            in_library_quote = false;
        }
        if line.is_empty() || line == "|" {
            continue;
        }
        kept.push(reworded(line));
    }
    // 1.95 lists a single "found for" type on a line of its own; 1.97 puts it on the note's.
    let mut joined: Vec<String> = Vec::new();
    let mut i = 0;
    while i < kept.len() {
        let item = |k: usize| kept.get(k).is_some_and(|line| line.starts_with("- "));
        if kept[i].ends_with("was found for") && item(i + 1) && !item(i + 2) {
            joined.push(format!("{} {}", kept[i], &kept[i + 1][2..]));
            i += 2;
        } else {
            joined.push(kept[i].clone());
            i += 1;
        }
    }
    joined.join("\n")
}

/// rustc's words for one thing that changed between the toolchains the README supports
/// (1.95 says "function or associated item" or "associated item" where 1.97 says "associated
/// function or constant"): one word for each, so the cases assert the error, not its phrasing.
fn reworded(line: &str) -> String {
    line.replace("associated function or constant", "associated item").replace("function or associated item", "associated item")
}

/// The label of a quoted line that marks a span (`|     ^^^^ label`).
fn label_of(line: &str) -> Option<&str> {
    let marks = line.find('^')?;
    let label = line[marks..].trim_start_matches(['^', '-']).trim();
    (!label.is_empty()).then_some(label)
}

/// A line of a quoted snippet: the gutter (`|`, hidden line numbers) or an elision (`...`).
fn is_quoted_source(line: &str) -> bool {
    line.starts_with('|') || line.starts_with("...") || line.starts_with(|c: char| c.is_ascii_digit())
}

#[test]
fn assertions_drop_only_library_quotes() {
    let with_src = "error[E0277]: `Cell<()>` cannot be shared\n --> tests/x.rs:8:30\n  |\n8 |     f::<T>();\n  |         ^ label\nnote: required because it appears within the type `PhantomData<Cell<()>>`\n --> $RUST/core/src/marker.rs\n  |\n  | pub struct PhantomData<T: PointeeSized>;\n  |            ^^^^^^^^^^^\nnote: required by a bound\n --> host/src/x.rs\n  |\n  | pub struct X;\n";
    let without_src = "error[E0277]: `Cell<()>` cannot be shared\n --> tests/x.rs:8:30\n  |\n8 |     f::<T>();\n  |         ^ label\nnote: required because it appears within the type `PhantomData<Cell<()>>`\n   --> $RUST/core/src/marker.rs\nnote: required by a bound\n --> host/src/x.rs\n  |\n  | pub struct X;\n";
    assert_eq!(assertions(with_src), assertions(without_src));
    // A label on the library's quote becomes a note when the quote is missing.
    let labelled =
        " --> $RUST/core/src/panic.rs\n  |\n  |     panic_fmt(args);\n  |     ^^^^^^^^^^^^^^^ evaluation of `X` failed here\n  |\n ::: device/src/a.rs\n";
    let noted = " --> $RUST/core/src/panic.rs\n  = note: evaluation of `X` failed here\n ::: device/src/a.rs\n";
    assert_eq!(assertions(labelled), assertions(noted));
    // Phrasings of rustc 1.95 and 1.97.
    let old = "error[E0599]: the function or associated item `dense` exists\n  = note: the method was found for\n          - `Gemm<f32, f32>`\n";
    let new = "error[E0599]: the associated function or constant `dense` exists\n  = note: the method was found for `Gemm<f32, f32>`\n";
    assert_eq!(assertions(old), assertions(new));
    let two = "= note: the method was found for\n- `A`\n- `B`\n";
    assert_eq!(assertions(two), "= note: the method was found for\n- `A`\n- `B`");
    // The user's span, the label and our crates' quotes stay asserted.
    let other_label = with_src.replace("^ label", "^ other");
    assert_ne!(assertions(with_src), assertions(&other_label));
    let other_quote = with_src.replace("pub struct X;", "pub struct Y;");
    assert_ne!(assertions(with_src), assertions(&other_quote));
}
