#pragma once
// akad compat layer (docs/images.md, "AKA compat layer"): the part of hipBLAS that HIP code on
// AgentKernelArena uses, mapped onto cuBLAS (link with -lcublas). hipBLAS is column-major with
// BLAS argument order, as cuBLAS is, so each call forwards its arguments unchanged; only the
// enums differ (hipBLAS numbers operations 111-113 like rocBLAS, and has its own status codes).

#include <cublas_v2.h>

#include "hip/hip_runtime_api.h"

typedef cublasHandle_t hipblasHandle_t;
typedef long long hipblasStride;

typedef enum {
  HIPBLAS_STATUS_SUCCESS = 0,
  HIPBLAS_STATUS_NOT_INITIALIZED = 1,
  HIPBLAS_STATUS_ALLOC_FAILED = 2,
  HIPBLAS_STATUS_INVALID_VALUE = 3,
  HIPBLAS_STATUS_MAPPING_ERROR = 4,
  HIPBLAS_STATUS_EXECUTION_FAILED = 5,
  HIPBLAS_STATUS_INTERNAL_ERROR = 6,
  HIPBLAS_STATUS_NOT_SUPPORTED = 7,
  HIPBLAS_STATUS_ARCH_MISMATCH = 8,
  HIPBLAS_STATUS_HANDLE_IS_NULLPTR = 9,
  HIPBLAS_STATUS_INVALID_ENUM = 10,
  HIPBLAS_STATUS_UNKNOWN = 11,
} hipblasStatus_t;

typedef enum { HIPBLAS_OP_N = 111, HIPBLAS_OP_T = 112, HIPBLAS_OP_C = 113 } hipblasOperation_t;
typedef enum { HIPBLAS_POINTER_MODE_HOST = 0, HIPBLAS_POINTER_MODE_DEVICE = 1 } hipblasPointerMode_t;

namespace akad_hipblas {

inline hipblasStatus_t status(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return HIPBLAS_STATUS_SUCCESS;
    case CUBLAS_STATUS_NOT_INITIALIZED: return HIPBLAS_STATUS_NOT_INITIALIZED;
    case CUBLAS_STATUS_ALLOC_FAILED: return HIPBLAS_STATUS_ALLOC_FAILED;
    case CUBLAS_STATUS_INVALID_VALUE: return HIPBLAS_STATUS_INVALID_VALUE;
    case CUBLAS_STATUS_MAPPING_ERROR: return HIPBLAS_STATUS_MAPPING_ERROR;
    case CUBLAS_STATUS_EXECUTION_FAILED: return HIPBLAS_STATUS_EXECUTION_FAILED;
    case CUBLAS_STATUS_INTERNAL_ERROR: return HIPBLAS_STATUS_INTERNAL_ERROR;
    case CUBLAS_STATUS_NOT_SUPPORTED: return HIPBLAS_STATUS_NOT_SUPPORTED;
    case CUBLAS_STATUS_ARCH_MISMATCH: return HIPBLAS_STATUS_ARCH_MISMATCH;
    default: return HIPBLAS_STATUS_UNKNOWN;
  }
}

// An operation hipBLAS does not define reaches cuBLAS as an invalid value, which cuBLAS refuses.
inline cublasOperation_t operation(hipblasOperation_t op) {
  switch (op) {
    case HIPBLAS_OP_N: return CUBLAS_OP_N;
    case HIPBLAS_OP_T: return CUBLAS_OP_T;
    case HIPBLAS_OP_C: return CUBLAS_OP_C;
  }
  return static_cast<cublasOperation_t>(-1);
}

}  // namespace akad_hipblas

inline hipblasStatus_t hipblasCreate(hipblasHandle_t* handle) { return akad_hipblas::status(cublasCreate(handle)); }
inline hipblasStatus_t hipblasDestroy(hipblasHandle_t handle) { return akad_hipblas::status(cublasDestroy(handle)); }
inline hipblasStatus_t hipblasSetStream(hipblasHandle_t handle, hipStream_t stream) {
  return akad_hipblas::status(cublasSetStream(handle, stream));
}
inline hipblasStatus_t hipblasGetStream(hipblasHandle_t handle, hipStream_t* stream) {
  return akad_hipblas::status(cublasGetStream(handle, stream));
}
inline hipblasStatus_t hipblasSetPointerMode(hipblasHandle_t handle, hipblasPointerMode_t mode) {
  return akad_hipblas::status(cublasSetPointerMode(
      handle, mode == HIPBLAS_POINTER_MODE_DEVICE ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST));
}

