//! The main job without a GPU falls back to the CPU executor, says so, and verifies the same
//! kernels; with a GPU it runs them there (and this test checks that it still verifies).

#[test]
fn the_main_job_verifies_its_kernels_on_whatever_back_end_it_has() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ferrocuda")).output().expect("the main job runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "main job failed:\n{text}\n{}", String::from_utf8_lossy(&output.stderr));
    let on_cpu = text.contains("Running the kernels on the CPU executor instead");
    if on_cpu {
        assert!(text.starts_with("No GPU: "), "the fallback must say why:\n{text}");
    }
    for kernel in ["saxpy", "sum_f32"] {
        let row = text.lines().find(|l| l.starts_with(kernel)).unwrap_or_else(|| panic!("no {kernel} row in:\n{text}"));
        assert!(row.ends_with("yes"), "{kernel} not verified ({}):\n{text}", if on_cpu { "CPU executor" } else { "GPU" });
    }
}
