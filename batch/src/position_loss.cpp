// Next-token loss by position (`focal eval --positions`): runs, buckets, the forward's logits blocks folded into
// per-document bucket sums, the bootstrap over documents, and the HDF5 file.
#include "focal_batch/position_loss.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>

#include "focal/capture.h"
#include "focal/config.h"
#include "focal/device.h"
#include "focal/error.h"
#include "focal_batch/corpus.h"
#include "h5_io.h"

namespace focal::batch {

using h5::Writer;

std::vector<PositionRun> parse_position_runs(const std::string& text, const ModelConfig& cfg) {
  std::vector<PositionRun> runs;
  std::vector<std::string> sames;  // [runs] each one's setting as it runs
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) throw Error("runs", "runs '" + text + "': an empty run (give e.g. standard,focal:0.4,ssmax)");
    PositionRun r;
    r.name = item;
    const size_t at = item.find('@');
    r.spec_text = item.substr(0, at);
    if (at != std::string::npos) r.rope_scaling = item.substr(at + 1);
    if (at != std::string::npos && r.rope_scaling.empty())  // "standard@" ran as a run named so, the @ unsaid
      throw Error("runs", "runs: item '" + item + "': give a rope_scaling override after '@' (e.g. " + r.spec_text +
                              "@dynamic:2), or leave the '@' out");
    std::string same;  // the setting as it runs, whatever its spelling: focal:0.4 and 0.4, dynamic:2 and dynamic:2.0
    try {
      const TempSpec spec = TempSpec::parse(r.spec_text, "--runs", &cfg);
      // native names itself apart ("native (standard)"), so it may sit beside the setting it resolves to
      same = (r.spec_text.rfind("native", 0) == 0 ? "native " : "") + spec.text();
      if (!r.rope_scaling.empty()) {
        const size_t colon = r.rope_scaling.find(':');
        same += "@" + r.rope_scaling.substr(0, colon);
        if (colon != std::string::npos) {
          char b[32];
          std::snprintf(b, sizeof b, ":%.9g", std::strtod(r.rope_scaling.c_str() + colon + 1, nullptr));
          same += b;
        }
      }
      spec.validate(cfg);
      // "native" alone does not say what ran: the label carries the model's own setting, "native (focal:0.4)"
      if (r.spec_text.rfind("native", 0) == 0)
        r.name = "native (" + spec.text() + ")" + item.substr(r.spec_text.size());
      if (!r.rope_scaling.empty()) {
        ModelConfig copy = cfg;
        apply_rope_override(copy, r.rope_scaling);
      }
    } catch (const Error& e) {
      // One "--runs" (the CLI puts the option in front of a "runs:" message) and one mention of the item: the
      // spec parser's own message already names both ("--runs: --runs item 'focal:0': --runs: 'focal:0': ...").
      std::string msg = e.what();
      if (msg.rfind("--runs: ", 0) == 0) msg = msg.substr(8);
      if (msg.find("'" + item + "'") == std::string::npos && msg.find("'" + r.spec_text + "'") == std::string::npos)
        msg = "item '" + item + "': " + msg;
      throw Error("runs", "runs: " + msg);
    }
    for (size_t k = 0; k < runs.size(); ++k)
      if (runs[k].name == r.name || sames[k] == same)
        throw Error("runs", "runs: '" + item + "' is " +
                                (runs[k].name == r.name ? std::string("named twice")
                                                        : "the setting of '" + runs[k].name + "' again") +
                                " (each setting runs once)");
    runs.push_back(r);
    sames.push_back(same);
  }
  return runs;
}

size_t estimate_position_loss_bytes(const ModelConfig& c, int T) {
  CaptureRequest req;  // no rows stored: the forward's working memory, per-row metrics and a logits block
  req.store_probs = req.store_scores = false;
  return estimate_capture_bytes(c, T, req);
}

