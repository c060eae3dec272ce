#include "app_state.h"
#include "selection.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include <unistd.h>

#include "focal/error.h"
#include "focal/hf_cache.h"
#include "error_controls.h"
#include "overrides.h"
#include "focal/log.h"
#include "focal/metrics.h"

namespace focalscope {

using focal::kNumRowMetrics;

struct AppState::RunnerBox {
  std::shared_ptr<const focal::Model> model;
  focal::LiveRunner runner;
  std::shared_ptr<focal::RunCapture> last;  // the runner's last completed result (the panels get it as const)
  // The result before it: once nothing else holds it (the panels have moved on), the next run takes its buffers
  // (LiveRunner::run's recycle), so a large run's pages are not zeroed afresh each time.
  std::shared_ptr<focal::RunCapture> spare;
  explicit RunnerBox(std::shared_ptr<const focal::Model> m) : model(std::move(m)), runner(*model) {}
};

namespace {

struct Cancelled {};

// A file's or model's name for messages: a model in the Hugging Face cache as ORG/NAME (not its snapshot's hash).
std::string basename_of(std::string p) {
  if (std::string hf = focal::hf_cache_display_name(p); !hf.empty()) return hf;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

std::string trained_label(const focal::ModelConfig& c) {
  char buf[64];
  switch (c.focal.mode) {
    case focal::AttnMode::kFocal: std::snprintf(buf, sizeof buf, "focal t = %g", c.focal.focal_temp); return buf;
    case focal::AttnMode::kLearned: return "learned tau";
    case focal::AttnMode::kSsmax: return "ssmax";
    default: return "standard attention";
  }
}

}  // namespace

bool is_capture_path(const std::string& path) {
  // A file named .h5 is opened as a capture even when it is not HDF5, so the refusal says what is wrong with it.
  for (const char* ext : {".h5", ".hdf5"}) {
    const size_t n = std::strlen(ext);
    if (path.size() > n && path.compare(path.size() - n, n, ext) == 0) return true;
  }
  std::ifstream f(path, std::ios::binary);
  char sig[8] = {};
  if (!f.read(sig, 8)) return false;
  static const char kHdf5[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  return std::equal(sig, sig + 8, kHdf5);
}

AppState::AppState() { slots[1].spec = focal::TempSpec::standard(); }
AppState::~AppState() = default;

const focal::ModelConfig* AppState::config() const { return has_cfg_ ? &cfg_ : nullptr; }

void AppState::notify(const std::string& msg, bool error) {
  message = msg;
  message_is_error = error;
  if (error) ++error_count;
}

void AppState::add_recent(const std::string& path) {
  recent.erase(std::remove(recent.begin(), recent.end(), path), recent.end());
  recent.insert(recent.begin(), path);
  if (recent.size() > 10) recent.resize(10);
}

std::shared_ptr<const focal::Model> AppState::model_for(int side) const {
  return side == 1 && slots[1].model ? slots[1].model : slots[0].model;
}

// ---------------------------------------------------------------- loading

void AppState::open_path(const std::string& path_in) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty()) {
    notify("open: give a model directory, a .gguf file or a capture .h5", true);
    return;
  }
  if (is_capture_path(path) && is_corpus_path(path)) {  // a focal batch stats file: the Corpus tab, model untouched
    jobs.submit("load", "open " + basename_of(path), [this, path](JobContext&) -> std::function<void()> {
      auto cv = std::make_shared<CorpusView>(CorpusView::load(path));
      return [this, cv, path] {
        corpus = cv;
        add_recent(path);
        // The model panels keep only the batch's own model: anything else there would read as this corpus's.
        const std::string shown = loaded.path;
        const bool unrelated = !shown.empty() && !cv->is_model(shown);
        if (unrelated) close_session();
        if (!unrelated && sel_layer < cv->n_layers() && sel_head < cv->n_heads()) cv->select(sel_layer, sel_head);
        notify("opened corpus statistics " + path + " (" + std::to_string(cv->stats.n_docs()) +
                   " documents): see the Corpus tab" +
                   (unrelated ? "; closed " + basename_of(shown) + ", which is not the batch's model (the Corpus tab " +
                                    "opens " + cv->stats.provenance.model_path + ")"
                              : std::string()),
               false);
      };
    });
    return;
  }
  if (is_capture_path(path)) {
    jobs.submit("load", "open " + basename_of(path), [this, path](JobContext&) -> std::function<void()> {
      auto cf = std::make_shared<focal::CaptureFile>(focal::read_capture(path));
      if (cf->runs.empty()) throw focal::Error("capture '" + path + "' holds no runs");
      focal::ModelConfig cfg =
          focal::parse_config(cf->model_config_json, "capture '" + path + "': attribute model_config_json");
      // Everything that can fail is checked here, on the worker, before the closure replaces the session. The
      // reader has checked every run's layers and heads against the file's shape; that shape must be the model's.
      if (cf->n_layers != cfg.n_layers || cf->n_heads != cfg.n_heads)
        throw focal::Error("capture '" + path + "': its runs have " + std::to_string(cf->n_layers) + " layers x " +
                           std::to_string(cf->n_heads) + " heads, its model_config " + std::to_string(cfg.n_layers) +
                           " x " + std::to_string(cfg.n_heads));
      std::vector<focal::TempSpec> specs;
      for (int s = 0; s < 2 && s < (int)cf->runs.size(); ++s) {
        const focal::RunCapture& r = cf->runs[s];
        specs.push_back(focal::TempSpec::from_json(r.temp_spec_json,
                                                   "capture '" + path + "': run '" + r.name + "' temp_spec_json"));
        try {
          specs.back().validate(cfg);
        } catch (const focal::Error& e) {
          throw focal::Error("capture '" + path + "': run '" + r.name + "': temp_spec_json: " + e.what());
        }
      }
      const CaptureModel offer = find_capture_model(cf->model_path, cf->weights_checksum);
      return [this, path, cf, cfg, specs, offer] {
        jobs.cancel("run_a");
        jobs.cancel("run_b");
        for (int s = 0; s < 2; ++s) {
          slots[s] = Slot{};
          box_[s].reset();
        }
        cfg_ = cfg;
        has_cfg_ = true;
        file = *cf;
        file.runs.clear();
        stored_comparisons_ = std::move(file.comparisons);  // KL / JS of a capture without rows (layer_divergence)
        file.comparisons.clear();
        for (int s = 0; s < 2 && s < (int)cf->runs.size(); ++s) {
          auto run = std::make_shared<focal::RunCapture>(cf->runs[s]);
          slots[s].spec = slots[s].run_spec = specs[s];
          slots[s].run = run;
          slots[s].last_layer_run = -1;  // not a propagation
          slots[s].version++;
        }
        compare = cf->runs.size() > 1;
        prompt.clear();
        for (size_t i = 0; i < file.pieces.size(); ++i)  // the stored display pieces, their escapes undone
          if (!(i == 0 && file.token_ids[0] == cfg_.bos_id)) prompt += focal::bytes_of_display(file.pieces[i]);
        // a sentencepiece tokenizer's first word carries the space it added in front ("▁Remember"): the text typed
        // had none (the prompt box showed " Remember ...")
        if (!prompt.empty() && prompt[0] == ' ') prompt.erase(0, 1);
        const focal::RunCapture& r0 = *slots[0].run;
        sel_layer = r0.layers.empty() ? 0 : r0.layers.back();
        sel_head = r0.heads.empty() ? 0 : r0.heads[0];
        sel_query = -1;
        loaded = {path, true, std::string()};
        capture_model = offer;
        add_recent(path);
        const bool has_scores = !r0.scores.empty(), has_rows = has_scores || !r0.probs.empty();
        notify("opened capture " + basename_of(path) + " (" + std::to_string(file.n_tokens()) + " tokens, no model: " +
                   (has_scores ? "temperature changes preview the stored raw scores; "
                    : has_rows ? "it stores probabilities, no raw scores: a temperature change cannot be previewed; "
                               : "it stores metrics only, no attention rows; ") +
                   (offer.available ? "its model " + offer.path + " is on disk: open it to propagate)"
                                    : "propagate, sweep and generation need the model)"),
               false);
        state_version++;
      };
    });
    return;
  }
  jobs.submit(
      "load", "load " + basename_of(path),
      [this, path, dev = device, wm = weights, prec = precision](JobContext& ctx) -> std::function<void()> {
        std::string note;
        const focal::Device resolved = focal::resolve_device(dev, &note);
        focal::LoadOptions lo;
        lo.weights = wm;
        lo.precision = prec;
        lo.on_read = [&ctx](size_t done, size_t total) { ctx.set_progress((float)((double)done / (double)total)); };
        std::shared_ptr<const focal::Model> m(focal::Model::load(path, resolved, lo));
        m->require_tokenizer();
        m->weights_checksum();  // hashed here, on the worker: a native 8B file takes seconds, the UI thread none
        return [this, path, m, note, dev, prec] {
          loaded_device = dev;
          loaded_precision = prec;
          loaded_choice = true;
          jobs.cancel("run_a");
          jobs.cancel("run_b");
          jobs.cancel("generate");
          gen.reset();  // the previous model's generation: the Generation tab showed it, capture-generation took it
          const bool had_b_model = (bool)slots[1].model;
          std::string b_dropped;  // model B closed: it cannot run on A's tokens or be compared head by head
          if (had_b_model) {
            const std::string why = model_b_mismatch(slots[1].model->config(), m->config());
            if (!why.empty()) {
              b_dropped = "\nmodel B " + basename_of(model_b_path) + " closed: " + why;
              slots[1].model.reset();
              box_[1].reset();
              model_b_path.clear();
            }
          }
          slots[0] = Slot{};
          slots[0].model = m;
          slots[0].spec = focal::TempSpec::native(m->config());
          // Comparing two settings of one model: B is the other attention, so the first view shows a difference (a
          // standard-trained model against itself gave A = B and every delta 0).
          if (!slots[1].model) slots[1].spec = default_b_spec(m->config());
          box_[0] = std::make_shared<RunnerBox>(m);
          slots[1].run.reset();
          if (!slots[1].model) box_[1] = std::make_shared<RunnerBox>(m);
          cfg_ = m->config();
          has_cfg_ = true;
          file = focal::make_capture_file(*m, {});
          stored_comparisons_.clear();
          loaded = {path, false, note};
          capture_model = CaptureModel{};
          add_recent(path);
          sel_layer = std::min(sel_layer, cfg_.n_layers - 1);
          sel_head = std::min(sel_head, cfg_.n_heads - 1);
          std::string warnings;  // what loading assumed (focal::ModelConfig::warnings), shown with the load
          for (const std::string& w : m->config().warnings) warnings += "\nwarning: " + w;
          notify("loaded " + basename_of(path) + ": " + std::to_string(cfg_.n_layers) + " layers x " +
                     std::to_string(cfg_.n_heads) + " heads, trained with " + trained_label(m->config()) + ", on " +
                     focal::device_name(m->device()) + " (precision " + focal::precision_name(m->precision()) + ")" +
                     warnings + b_dropped,
                 false);
          state_version++;
          if (!prompt.empty()) set_prompt(prompt);  // none after close_session: the caller gives one
        };
      });
}

void AppState::open_model_b(const std::string& path) {
  if (!has_model()) {
    notify("compare models: load model A first", true);
    return;
  }
  jobs.submit("load", "load B " + basename_of(path),
              [this, path, dev = device, wm = weights, prec = precision](JobContext& ctx) -> std::function<void()> {
                focal::LoadOptions lo;
                lo.weights = wm;
                lo.precision = prec;
                lo.on_read = [&ctx](size_t done, size_t total) {
                  ctx.set_progress((float)((double)done / (double)total));
                };
                std::shared_ptr<const focal::Model> m(focal::Model::load(path, focal::resolve_device(dev), lo));
                m->weights_checksum();  // on the worker, not the UI thread
                return [this, path, m] {
                  if (!slots[0].model) return;
                  const std::string why = model_b_mismatch(m->config(), cfg_);
                  if (!why.empty()) return notify("model B '" + path + "': " + why, true);
                  jobs.cancel("run_b");
                  slots[1] = Slot{};
                  slots[1].model = m;
                  slots[1].spec = focal::TempSpec::native(m->config());
                  box_[1] = std::make_shared<RunnerBox>(m);
                  model_b_path = path;
                  compare = true;
                  add_recent(path);
                  notify("comparing with model B " + basename_of(path), false);
                  state_version++;
                  if (!file.token_ids.empty()) propagate(1);
                };
              });
}

std::string model_b_mismatch(const focal::ModelConfig& b, const focal::ModelConfig& a) {
  if (b.vocab_size != a.vocab_size)
    return "it has a vocabulary of " + std::to_string(b.vocab_size) + " but model A has " +
           std::to_string(a.vocab_size) +
           ": two models are compared on the same token ids, so they need the same "
           "tokenizer";
  if (b.n_layers != a.n_layers || b.n_heads != a.n_heads)
    return "it has " + std::to_string(b.n_layers) + " layers x " + std::to_string(b.n_heads) + " heads but model A " +
           std::to_string(a.n_layers) + " x " + std::to_string(a.n_heads) +
           ": two models are compared head by head, so they need the same layers and heads";
  return "";
}

focal::TempSpec default_b_spec(const focal::ModelConfig& c) {
  return c.focal.mode == focal::AttnMode::kStandard ? focal::TempSpec::focal(0.4f) : focal::TempSpec::standard();
}

std::string AppState::posthoc_banner() const {
  if (!has_cfg_ || capture_only() || slots[1].model || !compare) return "";
  const focal::TempSpec native = focal::TempSpec::native(cfg_);
  int nat = -1, other = -1;
  for (int s = 0; s < 2; ++s) {
    // A side previewing another setting: its run's loss would stand beside the new setting (the Output tab says
    // n/a there too), so no banner until it is propagated.
    if (!slots[s].run || !readouts_current(s)) return "";
    (slots[s].run_spec.label() == native.label() ? nat : other) = s;
  }
  if (nat < 0 || other < 0) return "";
  const float a = prompt_loss(nat), b = prompt_loss(other);
  if (!std::isfinite(a) || !std::isfinite(b)) return "";
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%s is post hoc: this model was trained with %s. Prompt loss %.3f -> %.3f nats/token (%+.3f), "
                "perplexity %.3g -> %.3g",
                slots[other].run_spec.label().c_str(), native.label().c_str(), a, b, b - a, std::exp(a), std::exp(b));
  std::string out = buf;
  // A loss above ln V is worse than a uniform guess over the vocabulary: said, so that a perplexity of millions on a
  // model trained on synthetic tasks (the bundled recall model on its own prompt: 7.16e+06) does not read as a bug.
  const double ln_v = cfg_.vocab_size > 1 ? std::log((double)cfg_.vocab_size) : 0.0;
  if (ln_v > 0.0 && a > ln_v) {
    std::snprintf(buf, sizeof buf, " (%s: above ln %d = %.2f, worse than a uniform guess on this text)",
                  native.label().c_str(), cfg_.vocab_size, ln_v);
    out += buf;
  }
  return out;
}

