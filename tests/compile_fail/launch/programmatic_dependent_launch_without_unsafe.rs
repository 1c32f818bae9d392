// A programmatic dependent launch lets the kernel start before the previous kernel on the
// stream has finished: only a kernel that waits (`grid_dependency::wait_for_prerequisites`)
// before touching memory may be launched so, which safe code cannot promise.
use ferrocuda::LaunchConfig;

fn main() {
    let _config = LaunchConfig::for_elements(1 << 20, 256).with_programmatic_dependent_launch();
}
