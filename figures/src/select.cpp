// Selection of runs, rows and metric means for the figures (select.h).
#include "select.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "focal/config.h"
#include "focal/error.h"
#include "focal/metrics.h"

namespace focal::figures {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

std::string run_names(const std::vector<RunRef>& all) {
  std::vector<std::string> n;
  n.reserve(all.size());
  for (const auto& r : all) n.push_back(r.label);
  return join(n);
}

}  // namespace

std::vector<RunRef> capture_runs(const std::vector<Source>& sources, const std::string& kind) {
  if (sources.empty()) throw Error("the " + kind + " figure needs a capture file (as focal capture writes them)");
  std::map<std::string, int> count;
  for (const Source& s : sources) {
    if (!s.capture)
      throw Error("the " + kind + " figure reads capture files, but '" + s.label +
                  "' is a sweep file (use the sweep figure for it)");
    for (const RunCapture& r : s.capture->runs) ++count[r.name];
  }
  std::vector<RunRef> all;
  for (const Source& s : sources)
    for (const RunCapture& r : s.capture->runs)
      all.push_back({s.capture, &r, count[r.name] > 1 ? s.label + ":" + r.name : r.name, s.label + ":" + r.name});
  if (all.empty()) {
    std::string files;
    for (const Source& s : sources) files += (files.empty() ? "'" : ", '") + s.label + "'";
    throw Error("the capture file " + files + " holds no runs: nothing to draw");
  }
  for (const RunRef& r : all)
    if (r.file->n_tokens() == 0) throw Error("run '" + r.label + "' covers no tokens: nothing to draw");
  return all;
}

std::vector<RunRef> select_runs(const std::vector<RunRef>& all, const std::vector<std::string>& names,
                                size_t default_count, size_t max_count, const std::string& kind) {
  std::vector<RunRef> out;
  if (names.empty()) {
    for (size_t i = 0; i < all.size() && i < default_count; ++i) out.push_back(all[i]);
    return out;
  }
  if (names.size() > max_count)
    throw Error("runs", "runs: the " + kind + " figure shows at most " + std::to_string(max_count) + " run" +
                            (max_count > 1 ? "s" : "") + ", " + std::to_string(names.size()) +
                            " were given (runs: " + run_names(all) + ")");
  for (const std::string& n : names) {
    const RunRef* hit = nullptr;
    int bare = 0;
    for (const RunRef& r : all) {
      if (r.label == n || r.qualified == n) hit = &r;
      if (r.run->name == n) ++bare;
    }
    if (!hit && bare == 1)
      for (const RunRef& r : all)
        if (r.run->name == n) hit = &r;
    if (!hit) {
      if (bare > 1)
        throw Error("runs",
                    "runs: several files hold a run '" + n + "'; name it as FILE:RUN (runs: " + run_names(all) + ")");
      throw Error("runs", "runs: there is no run '" + n + "' (runs: " + run_names(all) + ")");
    }
    for (const RunRef& r : out)
      if (r.run == hit->run) throw Error("runs", "runs: run '" + n + "' is listed twice");
    out.push_back(*hit);
  }
  return out;
}

std::vector<const SweepFile*> sweep_sources(const std::vector<Source>& sources) {
  if (sources.empty()) throw Error("the sweep figure needs a sweep file (as focal sweep writes them)");
  std::vector<const SweepFile*> out;
  for (const Source& s : sources) {
    if (!s.sweep)
      throw Error("the sweep figure reads sweep files, but '" + s.label +
                  "' is a capture (make one with a temperature sweep, focal sweep)");
    if (s.sweep->focal_temps.empty())
      throw Error("sweep file '" + s.label + "' holds no temperatures: nothing to draw");
    out.push_back(s.sweep);
  }
  return out;
}

std::string index_list_text(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(v[i]);
    if (j > i) s += (j == i + 1 ? "," : "-") + std::to_string(v[j]);
    i = j + 1;
  }
  return s.empty() ? "none" : s;
}

std::string indices_text(const std::string& noun, const std::vector<int>& v) {
  return (v.size() == 1 ? noun : noun + "s") + " " + index_list_text(v);
}

int stored_index(const std::vector<int>& list, int value, const std::string& option, const std::string& what,
                 const RunRef& run) {
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i] == value) return (int)i;
  const std::string plural = what == "query" ? "queries" : what + "s";
  throw Error(option, option + " " + std::to_string(value) + ": " + what + " " + std::to_string(value) +
                          " is not stored in run '" + run.label + "' (stored " + plural + ": " + index_list_text(list) +
                          ")");
}

void require_rows(const RunRef& r, const std::string& kind) {
  if (r.run->probs.empty() && r.run->scores.empty())
    throw Error("run '" + r.label +
                "' stores no attention rows (captured with store_probs and store_scores off), but the " + kind +
                " figure draws them: capture again storing probabilities or raw scores (the entropy figure works from "
                "metrics)");
  if (r.run->layers.empty() || r.run->heads.empty() || r.run->queries.empty())
    throw Error("run '" + r.label + "' stores no attention rows (its layer, head or query selection is empty)");
}

