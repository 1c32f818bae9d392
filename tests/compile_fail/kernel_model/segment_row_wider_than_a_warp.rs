// Issue 30: a 64-lane segment spans two warps (no shuffle joins them): `segment_row::<64>()`
// does not compile, even without an output to write (the width check is a constant of the
// instance, so the call is reached from `main` here: an unused generic is never instantiated).
use ferrocuda_device::global::segment_row;

fn main() {
    let _ = segment_row::<64>();
}