inline const char* hipblasStatusToString(hipblasStatus_t s) {
  switch (s) {
    case HIPBLAS_STATUS_SUCCESS: return "HIPBLAS_STATUS_SUCCESS";
    case HIPBLAS_STATUS_NOT_INITIALIZED: return "HIPBLAS_STATUS_NOT_INITIALIZED";
    case HIPBLAS_STATUS_ALLOC_FAILED: return "HIPBLAS_STATUS_ALLOC_FAILED";
    case HIPBLAS_STATUS_INVALID_VALUE: return "HIPBLAS_STATUS_INVALID_VALUE";
    case HIPBLAS_STATUS_MAPPING_ERROR: return "HIPBLAS_STATUS_MAPPING_ERROR";
    case HIPBLAS_STATUS_EXECUTION_FAILED: return "HIPBLAS_STATUS_EXECUTION_FAILED";
    case HIPBLAS_STATUS_INTERNAL_ERROR: return "HIPBLAS_STATUS_INTERNAL_ERROR";
    case HIPBLAS_STATUS_NOT_SUPPORTED: return "HIPBLAS_STATUS_NOT_SUPPORTED";
    case HIPBLAS_STATUS_ARCH_MISMATCH: return "HIPBLAS_STATUS_ARCH_MISMATCH";
    case HIPBLAS_STATUS_HANDLE_IS_NULLPTR: return "HIPBLAS_STATUS_HANDLE_IS_NULLPTR";
    case HIPBLAS_STATUS_INVALID_ENUM: return "HIPBLAS_STATUS_INVALID_ENUM";
    default: return "HIPBLAS_STATUS_UNKNOWN";
  }
}

inline hipblasStatus_t hipblasSgemm(hipblasHandle_t handle, hipblasOperation_t transA, hipblasOperation_t transB, int m,
                                    int n, int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                                    const float* beta, float* C, int ldc) {
  return akad_hipblas::status(cublasSgemm(handle, akad_hipblas::operation(transA), akad_hipblas::operation(transB), m, n,
                                          k, alpha, A, lda, B, ldb, beta, C, ldc));
}
inline hipblasStatus_t hipblasDgemm(hipblasHandle_t handle, hipblasOperation_t transA, hipblasOperation_t transB, int m,
                                    int n, int k, const double* alpha, const double* A, int lda, const double* B,
                                    int ldb, const double* beta, double* C, int ldc) {
  return akad_hipblas::status(cublasDgemm(handle, akad_hipblas::operation(transA), akad_hipblas::operation(transB), m, n,
                                          k, alpha, A, lda, B, ldb, beta, C, ldc));
}
inline hipblasStatus_t hipblasSgemmStridedBatched(hipblasHandle_t handle, hipblasOperation_t transA,
                                                  hipblasOperation_t transB, int m, int n, int k, const float* alpha,
                                                  const float* A, int lda, long long strideA, const float* B, int ldb,
                                                  long long strideB, const float* beta, float* C, int ldc,
                                                  long long strideC, int batchCount) {
  return akad_hipblas::status(cublasSgemmStridedBatched(handle, akad_hipblas::operation(transA),
                                                        akad_hipblas::operation(transB), m, n, k, alpha, A, lda,
                                                        strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount));
}
inline hipblasStatus_t hipblasDgemmStridedBatched(hipblasHandle_t handle, hipblasOperation_t transA,
                                                  hipblasOperation_t transB, int m, int n, int k, const double* alpha,
                                                  const double* A, int lda, long long strideA, const double* B,
                                                  int ldb, long long strideB, const double* beta, double* C, int ldc,
                                                  long long strideC, int batchCount) {
  return akad_hipblas::status(cublasDgemmStridedBatched(handle, akad_hipblas::operation(transA),
                                                        akad_hipblas::operation(transB), m, n, k, alpha, A, lda,
                                                        strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount));
}
