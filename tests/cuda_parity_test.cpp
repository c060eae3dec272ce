// CPU vs CUDA parity: every op of the Backend interface, the fused softmax / flash-style attention kernels, top-k,
// and the whole forward (logits, attention probabilities and raw scores, row metrics, row scales, tau) on the bundled
// models and on a random GQA model with QK-norm and biases, prefill and KV-cache decode. The reference is always the
// CPU path (itself tested against double-precision references and Hugging Face). Compiled only with FOCAL_CUDA on;
// every test skips with the CUDA error when no device is present.
//
// Tolerances (both sides fp32; they differ only in summation order and in the device's libm, which is within 2 ulp
// of the host's for expf / logf / sinf / cosf / powf):
//   exact            embed, add, bias add, KV store, top-k indices and values (no arithmetic / same comparisons)
//   2e-6 relative    swiglu (expf ulp differences)
//   2 (n+1) 2^-24    rmsnorm, relative to the row (sum of n squares in another order)
//   2 (k+1) 2^-24    matmul, per element relative to sum_i |x_i w_i| (fp32 accumulation order)
//   5e-5 of max|x|   RoPE (angle = pos * inv_freq; a 1-ulp powf difference moves angles at pos ~150 by ~1e-5 rad)
//   tail mass        as its metric, or off by ~1/n (j/n, |j| <= 2) when a probability sits at the 1/n threshold
//   attention        raw scores 1e-5 relative (dot products of d terms in another order); probabilities 5e-5
//                    absolute (a logit differing by ~1e-5 relative, times a row scale up to 3 on logits up to ~25,
//                    moves p by p * 3e-5); outputs 5e-5 of max|v|; metrics 5e-5 absolute, entropies 2e-4
//                    (they sum n terms of p ln p-sized values)
//   forward          2e-4 relative to the tensor's max magnitude: the tolerance the CPU path meets against the
//                    double-precision reference (forward_test), i.e. the GPU is held to the same standard.
//
// 16-bit weights (bf16 / fp16 files: the CUDA backend keeps the matrices in 16 bits, the CPU backend widens them at
// load): widening is exact both ways, so both backends multiply the very same fp32 values and differ only in fp32
// summation order. The tolerances are therefore the fp32 ones above: widening (download, embed gather) exact for
// all 65536 bit patterns; matmul 2 (k+1) 2^-24 sum_i |x_i w_i| per element (the standard bound on a k-term fp32
// dot product, summed in any order, times 2 for the two orders compared); whole forward 2e-4 as above.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "focal/capture.h"
#include "focal/device.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal/model_writer.h"
#include "focal_kernels/ops.h"
#include "focal_kernels/shared_math.h"
#include "focal_kernels/ops_cuda.h"
#include "focal_kernels/quant_blocks.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "model_internal.h"
#include "safetensors.h"
#include "test_util.h"

namespace focal {
namespace {

constexpr double kEps32 = 1.0 / (1 << 24);

// Prompt lengths of the whole-forward tests (the GQA one over 128 keys: more than one tile of the fused attention).
constexpr int kPromptFocal = 96, kPromptLearned = 64, kPromptGqa = 150;

std::vector<float> random_vec(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, (double)std::fabs(x));
  return m;
}

// max_i |a_i - b_i|
double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    const double d = std::fabs((double)a[i] - b[i]);
    m = std::max(m, std::isnan(d) ? INFINITY : d);
  }
  return m;
}

// The tail mass counts p < 1/n_visible, so a probability within rounding of 1/n can land on either side on the two
// backends and move the metric by ~1/n. Accepts a difference within tol of j/n for |j| <= 2.
bool tail_mass_close(double got, double ref, int n_visible, double tol) {
  const double d = got - ref, step = 1.0 / n_visible;
  for (int j = -2; j <= 2; ++j)
    if (std::fabs(d - j * step) <= tol) return true;
  return false;
}

bool cuda_device_present(std::string* why) { return resolve_device(Device::kAuto, why) == Device::kCuda; }

// Every CUDA call is checked through FOCAL_CUDA_CHECK: a failure names the call, the CUDA error and the file:line of
// the check. Device 99 exists nowhere (and without a device the first call fails too), so this runs everywhere.
// The device's Q4_K dot takes each sub-block's 6-bit scale and min from the 12 scale bytes as three words, in
// registers (qblocks::scale_min_k4_words), the dequantiser from the bytes (scale_min_k4): both give the values of
// ggml's layout (written out below as the oracle) for every sub-block, on every byte value at every position (each
// byte swept through 0..255 over random others).
TEST(QuantBlocks, ScaleMinFromWordsMatchesTheBytes) {
  auto ggml = [](int j, const uint8_t* q, int* sc, int* mn) {  // get_scale_min_k4's layout
    if (j < 4) {
      *sc = q[j] & 63;
      *mn = q[j + 4] & 63;
    } else {
      *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
      *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
  };
  std::mt19937 rng(11);
  for (int pos = 0; pos < 12; ++pos)
    for (int value = 0; value < 256; ++value) {
      uint8_t q[12];
      for (uint8_t& b : q) b = (uint8_t)(rng() & 0xFF);
      q[pos] = (uint8_t)value;
      uint32_t w[3];
      std::memcpy(w, q, sizeof(w));  // little-endian words, as the device loads them
      for (int j = 0; j < 8; ++j) {
        int sc, mn, sc_b, mn_b, sc_w, mn_w;
        ggml(j, q, &sc, &mn);
        qblocks::scale_min_k4(j, q, &sc_b, &mn_b);
        qblocks::scale_min_k4_words(j, w[0], w[1], w[2], &sc_w, &mn_w);
        ASSERT_EQ(sc_b, sc) << "bytes, sub-block " << j << ", byte " << pos << " = " << value;
        ASSERT_EQ(mn_b, mn) << "bytes, sub-block " << j << ", byte " << pos << " = " << value;
        ASSERT_EQ(sc_w, sc) << "words, sub-block " << j << ", byte " << pos << " = " << value;
        ASSERT_EQ(mn_w, mn) << "words, sub-block " << j << ", byte " << pos << " = " << value;
      }
    }
}

TEST(CudaCheck, FailureNamesTheCallTheErrorAndFileLine) {
  try {
    make_cuda_backend(99);
    FAIL() << "opening CUDA device 99 should fail";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cudaSetDevice failed: "), std::string::npos) << msg;
    const size_t at = msg.find(" at backend_cuda.cpp:");
    ASSERT_NE(at, std::string::npos) << msg;
    const std::string line = msg.substr(at + std::strlen(" at backend_cuda.cpp:"));
    ASSERT_FALSE(line.empty()) << msg;
    EXPECT_GT(std::stoi(line), 0) << msg;
  }
}

// Loads on the GPU in the exact precision: the parity cases hold the CPU's 1e-5 tolerances (a 16-bit model would
// otherwise run fast, the GPU's default for it).
LoadOptions exact_options() {
  LoadOptions o;
  o.precision = Precision::kExact;
  return o;
}
LoadOptions fast_options() {
  LoadOptions o;
  o.precision = Precision::kFast;
  return o;
}

class CudaParity : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string note;
    if (!cuda_device_present(&note)) GTEST_SKIP() << "no CUDA device, CPU-vs-CUDA parity not run (" << note << ")";
    gpu_ = make_cuda_backend(0);
  }
  DeviceBuffer up(const std::vector<float>& h) {
    DeviceBuffer b(*gpu_, h.size());
    gpu_->upload(b.data(), h.data(), h.size());
    return b;
  }
  std::vector<float> down(const DeviceBuffer& b) {
    std::vector<float> h(b.size());
    gpu_->download(h.data(), b.data(), h.size());
    return h;
  }
  std::unique_ptr<Backend> gpu_;
};

TEST_F(CudaParity, EmbedAddBiasKvStoreExact) {
  std::mt19937 rng(1);
  const int V = 50, H = 24, T = 9;
  const auto table = random_vec((size_t)V * H, rng);
  const std::vector<int32_t> ids = {3, 0, 49, 7, 7, 12, 1, 48, 25};
  std::vector<float> ref((size_t)T * H);
  ops::embed(table.data(), ids.data(), ref.data(), T, H);
  DeviceBuffer t = up(table), out(*gpu_, ref.size());
  gpu_->embed(Weight::of_f32(t.data(), t.size()), ids.data(), out.data(), T, H);
  EXPECT_EQ(down(out), ref);

  const auto y0 = random_vec(ref.size(), rng), x = random_vec(ref.size(), rng), b = random_vec(H, rng);
  std::vector<float> y_ref = y0;
  ops::add_inplace(y_ref.data(), x.data(), y_ref.size());
  for (int r = 0; r < T; ++r) ops::add_inplace(y_ref.data() + (size_t)r * H, b.data(), H);
  DeviceBuffer y = up(y0), xd = up(x), bd = up(b);
  gpu_->add_inplace(y.data(), xd.data(), y0.size());
  gpu_->add_row_bias(y.data(), bd.data(), T, H);
  EXPECT_EQ(down(y), y_ref);

  // kv rows [T, n_kv * d] into the cache [n_kv, stride, d] at positions 5..13.
  const int n_kv = 3, d = 8, stride = 20, pos0 = 5;
  const auto kv = random_vec((size_t)T * n_kv * d, rng);
  std::vector<float> cache_ref((size_t)n_kv * stride * d, 0.0f);
  for (int tt = 0; tt < T; ++tt)
    for (int h = 0; h < n_kv; ++h)
      for (int c = 0; c < d; ++c)
        cache_ref[((size_t)h * stride + pos0 + tt) * d + c] = kv[((size_t)tt * n_kv + h) * d + c];
  DeviceBuffer kvd = up(kv), cache(*gpu_, cache_ref.size());
  gpu_->kv_store(kvd.data(), cache.data(), T, n_kv, d, stride, pos0);
  EXPECT_EQ(down(cache), cache_ref);
}

TEST_F(CudaParity, RmsnormIncludingQkNormShapeAndAliasing) {
  std::mt19937 rng(2);
  for (auto [rows, n] : std::vector<std::pair<int, int>>{{37, 192}, {37 * 6, 32}, {3, 1000}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << n);
    const auto x = random_vec((size_t)rows * n, rng, -3.0f, 3.0f), w = random_vec(n, rng, 0.5f, 1.5f);
    std::vector<float> ref(x.size());
    ops::rmsnorm(x.data(), w.data(), ref.data(), rows, n, 1e-5f);
    DeviceBuffer xd = up(x), wd = up(w);
    gpu_->rmsnorm(xd.data(), wd.data(), xd.data(), rows, n, 1e-5f);  // in place, as the QK-norm call
    const auto got = down(xd);
    for (int r = 0; r < rows; ++r) {
      std::vector<float> a(got.begin() + (size_t)r * n, got.begin() + (size_t)(r + 1) * n);
      std::vector<float> b(ref.begin() + (size_t)r * n, ref.begin() + (size_t)(r + 1) * n);
      ASSERT_LE(max_diff(a, b), 2.0 * (n + 1) * kEps32 * max_abs(b)) << "row " << r;
    }
  }
}

TEST_F(CudaParity, MatmulThroughCublasMatchesOpenBlas) {
  std::mt19937 rng(3);
  for (auto [m, n, k] :
       std::vector<std::tuple<int, int, int>>{{37, 101, 192}, {1, 4096, 192}, {64, 1, 192}, {5, 192, 512}}) {
    SCOPED_TRACE(testing::Message() << m << "x" << n << "x" << k);
    const auto x = random_vec((size_t)m * k, rng), w = random_vec((size_t)n * k, rng);
    std::vector<float> ref((size_t)m * n);
    ops::matmul_xwt(x.data(), w.data(), ref.data(), m, n, k);
    DeviceBuffer xd = up(x), wd = up(w), yd(*gpu_, ref.size());
    gpu_->matmul_xwt(xd.data(), Weight::of_f32(wd.data(), wd.size()), yd.data(), m, n, k);
    const auto got = down(yd);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double abs_sum = 0.0;
        for (int c = 0; c < k; ++c) abs_sum += std::fabs((double)x[(size_t)i * k + c] * w[(size_t)j * k + c]);
        ASSERT_NEAR(got[(size_t)i * n + j], ref[(size_t)i * n + j], 2.0 * (k + 1) * kEps32 * abs_sum + 1e-30)
            << i << "," << j;
      }
  }
}

