// Issue 30: a partition is a proof obligation of this crate (its map is disjoint under its
// launch requirements): user code cannot add one, even with `unsafe impl`.
use ferrocuda_device::global::LaunchRequirements;
use ferrocuda_device::global::partition::Partition;

pub struct Everything;

unsafe impl Partition for Everything {
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::NONE;
    type Shape = ();
}

fn main() {}
