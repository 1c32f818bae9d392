//! The one-door check (issue 21): in the host crates' sources, every call that queues work
//! on a stream (a driver or library enqueue) sits inside the closure of a
//! `Stream::enqueue` call, which declares the memory the work touches before it lends the
//! raw stream handle. A wrapper that called the driver directly would skip that declaration;
//! this test fails when one does. It needs no GPU and runs in CI.
//!
//! What counts as an enqueue: the driver entry points `cuLaunchKernel*`, `cuMemcpy*`,
//! `cuMemset*`, `cuMemAllocAsync`, `cuMemFreeAsync`, `cuGraphLaunch`, `cuStreamWaitEvent`,
//! `cuEventRecord`, `cuLaunchHostFunc` (by their raw names, and by the names of their
//! wrappers in `host/src/driver/`), cuFFT's `cufftExec*` and `cufftSetStream`, every cuBLAS
//! call but handle creation and destruction (`cublasGemmEx`, `cublasGemmStridedBatchedEx`,
//! `cublasSetStream`, `cublasSetPointerMode`, ...), cuBLASLt's `cublasLtMatmul` and
//! `cublasLtMatrixTransform` (its descriptor, layout, preference and heuristic calls queue
//! nothing), and NCCL's collectives and point-to-point calls.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// The host crates: every crate whose code runs on the host and calls CUDA.
const HOST_CRATES: &[&str] = &["host/src", "collectives/src", "ferrocuda/src", "test-support/src"];

/// Where the entry points are defined rather than called.
const DEFINITIONS: &[&str] = &["host/src/driver/", "collectives/src/nccl/ffi.rs"];

/// Calls outside the door that are allowed, and why: none of them touches tracked memory.
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    ("host/src/panic_report.rs", "memcpy_htod", "writes the panic record's address into a module being loaded, before any of its kernels can run"),
    (
        "host/src/borrowed/stream.rs",
        "record",
        "joins a borrowed stream and ferrocuda's stream with an event, inside the door's closure: orders two streams, touches no memory",
    ),
    ("host/src/borrowed/stream.rs", "wait_event", "the same join, and waits on an event another library recorded (`Stream::wait_raw_event`): ordering only"),
    (
        "host/src/module/checks.rs",
        "memcpy_dtoh_async",
        "reads a kernel's signature fingerprint and parameter layout, constants of a loaded module, on a private non-blocking stream it creates, synchronises and destroys (no tracked memory; a legacy-stream copy would break a capture in progress)",
    ),
];

const NCCL_CALLS: &[&str] = &["ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter", "ncclSend", "ncclRecv"];

/// True for a raw driver or library entry point that queues work on a stream.
fn is_enqueue_symbol(name: &str) -> bool {
    let driver = ["cuLaunch", "cuMemcpy", "cuMemset", "cuGraphLaunch", "cuStreamWaitEvent", "cuEventRecord", "cuMemAllocAsync", "cuMemFreeAsync"];
    let cufft = ["cufftExec", "cufftSetStream"];
    let cublas_setup = ["cublasCreate_v2", "cublasDestroy_v2"];
    let cublaslt_work = ["cublasLtMatmul", "cublasLtMatrixTransform"];
    if name.starts_with("cublasLt") {
        return cublaslt_work.contains(&name);
    }
    driver.iter().chain(&cufft).any(|p| name.starts_with(p))
        || (name.starts_with("cublas") && name.as_bytes().get(6).is_some_and(u8::is_ascii_uppercase) && !name.ends_with("_t") && !cublas_setup.contains(&name))
        || NCCL_CALLS.contains(&name)
}

/// `(topic, wrapper)` for each wrapper in `host/src/driver/<topic>.rs` of an enqueue entry point
/// (`name = cuSymbol(..);` lines of `entries!`).
fn driver_wrappers(root: &Path) -> BTreeSet<(String, String)> {
    let mut wrappers = BTreeSet::new();
    for entry in std::fs::read_dir(root.join("host/src/driver")).unwrap() {
        let path = entry.unwrap().path();
        let topic = path.file_stem().unwrap().to_string_lossy().into_owned();
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let Some((name, rest)) = line.trim().split_once(" = ") else { continue };
            let symbol: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if is_enqueue_symbol(&symbol) && name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                wrappers.insert((topic.clone(), name.to_string()));
            }
        }
    }
    wrappers
}

/// One call outside the door: file, the callee, and the tokens around it.
#[derive(Debug)]
#[allow(dead_code)] // read through Debug in the failure message
struct Violation {
    file: String,
    callee: String,
}