// Every fp16 / bf16 bit pattern through upload_weight: downloaded (host widening) and gathered by embed (device
// widening) it equals the loader's fp16_to_f32 / bf16_to_f32 bit for bit (NaNs: NaN); held in 2 bytes a value.
TEST_F(CudaParity, SixteenBitWeightsWidenExactlyForEveryBitPattern) {
  constexpr int kRows = 256, kHidden = 256;  // [kRows, kHidden] = all 65536 patterns, row-major
  std::vector<uint16_t> bits(kRows * kHidden);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = (uint16_t)i;
  std::vector<int32_t> ids(kRows);
  for (int r = 0; r < kRows; ++r) ids[r] = (r * 37 + 11) % kRows;
  for (WeightType type : {WeightType::kF16, WeightType::kBF16}) {
    SCOPED_TRACE(type == WeightType::kF16 ? "fp16" : "bf16");
    auto widen = [&](uint16_t b) {
      return type == WeightType::kF16 ? math::half_bits_to_float(b) : math::bf16_bits_to_float(b);
    };
    auto same = [](float a, float b) {
      uint32_t ua, ub;
      std::memcpy(&ua, &a, 4);
      std::memcpy(&ub, &b, 4);
      return (std::isnan(a) && std::isnan(b)) || ua == ub;
    };
    const size_t before = gpu_->weight_bytes();
    WeightBuffer w(*gpu_, gpu_->upload_weight(bits.data(), type, bits.size()));
    EXPECT_EQ(gpu_->weight_bytes() - before, bits.size() * 2) << "16-bit device storage";
    std::vector<float> host(bits.size());
    gpu_->download_weight(host.data(), w.get(), host.size());
    for (size_t i = 0; i < bits.size(); ++i) ASSERT_TRUE(same(host[i], widen(bits[i]))) << "download of " << i;
    DeviceBuffer out(*gpu_, (size_t)kRows * kHidden);
    gpu_->embed(w.get(), ids.data(), out.data(), kRows, kHidden);
    const auto got = down(out);
    for (int t = 0; t < kRows; ++t)
      for (int c = 0; c < kHidden; ++c)
        ASSERT_TRUE(same(got[(size_t)t * kHidden + c], widen(bits[(size_t)ids[t] * kHidden + c])))
            << "embed row " << t << " col " << c;
    w.reset();
    EXPECT_EQ(gpu_->weight_bytes(), before) << "freed weights leave the count";
  }
}

// Random 16-bit values of magnitude 2^-6..2 (both signs), as stored in a file.
std::vector<uint16_t> random_16bit(size_t n, WeightType type, std::mt19937& rng) {
  std::vector<uint16_t> v(n);
  for (auto& b : v) {
    const uint32_t r = rng();
    if (type == WeightType::kF16)  // sign | exponent 9..16 (bias 15) | 10 mantissa bits
      b = (uint16_t)(((r >> 31) << 15) | ((9 + (r >> 10) % 8) << 10) | (r & 0x3ffu));
    else  // sign | exponent 121..128 (bias 127) | 7 mantissa bits
      b = (uint16_t)(((r >> 31) << 15) | ((121 + (r >> 7) % 8) << 7) | (r & 0x7fu));
  }
  return v;
}

// matmul_xwt with a 16-bit w against OpenBLAS on the exactly widened w, for the given (m, n, k) cases.
void expect_matmul16_parity(Backend& gpu, const std::vector<std::tuple<int, int, int>>& cases, unsigned seed) {
  std::mt19937 rng(seed);
  for (WeightType type : {WeightType::kF16, WeightType::kBF16})
    for (auto [m, n, k] : cases) {
      SCOPED_TRACE(testing::Message() << (type == WeightType::kF16 ? "fp16 " : "bf16 ") << m << "x" << n << "x" << k);
      const auto x = random_vec((size_t)m * k, rng);
      const auto w16 = random_16bit((size_t)n * k, type, rng);
      std::vector<float> w(w16.size());
      for (size_t i = 0; i < w.size(); ++i)
        w[i] = type == WeightType::kF16 ? math::half_bits_to_float(w16[i]) : math::bf16_bits_to_float(w16[i]);
      std::vector<float> ref((size_t)m * n);
      ops::matmul_xwt(x.data(), w.data(), ref.data(), m, n, k);
      DeviceBuffer xd(gpu, x.size()), yd(gpu, ref.size());
      gpu.upload(xd.data(), x.data(), x.size());
      WeightBuffer wd(gpu, gpu.upload_weight(w16.data(), type, w16.size()));
      gpu.matmul_xwt(xd.data(), wd.get(), yd.data(), m, n, k);
      std::vector<float> got(ref.size());
      gpu.download(got.data(), yd.data(), got.size());
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double abs_sum = 0.0;
          for (int c = 0; c < k; ++c) abs_sum += std::fabs((double)x[(size_t)i * k + c] * w[(size_t)j * k + c]);
          ASSERT_NEAR(got[(size_t)i * n + j], ref[(size_t)i * n + j], 2.0 * (k + 1) * kEps32 * abs_sum + 1e-30)
              << i << "," << j;
        }
    }
}

// The matrix-vector kernel (m <= 8; k % 8 == 0 reads 8 weights per lane and step: k = 192 leaves lanes without a
// step, 512 two steps, 768 three; k = 37 one weight per lane and step) and the widen + cuBLAS path (m > 8).
TEST_F(CudaParity, MatmulWith16BitWeightsMatchesOpenBlas) {
  expect_matmul16_parity(*gpu_,
                         {{1, 4096, 192}, {3, 101, 37}, {8, 300, 512}, {2, 77, 768}, {9, 101, 192}, {37, 513, 96}}, 21);
}

// The widen + cuBLAS path over more than one block of widened rows (n * k > 2^24 floats of scratch).
TEST_F(CudaParity, MatmulWith16BitWeightsOverSeveralWidenBlocks) {
  expect_matmul16_parity(*gpu_, {{9, (1 << 18) + 77, 64}}, 22);
}

// Precision fast: x rounded to the weights' 16-bit type on the device, the product on tensor cores (cuBLAS) with
// fp32 accumulation. Oracle: the CPU product of the same rounded x (math::round_to_half / bf16 rounding) and w,
// within fp32 summation order (2 (k + 1) eps32 sum |x w|); the decode rows (m <= 8) keep the matrix-vector kernel on
// unrounded x, the same bound against the unrounded product.
TEST_F(CudaParity, FastMatmulRoundsXToTheWeightsTypeOnTensorCores) {
  gpu_->set_fast(true);
  std::mt19937 rng(23);
  for (WeightType type : {WeightType::kF16, WeightType::kBF16})
    for (auto [m, n, k] : std::vector<std::tuple<int, int, int>>{{37, 101, 192}, {9, 77, 96}, {3, 50, 64}}) {
      SCOPED_TRACE(testing::Message() << (type == WeightType::kF16 ? "fp16 " : "bf16 ") << m << "x" << n << "x" << k);
      const auto x = random_vec((size_t)m * k, rng);
      const auto w16 = random_16bit((size_t)n * k, type, rng);
      std::vector<float> w(w16.size()), xr(x);
      for (size_t i = 0; i < w.size(); ++i)
        w[i] = type == WeightType::kF16 ? math::half_bits_to_float(w16[i]) : math::bf16_bits_to_float(w16[i]);
      if (m > 8 /* cuda_ops::kMatvecMaxRows */)
        for (float& v : xr)
          v = type == WeightType::kF16 ? math::round_to_half(v) : math::bf16_bits_to_float(math::float_to_bf16_bits(v));
      std::vector<float> ref((size_t)m * n);
      ops::matmul_xwt(xr.data(), w.data(), ref.data(), m, n, k);
      DeviceBuffer xd = up(x), yd(*gpu_, ref.size());
      WeightBuffer wd(*gpu_, gpu_->upload_weight(w16.data(), type, w16.size()));
      gpu_->matmul_xwt(xd.data(), wd.get(), yd.data(), m, n, k);
      const auto got = down(yd);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double abs_sum = 0.0;
          for (int c = 0; c < k; ++c) abs_sum += std::fabs((double)xr[(size_t)i * k + c] * w[(size_t)j * k + c]);
          ASSERT_NEAR(got[(size_t)i * n + j], ref[(size_t)i * n + j], 2.0 * (k + 1) * kEps32 * abs_sum + 1e-30)
              << i << "," << j;
        }
    }
}

TEST_F(CudaParity, RopeAndSwiglu) {
  std::mt19937 rng(4);
  for (auto [d, theta, pos0] :
       std::vector<std::tuple<int, float, int>>{{32, 10000.0f, 0}, {64, 1e6f, 100}, {128, 500000.0f, 3}}) {
    SCOPED_TRACE(testing::Message() << "d=" << d << " theta=" << theta << " pos0=" << pos0);
    const int T = 45, heads = 3;
    auto x = random_vec((size_t)T * heads * d, rng);
    std::vector<float> ref = x;
    ops::rope(ref.data(), T, heads, d, pos0, theta);
    DeviceBuffer xd = up(x);
    gpu_->rope(xd.data(), T, heads, d, pos0, theta);
    EXPECT_LE(max_diff(down(xd), ref), 5e-5 * max_abs(ref));
  }
  const auto g = random_vec(10007, rng, -8.0f, 8.0f), u = random_vec(10007, rng);
  std::vector<float> ref(g.size());
  ops::swiglu(g.data(), u.data(), ref.data(), g.size());
  DeviceBuffer gd = up(g), ud = up(u), od(*gpu_, g.size());
  gpu_->swiglu(gd.data(), ud.data(), od.data(), g.size());
  const auto got = down(od);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(got[i], ref[i], 2e-6 * std::fabs(ref[i]) + 1e-30) << i;
}

// The ops of the other architectures (issue 13): rotary frequencies with a cos / sin factor (yarn, longrope),
// LayerNorm with bias, the GELU activations (gated and plain), soft-capping and scaling. Same tolerances as above:
// rope 5e-5 of max|x|; layernorm 2 (n+1) 2^-24 relative to the row's largest output plus its bias; elementwise
// 2e-6 relative (libm ulp differences of tanhf / erff / expf).
TEST_F(CudaParity, ArchOpsRopeFreqsLayernormActivationsSoftcap) {
  std::mt19937 rng(21);
  const int T = 37, heads = 3, d = 64, pos0 = 90;
  std::vector<float> inv_freq(d / 2);
  for (int i = 0; i < d / 2; ++i) inv_freq[i] = math::rope_inv_freq(10000.0f, i, d) / (1.0f + 0.1f * (float)i);
  auto x = random_vec((size_t)T * heads * d, rng);
  std::vector<float> ref = x;
  ops::rope_freqs(ref.data(), T, heads, d, pos0, inv_freq.data(), 1.1386f);
  DeviceBuffer xd = up(x);
  gpu_->rope_freqs(xd.data(), T, heads, d, pos0, inv_freq.data(), 1.1386f);
  EXPECT_LE(max_diff(down(xd), ref), 5e-5 * max_abs(ref)) << "rope_freqs";

  const int rows = 19, n = 200;
  const auto ln_x = random_vec((size_t)rows * n, rng, -3.0f, 5.0f), ln_w = random_vec(n, rng),
             ln_b = random_vec(n, rng);
  std::vector<float> ln_ref(ln_x.size());
  ops::layernorm(ln_x.data(), ln_w.data(), ln_b.data(), ln_ref.data(), rows, n, 1e-5f);
  DeviceBuffer lxd = up(ln_x), lwd = up(ln_w), lbd = up(ln_b), lyd(*gpu_, ln_x.size());
  gpu_->layernorm(lxd.data(), lwd.data(), lbd.data(), lyd.data(), rows, n, 1e-5f);
  EXPECT_LE(max_diff(down(lyd), ln_ref), 2.0 * (n + 1) * 0x1p-24 * (max_abs(ln_ref) + 1.0)) << "layernorm";

  const auto g = random_vec(10007, rng, -8.0f, 8.0f), u = random_vec(10007, rng);
  for (ops::Act act : {ops::Act::kSilu, ops::Act::kGeluTanh, ops::Act::kGelu})
    for (bool gated : {true, false}) {
      SCOPED_TRACE(testing::Message() << "act " << (int)act << (gated ? " gated" : " plain"));
      std::vector<float> aref(g.size());
      ops::act_mul(g.data(), gated ? u.data() : nullptr, aref.data(), g.size(), act);
      DeviceBuffer gd = up(g), ud = up(u), od(*gpu_, g.size());
      gpu_->act_mul(gd.data(), gated ? ud.data() : nullptr, od.data(), g.size(), act);
      const auto got = down(od);
      for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(got[i], aref[i], 2e-6 * std::fabs(aref[i]) + 1e-7) << i;
    }
  std::vector<float> cref = g;
  ops::softcap_inplace(cref.data(), cref.size(), 3.0f);
  ops::scale_inplace(cref.data(), cref.size(), 1.7f);
  DeviceBuffer cd = up(g);
  gpu_->softcap(cd.data(), g.size(), 3.0f);
  gpu_->scale(cd.data(), g.size(), 1.7f);
  const auto cgot = down(cd);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(cgot[i], cref[i], 2e-6 * std::fabs(cref[i]) + 1e-7) << i;
}

// Collects the rows a row callback hands out into dense [n_heads, T, n_ctx] arrays.
struct RowSink {
  int T = 0, n_ctx = 0, n_past = 0;
  std::vector<float> probs, raw;
  std::vector<int> calls;  // per head
};

void collect_rows(void* ctx, int head, int row0, int n_rows, int stride, const float* p, const float* r) {
  auto* s = static_cast<RowSink*>(ctx);
  s->calls[head]++;
  for (int i = 0; i < n_rows; ++i) {
    const int row = row0 - s->n_past + i;
    for (int j = 0; j <= row0 + i; ++j) {
      s->probs[((size_t)head * s->T + row) * s->n_ctx + j] = p[(size_t)i * stride + j];
      s->raw[((size_t)head * s->T + row) * s->n_ctx + j] = r[(size_t)i * stride + j];
    }
    // The callback contract: zero past the row's visible keys.
    for (int j = row0 + i + 1; j < stride; ++j) {
      EXPECT_EQ(p[(size_t)i * stride + j], 0.0f);
      EXPECT_EQ(r[(size_t)i * stride + j], 0.0f);
    }
  }
}

