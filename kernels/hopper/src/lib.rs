//! The `sm_90a` kernels of `ferrocuda-kernels` (H100, H200), compiled at build time:
//! [`attention`], the FlashAttention-3-class attention forward (TMA loads into mbarrier rings,
//! `wgmma`, one producer and two consumer warpgroups, the online softmax in registers), and
//! [`attention_backward`], the FlashAttention-3-style backward (a block per 128 keys, dK/dV in
//! registers, dQ summed in f32 by the copy engine's bulk reductions), and [`gemm`], the bf16
//! GEMM (TMA into a 4-stage mbarrier ring, `wgmma` m64n256k16, a producer and two consumer
//! warpgroups, persistent blocks).
//!
//! Every kernel is a `#[kernel]` with a typed launcher. The GEMM's take its tensor maps as
//! `DeviceTensorMap`s; `ferrocuda_kernels::gemm::gemm` calls it for the bf16 shapes it wins.
//! The attention kernels keep the PTX parameters they had as raw entry points (tensor maps as
//! `*const TensorMap`, outputs as raw pointers, so their launchers are `unsafe` and take
//! `DevicePtr`s), and the host finds an instance's launcher by name
//! ([`attention::forward_kernel`], [`attention_backward::backward_kernel`]); call them through
//! `ferrocuda_kernels::attention::attention_forward` and `attention_backward`, which check the
//! shape, the lengths and the alignment, build the tensor maps, declare every buffer's use to
//! the stream and pick them on sm_90 for the shapes they take. `bench/hopper`
//! (`hopper-attention`) launches every forward schedule directly, for its benchmark.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

ferrocuda_device::embed_kernels!();

pub mod attention;
pub mod attention_backward;
pub mod gemm;
