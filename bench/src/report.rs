//! The result rows, the printed table and the JSON file.

use gpu_kernels::twins::Row;
use serde_json::{Value, json};

/// Everything one run produced.
pub struct Report {
    /// Device, driver, toolchains, sizes.
    pub header: Vec<(String, String)>,
    /// Measured device-to-device copy bandwidth, GB/s.
    pub copy_gbps: f64,
    /// Kernel rows.
    pub rows: Vec<Row>,
    /// Launch overhead: (variant, µs per launch).
    pub launch_overhead: Vec<(String, f64)>,
    /// Module loads: (what, median ms, first ms).
    pub module_load: Vec<(String, f64, f64)>,
    /// Comparisons that could not run, and why.
    pub skipped: Vec<String>,
    /// Cases whose result disagreed with the CPU (or failed otherwise): no time reported.
    pub failures: Vec<String>,
}

impl Report {
    /// CUDA C++ time / this row's time for the same kernel: above 1 means faster than CUDA C++.
    pub fn speed_vs_cuda(&self, row: &Row) -> Option<f64> {
        let reference = self.rows.iter().find(|r| r.kernel == row.kernel && r.implementation.starts_with("CUDA C++"))?;
        Some(reference.median_ms / row.median_ms)
    }

    /// The `unsafe` Rust twin's time / this row's time, for a safe Rust row whose kernel has
    /// one (issue 20's speed rows): above 1 means the safe kernel is faster.
    pub fn speed_vs_unsafe(&self, row: &Row) -> Option<f64> {
        if !row.implementation.starts_with("Rust (") {
            return None;
        }
        let reference = self.rows.iter().find(|r| r.kernel == row.kernel && r.implementation == gpu_kernels::twins::timing::UNSAFE_TWIN)?;
        Some(reference.median_ms / row.median_ms)
    }

    /// This row's time relative to cuBLAS on the same problem (cuBLAS time / this time): the
    /// cuBLAS row of the same size, which every SGEMM kernel of that size is compared with.
    pub fn speed_vs_cublas(&self, row: &Row) -> Option<f64> {
        let reference = self.rows.iter().find(|r| r.size == row.size && r.flops.is_some() && r.implementation == "cuBLAS")?;
        Some(reference.median_ms / row.median_ms)
    }

    /// The table, as printed.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for (key, value) in &self.header {
            out += &format!("{key}: {value}\n");
        }
        out += &format!("device-to-device copy (cuMemcpyDtoDAsync, read + write): {:.0} GB/s\n\n", self.copy_gbps);
        out += &format!(
            "{:<18} {:<18} {:<22} {:>9} {:>9} {:>8} {:>8} {:>10} {:>10} {:>4}  {}\n",
            "kernel", "implementation", "size", "time ms", "GB/s", "% copy", "TFLOP/s", "vs CUDA", "vs unsafe", "regs", "check"
        );
        for row in &self.rows {
            let gbps = row.gbps().map_or("-".into(), |g| format!("{g:.0}"));
            let copy = row.gbps().map_or("-".into(), |g| format!("{:.1}%", 100.0 * g / self.copy_gbps));
            let tflops = row.tflops().map_or("-".into(), |t| format!("{t:.2}"));
            let versus = self.speed_vs_cuda(row).map_or("-".into(), |s| format!("{s:.3}x"));
            let versus_unsafe = self.speed_vs_unsafe(row).map_or("-".into(), |s| format!("{s:.3}x"));
            let regs = row.registers.map_or("-".into(), |r| r.to_string());
            out += &format!(
                "{:<18} {:<18} {:<22} {:>9.4} {:>9} {:>8} {:>8} {:>10} {:>10} {:>4}  {}\n",
                row.kernel, row.implementation, row.size, row.median_ms, gbps, copy, tflops, versus, versus_unsafe, regs, row.check
            );
        }
        for row in self.rows.iter().filter(|r| r.implementation != "cuBLAS") {
            if let Some(s) = self.speed_vs_cublas(row) {
                out += &format!("{} {}: {:.1}% of cuBLAS SGEMM\n", row.kernel, row.implementation, 100.0 * s);
            }
        }
        if !self.launch_overhead.is_empty() {
            out += "\nlaunch overhead (empty kernel, CPU time per launch: 3 x 100 000 launches in batches of 500, median over batches)\n";
            for (variant, us) in &self.launch_overhead {
                out += &format!("  {variant:<34} {us:>7.3} µs\n");
            }
        }
        if !self.module_load.is_empty() {
            out += "\nmodule load (the whole gpu-kernels module)\n";
            for (what, median, first) in &self.module_load {
                out += &format!("  {what:<34} median {median:>8.2} ms, first {first:>8.2} ms\n");
            }
        }
        for skipped in &self.skipped {
            out += &format!("\nSKIPPED: {skipped}\n");
        }
        for failure in &self.failures {
            out += &format!("\nFAILED (no time reported): {failure}\n");
        }
        out
    }

    /// The same content as JSON.
    pub fn json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                json!({
                    "kernel": row.kernel,
                    "implementation": row.implementation,
                    "size": row.size,
                    "median_ms": row.median_ms,
                    "min_ms": row.min_ms,
                    "bytes": row.bytes,
                    "gbps": row.gbps(),
                    "percent_of_copy": row.gbps().map(|g| 100.0 * g / self.copy_gbps),
                    "flops": row.flops,
                    "tflops": row.tflops(),
                    "speed_vs_cuda_cpp": self.speed_vs_cuda(row),
                    "speed_vs_unsafe_twin": self.speed_vs_unsafe(row),
                    "speed_vs_cublas": self.speed_vs_cublas(row),
                    "registers": row.registers,
                    "check": row.check,
                })
            })
            .collect();
        let header: serde_json::Map<String, Value> = self.header.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        json!({
            "header": header,
            "copy_gbps": self.copy_gbps,
            "kernels": rows,
            "launch_overhead_us": self.launch_overhead.iter().map(|(v, us)| json!({"variant": v, "us_per_launch": us})).collect::<Vec<_>>(),
            "module_load_ms": self.module_load.iter().map(|(w, m, f)| json!({"what": w, "median_ms": m, "first_ms": f})).collect::<Vec<_>>(),
            "skipped": self.skipped,
            "failures": self.failures,
        })
    }
}
