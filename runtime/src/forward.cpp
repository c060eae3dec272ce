// The forward pass, written once against the Backend interface: LLaMA blocks with a per-(layer, head, row)
// attention logit scale from a TempSpec. No I/O here: everything observable goes through ForwardObserver.
#include <algorithm>
#include <limits>
#include <new>
#include <cmath>

#include "focal/byte_size.h"
#include "focal/calibrate.h"
#include "focal/error.h"
#include "focal_kernels/shared_math.h"
#include "model_internal.h"
#include "tape.h"

namespace focal {

// Backend memory of the forward, planned once when the session is made: every per-row activation sized for
// max_tokens rows (a call of n rows uses the first n), so a session allocates nothing on the backend per call
// except an all-rows logits output ([n, vocab], only when a caller asks for every row's logits).
struct Workspace {
  DeviceBuffer x;  // [max, H] residual stream
  // xn [max, max(H, QD)]: the normalised input, and the attention's output once the projections have read it;
  // q [max, max(QD, H)]: the queries, and the output projections (attention and MLP) once the attention has read
  // them. Two buffers of [max, H] fewer than one per role (256 MiB of an 8B model's capture at T = 8192).
  DeviceBuffer xn, q;
  DeviceBuffer k, v;              // [max, KD]
  DeviceBuffer gate, up;          // [min(max, kMlpRows), I]: the MLP runs kMlpRows rows at a time (a training tape,
                                  // which keeps every row's gate and up, grows them to [n, I])
  DeviceBuffer scale;             // [n_heads, max] logit multiplier per (head, row)
  std::vector<float> scale_held;  // what `scale` holds (its one writer is the forward's upload), to skip an equal one
  DeviceBuffer metrics;           // [n_heads, max, kNumRowMetrics]
  DeviceBuffer tau_dot;           // [max] X . w_tau (learned-temperature models)
  DeviceBuffer logits_block;      // [min(max, kLogitsBlock), vocab] logits handed to observers / the last row's
  static constexpr int kLogitsBlock = 256;
  static constexpr int kMlpRows = kForwardMlpRows;

