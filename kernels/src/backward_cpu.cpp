// CPU backward ops (see backward.h), instantiated for float (training) and double (gradient checks).
#include "focal_kernels/backward.h"

#include <cblas.h>

#include <algorithm>
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
  // Causal: the query rows of block [r0, r1) see keys [0, r1) only, so each product stops at the block's last row
  // (about half the work of full T x T products). One head per task; each head's dk, dv go to its own [T, d] and the
  // heads of a kv group are summed after, so heads run in parallel without sharing an output.
  constexpr int kRowBlock = 64;
  std::vector<R> dkh((size_t)n_heads * T * d, R(0)), dvh((size_t)n_heads * T * d, R(0));  // [n_heads, T, d]
#pragma omp parallel
  {
    std::vector<R> dp((size_t)kRowBlock * T), ds((size_t)kRowBlock * T);  // [rows of the block, keys]
#pragma omp for schedule(dynamic, 1)
    for (int h = 0; h < n_heads; ++h) {
      const int g = h / group;
      const R* P = probs + (size_t)h * T * T;
      const R* S = raw + (size_t)h * T * T;
      R* dkp = dkh.data() + (size_t)h * T * d;
      R* dvp = dvh.data() + (size_t)h * T * d;
      for (int r0 = 0; r0 < T; r0 += kRowBlock) {
        const int r1 = std::min(T, r0 + kRowBlock), nr = r1 - r0, nk = r1;
        const R* datt_b = datt + (size_t)r0 * qs + (size_t)h * d;
        // dP[nr, nk] = datt_h[r0:r1] . v_g[0:nk]^T
        gemm<R>(false, true, nr, nk, d, R(1), datt_b, qs, v + g * d, ks, R(0), dp.data(), nk);
        // dv_h[0:nk] += P[r0:r1, 0:nk]^T . datt_h[r0:r1]
        gemm<R>(true, false, nk, d, nr, R(1), P + (size_t)r0 * T, T, datt_b, qs, R(1), dvp, d);
        for (int i = r0; i < r1; ++i) {
          const R* pr = P + (size_t)i * T;
          const R* dpr = dp.data() + (size_t)(i - r0) * nk;
          R* dsr = ds.data() + (size_t)(i - r0) * nk;
          R dot = 0;
          for (int j = 0; j <= i; ++j) dot += pr[j] * dpr[j];
          R dsc = 0;
          const R sc = scale[(size_t)h * T + i];
          for (int j = 0; j <= i; ++j) {
            const R dl = pr[j] * (dpr[j] - dot);  // dL/dlogit
            dsc += dl * S[(size_t)i * T + j];
            dsr[j] = dl * sc * inv_sqrt_d;  // dL/d(q.k)
          }
          for (int j = i + 1; j < nk; ++j) dsr[j] = 0;
          dscale[(size_t)h * T + i] = dsc;
        }
        // dq_h[r0:r1] = dS . k_g[0:nk] ; dk_h[0:nk] += dS^T . q_h[r0:r1]
        gemm<R>(false, false, nr, d, nk, R(1), ds.data(), nk, k + g * d, ks, R(0), dq + (size_t)r0 * qs + h * d, qs);
        gemm<R>(true, false, nk, d, nr, R(1), ds.data(), nk, q + (size_t)r0 * qs + h * d, qs, R(1), dkp, d);
      }
    }
  }
  // dk_g, dv_g = sums over the group's heads
#pragma omp parallel for schedule(static) if ((size_t)T * ks > 65536)
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < n_kv_heads; ++g)
      for (int e = 0; e < d; ++e) {
        R sk = 0, sv = 0;
        for (int hh = 0; hh < group; ++hh) {
          const size_t o = ((size_t)(g * group + hh) * T + t) * d + e;
          sk += dkh[o];
          sv += dvh[o];
        }
        dk[(size_t)t * ks + g * d + e] = sk;
        dv[(size_t)t * ks + g * d + e] = sv;
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
