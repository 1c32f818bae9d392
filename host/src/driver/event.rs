//! Events: creation, recording, waiting, timing.
//!
//! Reference: <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html>.

use super::entries;
#[allow(unused_imports)]
use super::prelude::*;

entries! {
    create = cuEventCreate(ph_event: *mut sys::CUevent, flags: c_uint);
    destroy = cuEventDestroy_v2(h_event: sys::CUevent);
    elapsed_time = cuEventElapsedTime_v2(p_milliseconds: *mut f32, h_start: sys::CUevent, h_end: sys::CUevent);
    query = cuEventQuery(h_event: sys::CUevent);
    record = cuEventRecord(h_event: sys::CUevent, h_stream: sys::CUstream);
    record_with_flags = cuEventRecordWithFlags(h_event: sys::CUevent, h_stream: sys::CUstream, flags: c_uint);
    synchronize = cuEventSynchronize(h_event: sys::CUevent);
}
