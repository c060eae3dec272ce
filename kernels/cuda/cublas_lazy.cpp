// The cuBLAS entry points focalscope calls, resolved from libcublas with dlopen on first use instead of at program
// start. Linking cuBLAS (and with it cuBLASLt) directly costs every process about 210 MB of resident memory at
// start-up, CPU runs included; with this shim a CPU run never loads it, and a CUDA run loads it when it makes its
// first cuBLAS handle. Each function has the signature of its declaration in cublas_api.h.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>

#ifndef FOCAL_CUBLAS_SONAME
#define FOCAL_CUBLAS_SONAME "libcublas.so"
#endif

namespace {

void* cublas_lib() {
  static void* lib = nullptr;
  static std::once_flag once;
  std::call_once(once, [] { lib = dlopen(FOCAL_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL); });
  return lib;
}

template <typename Fn>
Fn sym(const char* name) {
  void* lib = cublas_lib();
  return lib ? reinterpret_cast<Fn>(dlsym(lib, name)) : nullptr;
}

}  // namespace

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  static const auto fn = sym<cublasStatus_t (*)(cublasHandle_t*)>("cublasCreate_v2");
  return fn ? fn(handle) : CUBLAS_STATUS_NOT_INITIALIZED;  // no libcublas: the caller reports the failed create
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  static const auto fn = sym<cublasStatus_t (*)(cublasHandle_t)>("cublasDestroy_v2");
  return fn ? fn(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  static const auto fn = sym<cublasStatus_t (*)(cublasHandle_t, cudaStream_t)>("cublasSetStream_v2");
  return fn ? fn(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  static const auto fn = sym<cublasStatus_t (*)(cublasHandle_t, cublasMath_t)>("cublasSetMathMode");
  return fn ? fn(handle, mode) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  static const auto fn = sym<cublasStatus_t (*)(cublasHandle_t, cublasMath_t*)>("cublasGetMathMode");
  return fn ? fn(handle, mode) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                         int lda, const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
                                         cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                         cublasGemmAlgo_t algo) {
  using Fn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  static const auto fn = sym<Fn>("cublasGemmEx");
  return fn ? fn(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType,
                 algo)
            : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  static const auto fn = sym<const char* (*)(cublasStatus_t)>("cublasGetStatusName");
  return fn ? fn(status) : "CUBLAS_STATUS_NOT_INITIALIZED";
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  static const auto fn = sym<const char* (*)(cublasStatus_t)>("cublasGetStatusString");
  return fn ? fn(status) : "libcublas could not be loaded (dlopen " FOCAL_CUBLAS_SONAME ")";
}

}  // extern "C"
