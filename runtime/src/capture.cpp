// Recording runs into a CaptureFile through a ForwardObserver, the memory estimate behind --budget, and KL/JS
// comparison of two runs.
#include "focal/capture.h"

#include "focal/byte_size.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "focal/error.h"
#include "focal/metrics.h"
#include "focal_kernels/ops.h"
#include "focal_kernels/shared_math.h"
#include "model_internal.h"

namespace focal {

namespace {

std::vector<int> all_upto(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

std::vector<int> resolve(const std::vector<int>& sel, int n) { return sel.empty() ? all_upto(n) : sel; }

// field: the CaptureRequest member ("layers", ...); what: one item of it ("layer"); fix: what the valid range is of.
void check_range(const std::vector<int>& sel, int n, const char* field, const char* what, const char* fix) {
  std::vector<int> sorted = sel;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= n)
      throw Error(field, std::string(field) + " lists " + what + " " + std::to_string(sorted[i]) +
                             ", which is out of range (" + fix + " 0.." + std::to_string(n - 1) + ")");
    if (i && sorted[i] == sorted[i - 1])
      throw Error(field, std::string(field) + " lists " + what + " " + std::to_string(sorted[i]) + " twice");
  }
}

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

class CaptureObserver final : public ForwardObserver {
 public:
  CaptureObserver(RunCapture& run, const ModelConfig& c, int T, bool store_rows,
                  const std::function<void(int, int)>& progress, const std::function<bool()>& cancelled = {})
      : run_(run), c_(c), T_(T), store_rows_(store_rows), progress_(progress), cancelled_(cancelled) {
    lmap_.assign(c.n_layers, -1);
    hmap_.assign(c.n_heads, -1);
    qmap_.assign(T, -1);
    for (size_t i = 0; i < run.layers.size(); ++i) lmap_[run.layers[i]] = (int)i;
    for (size_t i = 0; i < run.heads.size(); ++i) hmap_[run.heads[i]] = (int)i;
    for (size_t i = 0; i < run.queries.size(); ++i) qmap_[run.queries[i]] = (int)i;
  }
  bool wants_metrics() const override { return true; }
  bool stores(int layer, int head) const { return store_rows_ && lmap_[layer] >= 0 && hmap_[head] >= 0; }
  bool selected(int layer, int head) const { return cmp_ && cl_[layer] >= 0 && ch_[head] >= 0; }
  bool compares(int layer, int head) const { return !holding_ && selected(layer, head); }
  bool holds(int layer, int head) const { return holding_ && selected(layer, head); }
  bool wants_rows(int layer, int head) const override {
    return !targets_.empty() || stores(layer, head) || compares(layer, head) || holds(layer, head);
  }
  // One side of capture_runs_lockstep over sel's (layer, head, query) rows. `held` holds one layer's rows of run a,
  // [1, Hc, Qc, T] in sel's head and query order. hold: this run (a) copies its rows of each layer into it as they
  // arrive; else this run (b) compares its rows with them as they arrive: KL(a || b) and JS per row into sel's kl /
  // js ([Lc, Hc, Qc]).
  void want_lockstep(Comparison* sel, RunCapture* held, bool hold) {
    cmp_ = sel;
    held_ = held;
    holding_ = hold;
    cl_.assign(c_.n_layers, -1);
    ch_.assign(c_.n_heads, -1);
    cq_.assign(T_, -1);
    for (size_t i = 0; i < sel->layers.size(); ++i) cl_[sel->layers[i]] = (int)i;
    for (size_t i = 0; i < sel->heads.size(); ++i) ch_[sel->heads[i]] = (int)i;
    for (size_t i = 0; i < sel->queries.size(); ++i) cq_[sel->queries[i]] = (int)i;
  }
  // Computes RunCapture::induction of every row (the run's array must be sized [n_layers, n_heads, T]).
  void want_induction(const std::vector<int32_t>& tokens) { targets_ = induction_targets(tokens); }
  // The run's next-token arrays (topk_ids, topk_probs, token_nll), from each row's statistics (want_next_tokens).
  int next_token_k() const override { return next_k_; }
  const int32_t* next_token_targets() const override { return next_targets_.data(); }
  void on_next_tokens(int row0, int n_rows, const float* lse, const int32_t* ids, const float* vals,
                      const float* target_vals) override {
    const int K = next_k_;
    for (int r = 0; r < n_rows; ++r) {
      const size_t i = (size_t)row0 + r;
      for (int j = 0; j < K; ++j) {
        next_run_->topk_ids[i * K + j] = ids[(size_t)r * K + j];
        next_run_->topk_probs[i * K + j] = std::exp(vals[(size_t)r * K + j] - lse[r]);
      }
      if (next_targets_[i] >= 0) next_run_->token_nll[i] = lse[r] - target_vals[r];
    }
  }
  // Sizes run's next-token arrays for the K most likely tokens of each of the tokens' rows (the loss of row i: token
  // i + 1's), filled as the forward's statistics arrive.
  void want_next_tokens(RunCapture& run, const std::vector<int32_t>& tokens, int K) {
    const size_t T = tokens.size();
    run.topk_ids.assign(T * K, 0);
    run.topk_probs.assign(T * K, 0.0f);
    run.token_nll.assign(T, std::numeric_limits<float>::quiet_NaN());
    next_run_ = &run;
    next_k_ = K;
    next_targets_.assign(T, -1);
    for (size_t i = 0; i + 1 < T; ++i) next_targets_[i] = tokens[i + 1];
  }
  bool zero_row_tails = false;  // the run's rows hold stale values (a recycled run): write each row's masked tail
  void on_rows(int layer, int head, int row0, int n_rows, int stride, const float* probs, const float* raw) override {
    if (!targets_.empty())  // disjoint (head, row block)s per call: each writes its own entries
      for (int r = 0; r < n_rows; ++r)
        run_.induction[((size_t)layer * c_.n_heads + head) * T_ + row0 + r] =
            induction_mass(probs + (size_t)r * stride, targets_[row0 + r]);
    if (compares(layer, head))  // disjoint (head, row block)s per call: each writes its own entries
      for (int r = 0; r < n_rows; ++r) {
        const int q = row0 + r, qi = cq_[q];
        if (qi < 0) continue;
        const float* pa = held_->probs.data() + stored_row_offset(*held_, 0, (size_t)ch_[head], (size_t)qi, T_);
        const float* pb = probs + (size_t)r * stride;
        const size_t at = ((size_t)cl_[layer] * cmp_->heads.size() + (size_t)ch_[head]) * cmp_->queries.size() + qi;
        cmp_->kl[at] = (float)kl_divergence(pa, pb, q + 1);
        cmp_->js[at] = (float)js_divergence(pa, pb, q + 1);
      }
    if (holds(layer, head))
      for (int r = 0; r < n_rows; ++r) {
        const int q = row0 + r, qi = cq_[q];
        if (qi < 0) continue;
        const float* p = probs + (size_t)r * stride;
        std::copy(p, p + q + 1, &held_->probs[stored_row_offset(*held_, 0, (size_t)ch_[head], (size_t)qi, T_)]);
      }
    if (!stores(layer, head)) return;
    for (int r = 0; r < n_rows; ++r) {
      const int qi = qmap_[row0 + r];
      if (qi < 0) continue;
      const size_t off = stored_row_offset(run_, (size_t)lmap_[layer], (size_t)hmap_[head], (size_t)qi, T_);
      const int n_vis = row0 + r + 1;
      if (!run_.probs.empty()) {
        std::copy(probs + (size_t)r * stride, probs + (size_t)r * stride + n_vis, &run_.probs[off]);
        if (zero_row_tails) std::fill(&run_.probs[off] + n_vis, &run_.probs[off] + T_, 0.0f);
      }
      if (!run_.scores.empty()) {
        std::copy(raw + (size_t)r * stride, raw + (size_t)r * stride + n_vis, &run_.scores[off]);
        if (zero_row_tails) std::fill(&run_.scores[off] + n_vis, &run_.scores[off] + T_, 0.0f);
      }
    }
  }
  void on_layer(const LayerRecord& rec) override {
    const int l = rec.layer;
    for (int h = 0; h < c_.n_heads; ++h)
      for (int i = 0; i < rec.n_tokens; ++i) {
        const int pos = rec.pos0 + i;
        const float* m = rec.metrics + ((size_t)h * rec.n_tokens + i) * kNumRowMetrics;
        std::copy(m, m + kNumRowMetrics, &run_.metrics[(((size_t)l * c_.n_heads + h) * T_ + pos) * kNumRowMetrics]);
        run_.row_scale[((size_t)l * c_.n_heads + h) * T_ + pos] = rec.row_scale[(size_t)h * rec.n_tokens + i];
      }
    if (rec.tau)
      for (int i = 0; i < rec.n_tokens; ++i) run_.tau[(size_t)l * T_ + rec.pos0 + i] = rec.tau[i];
    if (progress_) progress_(l + 1, c_.n_layers);
  }
  bool cancelled() const override { return cancelled_ && cancelled_(); }