struct AttnCase {
  int T, n_past, n_heads, n_kv, d, stride;
  bool metrics;
  std::vector<int> wanted;  // heads whose rows are captured (cuBLAS + fused softmax path); the rest: flash path
  int topk;
  bool fp16 = false;      // captured probabilities handed over rounded to fp16 (downloaded in 16 bits)
  int window = 0;         // sliding window (0: none)
  float softcap = 0;      // attention soft-cap (0: none)
  float logit_scale = 0;  // raw = q.k * logit_scale (0: 1/sqrt(d))
  bool fast = false;      // precision fast: the tiled tensor-core kernel (attention_tc) for the uncaptured heads
};

void PrintTo(const AttnCase& c, std::ostream* os) {
  *os << "T=" << c.T << " past=" << c.n_past << " heads=" << c.n_heads << "/" << c.n_kv << " d=" << c.d
      << " wanted=" << c.wanted.size() << " topk=" << c.topk << (c.fp16 ? " fp16" : "") << " window=" << c.window
      << " softcap=" << c.softcap << " logit_scale=" << c.logit_scale << (c.fast ? " fast" : "");
}

class CudaAttention : public CudaParity, public ::testing::WithParamInterface<AttnCase> {};

TEST_P(CudaAttention, MatchesCpuOutputsProbabilitiesAndMetrics) {
  const AttnCase& c = GetParam();
  std::mt19937 rng(5);
  const int n_ctx = c.n_past + c.T;
  auto q = random_vec((size_t)c.T * c.n_heads * c.d, rng, -2.0f, 2.0f);
  auto kc = random_vec((size_t)c.n_kv * c.stride * c.d, rng, -2.0f, 2.0f);
  auto vc = random_vec((size_t)c.n_kv * c.stride * c.d, rng);
  if (c.fast) {
    // The tensor-core kernel rounds q, k and v to fp16: given fp16 values it computes the reference's scores (fp16
    // products are exact in fp32), so the oracle stays the CPU attention of the same inputs. What remains is the
    // fp16 rounding of the probabilities fed to P.V (relative 2^-11 each), in the output's tolerance below.
    for (auto* v : {&q, &kc, &vc})
      for (float& x : *v) x = math::round_to_half(x);
    gpu_->set_fast(true);
  }
  auto scale = random_vec((size_t)c.n_heads * c.T, rng, 0.3f, 3.0f);
  scale[0] = 0.0f;  // a zero scale (uniform row) is allowed
  const std::vector<int32_t> relevant = {0, 3, 17, n_ctx - 1, n_ctx + 5};
  std::vector<uint8_t> wanted(c.n_heads, 0);
  for (int h : c.wanted) wanted[h] = 1;

  auto run = [&](Backend* be, const float* qp, const float* kp, const float* vp, const float* sp, float* out,
                 float* met, RowSink* sink) {
    ops::AttentionArgs a;
    a.n_tokens = c.T;
    a.n_past = c.n_past;
    a.n_heads = c.n_heads;
    a.n_kv_heads = c.n_kv;
    a.d_head = c.d;
    a.q = qp;
    a.k_cache = kp;
    a.v_cache = vp;
    a.cache_stride = c.stride;
    a.row_scale = sp;
    a.out = out;
    a.metrics = c.metrics ? met : nullptr;
    a.topk = c.topk;
    a.relevant = relevant.data();
    a.n_relevant = (int)relevant.size();
    a.head_wanted = c.wanted.empty() ? nullptr : wanted.data();
    a.row_fn = c.wanted.empty() ? nullptr : &collect_rows;
    a.row_ctx = sink;
    a.probs_fp16 = c.fp16;
    a.window = c.window;
    a.softcap = c.softcap;
    a.logit_scale = c.logit_scale;
    if (be)
      be->attention(a);
    else
      ops::attention(a);
  };
  auto make_sink = [&] {
    RowSink s;
    s.T = c.T;
    s.n_ctx = n_ctx;
    s.n_past = c.n_past;
    s.probs.assign((size_t)c.n_heads * c.T * n_ctx, 0.0f);
    s.raw = s.probs;
    s.calls.assign(c.n_heads, 0);
    return s;
  };
  std::vector<float> out_ref((size_t)c.T * c.n_heads * c.d), met_ref((size_t)c.n_heads * c.T * kNumRowMetrics, NAN);
  RowSink sink_ref = make_sink();
  run(nullptr, q.data(), kc.data(), vc.data(), scale.data(), out_ref.data(), met_ref.data(), &sink_ref);

  DeviceBuffer qd = up(q), kd = up(kc), vd = up(vc), sd = up(scale), od(*gpu_, out_ref.size()),
               md(*gpu_, met_ref.size());
  RowSink sink = make_sink();
  run(gpu_.get(), qd.data(), kd.data(), vd.data(), sd.data(), od.data(), md.data(), &sink);
  gpu_->synchronize();

  // fp32 sums in another order: 5e-5 of max |v|; fast: plus 2^-11 of it for the fp16 probabilities in P.V.
  EXPECT_LE(max_diff(down(od), out_ref), (5e-5 + (c.fast ? 0x1p-11 : 0.0)) * max_abs(vc)) << "attention output";
  for (int h = 0; h < c.n_heads; ++h) EXPECT_EQ(sink.calls[h] > 0, wanted[h] != 0) << "row callbacks of head " << h;
  if (c.fp16) {
    // Both sides round with math::float_to_half_bits; fp32 values a hair apart may round to neighbouring halves,
    // so the tolerance is 5e-5 plus one fp16 ulp (2^-10 relative). Every value must be an fp16 value.
    for (size_t i = 0; i < sink.probs.size(); ++i) {
      ASSERT_EQ(sink.probs[i], math::round_to_half(sink.probs[i])) << "not an fp16 value at " << i;
      ASSERT_LE(std::fabs(sink.probs[i] - sink_ref.probs[i]), 5e-5 + std::fabs(sink_ref.probs[i]) * 0x1p-10) << i;
    }
  } else {
    EXPECT_LE(max_diff(sink.probs, sink_ref.probs), 5e-5) << "captured probabilities";
  }
  EXPECT_LE(max_diff(sink.raw, sink_ref.raw), 1e-5 * max_abs(sink_ref.raw)) << "captured raw scores";
  if (!c.metrics) return;
  const auto met = down(md);
  for (int h = 0; h < c.n_heads; ++h)
    for (int i = 0; i < c.T; ++i)
      for (int m = 0; m < kNumRowMetrics; ++m) {
        const size_t at = ((size_t)h * c.T + i) * kNumRowMetrics + m;
        const double tol = (m == kEntropyNats || m == kEntropyNorm || m == kEffSupport) ? 2e-4 : 5e-5;
        if (std::isnan(met_ref[at])) {
          EXPECT_TRUE(std::isnan(met[at])) << "head " << h << " row " << i << " " << row_metric_name(m);
        } else if (m == kTailMass) {
          const int n_vis = c.n_past + i + 1 - math::window_first_key(c.n_past + i + 1, c.window);
          EXPECT_TRUE(tail_mass_close(met[at], met_ref[at], n_vis, tol))
              << "head " << h << " row " << i << " tail mass " << met[at] << " vs " << met_ref[at];
        } else {
          ASSERT_NEAR(met[at], met_ref[at], tol * (m == kEffSupport ? met_ref[at] : 1.0))
              << "head " << h << " row " << i << " " << row_metric_name(m) << (wanted[h] ? " (captured)" : " (fused)");
        }
      }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaAttention,
    ::testing::Values(AttnCase{40, 0, 6, 2, 32, 64, true, {}, 5},             // every head on the flash path
                      AttnCase{40, 5, 6, 2, 32, 64, true, {1, 4}, 5},         // mixed: captured + fused, GQA
                      AttnCase{40, 5, 6, 2, 32, 64, true, {0, 5}, 5, true},   // captured in fp16
                      AttnCase{33, 0, 4, 4, 16, 40, true, {0, 1, 2, 3}, 64},  // all captured, MHA, k = 64 > n
                      AttnCase{3, 300, 4, 1, 200, 310, true, {2}, 7},         // decode-like: long past, d > threads
                      AttnCase{17, 2, 8, 2, 64, 19, false, {}, 5},            // no metrics
                      AttnCase{1, 0, 2, 1, 8, 1, true, {0}, 5},               // a single key
                      // sliding window, soft-cap and an architecture logit scale (Mistral, Gemma 2)
                      AttnCase{40, 5, 6, 2, 32, 64, true, {1, 4}, 5, false, 9},
                      AttnCase{40, 5, 6, 2, 32, 64, true, {0, 5}, 5, true, 0, 2.5f, 0.2f},
                      AttnCase{3, 300, 4, 1, 200, 310, true, {2}, 7, false, 64, 4.0f},
                      AttnCase{33, 0, 4, 4, 16, 40, true, {0, 1, 2, 3}, 64, false, 7, 1.5f},
                      // decode (T <= 8) past 256 keys: attention_split, the keys in chunks (the two cases of
                      // past 300 above too): one row over 23 chunks of 32 keys, GQA 8 / 2, float4 key loads
                      // (d % 16 == 0); a window cutting chunks; MQA with 12 heads a group (two batches of query
                      // heads), k = 20 (the top-k list in local memory); no metrics; soft-cap with a logit scale,
                      // every head of a group captured but one. Then decode under 256 keys: the per-row kernel
                      AttnCase{1, 730, 8, 2, 64, 740, true, {}, 5},
                      AttnCase{2, 400, 4, 2, 32, 410, true, {}, 5, false, 70},
                      AttnCase{8, 300, 12, 1, 16, 310, true, {}, 20}, AttnCase{4, 300, 6, 3, 48, 310, false, {}, 5},
                      AttnCase{1, 290, 4, 2, 64, 295, true, {0, 1, 3}, 5, false, 0, 2.5f, 0.2f},
                      AttnCase{3, 100, 4, 1, 200, 110, true, {2}, 7},
                      // precision fast: the tensor-core kernel (T >= 16, d of 32 / 64 / 96 / 128): GQA; two query
                      // blocks; mixed with captured heads; several key tiles with k = 64; a window starting inside a
                      // tile; soft-cap with a logit scale at d = 96; no metrics
                      AttnCase{70, 0, 4, 2, 64, 72, true, {}, 5, false, 0, 0, 0, true},
                      AttnCase{150, 10, 2, 1, 32, 160, true, {}, 5, false, 0, 0, 0, true},  // two 128-row blocks
                      AttnCase{40, 5, 6, 2, 64, 64, true, {1, 4}, 5, false, 0, 0, 0, true},
                      AttnCase{20, 100, 2, 1, 128, 130, true, {}, 64, false, 0, 0, 0, true},
                      AttnCase{40, 70, 4, 2, 64, 120, true, {}, 5, false, 9, 0, 0, true},
                      AttnCase{33, 3, 4, 4, 96, 40, true, {}, 7, false, 0, 2.5f, 0.2f, true},
                      AttnCase{17, 2, 8, 2, 64, 19, false, {}, 5, false, 0, 0, 0, true}));