void AppState::close_model_b() {
  if (!slots[1].model) return;
  jobs.cancel("run_b");
  slots[1] = Slot{};
  slots[1].spec = has_cfg_ ? default_b_spec(cfg_) : focal::TempSpec::standard();
  model_b_path.clear();
  if (slots[0].model) box_[1] = std::make_shared<RunnerBox>(slots[0].model);
  state_version++;
  if (compare && !file.token_ids.empty()) propagate(1);
}

void AppState::close_session() {
  jobs.cancel("run_a");
  jobs.cancel("run_b");
  jobs.cancel("sweep");
  jobs.cancel("generate");
  for (int s = 0; s < 2; ++s) {
    slots[s] = Slot{};
    box_[s].reset();
  }
  slots[1].spec = focal::TempSpec::standard();
  cfg_ = focal::ModelConfig{};
  has_cfg_ = false;
  file = focal::CaptureFile{};
  stored_comparisons_.clear();
  loaded = LoadedInfo{};
  model_b_path.clear();
  sweep.reset();
  gen.reset();
  prompt.clear();  // it was the closed model's
  pending_truncation = false;
  untruncated.clear();
  sel_layer = sel_head = 0;
  sel_query = -1;
  state_version++;
}

// ---------------------------------------------------------------- prompt

void AppState::set_prompt(const std::string& text) {
  if (capture_only()) {
    notify("this capture was opened without its model, so its tokens are fixed: open the model to change the prompt",
           true);
    return;
  }
  if (!has_model()) {
    prompt = text;
    return;
  }
  const focal::Tokenizer& tok = slots[0].model->require_tokenizer();
  std::vector<int32_t> ids = tok.encode(text, cfg_.add_bos);
  const bool only_bos = ids.size() == 1 && cfg_.add_bos && ids[0] == tok.bos_id();
  if (ids.empty() || only_bos || text.find_first_not_of(" \t\r\n") == std::string::npos) {
    notify("the prompt is empty: type some text to run the model on", true);
    return;
  }
  const std::string old_prompt = prompt;
  prompt = text;
  pending_truncation = false;
  // Past the trained context a rotary model runs, warned on the status line and in the capture's provenance; a
  // learned position table (GPT-2) cannot: offer the truncation.
  if ((int)ids.size() > cfg_.max_positions && cfg_.arch.position == focal::PositionKind::kRope) {
    const std::string warning = focal::context_length_warning(cfg_, (int)ids.size());
    if (message_is_error) message.clear();
    if (!apply_tokens(std::move(ids))) {
      prompt = old_prompt;  // the tokens shown are still the old prompt's
      return;
    }
    file.warnings = warning;
    notify("warning: " + warning, false);
    return;
  }
  if ((int)ids.size() > cfg_.max_positions) {
    pending_truncation = true;
    untruncated = ids;
    notify("the prompt has " + std::to_string(ids.size()) + " tokens but the model's context is " +
               std::to_string(cfg_.max_positions) + ": truncate it to the first " + std::to_string(cfg_.max_positions) +
               " tokens, or shorten it",
           true);
    return;
  }
  if (message_is_error) message.clear();
  if (!apply_tokens(std::move(ids))) prompt = old_prompt;
}

