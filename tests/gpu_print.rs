//! `println!` from a kernel on the GPU: the lines reach the process's stdout, formatted as on
//! the host. (The device library's other checks run on both back ends in
//! `tests/cpu_device_lib.rs`.)

mod common;

use ferrocuda::{Context, Stream};
use gpu_kernels::device_lib;

fn setup(test: &str) -> Option<(Context, Stream)> {
    let context = common::gpu_or_skip(test)?;
    let stream = Stream::new(&context).unwrap();
    Some((context, stream))
}

const PRINT_CHILD: &str = "FERROCUDA_PRINT_CHILD";

#[test]
fn println_from_the_device_reaches_stdout() {
    const NAME: &str = "println_from_the_device_reaches_stdout";
    if std::env::var_os(PRINT_CHILD).is_some() {
        let context = Context::primary(0).unwrap();
        let stream = Stream::new(&context).unwrap();
        device_lib::print_lines::launch(&stream, (3u32, 128u32), 1.23456f32, 0xbeefu32).unwrap();
        stream.synchronize().unwrap();
        return;
    }
    if setup(NAME).is_none() {
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(PRINT_CHILD, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child failed:\n{text}\n{}", String::from_utf8_lossy(&output.stderr));
    for b in 0..3 {
        let line = format!("block {b} of 3 says 1.235 tag=beef ok=true");
        assert_eq!(text.matches(&format!("{line}\n")).count(), 1, "expected once: {line:?} in:\n{text}");
    }
    // (The harness prints the test's name without a newline, so the first device line may
    // share its line: count occurrences, not whole lines.)
    for w in 1..4 {
        let line = format!("warp  {w} checking in, 100% ready");
        assert_eq!(text.matches(&format!("{line}\n")).count(), 1, "expected once: {line:?} in:\n{text}");
    }
    println!("device output:\n{}", text.lines().filter(|l| l.starts_with("block") || l.starts_with("warp")).collect::<Vec<_>>().join("\n"));
}
