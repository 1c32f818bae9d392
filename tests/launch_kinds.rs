//! Every parameter kind `#[kernel]` accepts, launched on the GPU and checked against the CPU:
//! a struct by value, a generic kernel's two instances, raw pointers, a bool, views of
//! buffers; plus occupancy-chosen configurations, function attributes and cluster launches.

mod common;

use std::io::Write;

use ferrocuda::{CachePreference, DeviceBuffer, DevicePtr, Error, LaunchConfig, LaunchProblem, Stream, StreamOrdering, launch};
use test_kernels::launch_kinds::{Affine, add_one_raw, affine, mark_blocks, scale_into_f32, scale_into_f64, split_sign};

fn inputs(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i % 17) as f32 * 0.5 - 3.0).collect()
}

#[test]
fn a_struct_argument_arrives_field_by_field() {
    let Some(context) = common::gpu_or_skip("a_struct_argument_arrives_field_by_field") else { return };
    let stream = Stream::new(&context).unwrap();
    let n = 1000;
    let x_host = inputs(n);
    let x = DeviceBuffer::from_slice(&context, &x_host).unwrap();
    let mut out = DeviceBuffer::from_slice(&context, &vec![-1.0f32; n]).unwrap();
    let p = Affine { scale: 2.5, offset: -0.75, limit: 777 };
    affine::launch(&stream, LaunchConfig::for_elements(n, 128), p, &x, &mut out).unwrap();
    stream.synchronize().unwrap();
    let got = out.to_vec().unwrap();
    for i in 0..n {
        let expected = if i < 777 { p.scale.mul_add(x_host[i], p.offset) } else { -1.0 };
        assert_eq!(got[i], expected, "i = {i}");
    }
}

#[test]
fn both_instances_of_a_generic_kernel_run() {
    let Some(context) = common::gpu_or_skip("both_instances_of_a_generic_kernel_run") else { return };
    let stream = Stream::new(&context).unwrap();
    let n = 4099;
    let x32 = inputs(n);
    let x64: Vec<f64> = (0..n).map(|i| i as f64 * 1e-3 + 1e-12).collect();
    let (dx32, dx64) = (DeviceBuffer::from_slice(&context, &x32).unwrap(), DeviceBuffer::from_slice(&context, &x64).unwrap());
    let mut out32 = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    let mut out64 = DeviceBuffer::<f64>::zeroed(&context, n).unwrap();
    scale_into_f32::launch(&stream, LaunchConfig::for_elements(n, 256), -3.0f32, &dx32, &mut out32).unwrap();
    launch!(scale_into_f64<<<(n as u32).div_ceil(256), 256, 0, &stream>>>(1.0 / 3.0, &dx64, &mut out64)).unwrap();
    stream.synchronize().unwrap();
    let (got32, got64) = (out32.to_vec().unwrap(), out64.to_vec().unwrap());
    for i in 0..n {
        assert_eq!(got32[i], -3.0 * x32[i], "f32, i = {i}");
        // Exact in f64 only if the f64 instance really computes in f64.
        assert_eq!(got64[i], x64[i] * (1.0 / 3.0), "f64, i = {i}");
    }
    assert_ne!(scale_into_f32::SYMBOL, scale_into_f64::SYMBOL);
    assert_eq!((scale_into_f32::SYMBOL, scale_into_f64::SYMBOL), ("scale_into_f32", "scale_into_f64"));
    // The generic function is still an ordinary host function.
    let _: fn(f32, &[f32], ferrocuda_device::DisjointSlice<f32>) = test_kernels::launch_kinds::scale_into::<f32>;
}