 private:
  RunCapture& run_;
  const ModelConfig& c_;
  int T_;
  bool store_rows_;
  std::function<void(int, int)> progress_;
  std::function<bool()> cancelled_;
  std::vector<int> lmap_, hmap_, qmap_;
  std::vector<std::vector<int>> targets_;  // [T] induction targets per row; empty: not wanted
  Comparison* cmp_ = nullptr;              // want_lockstep: the selection compared, and where KL / JS go
  RunCapture* held_ = nullptr;             // run a's rows of the layer being run, [1, Hc, Qc, T]
  bool holding_ = false;                   // this run is a (fills held_), else b (compares with it)
  std::vector<int> cl_, ch_, cq_;          // model layer / head / query -> index in cmp_'s selection, -1: not compared
  RunCapture* next_run_ = nullptr;         // want_next_tokens: the run whose next-token arrays fill
  int next_k_ = 0;                         // ... its K (0: not wanted)
  std::vector<int32_t> next_targets_;      // [T] token i + 1 for row i, -1 for the last
};

// The (layer, head, query) rows two runs both select, in run a's order, as compare_runs compares them.
std::vector<int> common(const std::vector<int>& x, const std::vector<int>& y) {
  std::vector<int> r;
  for (int v : x)
    if (std::find(y.begin(), y.end(), v) != y.end()) r.push_back(v);
  return r;
}

// A run with its arrays sized for T tokens and zeroed (the request's shape). recycle (or null): an unneeded run
// whose buffers are taken, so their pages need no fresh zeroing; its probabilities and scores keep stale values,
// which the observer then overwrites row by row, tails included (CaptureObserver::zero_row_tails), while every
// other array is filled as for a fresh run.
RunCapture empty_run(const ModelConfig& c, int T, const TempSpec& spec, const CaptureRequest& req,
                     const std::string& name, RunCapture* recycle = nullptr) {
  RunCapture run;
  if (recycle) {
    run.probs = std::move(recycle->probs);
    run.scores = std::move(recycle->scores);
    run.metrics = std::move(recycle->metrics);
    run.row_scale = std::move(recycle->row_scale);
    run.tau = std::move(recycle->tau);
    run.induction = std::move(recycle->induction);
    *recycle = RunCapture();
  }
  run.name = name;
  run.temp_spec_json = spec.to_json();
  run.layers = resolve(req.layers, c.n_layers);
  run.heads = resolve(req.heads, c.n_heads);
  run.queries = resolve(req.queries, T);
  run.topk_mass_k = req.run.topk_mass_k;
  const size_t rows = run.layers.size() * run.heads.size() * run.queries.size() * (size_t)T;
  auto size_rows = [&](std::vector<float>& v, bool stored) {
    if (!stored)
      v.clear();
    else if (recycle)
      v.resize(rows);  // stale values: every stored row is written whole
    else
      v.assign(rows, 0.0f);
  };
  size_rows(run.probs, req.store_probs);
  size_rows(run.scores, req.store_scores);
  run.metrics.assign((size_t)c.n_layers * c.n_heads * T * kNumRowMetrics, 0.0f);
  run.row_scale.assign((size_t)c.n_layers * c.n_heads * T, 0.0f);
  if (spec.mode == AttnMode::kLearned)
    run.tau.assign((size_t)c.n_layers * T, 0.0f);
  else
    run.tau.clear();
  if (req.induction)
    run.induction.assign((size_t)c.n_layers * c.n_heads * T, std::numeric_limits<float>::quiet_NaN());
  else
    run.induction.clear();
  return run;
}

// The display text of each top-k id, so that the capture shows text without its model (none without a tokenizer).
void fill_topk_pieces(RunCapture& run, const Model& model) {
  run.topk_pieces.clear();
  const Tokenizer* tok = model.tokenizer();
  if (!tok) return;
  run.topk_pieces.reserve(run.topk_ids.size());
  for (int32_t id : run.topk_ids) run.topk_pieces.push_back(tok->display(id));
}

}  // namespace