void AppState::truncate_prompt() {
  if (!pending_truncation || !has_model()) return;
  pending_truncation = false;
  std::vector<int32_t> ids(untruncated.begin(), untruncated.begin() + cfg_.max_positions);
  untruncated.clear();
  notify("prompt truncated to " + std::to_string(ids.size()) + " tokens", false);
  apply_tokens(std::move(ids));
}

size_t app_rows_bytes(int n_heads, int T, size_t layer_rows_bytes, bool dense) {
  const size_t head = (size_t)T * (size_t)T * sizeof(float);
  const size_t layer = head * (size_t)std::max(1, n_heads);
  const size_t stored = layer <= layer_rows_bytes ? layer : head;
  size_t pooled = 0, cells = 0;  // rows over blocks of b keys; b x b cells of the same
  for (int b : kHeatPoolKeys) pooled += head / (size_t)b;
  for (int b : kHeatPoolKeys) cells += (size_t)((T + b - 1) / b) * (size_t)((T + b - 1) / b) * sizeof(float);
  // Dense: both sides' probabilities, one more while a side's new rows are computed (the view worker runs one job at
  // a time), their pooled copies, and the cells of A, B and B - A.
  if (dense) return 2 * stored + 3 * head + 2 * pooled + 3 * cells;
  // Rows on demand: a third run's rows while one side re-runs (the panels read the old run's meanwhile), each row's
  // normaliser and metrics, and the cells (and B - A's).
  const size_t per_row = (size_t)T * (sizeof(RowNorm) + focal::kNumRowMetrics * sizeof(float));
  return 3 * stored + 2 * (per_row + cells) + cells;
}

