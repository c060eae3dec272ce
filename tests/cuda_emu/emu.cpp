// The emulated launch, barriers and warp exchange of tests/cuda_emu/cuda_runtime.h. The threads of a block are
// coroutines (ucontext) run by one host thread: a thread runs until it waits at a barrier (__syncthreads, or the
// warp barrier of a shuffle) or finishes; a barrier releases when all its threads have arrived. Blocks run one
// after another. A block whose threads can no longer all make progress (a barrier some thread never reaches) aborts.
#include <ucontext.h>

#include <cstdio>

#include "cuda_runtime.h"

namespace emu {

dim3 gridDim_, blockDim_, threadIdx_, blockIdx_;
std::vector<float> dyn_smem_;
float* warp_f_;
int* warp_i_;

namespace {

struct Barrier {
  int count = 0, arrived = 0;
  std::vector<int> waiting;
};

struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  bool done = false, blocked = false;
};

std::vector<Fiber> fibers;
ucontext_t sched_ctx;
int current = -1;
Barrier block_bar;
std::vector<Barrier> warp_bars;
const std::function<void()>* body_fn = nullptr;

void wait(Barrier& b) {
  if (++b.arrived == b.count) {  // last to arrive: release the others and go on
    for (int t : b.waiting) fibers[t].blocked = false;
    b.waiting.clear();
    b.arrived = 0;
    return;
  }
  b.waiting.push_back(current);
  fibers[current].blocked = true;
  swapcontext(&fibers[current].ctx, &sched_ctx);
  threadIdx_ = dim3((unsigned)current);
}

void fiber_main() {
  (*body_fn)();
  fibers[current].done = true;
  swapcontext(&fibers[current].ctx, &sched_ctx);
}

}  // namespace

void syncthreads() { wait(block_bar); }
void warp_sync() { wait(warp_bars[threadIdx_.x / 32]); }

void launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const std::function<void()>& body) {
  (void)stream;  // launches run synchronously
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
          f.done = f.blocked = false;
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
            swapcontext(&sched_ctx, &f.ctx);
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

}  // namespace emu