double head_metric_mean(const RunCapture& run, int n_heads, int T, int layer, int head, int metric) {
  double acc = 0.0;
  int cnt = 0;
  for (int i = (T > 1 ? 1 : 0); i < T; ++i) {
    const float v = run.metrics[(((size_t)layer * n_heads + head) * T + i) * kNumRowMetrics + metric];
    if (!std::isnan(v)) {
      acc += v;
      ++cnt;
    }
  }
  return cnt ? acc / cnt : std::numeric_limits<double>::quiet_NaN();
}

double head_induction_score(const RunCapture& run, int n_heads, int T, int layer, int head) {
  if (run.induction.size() < (size_t)(layer + 1) * n_heads * T) return std::numeric_limits<double>::quiet_NaN();
  double acc = 0.0;
  int cnt = 0;
  for (int i = 0; i < T; ++i) {
    const float v = run.induction[((size_t)layer * n_heads + head) * T + i];
    if (!std::isnan(v)) acc += v, ++cnt;
  }
  return cnt ? acc / cnt : std::numeric_limits<double>::quiet_NaN();
}

namespace {
// Mean of token_nll over positions [lo, hi); NaN when the range is empty.
double mean_nll(const RunCapture& run, int lo, int hi) {
  if (hi <= lo) return std::numeric_limits<double>::quiet_NaN();
  double nll = 0.0;
  for (int i = lo; i < hi; ++i) nll += run.token_nll[i];
  return nll / (double)(hi - lo);
}
}  // namespace

double prompt_loss(const RunCapture& run, int n_prompt) {
  const int T = (int)run.token_nll.size();
  const int end = n_prompt > 0 && n_prompt < T ? n_prompt : T;  // the prompt's tokens 0..end-1
  return mean_nll(run, 0, end - 1);
}

double generated_loss(const RunCapture& run, int n_prompt) {
  const int T = (int)run.token_nll.size();
  if (n_prompt <= 0 || n_prompt >= T) return std::numeric_limits<double>::quiet_NaN();
  return mean_nll(run, n_prompt - 1, T - 1);
}

size_t stored_row_offset(const RunCapture& run, size_t li, size_t hi, size_t qi, int T) {
  return ((li * run.heads.size() + hi) * run.queries.size() + qi) * (size_t)T;
}