size_t AppState::default_rows_budget_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const size_t ram = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : size_t(16) << 30;
  return std::max(size_t(4) << 30, ram / 10 * 6);
}

size_t AppState::rows_bytes(int T) const {
  const focal::Device device = slots[0].model ? slots[0].model->device() : focal::Device::kCpu;
  return app_rows_bytes(cfg_.n_heads, T, rows_policy().layer_rows_bytes_on(device), T <= dense_rows_max_tokens);
}

bool AppState::apply_tokens(std::vector<int32_t> ids) {
  const size_t need = rows_bytes((int)ids.size());
  if (need > rows_budget_bytes) {
    char gib[64];
    std::snprintf(gib, sizeof gib, "%.1f GiB (at most %.0f GiB)", need / 1073741824.0,
                  rows_budget_bytes / 1073741824.0);
    notify("the prompt has " + std::to_string(ids.size()) + " tokens: one head's attention rows would take " + gib +
               " in the app; shorten it, or capture it with `focal capture --store metrics` (memory linear in the "
               "tokens) and open the file",
           true);
    return false;
  }
  jobs.cancel("run_a");
  jobs.cancel("run_b");
  file.token_ids = std::move(ids);
  file.pieces.clear();
  file.relevant.clear();     // positions of the old tokens
  file.warnings.clear();     // a prompt past the context sets it again (set_prompt)
  file.n_prompt_tokens = 0;  // new tokens are a prompt; capture_generation marks a generation's boundary after this
  const focal::Tokenizer* tok = slots[0].model->tokenizer();
  for (int32_t id : file.token_ids) file.pieces.push_back(tok ? tok->display(id) : std::to_string(id));
  for (auto& s : slots) {
    s.run.reset();
    s.version++;
  }
  sel_query = -1;
  sweep.reset();
  state_version++;
  after_tokens_changed();
  return true;
}

