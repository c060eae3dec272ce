// Per-element and per-row math shared by the CPU ops and the CUDA kernels: temperature scale, RoPE angle,
// RMSNorm factor, online softmax with entropy, fp16 rounding of captured probabilities. Everything here is inline, header-only, and free of allocations so the
// same definitions compile for host and device.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FOCAL_HD __host__ __device__ __forceinline__
#else
#define FOCAL_HD inline __attribute__((always_inline))
#endif

namespace focal::math {

// Attention logit multiplier relative to the standard raw score q.k/sqrt(d_head):
//   focal constant:  1/focal_temp
//   learned:         sqrt(d_head)/tau   (tau replaces sqrt(d_head) in the denominator, as in the paper)
//   ssmax:           ssmax_s * ln(n_visible)
FOCAL_HD float focal_scale(float focal_temp) { return 1.0f / focal_temp; }
FOCAL_HD float learned_scale(float tau, float sqrt_d_head) { return sqrt_d_head / tau; }
FOCAL_HD float ssmax_scale(float ssmax_s, int n_visible) { return ssmax_s * logf((float)n_visible); }

FOCAL_HD float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

// HF LLaMA rotary frequency for pair i of a head of size d_head, computed in float32 exactly as
// transformers does (inv_freq = 1 / base^(2i/d) in fp32; angle = fp32(pos) * inv_freq in fp32).
FOCAL_HD float rope_inv_freq(float rope_theta, int i, int d_head) {
  return 1.0f / powf(rope_theta, (float)(2 * i) / (float)d_head);
}
FOCAL_HD float rope_angle(int pos, float inv_freq) { return (float)pos * inv_freq; }

// rotate_half convention: pair (x[i], x[i + d/2]).
FOCAL_HD void rope_rotate_pair(float& x1, float& x2, float cos_a, float sin_a) {
  const float a = x1 * cos_a - x2 * sin_a;
  const float b = x2 * cos_a + x1 * sin_a;
  x1 = a;
  x2 = b;
}

// RMSNorm: y = w * x * rsqrt(mean(x^2) + eps); returns the factor rsqrt(.) given sum of squares over n.
FOCAL_HD float rms_factor(float sum_sq, int n, float eps) { return 1.0f / sqrtf(sum_sq / (float)n + eps); }

// The bits of a float and back (bit casts on host and device).
FOCAL_HD float bits_to_float(int i) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(i);
#else
  return __builtin_bit_cast(float, i);
#endif
}

FOCAL_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return __builtin_bit_cast(uint32_t, f);
#endif
}

// The one fp16 / bf16 codec of focalscope (captures, safetensors and GGUF weights, the CUDA backend's widening):
// IEEE binary16 and bfloat16 bits from fp32 with round-to-nearest-even (overflow to inf, gradual underflow to
// subnormals), and the exact widening back. Both backends round with these functions, so a capture's fp16 values do
// not depend on the device. A NaN stays NaN with its sign and the top bits of its payload, made quiet, as IEEE 754
// §6.2.3 recommends and x86 F16C (vcvtps2ph) does; widening keeps every payload bit.
FOCAL_HD uint16_t float_to_half_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // NaN: quiet, payload's top
  if (ax == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);                         // inf
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                         // >= 65520 rounds to inf
  if (ax >= 0x38800000u) {  // normal half: rebias 127 -> 15, round 13 bits
    const uint32_t r = ax - 0x38000000u;
    return (uint16_t)(sign | ((r + 0x0fffu + ((r >> 13) & 1u)) >> 13));
  }
  const int e = (int)(ax >> 23);       // subnormal half: units of 2^-24 = mantissa >> (126 - e)
  if (e < 102) return (uint16_t)sign;  // below 2^-25: rounds to zero
  const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  const int shift = 126 - e;  // 14..24
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // may carry into the smallest normal: still the right bits
  return (uint16_t)(sign | q);
}

FOCAL_HD float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h >> 15) << 31, exp5 = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp5 == 0x1fu) return bits_to_float((int)(sign | 0x7f800000u | (mant << 13)));
  if (exp5 != 0) return bits_to_float((int)(sign | ((exp5 + 112u) << 23) | (mant << 13)));
  const float v = (float)mant * 5.9604644775390625e-8f;  // subnormal: mant * 2^-24, exact in fp32
  return sign ? -v : v;
}

FOCAL_HD float round_to_half(float f) { return half_bits_to_float(float_to_half_bits(f)); }

// bfloat16: the top 16 bits of the fp32, rounded to nearest even; a NaN keeps its sign and payload's top, made quiet.
FOCAL_HD uint16_t float_to_bf16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

