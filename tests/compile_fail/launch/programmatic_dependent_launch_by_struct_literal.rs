// The flag is a private field, so a struct literal cannot set it (nor build a configuration:
// use `LaunchConfig::new` and the `with_*` methods).
use ferrocuda::{Dim3, LaunchConfig};

fn main() {
    let _config = LaunchConfig {
        grid: Dim3::new(1, 1, 1),
        block: Dim3::new(32, 1, 1),
        shared_bytes: 0,
        cluster: None,
        cooperative: false,
        programmatic_dependent_launch: true,
    };
}