std::ptrdiff_t find_stored_row(const RunCapture& run, int layer, int head, int query, int T) {
  auto pos = [](const std::vector<int>& v, int x) { return (size_t)(std::find(v.begin(), v.end(), x) - v.begin()); };
  const size_t li = pos(run.layers, layer), hi = pos(run.heads, head), qi = pos(run.queries, query);
  if (li == run.layers.size() || hi == run.heads.size() || qi == run.queries.size()) return -1;
  return (std::ptrdiff_t)stored_row_offset(run, li, hi, qi, T);
}

size_t estimate_capture_bytes(const ModelConfig& c, int T, const CaptureRequest& req) {
  const size_t Lc = req.layers.empty() ? c.n_layers : req.layers.size();
  const size_t Hc = req.heads.empty() ? c.n_heads : req.heads.size();
  const size_t Qc = req.queries.empty() ? T : req.queries.size();
  const size_t rows = Lc * Hc * Qc * (size_t)T * sizeof(float);
  size_t b = 0;
  if (req.store_probs) b += rows;
  if (req.store_scores) b += rows;
  b += (size_t)c.n_layers * c.n_heads * T * (kNumRowMetrics + 1) * sizeof(float);  // metrics + row_scale
  b += (size_t)c.n_layers * T * sizeof(float);                                     // tau
  // logits, a block of rows on the backend, and its rows' next-token statistics (Backend::next_token_rows)
  b += (size_t)std::min(T, 256) * ((size_t)c.vocab_size + 2 * (size_t)std::max(req.topk_tokens, 0) + 2) * sizeof(float);
  // forward working memory: KV cache (one layer's: captures run prefill-only sessions), activations, attention
  // scratch per thread
  b += 2 * (size_t)c.n_kv_heads * T * c.d_head * sizeof(float);
  b += (size_t)T * (3 * c.hidden + 2 * c.n_heads * c.d_head + 2 * c.n_kv_heads * c.d_head) * sizeof(float);
  b += (size_t)std::min(T, kForwardMlpRows) * 2 * c.intermediate * sizeof(float);  // the MLP's row passes
  b += (size_t)omp_get_max_threads() * 2 * 32 * T * sizeof(float);
  return b;
}

size_t capture_held_row_bytes(const ModelConfig& c, int T, const CaptureRequest& req) {
  const size_t Hc = req.heads.empty() ? c.n_heads : req.heads.size();
  const size_t Qc = req.queries.empty() ? T : req.queries.size();
  return Hc * Qc * (size_t)T * sizeof(float);
}

void validate_capture_request(const ModelConfig& c, int T, const CaptureRequest& req, int n_runs) {
  if (T <= 0) throw Error("prompt", "the prompt is empty (0 tokens): give it some text");
  (void)context_length_warning(c, T);  // past the context: a rotary model runs (warned), a learned table refuses
  check_range(req.layers, c.n_layers, "layers", "layer", "the model has layers");
  check_range(req.heads, c.n_heads, "heads", "head", "the model has heads");
  check_range(req.queries, T, "queries", "query position", "the prompt has positions");
  if (req.topk_tokens < 1 || req.topk_tokens > c.vocab_size)
    throw Error("topk_tokens", "topk_tokens = " + std::to_string(req.topk_tokens) + " must be in 1.." +
                                   std::to_string(c.vocab_size) + " (the vocabulary size)");
  if (req.run.topk_mass_k < 1 || req.run.topk_mass_k > 64)
    throw Error("topk_mass_k", "topk_mass_k = " + std::to_string(req.run.topk_mass_k) + " must be in 1..64");
  for (int32_t r : req.run.relevant) {
    if (r >= T)
      throw Error("relevant", "relevant position " + std::to_string(r) + " ≥ T = " + std::to_string(T) +
                                  " (the prompt's positions are 0.." + std::to_string(T - 1) + ")");
    if (r < 0) throw Error("relevant", "relevant position " + std::to_string(r) + " < 0");
  }
  check_range(std::vector<int>(req.run.relevant.begin(), req.run.relevant.end()), T, "relevant", "key position",
              "the prompt has positions");
  const size_t need = estimate_capture_bytes(c, T, req) * (size_t)std::max(1, n_runs);
  if (need > req.budget_bytes)
    throw Error("budget_bytes", "the capture needs about " + format_byte_size(need) + ", over the memory budget of " +
                                    format_byte_size(req.budget_bytes) +
                                    ": narrow the layers, heads or queries stored, store metrics only (no "
                                    "probabilities or scores), or raise the budget");
}

RunCapture capture_run(const Model& model, const std::vector<int32_t>& tokens, const TempSpec& spec,
                       const CaptureRequest& req, const std::string& name,
                       const std::function<void(int, int)>& progress) {
  RunCapture run;
  capture_run_cancellable(model, tokens, spec, req, name, &run, {}, progress);
  return run;
}

