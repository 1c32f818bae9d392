//! The code issue 30's fixes compile to, checked without a GPU on the fixture kernels of
//! tests/kernels/src/port_patterns.rs: the PTX (always) and the SASS of the sm_90 cubin (where
//! the build had `ptxas` and `nvdisasm` is installed).

#[path = "common/ptx.rs"]
mod ptx_text;
use ptx_text::{entry_body, sass_function, sass_instructions, sass_listing};

fn ptx(arch: u32) -> &'static str {
    test_kernels::KERNELS.ptx_for(arch).unwrap_or_else(|| panic!("test_kernels is built for sm_{arch}"))
}

/// The sm_90 SASS listing of the test kernels, or `None` (printed) without a cubin or nvdisasm.
fn sass() -> Option<&'static str> {
    static LISTING: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    LISTING
        .get_or_init(|| {
            let Some(&(_, cubin)) = test_kernels::KERNELS.cubins.iter().find(|(arch, _)| *arch == 90) else {
                eprintln!("SKIPPED the SASS checks: no sm_90 cubin (ptxas was not found at build time)");
                return None;
            };
            sass_listing(cubin, "port-patterns-sass")
        })
        .as_deref()
}

/// Regression p30_1: the kernel tag is declared `.align 16`, the width of its one
/// `st.shared.v2.u64`; with `.align 8`, ptxas put it at offset 8 after a 4-byte
/// `shared_array!` (`STS.128 [UR4+0x8]`) and every launch faulted. In the SASS every 16-byte
/// shared access of the kernel is at a multiple of 16.
#[test]
fn p30_1_the_kernel_tag_is_16_byte_aligned_after_a_4_byte_shared_array() {
    const KERNEL: &str = "p30_small_shared_first_can_panic";
    for arch in [80, 90] {
        assert!(ptx(arch).contains(".shared .align 16 .u64 __ferrocuda_kernel_tag[2];"), "sm_{arch}: the tag's declaration");
        let body = entry_body(ptx(arch), KERNEL);
        assert!(body.contains("st.shared.v2.u64 [t]"), "sm_{arch}: the kernel can panic, so it keeps the tag store:\n{body}");
    }
    let Some(listing) = sass() else { return };
    let wide: Vec<_> = sass_instructions(sass_function(listing, KERNEL))
        .into_iter()
        .filter(|(op, _)| op.ends_with(".128") && (op.starts_with("STS") || op.starts_with("LDS")))
        .collect();
    assert!(!wide.is_empty(), "the tag's STS.128 is in the SASS");
    for (op, operands) in wide {
        let address = operands.split(['[', ']']).nth(1).unwrap_or_else(|| panic!("{op} {operands}"));
        let offset = address.split_once("+0x").map_or(0, |(_, hex)| u64::from_str_radix(hex, 16).unwrap());
        assert!(offset.is_multiple_of(16), "{op} {operands}: a 16-byte access at offset {offset:#x} (base aligned to 16 or more)");
    }
}