  Workspace(Backend& be, const ModelConfig& c, int max) {
    const size_t m = (size_t)max, QD = (size_t)c.n_heads * c.d_head, KD = (size_t)c.n_kv_heads * c.d_head;
    const size_t HQ = std::max((size_t)c.hidden, QD);
    x = DeviceBuffer(be, m * c.hidden);
    xn = DeviceBuffer(be, m * HQ);
    q = DeviceBuffer(be, m * HQ);
    k = DeviceBuffer(be, m * KD);
    v = DeviceBuffer(be, m * KD);
    gate = DeviceBuffer(be, std::min(m, (size_t)kMlpRows) * c.intermediate);
    up = DeviceBuffer(be, std::min(m, (size_t)kMlpRows) * c.intermediate);
    scale = DeviceBuffer(be, (size_t)c.n_heads * m);
    metrics = DeviceBuffer(be, (size_t)c.n_heads * m * kNumRowMetrics);
    if (c.focal.has_tau) tau_dot = DeviceBuffer(be, m);
    logits_block = DeviceBuffer(be, (size_t)std::min(max, kLogitsBlock) * c.vocab_size);
  }
};

struct Session::State {
  int max_tokens = 0;
  int n_past = 0;
  std::unique_ptr<Workspace> ws;               // the forward's activations, planned once
  std::vector<DeviceBuffer> k_cache, v_cache;  // per layer [n_kv_heads, max_tokens, d_head] (prefill_only: one)
  bool prefill_only = false;
  std::vector<double> tau_sum;  // per layer: sum of X.w_tau over the cached positions
  // keep_layer_inputs: the last completed prefill from position 0 (ids, each layer's input, tau sums after it).
  bool keep_inputs = false;
  int kept_valid = 0;      // kept_layers(): layer_in[0..kept_valid] hold the last completed run's
  size_t keep_budget = 0;  // bytes the kept inputs may take (0: every layer's)
  int kept_stride = 1;     // the inputs of layers 0, s, 2s, ... are kept (the last prefill from layer 0 chose s)
  std::vector<int32_t> kept_ids;
  std::vector<std::vector<float>> layer_in;  // per layer [n, hidden]; empty for layers not kept
  std::vector<double> kept_tau_sum;
  // forward_until: a prefill paused after layer paused_at - 1 (0: none); the workspace's x holds layer paused_at's
  // input, the KV cache and tau sums hold layers before it, n_past is not yet advanced.
  int paused_at = 0;
  std::vector<int32_t> paused_ids;
};

Session::Session(const Model& model, int max_tokens, bool prefill_only)
    : model_(model), st_(std::make_unique<State>()) {
  const ModelConfig& c = model.config();
  if (max_tokens <= 0) throw Error("session: max_tokens must be positive");
  st_->max_tokens = max_tokens;
  st_->prefill_only = prefill_only;
  Backend& be = model.backend();
  const size_t n = (size_t)c.n_kv_heads * max_tokens * c.d_head;
  const int cached_layers = prefill_only ? 1 : c.n_layers;
  const uint64_t kv_bytes = 2 * (uint64_t)cached_layers * n * sizeof(float);
  const auto too_large = [&](const std::string& why) {
    return Error("a session of " + std::to_string(max_tokens) + " tokens needs a KV cache of " +
                 format_byte_size(kv_bytes) + " (2 x " + std::to_string(cached_layers) + " layers x " +
                 std::to_string(c.n_kv_heads) + " KV heads x " + std::to_string(c.d_head) +
                 " values x tokens x 4 bytes), " + why + ": ask for fewer tokens");
  };
  // On the CPU, a cache larger than the machine's memory is refused before anything is allocated (as a model's
  // weights are: LoadOptions::budget_bytes); a device's own allocation failure is caught below.
  const uint64_t machine = machine_memory_bytes();
  if (model.device() == Device::kCpu && machine > 0 && kv_bytes > machine)
    throw too_large("more than this machine's memory");
  try {
    for (int l = 0; l < cached_layers; ++l) {
      st_->k_cache.emplace_back(be, n);
      st_->v_cache.emplace_back(be, n);
    }
    st_->ws = std::make_unique<Workspace>(be, c, max_tokens);
  } catch (const std::bad_alloc&) { throw too_large("and could not allocate it"); }
  st_->tau_sum.assign(c.n_layers, 0.0);
}

Session::~Session() = default;
int Session::n_past() const { return st_->n_past; }
int Session::max_tokens() const { return st_->max_tokens; }
void Session::reset() {
  st_->n_past = 0;
  st_->paused_at = 0;
  std::fill(st_->tau_sum.begin(), st_->tau_sum.end(), 0.0);
}

namespace {

struct RowCtx {
  ForwardObserver* obs;
  int layer;
};

void row_trampoline(void* ctx, int head, int row0, int n_rows, int stride, const float* probs, const float* raw) {
  auto* c = static_cast<RowCtx*>(ctx);
  c->obs->on_rows(c->layer, head, row0, n_rows, stride, probs, raw);
}

struct TapeCtx {
  LayerTape* lt;
  int n;
  ForwardObserver* obs;  // also fed when it wants the head
  int layer;
};

// Records every head's rows into the tape ([n_heads, T, T]) and passes them on to the observer if it wants them.
void tape_trampoline(void* ctx, int head, int row0, int n_rows, int stride, const float* probs, const float* raw) {
  auto* c = static_cast<TapeCtx*>(ctx);
  for (int r = 0; r < n_rows; ++r) {
    const size_t off = ((size_t)head * c->n + row0 + r) * c->n;
    std::copy(probs + (size_t)r * stride, probs + (size_t)r * stride + row0 + r + 1, &c->lt->probs[off]);
    std::copy(raw + (size_t)r * stride, raw + (size_t)r * stride + row0 + r + 1, &c->lt->raw[off]);
  }
  if (c->obs && c->obs->wants_rows(c->layer, head)) c->obs->on_rows(c->layer, head, row0, n_rows, stride, probs, raw);
}

// Fills scale[n_heads, T] for one layer; tau / tau_raw [T] are filled in learned mode. Every multiplier comes from
// TempSpec::row_multiplier, the one place that ranks a head override over a layer override over the mode.
void layer_row_scale(const ModelConfig& c, const TempSpec& spec, int layer, int pos0, int T, const float* tau_dot,
                     double tau_sum_prev, float tau_b, float* scale, float* tau, float* tau_raw) {
  std::vector<float> tau_clipped(T, 0.0f);  // [T] learned tau after the clip, before tau_scale
  if (spec.mode == AttnMode::kLearned) {
    // The rule of the projection in use: a temperature file's, or the model's own.
    const TauMode tau_mode = spec.tau_proj ? spec.tau_proj->tau_mode : c.focal.tau_mode;
    const float tau_min = spec.tau_proj ? spec.tau_proj->tau_min : c.focal.tau_min;
    const float tau_max = spec.tau_proj ? spec.tau_proj->tau_max : c.focal.tau_max;
    double run = tau_sum_prev, total = tau_sum_prev;
    for (int i = 0; i < T; ++i) total += tau_dot[i];
    for (int i = 0; i < T; ++i) {
      run += tau_dot[i];
      double pre = 0.0;
      switch (tau_mode) {
        case TauMode::kPerToken: pre = tau_dot[i]; break;
        case TauMode::kPrefixMean: pre = run / (pos0 + i + 1); break;
        case TauMode::kSequenceMean: pre = total / (pos0 + T); break;
      }
      tau_raw[i] = (float)pre + tau_b;
      tau_clipped[i] = math::clampf(tau_raw[i], tau_min, tau_max);
      tau[i] = tau_clipped[i] * spec.tau_scale;
    }
  }
  for (int h = 0; h < c.n_heads; ++h) {
    float* s = scale + (size_t)h * T;
    for (int i = 0; i < T; ++i) s[i] = spec.row_multiplier(c, layer, h, pos0 + i + 1, tau_clipped[i]);
  }
}

}  // namespace

namespace {

// Calls of at most this many tokens (decode, and a few drafted tokens) are recorded where the backend can: small
// launches that a replay issues back to back; a prefill's launches are few and long.
constexpr int kRecordedMaxTokens = 8;

// A step's device work recorded and replayed a part at a time (Backend::record_begin; CUDA graphs): each layer, then
// the head up to the first read back (the logits' download, or the head's top-k). Each part is launched as soon as
// it is recorded, so the device runs one while the host records the next.
class StepRecording {
 public:
  // held: the host copy of what a recorded upload writes (the row scales), forgotten when a recording runs nothing
  StepRecording(Backend& be, bool want, std::vector<float>* held) : be_(be), held_(held), want_(want) {}
  StepRecording(const StepRecording&) = delete;
  StepRecording& operator=(const StepRecording&) = delete;
  ~StepRecording() { abort(); }
  void begin(int segment) { open_ = want_ && be_.record_begin(segment); }
  // Drops an open recording: nothing of it runs.
  void abort() {
    if (!open_) return;
    open_ = false;
    be_.record_abort();
    held_->clear();
  }
  // Runs what was recorded (nothing when no recording is open); false: the recording failed and nothing of it ran.
  bool end() {
    if (!open_) return true;
    open_ = false;
    if (be_.record_end()) return true;
    held_->clear();
    want_ = false;
    return false;
  }