#[test]
fn raw_pointers_need_unsafe_and_work() {
    let Some(context) = common::gpu_or_skip("raw_pointers_need_unsafe_and_work") else { return };
    let stream = Stream::new(&context).unwrap();
    let n = 300;
    let x_host = inputs(n);
    let x = DeviceBuffer::from_slice(&context, &x_host).unwrap();
    let out = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    // Only the first 200 elements, through pointers of the first element of each buffer.
    let (px, pout): (DevicePtr<f32>, DevicePtr<f32>) = (x.as_device_ptr(), out.as_device_ptr());
    // SAFETY: both buffers hold at least 200 f32 and live until the synchronize below.
    unsafe { add_one_raw::launch(&stream, LaunchConfig::for_elements(200, 64), 200, px, pout) }.unwrap();
    // The macro form, on the elements 250..260 (pointer arithmetic on the device addresses).
    // SAFETY: 10 elements from 250 are inside both buffers, alive until the synchronize.
    unsafe { launch!(add_one_raw<<<1, 32, 0, &stream>>>(10, px.advance(250), pout.advance(250))) }.unwrap();
    stream.synchronize().unwrap();
    let got = out.to_vec().unwrap();
    for i in 0..n {
        let expected = if i < 200 || (250..260).contains(&i) { x_host[i] + 1.0 } else { 0.0 };
        assert_eq!(got[i], expected, "i = {i}");
    }
}

#[test]
fn views_launch_on_part_of_a_buffer() {
    let Some(context) = common::gpu_or_skip("views_launch_on_part_of_a_buffer") else { return };
    let stream = Stream::new(&context).unwrap();
    let n = 1024;
    let x_host = inputs(n);
    let x = DeviceBuffer::from_slice(&context, &x_host).unwrap();
    let mut out = DeviceBuffer::from_slice(&context, &vec![7.0f32; n]).unwrap();
    {
        // out[100..300] = 2 * x[500..700]; the rest of `out` stays untouched.
        let input = x.slice(500..700);
        let mut output = out.slice_mut(100..300);
        assert_eq!((input.len(), output.len()), (200, 200));
        scale_into_f32::launch(&stream, LaunchConfig::for_elements(200, 64), 2.0, &input, &mut output).unwrap();
        // Two disjoint outputs of one buffer in the same launch sequence: split_at_mut.
        let mut tail = out.slice_mut(900..);
        let (mut a, mut b) = tail.split_at_mut(50);
        scale_into_f32::launch(&stream, LaunchConfig::for_elements(50, 64), -1.0, &x.slice(..50), &mut a).unwrap();
        scale_into_f32::launch(&stream, LaunchConfig::for_elements(74, 64), 0.5, &x.slice(..74), &mut b).unwrap();
    }
    stream.synchronize().unwrap();
    let got = out.to_vec().unwrap();
    for i in 0..n {
        let expected = match i {
            100..300 => 2.0 * x_host[i + 400],
            900..950 => -x_host[i - 900],
            950.. => 0.5 * x_host[i - 950],
            _ => 7.0,
        };
        assert_eq!(got[i], expected, "i = {i}");
    }
}

#[test]
fn two_outputs_can_be_disjoint_views_of_one_buffer() {
    let Some(context) = common::gpu_or_skip("two_outputs_can_be_disjoint_views_of_one_buffer") else { return };
    let stream = Stream::new(&context).unwrap();
    let n = 777;
    let x_host = inputs(n);
    let x = DeviceBuffer::from_slice(&context, &x_host).unwrap();
    let mut both = DeviceBuffer::<f32>::zeroed(&context, 2 * n).unwrap();
    {
        let mut all = both.slice_mut(..);
        let (mut low, mut high) = all.split_at_mut(n);
        split_sign::launch(&stream, LaunchConfig::for_elements(n, 128), &x, &mut low, &mut high).unwrap();
    }
    stream.synchronize().unwrap();
    let got = both.to_vec().unwrap();
    for i in 0..n {
        assert_eq!((got[i], got[n + i]), (x_host[i].min(0.0), x_host[i].max(0.0)), "i = {i}");
    }
}

