// Token generation: greedy decoding through the backend's top-1, or sampling with a temperature and top-k from the
// last logits row. The forward pass itself is in forward.cpp.
#include <algorithm>
#include <cmath>
#include <random>

#include "model_internal.h"

namespace focal {

// Any of the model's end tokens (Llama 3.x Instruct: <|eot_id|> as well as <|end_of_text|>); a config made in
// memory may give eos_id alone.
static bool ends_generation(const ModelConfig& c, int32_t id) {
  if (c.eos_ids.empty()) return id == c.eos_id && id >= 0;
  return std::find(c.eos_ids.begin(), c.eos_ids.end(), id) != c.eos_ids.end();
}

namespace {

// Draws a token from softmax(logits / sample_temp) restricted to the top_k largest logits (all when top_k <= 0).
int32_t sample_token(const std::vector<float>& logits, const SampleOptions& so, std::mt19937_64& rng) {
  const int V = (int)logits.size();
  std::vector<int32_t> idx(V);  // [V] token ids, the kk most likely first
  for (int i = 0; i < V; ++i) idx[i] = i;
  const int kk = so.top_k > 0 ? std::min(so.top_k, V) : V;
  std::partial_sort(idx.begin(), idx.begin() + kk, idx.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::vector<double> p(kk);  // [kk] unnormalised probabilities
  const double mx = logits[idx[0]];
  double z = 0.0;
  for (int i = 0; i < kk; ++i) z += (p[i] = std::exp((logits[idx[i]] - mx) / so.sample_temp));
  std::uniform_real_distribution<double> u(0.0, z);
  double r = u(rng);
  int pick = kk - 1;
  for (int i = 0; i < kk; ++i) {
    if ((r -= p[i]) <= 0.0) {
      pick = i;
      break;
    }
  }
  return idx[pick];
}

// The observer of a re-run prefill (below) sees only the rows from `first_row` on: the earlier ones were reported
// when they ran.
class RowsFrom final : public ForwardObserver {
 public:
  RowsFrom(ForwardObserver* inner, int first_row) : inner_(inner), first_(first_row) {}
  bool wants_rows(int layer, int head) const override { return inner_ && inner_->wants_rows(layer, head); }
  void on_rows(int layer, int head, int row0, int n_rows, int stride, const float* probs,
               const float* scores) override {
    const int skip = std::max(0, first_ - row0);
    if (skip >= n_rows) return;
    inner_->on_rows(layer, head, row0 + skip, n_rows - skip, stride, probs ? probs + (size_t)skip * stride : nullptr,
                    scores ? scores + (size_t)skip * stride : nullptr);
  }
  bool cancelled() const override { return inner_ && inner_->cancelled(); }

 private:
  ForwardObserver* inner_;
  int first_;
};

// Phi-3's longrope: transformers (Phi3ForCausalLM.prepare_inputs_for_generation) drops the KV cache when the sequence
// first passes original_max_position_embeddings and runs it all again, every key then rotated with the long factors;
// a cache kept from before held short-factor keys (greedy text left transformers' there).
bool reruns_past_original_context(const ModelConfig& c, int n_cached) {
  return c.arch.rope.type == RopeType::kLongrope && c.arch.rope.original_max_positions > 0 &&
         n_cached == c.arch.rope.original_max_positions;
}

}  // namespace

std::vector<int32_t> generate(Session& s, const std::vector<int32_t>& prompt, int n_new, const TempSpec& spec,
                              const SampleOptions& so, const RunOptions& opt_in, ForwardObserver* obs,
                              const std::function<void(int32_t)>& on_token) {
  RunOptions opt = opt_in;
  opt.all_logits = false;
  std::vector<float> logits;
  std::vector<int32_t> out;
  std::mt19937_64 rng(so.seed);
  // Greedy decoding takes the arg-max from the backend's top-1 (the first maximum, as std::max_element), so only
  // one (id, logit) pair crosses to the host a step; sampling needs the whole row.
  const bool greedy = so.sample_temp <= 0.0f;
  LogitsTopk best;
  auto step_forward = [&](const int32_t* ids, int n) {
    return greedy ? forward_topk(s, ids, n, spec, opt, obs, &best) : s.forward(ids, n, spec, opt, obs, &logits);
  };
  if (!step_forward(prompt.data(), (int)prompt.size())) return out;
  std::vector<int32_t> seq = prompt;  // every token so far, for a re-run
  for (int step = 0; step < n_new; ++step) {
    int32_t next = 0;
    if (greedy) {
      next = best.idx[0];
    } else {
      next = sample_token(logits, so, rng);
    }
    out.push_back(next);
    if (on_token) on_token(next);
    if (so.stop_at_eos && ends_generation(s.model().config(), next)) break;
    if (step + 1 == n_new || s.n_past() >= s.max_tokens()) break;
    seq.push_back(next);
    if (reruns_past_original_context(s.model().config(), s.n_past())) {
      RowsFrom new_rows(obs, (int)seq.size() - 1);
      s.reset();
      const bool ran = greedy ? forward_topk(s, seq.data(), (int)seq.size(), spec, opt, &new_rows, &best)
                              : s.forward(seq.data(), (int)seq.size(), spec, opt, &new_rows, &logits);
      if (!ran) break;
      continue;
    }
    if (!step_forward(&next, 1)) break;
  }
  return out;
}

}  // namespace focal