namespace {

// The setup of one capture run: its arrays, its observer (metrics, rows, induction, next tokens) and the forward's
// options.
struct RunSetup {
  RunCapture run;
  std::unique_ptr<CaptureObserver> obs;
  RunOptions opt;
};

std::unique_ptr<RunSetup> setup_run(const Model& model, const std::vector<int32_t>& tokens, const TempSpec& spec,
                                    const CaptureRequest& req, const std::string& name,
                                    const std::function<bool()>& cancelled,
                                    const std::function<void(int, int)>& progress) {
  const ModelConfig& c = model.config();
  const int T = (int)tokens.size();
  auto s = std::make_unique<RunSetup>();
  s->run = empty_run(c, T, spec, req, name);
  s->obs = std::make_unique<CaptureObserver>(s->run, c, T, req.store_probs || req.store_scores, progress, cancelled);
  if (req.induction) s->obs->want_induction(tokens);
  s->obs->want_next_tokens(s->run, tokens, req.topk_tokens);
  s->opt = req.run;
  s->opt.probs_fp16 = req.probs_fp16 && req.store_probs;  // the file keeps fp16: the backend may hand over 16 bits
  return s;
}

}  // namespace

bool capture_run_cancellable(const Model& model, const std::vector<int32_t>& tokens, const TempSpec& spec,
                             const CaptureRequest& req, const std::string& name, RunCapture* out,
                             const std::function<bool()>& cancelled, const std::function<void(int, int)>& progress) {
  const int T = (int)tokens.size();
  validate_capture_request(model.config(), T, req, 1);
  spec.validate(model.config());
  auto s = setup_run(model, tokens, spec, req, name, cancelled, progress);
  Session session(model, T, /*prefill_only=*/true);
  if (!session.forward(tokens.data(), T, spec, s->opt, s->obs.get(), nullptr)) return false;
  fill_topk_pieces(s->run, model);
  *out = std::move(s->run);
  return true;
}

bool capture_runs_lockstep(const Model& model, const std::vector<int32_t>& tokens, const TempSpec& spec_a,
                           const std::string& name_a, const TempSpec& spec_b, const std::string& name_b,
                           const CaptureRequest& req, RunCapture* a_out, RunCapture* b_out, Comparison* cmp,
                           const std::function<bool()>& cancelled, const std::function<void(int, int)>& progress) {
  const ModelConfig& c = model.config();
  const int T = (int)tokens.size(), L = c.n_layers;
  validate_capture_request(c, T, req, 2);
  const size_t held = capture_held_row_bytes(c, T, req);
  if (2 * estimate_capture_bytes(c, T, req) + held > req.budget_bytes)
    throw Error("budget_bytes", "the comparison holds one layer's compared rows of the first run (about " +
                                    format_byte_size(held) + ") beside the two runs, over the memory budget of " +
                                    format_byte_size(req.budget_bytes) +
                                    ": narrow the heads or queries, or raise the budget");
  spec_a.validate(c);
  spec_b.validate(c);
  std::function<void(int, int)> prog_a, prog_b;  // one count over both runs: a's layer l, then b's
  if (progress) {
    prog_a = [&progress](int d, int t) { progress(2 * d - 1, 2 * t); };
    prog_b = [&progress](int d, int t) { progress(2 * d, 2 * t); };
  }
  auto a = setup_run(model, tokens, spec_a, req, name_a, cancelled, prog_a);
  auto b = setup_run(model, tokens, spec_b, req, name_b, cancelled, prog_b);
  Comparison rows;
  rows.run_a = name_a;
  rows.run_b = name_b;
  rows.layers = a->run.layers;
  rows.heads = a->run.heads;
  rows.queries = a->run.queries;
  const size_t n = rows.layers.size() * rows.heads.size() * rows.queries.size();
  rows.kl.assign(n, 0.0f);
  rows.js.assign(n, 0.0f);
  RunCapture hold;  // a's compared rows of the layer being run: [1, Hc, Qc, T]
  hold.name = name_a;
  hold.layers = {0};
  hold.heads = rows.heads;
  hold.queries = rows.queries;
  hold.probs.assign(rows.heads.size() * rows.queries.size() * (size_t)T, 0.0f);
  a->obs->want_lockstep(&rows, &hold, true);
  b->obs->want_lockstep(&rows, &hold, false);
  a->opt.probs_fp16 = b->opt.probs_fp16 = false;  // KL / JS from the fp32 rows
  Session sa(model, T, /*prefill_only=*/true), sb(model, T, /*prefill_only=*/true);
  for (int l = 0; l < L; ++l) {  // b's layer l compares its rows with a's of the same layer, held until then
    if (!sa.forward_until(tokens.data(), T, spec_a, a->opt, a->obs.get(), l, nullptr)) return false;
    if (!sb.forward_until(tokens.data(), T, spec_b, b->opt, b->obs.get(), l, nullptr)) return false;
  }
  fill_topk_pieces(a->run, model);
  fill_topk_pieces(b->run, model);
  *a_out = std::move(a->run);
  *b_out = std::move(b->run);
  *cmp = std::move(rows);
  return true;
}

CaptureFile make_capture_file(const Model& model, const std::vector<int32_t>& tokens) {
  CaptureFile f;
  const ModelConfig& c = model.config();
  f.model_path = model.recorded_path();
  f.model_config_json = c.source_json;
  f.weights_checksum = model.weights_checksum();
  f.device = device_name(model.device());
  f.precision = precision_name(model.precision());
  f.tokenizer = model.tokenizer() ? model.tokenizer()->source : std::string();
  f.warnings = run_warnings(c, (int)tokens.size());
  f.tool_version = version();
  f.n_layers = c.n_layers;
  f.n_heads = c.n_heads;
  f.d_head = c.d_head;
  f.token_ids = tokens;
  for (int32_t id : tokens) f.pieces.push_back(model.tokenizer() ? model.tokenizer()->display(id) : std::to_string(id));
  return f;
}

