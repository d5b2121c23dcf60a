// The compat layer's hipBLAS-on-cuBLAS header (images/cuda-hip/aka-compat/include/hipblas):
// built with the cuda-hip image's hipcc and linked with cuBLAS here; on a GPU each mapped call
// is checked against a host computation, in the row-major-through-column-major way AKA's
// NormalAttention_dot task uses it.

#include <hipblas/hipblas.h>

#include <cstring>
#include <vector>

#include "hip_check.h"

namespace {

// C = A (m x k) * B (k x n), row-major, per batch.
void hostGemm(const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& c, int batch, int m,
              int k, int n) {
  for (int p = 0; p < batch; ++p)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int q = 0; q < k; ++q) s += double(a[p * m * k + i * k + q]) * b[p * k * n + q * n + j];
        c[p * m * n + i * n + j] = float(s);
      }
}

template <class T>
T* toDevice(const std::vector<T>& host) {
  T* d = nullptr;
  CHECK(hipMalloc(&d, host.size() * sizeof(T)) == hipSuccess);
  CHECK(hipMemcpy(d, host.data(), host.size() * sizeof(T), hipMemcpyHostToDevice) == hipSuccess);
  return d;
}

void checkStridedBatched(hipblasHandle_t handle) {
  const int batch = 3, m = 5, k = 7, n = 4;
  std::vector<float> a(batch * m * k), b(batch * k * n), want(batch * m * n), got(batch * m * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(int(i * 7 % 11) - 5) / 4;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(int(i * 5 % 13) - 6) / 8;
  hostGemm(a, b, want, batch, m, k, n);
  float *da = toDevice(a), *db = toDevice(b), *dc = toDevice(got);
  const float one = 1, zero = 0;
  // Row-major C = A B is column-major C^T = B^T A^T: B first, with n rows.
  CHECK(hipblasSgemmStridedBatched(handle, HIPBLAS_OP_N, HIPBLAS_OP_N, n, m, k, &one, db, n, (long long)k * n, da, k,
                                   (long long)m * k, &zero, dc, n, (long long)m * n, batch) == HIPBLAS_STATUS_SUCCESS);
  CHECK(hipMemcpy(got.data(), dc, got.size() * sizeof(float), hipMemcpyDeviceToHost) == hipSuccess);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK_NEAR(got[i], want[i], 1e-5);
  // A transposed operand: C = A^T^T B, A given as its transpose (k x m row-major).
  std::vector<float> at(batch * k * m);
  for (int p = 0; p < batch; ++p)
    for (int i = 0; i < m; ++i)
      for (int q = 0; q < k; ++q) at[p * k * m + q * m + i] = a[p * m * k + i * k + q];
  float* dat = toDevice(at);
  CHECK(hipblasSgemmStridedBatched(handle, HIPBLAS_OP_N, HIPBLAS_OP_T, n, m, k, &one, db, n, (long long)k * n, dat, m,
                                   (long long)m * k, &zero, dc, n, (long long)m * n, batch) == HIPBLAS_STATUS_SUCCESS);
  CHECK(hipMemcpy(got.data(), dc, got.size() * sizeof(float), hipMemcpyDeviceToHost) == hipSuccess);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK_NEAR(got[i], want[i], 1e-5);
  for (float* p : {da, db, dc, dat}) CHECK(hipFree(p) == hipSuccess);
}

}  // namespace

int main() {
  // Host-only facts first: they hold with or without a GPU.
  CHECK(std::strcmp(hipblasStatusToString(HIPBLAS_STATUS_SUCCESS), "HIPBLAS_STATUS_SUCCESS") == 0);
  CHECK(akad_hipblas::status(CUBLAS_STATUS_INVALID_VALUE) == HIPBLAS_STATUS_INVALID_VALUE);
  CHECK(akad_hipblas::operation(HIPBLAS_OP_T) == CUBLAS_OP_T);
  if (int skip = hipcheck::gpuOrSkip("hipblas_on_cublas")) return skip;
  hipblasHandle_t handle = nullptr;
  CHECK(hipblasCreate(&handle) == HIPBLAS_STATUS_SUCCESS);
  hipStream_t stream = nullptr, seen = nullptr;
  CHECK(hipStreamCreate(&stream) == hipSuccess);
  CHECK(hipblasSetStream(handle, stream) == HIPBLAS_STATUS_SUCCESS);
  CHECK(hipblasGetStream(handle, &seen) == HIPBLAS_STATUS_SUCCESS && seen == stream);
  checkStridedBatched(handle);
  // An operation hipBLAS does not define is refused, not read as some other one.
  float* one = toDevice(std::vector<float>{1.0f});
  const float alpha = 1, beta = 0;
  CHECK(hipblasSgemm(handle, static_cast<hipblasOperation_t>(5), HIPBLAS_OP_N, 1, 1, 1, &alpha, one, 1, one, 1, &beta,
                     one, 1) == HIPBLAS_STATUS_INVALID_VALUE);
  CHECK(hipFree(one) == hipSuccess);
  CHECK(hipblasDestroy(handle) == HIPBLAS_STATUS_SUCCESS);
  CHECK(hipStreamDestroy(stream) == hipSuccess);
  return hipcheck::finish("hipblas_on_cublas");
}
