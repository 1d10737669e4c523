#pragma once
// The one place where layers multiply matrices. Layers call gemm() rather than writing Eigen
// products inline, so that the kernel behind it (Eigen's today) can be replaced or specialised for
// a backend without touching any layer.
#include <Eigen/Core>

namespace flotilla::detail {

/// c = a * b, or c += a * b when `accumulate`. `a` and `b` may be transposed Eigen expressions;
/// `c` must not alias either.
template <class Dst, class Lhs, class Rhs>
inline void gemm(Dst&& c, const Lhs& a, const Rhs& b, bool accumulate) {
  if (accumulate) {
    c.noalias() += a * b;
  } else {
    c.noalias() = a * b;
  }
}

}  // namespace flotilla::detail
