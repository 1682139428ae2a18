#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// Matrix products through cuBLASLt, with its fused epilogues (bias, bias + ReLU).
// cuBLASLt is column-major; etnn's row-major (R, C) matrix is a column-major (C, R) one, and
// cuda/dense.hpp states each product in those terms. A product's descriptors and algorithm are
// chosen once per shape and kept (a plan), so a training step costs one cublasLtMatmul per GEMM.
// fp32 products accumulate in fp32 without TF32 (PyTorch's default), so results match the CPU's
// to rounding; fp64 in fp64. Mixed precision (etnn::bf16 and etnn::fp16 models) multiplies bf16
// or fp16 operands on tensor cores, accumulating and writing fp32 (the bias too), as
// torch.autocast's matmul does before it rounds the result.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <type_traits>

#include "../tensor/buffer.hpp"
#include "memory.hpp"
#include "runtime.hpp"

namespace etnn::cuda {

namespace detail {
inline void check(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) fail("cuBLAS", call, cublasLtGetStatusString(status), file, line);
}
}  // namespace detail

#define ETNN_CHECK_CUBLAS(call) ::etnn::cuda::detail::check((call), #call, __FILE__, __LINE__)

enum class Epilogue { none, bias, bias_relu };

// The process's cuBLASLt handle, its workspace, and the plans made so far.
class Blas {
 public:
  static Blas& instance() {
    static Blas blas;
    return blas;
  }

  // C = alpha op(A) op(B) + beta C [+ bias, relu], column-major: C is m x n (ldc), op(A) m x k,
  // op(B) k x n; bias has m values (one per row of C). Operands are T, or bf16 or fp16 for a
  // float C.
  template <class Operand, class T>
  void matmul(bool transpose_a, bool transpose_b, int m, int n, int k, const Operand* a, int lda, const Operand* b,
              int ldb, T* c, int ldc, T beta, Epilogue epilogue = Epilogue::none, const T* bias = nullptr) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
    static_assert(std::is_same_v<Operand, T> ||
                  ((std::is_same_v<Operand, __nv_bfloat16> || std::is_same_v<Operand, __half>) &&
                   std::is_same_v<T, float>));
    if (m == 0 || n == 0) return;
    const Key key{transpose_a, transpose_b, m, n, k, lda, ldb, ldc, epilogue, data_type<Operand>(), data_type<T>(),
                  beta == T(0)};
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, make_plan(key)).first;
    Plan& plan = it->second;
    if (epilogue != Epilogue::none)
      ETNN_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                       sizeof bias));
    const T alpha = T(1);
    ETNN_CHECK_CUBLAS(cublasLtMatmul(handle_, plan.operation, &alpha, a, plan.a, b, plan.b, &beta, c, plan.c, c,
                                     plan.c, &plan.algorithm, workspace_.data(), workspace_.size(), stream()));
  }

  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

 private:
  // transposes, m, n, k, leading dimensions, epilogue, operand and result types, beta == 0
  using Key = std::tuple<bool, bool, int, int, int, int, int, int, Epilogue, cudaDataType_t, cudaDataType_t, bool>;

  template <class V>
  static constexpr cudaDataType_t data_type() {
    if constexpr (std::is_same_v<V, __nv_bfloat16>) return CUDA_R_16BF;
    else if constexpr (std::is_same_v<V, __half>) return CUDA_R_16F;
    else if constexpr (std::is_same_v<V, float>) return CUDA_R_32F;
    else return CUDA_R_64F;
  }
  struct Plan {
    cublasLtMatmulDesc_t operation{};
    cublasLtMatrixLayout_t a{}, b{}, c{};
    cublasLtMatmulAlgo_t algorithm{};
  };

  static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;  // cuBLAS's advice for Hopper

  Blas() : workspace_(workspace_bytes) { ETNN_CHECK_CUBLAS(cublasLtCreate(&handle_)); }
  // The handle, plans and workspace live until exit, when the context goes with them.
  ~Blas() = default;

  Plan make_plan(const Key& key) {
    const auto [transpose_a, transpose_b, m, n, k, lda, ldb, ldc, epilogue, operand_type, type, beta_zero] = key;
    const bool is_float = type == CUDA_R_32F;
    Plan plan;
    ETNN_CHECK_CUBLAS(cublasLtMatmulDescCreate(&plan.operation, is_float ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F,
                                               type));
    const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    ETNN_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    ETNN_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    const cublasLtEpilogue_t lt_epilogue = epilogue == Epilogue::bias_relu ? CUBLASLT_EPILOGUE_RELU_BIAS
                                           : epilogue == Epilogue::bias    ? CUBLASLT_EPILOGUE_BIAS
                                                                           : CUBLASLT_EPILOGUE_DEFAULT;
    ETNN_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_epilogue,
                                                     sizeof lt_epilogue));
    // Stored shapes: op(A) is m x k, so A is k x m when transposed.
    ETNN_CHECK_CUBLAS(
        cublasLtMatrixLayoutCreate(&plan.a, operand_type, transpose_a ? k : m, transpose_a ? m : k, lda));
    ETNN_CHECK_CUBLAS(
        cublasLtMatrixLayoutCreate(&plan.b, operand_type, transpose_b ? n : k, transpose_b ? k : n, ldb));
    ETNN_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&plan.c, type, m, n, ldc));
    cublasLtMatmulPreference_t preference{};
    ETNN_CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&preference));
    const std::size_t workspace = workspace_.size();
    ETNN_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &workspace, sizeof workspace));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, plan.operation, plan.a, plan.b, plan.c,
                                                                 plan.c, preference, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    ETNN_CHECK_CUBLAS(status);
    if (found == 0) {
      std::string what = "no cuBLASLt algorithm for a ";
      what += std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
      what += beta_zero ? " product" : " accumulating product";
      detail::fail("cuBLAS", "cublasLtMatmulAlgoGetHeuristic", what.c_str(), __FILE__, __LINE__);
    }
    plan.algorithm = result.algo;
    return plan;
  }

  cublasLtHandle_t handle_{};
  Buffer<unsigned char, Cuda> workspace_;
  std::map<Key, Plan> plans_;
};

}  // namespace etnn::cuda
