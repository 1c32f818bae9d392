//! [`Dim3`]: a 3-D size or index, as CUDA's `dim3` / `uint3`.

use core::fmt;

/// Grid or block dimensions, or a 3-D thread/block index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dim3 {
    /// x
    pub x: u32,
    /// y
    pub y: u32,
    /// z
    pub z: u32,
}

impl Dim3 {
    /// `(1, 1, 1)`.
    pub const ONE: Dim3 = Dim3 { x: 1, y: 1, z: 1 };

    /// `(x, y, z)`.
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }

    /// Number of elements (threads or blocks) it spans.
    pub const fn volume(&self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }

    /// `[x, y, z]`.
    pub const fn axes(&self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3 { x, y, z: 1 }
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3 { x, y, z }
    }
}

impl From<[u32; 3]> for Dim3 {
    fn from([x, y, z]: [u32; 3]) -> Self {
        Dim3 { x, y, z }
    }
}

impl From<Dim3> for [u32; 3] {
    fn from(d: Dim3) -> Self {
        d.axes()
    }
}

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conversions_fill_missing_axes_with_one() {
        assert_eq!(Dim3::from(7u32), Dim3::new(7, 1, 1));
        assert_eq!(Dim3::from((7u32, 3u32)), Dim3::new(7, 3, 1));
        assert_eq!(Dim3::from((7u32, 3u32, 2u32)).volume(), 42);
        assert_eq!(<[u32; 3]>::from(Dim3::from([1, 2, 3])), [1, 2, 3]);
    }
}
