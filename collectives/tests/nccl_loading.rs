//! libnccl is opened at run time: a machine without it gets an error that says what to do,
//! never a panic, and a library that is not NCCL is named as such.

use std::process::Command;

use ferrocuda_collectives::{Error, nccl};

#[test]
fn without_libnccl_every_entry_point_returns_an_actionable_error() {
    if std::env::var_os("FERROCUDA_NCCL_LIB").is_some() || nccl::is_available() {
        eprintln!("SKIPPED: libnccl is installed here");
        return;
    }
    let err = nccl::version().unwrap_err();
    assert!(matches!(err, Error::NcclNotFound { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("libnccl.so.2") && message.contains("FERROCUDA_NCCL_LIB"), "{message}");
    assert!(matches!(nccl::UniqueId::new(), Err(Error::NcclNotFound { .. })));
}

/// The child half of the next test.
#[test]
fn child_loads_a_library_that_is_not_nccl() {
    if std::env::var_os("FERROCUDA_TEST_NOT_NCCL").is_none() {
        return;
    }
    let err = nccl::version().unwrap_err();
    assert!(matches!(err, Error::NcclNotFound { .. }), "{err}");
    assert!(err.to_string().contains("libnccl has no `ncclGetVersion`"), "{err}");
}

#[test]
fn a_library_without_nccls_functions_is_reported_by_the_missing_symbol() {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_loads_a_library_that_is_not_nccl"])
        .env("FERROCUDA_TEST_NOT_NCCL", "1")
        .env("FERROCUDA_NCCL_LIB", "libm.so.6")
        .status()
        .unwrap();
    assert!(status.success());
}
