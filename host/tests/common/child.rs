//! Re-running a test binary on one test in a child process, with a deadline: for the GPU repros
//! whose failure is a hang or an abort (`gpu_g16r`, `gpu_g16s`).

use std::time::{Duration, Instant};

/// The variable that tells the child which test it runs for its parent.
const CHILD: &str = "FERROCUDA_TEST_CHILD";

/// Runs this test binary again on `test` alone with `FERROCUDA_TEST_CHILD=test`, and waits at
/// most `deadline`: `Some(output)` when it exited (or was aborted), `None` when it was still
/// running (killed; its output is printed).
pub fn run_child(test: &str, deadline: Duration) -> Option<std::process::Output> {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("re-run the test binary");
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            println!(
                "{test}: child killed after {deadline:?} (a hang); its output:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True in the child that [`run_child`] started for `test`.
pub fn in_child(test: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(test)
}
