// A CPU emulation of the subset of the CUDA runtime that focal's kernels and CUDA backend use, so their code runs
// (and the parity tests check it) on machines without a GPU. Not CUDA: memory is host memory, streams and events
// are synchronous, a kernel launch runs its blocks one after another, the threads of a block as coroutines on one
// host thread (emu.cpp); __syncthreads is a barrier over the block's threads and __shfl_xor_sync an exchange
// through a per-warp buffer between two barriers over the warp's threads. It checks index arithmetic, reductions, the block/warp structure
// and the backend's logic; not device timing, device libm ulps, or races a real GPU could expose.
// Used only by tests/CMakeLists.txt (cuda_parity_emulated); the sources are turned into C++ by make_emu_source.py.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>
// NOLINTBEGIN(bugprone-reserved-identifier): this header stands in for CUDA, whose names are reserved ones
#define FOCAL_CUDA_EMULATED 1  // tests may read the emulation's own counters (emu::graph_counts)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorNoDevice = 100, cudaErrorInvalidDevice = 101,
                   cudaErrorStreamCaptureUnsupported = 900, cudaErrorGraphExecUpdateFailure = 910 };
typedef struct CUstream_st* cudaStream_t;
namespace emu {
bool capturing();  // a stream capture is open (emu.cpp)
}
typedef struct CUevent_st* cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
struct cudaDeviceProp { char name[256]; };
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char* cudaGetErrorName(cudaError_t) { return "cudaErrorEmu"; }
inline const char* cudaGetErrorString(cudaError_t) { return "emulated error"; }
template <class T> cudaError_t cudaMalloc(T** p, size_t n) { *p = (T*)std::malloc(n ? n : 1); std::memset((void*)*p, 0xCD, n); return cudaSuccess; }
inline cudaError_t cudaFree(void* p) {
  if (emu::capturing()) return cudaErrorStreamCaptureUnsupported;
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) {  // synchronous: a capture forbids it
  if (emu::capturing()) return cudaErrorStreamCaptureUnsupported;
  std::memset(p, v, n);
  return cudaSuccess;
}
template <class T> cudaError_t cudaMallocHost(T** p, size_t n) { *p = (T*)std::malloc(n ? n : 1); return cudaSuccess; }
inline cudaError_t cudaFreeHost(void* p) { std::free(p); return cudaSuccess; }
// Stream capture (CUDA graphs): while a capture is open, kernel launches, cudaMemcpyAsync and cudaMemsetAsync are
// recorded (their arguments as they were at the call) instead of run, and a graph launch runs them in order; the
// calls a capture forbids (synchronisation, synchronous copies, cudaFree) fail as CUDA fails them.
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1, cudaStreamCaptureModeRelaxed = 2 };
typedef struct EmuGraph* cudaGraph_t;
typedef struct EmuGraphExec* cudaGraphExec_t;
struct cudaGraphExecUpdateResultInfo { int result; void* errorNode; void* errorFromNode; };
namespace emu {
// Runs body now, or records it (node name, for the update's topology check) while a capture is open.
void run_or_record(const char* name, std::function<void()> body);
struct GraphCounts { long instantiated = 0, updated = 0, update_refused = 0, launched = 0; };
extern GraphCounts graph_counts;
// Tests: when set to k > 0, the k-th cudaStreamEndCapture from now fails as an invalidated capture does.
extern int fail_capture_countdown;
}  // namespace emu
cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode);
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo* info);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t = nullptr) {
  emu::run_or_record("memset", [=] { std::memset(p, v, n); });
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t = nullptr) {
  emu::run_or_record("memcpy", [=] { std::memcpy(d, s, n); });
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  if (emu::capturing()) return cudaErrorStreamCaptureUnsupported;
  std::memcpy(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { *s = (cudaStream_t)new char; return cudaSuccess; }
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return emu::capturing() ? cudaErrorStreamCaptureUnsupported : cudaSuccess; }
inline cudaError_t cudaStreamDestroy(cudaStream_t s) { delete (char*)s; return cudaSuccess; }
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { *e = (cudaEvent_t)new char; return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = nullptr) { return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return emu::capturing() ? cudaErrorStreamCaptureUnsupported : cudaSuccess; }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete (char*)e; return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 1; return cudaSuccess; }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }  // one device
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) { std::strcpy(p->name, "CPU emulation"); return cudaSuccess; }

#define __launch_bounds__(...)
struct uint4 {
  unsigned x, y, z, w;
};
struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
struct int4 {
  int x, y, z, w;
};
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
struct float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
// DP4A: the four signed byte products of a and b, summed into c.
inline int __dp4a(int a, int b, int c) {
  for (int n = 0; n < 4; ++n) c += (int)(int8_t)(a >> (8 * n)) * (int)(int8_t)(b >> (8 * n));
  return c;
}
// Bit casts and PRMT's default mode: byte n of the result is byte (s >> 4n) & 7 of the 8 bytes {x, y}.
inline float __int_as_float(int v) {
  float f;
  std::memcpy(&f, &v, sizeof f);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned v;
  std::memcpy(&v, &f, sizeof v);
  return v;
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long xy = (unsigned long long)y << 32 | x;
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= (unsigned)((xy >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n);
  return r;
}
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
template <class F> cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute, int) { return cudaSuccess; }

namespace emu {
extern dim3 gridDim_, blockDim_, threadIdx_, blockIdx_;
extern std::vector<float> dyn_smem_;
void syncthreads();
void warp_sync();
extern float* warp_f_;  // [n_warps * 32]
extern int* warp_i_;
// A kernel launch: its blocks run now, or (a capture open) when the graph runs; body holds the arguments' values.
void launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char* name, std::function<void()> body);
template <class T> T* warp_buf();
template <> inline float* warp_buf<float>() { return warp_f_; }
template <> inline int* warp_buf<int>() { return warp_i_; }
template <class T> T shfl_xor(T v, int o) {
  const int t = (int)threadIdx_.x;
  T* buf = warp_buf<T>();
  buf[t] = v;
  warp_sync();
  T r = buf[(t & ~31) | ((t & 31) ^ o)];
  warp_sync();
  return r;
}
// __shfl_sync of a 32-bit value from lane src of the warp (through the int buffer, bit for bit).
template <class T> T shfl(T v, int src) {
  static_assert(sizeof(T) == sizeof(int), "32-bit shuffles only");
  const int t = (int)threadIdx_.x;
  int* buf = warp_i_;
  std::memcpy(&buf[t], &v, sizeof v);
  warp_sync();
  T r;
  std::memcpy(&r, &buf[(t & ~31) | (src & 31)], sizeof r);
  warp_sync();
  return r;
}
}  // namespace emu
#define threadIdx emu::threadIdx_
#define blockIdx emu::blockIdx_
#define blockDim emu::blockDim_
#define gridDim emu::gridDim_
#define __syncthreads() emu::syncthreads()
#define __shfl_xor_sync(mask, v, o) emu::shfl_xor(v, o)
#define __shfl_sync(mask, v, src) emu::shfl(v, src)
// NOLINTEND(bugprone-reserved-identifier)
