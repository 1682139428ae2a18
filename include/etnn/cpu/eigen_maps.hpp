#pragma once
// Row-major Eigen views of raw buffers, with compile-time column counts so that Eigen can
// specialise small products. A one-column row-major matrix is spelled column-major (same layout),
// since Eigen rejects row-major column vectors.
#include <Eigen/Core>

namespace etnn::cpu {

template <class T, int Cols>
using RowMajorMatrix = std::conditional_t<Cols == 1, Eigen::Matrix<T, Eigen::Dynamic, 1>,
                                          Eigen::Matrix<T, Eigen::Dynamic, Cols, Eigen::RowMajor>>;

template <class T, int Cols>
using MatrixMap = Eigen::Map<RowMajorMatrix<T, Cols>>;

template <class T, int Cols>
using ConstMatrixMap = Eigen::Map<const RowMajorMatrix<T, Cols>>;

}  // namespace etnn::cpu