/// Walks `tokens`; `inside` is true within the argument list of an `enqueue` call, and in the
/// body of a function that takes a `RawStream<'_>` (which only the door can make).
fn scan(tokens: TokenStream, inside: bool, wrappers: &BTreeSet<(String, String)>, found: &mut Vec<String>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    // After `fn`: whether its parameter list names `RawStream<`.
    let mut in_signature: Option<bool> = None;
    for (i, tree) in trees.iter().enumerate() {
        match tree {
            TokenTree::Group(group) => {
                let door = group.delimiter() == Delimiter::Parenthesis
                    && i > 0
                    && matches!(&trees[i - 1], TokenTree::Ident(name) if name == "enqueue" || name == "enqueue_both" || name == "enqueue_with");
                let mut lent = false;
                match (group.delimiter(), in_signature) {
                    (Delimiter::Parenthesis, Some(false)) => in_signature = Some(takes_raw_stream(group.stream())),
                    (Delimiter::Brace, Some(takes)) => {
                        lent = takes;
                        in_signature = None;
                    }
                    _ => {}
                }
                scan(group.stream(), inside || door || lent, wrappers, found);
            }
            TokenTree::Ident(ident) if ident == "fn" => in_signature = Some(false),
            TokenTree::Punct(p) if p.as_char() == ';' => in_signature = None,
            TokenTree::Ident(ident) if !inside => {
                let name = ident.to_string();
                if is_enqueue_symbol(&name) {
                    found.push(name);
                    continue;
                }
                // `topic::wrapper`: a wrapper of an enqueue entry point.
                if i >= 3
                    && let (TokenTree::Ident(topic), TokenTree::Punct(a), TokenTree::Punct(b)) = (&trees[i - 3], &trees[i - 2], &trees[i - 1])
                    && a.as_char() == ':'
                    && b.as_char() == ':'
                    && wrappers.contains(&(topic.to_string(), name.clone()))
                {
                    found.push(format!("{topic}::{name}"));
                }
            }
            _ => {}
        }
    }
}

/// True when a parameter list names the door's `RawStream<'_>` (not a raw-pointer alias of
/// the same name: those have no lifetime).
fn takes_raw_stream(params: TokenStream) -> bool {
    let trees: Vec<TokenTree> = params.into_iter().collect();
    trees.windows(2).any(|w| matches!((&w[0], &w[1]), (TokenTree::Ident(i), TokenTree::Punct(p)) if i == "RawStream" && p.as_char() == '<'))
}

