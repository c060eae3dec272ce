// CPU backward ops (see backward.h), instantiated for float (training) and double (gradient checks).
#include "focal_kernels/backward.h"

#include <cblas.h>

#include <cmath>
#include <vector>

#include "focal_kernels/shared_math.h"

namespace focal::ops {

template <>
void gemm<float>(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                 float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}

template <>
void gemm<double>(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                  int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}

template <class R>
void rmsnorm_backward(const R* x, const R* w, const R* dy, R* dx, R* dw, int rows, int n, R eps) {
  for (int r = 0; r < rows; ++r) {
    const R* xr = x + (size_t)r * n;
    const R* gr = dy + (size_t)r * n;
    R ss = 0;
    for (int i = 0; i < n; ++i) ss += xr[i] * xr[i];
    const R rr = R(1) / std::sqrt(ss / n + eps);
    R dot = 0;  // sum_j w_j dy_j x_j
    for (int i = 0; i < n; ++i) {
      dot += w[i] * gr[i] * xr[i];
      dw[i] += gr[i] * xr[i] * rr;
    }
    const R c = rr * rr * rr * dot / n;
    for (int i = 0; i < n; ++i) dx[(size_t)r * n + i] = rr * w[i] * gr[i] - c * xr[i];
  }
}

template <class R>
void rope_backward(R* dx, int n_tokens, int n_heads, int d_head, int pos0, float rope_theta) {
  const int half = d_head / 2;
  for (int t = 0; t < n_tokens; ++t)
    for (int i = 0; i < half; ++i) {
      const float ang = math::rope_angle(pos0 + t, math::rope_inv_freq(rope_theta, i, d_head));
      const R cs = cosf(ang), sn = sinf(ang);
      for (int h = 0; h < n_heads; ++h) {
        R* p = dx + ((size_t)t * n_heads + h) * d_head;
        // forward: y1 = x1 c - x2 s, y2 = x2 c + x1 s; transpose: dx1 = dy1 c + dy2 s, dx2 = -dy1 s + dy2 c
        const R a = p[i], b = p[i + half];
        p[i] = a * cs + b * sn;
        p[i + half] = b * cs - a * sn;
      }
    }
}

template <class R>
void swiglu_backward(const R* gate, const R* up, const R* dout, R* dgate, R* dup, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const R g = gate[i];
    const R s = R(1) / (R(1) + std::exp(-g));
    dup[i] = dout[i] * g * s;
    dgate[i] = dout[i] * up[i] * s * (R(1) + g * (R(1) - s));
  }
}

template <class R>
void attention_backward(const R* q, const R* k, const R* v, const R* probs, const R* raw, const R* scale, const R* datt,
                        R* dq, R* dk, R* dv, R* dscale, int T, int n_heads, int n_kv_heads, int d) {
  const int group = n_heads / n_kv_heads;
  const int qs = n_heads * d, ks = n_kv_heads * d;
  const R inv_sqrt_d = R(1) / std::sqrt(R(d));
  for (size_t i = 0; i < (size_t)T * ks; ++i) dk[i] = dv[i] = 0;
    // One kv group per task: its heads accumulate into the same dk/dv columns.
#pragma omp parallel
  {
    std::vector<R> dp((size_t)T * T), ds((size_t)T * T);
#pragma omp for schedule(dynamic, 1)
    for (int g = 0; g < n_kv_heads; ++g)
      for (int hh = 0; hh < group; ++hh) {
        const int h = g * group + hh;
        const R* P = probs + (size_t)h * T * T;
        const R* S = raw + (size_t)h * T * T;
        // dP[T, T] = datt_h [T, d] . v_g^T
        gemm<R>(false, true, T, T, d, R(1), datt + h * d, qs, v + g * d, ks, R(0), dp.data(), T);
        // dv_g += P^T . datt_h
        gemm<R>(true, false, T, d, T, R(1), P, T, datt + h * d, qs, R(1), dv + g * d, ks);
        for (int i = 0; i < T; ++i) {
          const R* pr = P + (size_t)i * T;
          R* dpr = dp.data() + (size_t)i * T;
          R* dsr = ds.data() + (size_t)i * T;
          R dot = 0;
          for (int j = 0; j <= i; ++j) dot += pr[j] * dpr[j];
          R dsc = 0;
          const R sc = scale[(size_t)h * T + i];
          for (int j = 0; j <= i; ++j) {
            const R dl = pr[j] * (dpr[j] - dot);  // dL/dlogit
            dsc += dl * S[(size_t)i * T + j];
            dsr[j] = dl * sc * inv_sqrt_d;  // dL/d(q.k)
          }
          for (int j = i + 1; j < T; ++j) dsr[j] = 0;
          dscale[(size_t)h * T + i] = dsc;
        }
        // dq_h = dS . k_g ; dk_g += dS^T . q_h
        gemm<R>(false, false, T, d, T, R(1), ds.data(), T, k + g * d, ks, R(0), dq + h * d, qs);
        gemm<R>(true, false, T, d, T, R(1), ds.data(), T, q + h * d, qs, R(1), dk + g * d, ks);
      }
  }
}

template <class R>
double cross_entropy(const R* logits, const int32_t* ids, int T, int V, double n_total, R* dlogits) {
  double loss = 0.0;
#pragma omp parallel for reduction(+ : loss) schedule(static)
  for (int i = 0; i < T; ++i) {
    R* dr = dlogits + (size_t)i * V;
    if (i == T - 1) {
      for (int j = 0; j < V; ++j) dr[j] = 0;
      continue;
    }
    const R* lr = logits + (size_t)i * V;
    R mx = lr[0];
    for (int j = 1; j < V; ++j) mx = lr[j] > mx ? lr[j] : mx;
    double z = 0.0;
    for (int j = 0; j < V; ++j) z += std::exp((double)(lr[j] - mx));
    const double lse = std::log(z) + mx;
    const int t = ids[i + 1];
    loss += lse - (double)lr[t];
    for (int j = 0; j < V; ++j) dr[j] = (R)(std::exp((double)lr[j] - lse) / n_total);
    dr[t] -= (R)(1.0 / n_total);
  }
  return loss;
}

// NOLINTBEGIN(bugprone-macro-parentheses): R is a type name
#define FOCAL_INSTANTIATE(R)                                                                                        \
  template void rmsnorm_backward<R>(const R*, const R*, const R*, R*, R*, int, int, R);                             \
  template void rope_backward<R>(R*, int, int, int, int, float);                                                    \
  template void swiglu_backward<R>(const R*, const R*, const R*, R*, R*, int64_t);                                  \
  template void attention_backward<R>(const R*, const R*, const R*, const R*, const R*, const R*, const R*, R*, R*, \
                                      R*, R*, int, int, int, int);                                                  \
  template double cross_entropy<R>(const R*, const int32_t*, int, int, double, R*);
// NOLINTEND(bugprone-macro-parentheses)
FOCAL_INSTANTIATE(float)
FOCAL_INSTANTIATE(double)

}  // namespace focal::ops
