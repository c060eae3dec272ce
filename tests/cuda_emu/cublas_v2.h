// CPU emulation of the cuBLAS calls focal uses (see cuda_runtime.h here): a naive column-major fp32 GEMM.
#pragma once
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"
typedef struct cublasContext* cublasHandle_t;
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_NOT_SUPPORTED = 15 };
typedef enum { CUBLAS_OP_N, CUBLAS_OP_T } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT } cublasGemmAlgo_t;
typedef enum { CUBLAS_DEFAULT_MATH } cublasMath_t;
inline cublasStatus_t cublasCreate(cublasHandle_t* h) { *h = (cublasHandle_t) new char; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasDestroy(cublasHandle_t h) { delete (char*)h; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
inline const char* cublasGetStatusName(cublasStatus_t) { return "CUBLAS_EMU"; }
inline const char* cublasGetStatusString(cublasStatus_t) { return "emulated"; }
// Column-major C[m,n] = alpha op(A)[m,k] op(B)[k,n] + beta C
inline cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                                   cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype,
                                   int ldc, cublasComputeType_t, cublasGemmAlgo_t) {
  // fp32, fp16 or bf16 A and B of one type (cuBLAS has no mixed A/B types either), widened exactly; fp32 C and fp32
  // sums. TF32 compute is emulated as fp32 (the tests' tolerances for it cover TF32's rounding of the inputs).
  if (Atype != Btype || Ctype != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (Atype != CUDA_R_32F && Atype != CUDA_R_16F && Atype != CUDA_R_16BF) return CUBLAS_STATUS_NOT_SUPPORTED;
  const float al = *(const float*)alpha, be = *(const float*)beta;
  auto at = [Atype](const void* p, size_t i) -> float {
    if (Atype == CUDA_R_32F) return ((const float*)p)[i];
    const uint16_t h = ((const uint16_t*)p)[i];
    if (Atype == CUDA_R_16BF) return __bfloat162float(__nv_bfloat16{h});
    return __half2float(__half{h});
  };
  float* c = (float*)C;
  if (lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m) return CUBLAS_STATUS_INVALID_VALUE;
  // alpha and beta are read at the call (host pointer mode), the matrices when the product runs (a capture: later)
  emu::run_or_record("gemm", [=] {
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float s = 0.0f;
        for (int p = 0; p < k; ++p) {
          const float av = at(A, ta == CUBLAS_OP_N ? i + (size_t)p * lda : p + (size_t)i * lda);
          const float bv = at(B, tb == CUBLAS_OP_N ? p + (size_t)j * ldb : j + (size_t)p * ldb);
          s += av * bv;
        }
        c[i + (size_t)j * ldc] = al * s + (be != 0.0f ? be * c[i + (size_t)j * ldc] : 0.0f);
      }
  });
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float* alpha, const float* A, int lda, const float* B, int ldb,
                                  const float* beta, float* C, int ldc) {
  return cublasGemmEx(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C, CUDA_R_32F, ldc,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}