SweepFile run_sweep(const Model& model, const std::vector<int32_t>& tokens, const TempSpec& base_in,
                    const std::vector<float>& temps, const RunOptions& run_opt,
                    const std::function<void(size_t)>& on_temp, const std::function<bool()>& cancelled) {
  const ModelConfig& c = model.config();
  const int T = (int)tokens.size();
  if (temps.empty()) throw Error("temps", "sweep: no temperatures given (temps is empty)");
  for (size_t i = 0; i < temps.size(); ++i)
    if (!temp_in_range(temps[i]))
      throw Error("temps", "temps[" + std::to_string(i) + "] = " + short_number(temps[i]) + ": every temperature " +
                               kTempRangeText);
  // The sweep runs focal attention at each t: a learned or ssmax setting's own number would be dropped without a
  // word, and overrides on every head leave t nothing to change (each t gave the same numbers under its own label).
  const std::string file =  // a temperature file of focal calibrate, named in the messages below
      base_in.temp_file.empty() ? "" : " (the temperature file '" + base_in.temp_file + "')";
  // A tau-proj file's projections set tau per token (learned attention); a front end that set the mode to focal
  // for the sweep would drop them without a word while the file recorded the setting as swept.
  if (base_in.tau_proj)
    throw Error("spec", "the sweep's base setting" + file +
                            " is learned attention (a tau-proj file's projections set tau per token); a sweep runs "
                            "focal attention at each t: give a model-granularity temperature file or none");
  if (base_in.mode == AttnMode::kLearned || base_in.mode == AttnMode::kSsmax)
    throw Error("spec", std::string("the sweep's base setting is ") + attn_mode_name(base_in.mode) + file +
                            "; a sweep runs focal attention at each t (give a focal or standard setting)");
  bool every_head_fixed = true;
  for (int l = 0; l < c.n_layers && every_head_fixed; ++l)
    for (int h = 0; h < c.n_heads && every_head_fixed; ++h)
      every_head_fixed = base_in.layer_temp.count(l) > 0 || base_in.head_temp.count({l, h}) > 0;
  if (every_head_fixed)
    throw Error("spec", "the sweep's base setting" + file +
                            " gives every layer or head its own t (its overrides), so the swept t would change "
                            "nothing; " +
                            (file.empty() ? "leave some layers or heads to the swept t"
                                          : "a sweep varies t itself, so a temperature file adds nothing to it: "
                                            "leave --temp out (or give it overrides, +L=T, on a focal setting)"));
  TempSpec base = base_in;
  base.mode = AttnMode::kFocal;
  CaptureRequest req;
  req.store_probs = req.store_scores = false;
  req.run = run_opt;
  validate_capture_request(c, T, req, 1);

  SweepFile sf;
  sf.model_path = model.recorded_path();
  sf.model_config_json = c.source_json;
  sf.tool_version = version();
  sf.weights_checksum = model.weights_checksum();
  sf.device = device_name(model.device());
  sf.precision = precision_name(model.precision());
  sf.tokenizer = model.tokenizer() ? model.tokenizer()->source : std::string();
  sf.warnings = run_warnings(c, T);
  sf.base_spec_json = base.to_json();
  sf.relevant = run_opt.relevant;
  sf.n_layers = c.n_layers;
  sf.n_heads = c.n_heads;
  sf.token_ids = tokens;
  sf.focal_temps = temps;
  const size_t per = (size_t)c.n_layers * c.n_heads * kNumRowMetrics;
  sf.head_metrics.assign(temps.size() * per, 0.0f);
  for (size_t s = 0; s < temps.size(); ++s) {
    TempSpec spec = base;
    spec.focal_temp = temps[s];
    RunCapture run;
    if (!capture_run_cancellable(model, tokens, spec, req, spec.label(), &run, cancelled))
      throw Error("sweep: cancelled at t = " + std::to_string(temps[s]));
    sf.mean_nll.push_back((float)prompt_loss(run));
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_heads; ++h)
        for (int m = 0; m < kNumRowMetrics; ++m)
          sf.head_metrics[s * per + ((size_t)l * c.n_heads + h) * kNumRowMetrics + m] =
              (float)head_metric_mean(run, c.n_heads, T, l, h, m);
    if (on_temp) on_temp(s);
  }
  return sf;
}

size_t generation_capture_tokens(const ModelConfig& c, size_t n_tokens, std::string* note) {
  if (note) note->clear();
  if (c.arch.position != PositionKind::kLearned || n_tokens <= (size_t)c.max_positions) return n_tokens;
  if (note)
    *note = "the capture holds the first " + std::to_string(c.max_positions) + " of the " + std::to_string(n_tokens) +
            " tokens: the last generated token was predicted at the learned position table's last position and has "
            "no position of its own";
  return (size_t)c.max_positions;
}