FOCAL_HD float bf16_bits_to_float(uint16_t h) { return bits_to_float((int)((uint32_t)h << 16)); }

// e^x for x <= 0 (max-subtracted logits), branch-free so loops over it vectorise: Cody-Waite range reduction
// x = n ln2 + r, |r| <= ln2/2, then a degree-6 polynomial for e^r (Cephes coefficients), relative error < 2e-7.
// Inputs below -87 give exactly 0 (e^-87 ~ 1.6e-38 is at the bottom of the normal fp32 range); NaN stays NaN.
// The constants are shared with the hand-vectorised softmax pass (kernels/src/softmax_simd.cpp).
namespace exp_coef {
constexpr float kMin = -87.0f;                  // inputs below give 0
constexpr float kLog2e = 1.44269504088896341f;  // n = round(x log2 e)
constexpr float kLn2Hi = 0.693359375f;          // ln 2 = kLn2Hi + kLn2Lo, kLn2Hi exact in 10 bits
constexpr float kLn2Lo = -2.12194440e-4f;
// e^r ~ 1 + r + r^2 P(r), P's coefficients from r^5 down to r^0 (scalars: device code reads them too)
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f, kP3 = 4.1665795894e-2f,
                kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
}  // namespace exp_coef
FOCAL_HD float exp_nonpos(float x_in) {
  using namespace exp_coef;
  // Clamp to [-87, 0]; NaN also maps into range here (so the int conversion below is defined) and is passed
  // through at the end.
  const float x = x_in >= kMin ? (x_in <= 0.0f ? x_in : 0.0f) : kMin;
  // round to nearest with the 1.5 * 2^23 trick (vectorises without SSE4.1's roundps)
  const float n = (x * kLog2e + 12582912.0f) - 12582912.0f;
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kP0;
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  p = p * r * r + r + 1.0f;
  const float e = x_in < kMin ? 0.0f : p * bits_to_float(((int)n + 127) << 23);
  return x_in != x_in ? x_in : e;
}

// x sigmoid(x) with e = e^-|x| through exp_nonpos: sigmoid = 1 / (1 + e) for x >= 0, e / (1 + e) below; branch-free
// so the SwiGLU loop vectorises (decode spent ~5 % of a SmolLM2 token in scalar expf). Relative error < 4e-7: e's
// 2e-7 enters sigmoid damped by 1 / (1 + e), then the divide and multiply round. silu(-inf) is NaN, as x / (1 + e^-x).
FOCAL_HD float silu(float x) {
  const float e = exp_nonpos(x < 0.0f ? x : -x);
  return x * ((x >= 0.0f ? 1.0f : e) / (1.0f + e));
}

// tanh(x) = (1 - e^-2|x|) / (1 + e^-2|x|) with the sign of x, through exp_nonpos: branch-free so the soft-cap and
// GELU loops vectorise, absolute error < 3e-7 (relative error of exp_nonpos < 2e-7, one division); NaN stays NaN,
// +-inf gives +-1.
FOCAL_HD float tanh_approx(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float e = exp_nonpos(-2.0f * ax);
  const float t = (1.0f - e) / (1.0f + e);
  return x < 0.0f ? -t : t;
}

// GELU, tanh approximation (torch gelu(approximate="tanh"), transformers gelu_new / gelu_pytorch_tanh).
FOCAL_HD float gelu_tanh(float x) {
  const float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
  const float inner = kBeta * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanh_approx(inner));
}
// GELU with erf (torch gelu(), transformers "gelu"). 1 + erf(x/sqrt2) is written erfc(-x/sqrt2): the sum cancels for
// x < -2 (1 + erf(-2.8) = 6e-5 holds 1e-3 relative error from one ulp of erf near -1, and the device's erff and the
// CPU's differ by that much), erfc keeps the relative error of a few ulp on both sides.
FOCAL_HD float gelu_erf(float x) { return 0.5f * x * erfcf(-x * 0.7071067811865476f); }
// act: 0 SiLU, 1 GELU-tanh, 2 GELU-erf (ops::Act).
FOCAL_HD float activate(float x, int act) { return act == 0 ? silu(x) : act == 1 ? gelu_tanh(x) : gelu_erf(x); }

// The attention logit a query row's softmax takes: the architecture's raw logit times the focal / learned multiplier,
// then the soft-cap when there is one (Gemma 2: cap * tanh(x / cap)), so temperature acts before the cap.
FOCAL_HD float attn_logit(float raw, float scale, float cap) {
  const float x = raw * scale;
  return cap > 0.0f ? cap * tanh_approx(x / cap) : x;
}

