//! Streams: creation, waiting, queries, host callbacks, capture.
//!
//! Reference: <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html>.

use super::entries;
#[allow(unused_imports)]
use super::prelude::*;

entries! {
    launch_host_func = cuLaunchHostFunc(h_stream: sys::CUstream, fn_: sys::CUhostFn, user_data: *mut c_void);
    begin_capture = cuStreamBeginCapture_v2(h_stream: sys::CUstream, mode: sys::CUstreamCaptureMode);
    create_with_priority = cuStreamCreateWithPriority(ph_stream: *mut sys::CUstream, flags: c_uint, priority: c_int);
    destroy = cuStreamDestroy_v2(h_stream: sys::CUstream);
    end_capture = cuStreamEndCapture(h_stream: sys::CUstream, ph_graph: *mut sys::CUgraph);
    exchange_capture_mode = cuThreadExchangeStreamCaptureMode(mode: *mut sys::CUstreamCaptureMode);
    get_ctx = cuStreamGetCtx(h_stream: sys::CUstream, pctx: *mut sys::CUcontext);
    get_flags = cuStreamGetFlags(h_stream: sys::CUstream, flags: *mut c_uint);
    get_priority = cuStreamGetPriority(h_stream: sys::CUstream, priority: *mut c_int);
    is_capturing = cuStreamIsCapturing(h_stream: sys::CUstream, capture_status: *mut sys::CUstreamCaptureStatus);
    query = cuStreamQuery(h_stream: sys::CUstream);
    synchronize = cuStreamSynchronize(h_stream: sys::CUstream);
    wait_event = cuStreamWaitEvent(h_stream: sys::CUstream, h_event: sys::CUevent, flags: c_uint);
}
