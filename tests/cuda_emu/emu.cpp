// The emulated launch, barriers and warp exchange of tests/cuda_emu/cuda_runtime.h. The threads of a block are
// coroutines (ucontext) run by one host thread: a thread runs until it waits at a barrier (__syncthreads, or the
// warp barrier of a shuffle) or finishes; a barrier releases when all its threads have arrived. Blocks run one
// after another. A block whose threads can no longer all make progress (a barrier some thread never reaches) aborts.
// Stream capture records the stream work into a graph (one chain of nodes, as one captured stream makes); an
// update succeeds only where the two graphs' nodes are the same kinds and kernels in the same order.
#include <ucontext.h>

#include <cstdio>
#include <string>
#include <utility>

#include "cuda_runtime.h"

struct EmuNode {
  std::string name;  // the kernel's name, or memcpy / memset / gemm
  std::function<void()> run;
};
struct EmuGraph {
  std::vector<EmuNode> nodes;
};
struct EmuGraphExec {
  std::vector<EmuNode> nodes;
};

namespace emu {

GraphCounts graph_counts;
int fail_capture_countdown = 0;
namespace {
EmuGraph* capture = nullptr;  // the graph being recorded, while a capture is open
}  // namespace
bool capturing() { return capture != nullptr; }
void run_or_record(const char* name, std::function<void()> body) {
  if (capture)
    capture->nodes.push_back(EmuNode{name, std::move(body)});
  else
    body();
}

dim3 gridDim_, blockDim_, threadIdx_, blockIdx_;
std::vector<float> dyn_smem_;
float* warp_f_;
int* warp_i_;

namespace {

struct Barrier {
  int count = 0, arrived = 0;
  std::vector<int> waiting;
};

// A fiber starts through makecontext / setcontext; every later switch uses the compiler's setjmp / longjmp
// builtins, which save only the registers (no signal mask system call as swapcontext makes).
struct Fiber {
  ucontext_t ctx;
  void* jmp[5];
  std::vector<char> stack;
  bool started = false, done = false, blocked = false;
};

std::vector<Fiber> fibers;
void* sched_jmp[5];
int current = -1;
Barrier block_bar;
std::vector<Barrier> warp_bars;
const std::function<void()>* body_fn = nullptr;

// __builtin_setjmp and __builtin_longjmp may not be called from the same function.
__attribute__((noinline, noreturn)) void jump(void** buf) { __builtin_longjmp(buf, 1); }

__attribute__((noinline)) void yield_to_scheduler() {
  if (__builtin_setjmp(fibers[current].jmp) == 0) jump(sched_jmp);
}

void fiber_main() {
  (*body_fn)();
  fibers[current].done = true;
  jump(sched_jmp);
}

// Runs fiber t until it blocks or finishes.
__attribute__((noinline)) void resume(int t) {
  Fiber& f = fibers[t];
  if (__builtin_setjmp(sched_jmp) != 0) return;
  if (!f.started) {
    f.started = true;
    setcontext(&f.ctx);
  }
  jump(f.jmp);
}

void wait(Barrier& b) {
  if (++b.arrived == b.count) {  // last to arrive: release the others and go on
    for (int t : b.waiting) fibers[t].blocked = false;
    b.waiting.clear();
    b.arrived = 0;
    return;
  }
  b.waiting.push_back(current);
  fibers[current].blocked = true;
  yield_to_scheduler();
  threadIdx_ = dim3((unsigned)current);
}

}  // namespace

void syncthreads() { wait(block_bar); }
void warp_sync() { wait(warp_bars[threadIdx_.x / 32]); }

namespace {
void run_blocks(dim3 grid, dim3 block, size_t smem, const std::function<void()>& body);
}  // namespace

void launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char* name, std::function<void()> body) {
  (void)stream;  // launches run synchronously, in the order of the calls
  run_or_record(name, [grid, block, smem, body = std::move(body)] { run_blocks(grid, block, smem, body); });
}

namespace {
void run_blocks(dim3 grid, dim3 block, size_t smem, const std::function<void()>& body) {
  gridDim_ = grid;
  blockDim_ = block;
  const int nt = (int)block.x;  // 1-D blocks only
  dyn_smem_.assign(smem / sizeof(float) + 1, NAN);
  std::vector<float> wf(nt + 32);
  std::vector<int> wi(nt + 32);
  warp_f_ = wf.data();
  warp_i_ = wi.data();
  body_fn = &body;
  fibers.resize(nt);
  for (auto& f : fibers)
    if (f.stack.empty()) f.stack.resize(256 * 1024);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        blockIdx_ = dim3(bx, by, bz);
        block_bar = Barrier{nt, 0, {}};
        warp_bars.assign((nt + 31) / 32, Barrier{});
        for (size_t w = 0; w < warp_bars.size(); ++w) warp_bars[w].count = std::min(32, nt - 32 * (int)w);
        for (int t = 0; t < nt; ++t) {
          Fiber& f = fibers[t];
          f.started = f.done = f.blocked = false;
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack.data();
          f.ctx.uc_stack.ss_size = f.stack.size();
          f.ctx.uc_link = nullptr;
          makecontext(&f.ctx, fiber_main, 0);
        }
        for (;;) {
          bool ran = false, all_done = true;
          for (int t = 0; t < nt; ++t) {
            Fiber& f = fibers[t];
            if (f.done) continue;
            all_done = false;
            if (f.blocked) continue;
            current = t;
            threadIdx_ = dim3((unsigned)t);
            resume(t);
            ran = true;
          }
          if (all_done) break;
          if (!ran) {
            std::fprintf(stderr, "cuda emulation: block (%u,%u,%u) deadlocked at a barrier\n", bx, by, bz);
            std::abort();
          }
        }
      }
  current = -1;
}

}  // namespace

}  // namespace emu

cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  if (emu::capture) return cudaErrorStreamCaptureUnsupported;  // one capture at a time here
  emu::capture = new EmuGraph;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* graph) {
  *graph = emu::capture;
  emu::capture = nullptr;
  if (*graph && emu::fail_capture_countdown > 0 && --emu::fail_capture_countdown == 0) {
    delete *graph;
    *graph = nullptr;
    return cudaErrorStreamCaptureUnsupported;
  }
  return *graph ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (emu::capture) return cudaErrorStreamCaptureUnsupported;
  *exec = new EmuGraphExec{graph->nodes};
  ++emu::graph_counts.instantiated;
  return cudaSuccess;
}
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo* info) {
  bool same = exec->nodes.size() == graph->nodes.size();
  for (size_t i = 0; same && i < graph->nodes.size(); ++i) same = exec->nodes[i].name == graph->nodes[i].name;
  if (info) *info = cudaGraphExecUpdateResultInfo{same ? 0 : 2, nullptr, nullptr};
  if (!same) {
    ++emu::graph_counts.update_refused;
    return cudaErrorGraphExecUpdateFailure;
  }
  exec->nodes = graph->nodes;
  ++emu::graph_counts.updated;
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
  if (emu::capture) return cudaErrorStreamCaptureUnsupported;  // a graph launched into a capture: not emulated
  for (const EmuNode& n : exec->nodes) n.run();
  ++emu::graph_counts.launched;
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