void AppState::after_tokens_changed() { propagate_all(); }

// ---------------------------------------------------------------- temperature and runs

focal::CaptureRequest AppState::request_for(int) const {
  // Past the layer-rows threshold of the model's device only the viewed head's rows (select() re-runs for another).
  const focal::Device device = slots[0].model ? slots[0].model->device() : focal::Device::kCpu;
  focal::CaptureRequest req = focal::live_capture_request(has_cfg_ ? cfg_ : focal::ModelConfig{}, device, n_tokens(),
                                                          sel_layer, sel_head, rows_policy());
  req.run.relevant = file.relevant;
  return req;
}

void AppState::toggle_relevant(int pos) {
  if (capture_only()) {
    notify("the relevant keys of a capture are fixed: load its model to mark others", true);
    return;
  }
  if (!has_model() || pos < 0 || pos >= n_tokens()) return;
  auto it = std::lower_bound(file.relevant.begin(), file.relevant.end(), pos);
  if (it != file.relevant.end() && *it == pos) {
    file.relevant.erase(it);
  } else {
    file.relevant.insert(it, pos);
  }
  state_version++;
  if (!compare) slots[1].run.reset();  // B re-runs with the marks when it is shown again
  rerun_for_view();
}

void AppState::set_spec(int side, const focal::TempSpec& spec) {
  slots[side].spec = spec;
  state_version++;
  if (live_propagate) propagate(side);
}

void AppState::set_compare(bool on) {
  compare = on;
  state_version++;
  if (on && !slots[1].run) propagate(1);
}

void AppState::propagate_all() {
  propagate(0);
  if (compare) propagate(1);
}

void AppState::set_live_propagate(bool on) {
  const bool turned_on = on && !live_propagate;
  live_propagate = on;
  if (!turned_on || !has_model()) return;
  for (int side = 0; side < (compare ? 2 : 1); ++side)
    if (slots[side].run && !readouts_current(side)) propagate(side);
}

void AppState::rerun_for_view() {
  if (live_propagate) return propagate_all();
  // Propagate off: the new layer's (or marks') rows under the settings the runs had, so that selecting a layer does
  // not propagate a setting the user only previews (it re-ran both sides under it, the checkbox still off).
  propagate(0, true);
  if (compare) propagate(1, true);
}