namespace {

// Folds the logits blocks of one forward into the document's bucket sums, and each layer's row entropies into its
// per-layer bucket sums, in double.
class LossObserver : public ForwardObserver {
 public:
  LossObserver(const std::vector<int32_t>& ids, int vocab, int bucket, double* sums, double* entropy_sums,
               int n_buckets, const std::function<bool()>& c)
      : ids_(ids),
        vocab_(vocab),
        bucket_(bucket),
        n_buckets_(n_buckets),
        sums_(sums),
        entropy_sums_(entropy_sums),
        cancelled_(c) {}
  bool wants_logits() const override { return true; }
  bool wants_metrics() const override { return true; }
  void on_layer(const LayerRecord& rec) override {
    if (!rec.metrics) return;
    double* out = entropy_sums_ + (size_t)rec.layer * n_buckets_;  // [L, B] of this document
    for (int h = 0; h < rec.n_heads; ++h)
      for (int r = 0; r < rec.n_tokens; ++r)
        out[(rec.pos0 + r) / bucket_] += rec.metrics[((size_t)h * rec.n_tokens + r) * kNumRowMetrics + kEntropyNats];
  }
  void on_logits(int row0, int n_rows, const float* logits) override {
    const int T = (int)ids_.size();
    for (int r = 0; r < n_rows; ++r) {
      const int p = row0 + r + 1;  // the predicted token's position
      if (p >= T) continue;
      const float* lg = logits + (size_t)r * vocab_;
      const float mx = *std::max_element(lg, lg + vocab_);
      double z = 0.0;
      for (int v = 0; v < vocab_; ++v) z += std::exp((double)lg[v] - mx);
      sums_[p / bucket_] += (double)mx + std::log(z) - (double)lg[ids_[p]];
    }
  }
  bool cancelled() const override { return cancelled_ && cancelled_(); }

 private:
  const std::vector<int32_t>& ids_;
  int vocab_, bucket_, n_buckets_;
  double* sums_;
  double* entropy_sums_;
  const std::function<bool()>& cancelled_;
};

}  // namespace