// "0-3,5,7-9" of sorted indices.
static std::string ranges_text(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(v[i]) + (j > i ? "-" + std::to_string(v[j]) : "");
    i = j + 1;
  }
  return s;
}

ComparisonMeans comparison_means(const Comparison& cmp) {
  ComparisonMeans m;
  const size_t Qc = cmp.queries.size();
  if (Qc == 0 || cmp.kl.empty() || cmp.js.size() != cmp.kl.size()) return m;
  const bool has_query0 = cmp.queries[0] == 0;
  std::vector<int> queries(cmp.queries.begin() + (has_query0 ? 1 : 0), cmp.queries.end());
  m.rows = "layers " + ranges_text(cmp.layers) + " \xC3\x97 heads " + ranges_text(cmp.heads) + " \xC3\x97 queries " +
           (queries.empty() ? std::string("none past 0") : ranges_text(queries));
  double kl = 0, js = 0;
  for (size_t i = 0; i < cmp.kl.size(); ++i) {
    if (has_query0 && i % Qc == 0) continue;
    kl += cmp.kl[i];
    js += cmp.js[i];
    ++m.n_rows;
  }
  if (m.n_rows == 0) return m;
  m.kl = kl / (double)m.n_rows;
  m.js = js / (double)m.n_rows;
  return m;
}

Comparison compare_runs(const CaptureFile& file, const std::string& a_name, const std::string& b_name,
                        const std::function<void(int, int)>& progress) {
  const RunCapture* a = file.find_run(a_name);
  const RunCapture* b = file.find_run(b_name);
  if (!a) throw Error("compare: run '" + a_name + "' is not in the capture");
  if (!b) throw Error("compare: run '" + b_name + "' is not in the capture");
  if (a->probs.empty() || b->probs.empty())
    throw Error("compare: runs '" + a_name + "' and '" + b_name + "' must both store probabilities");
  Comparison cmp;
  cmp.run_a = a_name;
  cmp.run_b = b_name;
  cmp.layers = common(a->layers, b->layers);
  cmp.heads = common(a->heads, b->heads);
  cmp.queries = common(a->queries, b->queries);
  if (cmp.layers.empty() || cmp.heads.empty() || cmp.queries.empty())
    throw Error("compare: runs '" + a_name + "' and '" + b_name + "' share no captured (layer, head, query) rows");
  const int T = file.n_tokens();
  auto row = [&](const RunCapture& r, int l, int h, int q) { return r.probs.data() + find_stored_row(r, l, h, q, T); };
  // Rows read from an fp16 capture (every value an fp16 value): a 0 there stands for anything below 2^-25, and KL's
  // floor is that (FLT_MIN overstated each such term ~70-fold).
  auto fp16_values = [](const std::vector<float>& v) {
    for (float x : v)
      if (x != math::round_to_half(x)) return false;
    return true;
  };
  const float q_floor = fp16_values(b->probs) ? kFp16ProbFloor : std::numeric_limits<float>::min();
  int done = 0;
  for (int l : cmp.layers) {
    for (int h : cmp.heads)
      for (int q : cmp.queries) {
        const float* pa = row(*a, l, h, q);
        const float* pb = row(*b, l, h, q);
        cmp.kl.push_back((float)kl_divergence(pa, pb, q + 1, q_floor));
        cmp.js.push_back((float)js_divergence(pa, pb, q + 1));
      }
    if (progress) progress(++done, (int)cmp.layers.size());
  }
  return cmp;
}

struct LiveRunner::Impl {
  const Model& model;
  std::unique_ptr<Session> session;
  std::vector<int32_t> tokens;  // of the last completed run
  TempSpec spec;
  CaptureRequest req;
  bool valid = false;
};

CaptureRequest live_capture_request(const ModelConfig& c, Device device, int n_tokens, int layer, int head,
                                    const LiveRowsPolicy& policy) {
  CaptureRequest req;
  req.layers = {layer};
  const size_t layer_rows = (size_t)std::max(1, c.n_heads) * (size_t)n_tokens * (size_t)n_tokens * sizeof(float);
  if (layer_rows > policy.layer_rows_bytes_on(device)) req.heads = {head};
  req.store_scores = true;
  req.store_probs = n_tokens <= policy.max_store_tokens;
  req.induction = device == Device::kCpu;
  req.budget_bytes = size_t(8) << 30;
  return req;
}

LiveRunner::LiveRunner(const Model& model) : impl_(new Impl{model, nullptr, {}, {}, {}, false}) {}
LiveRunner::~LiveRunner() = default;
const Model& LiveRunner::model() const { return impl_->model; }