void AppState::propagate(int side, bool as_run) {
  if (!has_model() || file.token_ids.empty()) return;
  if (!box_[side]) box_[side] = std::make_shared<RunnerBox>(model_for(side));
  auto box = box_[side];
  const focal::TempSpec spec = as_run && slots[side].run ? slots[side].run_spec : slots[side].spec;
  try {
    spec.validate(box->model->config());
  } catch (const focal::Error& e) {
    notify(with_control(e), true);
    return;
  }
  const std::vector<int32_t> tokens = file.token_ids;
  const focal::CaptureRequest req = request_for(side);
  std::string name = spec.label();
  if (side == 1 && slots[1].model) name = basename_of(model_b_path) + "_" + name;
  if (side == 1 && name == slots[0].spec.label()) name += "_b";
  jobs.submit(
      side == 0 ? "run_a" : "run_b", std::string(side == 0 ? "A" : "B") + ": " + name,
      [this, side, box, spec, tokens, req, name,
       keep_spare = n_tokens() <= dense_rows_max_tokens](JobContext& ctx) -> std::function<void()> {
        auto out = std::make_shared<focal::RunCapture>();
        // When only this box holds the spare, no panel reads it: its buffers may be taken.
        focal::RunCapture* recycle = box->spare && box->spare.use_count() == 1 ? box->spare.get() : nullptr;
        int first = 0, last = 0;
        const auto t0 = std::chrono::steady_clock::now();
        const bool ok = box->runner.run(
            tokens, spec, req, name, box->last.get(), out.get(), [&ctx] { return ctx.cancelled(); },
            [&ctx](int done, int total) { ctx.set_progress((float)done / (float)total); }, &first, recycle, &last);
        if (recycle) box->spare.reset();  // its buffers are gone (taken, or freed with a cancelled run)
        if (!ok) return {};
        // Past dense_rows_max_tokens the budget counts no spare (the old run's rows, 4 GiB per head at 32K
        // tokens, are freed once the panels have moved on).
        box->spare = keep_spare ? std::move(box->last) : nullptr;
        box->last = out;
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return [this, side, box, spec, tokens, out, first, last, ms] {
          if (box_[side] != box || tokens != file.token_ids) return;  // stale
          Slot& s = slots[side];
          s.run = out;
          s.run_spec = spec;
          s.first_layer_run = first;
          s.last_layer_run = last;
          s.run_ms = ms;
          s.version++;
          state_version++;
        };
      });
}

// ---------------------------------------------------------------- selection

void AppState::select(int layer, int head, int q) {
  const focal::ModelConfig* c = config();
  if (!c) return;
  layer = std::clamp(layer, 0, c->n_layers - 1);
  head = std::clamp(head, 0, c->n_heads - 1);
  if (capture_only() && slots[0].run) {  // only the stored layers and heads can be shown
    const auto& r = *slots[0].run;
    if (index_of(r.layers, layer) < 0) layer = sel_layer;
    if (index_of(r.heads, head) < 0) head = sel_head;
  }
  const bool layer_changed = layer != sel_layer;
  if (layer == sel_layer && head == sel_head && q == sel_query) return;
  sel_layer = layer;
  sel_head = head;
  sel_query = q;
  state_version++;
  // Runs past the layer-rows threshold (rows_policy) hold the viewed head's rows only: another head is a re-run, as
  // another layer is.
  const auto lacks_head = [&](const Slot& s) { return s.run && index_of(s.run->heads, head) < 0; };
  const bool head_missing = lacks_head(slots[0]) || (compare && lacks_head(slots[1]));
  if ((layer_changed || head_missing) && has_model()) rerun_for_view();
}

int AppState::query() const {
  const int T = n_tokens();
  if (T == 0) return 0;
  return sel_query < 0 || sel_query >= T ? T - 1 : sel_query;
}

int AppState::poll() {
  const auto on_error = [this](const std::string& e) { notify(e, true); };
  return jobs.poll(on_error) + views.poll(on_error);
}

// ---------------------------------------------------------------- sweep and generation

std::string sweep_key(const focal::TempSpec& a) {
  focal::TempSpec k = a;
  k.mode = focal::AttnMode::kFocal;
  k.focal_temp = 1.0f;
  return k.to_json();
}