PositionLossFile run_position_loss(const ModelLoader& load, const std::string& corpus_path,
                                   const std::string& runs_text, const PositionLossOptions& opt, size_t budget_bytes,
                                   const std::function<void(int64_t, int64_t)>& progress,
                                   const std::function<bool()>& cancelled) {
  if (opt.max_tokens < 2) throw Error("max_tokens", "--max-tokens must be at least 2 (a token and its successor)");
  std::map<std::string, std::unique_ptr<Model>> models;  // by rope override
  models[""] = load("");
  const Model& base = *models[""];
  const ModelConfig& c = base.config();
  const std::vector<PositionRun> runs = parse_position_runs(runs_text, c);
  // Learned positions (GPT-2) refuse here, before any document runs, naming this option (context_length_warning's
  // own refusal names a prompt's length).
  if (c.arch.position == PositionKind::kLearned && opt.max_tokens > c.max_positions)
    throw Error("max_tokens", "--max-tokens " + std::to_string(opt.max_tokens) + ": " + c.arch.name +
                                  " has learned absolute positions, a table of " + std::to_string(c.max_positions) +
                                  " rows (max_position_embeddings) with no row past it; give --max-tokens " +
                                  std::to_string(c.max_positions) + " or less");
  const size_t need = estimate_position_loss_bytes(c, opt.max_tokens);
  if (budget_bytes > 0 && need > budget_bytes)
    throw Error("max_tokens", "--max-tokens " + std::to_string(opt.max_tokens) + " needs an estimated " +
                                  std::to_string(need >> 20) + " MiB for one forward (KV cache, activations, " +
                                  "metrics, a logits block), over the memory budget of " +
                                  std::to_string(budget_bytes >> 20) + " MiB: lower --max-tokens or raise --budget");
  for (const PositionRun& r : runs)
    if (!models.count(r.rope_scaling)) models[r.rope_scaling] = load(r.rope_scaling);

  PositionLossFile f;
  f.model_path = base.recorded_path();
  f.model_config_json = c.source_json;
  f.weights_checksum = base.weights_checksum();
  f.device = device_name(base.device());
  f.precision = precision_name(base.precision());
  f.tokenizer = base.tokenizer() ? base.tokenizer()->source : std::string();
  f.tool_version = version();
  f.max_tokens = opt.max_tokens;
  f.bucket_tokens = opt.bucket_tokens > 0 ? opt.bucket_tokens : std::max(1, opt.max_tokens / 32);
  f.trained_context = c.max_positions;
  f.band_level = opt.band_level;
  f.bootstrap = opt.bootstrap;
  const int B = (opt.max_tokens - 1) / f.bucket_tokens + 1;  // positions 0..max_tokens-1
  for (int b = 0; b < B; ++b) f.bucket_start.push_back(b * f.bucket_tokens);
  for (const PositionRun& r : runs) f.run_names.push_back(r.name);

  // Documents first (tokenized once), so progress knows its total.
  std::vector<std::vector<int32_t>> docs;
  {
    CorpusReader reader(corpus_path, opt.on_error);
    Document d;
    while ((opt.limit_docs == 0 || (int64_t)docs.size() < opt.limit_docs) && reader.next(d)) {
      std::vector<int32_t> ids = base.require_tokenizer().encode(d.text, c.add_bos);
      if ((int)ids.size() > opt.max_tokens) ids.resize(opt.max_tokens);
      if (ids.size() < 2) continue;  // nothing to predict
      f.doc_ids.push_back(d.id);
      f.doc_tokens.push_back((int32_t)ids.size());
      docs.push_back(std::move(ids));
    }
  }
  if (docs.empty())
    throw Error("data", "--data '" + corpus_path + "' holds no document of 2 tokens or more: nothing to evaluate");
  // Warnings from the tokens that run, not from --max-tokens: a corpus of short documents never leaves the trained
  // context however large --max-tokens is (it said "positions 8192..8999 were never trained on" of 3793 tokens).
  const int longest = *std::max_element(f.doc_tokens.begin(), f.doc_tokens.end());
  for (const PositionRun& r : runs) {
    std::string w = context_length_warning(models[r.rope_scaling]->config(), longest);
    if (!r.rope_scaling.empty())
      w = "rope_scaling " + r.rope_scaling + " replaces the model's own" + (w.empty() ? "" : "; " + w);
    f.run_warnings.push_back(w);
  }
  // The file's warning says what ran: the settings' own when they agree, else the past-context fact alone (the
  // model's own RoPE sentence described rotary positions no run used: "extrapolate" above runs under dynamic NTK).
  f.warnings = f.run_warnings.empty() ? context_length_warning(c, longest) : f.run_warnings[0];
  for (const std::string& w : f.run_warnings)
    if (w != f.warnings) {
      f.warnings = longest > c.max_positions
                       ? std::to_string(longest) + " tokens run past the model's trained context of " +
                             std::to_string(c.max_positions) + " (max_position_embeddings): positions " +
                             std::to_string(c.max_positions) + ".." + std::to_string(longest - 1) +
                             " were never trained on; each setting's warning says how it computed its rotary "
                             "positions"
                       : std::string();
      break;
    }
  if (f.warnings.empty() && opt.max_tokens > c.max_positions)
    f.warnings = "no document reaches past the model's trained context of " + std::to_string(c.max_positions) +
                 " tokens (the longest runs " + std::to_string(longest) + " of --max-tokens " +
                 std::to_string(opt.max_tokens) + "): positions past it hold nothing; give longer documents";
  const size_t R = runs.size(), D = docs.size(), Bn = (size_t)B;
  f.doc_count.assign(D * Bn, 0);
  for (size_t d = 0; d < D; ++d)
    for (size_t p = 1; p < docs[d].size(); ++p) ++f.doc_count[d * Bn + p / f.bucket_tokens];
  f.doc_nll_sum.assign(R * D * Bn, 0.0);
  f.n_layers = c.n_layers;
  f.n_heads = c.n_heads;
  const size_t L = (size_t)c.n_layers;
  f.doc_rows.assign(D * Bn, 0);
  for (size_t d = 0; d < D; ++d)
    for (size_t q = 0; q < docs[d].size(); ++q) ++f.doc_rows[d * Bn + q / f.bucket_tokens];
  f.doc_entropy_sum.assign(R * D * L * Bn, 0.0);

  std::map<std::string, std::unique_ptr<Session>> sessions;
  int64_t done = 0;
  const int64_t total = (int64_t)(R * D);
  for (size_t d = 0; d < D; ++d)
    for (size_t r = 0; r < R; ++r) {
      const Model& m = *models[runs[r].rope_scaling];
      std::unique_ptr<Session>& s = sessions[runs[r].rope_scaling];
      if (!s) s = std::make_unique<Session>(m, opt.max_tokens, /*prefill_only=*/true);
      s->reset();
      const TempSpec spec = TempSpec::parse(runs[r].spec_text, "--runs", &m.config());
      LossObserver obs(docs[d], m.config().vocab_size, f.bucket_tokens, &f.doc_nll_sum[(r * D + d) * Bn],
                       &f.doc_entropy_sum[(r * D + d) * L * Bn], B, cancelled);
      RunOptions ro;
      if (!s->forward(docs[d].data(), (int)docs[d].size(), spec, ro, &obs, nullptr))
        throw Error("cancelled: nothing written");
      if (progress) progress(++done, total);
    }
  summarize_position_loss(f);
  return f;
}