// First key visible to the row with n_vis causal keys under a sliding window (0: no window).
FOCAL_HD int window_first_key(int n_vis, int window) { return window > 0 && n_vis > window ? n_vis - window : 0; }

// LayerNorm of one row: y = (x - mean) * rstd * w + b; returns rstd from the biased variance.
FOCAL_HD float layernorm_rstd(float var, float eps) { return 1.0f / sqrtf(var + eps); }

// Online softmax state over logits x_j: running max m, Z = sum e^(x_j - m), A = sum e^(x_j - m) * (x_j - m).
// Entropy H = ln Z - A / Z (nats). Works in one pass; no T^2 storage. Inputs of -inf (masked) must be skipped.
struct OnlineSoftmax {
  float m;
  float z;
  float a;
};

FOCAL_HD OnlineSoftmax online_softmax_init() { return OnlineSoftmax{-INFINITY, 0.0f, 0.0f}; }

FOCAL_HD void online_softmax_push(OnlineSoftmax& s, float x) {
  if (x > s.m) {
    // rescale: old terms were relative to s.m, now relative to x.
    if (s.z > 0.0f) {
      const float d = s.m - x;  // < 0
      const float r = expf(d);
      s.a = (s.a + d * s.z) * r;
      s.z = s.z * r;
    }
    s.m = x;
  }
  const float d = x - s.m;
  const float e = expf(d);
  s.z += e;
  s.a += e * d;
}

FOCAL_HD void online_softmax_merge(OnlineSoftmax& s, const OnlineSoftmax& o) {
  if (o.z == 0.0f) return;
  if (s.z == 0.0f) {
    s = o;
    return;
  }
  const float m = s.m > o.m ? s.m : o.m;
  const float ds = s.m - m, dof = o.m - m;
  const float rs = expf(ds), ro = expf(dof);
  s.a = (s.a + ds * s.z) * rs + (o.a + dof * o.z) * ro;
  s.z = s.z * rs + o.z * ro;
  s.m = m;
}

// Re-expresses a state relative to a new running max m >= s.m (the tiled attention moves every row of a tile to
// the tile's max at once): Z and A scale by r = e^(s.m - m) as in online_softmax_merge, the caller's r (its own
// exponential, and 2^(s.m - m) for a state kept in log2 units; 0 while s.m is still -inf), by which it also scales
// its running P.V. A partial state with Z = 0 (a lane that has not seen a key of the row yet) only takes the new max.
FOCAL_HD void online_softmax_rebase(OnlineSoftmax& s, float m, float r) {
  if (s.z > 0.0f) {
    s.a = (s.a + (s.m - m) * s.z) * r;
    s.z = s.z * r;
  }
  s.m = m;
}

FOCAL_HD float online_softmax_entropy(const OnlineSoftmax& s) { return logf(s.z) - s.a / s.z; }

// Probability of logit x under a finished online state (the fused attention's second pass): e^(x - m) / Z, formed
// as the CPU softmax forms it (branch-free exp of the max-subtracted logit, times 1/Z). The max logit gets 1/Z.
FOCAL_HD float online_softmax_prob(const OnlineSoftmax& s, float x) { return exp_nonpos(x - s.m) * (1.0f / s.z); }

// The row-metric rules both backends apply (ops.h RowMetric), one definition each:
// a probability counts toward the tail mass when it is below the uniform share 1/n of the row's n visible keys;
FOCAL_HD float tail_term(float p, float inv_n) { return p < inv_n ? p : 0.0f; }
// the sink mass is key 0's probability while key 0 is visible (no sliding window has passed it), else 0;
FOCAL_HD float sink_mass(int first_key, float p0) { return first_key == 0 ? p0 : 0.0f; }
// the relevant mass is the probability summed over the listed keys that are visible, NaN when none is.
FOCAL_HD float relevant_mass(float rel, float n_seen) { return n_seen > 0.0f ? rel : NAN; }

// The entropy-derived row metrics from H (nats) over n_visible keys: H clamped at 0 (rounding gives -1e-8 on
// one-hot rows), H / ln(n_visible) (0 for a single key), and the effective support exp(H).
FOCAL_HD void entropy_metrics(float h, int n_visible, float& h_nats, float& h_norm, float& eff_support) {
  h = h < 0.0f ? 0.0f : h;
  h_nats = h;
  h_norm = n_visible > 1 ? h / logf((float)n_visible) : 0.0f;
  eff_support = expf(h);
}

}  // namespace focal::math
