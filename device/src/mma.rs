//! Warp-level matrix multiply-accumulate on tensor cores (`mma.sync`, sm_80 and newer).
//!
//! One call multiplies a 16x16 tile of A by a 16x8 tile of B and adds a 16x8 tile of C, all 32
//! lanes of a warp together, each lane holding a fragment (PTX ISA, "Matrix Fragments for
//! mma.m16n8k16"): with `group = lane / 4` and `pair = lane % 4`,
//! - A (row-major, 16-bit elements packed two per `u32`): `a[0]` = row `group`, columns
//!   `2·pair, 2·pair+1`; `a[1]` = row `group+8`, same columns; `a[2]`, `a[3]` = the same rows,
//!   columns `+8`;
//! - B (column-major): `b[0]` = rows `2·pair, 2·pair+1` of column `group`; `b[1]` = rows `+8`;
//! - C and D (f32): `c[0], c[1]` = row `group`, columns `2·pair, 2·pair+1`; `c[2], c[3]` = row
//!   `group+8`.
//!
//! [`load_a`], [`load_b`] and [`store_d`] do that indexing for tiles in ordinary slices.

/// `D = A·B + C` for f16 inputs and f32 accumulators
/// (`mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`).
///
/// # Safety
/// Every lane of the warp executes this same call together (warp-uniform control flow, no
/// lane exited): `mma.sync.aligned` executed by part of a warp is undefined behaviour. The
/// CPU executor does not check this.
#[inline(always)]
pub unsafe fn m16n8k16_f16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let d: [f32; 4];
        let (d0, d1, d2, d3): (f32, f32, f32, f32);
        // SAFETY: a warp-wide tensor-core instruction on register fragments; the caller keeps
        // all lanes converged.
        unsafe {
            core::arch::asm!(
                "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
                d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
                // Not `pure`: LLVM could then sink it into a branch that only some lanes take.
                options(nomem, nostack),
            );
        }
        d = [d0, d1, d2, d3];
        d
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::mma::mma_m16n8k16(a, b, c, crate::cpu::mma::f16_to_f32)
    }
}

/// As [`m16n8k16_f16`] with bf16 inputs (`.f32.bf16.bf16.f32`).
///
/// # Safety
/// As for [`m16n8k16_f16`].
#[inline(always)]
pub unsafe fn m16n8k16_bf16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (d0, d1, d2, d3): (f32, f32, f32, f32);
        // SAFETY: as above.
        unsafe {
            core::arch::asm!(
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
                d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
                // Not `pure`: LLVM could then sink it into a branch that only some lanes take.
                options(nomem, nostack),
            );
        }
        [d0, d1, d2, d3]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::mma::mma_m16n8k16(a, b, c, crate::cpu::mma::bf16_to_f32)
    }
}

fn pack(low: u16, high: u16) -> u32 {
    low as u32 | ((high as u32) << 16)
}

/// This lane's A fragment of the 16x16 tile at `a[row * lda + col]` (16-bit elements as bits).
#[inline(always)]
pub fn load_a(a: &[u16], lda: usize, lane: u32) -> [u32; 4] {
    let (group, pair) = ((lane / 4) as usize, (lane % 4) as usize);
    let at = |row: usize, col: usize| pack(a[row * lda + col], a[row * lda + col + 1]);
    [at(group, 2 * pair), at(group + 8, 2 * pair), at(group, 2 * pair + 8), at(group + 8, 2 * pair + 8)]
}

/// This lane's B fragment of the 16x8 tile at `b[k * ldb + n]` (row-major in memory; the
/// instruction's "col" layout is the indexing here).
#[inline(always)]
pub fn load_b(b: &[u16], ldb: usize, lane: u32) -> [u32; 2] {
    let (group, pair) = ((lane / 4) as usize, (lane % 4) as usize);
    let at = |k: usize| pack(b[k * ldb + group], b[(k + 1) * ldb + group]);
    [at(2 * pair), at(2 * pair + 8)]
}

/// Stores this lane's D fragment into the 16x8 tile at `d[row * ldd + col]`.
#[inline(always)]
pub fn store_d(d: &mut [f32], ldd: usize, lane: u32, fragment: [f32; 4]) {
    let (group, pair) = ((lane / 4) as usize, (lane % 4) as usize);
    d[group * ldd + 2 * pair] = fragment[0];
    d[group * ldd + 2 * pair + 1] = fragment[1];
    d[(group + 8) * ldd + 2 * pair] = fragment[2];
    d[(group + 8) * ldd + 2 * pair + 1] = fragment[3];
}