void summarize_position_loss(PositionLossFile& f) {
  const size_t R = f.n_runs(), D = f.n_docs(), B = f.n_buckets();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t L = (size_t)f.n_layers;
  f.mean_entropy.assign(R * L * B, nan);
  if (f.doc_entropy_sum.size() == R * D * L * B && f.doc_rows.size() == D * B)
    for (size_t r = 0; r < R; ++r)
      for (size_t l = 0; l < L; ++l)
        for (size_t b = 0; b < B; ++b) {
          double sum = 0.0, rows = 0.0;
          for (size_t d = 0; d < D; ++d) {
            sum += f.doc_entropy_sum[((r * D + d) * L + l) * B + b];
            rows += f.doc_rows[d * B + b];
          }
          if (rows > 0) f.mean_entropy[(r * L + l) * B + b] = (float)(sum / (rows * f.n_heads));
        }
  f.mean_nll.assign(R * B, nan);
  f.band_lo.assign(R * B, nan);
  f.band_hi.assign(R * B, nan);
  // The same resamples of documents for every run and bucket, so the bands of two runs are comparable.
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<size_t> pick(0, D - 1);
  std::vector<std::vector<size_t>> draws((size_t)std::max(0, f.bootstrap), std::vector<size_t>(D));
  for (auto& dr : draws)
    for (size_t& i : dr) i = pick(rng);
  const double alpha = (1.0 - f.band_level) / 2.0;
  std::vector<double> stats;
  for (size_t r = 0; r < R; ++r)
    for (size_t b = 0; b < B; ++b) {
      auto mean_of = [&](auto doc_at) {
        double sum = 0.0;
        int64_t n = 0;
        for (size_t k = 0; k < D; ++k) {
          const size_t d = doc_at(k);
          sum += f.doc_nll_sum[(r * D + d) * B + b];
          n += f.doc_count[d * B + b];
        }
        return n > 0 ? sum / (double)n : std::numeric_limits<double>::quiet_NaN();
      };
      const double m = mean_of([](size_t k) { return k; });
      if (std::isnan(m)) continue;
      f.mean_nll[r * B + b] = (float)m;
      stats.clear();
      for (const auto& dr : draws) {
        const double s = mean_of([&dr](size_t k) { return dr[k]; });
        if (!std::isnan(s)) stats.push_back(s);
      }
      if (stats.empty()) {
        f.band_lo[r * B + b] = f.band_hi[r * B + b] = (float)m;
        continue;
      }
      std::sort(stats.begin(), stats.end());
      auto quantile = [&](double q) {  // linear interpolation between order statistics
        const double x = q * (double)(stats.size() - 1);
        const size_t i = (size_t)x;
        const double frac = x - (double)i;
        return i + 1 < stats.size() ? stats[i] * (1.0 - frac) + stats[i + 1] * frac : stats[i];
      };
      f.band_lo[r * B + b] = (float)quantile(alpha);
      f.band_hi[r * B + b] = (float)quantile(1.0 - alpha);
    }
}

void write_position_loss(const PositionLossFile& f, const std::string& path) {
  const hsize_t R = f.n_runs(), D = f.n_docs(), B = f.n_buckets();
  h5::write_atomically(path, "position-loss file", [&](hid_t root, Writer& w) {
    h5::write_root_header(w, root, PositionLossFile::kFormatName, PositionLossFile::kFormatVersion, f, true);
    w.attr_i32(root, "/", "max_tokens", f.max_tokens);
    w.attr_i32(root, "/", "bucket_tokens", f.bucket_tokens);
    w.attr_i32(root, "/", "trained_context", f.trained_context);
    w.attr_i32(root, "/", "bootstrap", f.bootstrap);
    const float level = (float)f.band_level;
    w.dataset_f32(root, "", "band_level", {1}, &level, "[1]");
    w.dataset_strings(root, "", "run_names", f.run_names, "[run]");
    w.dataset_strings(root, "", "run_warnings", f.run_warnings, "[run]");
    w.dataset_i32(root, "", "bucket_start", {B}, f.bucket_start.data(), "[bucket]");
    w.dataset_strings(root, "", "doc_ids", f.doc_ids, "[doc]");
    w.dataset_i32(root, "", "doc_tokens", {D}, f.doc_tokens.data(), "[doc]");
    w.dataset_i32(root, "", "doc_count", {D, B}, f.doc_count.data(), "[doc, bucket]");
    const std::vector<float> sums(f.doc_nll_sum.begin(), f.doc_nll_sum.end());  // summed in double, stored fp32
    w.dataset_f32(root, "", "doc_nll_sum", {R, D, B}, sums.data(), "[run, doc, bucket]");
    w.dataset_f32(root, "", "mean_nll", {R, B}, f.mean_nll.data(), "[run, bucket]");
    w.dataset_f32(root, "", "band_lo", {R, B}, f.band_lo.data(), "[run, bucket]");
    w.dataset_f32(root, "", "band_hi", {R, B}, f.band_hi.data(), "[run, bucket]");
    const hsize_t L = (hsize_t)f.n_layers;
    w.attr_i32(root, "/", "n_layers", f.n_layers);
    w.attr_i32(root, "/", "n_heads", f.n_heads);
    w.dataset_i32(root, "", "doc_rows", {D, B}, f.doc_rows.data(), "[doc, bucket]");
    const std::vector<float> ent(f.doc_entropy_sum.begin(), f.doc_entropy_sum.end());
    w.dataset_f32(root, "", "doc_entropy_sum", {R, D, L, B}, ent.data(), "[run, doc, layer, bucket]");
    w.dataset_f32(root, "", "mean_entropy", {R, L, B}, f.mean_entropy.data(), "[run, layer, bucket]");
  });
}