/// The enqueue calls of `source` outside the door.
fn outside_the_door(source: &str, wrappers: &BTreeSet<(String, String)>) -> Vec<String> {
    let tokens = TokenStream::from_str(source).expect("the source tokenizes");
    let mut found = Vec::new();
    scan(tokens, false, wrappers, &mut found);
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn every_enqueue_in_the_host_crates_goes_through_the_door() {
    let root = workspace_root();
    let wrappers = driver_wrappers(&root);
    // The wrappers the check must know, or it would check nothing.
    for expected in [("launch", "launch_kernel"), ("memory", "memcpy_htod_async"), ("graph", "launch"), ("stream", "wait_event"), ("memory", "free_async")] {
        assert!(wrappers.contains(&(expected.0.to_string(), expected.1.to_string())), "driver wrapper {expected:?} not found in host/src/driver");
    }
    let mut files = Vec::new();
    for krate in HOST_CRATES {
        rust_files(&root.join(krate), &mut files);
    }
    assert!(files.len() > 40, "found only {} source files under {HOST_CRATES:?}", files.len());
    let mut violations = Vec::new();
    let mut exceptions_used = BTreeSet::new();
    for path in files {
        let file = path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        if DEFINITIONS.iter().any(|d| file.starts_with(d)) {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        for callee in outside_the_door(&source, &wrappers) {
            let allowed = EXCEPTIONS.iter().find(|(f, c, _)| *f == file && callee.ends_with(c));
            match allowed {
                Some(exception) => {
                    exceptions_used.insert(exception.0);
                }
                None => violations.push(Violation { file: file.clone(), callee }),
            }
        }
    }
    assert!(
        violations.is_empty(),
        "work queued on a stream outside `Stream::enqueue` (declare what it touches and queue it inside the closure):\n{violations:#?}"
    );
    for (file, callee, why) in EXCEPTIONS {
        assert!(exceptions_used.contains(file), "the exception for {callee} in {file} ({why}) is no longer needed: remove it");
    }
}

#[test]
fn the_stream_handle_has_no_public_accessor() {
    let source = std::fs::read_to_string(workspace_root().join("host/src/stream/mod.rs")).unwrap();
    assert!(!source.contains("pub fn raw("), "Stream must not hand out its raw handle outside Stream::enqueue");
    assert!(!source.contains("pub(crate) fn raw("), "Stream must not hand out its raw handle outside Stream::enqueue");
}

/// Where the door itself is defined: the one `enqueue` that needs no forwarding.
const DOOR: &str = "host/src/stream/door.rs";

/// The functions named `enqueue` or `enqueue_both` in `source` that do not forward their
/// declared accesses into the door. The scan above counts everything inside the arguments of
/// any call named `enqueue` as inside the door, so a helper of that name (like NCCL's
/// `OnStream::enqueue`) must itself take a `&[BufferAccess]` parameter and pass that very
/// parameter to a `.enqueue(..)` / `.enqueue_both(..)` call in its body; one that declared
/// nothing, or something else, would let its callers' enqueues pass unchecked.
fn enqueue_helpers_that_do_not_forward(source: &str) -> Vec<String> {
    let mut found = Vec::new();
    find_helpers(TokenStream::from_str(source).expect("the source tokenizes"), &mut found);
    found
}

fn find_helpers(tokens: TokenStream, found: &mut Vec<String>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, tree) in trees.iter().enumerate() {
        if let TokenTree::Group(group) = tree {
            find_helpers(group.stream(), found);
        }
        let TokenTree::Ident(name) = tree else { continue };
        if !(name == "enqueue" || name == "enqueue_both" || name == "enqueue_with")
            || !matches!(trees.get(i.wrapping_sub(1)), Some(TokenTree::Ident(f)) if f == "fn")
        {
            continue;
        }
        // The parameter list, then the body (the first brace group after it).
        let params = trees[i + 1..].iter().find_map(|t| match t {
            TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis => Some(g.stream()),
            _ => None,
        });
        let body = trees[i + 1..].iter().find_map(|t| match t {
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => Some(g.stream()),
            _ => None,
        });
        let (Some(params), Some(body)) = (params, body) else { continue };
        let accesses = access_parameters(params);
        if accesses.is_empty() || !forwards_to_the_door(body, &accesses) {
            found.push(name.to_string());
        }
    }
}

/// The names of the parameters typed `&[BufferAccess<..>]`.
fn access_parameters(params: TokenStream) -> Vec<String> {
    let trees: Vec<TokenTree> = params.into_iter().collect();
    let mut names = Vec::new();
    for (i, tree) in trees.iter().enumerate() {
        let TokenTree::Group(g) = tree else { continue };
        let typed_access = g.delimiter() == Delimiter::Bracket && g.stream().into_iter().any(|t| matches!(t, TokenTree::Ident(id) if id == "BufferAccess"));
        // `name : & [BufferAccess<..>]`
        if typed_access
            && i >= 3
            && let (TokenTree::Ident(param), TokenTree::Punct(colon), TokenTree::Punct(amp)) = (&trees[i - 3], &trees[i - 2], &trees[i - 1])
            && colon.as_char() == ':'
            && amp.as_char() == '&'
        {
            names.push(param.to_string());
        }
    }
    names
}

/// True when `body` has a `.enqueue(..)` or `.enqueue_both(..)` call whose arguments name one
/// of `accesses`.
fn forwards_to_the_door(body: TokenStream, accesses: &[String]) -> bool {
    let trees: Vec<TokenTree> = body.into_iter().collect();
    trees.iter().enumerate().any(|(i, tree)| match tree {
        TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis && i >= 2 => {
            let door_call = matches!((&trees[i - 2], &trees[i - 1]), (TokenTree::Punct(dot), TokenTree::Ident(m)) if dot.as_char() == '.' && (m == "enqueue" || m == "enqueue_both" || m == "enqueue_with"));
            (door_call && g.stream().into_iter().any(|t| matches!(t, TokenTree::Ident(id) if accesses.contains(&id.to_string()))))
                || forwards_to_the_door(g.stream(), accesses)
        }
        TokenTree::Group(g) => forwards_to_the_door(g.stream(), accesses),
        _ => false,
    })
}

#[test]
fn every_other_enqueue_helper_forwards_its_accesses_to_the_door() {
    let root = workspace_root();
    let mut files = Vec::new();
    for krate in HOST_CRATES {
        rust_files(&root.join(krate), &mut files);
    }
    let mut helpers = 0;
    let mut bad = Vec::new();
    for path in files {
        let file = path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        let source = std::fs::read_to_string(&path).unwrap();
        if file == DOOR {
            continue;
        }
        helpers += source.matches("fn enqueue").count();
        bad.extend(enqueue_helpers_that_do_not_forward(&source).into_iter().map(|name| format!("{file}: fn {name}")));
    }
    assert!(helpers >= 1, "no enqueue helper found outside the door (NCCL's OnStream::enqueue is one): is the scan looking at the sources?");
    assert!(bad.is_empty(), "functions named like the door that do not forward their `&[BufferAccess]` parameter into `Stream::enqueue`:\n{bad:#?}");
}

/// The helper check itself: a forwarding helper passes; one that declares nothing, or passes
/// something else, or has no access parameter, is reported.
#[test]
fn the_helper_check_tells_forwarding_helpers_from_others() {
    let forwarding =
        r#"impl S { fn enqueue(&self, name: &str, accesses: &[BufferAccess<'_>], f: F) -> R { self.stream.enqueue(name, accesses, |raw| f(raw)) } }"#;
    assert!(enqueue_helpers_that_do_not_forward(forwarding).is_empty());
    let nested = r#"fn enqueue_both(&self, reads: &[BufferAccess<'_>]) -> R { let x = 1; { s.enqueue_both("n", reads, &[], |r| g(r)) } }"#;
    assert!(enqueue_helpers_that_do_not_forward(nested).is_empty());
    let declares_nothing =
        r#"impl S { fn enqueue(&self, name: &str, accesses: &[BufferAccess<'_>], f: F) -> R { self.stream.enqueue(name, &[], |raw| f(raw)) } }"#;
    assert_eq!(enqueue_helpers_that_do_not_forward(declares_nothing), ["enqueue"]);
    let no_parameter = r#"fn enqueue(&self, f: F) -> R { self.stream.enqueue("x", &[], f) }"#;
    assert_eq!(enqueue_helpers_that_do_not_forward(no_parameter), ["enqueue"]);
    let bypasses = r#"fn enqueue(&self, accesses: &[BufferAccess<'_>]) { let _ = accesses; unsafe { ncclSend(p) } }"#;
    assert_eq!(enqueue_helpers_that_do_not_forward(bypasses), ["enqueue"]);
}

/// The scanner itself: it finds calls outside the door, in macros too, and accepts them inside.
#[test]
fn the_check_finds_calls_outside_the_door_and_accepts_them_inside() {
    let wrappers: BTreeSet<(String, String)> = [("memory".to_string(), "memcpy_htod_async".to_string())].into_iter().collect();
    let bad = r#"
        fn copy(s: &Stream) { unsafe { driver::memory::memcpy_htod_async(1, p, 4, s.handle()) }; }
        fn fft(p: &Plan) { unsafe { sys::cufftExecC2C(p.h, a, b, -1) }; }
        macro_rules! m { () => { (nccl.ncclAllReduce)(a, b, n, t, o, c, s) } }
        fn gemm() { cublasSgemm_v2(h) }
        fn alias(stream: RawStream) { ncclSend(p, n, t, 1, c, stream) }
        fn ex() { cublasGemmEx(h); cublasGemmStridedBatchedEx(h); cublasSetPointerMode_v2(h, m) }
        fn lt() { lt::cublasLtMatmul(h, d); }
    "#;
    assert_eq!(outside_the_door(bad, &wrappers)[5..], ["cublasGemmEx", "cublasGemmStridedBatchedEx", "cublasSetPointerMode_v2", "cublasLtMatmul"]);
    assert_eq!(
        outside_the_door(bad, &wrappers)[..5],
        ["memcpy_htod_async", "cufftExecC2C", "ncclAllReduce", "cublasSgemm_v2", "ncclSend"]
            .map(|s| s.replace("memcpy_htod_async", "memory::memcpy_htod_async"))
    );
    let good = r#"
        fn copy(s: &Stream) { s.enqueue("copy", &[a], |raw| Ok(unsafe { driver::memory::memcpy_htod_async(1, p, 4, raw.get()) }?)) }
        fn fft(s: &Stream) { s.enqueue_both("fft", &[], &[w], |raw| call(unsafe { sys::cufftSetStream(h, raw.get()) })) }
        fn setup() { cublasCreate_v2(&mut h); let t: cublasHandle_t; }
        fn lt_setup() { cublasLtCreate(&mut h); cublasLtMatmulDescCreate(&mut d, c, s); cublasLtMatmulAlgoGetHeuristic(h); cublasLtDestroy(h); }
        fn lt(s: &Stream) { s.enqueue("cublasLtMatmul", &[a, b, c, w], |raw| check(unsafe { lt::cublasLtMatmul(h, d, raw.get()) })) }
        unsafe fn launch(f: F, raw: RawStream<'_>) { driver::memory::memcpy_htod_async(1, p, 4, raw.get()); }
        // cuLaunchKernel in a comment, and "cuMemcpyHtoD" in a string, are not calls.
    "#;
    assert!(outside_the_door(good, &wrappers).is_empty(), "{:?}", outside_the_door(good, &wrappers));
}
