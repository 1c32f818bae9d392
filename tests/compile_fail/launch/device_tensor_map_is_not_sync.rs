// Issue 21: a device tensor map is not `Sync`: two threads cannot declare launches through one
// map at once (for a store map, that would race like two `&mut` of one buffer).
use ferrocuda::DeviceTensorMap;

fn shared_between_threads<T: Sync>() {}

fn main() {
    shared_between_threads::<DeviceTensorMap<'static>>();
}