void AppState::run_sweep(float t_min, float t_max, int n) {
  if (capture_only())
    return notify("sweep: runs the model at each t, and this capture was opened without it: " +
                      (capture_model.available ? "open its model " + capture_model.path + " (Open its model)"
                                               : capture_model.why_not),
                  true);
  if (!has_model() || file.token_ids.empty()) return notify("sweep: load a model and type a prompt first", true);
  if (!(t_min > 0.0f) || !(t_max > t_min) || n < 2) return notify("sweep: give 0 < t_min < t_max and n >= 2", true);
  std::vector<float> temps(n);
  for (int i = 0; i < n; ++i) temps[i] = t_min * std::pow(t_max / t_min, (float)i / (float)(n - 1));
  auto model = slots[0].model;
  focal::TempSpec base = slots[0].spec;  // A's overrides stay; t is swept under focal attention
  base.mode = focal::AttnMode::kFocal;
  const std::vector<int32_t> tokens = file.token_ids;
  jobs.submit("sweep", "sweep t " + std::to_string(n) + " values",
              [this, model, base, tokens, temps](JobContext& ctx) -> std::function<void()> {
                focal::SweepFile sf;
                try {
                  sf = focal::run_sweep(*model, tokens, base, temps, focal::RunOptions{}, [&](size_t s) {
                    ctx.set_progress((float)(s + 1) / (float)temps.size());
                    if (ctx.cancelled()) throw Cancelled{};
                  });
                } catch (const Cancelled&) { return {}; }
                auto res = std::make_shared<SweepResult>();
                res->temps = sf.focal_temps;
                res->head_metrics = sf.head_metrics;
                res->mean_nll = sf.mean_nll;
                res->n_layers = sf.n_layers;
                res->n_heads = sf.n_heads;
                res->base_label = base.label();
                res->base_spec_json = base.to_json();
                res->base_key = sweep_key(base);
                return [this, res, tokens] {
                  if (tokens == file.token_ids) sweep = res;
                };
              });
}

namespace {

// Streams the rows of each generated token for one layer into a GenStream.
class GenObserver final : public focal::ForwardObserver {
 public:
  GenObserver(std::shared_ptr<GenStream> g, JobContext& ctx) : g_(std::move(g)), ctx_(ctx) {}
  bool wants_rows(int layer, int) const override { return layer == g_->layer; }
  void on_rows(int, int head, int row0, int n_rows, int stride, const float* probs, const float*) override {
    if (row0 < g_->prompt_len) return;  // the prompt's own rows
    std::lock_guard<std::mutex> lk(g_->mu);
    for (int r = 0; r < n_rows; ++r) {
      const int pos = row0 + r;
      const size_t step = (size_t)(pos - g_->prompt_len);
      const int n = pos + 1;
      while (g_->rows.size() <= step) g_->rows.emplace_back();
      std::vector<float>& row = g_->rows[step];
      if (row.empty()) row.assign((size_t)g_->n_heads * n, 0.0f);
      std::copy(probs + (size_t)r * stride, probs + (size_t)r * stride + n, row.begin() + (size_t)head * n);
    }
  }
  bool cancelled() const override { return ctx_.cancelled(); }

 private:
  std::shared_ptr<GenStream> g_;
  JobContext& ctx_;
};

}  // namespace

void AppState::generate(int n_new, float sample_temp) {
  if (!has_model() || file.token_ids.empty()) return notify("generate: load a model and type a prompt first", true);
  auto model = slots[0].model;
  const focal::TempSpec spec = slots[0].spec;
  const std::vector<int32_t> prompt_ids = file.token_ids;
  // As `focal generate`: a rotary model generates past the trained context (warned on the status line); a learned
  // position table (GPT-2) stops at its end.
  const focal::ModelConfig& mc = model->config();
  const bool learned = mc.arch.position == focal::PositionKind::kLearned;
  const int cap =
      learned ? std::min<int>((int)prompt_ids.size() + n_new, mc.max_positions) : (int)prompt_ids.size() + n_new;
  if ((int)prompt_ids.size() >= cap)
    return notify("generate: the prompt already fills the model's learned position table", true);
  if (!learned && (int)prompt_ids.size() <= mc.max_positions) {
    const std::string warning = focal::context_length_warning(mc, cap);
    if (!warning.empty()) notify("warning: generate: " + warning, false);
  }
  auto g = std::make_shared<GenStream>();
  g->model = model;
  g->layer = sel_layer;
  g->n_heads = cfg_.n_heads;
  g->prompt_len = (int)prompt_ids.size();
  g->prompt_ids = prompt_ids;
  g->spec_json = spec.to_json();
  g->spec_label = spec.label();
  g->running = true;
  gen = g;
  jobs.submit("generate", "generate " + std::to_string(n_new) + " tokens",
              [model, spec, prompt_ids, cap, n_new, sample_temp, g](JobContext& ctx) -> std::function<void()> {
                focal::Session session(*model, cap);
                focal::SampleOptions so;
                so.sample_temp = sample_temp;
                so.top_k = 40;
                GenObserver obs(g, ctx);
                const focal::Tokenizer* tok = model->tokenizer();
                int done = 0;
                focal::generate(session, prompt_ids, n_new, spec, so, focal::RunOptions{}, &obs, [&](int32_t id) {
                  std::lock_guard<std::mutex> lk(g->mu);
                  g->ids.push_back(id);
                  g->pieces.push_back(tok ? tok->display(id) : std::to_string(id));
                  if (tok) g->text = tok->decode(g->ids);
                  ctx.set_progress((float)++done / (float)n_new);
                });
                return [g] {
                  std::lock_guard<std::mutex> lk(g->mu);
                  g->running = false;
                };
              });
}