#[test]
fn a_bool_argument_and_the_current_context_launch() {
    let Some(context) = common::gpu_or_skip("a_bool_argument_and_the_current_context_launch") else { return };
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 8).unwrap();
    launch!(mark_blocks<<<8, 32>>>(true, &mut out)).unwrap();
    context.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), (0..8).map(|b| u32::MAX - b).collect::<Vec<_>>());
    launch!(mark_blocks<<<8, 32>>>(false, &mut out)).unwrap();
    context.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), (0..8).collect::<Vec<_>>());
    // A thread that never bound a context gets told what to do, and nothing is launched.
    let message = std::thread::scope(|scope| scope.spawn(|| launch!(mark_blocks<<<8, 32>>>(true, &mut out)).unwrap_err().to_string()).join().unwrap());
    assert!(message.contains("no current CUDA context on this thread"), "{message}");
    assert_eq!(out.to_vec().unwrap(), (0..8).collect::<Vec<_>>());
}

#[test]
fn function_attributes_and_occupancy_are_reported() {
    let Some(context) = common::gpu_or_skip("function_attributes_and_occupancy_are_reported") else { return };
    let function = affine::function(&context).unwrap();
    let attributes = function.attributes().unwrap();
    eprintln!("affine: {attributes:?}");
    let arch = context.device().arch().unwrap();
    assert!(attributes.registers > 0 && attributes.registers <= 255, "{attributes:?}");
    assert!(attributes.max_threads_per_block >= 32 && attributes.max_threads_per_block <= 1024, "{attributes:?}");
    assert_eq!(attributes.binary_version, arch, "the binary that runs is for this device");
    // No static shared memory: `affine` cannot panic, so the builder removed the kernel-name
    // tag that panic reports read (16 bytes in kernels that can panic; builder/src/kernel_tag.rs).
    assert_eq!(attributes.static_shared_bytes, 0);

    let (block, min_grid) = function.suggested_block_size(0).unwrap();
    eprintln!("affine: suggested block {block}, min grid {min_grid}");
    assert!(block >= 32 && block <= attributes.max_threads_per_block && block % 32 == 0, "{block}");
    let per_sm = function.max_active_blocks_per_sm(block, 0).unwrap();
    let sms = context.device().multiprocessor_count().unwrap();
    assert!(per_sm >= 1);
    assert_eq!(min_grid, per_sm * sms, "the minimum grid for full occupancy is blocks per SM times SMs");

    let config = function.config_for_elements(1_000_003).unwrap();
    assert_eq!(config.block.x, block);
    assert_eq!(config.grid.x as usize, 1_000_003usize.div_ceil(block as usize));

    // More dynamic shared memory than the default 48 KiB needs an opt-in.
    // (The opt-in maximum less the kernel's static shared memory, which counts against it.)
    let max = context.limits().max_shared_per_block - attributes.static_shared_bytes;
    function.set_max_dynamic_shared_bytes(max).unwrap();
    assert_eq!(function.attributes().unwrap().max_dynamic_shared_bytes, max);
    function.set_cache_preference(CachePreference::Shared).unwrap();
    let (block_big_smem, _) = function.suggested_block_size(max as usize).unwrap();
    assert!(function.max_active_blocks_per_sm(block_big_smem, max as usize).unwrap() <= 1);

    // And the occupancy-sized configuration launches correctly.
    let stream = Stream::new(&context).unwrap();
    let n = 1_000_003;
    let x_host = inputs(n);
    let x = DeviceBuffer::from_slice(&context, &x_host).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    affine::launch(&stream, config, Affine { scale: 1.0, offset: 1.0, limit: u32::MAX }, &x, &mut out).unwrap();
    stream.synchronize().unwrap();
    let got = out.to_vec().unwrap();
    assert!(got.iter().zip(&x_host).all(|(g, x)| *g == x + 1.0));
}