bool LiveRunner::run(const std::vector<int32_t>& tokens, const TempSpec& spec, const CaptureRequest& req,
                     const std::string& name, const RunCapture* prev, RunCapture* out,
                     const std::function<bool()>& cancelled, const std::function<void(int, int)>& progress,
                     int* first_layer_run, RunCapture* recycle, int* last_layer_run) {
  Impl& m = *impl_;
  const ModelConfig& c = m.model.config();
  const int T = (int)tokens.size();
  validate_capture_request(c, T, req, 1);
  spec.validate(c);
  if (!m.session || m.session->max_tokens() < T) {
    m.session = std::make_unique<Session>(m.model, T, /*prefill_only=*/true);
    m.session->keep_layer_inputs(true, kLiveKeptInputBytes);
    m.valid = false;
  }
  // Layers before `first` give the same results as the last run: same tokens, same multipliers, and none of them
  // is newly stored.
  int first = 0, last = c.n_layers - 1;
  const bool same_rows = prev && req.layers == m.req.layers && req.heads == m.req.heads &&
                         req.queries == m.req.queries && req.store_probs == m.req.store_probs &&
                         req.store_scores == m.req.store_scores;
  if (m.valid && prev && tokens == m.tokens && req.run.topk_mass_k == m.req.run.topk_mass_k &&
      req.run.relevant == m.req.run.relevant && req.topk_tokens == m.req.topk_tokens && spec.mode == m.spec.mode &&
      req.induction == m.req.induction) {
    first = spec.first_changed_layer(m.spec, c);
    const bool same_spec = first >= c.n_layers;
    if (!same_rows) {
      int stored_last = 0;
      for (int l : resolve(req.layers, c.n_layers)) {
        first = std::min(first, l);
        stored_last = std::max(stored_last, l);
      }
      // The same setting, other rows (the app's head or layer switch): the layers after the stored ones give the
      // previous run's records again, so the run stops after the last stored layer and copies the rest.
      if (same_spec) last = stored_last;
    }
    first = std::min(first, c.n_layers);
    // A cancelled run since then (a slider still moving) re-ran layers from some F on: only 0..F are as prev has
    // them. m.valid stays: prev is still the last completed run.
    first = std::min(first, m.session->kept_layers());
    // Past the kept-input budget only every few layers' inputs are kept: start at the kept one at or below.
    if (first > 0) first = m.session->rerun_start(first);
  }
  if (recycle == prev || recycle == out) recycle = nullptr;
  RunCapture run = empty_run(c, T, spec, req, name, recycle);
  // The records (metrics, row scales, tau, induction) of layers l0 .. l1 - 1, as the previous run has them.
  const auto copy_layer_records = [&](int l0, int l1) {
    const size_t per_layer = (size_t)c.n_heads * T, a = l0 * per_layer, b = l1 * per_layer;
    std::copy(prev->metrics.begin() + a * kNumRowMetrics, prev->metrics.begin() + b * kNumRowMetrics,
              run.metrics.begin() + a * kNumRowMetrics);
    std::copy(prev->row_scale.begin() + a, prev->row_scale.begin() + b, run.row_scale.begin() + a);
    if (!run.tau.empty() && prev->tau.size() == run.tau.size())
      std::copy(prev->tau.begin() + (size_t)l0 * T, prev->tau.begin() + (size_t)l1 * T,
                run.tau.begin() + (size_t)l0 * T);
    if (!run.induction.empty() && prev->induction.size() == run.induction.size())
      std::copy(prev->induction.begin() + a, prev->induction.begin() + b, run.induction.begin() + a);
  };
  if (first > 0) {  // the unchanged layers before the re-run
    copy_layer_records(0, std::min(first, c.n_layers));
    const size_t per_stored = run.heads.size() * run.queries.size() * (size_t)T;
    for (size_t li = 0; li < run.layers.size(); ++li)
      if (run.layers[li] < first) {
        if (!run.probs.empty())
          std::copy(prev->probs.begin() + li * per_stored, prev->probs.begin() + (li + 1) * per_stored,
                    run.probs.begin() + li * per_stored);
        if (!run.scores.empty())
          std::copy(prev->scores.begin() + li * per_stored, prev->scores.begin() + (li + 1) * per_stored,
                    run.scores.begin() + li * per_stored);
      }
  }
  CaptureObserver obs(run, c, T, req.store_probs || req.store_scores, progress, cancelled);
  if (req.induction) obs.want_induction(tokens);
  obs.want_next_tokens(run, tokens, req.topk_tokens);
  obs.zero_row_tails = recycle != nullptr;
  if (last < c.n_layers - 1) {  // rows only: the records after `last`, the next-token arrays and the loss as prev's
    copy_layer_records(last + 1, c.n_layers);
    run.topk_ids = prev->topk_ids;
    run.topk_probs = prev->topk_probs;
    run.token_nll = prev->token_nll;
  }
  bool done;
  if (last < c.n_layers - 1) {
    done = m.session->rerun_layers(first, last, tokens.data(), T, spec, req.run, &obs);
  } else if (first > 0) {
    done = m.session->rerun_from(first, tokens.data(), T, spec, req.run, &obs, nullptr);
  } else {
    m.session->reset();
    done = m.session->forward(tokens.data(), T, spec, req.run, &obs, nullptr);
  }
  if (!done) return false;
  m.tokens = tokens;
  m.spec = spec;
  m.req = req;
  m.valid = true;
  if (first_layer_run) *first_layer_run = std::min(first, c.n_layers - 1);
  if (last_layer_run) *last_layer_run = last;
  fill_topk_pieces(run, m.model);
  *out = std::move(run);
  return true;
}

}  // namespace focal
