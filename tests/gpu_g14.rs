//! GPU repros of the held-out review of session 14 (audit/2026-11-28b/FINDINGS.md), named for
//! the findings (`g14_<n>_...`). They skip without a GPU and fail under `REQUIRE_GPU=1`.
//!
//! The same source builds before and after each fix (errors are matched by their text, not
//! by a variant the fix adds), so the binary built before the fix shows the bug and the one
//! built after shows the fix.

mod common;

use std::process::Command;

use ferrocuda::{DeviceBuffer, JitOptions, LaunchConfig, Module, PinnedBuffer, Stream};
use test_kernels::square_checked;

const CHILD: &str = "FERROCUDA_G14_CHILD";

/// Runs `test` again in a child process with [`CHILD`] set (a device fault poisons the
/// process), and returns what it printed, or `None` (printed) without a GPU.
fn run_child(test: &str) -> Option<String> {
    common::gpu_or_skip(test)?;
    let output = Command::new(std::env::current_exe().unwrap()).args([test, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD, test).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("child output:\n{text}");
    Some(text)
}

fn in_child(test: &str) -> bool {
    std::env::var(CHILD).is_ok_and(|name| name == test)
}

/// G14-1: `Module::global` handed out the panic handler's own globals. Safe code pointed
/// `__ferrocuda_panic_slot` of a module loaded under `Module::load_ptx`'s contract (this
/// project's own PTX, launched through its own typed launcher) at a pinned host buffer, and
/// the next device panic wrote its record there: a store from the GPU into host memory that
/// safe Rust code owns. Fixed: names with ferrocuda's `__ferrocuda_` prefix are refused.
#[test]
fn g14_1_the_panic_handlers_globals_are_not_handed_to_safe_code() {
    const TEST: &str = "g14_1_the_panic_handlers_globals_are_not_handed_to_safe_code";
    if in_child(TEST) {
        return g14_1_child();
    }
    let Some(text) = run_child(TEST) else { return };
    assert!(!text.contains("G14-1 WRITTEN"), "the device panic handler wrote into memory that safe code chose:\n{text}");
    assert!(text.contains("G14-1 REFUSED __ferrocuda_panic_slot") && text.contains("G14-1 REFUSED __ferrocuda_panic_claimed"), "{text}");
    assert!(text.contains("G14-1 CHILD DONE"), "the child did not finish:\n{text}");
}

fn g14_1_child() {
    let context = ferrocuda::Context::primary(0).unwrap();
    let ptx = test_kernels::KERNELS.ptx_for(80).expect("test_kernels has sm_80 PTX");
    // SAFETY: this project's own build of test_kernels, and the one kernel launched from it
    // goes through its own typed launcher (`launch_in` checks its fingerprint): the contract
    // of `Module::load_ptx` holds.
    let module = unsafe { Module::load_ptx(&context, "g14_1", ptx, &JitOptions::new()) }.unwrap();
    let mut slot = None;
    for name in ["__ferrocuda_panic_slot", "__ferrocuda_panic_claimed"] {
        let refused = if name.ends_with("slot") {
            match module.global::<u64>(name) {
                Ok(global) => {
                    slot = Some(global);
                    None
                }
                Err(e) => Some(e),
            }
        } else {
            module.global::<u32>(name).err()
        };
        match refused {
            Some(error) => {
                println!("G14-1 REFUSED {name}: {error}");
                assert!(error.to_string().contains("ferrocuda"), "the refusal should say whose global it is: {error}");
            }
            None => println!("G14-1 HANDED OUT {name}"),
        }
    }
    if let Some(slot) = slot {
        // The bug: any address goes. A pinned host buffer is reachable from the GPU at its host
        // address (unified addressing), so the record lands in host memory Rust owns.
        let pinned = PinnedBuffer::<u8>::zeroed(&context, 4096).unwrap();
        let address = pinned.as_slice().unwrap().as_ptr() as u64;
        slot.write(&address).unwrap();
        let stream = Stream::non_blocking(&context).unwrap();
        let x = DeviceBuffer::from_slice(&context, &(0..64u32).collect::<Vec<_>>()).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&context, 40).unwrap();
        // Threads 40..64 index past the output of 40: a device panic.
        square_checked::launch_in(&module, &stream, LaunchConfig::from((2u32, 32u32)), &x, &mut out).unwrap();
        let error = stream.synchronize().unwrap_err();
        println!("G14-1 the launch ended with: {error}");
        // Host memory stays readable after the fault.
        let bytes = pinned.as_slice().map(<[u8]>::to_vec).unwrap_or_else(|e| {
            println!("G14-1 as_slice after the fault: {e}");
            // SAFETY: the buffer is 4096 bytes of host memory, alive here; nothing runs on the
            // GPU any more (the fault ended every kernel of the process).
            unsafe { std::slice::from_raw_parts(address as *const u8, 4096) }.to_vec()
        });
        let written = bytes.iter().filter(|&&b| b != 0).count();
        let name_at = bytes.windows(14).position(|w| w == b"square_checked");
        println!("G14-1 WRITTEN: the device panic handler stored into a pinned host buffer chosen by safe code: {written} of 4096 bytes non-zero, `square_checked` at {name_at:?}");
    }
    println!("G14-1 CHILD DONE");
}