#[test]
fn cluster_launches_run_every_block_and_bad_clusters_are_named() {
    let Some(context) = common::gpu_or_skip("cluster_launches_run_every_block_and_bad_clusters_are_named") else { return };
    let stream = Stream::new(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    let config = LaunchConfig::new(64u32, 128u32).with_cluster(4u32);
    if !context.limits().cluster_launch {
        let error = mark_blocks::launch(&stream, config, false, &mut out).unwrap_err();
        assert!(matches!(error, Error::InvalidLaunch { problem: LaunchProblem::ClustersUnsupported, .. }), "{error}");
        eprintln!("device has no clusters: refused with `{error}`");
        return;
    }
    mark_blocks::launch(&stream, config, true, &mut out).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), (0..64).map(|b| u32::MAX - b).collect::<Vec<_>>());

    let error = mark_blocks::launch(&stream, LaunchConfig::new(6u32, 32u32).with_cluster(4u32), true, &mut out).unwrap_err();
    assert!(error.to_string().contains("cluster dimension x = 4 does not divide grid dimension x = 6"), "{error}");
    eprintln!("refused: {error}");

    // A cooperative launch of a grid that fits on the device.
    let sms = context.device().multiprocessor_count().unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, sms as usize).unwrap();
    mark_blocks::launch(&stream, LaunchConfig::new(sms, 64u32).cooperative(), false, &mut out).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), (0..sms).collect::<Vec<_>>());
    // One that cannot all be resident at once is refused with the numbers.
    let per_sm = mark_blocks::function(&context).unwrap().max_active_blocks_per_sm(1024, 0).unwrap();
    let too_many = per_sm * sms + 1;
    let error = mark_blocks::launch(&stream, LaunchConfig::new(too_many, 1024u32).cooperative(), false, &mut out).unwrap_err();
    eprintln!("refused: {error}");
    let expected = format!("a cooperative grid of {too_many} blocks exceeds the {} that can be resident at once ({per_sm} per SM x {sms} SMs", per_sm * sms);
    assert!(error.to_string().contains(&expected), "{error}");
    stream.synchronize().unwrap();
}

/// Programmatic dependent launch (sm_90): the secondary, launched with the attribute while the
/// primary still computes, must read the primary's final output on every element, because it
/// calls `wait_for_prerequisites()` first. The primary signals `launch_dependents()` at its
/// start and takes ~1 ms, so a secondary that did not wait would read the initial values.
#[test]
fn programmatic_dependent_launch_reads_the_previous_kernels_output_after_waiting() {
    check_programmatic_dependent_launch("programmatic_dependent_launch_reads_the_previous_kernels_output_after_waiting", StreamOrdering::NonBlocking);
}

/// The pattern of session 4's first PDL test, which never overlapped: buffers refilled with
/// the synchronous `fill` (legacy default stream) before the pair is launched on a
/// `Stream::new` stream. The buffer tracking used to make the secondary's launch wait for the
/// legacy stream (an event recorded after the primary, so after its end); CUDA orders the two
/// streams already, and that wait is no longer queued.
#[test]
fn programmatic_dependent_launch_overlaps_after_synchronous_fills_on_a_blocking_stream() {
    check_programmatic_dependent_launch(
        "programmatic_dependent_launch_overlaps_after_synchronous_fills_on_a_blocking_stream",
        StreamOrdering::WithLegacyDefault,
    );
}

