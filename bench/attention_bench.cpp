// The CPU attention op alone (ops::attention) on one SmolLM2-135M-shaped layer (9 query heads, 3 KV heads,
// d_head 64) at T tokens, with every row's metrics or without: seconds against the time its causal q.k and p.v
// FLOPs take at the rate of OpenBLAS sgemm on a projection shape ([T, 576] x [1536, 576]^T) in the same run.
// prefill_bench measures the same ratio over a whole forward; this one isolates the op. Threads: OMP_NUM_THREADS.
#include <omp.h>

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "focal_kernels/ops.h"

using namespace focal;

namespace {
// Seconds of CPU time of the whole process (all threads): on a shared machine it counts only the time this process
// ran, so with OMP_WAIT_POLICY=passive (no spinning at barriers) cpu / threads is a steadier measure than wall time.
double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--help") {
    std::printf("usage: attention_bench [T (8192)] [reps (3)] [heads (9)] [kv_heads (3)] [d_head (64)]\n");
    return 0;
  }
  const int T = argc > 1 ? std::atoi(argv[1]) : 8192;
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const int n_heads = argc > 3 ? std::atoi(argv[3]) : 9, n_kv = argc > 4 ? std::atoi(argv[4]) : 3;
  const int d = argc > 5 ? std::atoi(argv[5]) : 64;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto rnd = [&](size_t n, float s) {
    std::vector<float> v(n);
    for (auto& x : v) x = s * u(rng);
    return v;
  };
  const std::vector<float> q = rnd((size_t)T * n_heads * d, 3.0f);  // [T, n_heads * d]
  const std::vector<float> k = rnd((size_t)n_kv * T * d, 1.0f);     // [n_kv, T, d]
  const std::vector<float> v = rnd((size_t)n_kv * T * d, 1.0f);     // [n_kv, T, d]
  std::vector<float> row_scale((size_t)n_heads * T);                // [n_heads, T]
  for (auto& s : row_scale) s = 1.0f + 0.5f * u(rng);
  std::vector<float> out((size_t)T * n_heads * d);                        // [T, n_heads * d]
  std::vector<float> metrics((size_t)n_heads * T * ops::kNumRowMetrics);  // [n_heads, T, kNumRowMetrics]
  ops::AttentionArgs a;
  a.n_tokens = T;
  a.n_heads = n_heads;
  a.n_kv_heads = n_kv;
  a.d_head = d;
  a.q = q.data();
  a.k_cache = k.data();
  a.v_cache = v.data();
  a.cache_stride = T;
  a.row_scale = row_scale.data();
  a.out = out.data();

  // sgemm rate on the projection shape, as prefill_bench measures it.
  const int hidden = 576, inter = 1536;
  std::vector<float> x((size_t)T * hidden, 0.01f), w((size_t)inter * hidden, 0.02f), y((size_t)T * inter);
  const int n_threads = omp_get_max_threads();
  std::vector<double> gs, gc;
  for (int r = 0; r < reps + 1; ++r) {
    const double t0 = omp_get_wtime(), c0 = cpu_now();
    ops::matmul_xwt(x.data(), w.data(), y.data(), T, inter, hidden);
    if (r) gs.push_back(omp_get_wtime() - t0), gc.push_back((cpu_now() - c0) / n_threads);
  }
  const double sgemm_flops = 2.0 * T * inter * hidden;
  const double flops = 4.0 * n_heads * d * ((double)T * (T + 1) / 2);
  const double ideal_s = flops / (sgemm_flops / median(gs)), ideal_cpu = flops / (sgemm_flops / median(gc));
  std::printf(
      "T %d, heads %d/%d, d %d, threads %d: sgemm %.1f GFLOP/s (cpu time: %.1f); causal q.k + p.v %.1f GFLOP = %.3f s "
      "at it\n",
      T, n_heads, n_kv, d, n_threads, sgemm_flops / median(gs) / 1e9, sgemm_flops / median(gc) / 1e9, flops / 1e9,
      ideal_s);
  for (int with_metrics : {0, 1}) {
    a.metrics = with_metrics ? metrics.data() : nullptr;
    std::vector<double> ts, cs;
    for (int r = 0; r < reps + 1; ++r) {
      const double t0 = omp_get_wtime(), c0 = cpu_now();
      ops::attention(a);
      if (r) ts.push_back(omp_get_wtime() - t0), cs.push_back((cpu_now() - c0) / n_threads);
    }
    const double t = median(ts), c = median(cs);
    std::printf("  %-10s %.3f s (median of %d): %.2fx the FLOPs at the sgemm rate; cpu time / threads %.3f s: %.2fx\n",
                with_metrics ? "metrics" : "no metrics", t, reps, t / ideal_s, c, c / ideal_cpu);
  }
  return 0;
}
