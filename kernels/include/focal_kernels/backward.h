// Backward (gradient) ops of the training path, CPU. Templated on the real type: float for training, double for
// the finite-difference gradient checks. Flat row-major buffers with shapes in the comments; outputs marked "+="
// accumulate, the others are overwritten.
#pragma once

#include <cstdint>

namespace focal::ops {

// C[m, n] (+)= alpha * op(A) . op(B) with row-major A, B, C (BLAS sgemm / dgemm). lda/ldb/ldc are row strides.
template <class R>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, R alpha, const R* a, int lda, const R* b, int ldb, R beta,
          R* c, int ldc);

// y = w * x * r, r = rsqrt(mean(x^2) + eps) per row of n. dx[rows, n] = dL/dx (overwritten); dw[n] += dL/dw.
template <class R>
void rmsnorm_backward(const R* x, const R* w, const R* dy, R* dx, R* dw, int rows, int n, R eps);

// Gradient through the HF RoPE rotation (same fp32 angles as ops::rope): dx[n_tokens, n_heads*d_head] in place.
template <class R>
void rope_backward(R* dx, int n_tokens, int n_heads, int d_head, int pos0, float rope_theta);

// out = silu(gate) * up: dgate[n], dup[n] (overwritten) from dout[n].
template <class R>
void swiglu_backward(const R* gate, const R* up, const R* dout, R* dgate, R* dup, int64_t n);

// Causal attention backward for one sequence at positions 0..T-1, logits = raw * scale[h, i], raw = q.k/sqrt(d).
// Inputs: q [T, n_heads*d], k, v [T, n_kv*d], probs, raw [n_heads, T, T] (0 above the diagonal), scale [n_heads, T],
// datt [T, n_heads*d]. Outputs (overwritten): dq [T, n_heads*d], dk, dv [T, n_kv*d], dscale [n_heads, T]
// (dL/dscale = sum_j dlogit_ij * raw_ij).
template <class R>
void attention_backward(const R* q, const R* k, const R* v, const R* probs, const R* raw, const R* scale, const R* datt,
                        R* dq, R* dk, R* dv, R* dscale, int T, int n_heads, int n_kv_heads, int d_head);

// Mean next-token cross entropy over rows 0..T-2 (row i predicts ids[i+1]) of logits [T, V], scaled by
// 1/n_total (the batch's predicted-token count). Returns the summed loss of this sequence (nats, unscaled);
// dlogits [T, V] = (softmax - onehot) / n_total, last row 0.
template <class R>
double cross_entropy(const R* logits, const int32_t* ids, int T, int V, double n_total, R* dlogits);

}  // namespace focal::ops
