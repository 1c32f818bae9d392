//! The element types collectives move and reduce, and the reductions.

/// How values from different ranks are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum (`ncclSum`).
    Sum,
    /// The product (`ncclProd`).
    Prod,
    /// The minimum (`ncclMin`).
    Min,
    /// The maximum (`ncclMax`).
    Max,
    /// The sum divided by the number of ranks (`ncclAvg`); integer division for integers.
    Avg,
}

/// NCCL's data-type codes (`ncclDataType_t`, stable across NCCL 2.x).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum DataType {
    /// `ncclInt8`.
    I8 = 0,
    /// `ncclUint8`.
    U8 = 1,
    /// `ncclInt32`.
    I32 = 2,
    /// `ncclUint32`.
    U32 = 3,
    /// `ncclInt64`.
    I64 = 4,
    /// `ncclUint64`.
    U64 = 5,
    /// `ncclFloat32`.
    F32 = 7,
    /// `ncclFloat64`.
    F64 = 8,
}

mod sealed {
    pub trait Sealed {}
}

/// A type that collectives can move and reduce: the integer and floating-point types NCCL
/// knows. Sealed: the reduction on the host backend must match NCCL's exactly.
pub trait Element: bytemuck::Pod + Send + Sync + PartialEq + std::fmt::Debug + sealed::Sealed {
    /// NCCL's code for this type.
    const DATA_TYPE: DataType;
    /// `a op b` for every op but [`ReduceOp::Avg`] (which is a sum, then [`Element::divide`]).
    fn combine(a: Self, b: Self, op: ReduceOp) -> Self;
    /// `self / ranks`, for [`ReduceOp::Avg`].
    fn divide(self, ranks: usize) -> Self;
}

macro_rules! element {
    ($($t:ty => $code:ident, $add:ident, $mul:ident;)*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DATA_TYPE: DataType = DataType::$code;
            #[inline]
            fn combine(a: Self, b: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => a.$add(b),
                    ReduceOp::Prod => a.$mul(b),
                    ReduceOp::Min => if b < a { b } else { a },
                    ReduceOp::Max => if b > a { b } else { a },
                }
            }
            #[inline]
            fn divide(self, ranks: usize) -> Self {
                self / (ranks as $t)
            }
        }
    )*};
}

/// Plain float arithmetic, named like the integer methods for the macro above.
trait FloatOps {
    fn float_add(self, other: Self) -> Self;
    fn float_mul(self, other: Self) -> Self;
}
impl FloatOps for f32 {
    fn float_add(self, other: Self) -> Self {
        self + other
    }
    fn float_mul(self, other: Self) -> Self {
        self * other
    }
}
impl FloatOps for f64 {
    fn float_add(self, other: Self) -> Self {
        self + other
    }
    fn float_mul(self, other: Self) -> Self {
        self * other
    }
}

// Integers wrap like NCCL's device code (two's complement, no overflow traps).
element! {
    i8 => I8, wrapping_add, wrapping_mul;
    u8 => U8, wrapping_add, wrapping_mul;
    i32 => I32, wrapping_add, wrapping_mul;
    u32 => U32, wrapping_add, wrapping_mul;
    i64 => I64, wrapping_add, wrapping_mul;
    u64 => U64, wrapping_add, wrapping_mul;
    f32 => F32, float_add, float_mul;
    f64 => F64, float_add, float_mul;
}

/// Reduces `inputs` (one slice per rank, in rank order) element by element into `out`, the
/// reference semantics of every reducing collective: ranks combined in order 0, 1, 2, ...
///
/// # Panics
/// When the slices' lengths differ from `out`'s (a programming error).
pub fn reduce_into<T: Element>(inputs: &[&[T]], op: ReduceOp, out: &mut [T]) {
    let Some((first, rest)) = inputs.split_first() else { return };
    assert!(inputs.iter().all(|s| s.len() == out.len()), "reduce_into: every input must have out's length {}", out.len());
    out.copy_from_slice(first);
    for input in rest {
        for (o, &x) in out.iter_mut().zip(input.iter()) {
            *o = T::combine(*o, x, op);
        }
    }
    if op == ReduceOp::Avg {
        for o in out.iter_mut() {
            *o = o.divide(inputs.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_reduces_in_rank_order() {
        let a = [1i32, -4, 7];
        let b = [3i32, 5, -2];
        let c = [2i32, 2, 2];
        let mut out = [0; 3];
        for (op, expected) in
            [(ReduceOp::Sum, [6, 3, 7]), (ReduceOp::Prod, [6, -40, -28]), (ReduceOp::Min, [1, -4, -2]), (ReduceOp::Max, [3, 5, 7]), (ReduceOp::Avg, [2, 1, 2])]
        {
            reduce_into(&[&a, &b, &c], op, &mut out);
            assert_eq!(out, expected, "{op:?}");
        }
    }

    #[test]
    fn integer_sums_wrap_like_the_device() {
        let mut out = [0u8];
        reduce_into(&[&[200u8], &[100u8]], ReduceOp::Sum, &mut out);
        assert_eq!(out, [44]);
    }

    #[test]
    fn float_average_divides_the_sum() {
        let mut out = [0.0f64; 2];
        reduce_into(&[&[1.0, 2.0], &[2.0, 5.0]], ReduceOp::Avg, &mut out);
        assert_eq!(out, [1.5, 3.5]);
    }
}
