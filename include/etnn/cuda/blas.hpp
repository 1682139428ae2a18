#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// Matrix products through cuBLASLt, with the bias fused as its epilogue.
// cuBLASLt is column-major; etnn's row-major (R, C) matrix is a column-major (C, R) one, and
// cuda/dense.hpp states each product in those terms. A product's descriptors and algorithm are
// chosen once per shape and operand alignment and kept (a plan, cuda/blas_plan.hpp), so a training
// step costs one cublasLtMatmul per GEMM. One handle, workspace and plan map serve every host thread:
// plans are found, made and launched under a lock, and the workspace is shared safely because all
// products run in order on etnn's one stream.
// fp32 products accumulate in fp32 without TF32 (PyTorch's default), so results match the CPU's
// to rounding; fp64 in fp64. Mixed precision (etnn::bf16 and etnn::fp16 models) multiplies bf16
// or fp16 operands on tensor cores, accumulating and writing fp32 (the bias too), as
// torch.autocast's matmul does before it rounds the result.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../tensor/buffer.hpp"
#include "blas_plan.hpp"
#include "memory.hpp"
#include "runtime.hpp"

namespace etnn::cuda {

namespace detail {
inline void check(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) fail("cuBLAS", call, cublasLtGetStatusString(status), file, line);
}
}  // namespace detail

#define ETNN_CHECK_CUBLAS(call) ::etnn::cuda::detail::check((call), #call, __FILE__, __LINE__)

// The process's cuBLASLt handle, its workspace, and the plans made so far.
class Blas {
 public:
  static Blas& instance() {
    static Blas blas;
    return blas;
  }

  // C = alpha op(A) op(B) + beta C [+ bias], column-major: C is m x n (ldc), op(A) m x k,
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
    // The alignments are the operands' real ones (cuda/blas_plan.hpp): part of what a plan is for.
    const detail::PlanKey key{transpose_a, transpose_b, m, n, k, lda, ldb, ldc, epilogue, data_type<Operand>(),
                              data_type<T>(), beta == T(0), detail::matrix_alignment(a, lda),
                              detail::matrix_alignment(b, ldb), detail::matrix_alignment(c, ldc)};
    const T alpha = T(1);
    plans_.use(key, [this](const detail::PlanKey& chosen) { return make_plan(chosen); }, [&](Plan& plan) {
      if (epilogue != Epilogue::none)
        ETNN_CHECK_CUBLAS(runtime().cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                                   &bias, sizeof bias));
      ETNN_CHECK_CUBLAS(runtime().cublasLtMatmul(handle_, plan.operation, &alpha, a, plan.a, b, plan.b, &beta, c,
                                                 plan.c, c, plan.c, &plan.algorithm, workspace_.data(),
                                                 workspace_.size(), stream()));
    });
  }

  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

 private:
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

  Blas() : workspace_(workspace_bytes) { ETNN_CHECK_CUBLAS(runtime().cublasLtCreate(&handle_)); }
  // The handle, plans and workspace live until exit, when the context goes with them.
  ~Blas() = default;

  // What make_plan has created so far: destroyed when it throws (a plan it returns lives until
  // exit, as the cache's others do), the preference in any case.
  struct PlanUnderConstruction {
    Plan plan;
    cublasLtMatmulPreference_t preference{};
    bool made = false;
    ~PlanUnderConstruction() {
      if (preference != nullptr) runtime().cublasLtMatmulPreferenceDestroy(preference);
      if (made) return;
      for (cublasLtMatrixLayout_t layout : {plan.a, plan.b, plan.c})
        if (layout != nullptr) runtime().cublasLtMatrixLayoutDestroy(layout);
      if (plan.operation != nullptr) runtime().cublasLtMatmulDescDestroy(plan.operation);
    }
  };

  Plan make_plan(const detail::PlanKey& key) {
    const auto [transpose_a, transpose_b, m, n, k, lda, ldb, ldc, epilogue, operand_enum, type_enum, beta_zero,
                align_a, align_b, align_c] = key;
    const auto operand_type = static_cast<cudaDataType_t>(operand_enum);
    const auto type = static_cast<cudaDataType_t>(type_enum);
    const bool is_float = type == CUDA_R_32F;
    PlanUnderConstruction building;
    Plan& plan = building.plan;
    ETNN_CHECK_CUBLAS(runtime().cublasLtMatmulDescCreate(&plan.operation,
                                                         is_float ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F, type));
    const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    ETNN_CHECK_CUBLAS(
        runtime().cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    ETNN_CHECK_CUBLAS(
        runtime().cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    const cublasLtEpilogue_t lt_epilogue =
        epilogue == Epilogue::bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    ETNN_CHECK_CUBLAS(runtime().cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                               &lt_epilogue, sizeof lt_epilogue));
    // Stored shapes: op(A) is m x k, so A is k x m when transposed.
    ETNN_CHECK_CUBLAS(
        runtime().cublasLtMatrixLayoutCreate(&plan.a, operand_type, transpose_a ? k : m, transpose_a ? m : k, lda));
    ETNN_CHECK_CUBLAS(
        runtime().cublasLtMatrixLayoutCreate(&plan.b, operand_type, transpose_b ? n : k, transpose_b ? k : n, ldb));
    ETNN_CHECK_CUBLAS(runtime().cublasLtMatrixLayoutCreate(&plan.c, type, m, n, ldc));
    cublasLtMatmulPreference_t& preference = building.preference;
    ETNN_CHECK_CUBLAS(runtime().cublasLtMatmulPreferenceCreate(&preference));
    const std::size_t workspace = workspace_.size();
    ETNN_CHECK_CUBLAS(runtime().cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
    // The operands' real alignment (C is also D): only algorithms that work with it are offered.
    const std::uint32_t alignments[] = {align_a, align_b, align_c, align_c};
    const cublasLtMatmulPreferenceAttributes_t alignment_attributes[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      ETNN_CHECK_CUBLAS(runtime().cublasLtMatmulPreferenceSetAttribute(preference, alignment_attributes[i],
                                                                       &alignments[i], sizeof alignments[i]));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = runtime().cublasLtMatmulAlgoGetHeuristic(
        handle_, plan.operation, plan.a, plan.b, plan.c, plan.c, preference, 1, &result, &found);
    ETNN_CHECK_CUBLAS(status);
    if (found == 0) {
      std::string what = "no cuBLASLt algorithm for a ";
      what += std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
      what += beta_zero ? " product" : " accumulating product";
      what += " with operands aligned to " + std::to_string(align_a) + ", " + std::to_string(align_b) + " and " +
              std::to_string(align_c) + " bytes";
      detail::fail("cuBLAS", "cublasLtMatmulAlgoGetHeuristic", what.c_str(), __FILE__, __LINE__);
    }
    plan.algorithm = result.algo;
    building.made = true;
    return plan;
  }

  cublasLtHandle_t handle_{};
  Buffer<unsigned char, Cuda> workspace_;
  detail::PlanCache<Plan> plans_;
};

}  // namespace etnn::cuda
