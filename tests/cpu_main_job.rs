//! The main job without a GPU falls back to the CPU executor, says so, and verifies two
//! kernels; with a GPU it runs every example kernel there beside its CUDA C++ twin (when NVRTC
//! loads), and this test checks that each was verified and, with the twins, compared.
//!
//! On a GPU machine without cargo, point `FERROCUDA_MAIN_JOB` at the staged main job
//! (`FERROCUDA_MAIN_JOB=./ferrocuda REQUIRE_GPU=1 ./cpu_main_job`).

/// The example kernels the GPU table must list (`gpu_kernels::examples`).
const EXAMPLES: [&str; 8] = ["saxpy_x4", "sum_x4", "transpose_32", "matmul_128x128", "sgemm_pipelined", "softmax_rows_1024", "histogram_bytes", "stencil_5pt"];

#[test]
fn the_main_job_verifies_its_kernels_on_whatever_back_end_it_has() {
    let main_job = std::env::var("FERROCUDA_MAIN_JOB").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ferrocuda").to_string());
    let output = std::process::Command::new(&main_job).output().unwrap_or_else(|e| panic!("the main job {main_job} runs: {e}"));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "main job failed:\n{text}\n{}", String::from_utf8_lossy(&output.stderr));
    let row = |kernel: &str| text.lines().find(|l| l.split_whitespace().next() == Some(kernel)).unwrap_or_else(|| panic!("no {kernel} row in:\n{text}"));
    if text.contains("Running the kernels on the CPU executor instead") {
        assert!(!ferrocuda_test_support::gpu_required(), "REQUIRE_GPU=1 but the main job ran on the CPU:\n{text}");
        assert!(text.starts_with("No GPU: "), "the fallback must say why:\n{text}");
        for kernel in ["saxpy", "sum_f32"] {
            assert!(row(kernel).ends_with("yes"), "{kernel} not verified on the CPU executor:\n{text}");
        }
        return;
    }
    assert!(!text.contains("NOT verified"), "{text}");
    let with_twins = text.contains("CUDA C++ twins: bench/cuda/reference_kernels.cu, NVRTC");
    // Without the twins the job says why, and with no NVRTC at all what to install.
    let explained = text.contains("CUDA C++ twins: not shown (") && (!text.contains("libnvrtc not found") || text.contains("To see the CUDA C++ twins"));
    assert!(with_twins || explained, "the twins are neither shown nor explained:\n{text}");
    for kernel in EXAMPLES {
        let line = row(kernel);
        assert!(line.ends_with("yes"), "{kernel} not verified on the GPU:\n{text}");
        // Columns: kernel, size (several words), Rust ms, CUDA ms, ratio, rate, check, verified.
        let ratio = line.split_whitespace().find(|w| w.ends_with('x') && w[..w.len() - 1].parse::<f64>().is_ok());
        if with_twins {
            let ratio: f64 = ratio.unwrap_or_else(|| panic!("{kernel}: no CUDA/Rust ratio:\n{text}")).trim_end_matches('x').parse().unwrap();
            assert!(ratio > 0.0 && ratio.is_finite(), "{kernel}: ratio {ratio}");
        }
    }
}