std::string AppState::generation_gap() const {
  if (!gen) return "";
  std::lock_guard<std::mutex> lk(gen->mu);
  const std::vector<int32_t>& t = file.token_ids;
  if (t.size() < gen->prompt_ids.size() || !std::equal(gen->prompt_ids.begin(), gen->prompt_ids.end(), t.begin()))
    return "generated from an earlier prompt: generate again";
  if (slots[0].spec.to_json() != gen->spec_json) {
    std::pair<std::string, std::string> names{gen->spec_label, slots[0].spec.label()};
    try {  // equal labels of other settings are told apart by their overrides
      names = labels_apart(focal::TempSpec::from_json(gen->spec_json, "generation"), slots[0].spec);
    } catch (const focal::Error&) {}
    return "generated under " + names.first + "; A is now " + names.second + ": set A back, or generate again";
  }
  return "";
}

void AppState::capture_generation() {
  if (!gen) return notify("capture generation: generate some tokens first (Generation tab)", true);
  // A capture records A's run as the setting that generated: tokens of an earlier prompt or setting are not that.
  if (const std::string gap = generation_gap(); !gap.empty()) return notify("capture generation: " + gap, true);
  std::vector<int32_t> ids;
  int n_prompt = 0;
  {
    std::lock_guard<std::mutex> lk(gen->mu);
    if (gen->running) return notify("capture generation: the generation is still running", true);
    if (gen->ids.empty()) return notify("capture generation: nothing was generated", true);
    if (gen->model != slots[0].model)  // kept by mistake across a model change: its tokens are another model's
      return notify("capture generation: the generation was made by another model; generate again", true);
    ids = gen->prompt_ids;
    n_prompt = (int)ids.size();
    ids.insert(ids.end(), gen->ids.begin(), gen->ids.end());
  }
  if (!has_model()) return notify("capture generation: load a model first", true);
  std::string table_note;  // GPT-2: the last token, predicted at the position table's end, has no position
  ids.resize(focal::generation_capture_tokens(slots[0].model->config(), ids.size(), &table_note));
  const std::string text = slots[0].model->tokenizer() ? slots[0].model->tokenizer()->decode(ids) : prompt;
  if (!apply_tokens(std::move(ids))) return;
  prompt = text;
  file.n_prompt_tokens = n_prompt;
  notify("capture of prompt + generated tokens: positions 0.." + std::to_string(n_prompt - 1) + " are the prompt, " +
             std::to_string(n_prompt) + ".." + std::to_string(n_tokens() - 1) + " were generated" +
             (table_note.empty() ? "" : " (" + table_note + ")"),
         false);
}

// ---------------------------------------------------------------- export

focal::CaptureFile AppState::capture_file() const {
  focal::CaptureFile f = file;
  f.runs.clear();
  f.comparisons.clear();
  for (int side = 0; side < 2; ++side) {
    if (side == 1 && !compare) continue;
    if (!slots[side].run) continue;
    // A capture holds whole runs: a preview re-tempers the visible head only, so it is not written under its label.
    if (!readouts_current(side))
      throw focal::Error(
          std::string("export: ") + (side == 0 ? "A" : "B") + " shows " + slots[side].spec.label() +
          ", a preview of the visible head re-tempered from the run " + slots[side].run_spec.label() +
          "; a capture holds whole runs (every layer, the loss, the next tokens), which " + readout_gap(side) + ": " +
          (capture_only() ? "open the capture's model and export, or set " + std::string(side == 0 ? "A" : "B") +
                                " back to " + slots[side].run_spec.label() + " to export the stored runs"
                          : std::string("press Propagate, then export")));
    f.runs.push_back(*slots[side].run);
    if (side == 1 && slots[1].model) {  // two models: B's run names its own (the file's provenance is A's)
      f.runs.back().model_path = model_b_path;
      f.runs.back().weights_checksum = slots[1].model->weights_checksum();
    }
  }
  if (f.runs.empty()) throw focal::Error("export: nothing has been run yet");
  if (f.runs.size() == 2 && f.runs[0].name == f.runs[1].name) f.runs[1].name += "_b";
  if (f.runs.size() == 2 && !f.runs[0].probs.empty() && !f.runs[1].probs.empty()) {
    try {
      f.comparisons.push_back(focal::compare_runs(f, f.runs[0].name, f.runs[1].name));
    } catch (const focal::Error& e) {
      focal::log_warning("export: the runs are written without their comparison: " + std::string(e.what()));
    }
  }
  return f;
}

void AppState::export_capture(const std::string& path) const { focal::write_capture(capture_file(), path); }

}  // namespace focalscope