PositionLossFile read_position_loss(const std::string& path) {
  h5::FileReader in(path, "position-loss file", "position-loss file '" + path + "'", PositionLossFile::kFormatName,
                    PositionLossFile::kFormatVersion, CaptureFile::kFormatName,
                    "it is an attention capture, not a position-loss file (focal eval --positions)");
  h5::Reader& r = in.reader();
  const hid_t root = in.root();
  PositionLossFile f;
  static_cast<Provenance&>(f) = h5::read_provenance(r, root, true);
  f.max_tokens = r.attr_int_in(root, "/", "max_tokens", 2, 1 << 30);
  f.bucket_tokens = r.attr_int_in(root, "/", "bucket_tokens", 1, 1 << 30);
  f.trained_context = r.attr_int_in(root, "/", "trained_context", 1, 1 << 30);
  f.bootstrap = r.attr_int_in(root, "/", "bootstrap", 0, 1 << 30);
  f.band_level = r.read_f32(root, "", "band_level", 1).data.at(0);
  f.run_names = r.read_string_dataset(root, "", "run_names");
  f.run_warnings = r.read_string_dataset(root, "", "run_warnings");
  f.bucket_start = r.read_i32(root, "", "bucket_start", 1).data;
  f.doc_ids = r.read_string_dataset(root, "", "doc_ids");
  const hsize_t R = f.run_names.size(), D = f.doc_ids.size(), B = f.bucket_start.size();
  if (f.run_warnings.size() != R) r.where().fail("run_warnings must have one entry per run");
  const h5::Dims db{D, B}, rdb{R, D, B}, rb{R, B}, d1{D};
  f.doc_tokens = r.read_i32(root, "", "doc_tokens", 1, &d1, "[doc]").data;
  f.doc_count = r.read_i32(root, "", "doc_count", 2, &db, "[doc, bucket]").data;
  const std::vector<float> sums = r.read_f32(root, "", "doc_nll_sum", 3, &rdb, "[run, doc, bucket]").data;
  f.doc_nll_sum.assign(sums.begin(), sums.end());
  f.mean_nll = r.read_f32(root, "", "mean_nll", 2, &rb, "[run, bucket]").data;
  f.band_lo = r.read_f32(root, "", "band_lo", 2, &rb, "[run, bucket]").data;
  f.band_hi = r.read_f32(root, "", "band_hi", 2, &rb, "[run, bucket]").data;
  f.n_layers = r.attr_int_in(root, "/", "n_layers", 1, 1 << 20);
  f.n_heads = r.attr_int_in(root, "/", "n_heads", 1, 1 << 20);
  const h5::Dims rdlb{R, D, (hsize_t)f.n_layers, B}, rlb{R, (hsize_t)f.n_layers, B};
  f.doc_rows = r.read_i32(root, "", "doc_rows", 2, &db, "[doc, bucket]").data;
  const std::vector<float> ent = r.read_f32(root, "", "doc_entropy_sum", 4, &rdlb, "[run, doc, layer, bucket]").data;
  f.doc_entropy_sum.assign(ent.begin(), ent.end());
  f.mean_entropy = r.read_f32(root, "", "mean_entropy", 3, &rlb, "[run, layer, bucket]").data;
  return f;
}

}  // namespace focal::batch
