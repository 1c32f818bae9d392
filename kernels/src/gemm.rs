//! gemm placeholder
