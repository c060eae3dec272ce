// parallel_for: a loop over the OpenMP threads, or on the calling thread without entering OpenMP (kernels-internal).
#pragma once

namespace focal::ops {

// body(i) for i in [0, n): over the OpenMP threads (static schedule) when `parallel`, else on the calling thread
// without any OpenMP call. A `#pragma omp parallel for if (false)` still builds and frees a team of one in libgomp,
// ~0.35 us a call (a 576-float add takes 0.04 us), and SmolLM2's decode made ~210 such calls a token (norms, rope,
// residuals, SwiGLU, the embedding row: ~3 % of its token at 2 threads).
template <class Index, class Body>
inline void parallel_for(Index n, bool parallel, Body&& body) {
  if (parallel) {
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < n; ++i) body(i);
  } else {
    for (Index i = 0; i < n; ++i) body(i);
  }
}

}  // namespace focal::ops