 private:
  Backend& be_;
  std::vector<float>* held_;
  bool want_, open_ = false;
};

// The forward pass. `tape` (training) records the activations the backward needs; it requires pos0 == 0.
bool forward_impl(const Model& model, Session::State& st, Session& session, const int32_t* ids, int n,
                  const TempSpec& spec, const RunOptions& opt, ForwardObserver* obs, std::vector<float>* logits,
                  Tape* tape, int first_layer = 0, LogitsTopk* topk = nullptr, int last_layer = -1,
                  bool pause_after_last = true) {
  const Model::Weights& w = model.weights();
  const ModelConfig& c = model.config();
  Backend& be = model.backend();
  if (n <= 0) throw Error("forward: no tokens to run (the prompt is empty)");
  if (st.n_past + n > st.max_tokens)
    throw Error("forward: " + std::to_string(st.n_past + n) + " tokens exceed this session's capacity of " +
                std::to_string(st.max_tokens) + " (the model's context is " + std::to_string(c.max_positions) + ")");
  for (int i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      throw Error("forward: token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                  " is outside the vocabulary (0.." + std::to_string(c.vocab_size - 1) + ")");
  spec.validate(c);
  check_spec_weights(spec, model);  // a temperature file of other weights (calibrated:PATH)
  // R sums p over a set of keys: a position listed twice counted twice (R up to 2, noise below 0).
  for (size_t i = 0; i < opt.relevant.size(); ++i) {
    if (opt.relevant[i] < 0)
      throw Error("relevant", "relevant key position " + std::to_string(opt.relevant[i]) + " is negative");
    for (size_t j = 0; j < i; ++j)
      if (opt.relevant[j] == opt.relevant[i])
        throw Error("relevant", "relevant lists key position " + std::to_string(opt.relevant[i]) +
                                    " twice (the relevant mass sums p over a set of keys)");
  }

  const int H = c.hidden, QD = c.n_heads * c.d_head, KD = c.n_kv_heads * c.d_head, I = c.intermediate;
  const int pos0 = st.n_past;
  if (st.prefill_only && pos0 != 0)
    throw Error(
        "forward: this session runs one prefill from position 0 (prefill_only: its KV cache holds one "
        "layer); reset() it, or make a session with a cache of every layer to decode on");
  if (tape && pos0 != 0) throw Error("forward: a training tape needs a fresh session (position 0)");
  if (tape) tape->layers.resize(c.n_layers);
  auto save = [&](std::vector<float>& dst, const DeviceBuffer& src, size_t count) {
    dst.resize(count);
    be.download(dst.data(), src.data(), count);
  };
  const bool want_metrics = obs && obs->wants_metrics();
  const bool learned = spec.mode == AttnMode::kLearned;

  // The session's workspace (planned for max_tokens rows); this call uses the first n rows of each buffer.
  Workspace& ws = *st.ws;
  const DeviceBuffer &x = ws.x, &xn = ws.xn;  // [n, H] residual stream, normalised input
  const DeviceBuffer &q = ws.q, &k = ws.k, &v = ws.v;
  // [n, QD] the attention's output, written after the projections read xn; [n, H] the output projections, written
  // after the attention read q (Workspace)
  const DeviceBuffer &att = ws.xn, &proj = ws.q;
  // The MLP's row passes: all n rows at once for a training tape (it keeps gate and up of every row).
  const int mlp_rows = tape ? n : std::min(n, Workspace::kMlpRows);
  if (ws.gate.size() < (size_t)mlp_rows * I) {
    ws.gate = DeviceBuffer(be, (size_t)mlp_rows * I);
    ws.up = DeviceBuffer(be, (size_t)mlp_rows * I);
  }
  const DeviceBuffer &gate = ws.gate, &up = ws.up;  // [mlp_rows, I]
  const DeviceBuffer& scale_d = ws.scale;           // [n_heads, n]
  const DeviceBuffer& metrics_d = ws.metrics;       // [n_heads, n, kNumRowMetrics]
  const DeviceBuffer& tau_dot_d = ws.tau_dot;       // [n]
  std::vector<float> scale_h((size_t)c.n_heads * n), metrics_h, tau_dot(n), tau(n), tau_raw(n);
  if (want_metrics) metrics_h.resize((size_t)c.n_heads * n * kNumRowMetrics);
  std::vector<uint8_t> wanted(c.n_heads, 0);

  if (tape && !is_llama_layout(c) && !(tape->frozen_weights && calibration_gaps(c, n).empty()))
    throw Error("training: the backward pass covers the LLaMA layout only, not '" + c.arch.name + "' models");
  if (c.arch.position == PositionKind::kLearned && pos0 + n > c.max_positions)
    throw Error("forward: positions up to " + std::to_string(pos0 + n) +
                " exceed the model's learned position table (" + std::to_string(c.max_positions) + " positions)");
  // Normalisation (RMSNorm, or LayerNorm with bias), the MLP activation, the raw-logit scale and the rotary
  // frequencies of this call (dynamic NTK and longrope depend on its last position), all read from the config.
  auto norm = [&](const float* in, const float* wt, const float* bias, float* out, int rows) {
    if (c.arch.norm == NormKind::kLayerNorm)
      be.layernorm(in, wt, bias, out, rows, H, c.rms_eps);
    else
      be.rmsnorm(in, wt, out, rows, H, c.rms_eps);
  };
  const ops::Act act = (ops::Act)(int)c.arch.act;
  const float logit_scale = c.arch.query_pre_attn_scalar > 0.0f ? attn_logit_scale(c) : 0.0f;  // 0: 1/sqrt(d_head)
  const float final_cap = c.arch.final_softcap;  // final-logit soft-cap (Gemma 2), 0: none
  float rope_cs_scale = 1.0f;
  const std::vector<float> inv_freq =
      c.arch.position == PositionKind::kRope ? rope_inv_freq(c, pos0 + n, &rope_cs_scale) : std::vector<float>();
  const bool keep = st.keep_inputs && pos0 == 0 && !tape;
  if (keep) {
    // Layers before first_layer are left as they are; from first_layer on, this run overwrites the kept inputs, so
    // until it completes only layers 0..first_layer are those of the last completed run.
    if (first_layer == 0) {
      st.kept_ids.assign(ids, ids + n);
      // Within the budget: every s-th layer's input, s the smallest stride whose inputs fit (at least layer 0's).
      const size_t all = (size_t)c.n_layers * n * H * sizeof(float), per = (size_t)n * H * sizeof(float);
      st.kept_stride = 1;
      if (st.keep_budget > 0 && all > st.keep_budget)
        st.kept_stride = (int)std::min<size_t>(c.n_layers, (all + st.keep_budget - 1) / std::max(st.keep_budget, per));
    }
    st.kept_valid = std::min(st.kept_valid, first_layer);
    st.layer_in.resize(c.n_layers);
  }
  const bool resume = st.paused_at > 0;  // forward_until: x, the caches and tau sums are where the pause left them
  if (resume && (tape || topk || keep)) throw Error("forward: a paused prefill continues only through forward_until");
  if (resume) {
    first_layer = st.paused_at;
  } else if (first_layer > 0) {
    be.upload(x.data(), st.layer_in[first_layer].data(), (size_t)n * H);
    for (int l = 0; l < c.n_layers; ++l) st.tau_sum[l] = l < first_layer ? st.kept_tau_sum[l] : 0.0;
  } else {
    be.embed(w.embed, ids, x.data(), n, H);
    if (c.arch.embed_scale != 1.0f) be.scale(x.data(), (size_t)n * H, c.arch.embed_scale);
    if (w.pos_embed) {  // learned absolute positions pos0..pos0+n-1, added to the token embeddings
      std::vector<int32_t> pos(n);
      for (int i = 0; i < n; ++i) pos[i] = pos0 + i;
      be.embed(w.pos_embed, pos.data(), proj.data(), n, H);
      be.add_inplace(x.data(), proj.data(), (size_t)n * H);
    }
  }
  const int last = last_layer < 0 ? c.n_layers - 1 : last_layer;
  // Decode steps with nothing read back before the logits (no tape, kept inputs, learned temperature, whose
  // projections download, or observer that takes metrics, rows or logits: one that only watches layers pass and
  // may cancel, as a generation's, is fine) are recorded and replayed as one launch where the backend can.
  auto passive = [&] {
    if (!obs) return true;
    if (want_metrics || obs->wants_logits() || obs->next_token_k() > 0) return false;
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_heads; ++h)
        if (obs->wants_rows(l, h)) return false;
    return true;
  };
  StepRecording recording(be,
                          n <= kRecordedMaxTokens && !tape && !keep && !resume && first_layer == 0 && last_layer < 0 &&
                              !learned && passive(),
                          &ws.scale_held);
  // A failed recording ran nothing of its part: the step again, from its embedding, without recording (the backend
  // records no more). The parts that ran are recomputed as they were (the same keys and values stored again).
  auto unrecorded = [&] {
    st.n_past = pos0;
    return forward_impl(model, st, session, ids, n, spec, opt, obs, logits, tape, first_layer, topk, last_layer,
                        pause_after_last);
  };
  bool xn_ready = false;  // xn holds this layer's normalised input already (add_rmsnorm at the previous layer's end)
  for (int l = first_layer; l <= last; ++l) {
    const LayerWeights& L = w.layers[l];
    LayerTape* lt = tape ? &tape->layers[l] : nullptr;
    recording.begin(l);
    if (keep) {
      if (l % st.kept_stride == 0)
        save(st.layer_in[l], x, (size_t)n * H);
      else
        std::vector<float>().swap(st.layer_in[l]);
    }
    if (lt) save(lt->x_in, x, (size_t)n * H);
    const float* attn_in = x.data();  // OLMo 2 projects the block input itself
    if (L.attn_norm) {
      if (!xn_ready) norm(x.data(), L.attn_norm, L.attn_norm_b, xn.data(), n);
      attn_in = xn.data();
    }
    xn_ready = false;
    if (lt) save(lt->xn1, xn, (size_t)n * H);
    const Backend::XwtOut qkv[3] = {{&L.wq, q.data(), QD}, {&L.wk, k.data(), KD}, {&L.wv, v.data(), KD}};
    be.matmul_xwt_shared(attn_in, qkv, 3, n, H);
    if (L.bq) {
      be.add_row_bias(q.data(), L.bq, n, QD);
      be.add_row_bias(k.data(), L.bk, n, KD);
      be.add_row_bias(v.data(), L.bv, n, KD);
    }
    if (L.q_norm && lt) {
      save(lt->q_lin, q, (size_t)n * QD);
      save(lt->k_lin, k, (size_t)n * KD);
    }
    if (L.q_norm && c.arch.qk_norm == QkNormKind::kWhole) {  // RMSNorm over the whole projection (OLMo 2)
      be.rmsnorm(q.data(), L.q_norm, q.data(), n, QD, c.rms_eps);
      be.rmsnorm(k.data(), L.k_norm, k.data(), n, KD, c.rms_eps);
    } else if (L.q_norm) {  // per-head RMSNorm before RoPE (Qwen3 QK-norm)
      be.rmsnorm(q.data(), L.q_norm, q.data(), n * c.n_heads, c.d_head, c.rms_eps);
      be.rmsnorm(k.data(), L.k_norm, k.data(), n * c.n_kv_heads, c.d_head, c.rms_eps);
    }
    if (c.arch.position == PositionKind::kRope)
      be.rope_freqs_qk(q.data(), k.data(), n, c.n_heads, c.n_kv_heads, c.d_head, pos0, inv_freq.data(), rope_cs_scale);
    if (lt) {
      save(lt->q, q, (size_t)n * QD);
      save(lt->k, k, (size_t)n * KD);
      save(lt->v, v, (size_t)n * KD);
    }
    const size_t cl = st.prefill_only ? 0 : (size_t)l;  // the layer's cache (prefill_only: the one shared)
    be.kv_store_pair(k.data(), v.data(), st.k_cache[cl].data(), st.v_cache[cl].data(), n, c.n_kv_heads, c.d_head,
                     st.max_tokens, pos0);

    float tau_b = 0.0f;
    if (learned && spec.tau_proj) {  // a temperature file's projection: X . w_tau on the host, X downloaded
      const TauProj& tp = *spec.tau_proj;
      std::vector<float> x_host((size_t)n * H);  // [n, H]
      be.download(x_host.data(), attn_in, x_host.size());
      const float* wt = tp.weight.data() + (size_t)l * H;
      for (int i = 0; i < n; ++i) {
        double acc = 0.0;
        for (int j = 0; j < H; ++j) acc += (double)x_host[(size_t)i * H + j] * wt[j];
        tau_dot[i] = (float)acc;
      }
      tau_b = tp.bias[l];
    } else if (learned) {
      be.matmul_xwt(xn.data(), L.tau_w, tau_dot_d.data(), n, 1, H);  // [n, 1] = X . w_tau
      be.download(tau_dot.data(), tau_dot_d.data(), n);
      if (L.tau_b) be.download(&tau_b, L.tau_b, 1);
    }
    layer_row_scale(c, spec, l, pos0, n, tau_dot.data(), st.tau_sum[l], tau_b, scale_h.data(), tau.data(),
                    tau_raw.data());
    if (learned)
      for (int i = 0; i < n; ++i) st.tau_sum[l] += tau_dot[i];
    if (scale_h != ws.scale_held) {  // decode under one temperature uploads it once, not once a layer and token
      be.upload(scale_d.data(), scale_h.data(), scale_h.size());
      ws.scale_held = scale_h;
    }
    if (lt) {
      lt->scale = scale_h;
      if (learned) {
        lt->tau_dot = tau_dot;
        lt->tau_pre = tau_raw;
        lt->tau = tau;
      }
      if (tape->keep_attention) {
        lt->probs.assign((size_t)c.n_heads * n * n, 0.0f);
        lt->raw.assign((size_t)c.n_heads * n * n, 0.0f);
      }
    }

    RowCtx rctx{obs, l};
    bool any_wanted = false;
    for (int h = 0; h < c.n_heads; ++h) any_wanted |= (wanted[h] = obs && obs->wants_rows(l, h)) != 0;
    ops::AttentionArgs a;
    a.n_tokens = n;
    a.n_past = pos0;
    a.n_heads = c.n_heads;
    a.n_kv_heads = c.n_kv_heads;
    a.d_head = c.d_head;
    a.q = q.data();
    a.k_cache = st.k_cache[cl].data();
    a.v_cache = st.v_cache[cl].data();
    a.cache_stride = st.max_tokens;
    a.row_scale = scale_d.data();
    a.logit_scale = logit_scale;
    a.softcap = c.arch.attn_softcap;
    a.window = layer_window(c, l);
    a.out = att.data();
    a.metrics = want_metrics ? metrics_d.data() : nullptr;
    a.topk = opt.topk_mass_k;
    a.relevant = opt.relevant.empty() ? nullptr : opt.relevant.data();
    a.n_relevant = (int)opt.relevant.size();
    a.head_wanted = any_wanted ? wanted.data() : nullptr;
    a.row_fn = any_wanted ? &row_trampoline : nullptr;
    a.row_ctx = &rctx;
    a.probs_fp16 = opt.probs_fp16;
    std::vector<uint8_t> all_heads;
    TapeCtx tctx{lt, n, obs, l};
    if (lt && tape->keep_attention) {
      all_heads.assign(c.n_heads, 1);
      a.head_wanted = all_heads.data();
      a.row_fn = &tape_trampoline;
      a.row_ctx = &tctx;
      a.probs_fp16 = false;  // the backward needs the fp32 probabilities
    }
    be.attention(a);

    if (lt) save(lt->att, att, (size_t)n * QD);
    be.matmul_xwt(att.data(), L.wo, proj.data(), n, H, QD);
    if (L.bo) be.add_row_bias(proj.data(), L.bo, n, H);
    if (L.post_attn_norm) norm(proj.data(), L.post_attn_norm, nullptr, proj.data(), n);
    const float* mlp_in = x.data();
    if (L.mlp_norm && c.arch.norm != NormKind::kLayerNorm) {  // the residual and the MLP's RMSNorm as one op
      be.add_rmsnorm(x.data(), proj.data(), L.mlp_norm, xn.data(), n, H, c.rms_eps);
      mlp_in = xn.data();
    } else {
      be.add_inplace(x.data(), proj.data(), (size_t)n * H);
      if (L.mlp_norm) {
        norm(x.data(), L.mlp_norm, L.mlp_norm_b, xn.data(), n);
        mlp_in = xn.data();
      }
    }
    if (lt) save(lt->x_mid, x, (size_t)n * H);
    for (int r0 = 0; r0 < n; r0 += mlp_rows) {  // rows r0 .. r0 + nr - 1 of the MLP
      const int nr = std::min(mlp_rows, n - r0);
      const Backend::XwtOut gate_up[2] = {{&L.w_up, up.data(), I}, {&L.w_gate, gate.data(), I}};
      be.matmul_xwt_shared(mlp_in + (size_t)r0 * H, gate_up, L.w_gate ? 2 : 1, nr, H);
      if (L.b_gate) be.add_row_bias(gate.data(), L.b_gate, nr, I);
      if (L.b_up) be.add_row_bias(up.data(), L.b_up, nr, I);
      if (lt) {  // one pass (mlp_rows == n)
        save(lt->xn2, xn, (size_t)n * H);
        save(lt->gate, gate, (size_t)n * I);
        save(lt->up, up, (size_t)n * I);
      }
      if (!L.w_gate)  // act(up(x)) (GPT-2)
        be.act_mul(up.data(), nullptr, gate.data(), (size_t)nr * I, act);
      else if (act == ops::Act::kSilu)
        be.swiglu(gate.data(), up.data(), gate.data(), (size_t)nr * I);
      else
        be.act_mul(gate.data(), up.data(), gate.data(), (size_t)nr * I, act);
      be.matmul_xwt(gate.data(), L.w_down, proj.data() + (size_t)r0 * H, nr, H, I);
    }
    if (L.b_down) be.add_row_bias(proj.data(), L.b_down, n, H);
    if (L.post_mlp_norm) norm(proj.data(), L.post_mlp_norm, nullptr, proj.data(), n);
    const float* next_norm = l < last && c.arch.norm != NormKind::kLayerNorm ? w.layers[l + 1].attn_norm : nullptr;
    if (next_norm) {  // the residual and the next layer's RMSNorm as one op (xn is untouched until that layer)
      be.add_rmsnorm(x.data(), proj.data(), next_norm, xn.data(), n, H, c.rms_eps);
      xn_ready = true;
    } else {
      be.add_inplace(x.data(), proj.data(), (size_t)n * H);
    }
    if (!recording.end()) return unrecorded();

    if (obs) {
      LayerRecord rec;
      rec.layer = l;
      rec.n_tokens = n;
      rec.pos0 = pos0;
      rec.n_heads = c.n_heads;
      if (want_metrics) {
        be.download(metrics_h.data(), metrics_d.data(), metrics_h.size());
        rec.metrics = metrics_h.data();
      }
      rec.row_scale = scale_h.data();
      if (learned) {  // a layer whose every head an override sets ran without tau: NaN, not a tau nobody used
        bool tau_unused = true;
        if (!spec.layer_temp.count(l))
          for (int h = 0; h < c.n_heads && tau_unused; ++h) tau_unused = spec.head_temp.count({l, h}) > 0;
        if (tau_unused) std::fill(tau.begin(), tau.begin() + n, std::numeric_limits<float>::quiet_NaN());
      }
      rec.tau = learned ? tau.data() : nullptr;
      rec.tau_raw = learned ? tau_raw.data() : nullptr;
      obs->on_layer(rec);
      if (obs->cancelled()) {
        session.reset();
        return false;
      }
    }
  }
  if (last < c.n_layers - 1) {
    if (pause_after_last) {  // paused (forward_until): x is layer last + 1's input
      st.paused_at = last + 1;
    } else {  // rows only (Session::rerun_layers): as the completed run it repeats left it
      st.paused_at = 0;
      st.n_past += n;
    }
    be.synchronize();
    return true;
  }
  st.paused_at = 0;
  st.n_past += n;
  if (keep) {
    st.kept_valid = c.n_layers;
    st.kept_tau_sum = st.tau_sum;
  }

  const bool row_logits = obs && obs->wants_logits();
  const int next_k = obs ? obs->next_token_k() : 0;
  if (row_logits || next_k > 0) {  // every row's logits, or their next-token statistics, a block of rows at a time
    const int block = std::min(n, Workspace::kLogitsBlock), V = c.vocab_size;
    norm(x.data(), w.final_norm, w.final_norm_b, xn.data(), n);
    const DeviceBuffer& lg = ws.logits_block;                                          // [block, vocab], on the backend
    std::vector<float> lg_h(row_logits && !be.host_memory() ? (size_t)block * V : 0);  // a device's block, downloaded
    const int32_t* targets = next_k > 0 ? obs->next_token_targets() : nullptr;         // [n]
    std::vector<float> lse(next_k > 0 ? block : 0), top_val((size_t)block * next_k), target_val(lse.size());
    std::vector<int32_t> top_id((size_t)block * next_k);  // [block, next_k] with top_val
    for (int r0 = 0; r0 < n; r0 += block) {
      const int m = std::min(block, n - r0);
      be.matmul_xwt(xn.data() + (size_t)r0 * H, w.lm_head, lg.data(), m, V, H);
      if (final_cap > 0.0f) be.softcap(lg.data(), (size_t)m * V, final_cap);
      if (row_logits) {
        if (!be.host_memory()) be.download(lg_h.data(), lg.data(), (size_t)m * V);
        obs->on_logits(r0, m, be.host_memory() ? lg.data() : lg_h.data());
      }
      if (next_k > 0) {
        be.next_token_rows(lg.data(), m, V, next_k, targets + r0, lse.data(), top_id.data(), top_val.data(),
                           target_val.data());
        obs->on_next_tokens(r0, m, lse.data(), top_id.data(), top_val.data(), target_val.data());
      }
    }
  }
  if (tape && !logits) {  // the trainer applies the head itself, to the rows its loss counts (loss_and_grad)
    save(tape->x_final, x, (size_t)n * H);
    norm(x.data(), w.final_norm, w.final_norm_b, xn.data(), n);
    save(tape->xn_final, xn, (size_t)n * H);
  }
  if (logits) {
    const int rows = opt.all_logits ? n : 1;
    recording.begin(c.n_layers);
    if (tape) save(tape->x_final, x, (size_t)n * H);
    norm(x.data() + (size_t)(n - rows) * H, w.final_norm, w.final_norm_b, xn.data(), rows);
    if (tape) save(tape->xn_final, xn, (size_t)n * H);
    logits->resize((size_t)rows * c.vocab_size);
    // [rows, vocab]: a host backend writes the caller's vector in place (at T = 8192, SmolLM2's rows are 1.6 GB, and
    // a buffer of them beside the vector cost 1.6 GB of fresh pages and a copy); a device one computes in its block,
    // or in a buffer of every row when more rows than the block are asked for, and downloads.
    float* lg = be.host_memory() ? logits->data() : ws.logits_block.data();
    DeviceBuffer all_rows;
    if (!be.host_memory() && rows > Workspace::kLogitsBlock) {
      all_rows = DeviceBuffer(be, (size_t)rows * c.vocab_size);
      lg = all_rows.data();
    }
    be.matmul_xwt(xn.data(), w.lm_head, lg, rows, c.vocab_size, H);
    if (final_cap > 0.0f) be.softcap(lg, (size_t)rows * c.vocab_size, final_cap);
    if (!recording.end()) return unrecorded();
    if (lg != logits->data()) be.download(logits->data(), lg, logits->size());
  }
  if (topk) {  // the last row's k best logits, selected on the backend
    recording.begin(c.n_layers + 1);
    norm(x.data() + (size_t)(n - 1) * H, w.final_norm, w.final_norm_b, xn.data(), 1);
    const DeviceBuffer& lg = ws.logits_block;  // [1, vocab]
    be.matmul_xwt(xn.data(), w.lm_head, lg.data(), 1, c.vocab_size, H);
    if (final_cap > 0.0f) be.softcap(lg.data(), (size_t)c.vocab_size, final_cap);
    topk->idx.resize(topk->k);
    topk->val.resize(topk->k);
    if (!recording.end()) return unrecorded();
    be.topk_rows(lg.data(), 1, c.vocab_size, topk->k, topk->idx.data(), topk->val.data());
  }
  be.synchronize();
  return true;
}

}  // namespace

bool Session::forward(const int32_t* ids, int n, const TempSpec& spec, const RunOptions& opt, ForwardObserver* obs,
                      std::vector<float>* logits) {
  if (st_->paused_at > 0)
    throw Error("forward: this session holds a prefill paused after layer " + std::to_string(st_->paused_at - 1) +
                " (forward_until); continue it with forward_until, or reset() the session");
  return forward_impl(model_, *st_, *this, ids, n, spec, opt, obs, logits, nullptr);
}

void Session::keep_layer_inputs(bool on, size_t budget_bytes) {
  st_->keep_inputs = on;
  st_->keep_budget = budget_bytes;
  if (!on) {
    st_->kept_ids.clear();
    st_->layer_in.clear();
    st_->kept_valid = 0;
  }
}

int Session::kept_layers() const { return st_->keep_inputs ? st_->kept_valid : 0; }

int Session::rerun_start(int first_layer) const {
  const int n_layers = model_.config().n_layers;
  if (first_layer >= n_layers) first_layer = n_layers - 1;  // nothing changed: still redo the last layer for logits
  return std::max(0, first_layer - first_layer % st_->kept_stride);
}

size_t Session::kept_input_bytes() const {
  size_t b = 0;
  for (const std::vector<float>& v : st_->layer_in) b += v.size() * sizeof(float);
  return b;
}

bool Session::rerun_from(int first_layer, const int32_t* ids, int n, const TempSpec& spec, const RunOptions& opt,
                         ForwardObserver* obs, std::vector<float>* logits) {
  const int n_layers = model_.config().n_layers;
  if (first_layer < 0 || first_layer > n_layers)
    throw Error("rerun_from: layer " + std::to_string(first_layer) + " is out of range (0.." +
                std::to_string(n_layers) + ")");
  if (!st_->keep_inputs || st_->kept_ids.size() != (size_t)n || !std::equal(ids, ids + n, st_->kept_ids.begin()))
    throw Error("rerun_from: the last prefill of this session was not of these tokens with keep_layer_inputs on");
  first_layer = rerun_start(first_layer);  // the kept layer at or below it
  if (first_layer > st_->kept_valid)
    throw Error("rerun_from: layer " + std::to_string(first_layer) + " is past the kept layers (0.." +
                std::to_string(st_->kept_valid) + "): a cancelled run changed the rest");
  reset();
  return forward_impl(model_, *st_, *this, ids, n, spec, opt, obs, logits, nullptr, first_layer);
}

bool Session::rerun_layers(int first_layer, int last_layer, const int32_t* ids, int n, const TempSpec& spec,
                           const RunOptions& opt, ForwardObserver* obs) {
  const int n_layers = model_.config().n_layers;
  if (last_layer < 0 || last_layer >= n_layers || first_layer < 0 || first_layer > last_layer)
    throw Error("rerun_layers: layers " + std::to_string(first_layer) + ".." + std::to_string(last_layer) +
                " are not a range within 0.." + std::to_string(n_layers - 1));
  if (!st_->keep_inputs || st_->kept_ids.size() != (size_t)n || !std::equal(ids, ids + n, st_->kept_ids.begin()))
    throw Error("rerun_layers: the last prefill of this session was not of these tokens with keep_layer_inputs on");
  first_layer = rerun_start(first_layer);
  const int kept = st_->kept_valid;
  if (first_layer > kept)
    throw Error("rerun_layers: layer " + std::to_string(first_layer) + " is past the kept layers (0.." +
                std::to_string(kept) + "): a cancelled run changed the rest");
  reset();
  if (!forward_impl(model_, *st_, *this, ids, n, spec, opt, obs, nullptr, nullptr, first_layer, nullptr, last_layer,
                    /*pause_after_last=*/false))
    return false;
  // Layers 0..last_layer now hold the repeated run's inputs; those after it still do if they did before.
  st_->kept_valid = kept > last_layer ? kept : last_layer + 1;
  st_->tau_sum = st_->kept_tau_sum;
  return true;
}

bool Session::forward_until(const int32_t* ids, int n, const TempSpec& spec, const RunOptions& opt,
                            ForwardObserver* obs, int last_layer, std::vector<float>* logits) {
  const int n_layers = model_.config().n_layers;
  if (st_->keep_inputs) throw Error("forward_until: not with keep_layer_inputs on (rerun_from keeps its own inputs)");
  if (last_layer < 0 || last_layer >= n_layers)
    throw Error("forward_until: layer " + std::to_string(last_layer) + " is out of range (0.." +
                std::to_string(n_layers - 1) + ")");
  if (st_->paused_at > 0) {
    if (st_->paused_ids.size() != (size_t)n || !std::equal(ids, ids + n, st_->paused_ids.begin()))
      throw Error("forward_until: the paused prefill was of other tokens; reset() the session first");
    if (last_layer < st_->paused_at)
      throw Error("forward_until: layer " + std::to_string(last_layer) + " already ran (the prefill is paused before " +
                  "layer " + std::to_string(st_->paused_at) + ")");
  } else {
    st_->paused_ids.assign(ids, ids + n);
  }
  return forward_impl(model_, *st_, *this, ids, n, spec, opt, obs, logits, nullptr, 0, nullptr, last_layer);
}

bool forward_with_tape(Session& s, const int32_t* ids, int n, const TempSpec& spec, Tape* tape,
                       std::vector<float>* logits) {
  RunOptions opt;
  opt.all_logits = true;
  return forward_impl(s.model(), s.state(), s, ids, n, spec, opt, nullptr, logits, tape);
}

bool forward_topk(Session& s, const int32_t* ids, int n, const TempSpec& spec, const RunOptions& opt,
                  ForwardObserver* obs, LogitsTopk* topk) {
  return forward_impl(s.model(), s.state(), s, ids, n, spec, opt, obs, nullptr, nullptr, 0, topk);
}

}  // namespace focal