/// A ~1 ms primary of 64 blocks that signals at once, and its dependent launched with PDL on
/// a stream of `ordering`: every output right in 3 repeats, and the dependent started while
/// the primary ran in at least one. With `NonBlocking` the buffers are prepared on the stream
/// (`fill_async`); with `WithLegacyDefault` by synchronous copies.
fn check_programmatic_dependent_launch(test: &str, ordering: StreamOrdering) {
    use test_kernels::grid_dependency::{mix, pdl_primary, pdl_secondary, secondary_of};
    let Some(context) = common::gpu_or_skip(test) else { return };
    let (major, minor) = context.device().compute_capability().unwrap();
    if major < 9 {
        // The kernels need sm_90 PTX (`griddepcontrol`), which this device cannot run.
        // Straight to stderr, like `gpu_or_skip`: the harness captures `eprintln!`.
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: sm_{major}{minor} has no programmatic dependent launch (sm_90+)");
        return;
    }
    let stream = Stream::with_priority(&context, ordering, 0).unwrap();
    let synchronous = ordering == StreamOrdering::WithLegacyDefault;
    // A grid that fits on the device at once (so every block of the primary can signal early
    // and the secondary's blocks find room beside it), with enough rounds to run ~1 ms.
    let (blocks, threads, rounds) = (64u32, 128u32, 1u32 << 16);
    let n = (blocks * threads) as usize;
    const UNWRITTEN: u32 = 0xdead_beef;
    let mut primary_out = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    let mut finished = DeviceBuffer::<u64>::zeroed(&context, n).unwrap();
    let mut secondary_out = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    let mut started = DeviceBuffer::<u64>::zeroed(&context, n).unwrap();
    // The host reference, on every core (half a billion `mix` steps).
    let workers = std::thread::available_parallelism().map_or(4, |p| p.get());
    let expected: Vec<u32> = std::thread::scope(|scope| {
        let chunks: Vec<_> = (0..workers)
            .map(|w| {
                let range = n * w / workers..n * (w + 1) / workers;
                scope.spawn(move || range.map(|i| secondary_of((0..rounds).fold(i as u32, |x, _| mix(x)))).collect::<Vec<u32>>())
            })
            .collect();
        chunks.into_iter().flat_map(|c| c.join().unwrap()).collect()
    });

    let mut overlaps_us = Vec::new();
    for repeat in 0..3 {
        // Each round starts from values the secondary must never see.
        if synchronous {
            primary_out.fill(UNWRITTEN).unwrap();
            secondary_out.fill(0).unwrap();
            finished.copy_from_host(&vec![0u64; n]).unwrap();
            started.copy_from_host(&vec![0u64; n]).unwrap();
        } else {
            primary_out.fill_async(UNWRITTEN, &stream).unwrap();
            secondary_out.fill_async(0, &stream).unwrap();
            finished.zero_async(&stream).unwrap();
            started.zero_async(&stream).unwrap();
        }
        pdl_primary::launch(&stream, LaunchConfig::new(blocks, threads), rounds, &mut primary_out, &mut finished).unwrap();
        // SAFETY: `pdl_secondary` calls `wait_for_prerequisites()` in every thread before it
        // touches memory (its first statement reads only `%globaltimer`).
        let config = unsafe { LaunchConfig::new(blocks, threads).with_programmatic_dependent_launch() };
        // The driver accepts the attribute on this device: the launch itself succeeds.
        pdl_secondary::launch(&stream, config, &primary_out, &mut secondary_out, &mut started).unwrap();
        stream.synchronize().unwrap();

        let got = secondary_out.to_vec().unwrap();
        let stale = got.iter().filter(|&&g| g == secondary_of(UNWRITTEN)).count();
        for i in 0..n {
            assert_eq!(got[i], expected[i], "repeat {repeat}, element {i} ({stale} of {n} elements read the primary's input)");
        }
        let last_primary_write = finished.to_vec().unwrap().into_iter().max().unwrap();
        let first_secondary_start = started.to_vec().unwrap().into_iter().min().unwrap();
        let overlap_us = (last_primary_write as f64 - first_secondary_start as f64) / 1e3;
        eprintln!("{ordering:?}, repeat {repeat}: secondary started {overlap_us:.1} us before the primary's last write (negative: no overlap)");
        overlaps_us.push(overlap_us);
    }
    // The point of the launch attribute: with the primary signalling at once and running ~1 ms,
    // the secondary starts while it runs. The first launches do not overlap (seen on an H100
    // and an H200: the kernels' first launch loads them); the later ones must.
    assert!(
        overlaps_us.iter().any(|&o| o > 100.0),
        "the secondary never started while the primary ran (overlaps {overlaps_us:?} us): something queued between the launches, or the attribute had no effect"
    );
}