TEST_F(CudaParity, TopkRowsMatchesCpuTopkWithTies) {
  std::mt19937 rng(6);
  const int rows = 5, n = 4096, k = 10;
  auto x = random_vec((size_t)rows * n, rng, -4.0f, 4.0f);
  for (auto& v : x) v = std::round(v * 4.0f) / 4.0f;  // many ties: lower index must come first
  float* xd = nullptr;
  int32_t* idx_d = nullptr;
  float* val_d = nullptr;
  ASSERT_EQ(cudaMalloc(&xd, x.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&idx_d, (size_t)rows * k * sizeof(int32_t)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&val_d, (size_t)rows * k * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(xd, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  cuda_ops::Ctx ctx;  // default stream; top-k needs no cuBLAS
  ASSERT_EQ(cuda_ops::topk_rows(ctx, xd, rows, n, k, idx_d, val_d), cudaSuccess);
  std::vector<int32_t> idx((size_t)rows * k);
  std::vector<float> val((size_t)rows * k);
  ASSERT_EQ(cudaMemcpy(idx.data(), idx_d, idx.size() * sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(val.data(), val_d, val.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cuda_ops::topk_rows(ctx, xd, rows, n, 65, idx_d, val_d), cudaErrorInvalidValue) << "k > 64 refused";
  cudaFree(xd);
  cudaFree(idx_d);
  cudaFree(val_d);
  for (int r = 0; r < rows; ++r) {
    std::vector<int32_t> ri(k);
    std::vector<float> rv(k);
    ops::topk(x.data() + (size_t)r * n, n, k, ri.data(), rv.data());
    for (int i = 0; i < k; ++i) {
      EXPECT_EQ(idx[(size_t)r * k + i], ri[i]) << "row " << r << " rank " << i;
      EXPECT_EQ(val[(size_t)r * k + i], rv[i]) << "row " << r << " rank " << i;
    }
  }
}

// v as the fp16 bits of a block's scale at p (little-endian).
void put_f16(uint8_t* p, float v) {
  const uint16_t h = math::float_to_half_bits(v);
  p[0] = (uint8_t)(h & 0xFF);
  p[1] = (uint8_t)(h >> 8);
}

// rows x nb blocks of a format (qblocks): random bytes, the fp16 scales (d, and the min's or offset's where the
// format has one) set to finite values of a few sizes.
std::vector<uint8_t> random_quant_rows(int type, int rows, int nb, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  const size_t bb = qblocks::block_bytes(type), row_bytes = (size_t)nb * bb;
  std::vector<uint8_t> w((size_t)rows * row_bytes);
  for (auto& b : w) b = (uint8_t)byte(rng);
  for (int r = 0; r < rows; ++r)
    for (int b = 0; b < nb; ++b) {
      uint8_t* blk = w.data() + (size_t)r * row_bytes + (size_t)b * bb;
      if (type == qblocks::kQ6_K) {
        put_f16(blk + 208, 0.01f + 0.001f * (b % 7));
      } else {
        put_f16(blk, 0.02f + 0.001f * (r % 5));
        if (type == qblocks::kQ4_1 || type == qblocks::kQ4_K || type == qblocks::kQ5_K)
          put_f16(blk + 2, 0.01f + 0.002f * (b % 3));
      }
    }
  return w;
}

// The quantized matrix-vector kernel on every block format and every split of k (1, 2, 4, 8 warps per row group:
// k = 32 n_sub with n_sub 8, 64, 200, 256, 300), rows not a multiple of a block's rows, m = 1 and 3 rows of x, against
// a double-precision product of the dequantised matrix (qblocks::dequant_sub32 on the host: the values the kernel
// must use). Random blocks, their fp16 scales set to finite values. Tolerance: fp32 sums in any order,
// 2 (k + 1) 2^-24 sum_i |x_i w_i| per element (header). The same rows cut into three weights of one launch
// (matvec_q_set) give the single launch's values (the same sums: 1e-6 relative).
TEST_F(CudaParity, QuantizedMatvecEverySplitOfK) {
  std::mt19937 rng(32);
  for (int type : {qblocks::kQ4_0, qblocks::kQ4_1, qblocks::kQ8_0, qblocks::kQ4_K, qblocks::kQ5_K, qblocks::kQ6_K}) {
    for (int n_sub : {8, 64, 200, 256, 300}) {
      const int per_block = qblocks::block_values(type), bb = qblocks::block_bytes(type);
      const int k = 32 * n_sub;
      if (k % per_block != 0) continue;  // the K formats need whole 256-value blocks
      SCOPED_TRACE("type " + std::to_string(type) + ", k " + std::to_string(k));
      const int rows = 37, nb = k / per_block;
      const size_t row_bytes = (size_t)nb * bb;
      const std::vector<uint8_t> w = random_quant_rows(type, rows, nb, rng);
      for (int m : {1, 3}) {
        const auto x = random_vec((size_t)m * k, rng);
        uint8_t* wd = nullptr;
        float *xd = nullptr, *yd = nullptr;
        ASSERT_EQ(cudaMalloc(&wd, w.size()), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&xd, x.size() * sizeof(float)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&yd, (size_t)m * rows * sizeof(float)), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(wd, w.data(), w.size(), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(xd, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
        std::vector<float> poison((size_t)m * rows, NAN);
        ASSERT_EQ(cudaMemcpy(yd, poison.data(), poison.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
        cuda_ops::QWeight q;
        q.type = type;
        q.data = wd;
        q.rows = rows;
        q.cols = k;
        q.row_bytes = row_bytes;
        cuda_ops::Ctx ctx;
        ASSERT_EQ(cuda_ops::matvec_q(ctx, xd, q, yd, m), cudaSuccess);
        std::vector<float> y((size_t)m * rows);
        ASSERT_EQ(cudaMemcpy(y.data(), yd, y.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
        // The same rows as three weights in one launch (matvec_q_set: rows 0..4, 5..20, 21..36), into y_set.
        const int cut[4] = {0, 5, 21, rows};
        cuda_ops::QWeight ws[3];
        float* ys[3];
        std::vector<float> y_set((size_t)m * rows);
        float* yd3 = nullptr;
        ASSERT_EQ(cudaMalloc(&yd3, (size_t)m * rows * sizeof(float)), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(yd3, poison.data(), poison.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
        for (int i = 0; i < 3; ++i) {
          ws[i] = q;
          ws[i].data = wd + (size_t)cut[i] * row_bytes;
          ws[i].rows = cut[i + 1] - cut[i];
          ys[i] = yd3 + (size_t)m * cut[i];  // [m, rows_i] each
        }
        ASSERT_EQ(cuda_ops::matvec_q_set(ctx, xd, ws, ys, 3, m), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(y_set.data(), yd3, y_set.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
        cudaFree(yd3);
        cudaFree(wd);
        cudaFree(xd);
        cudaFree(yd);
        for (int i = 0; i < 3; ++i)
          for (int r = cut[i]; r < cut[i + 1]; ++r)
            for (int xi = 0; xi < m; ++xi) {
              const float a = y_set[(size_t)m * cut[i] + (size_t)xi * (cut[i + 1] - cut[i]) + (r - cut[i])];
              const float b = y[(size_t)xi * rows + r];
              EXPECT_LE(std::fabs(a - b), 1e-6 * (std::fabs(b) + 1.0)) << "weight " << i << " row " << r;
            }
        for (int r = 0; r < rows; ++r) {
          std::vector<float> wr(k);
          for (int s = 0; s < n_sub; ++s) {
            const int spb = per_block / 32;  // sub-blocks per block
            qblocks::dequant_sub32(type, w.data() + (size_t)r * row_bytes + (size_t)(s / spb) * bb, s % spb,
                                   wr.data() + 32 * s);
          }
          for (int i = 0; i < m; ++i) {
            double ref = 0.0, mag = 0.0;
            for (int c = 0; c < k; ++c) {
              ref += (double)x[(size_t)i * k + c] * wr[c];
              mag += std::fabs((double)x[(size_t)i * k + c] * wr[c]);
            }
            const float got = y[(size_t)i * rows + r];
            ASSERT_FALSE(std::isnan(got)) << "row " << r << " of x " << i << " not written";
            EXPECT_LE(std::fabs(got - ref), 2.0 * (k + 1) * kEps32 * mag) << "row " << r << ", x row " << i;
          }
        }
      }
    }
  }
}

// The fast precision's decode product with x in int8 (matvec_q_set_x8) for every block format: Q4_K and Q5_K (x
// rounded by its own launch, and by the product's kernel itself), Q6_K, Q4_0, Q4_1 and Q8_0, for k of 256, 1536,
// 4096 and 14336 values (Q4_K / Q5_K split 1, 1, 2, 4 over steps of 4 blocks, Q6_K 1, 2, 4, 8 over steps of 2, the
// 32-value formats 1, 1, 4, 8 over steps of 8; 1536 and 256 leave a part-filled last step), and 416 for the 32-value
// formats (13 blocks: 2 steps, the second part-filled), 37 rows in three weights of one launch. Two oracles, in
// double precision on the host:
// - x rounded as the kernel must round it (qblocks::x8_round, d = max |x| / 127 per 32 values: x_hat), each 32
//   values' offset term on the fp32 x (the kernel's sum(x): Q4_K / Q5_K's -dmin mn, Q4_1's m + 8 d):
//   sum_i w_i x_hat_i - offset (sum x_hat - sum x). Tolerance: fp32 rounding of the scaled sums, 8 (k + 1) 2^-24
//   times the sum of the terms' magnitudes;
// - the exact x: the rounding's own bound, sum_sub (max |x| / 254 + 2^-22 max |x|) sum |w| over the sub-block, plus
//   the same.
// Then the same with x in two int8 digits (x_digits = 2: qblocks::x16_round, s = max |x| / (127 254), the
// rounding's bound max |x| / 64516 + 2^-22 max |x|).
TEST_F(CudaParity, QuantizedMatvecInt8X) {
  std::mt19937 rng(77);
  for (int type : {qblocks::kQ4_K, qblocks::kQ5_K, qblocks::kQ6_K, qblocks::kQ4_0, qblocks::kQ4_1, qblocks::kQ8_0})
    for (int k : {256, 1536, 4096, 14336, 416}) {
      const int per_block = qblocks::block_values(type), subs = per_block / 32;
      if (k % per_block != 0) continue;  // 416: the 32-value formats only
      const int nb = k / per_block, rows = 37, bb = qblocks::block_bytes(type);
      const bool k4 = type == qblocks::kQ4_K || type == qblocks::kQ5_K;
      SCOPED_TRACE("type " + std::to_string(type) + ", k " + std::to_string(k));
      const size_t row_bytes = (size_t)nb * bb;
      const std::vector<uint8_t> w = random_quant_rows(type, rows, nb, rng);
      auto x = random_vec((size_t)k, rng);
      for (int i = 0; i < 32; ++i) x[32 + i] = 0.0f;  // a block of zeros: d = 0
      uint8_t* wd = nullptr;
      float *xd = nullptr, *yd = nullptr;
      void* scratch = nullptr;
      ASSERT_EQ(cudaMalloc(&wd, w.size()), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&xd, x.size() * sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&yd, (size_t)rows * sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&scratch, cuda_ops::matvec_x8_scratch_bytes(k)), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(wd, w.data(), w.size(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(xd, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
      std::vector<float> poison((size_t)rows, NAN);
      ASSERT_EQ(cudaMemcpy(yd, poison.data(), poison.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
      const int cut[4] = {0, 5, 21, rows};
      cuda_ops::QWeight ws[3];
      float* ys[3];
      for (int i = 0; i < 3; ++i) {
        ws[i].type = type;
        ws[i].data = wd + (size_t)cut[i] * row_bytes;
        ws[i].rows = cut[i + 1] - cut[i];
        ws[i].cols = k;
        ws[i].row_bytes = row_bytes;
        ys[i] = yd + cut[i];
        ASSERT_TRUE(cuda_ops::matvec_x8_supported(ws[i]));
      }
      cuda_ops::Ctx ctx;
      for (int digits : {1, 2}) {
        SCOPED_TRACE("x in " + std::to_string(digits) + " int8 digit(s)");
        std::vector<float> y((size_t)rows), y_in_kernel((size_t)rows);
        ASSERT_EQ(cudaMemcpy(yd, poison.data(), poison.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cuda_ops::matvec_q_set_x8(ctx, xd, ws, ys, 3, scratch, false, digits), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(y.data(), yd, y.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(yd, poison.data(), poison.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cuda_ops::matvec_q_set_x8(ctx, xd, ws, ys, 3, scratch, true, digits),
                  cudaSuccess);  // Q4_K / Q5_K: in the kernel
        ASSERT_EQ(cudaMemcpy(y_in_kernel.data(), yd, y.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
        // x as the kernel rounds it, and each 32 values' rounding bound (max |x| / 254 or / 64516).
        std::vector<double> x_hat(k), x_err(k / 32);
        for (int s = 0; s < k / 32; ++s) {
          float amax = 0.0f;
          for (int l = 0; l < 32; ++l) amax = std::max(amax, std::fabs(x[32 * s + l]));
          const float inv = qblocks::x8_inv_scale(amax);
          for (int l = 0; l < 32; ++l) {
            if (digits == 1) {
              x_hat[32 * s + l] = (double)qblocks::x8_scale(amax) * qblocks::x8_round(x[32 * s + l], inv);
            } else {
              int q1 = 0, q2 = 0;
              qblocks::x16_round(x[32 * s + l], inv, &q1, &q2);
              ASSERT_LE(std::abs(q1), 127);
              ASSERT_LE(std::abs(q2), 127);
              x_hat[32 * s + l] = (double)qblocks::x16_scale(amax) * (qblocks::kX16Base * q1 + q2);
            }
          }
          x_err[s] = (digits == 1 ? amax / 254.0 : amax / 64516.0) + amax * 0x1p-22;
        }
        for (int r = 0; r < rows; ++r) {
          double ref_hat = 0.0, ref = 0.0, mag = 0.0, bound = 0.0;
          for (int s = 0; s < k / 32; ++s) {
            const uint8_t* blk = w.data() + (size_t)r * row_bytes + (size_t)(s / subs) * bb;
            float wv[32];
            qblocks::dequant_sub32(type, blk, s % subs, wv);
            int sc = 0, mn = 0;
            if (k4) qblocks::scale_min_k4(s % subs, blk + 4, &sc, &mn);
            // minus the offset on fp32 x: Q4_K / Q5_K's dmin mn; Q4_1's -(m + 8 d) (w = d (q - 8) + m + 8 d)
            const double min_w = k4 ? (double)qblocks::f16_at(blk + 2) * mn
                                 : type == qblocks::kQ4_1
                                     ? -((double)qblocks::f16_at(blk + 2) + 8.0 * qblocks::f16_at(blk))
                                     : 0.0;
            double w_abs = 0.0, sum_hat = 0.0, sum_x = 0.0;
            for (int l = 0; l < 32; ++l) {
              const int c = 32 * s + l;
              ref_hat += wv[l] * x_hat[c];
              ref += (double)wv[l] * x[c];
              mag += std::fabs(wv[l] * x_hat[c]) + std::fabs(min_w) * (std::fabs(x[c]) + x_err[s]) +
                     std::fabs(wv[l]) * x_err[s];
              w_abs += std::fabs(wv[l]);
              sum_hat += x_hat[c];
              sum_x += x[c];
            }
            ref_hat += min_w * (sum_hat - sum_x);
            bound += x_err[s] * w_abs;
          }
          const double fp32 = 8.0 * (k + 1) * kEps32 * mag;
          for (const auto* out : {&y, &y_in_kernel}) {
            const char* how = out == &y ? "x rounded by its own launch" : "x rounded in the kernel";
            const float got = (*out)[r];
            ASSERT_FALSE(std::isnan(got)) << how << ": row " << r << " not written";
            EXPECT_LE(std::fabs(got - ref_hat), fp32) << how << ": row " << r << ", against x rounded as it must be";
            EXPECT_LE(std::fabs(got - ref), bound + fp32) << how << ": row " << r << ", against the exact x";
          }
        }
      }
      cudaFree(wd);
      cudaFree(xd);
      cudaFree(yd);
      cudaFree(scratch);
    }
}

// Backend::topk_rows (kernel, then only rows * k pairs downloaded) against the CPU backend's, with ties.
TEST_F(CudaParity, BackendTopkRowsMatchesCpuBackend) {
  std::mt19937 rng(41);
  auto cpu = make_cpu_backend();
  for (auto [rows, n, k] : std::vector<std::tuple<int, int, int>>{{1, 4096, 1}, {3, 1000, 5}, {2, 64, 64}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << n << " k=" << k);
    auto x = random_vec((size_t)rows * n, rng);
    for (size_t i = 0; i < x.size(); i += 7) x[i] = 0.75f;  // ties among the largest values
    DeviceBuffer xd = up(x);
    std::vector<int32_t> idx((size_t)rows * k), idx_ref(idx.size());
    std::vector<float> val(idx.size()), val_ref(idx.size());
    gpu_->topk_rows(xd.data(), rows, n, k, idx.data(), val.data());
    cpu->topk_rows(x.data(), rows, n, k, idx_ref.data(), val_ref.data());
    EXPECT_EQ(idx, idx_ref);
    EXPECT_EQ(val, val_ref);
  }
}

// Backend::next_token_rows (a capture's next-token columns, computed where the logits are) against the CPU backend's
// and against a double-precision log-sum-exp: top-k ids and values exactly (ties among the largest values), the
// target logit exactly (NaN for a negative target), the log-sum-exp to fp32 sums in another order (n 2^-24 of the
// largest |x| plus log's rounding). k = 80 takes the device's path past its 64-entry kernel (rows to the host).
TEST_F(CudaParity, BackendNextTokenRowsMatchCpuBackend) {
  std::mt19937 rng(43);
  auto cpu = make_cpu_backend();
  for (auto [rows, n, k] : std::vector<std::tuple<int, int, int>>{{1, 4096, 1}, {5, 1000, 10}, {3, 300, 80}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << n << " k=" << k);
    auto x = random_vec((size_t)rows * n, rng, -8.0f, 8.0f);
    for (size_t i = 0; i < x.size(); i += 7) x[i] = 7.5f;  // ties among the largest values
    std::vector<int32_t> targets(rows);
    for (int r = 0; r < rows; ++r) targets[r] = r + 1 == rows && rows > 1 ? -1 : (r * 37 + 5) % n;
    DeviceBuffer xd = up(x);
    std::vector<int32_t> idx((size_t)rows * k), idx_ref(idx.size());
    std::vector<float> val(idx.size()), val_ref(idx.size()), lse(rows), lse_ref(rows), tv(rows), tv_ref(rows);
    gpu_->next_token_rows(xd.data(), rows, n, k, targets.data(), lse.data(), idx.data(), val.data(), tv.data());
    cpu->next_token_rows(x.data(), rows, n, k, targets.data(), lse_ref.data(), idx_ref.data(), val_ref.data(),
                         tv_ref.data());
    EXPECT_EQ(idx, idx_ref);
    EXPECT_EQ(val, val_ref);
    for (int r = 0; r < rows; ++r) {
      const float* xr = x.data() + (size_t)r * n;
      double mx = -INFINITY, z = 0.0;
      for (int j = 0; j < n; ++j) mx = std::max(mx, (double)xr[j]);
      for (int j = 0; j < n; ++j) z += std::exp((double)xr[j] - mx);
      const double want = mx + std::log(z), tol = (n + 8) * kEps32 * std::fabs(mx) + 1e-6;
      EXPECT_NEAR(lse[r], want, tol) << "row " << r << " (device)";
      EXPECT_NEAR(lse_ref[r], want, tol) << "row " << r << " (cpu)";
      if (targets[r] < 0) {
        EXPECT_TRUE(std::isnan(tv[r]) && std::isnan(tv_ref[r])) << "row " << r;
      } else {
        EXPECT_EQ(tv[r], xr[targets[r]]) << "row " << r;
        EXPECT_EQ(tv_ref[r], xr[targets[r]]) << "row " << r;
      }
    }
  }
}

// ---- the whole forward ----

// Wants metrics for every head and the rows of some heads only, so the forward runs both attention paths.
class PartialObserver : public test::RecordingObserver {
 public:
  using RecordingObserver::RecordingObserver;
  bool wants_rows(int l, int h) const override { return (l + h) % 3 == 0; }
};

constexpr double kFwdTol = 2e-4;

double rel_max(const std::vector<float>& a, const std::vector<float>& ref) {
  const double den = max_abs(ref);
  return den > 0 ? max_diff(a, ref) / den : max_diff(a, ref);
}

template <class Obs>
void expect_forward_parity(const Model& cpu, const Model& gpu, const std::vector<int32_t>& ids, const TempSpec& spec,
                           const RunOptions& opt, int decode_steps) {
  SCOPED_TRACE(spec.label());
  const ModelConfig& c = cpu.config();
  const int total = (int)ids.size() + decode_steps;
  Obs oc(c.n_layers, c.n_heads, total), og(c.n_layers, c.n_heads, total);
  Session sc(cpu, total), sg(gpu, total);
  std::vector<float> lc, lg;
  ASSERT_TRUE(sc.forward(ids.data(), (int)ids.size(), spec, opt, &oc, &lc));
  ASSERT_TRUE(sg.forward(ids.data(), (int)ids.size(), spec, opt, &og, &lg));
  EXPECT_LE(rel_max(lg, lc), kFwdTol) << "prefill logits";
  // KV-cache decode: greedy tokens from the CPU logits, fed to both.
  for (int step = 0; step < decode_steps; ++step) {
    const int V = c.vocab_size;
    const int32_t next = (int32_t)(std::max_element(lc.end() - V, lc.end()) - (lc.end() - V));
    ASSERT_TRUE(sc.forward(&next, 1, spec, opt, &oc, &lc));
    ASSERT_TRUE(sg.forward(&next, 1, spec, opt, &og, &lg));
    EXPECT_LE(rel_max(lg, lc), kFwdTol) << "decode step " << step;
  }
  EXPECT_LE(max_diff(og.probs, oc.probs), kFwdTol) << "attention probabilities";
  EXPECT_LE(rel_max(og.raw, oc.raw), kFwdTol) << "raw scores";
  EXPECT_LE(rel_max(og.scale, oc.scale), 1e-6) << "row scales";
  for (size_t i = 0; i < oc.metrics.size(); ++i) {
    const int m = (int)(i % kNumRowMetrics);
    if (std::isnan(oc.metrics[i])) {
      EXPECT_TRUE(std::isnan(og.metrics[i])) << row_metric_name(m);
      continue;
    }
    if (m == kTailMass) {
      const int causal = (int)(i / kNumRowMetrics % total) + 1;
      const int layer = (int)(i / ((size_t)kNumRowMetrics * total * c.n_heads));
      const int n_visible = causal - math::window_first_key(causal, layer_window(c, layer));
      EXPECT_TRUE(tail_mass_close(og.metrics[i], oc.metrics[i], n_visible, 10 * kFwdTol))
          << "tail mass " << og.metrics[i] << " vs " << oc.metrics[i] << " at " << i;
      continue;
    }
    const double scale_m = m == kEffSupport ? std::max(1.0, (double)oc.metrics[i]) : 1.0;
    ASSERT_NEAR(og.metrics[i], oc.metrics[i], 10 * kFwdTol * scale_m) << "metric " << row_metric_name(m) << " at " << i;
  }
  if (spec.mode == AttnMode::kLearned) { EXPECT_LE(rel_max(og.tau, oc.tau), 1e-5) << "tau"; }
}

std::vector<int32_t> random_ids(int n, int vocab, unsigned seed) {
  std::vector<int32_t> ids(n);
  std::mt19937 rng(seed);
  for (auto& t : ids) t = (int32_t)(rng() % (unsigned)vocab);
  ids[0] = 1;
  return ids;
}

// Precision: auto is fast on the GPU for the bf16 model and exact with --weights fp32; fast on the CPU is refused.
// Fast against the CPU: every GEMM input is rounded to bf16 (relative error 2^-9 per value), so logits move by
// about 2^-9 times the size of the terms that make them, through each layer; the bound is 3 % of the logits' range
// and the argmax of the prompt's last position agrees. Metrics (captured heads and the tensor-core kernel's) move
// by about the logits' relative error times the t = 0.4 sharpening (1 / 0.4): measured up to 0.028 nats or mass
// here, bounded at 0.05; the tail mass is left out (a probability near its threshold 1 / n flips in or out of it).
TEST_F(CudaParity, BundledBf16ModelFastPrecision) {
  const std::string dir = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
  auto cpu = Model::load(dir, Device::kCpu);
  auto fast = Model::load(dir, Device::kCuda);
  EXPECT_EQ(cpu->precision(), Precision::kExact);
  EXPECT_EQ(fast->precision(), Precision::kFast);
  LoadOptions fp32;
  fp32.weights = WeightsMode::kFp32;
  EXPECT_EQ(Model::load(dir, Device::kCuda, fp32)->precision(), Precision::kExact);
  LoadOptions want_fast;
  want_fast.precision = Precision::kFast;
  try {
    Model::load(dir, Device::kCpu, want_fast);
    ADD_FAILURE() << "precision fast on the CPU was accepted";
  } catch (const Error& e) { EXPECT_EQ(e.field(), "precision") << e.what(); }
  const int T = 80;  // two query blocks of the tensor-core kernel
  const auto ids = random_ids(T, cpu->config().vocab_size, 9);
  const TempSpec spec = TempSpec::focal(0.4f);
  RunOptions opt;
  PartialObserver oc(cpu->config().n_layers, cpu->config().n_heads, T),
      of(cpu->config().n_layers, cpu->config().n_heads, T);
  Session sc(*cpu, T), sf(*fast, T);
  std::vector<float> lc, lf;
  ASSERT_TRUE(sc.forward(ids.data(), T, spec, opt, &oc, &lc));
  ASSERT_TRUE(sf.forward(ids.data(), T, spec, opt, &of, &lf));
  EXPECT_LE(max_diff(lf, lc), 0.03 * (max_abs(lc) + 1.0)) << "prefill logits";
  const int V = cpu->config().vocab_size;
  EXPECT_EQ(std::max_element(lf.end() - V, lf.end()) - lf.end(), std::max_element(lc.end() - V, lc.end()) - lc.end());
  for (size_t i = 0; i < oc.metrics.size(); ++i) {
    const int m = (int)(i % kNumRowMetrics);
    if (m == kEffSupport || m == kTailMass || std::isnan(oc.metrics[i])) continue;  // exp(H): the entropy's, scaled
    ASSERT_NEAR(of.metrics[i], oc.metrics[i], 0.05) << row_metric_name(m) << " at " << i;
  }
}

// The app's live runs on a CUDA device (focal::live_capture_request): past the device's layer-rows threshold they
// store the viewed head's rows only, and another head is a re-run of that layer alone (LiveRunner's rows-only run):
// its scores are the CPU's for that head (all heads stored there, under the CPU's threshold) within the forward's
// tolerance (kFwdTol of the row's largest |score|), and the metrics, loss and the later layers' records are the
// propagate's.
TEST_F(CudaParity, LiveRunnerOneHeadRowsAndHeadSwitch) {
  const std::string dir = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
  auto cpu = Model::load(dir, Device::kCpu);
  auto gpu = Model::load(dir, Device::kCuda, exact_options());
  const ModelConfig& c = cpu->config();
  const int T = 40, layer = c.n_layers / 2;
  const auto ids = random_ids(T, c.vocab_size, 17);
  LiveRowsPolicy policy;
  policy.device_layer_rows_bytes = (size_t)T * T * sizeof(float);  // one head's rows fit, a layer's do not
  const CaptureRequest on_cpu = live_capture_request(c, Device::kCpu, T, layer, 0, policy);
  CaptureRequest on_gpu = live_capture_request(c, Device::kCuda, T, layer, 0, policy);
  EXPECT_TRUE(on_cpu.heads.empty()) << "the CPU keeps every head's rows under its own threshold";
  ASSERT_EQ(on_gpu.heads, std::vector<int>{0});
  EXPECT_FALSE(on_gpu.induction) << "the induction score observes every head's rows: the CPU only";
  const TempSpec spec = TempSpec::focal(0.4f);
  RunCapture ref, a, b;
  LiveRunner cpu_runner(*cpu), gpu_runner(*gpu);
  ASSERT_TRUE(cpu_runner.run(ids, spec, on_cpu, "cpu", nullptr, &ref));
  ASSERT_TRUE(gpu_runner.run(ids, spec, on_gpu, "a", nullptr, &a));
  on_gpu.heads = {c.n_heads - 1};
  int first = -1, last = -1;
  ASSERT_TRUE(gpu_runner.run(ids, spec, on_gpu, "b", &a, &b, {}, {}, &first, nullptr, &last));
  EXPECT_EQ(last, layer) << "a head switch re-runs up to the stored layer only";
  EXPECT_LE(first, layer);
  ASSERT_EQ(b.heads, std::vector<int>{c.n_heads - 1});
  for (const RunCapture* r : {&a, &b}) {
    const int h = r->heads[0];
    for (int q = 0; q < T; ++q) {
      const std::ptrdiff_t og = find_stored_row(*r, layer, h, q, T), oc = find_stored_row(ref, layer, h, q, T);
      ASSERT_GE(og, 0);
      ASSERT_GE(oc, 0);
      double mx = 0.0, diff = 0.0;
      for (int j = 0; j <= q; ++j) {
        mx = std::max(mx, (double)std::fabs(ref.scores[(size_t)oc + j]));
        diff = std::max(diff, (double)std::fabs(r->scores[(size_t)og + j] - ref.scores[(size_t)oc + j]));
      }
      ASSERT_LE(diff, kFwdTol * (mx + 1.0)) << "head " << h << " row " << q;
    }
  }
  // The next-token columns, computed on the device (Backend::next_token_rows): the CPU's loss within the logits'
  // forward tolerance (2e-4 of their range, ~20 here), and the switch carries the propagate's.
  ASSERT_EQ(a.token_nll.size(), (size_t)T);
  for (int i = 0; i + 1 < T; ++i) EXPECT_NEAR(a.token_nll[i], ref.token_nll[i], 1e-2) << "loss of row " << i;
  EXPECT_TRUE(std::isnan(a.token_nll[T - 1])) << "no token follows the last row";
  EXPECT_EQ(b.topk_ids, a.topk_ids);
  EXPECT_EQ(b.topk_probs, a.topk_probs);
  ASSERT_EQ(b.metrics.size(), a.metrics.size());
  for (size_t i = 0; i < a.metrics.size(); ++i) {  // the same values (NaN where undefined)
    if (std::isnan(a.metrics[i]) && std::isnan(b.metrics[i])) continue;
    ASSERT_NEAR(b.metrics[i], a.metrics[i], 1e-6) << "metric " << i << ": the head switch keeps the propagate's";
  }
}

TEST_F(CudaParity, BundledFocalModelForwardAndDecode) {
  const std::string dir = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
  auto cpu = Model::load(dir, Device::kCpu);
  auto gpu = Model::load(dir, Device::kCuda, exact_options());
  EXPECT_EQ(gpu->device(), Device::kCuda);
  const auto ids = random_ids(kPromptFocal, cpu->config().vocab_size, 7);
  RunOptions opt;
  opt.relevant = {0, 5, 40, 200};  // 200: beyond the prompt, ignored
  expect_forward_parity<test::RecordingObserver>(*cpu, *gpu, ids, TempSpec::native(cpu->config()), opt, 4);
  expect_forward_parity<PartialObserver>(*cpu, *gpu, ids, TempSpec::focal(0.25f), opt, 2);
  TempSpec ss;
  ss.mode = AttnMode::kSsmax;
  ss.ssmax_s = 0.5f;
  ss.head_temp[{1, 2}] = 0.1f;
  expect_forward_parity<PartialObserver>(*cpu, *gpu, ids, ss, opt, 0);
}

// Parameters of the weight matrices (projections, MLP, embedding table, lm_head when untied) of a loaded model.
size_t matrix_params(const Model& m) {
  size_t n = 0;
  for (const ParamRef& p : m.weights().params)
    if (p.shape.size() == 2 && p.name.find("tau_proj") == std::string::npos) n += p.size;
  return n;
}

// The bundled focal-t0.4 is stored in bf16: its matrices stay 16-bit on the device (2 bytes a parameter) and on the
// CPU in native mode (mapped), 4 bytes with --weights fp32, and a downloaded matrix equals the CPU's widened one
// exactly.
TEST_F(CudaParity, BundledBf16ModelKeeps16BitWeightsOnTheDevice) {
  const std::string dir = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
  auto cpu = Model::load(dir, Device::kCpu);
  auto gpu = Model::load(dir, Device::kCuda, exact_options());
  const size_t n = matrix_params(*gpu);
  EXPECT_GT(n, gpu->n_params() * 9 / 10) << "the matrices are most of the model";
  EXPECT_EQ(gpu->backend().weight_bytes(), 2 * n);
  EXPECT_EQ(cpu->backend().weight_bytes(), 2 * n);
  LoadOptions fp32;
  fp32.weights = WeightsMode::kFp32;
  EXPECT_EQ(Model::load(dir, Device::kCpu, fp32)->backend().weight_bytes(), 4 * n);
  const ParamRef& pg = gpu->weights().params.front();
  const ParamRef& pc = cpu->weights().params.front();
  ASSERT_EQ(pg.name, "model.embed_tokens.weight");
  std::vector<float> hg(pg.size), hc(pc.size);
  gpu->backend().download_weight(hg.data(), pg.weight, pg.size);
  cpu->backend().download_weight(hc.data(), pc.weight, pc.size);
  EXPECT_EQ(hg, hc);
}

// A 2-layer GQA LLaMA of 4 heads (2 KV heads) of 32, hidden 128, for random weights.
ModelConfig small_random_config(int max_positions) {
  ModelConfig c;
  c.vocab_size = 384;
  c.hidden = 128;
  c.intermediate = 256;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_head = 32;
  c.max_positions = max_positions;
  c.bos_id = 1;
  c.eos_id = 2;
  return c;
}

// An fp16 model (random weights written as F16): 16-bit on the device, forward and decode as the CPU path. Also an
// fp32 file keeps 4 bytes a parameter.
TEST_F(CudaParity, RandomFp16ModelForwardAndDecode) {
  const ModelConfig c = small_random_config(256);
  const std::vector<NamedTensor> tensors = random_model_tensors(c, 31);
  for (const char* dtype : {"F16", "F32"}) {
    SCOPED_TRACE(dtype);
    const std::string dir = test::make_temp_dir(std::string("cuda_") + dtype);
    ASSERT_FALSE(dir.empty());
    write_model_dir(dir, c, tensors, dtype, "");
    auto cpu = Model::load(dir, Device::kCpu);
    auto gpu = Model::load(dir, Device::kCuda, exact_options());
    const size_t n = matrix_params(*gpu);
    EXPECT_EQ(gpu->backend().weight_bytes(), (std::string(dtype) == "F16" ? 2 : 4) * n);
    EXPECT_EQ(cpu->backend().weight_bytes(), (std::string(dtype) == "F16" ? 2 : 4) * n);  // native: as stored
    const auto ids = random_ids(kPromptFocal, c.vocab_size, 32);
    expect_forward_parity<PartialObserver>(*cpu, *gpu, ids, TempSpec::focal(0.4f), RunOptions{}, 9);
  }
}

// Greedy generation on the device takes each token from the backend's top-1 of the last logits row. Teacher-forced
// on the CPU path, every token the device picked has a CPU logit within the forward tolerance (2e-4 of the row's
// max |logit|) of the CPU row's maximum: the device chose a CPU arg-max up to fp32 summation order.
TEST_F(CudaParity, BundledBf16ModelGreedyGenerationOnTheDevice) {
  const std::string dir = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
  auto cpu = Model::load(dir, Device::kCpu);
  auto gpu = Model::load(dir, Device::kCuda, exact_options());
  const int V = cpu->config().vocab_size, n_new = 12;
  const auto prompt = random_ids(24, V, 42);
  const TempSpec spec = TempSpec::native(cpu->config());
  SampleOptions so;
  so.stop_at_eos = false;
  Session sg(*gpu, 64), sc(*cpu, 64);
  const auto got = generate(sg, prompt, n_new, spec, so, RunOptions{}, nullptr);
  ASSERT_EQ((int)got.size(), n_new);
  RunOptions last;
  last.all_logits = false;
  std::vector<float> lc;
  ASSERT_TRUE(sc.forward(prompt.data(), (int)prompt.size(), spec, last, nullptr, &lc));
  for (int i = 0; i < n_new; ++i) {
    const float mx = *std::max_element(lc.begin(), lc.end());
    EXPECT_LE(mx - lc[got[i]], kFwdTol * max_abs(lc)) << "step " << i << ": token " << got[i];
    ASSERT_TRUE(sc.forward(&got[i], 1, spec, last, nullptr, &lc));
  }
  // The CPU backend's top-1 is std::max_element's choice: CPU greedy generation equals the arg-max of its logits.
  Session sc2(*cpu, 64), sc3(*cpu, 64);
  const auto ref = generate(sc2, prompt, n_new, spec, so, RunOptions{}, nullptr);
  ASSERT_TRUE(sc3.forward(prompt.data(), (int)prompt.size(), spec, last, nullptr, &lc));
  for (int i = 0; i < n_new; ++i) {
    ASSERT_EQ(ref[i], (int32_t)(std::max_element(lc.begin(), lc.end()) - lc.begin())) << "step " << i;
    ASSERT_TRUE(sc3.forward(&ref[i], 1, spec, last, nullptr, &lc));
  }
}

TEST_F(CudaParity, BundledLearnedModelTau) {
  const std::string dir = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-learned";
  auto cpu = Model::load(dir, Device::kCpu);
  auto gpu = Model::load(dir, Device::kCuda, exact_options());
  const auto ids = random_ids(kPromptLearned, cpu->config().vocab_size, 8);
  expect_forward_parity<test::RecordingObserver>(*cpu, *gpu, ids, TempSpec::native(cpu->config()), RunOptions{}, 3);
}

TEST_F(CudaParity, RandomGqaModelWithQkNormAndBias) {
  ModelConfig c;
  c.vocab_size = 300;
  c.hidden = 96;
  c.intermediate = 160;
  c.n_layers = 3;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.d_head = 16;
  c.max_positions = 512;
  c.rope_theta = 500000.0f;
  c.rms_eps = 1e-6f;
  c.qk_norm = true;
  c.attention_bias = true;
  c.bos_id = 1;
  c.eos_id = 2;
  const std::string dir = test::make_temp_dir("cuda_gqa");
  ASSERT_FALSE(dir.empty());
  std::vector<NamedTensor> tensors = random_model_tensors(c, 11);
  std::mt19937 rng(12);  // random_model_tensors has no biases: add q/k/v/o biases (attention_bias)
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    const int64_t qd = (int64_t)c.n_heads * c.d_head, kd = (int64_t)c.n_kv_heads * c.d_head;
    for (auto [name, n] : std::vector<std::pair<std::string, int64_t>>{
             {"q_proj.bias", qd}, {"k_proj.bias", kd}, {"v_proj.bias", kd}, {"o_proj.bias", c.hidden}})
      tensors.push_back(NamedTensor{p + name, {n}, random_vec((size_t)n, rng, -0.5f, 0.5f)});
  }
  write_model_dir(dir, c, tensors, "F32", "");
  auto cpu = Model::load(dir, Device::kCpu);
  auto gpu = Model::load(dir, Device::kCuda, exact_options());
  const auto ids = random_ids(kPromptGqa, c.vocab_size, 9);
  expect_forward_parity<PartialObserver>(*cpu, *gpu, ids, TempSpec::focal(0.4f), RunOptions{}, 5);
  // Metrics only (every head on the fused path), no rows at all.
  struct MetricsOnly : test::RecordingObserver {
    using RecordingObserver::RecordingObserver;
    bool wants_rows(int, int) const override { return false; }
  };
  expect_forward_parity<MetricsOnly>(*cpu, *gpu, ids, TempSpec::standard(), RunOptions{}, 2);
}

// One model of each architecture (the Hugging Face conformance fixtures, tests/hf): LLaMA with llama3 RoPE and
// mlp_bias, yarn, Qwen2, Mistral with a window, Gemma 2 (soft-caps, 1 + w norms, alternate windows), Phi-3 with
// longrope past its original context, OLMo 2 (whole-projection QK-norm, post-norms), GPT-2 (LayerNorm, learned
// positions, GELU MLP). CPU vs CUDA, prefill and KV-cache decode, tolerances as the other forward cases.
class CudaArchParity : public CudaParity, public ::testing::WithParamInterface<std::string> {};

TEST_P(CudaArchParity, ForwardAndDecodeMatchCpu) {
  // FOCAL_HF_FIXTURES (the emulated build's ctest sets it), else the fixtures ctest writes beside the test data.
  const char* fx = std::getenv("FOCAL_HF_FIXTURES");
  const char* data = std::getenv("FOCAL_TEST_DATA");
  ASSERT_TRUE(fx != nullptr || data != nullptr) << "FOCAL_HF_FIXTURES is not set (ctest generates the fixtures first)";
  const std::string dir = (fx ? std::string(fx) : std::string(data) + "/hf_fixtures") + "/" + GetParam();
  auto cpu = Model::load(dir, Device::kCpu);
  auto gpu = Model::load(dir, Device::kCuda, exact_options());
  const auto ids = random_ids(70, cpu->config().vocab_size, 31);
  expect_forward_parity<test::RecordingObserver>(*cpu, *gpu, ids, TempSpec::focal(0.4f), RunOptions{}, 3);
  expect_forward_parity<PartialObserver>(*cpu, *gpu, ids, TempSpec::standard(), RunOptions{}, 0);
}

INSTANTIATE_TEST_SUITE_P(Architectures, CudaArchParity,
                         ::testing::Values("llama3_rope_mlp_bias", "llama_rope_yarn", "llama_rope_linear",
                                           "llama_rope_dynamic", "qwen2", "qwen2_window", "mistral_window", "gemma2",
                                           "phi3_longrope", "phi3_su_short", "olmo2", "gpt2"),
                         [](const auto& info) { return info.param; });

// A Q4_K GGUF (random blocks, tests/gguf_writer.h): the device holds its matrices as fp16 (2 bytes a parameter, not
// 4), the CPU as the stored blocks. The device's weights are the CPU's dequantised values rounded to fp16 (relative
// 2^-11), so the last row's logits agree to the F16-vs-F32 bound of the model-load tests (5e-3 of max |logit|), and
// the greedy next token is the same.
// GGUF blocks stay as the file stores them on the device (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K: the formats of
// Q4_K_M and Q8_0 files), device bytes = file bytes of the matrices; the kernels read the blocks through the CPU's
// own dequantiser math (quant_blocks.h). Exact: a 24-token prefill (dequantised rows + fp32 GEMM) and 3 decode
// steps (the quantized matrix-vector kernel) against the CPU within the forward's tolerance (kFwdTol: fp32 sums in
// another order). Fast: weights rounded to fp16 (relative 2^-11) and x to fp16 on tensor cores in the prefill, within
// 1 % of the logits' range and the same argmax; its 3 decode steps (the blocks with fp32 x, on the prefill's keys and
// values) within the same 1 %; with FOCAL_CUDA_DECODE_X8=1 (x in int8, every format) within 3 % and the fast argmax
// a near-tie of the CPU's (the tolerance's derivation at the check).
// Every matrix stays in its blocks on the device, except an untied head's token table, which stays in host memory
// (its rows gathered there): the device holds the file's other matrices, the table's bytes are off it, and prefill,
// decode and the downloaded table match the CPU.
TEST_F(CudaParity, QuantizedGgufStaysQuantizedOnTheDevice) {
  for (uint32_t type : {kGgmlQ4_0, kGgmlQ4_1, kGgmlQ8_0, kGgmlQ4_K, kGgmlQ5_K, kGgmlQ6_K})
    for (bool untied : {false, true}) {
      SCOPED_TRACE(std::string(ggml_type_name(type)) + (untied ? ", untied head" : ", tied head"));
      test::TinyLlamaDims d;
      d.hidden = 256, d.heads = 4, d.kv_heads = 2, d.inter = 512;
      d.output = untied;
      d.matrix_type = type;
      d.matrix_block_elems = ggml_block_elems(type);
      d.matrix_block_bytes = ggml_block_bytes(type);
      const std::string dir = test::make_temp_dir("cuda_q");
      ASSERT_FALSE(dir.empty());
      const std::string path = dir + "/tiny.gguf";
      test::write_file(path, test::tiny_llama_gguf(d).bytes());
      auto cpu = Model::load(path, Device::kCpu);
      auto gpu = Model::load(path, Device::kCuda, exact_options());
      auto fast = Model::load(path, Device::kCuda);
      EXPECT_EQ(fast->precision(), Precision::kFast) << "auto is fast for a quantized model on the GPU";
      ::setenv("FOCAL_CUDA_DECODE_X8", "1", 1);  // read when the backend is made
      auto fast8 = Model::load(path, Device::kCuda);
      ::unsetenv("FOCAL_CUDA_DECODE_X8");
      ::setenv("FOCAL_CUDA_DECODE_X16", "1", 1);
      auto fast16 = Model::load(path, Device::kCuda);
      ::unsetenv("FOCAL_CUDA_DECODE_X16");
      const size_t n = matrix_params(*gpu);
      EXPECT_EQ(gpu->backend().weight_bytes(), n / d.matrix_block_elems * d.matrix_block_bytes);
      EXPECT_EQ(cpu->backend().weight_bytes(), gpu->backend().weight_bytes());
      // On the device: every matrix's blocks but the untied table's, and the norms (2 layers x 2 + 1, fp32).
      const size_t table = untied ? (size_t)d.vocab * d.hidden / d.matrix_block_elems * d.matrix_block_bytes : 0;
      EXPECT_EQ(gpu->backend().device_bytes_held(),
                gpu->backend().weight_bytes() - table + 5 * d.hidden * sizeof(float));
      std::vector<int32_t> ids(24);
      for (int i = 0; i < 24; ++i) ids[(size_t)i] = (i * 31 + 7) % d.vocab;
      std::vector<float> lc, lg, lf, l8, l16;
      Session sc(*cpu, 32), sg(*gpu, 32), sf(*fast, 32), s8(*fast8, 32), s16(*fast16, 32);
      RunOptions opt;
      opt.all_logits = false;
      ASSERT_TRUE(sc.forward(ids.data(), (int)ids.size(), TempSpec(), opt, nullptr, &lc));
      ASSERT_TRUE(sg.forward(ids.data(), (int)ids.size(), TempSpec(), opt, nullptr, &lg));
      ASSERT_TRUE(sf.forward(ids.data(), (int)ids.size(), TempSpec(), opt, nullptr, &lf));
      ASSERT_TRUE(s8.forward(ids.data(), (int)ids.size(), TempSpec(), opt, nullptr, &l8));
      ASSERT_TRUE(s16.forward(ids.data(), (int)ids.size(), TempSpec(), opt, nullptr, &l16));
      ASSERT_EQ(lc.size(), lg.size());
      EXPECT_LE(rel_max(lg, lc), kFwdTol) << "prefill, exact";
      EXPECT_LE(rel_max(lf, lc), 1e-2) << "prefill, fast";
      EXPECT_EQ(std::max_element(lf.begin(), lf.end()) - lf.begin(),
                std::max_element(lc.begin(), lc.end()) - lc.begin());
      for (int step = 0; step < 3; ++step) {
        const int32_t next = (int32_t)(std::max_element(lc.begin(), lc.end()) - lc.begin());
        ASSERT_TRUE(sc.forward(&next, 1, TempSpec(), opt, nullptr, &lc));
        ASSERT_TRUE(sg.forward(&next, 1, TempSpec(), opt, nullptr, &lg));
        ASSERT_TRUE(sf.forward(&next, 1, TempSpec(), opt, nullptr, &lf));
        ASSERT_TRUE(s8.forward(&next, 1, TempSpec(), opt, nullptr, &l8));
        ASSERT_TRUE(s16.forward(&next, 1, TempSpec(), opt, nullptr, &l16));
        EXPECT_LE(rel_max(lg, lc), kFwdTol) << "decode step " << step;
        EXPECT_LE(rel_max(lf, lc), 1e-2) << "decode step " << step << ", fast";
        // int8 x: a value off by up to max |x| / 254 of its 32, 2^-8 of the block's largest where fp16 is 2^-11 of
        // each value; a product of zero-mean weights (Q6_K's, Q8_0's, Q4_0's) moves by up to ~1 % of its largest |y|
        // (measured: 0.4-1 % per product here, Q4_K's 0.04-0.07 %), and two layers and the head carry it to the
        // logits: measured, as a fraction of their range, Q4_K / Q5_K 0.02-0.04 %, Q4_0 0.2-0.4 %, Q6_K 0.4-1.3 %,
        // Q4_1 1.2-1.8 %, Q8_0 0.9-1.9 %. 3 % of the logits' range, and the fast argmax a near-tie of the CPU's (its
        // CPU logit within that of the largest).
        const double tol = 3e-2 * max_abs(lc);
        EXPECT_LE(rel_max(l8, lc), 3e-2) << "decode step " << step << ", fast, int8 x";
        const auto a8 = std::max_element(l8.begin(), l8.end()) - l8.begin();
        EXPECT_GE(lc[a8], *std::max_element(lc.begin(), lc.end()) - tol) << "decode step " << step << ", int8 x";
        // x in two int8 digits: off by up to max |x| / 64516 of its 32, 254 times less than int8's, so the decode
        // logits stay within 3e-2 / 254 ~ 1.2e-4 of the fp32-x fast decode's range (the same prefill before them).
        std::printf("%s step %d: |x16 - fp32 x| / range %.3g, |int8 - fp32 x| / range %.3g\n",
                    ggml_type_name(type).c_str(), step, rel_max(l16, lf), rel_max(l8, lf));
        EXPECT_LE(rel_max(l16, lf), 1.2e-4) << "decode step " << step << ", fast, x in two int8 digits";
      }
      // A downloaded matrix is the CPU's dequantised one (the same math, exactly): the token table (on the device or
      // in host memory) and a layer's matrix.
      for (size_t i : {size_t(0), gpu->weights().params.size() / 2}) {
        const ParamRef& pg = gpu->weights().params[i];
        const ParamRef& pc = cpu->weights().params[i];
        std::vector<float> hg(pg.size), hc(pc.size);
        gpu->backend().download_weight(hg.data(), pg.weight, pg.size);
        cpu->backend().download_weight(hc.data(), pc.weight, pc.size);
        EXPECT_EQ(hg, hc) << pg.name;
      }
      std::system(("rm -rf '" + dir + "'").c_str());
    }
}

// Decode steps recorded and replayed as CUDA graphs (the default; FOCAL_CUDA_GRAPHS=0 launches op by op) compute
// what the launches compute: the same kernels in the same order on the same values, so the logits agree to 1e-6 of
// their largest (in practice exactly), and exact stays within the forward tolerance of the CPU. The steps cross 256
// keys, where decode attention changes kernels (per row -> split over the keys): the recorded nodes change there
// and the graph is made again; other steps update it in place. Self-scalable softmax changes the row scales at
// every position, so each step records a host upload of them (a stale one would show in the logits).
TEST_F(CudaParity, DecodeStepsReplayedAsGraphsMatchTheLaunches) {
  const ModelConfig c = small_random_config(512);
  // fp16 weights: decode's products on the 16-bit matrix-vector kernel; fp32: on cuBLAS (TF32 in fast)
  for (const char* dtype : {"F16", "F32"}) {
    SCOPED_TRACE(dtype);
    const std::string dir = test::make_temp_dir("cuda_graphs");
    ASSERT_FALSE(dir.empty());
    write_model_dir(dir, c, random_model_tensors(c, 41), dtype, "");
    auto cpu = Model::load(dir, Device::kCpu);
    ::setenv("FOCAL_CUDA_GRAPHS", "0", 1);  // read when the backend is made
    auto plain_exact = Model::load(dir, Device::kCuda, exact_options());
    auto plain_fast = Model::load(dir, Device::kCuda, fast_options());
    ::unsetenv("FOCAL_CUDA_GRAPHS");
    auto graph_exact = Model::load(dir, Device::kCuda, exact_options());
    auto graph_fast = Model::load(dir, Device::kCuda, fast_options());
    TempSpec spec;
    spec.mode = AttnMode::kSsmax;
    spec.ssmax_s = 0.5f;
    const int n_prompt = 250, n_steps = 10;  // keys 251 .. 260
    std::vector<int32_t> ids(n_prompt);
    for (int i = 0; i < n_prompt; ++i) ids[(size_t)i] = (i * 31 + 7) % c.vocab_size;
    RunOptions opt;
    opt.all_logits = false;
    const int total = n_prompt + n_steps + 2;
    Session sc(*cpu, total), spe(*plain_exact, total), spf(*plain_fast, total), sge(*graph_exact, total),
        sgf(*graph_fast, total);
    std::vector<float> lc, lpe, lpf, lge, lgf;
    ASSERT_TRUE(sc.forward(ids.data(), n_prompt, spec, opt, nullptr, &lc));
    ASSERT_TRUE(spe.forward(ids.data(), n_prompt, spec, opt, nullptr, &lpe));
    ASSERT_TRUE(spf.forward(ids.data(), n_prompt, spec, opt, nullptr, &lpf));
    ASSERT_TRUE(sge.forward(ids.data(), n_prompt, spec, opt, nullptr, &lge));
    ASSERT_TRUE(sgf.forward(ids.data(), n_prompt, spec, opt, nullptr, &lgf));
    // An observer that only watches the layers pass (and could cancel), as a generation's in the app and Python:
    // the step is still recorded.
    struct Watching final : ForwardObserver {
      int layers = 0;
      void on_layer(const LayerRecord&) override { ++layers; }
    } watching;
#ifdef FOCAL_CUDA_EMULATED
    const emu::GraphCounts before = emu::graph_counts;
#endif
    for (int step = 0; step < n_steps; ++step) {
      SCOPED_TRACE("decode step " + std::to_string(step) + ", " + std::to_string(n_prompt + step + 1) + " keys");
      const int32_t next = (int32_t)(std::max_element(lc.begin(), lc.end()) - lc.begin());
      ASSERT_TRUE(sc.forward(&next, 1, spec, opt, nullptr, &lc));
      ASSERT_TRUE(spe.forward(&next, 1, spec, opt, nullptr, &lpe));
      ASSERT_TRUE(spf.forward(&next, 1, spec, opt, nullptr, &lpf));
      ASSERT_TRUE(sge.forward(&next, 1, spec, opt, &watching, &lge));
      ASSERT_TRUE(sgf.forward(&next, 1, spec, opt, nullptr, &lgf));
      EXPECT_LE(rel_max(lge, lpe), 1e-6) << "exact: graph against launches";
      EXPECT_LE(rel_max(lgf, lpf), 1e-6) << "fast: graph against launches";
      EXPECT_LE(rel_max(lge, lc), kFwdTol) << "exact graph against the CPU";
    }
    EXPECT_EQ(watching.layers, n_steps * c.n_layers);
#ifdef FOCAL_CUDA_EMULATED
    // Two models recording, a graph a layer and one for the head, each launched once a step. Layer 0's was made at
    // the first step, at 256 keys (the split kernel and its combine, and the first zeroing of the split's new
    // scratch) and at the step after (no zeroing); layer 1's at the first step and at 256 keys; the head's once.
    // Every other recording updated its graph in place.
    const int segments = c.n_layers + 1, made = 3 + 2 + 1;
    EXPECT_EQ(emu::graph_counts.launched - before.launched, 2 * n_steps * segments);
    EXPECT_EQ(emu::graph_counts.instantiated - before.instantiated, 2 * made);
    EXPECT_EQ(emu::graph_counts.update_refused - before.update_refused, 2 * (made - segments));
    EXPECT_EQ(emu::graph_counts.updated - before.updated, 2 * (n_steps * segments - made));
    // A capture that fails (here the head's, after both layers ran from their graphs) runs the whole step again
    // unrecorded, the same logits; from then on that backend records nothing.
    for (int step = 0; step < 2; ++step) {
      SCOPED_TRACE("after a failed capture, step " + std::to_string(step));
      emu::fail_capture_countdown = step == 0 ? segments : 0;
      const long launched = emu::graph_counts.launched;
      const int32_t next = (int32_t)(std::max_element(lc.begin(), lc.end()) - lc.begin());
      ASSERT_TRUE(sc.forward(&next, 1, spec, opt, nullptr, &lc));
      ASSERT_TRUE(spe.forward(&next, 1, spec, opt, nullptr, &lpe));
      ASSERT_TRUE(sge.forward(&next, 1, spec, opt, nullptr, &lge));
      EXPECT_EQ(emu::fail_capture_countdown, 0);
      EXPECT_LE(rel_max(lge, lpe), 1e-6);
      EXPECT_LE(rel_max(lge, lc), kFwdTol);
      EXPECT_EQ(emu::graph_counts.launched - launched, step == 0 ? segments - 1 : 0);
    }
#endif
    std::system(("rm -rf '" + dir + "'").c_str());
  }
}

// The real SmolLM2-135M (Q4_1, tied head) fast against exact on the same device backend, on an English paragraph
// (issue 32's report: the mean next-token NLL over the prompt, and greedy tokens from its first 16). Runs where
// FOCAL_SMOLLM2_GGUF names the file (scripts/fetch-smollm2.sh; ctest's smollm2_fast_against_exact_emulated sets
// it), else skips. Bounds: the fast prefill rounds weights and x to fp16 (2^-11 relative per product), which moved
// the mean NLL by 4e-6 nats here: within 0.5 % of exact's; decode reads the blocks with fp32 x, so greedy decoding
// keeps exact's tokens (measured: all 12; with FOCAL_CUDA_DECODE_X8=1's int8 x it left them at the 4th): the
// first 8 the same, a near-tie allowed after; the same for x in two int8 digits (FOCAL_CUDA_DECODE_X16=1: 16-bit x,
// as close as fp16 near each 32 values' largest). The values are printed for docs/performance.md.
TEST_F(CudaParity, SmolLM2FastAgainstExact) {
  const char* path = std::getenv("FOCAL_SMOLLM2_GGUF");
  if (!path || !*path) GTEST_SKIP() << "FOCAL_SMOLLM2_GGUF not set (scripts/fetch-smollm2.sh prints the path)";
  auto exact = Model::load(path, Device::kCuda, exact_options());
  auto fast = Model::load(path, Device::kCuda);
  ASSERT_EQ(fast->precision(), Precision::kFast);
  ::setenv("FOCAL_CUDA_DECODE_X16", "1", 1);  // read when the backend is made
  auto fast16 = Model::load(path, Device::kCuda);
  ::unsetenv("FOCAL_CUDA_DECODE_X16");
  const std::string text =
      "The lighthouse keeper climbed the narrow stairs every evening at dusk. He lit the great lamp, wound the "
      "clockwork that turned the lens, and wrote the weather in his log: wind from the west, a heavy swell, two "
      "fishing boats returning late to the harbour. In winter the storms came often, and on the worst nights he did "
      "not sleep at all, but sat by the window watching the beam sweep across the black water.";
  const std::vector<int32_t> ids = exact->tokenizer()->encode(text, false);
  const int T = (int)ids.size(), V = exact->config().vocab_size;
  ASSERT_GT(T, 64);
  const TempSpec spec = TempSpec::native(exact->config());
  auto nll = [&](const Model& m) {
    Session s(m, T);
    RunOptions opt;
    opt.all_logits = true;
    std::vector<float> lg;
    EXPECT_TRUE(s.forward(ids.data(), T, spec, opt, nullptr, &lg));
    double sum = 0.0;
    for (int t = 0; t + 1 < T; ++t) {
      const float* row = lg.data() + (size_t)t * V;
      sum += ops::log_sum_exp(row, V) - row[ids[(size_t)t + 1]];
    }
    return sum / (T - 1);
  };
  const double nll_exact = nll(*exact), nll_fast = nll(*fast);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 16);
  SampleOptions so;
  so.stop_at_eos = false;
  RunOptions ro;
  ro.all_logits = false;
  constexpr int kNew = 12;
  Session se(*exact, 16 + kNew), sf(*fast, 16 + kNew), s16(*fast16, 16 + kNew);
  const auto ge = generate(se, prompt, kNew, spec, so, ro, nullptr);
  const auto gf = generate(sf, prompt, kNew, spec, so, ro, nullptr);
  const auto g16 = generate(s16, prompt, kNew, spec, so, ro, nullptr);
  ASSERT_EQ(ge.size(), gf.size());
  ASSERT_EQ(ge.size(), g16.size());
  auto agree = [&](const std::vector<int32_t>& g, int* same, int* prefix) {
    *same = 0, *prefix = 0;
    for (size_t i = 0; i < ge.size(); ++i) *same += ge[i] == g[i];
    while (*prefix < (int)ge.size() && ge[(size_t)*prefix] == g[(size_t)*prefix]) ++*prefix;
  };
  int same = 0, prefix = 0, same16 = 0, prefix16 = 0;
  agree(gf, &same, &prefix);
  agree(g16, &same16, &prefix16);
  std::printf(
      "SmolLM2 fast against exact, %d tokens: mean NLL exact %.5f, fast %.5f (%+.3g); greedy %d: %d the same, "
      "the first %d in a row; with x in two int8 digits in decode: %d the same, the first %d in a row\n",
      T, nll_exact, nll_fast, nll_fast - nll_exact, kNew, same, prefix, same16, prefix16);
  EXPECT_LE(std::fabs(nll_fast - nll_exact), 0.005 * nll_exact);
  EXPECT_GE(prefix, 8);
  EXPECT_GE(prefix16, 8) << "x in two int8 digits (FOCAL_CUDA_DECODE_X16=1)";
}

// The CUDA backend's own count of its device memory (Backend::device_bytes_held / _peak, what `focal capture` prints
// beside nvidia-smi on a device): every allocation counted, freed buffers kept in its pool still counted (they hold
// device memory) and reused without a new allocation. Then a prefill-only session of T = 4096 rows with one captured
// head: the captured rows' device blocks (scores and probabilities, double-buffered) stay within their cap of 4 x 32
// MiB, where blocks of every row (T x T floats each) would take 4 x 64 MiB. The rows, handed over by the host's
// threads in blocks, arrive where they belong: each row's sums of probabilities and of raw scores match the CPU's.
class OneHeadRows : public ForwardObserver {
 public:
  explicit OneHeadRows(int T) : prob_sum(T, -1.0), raw_sum(T), raw_abs(T) {}
  bool wants_rows(int layer, int head) const override { return layer == 0 && head == 0; }
  void on_rows(int, int, int row0, int n_rows, int stride, const float* probs, const float* raw) override {
    rows += n_rows;
    for (int r = 0; r < n_rows; ++r) {  // disjoint rows per call: each writes its own entries
      double p = 0, s = 0, s_abs = 0;
      for (int j = 0; j <= row0 + r; ++j) {
        p += probs[(size_t)r * stride + j];
        s += raw[(size_t)r * stride + j];
        s_abs += std::fabs(raw[(size_t)r * stride + j]);
      }
      const size_t q = (size_t)row0 + (size_t)r;
      prob_sum[q] = p;
      raw_sum[q] = s;
      raw_abs[q] = s_abs;
    }
  }
  std::atomic<int> rows{0};
  std::vector<double> prob_sum, raw_sum, raw_abs;  // [T]
};

TEST_F(CudaParity, DeviceMemoryCountAndCapturedRowBlocks) {
  {
    auto be = make_cuda_backend(0);
    EXPECT_EQ(be->device_bytes_held(), 0u);
    float* a = be->alloc(1000);
    float* b = be->alloc(250);
    EXPECT_EQ(be->device_bytes_held(), 5000u);
    be->free(a);
    EXPECT_EQ(be->device_bytes_held(), 5000u) << "a freed buffer stays in the pool, on the device";
    float* c = be->alloc(1000);  // the pooled one, no new allocation
    EXPECT_EQ(be->device_bytes_held(), 5000u);
    float* d = be->alloc(3);
    EXPECT_EQ(be->device_bytes_held(), 5012u);
    EXPECT_EQ(be->device_bytes_peak(), 5012u);
    for (float* p : {b, c, d}) be->free(p);
  }
  ModelConfig c;
  c.vocab_size = 64;
  c.hidden = 64;
  c.intermediate = 128;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.d_head = 32;
  c.max_positions = 4096;
  c.bos_id = 1;
  c.eos_id = 2;
  const std::string dir = test::make_temp_dir("cuda_mem");
  ASSERT_FALSE(dir.empty());
  write_model_dir(dir, c, random_model_tensors(c, 5), "F32", "");
  const int T = 4096;
  const auto ids = random_ids(T, c.vocab_size, 3);
  RunOptions opt;
  opt.all_logits = false;
  size_t peak[2] = {0, 0};
  OneHeadRows on_cpu(T);
  {
    auto cpu = Model::load(dir, Device::kCpu);
    Session s(*cpu, T, /*prefill_only=*/true);
    std::vector<float> logits;
    ASSERT_TRUE(s.forward(ids.data(), T, TempSpec(), opt, &on_cpu, &logits));
  }
  for (int captured = 0; captured < 2; ++captured) {
    auto gpu = Model::load(dir, Device::kCuda, exact_options());
    const size_t loaded = gpu->device_bytes_peak();
    EXPECT_GE(loaded, gpu->weight_bytes());
    OneHeadRows obs(T);
    Session s(*gpu, T, /*prefill_only=*/true);
    std::vector<float> logits;
    ASSERT_TRUE(s.forward(ids.data(), T, TempSpec(), opt, captured ? &obs : nullptr, &logits));
    EXPECT_EQ(obs.rows.load(), captured ? T : 0);
    for (int r = 0; captured && r < T; ++r) {  // fp32 both ways: sums agree to the forward's 2e-4, relative
      ASSERT_NEAR(obs.prob_sum[(size_t)r], 1.0, 1e-4) << "row " << r;
      ASSERT_NEAR(obs.raw_sum[(size_t)r], on_cpu.raw_sum[(size_t)r], 2e-4 * (on_cpu.raw_abs[(size_t)r] + 1.0))
          << "row " << r;
    }
    peak[captured] = gpu->device_bytes_peak();
    // at least the residual stream, the queries and one layer's K and V for every row
    EXPECT_GE(peak[captured] - loaded, (size_t)T * (c.hidden + c.n_heads * c.d_head + 2 * c.d_head) * sizeof(float));
  }
  const size_t blocks = peak[1] - peak[0];
  EXPECT_LE(blocks, (size_t(128) << 20) + (size_t(1) << 20)) << "captured rows' device blocks, bytes";
  EXPECT_GE(blocks, size_t(64) << 20) << "the blocks were counted";
  std::system(("rm -rf '" + dir + "'").c_str());
}

}  // namespace
}  // namespace focal