std::vector<double> attention_row(const RunRef& r, int a, int b, int c) {
  require_rows(r, "attention");
  const RunCapture& run = *r.run;
  const size_t T = (size_t)r.file->n_tokens();
  const int q = run.queries[c];
  const size_t off = stored_row_offset(run, (size_t)a, (size_t)b, (size_t)c, (int)T);
  std::vector<double> p((size_t)q + 1);
  if (!run.probs.empty()) {
    for (int j = 0; j <= q; ++j) p[j] = run.probs[off + j];
    return p;
  }
  const int layer = run.layers[a], head = run.heads[b];
  const float scale = run.row_scale[((size_t)layer * r.file->n_heads + head) * T + q];
  std::vector<float> pf((size_t)q + 1);
  // A soft-capped or windowed model (its config travels in the capture): the forward's own row function.
  ModelConfig cfg;
  bool have_cfg = false;
  try {
    cfg = parse_config(r.file->model_config_json, "capture model config");
    have_cfg = true;
  } catch (const Error&) {  // no or foreign config: plain softmax of the scaled scores
  }
  const int lo = have_cfg ? window_first_key(cfg, layer, q + 1) : 0;
  if (have_cfg && (cfg.arch.attn_softcap > 0.0f || lo > 0))
    focal::attention_row(&run.scores[off], q + 1, scale, cfg.arch.attn_softcap, lo, pf.data());
  else
    softmax_scaled(&run.scores[off], q + 1, scale, pf.data());
  for (int j = 0; j <= q; ++j) p[j] = pf[j];
  return p;
}

std::vector<double> drop_sink(const std::vector<double>& p) {
  if (p.size() <= 1) return {};
  double rest = 0;
  for (size_t j = 1; j < p.size(); ++j) rest += p[j];
  std::vector<double> out(p.begin() + 1, p.end());
  for (double& v : out) v = rest > 0 ? v / rest : 0.0;
  return out;
}

int parse_metric(const std::string& name, bool allow_loss) {
  for (int m = 0; m < kNumRowMetrics; ++m)
    if (name == row_metric_name(m)) return m;
  if (allow_loss && name == "loss") return -1;
  std::string names;
  for (int m = 0; m < kNumRowMetrics; ++m) names += (m ? ", " : "") + std::string(row_metric_name(m));
  if (allow_loss) names += ", loss";
  throw Error("metric", "metric: unknown metric '" + name + "' (metrics: " + names + ")");
}

std::string metric_title(int metric, int topk_k) {
  switch (metric) {
    case kEntropyNats: return "Entropy (nats)";
    case kEntropyNorm: return "Normalised entropy H / ln n";
    case kEffSupport: return "Effective support exp(H)";
    case kMaxProb: return "Max probability";
    case kTopkMass: return topk_k > 0 ? "Top-" + std::to_string(topk_k) + " mass" : "Top-k mass";
    case kTailMass: return "Tail mass (below 1/n)";
    case kSinkMass: return "Sink mass (first token)";
    case kRelevantMass: return "Relevant mass";
    default: return "Prompt loss (nats/token)";
  }
}

std::string metric_noun(int metric) {
  switch (metric) {
    case kEntropyNats: return "attention entropy";
    case kEntropyNorm: return "normalised entropy";
    case kEffSupport: return "effective support";
    case kMaxProb: return "max probability";
    case kTopkMass: return "top-k mass";
    case kTailMass: return "tail mass";
    case kSinkMass: return "sink mass";
    case kRelevantMass: return "relevant mass";
    default: return "prompt loss";
  }
}

std::vector<double> head_means(const RunRef& r, int metric) {
  const int L = r.file->n_layers, H = r.file->n_heads, T = r.file->n_tokens();
  std::vector<double> out((size_t)L * H, NAN);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) out[(size_t)l * H + h] = head_metric_mean(*r.run, H, T, l, h, metric);
  return out;
}

std::vector<double> layer_means(const RunRef& r, int metric) {
  const int L = r.file->n_layers, H = r.file->n_heads;
  const std::vector<double> hm = head_means(r, metric);
  std::vector<double> out(L, NAN);
  for (int l = 0; l < L; ++l) {
    double s = 0;
    int n = 0;
    for (int h = 0; h < H; ++h)
      if (!std::isnan(hm[(size_t)l * H + h])) s += hm[(size_t)l * H + h], ++n;
    if (n) out[l] = s / n;
  }
  return out;
}

void require_values(const std::vector<double>& v, int metric, const std::string& where) {
  for (double x : v)
    if (!std::isnan(x)) return;
  std::string hint;
  if (metric == kRelevantMass) hint = " (relevant_mass needs relevant keys: capture with relevant key positions)";
  throw Error("metric", "metric " + std::string(metric >= 0 ? row_metric_name(metric) : "loss") + ": " + where +
                            " has no values of this metric" + hint);
}

std::vector<int> pick_indices(const std::vector<int>& want, int n, const std::string& what, const std::string& source) {
  std::vector<int> v((size_t)n);
  std::iota(v.begin(), v.end(), 0);
  if (want.empty()) return v;
  for (int i : want)
    if (i < 0 || i >= n)
      throw Error(what + "s", what + "s: " + what + " " + std::to_string(i) + " is not in " + source + " (" + what +
                                  "s: 0-" + std::to_string(n - 1) + ")");
  std::vector<int> out = want;  // in order, each once ("0,0,1" pools head 0 once)
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace focal::figures
