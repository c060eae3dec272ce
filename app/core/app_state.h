// The app's state and logic, with no window: what is loaded, the two runs being compared (A and B), the temperature
// each side shows now, the selection, and the two update paths — preview (re-apply softmax to the stored raw scores
// of the visible layer, instant, no model run) and propagate (re-run the model on the worker, cancelling stale
// jobs, from the first layer whose temperature changed). The UI panels read and change it; unit tests drive it
// directly.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/device.h"
#include "focal/model.h"
#include "heat_color.h"
#include "corpus_view.h"
#include "jobs.h"

namespace focalscope {

enum class ViewRun { kA = 0, kB = 1, kDiff = 2 };

// Per-head metrics the app ranks heads by: the row metrics (focal::RowMetric, means over rows 1..T-1) and, after
// them, the induction score (focal::head_induction_score; docs/metrics.md).
constexpr int kInductionScore = focal::kNumRowMetrics;
const char* head_metric_name(int m);  // row_metric_name, or "induction" for kInductionScore

// The bytes one head's attention rows take in the app for T tokens of a model with n_heads heads per layer: each
// side's stored rows (every head of the visible layer while they fit layer_rows_bytes, the threshold of the model's
// device: focal::LiveRowsPolicy, else the viewed head's), and
// - dense (T up to AppState::dense_rows_max_tokens): the panels' [T, T] probabilities of both sides, a third while one
//   side's are recomputed, and the heatmap's pooled rows;
// - else: a third run's stored rows (the one computed while the panels show the old), no [T, T] probabilities (rows
//   on demand, HeadRows::row), and the heatmap's b x b cells.
size_t app_rows_bytes(int n_heads, int T, size_t layer_rows_bytes, bool dense = true);

struct ViewOptions {
  HeatColor heat_color = HeatColor::kAuto;
  bool hide_sink = false;      // drop key 0 and renormalise each row over the rest
  ViewRun show = ViewRun::kA;  // heatmap: run A, run B or B - A
  int overview_metric = focal::kEntropyNats;
  bool overview_diff = false;  // overview: B - A instead of A
};

// One side of the comparison.
struct Slot {
  std::shared_ptr<const focal::Model> model;     // B runs another model when comparing two models
  focal::TempSpec spec;                          // what the controls say now
  std::shared_ptr<const focal::RunCapture> run;  // the last propagated (or loaded) run, computed under run_spec
  focal::TempSpec run_spec;
  std::shared_ptr<focal::LiveRunner> runner;  // used by this side's jobs only, one at a time
  int first_layer_run = 0;                    // where the last propagation started
  int last_layer_run = -1;                    // and where it stopped (below the last layer: other rows only)
  double run_ms = 0.0;                        // its wall time
  uint64_t version = 0;                       // bumps when run changes
};

// How one attention row follows from its stored raw scores when its probabilities are not held (long prompts): p_k =
// exp(focal::attention_logit(raw_k, mult, softcap) - log_z) for first <= k <= q, 0 elsewhere (log_z = +inf: no key).
struct RowNorm {
  double log_z = INFINITY;
  float mult = 0.0f;
  int first = 0;
};

// A side's held [T, T] probabilities, shared and never written once set: a view-worker job that reads them (B - A's
// cells) keeps them alive when the side's rows are replaced meanwhile. Reads like the vector it holds.
class SharedRows {
 public:
  SharedRows& operator=(std::vector<float>&& v) {
    rows_ = v.empty() ? nullptr : std::make_shared<const std::vector<float>>(std::move(v));
    return *this;
  }
  const std::vector<float>& get() const { return rows_ ? *rows_ : empty_rows(); }
  operator const std::vector<float>&() const { return get(); }  // NOLINT(google-explicit-constructor)
  bool empty() const { return !rows_; }
  size_t size() const { return get().size(); }
  const float* data() const { return get().data(); }
  float operator[](size_t i) const { return (*rows_)[i]; }
  void clear() { rows_.reset(); }
  std::shared_ptr<const std::vector<float>> share() const { return rows_; }

 private:
  static const std::vector<float>& empty_rows() {
    static const std::vector<float> none;
    return none;
  }
  std::shared_ptr<const std::vector<float>> rows_;
};

// The heatmap's levels of detail for long prompts: blocks of 8, 32, 128 and 512 keys (and as many queries for its
// cells). Each level 4x the one before, so that a texel reads at most about 4 x 4 cells of the finest level that
// fits it (with 8x steps, just below a level's edge a texel read ~8 x 8: 20 ms a frame at 32K tokens).
constexpr int kHeatPoolLevels = 4;
constexpr int kHeatPoolKeys[kHeatPoolLevels] = {8, 32, 128, 512};

// The rows the heatmap, distribution and token strip show: one (layer, head), every query row, under the current
// temperature of each side. Row i has i + 1 keys; entries beyond are 0. Up to AppState::dense_rows_max_tokens tokens
// a side's rows are held as p [T, T]; past it (32K tokens: 4 GiB per side) only each row's normaliser (norm) beside
// the run's stored scores, and row() computes a row when a panel reads it.
struct HeadRows {
  int layer = -1, head = -1, T = 0;
  SharedRows p[2];                   // [T, T] probabilities of A and B (empty past dense_rows_max_tokens)
  std::vector<float> metrics[2];     // [T, kNumRowMetrics] of the rows shown (after hide_sink renormalisation),
                                     // except kSinkMass: always the first key's mass in the whole row
  bool preview[2] = {false, false};  // true: re-tempered from stored scores (the spec differs from the run's)
  bool exact[2] = {false, false};    // true: the side's spec equals its run's for this layer
  std::string label[2];              // the setting p and metrics were computed under (TempSpec::label)
  // Long prompts (AppState::sync_rows_max_tokens): rows are computed on the view worker; until they arrive a side
  // shows the rows of label[side] (same tokens, layer and head), or none.
  bool pending[2] = {false, false};
  // Long prompts (computed with the rows on the view worker): each row of p max-pooled over blocks of kHeatPoolKeys[i]
  // keys, [T, ceil(T / b)], so that a heatmap texel spanning at least b keys reads a cell per block, not every key.
  // Not past dense_rows_max_tokens (32K tokens: 680 MiB per side; the cells below serve the zoomed-out heatmap).
  std::vector<float> pooled[2][kHeatPoolLevels];
  // And over blocks of b queries too: [ceil(T / b), ceil(T / b)], for texels at least b rows high and b keys wide.
  std::vector<float> pooled2d[2][kHeatPoolLevels];
  // Past dense_rows_max_tokens: the stored raw scores the rows come from (the run is held here, so that the rows of
  // a replaced run stay readable while the new ones are computed), row q at raw[side] + q * T, and each row's
  // normaliser; softcap is the model's attention soft-cap (0: none).
  std::shared_ptr<const focal::RunCapture> raw_run[2];
  const float* raw[2] = {nullptr, nullptr};
  std::vector<RowNorm> norm[2];  // [T]
  float softcap = 0.0f;
  uint64_t gen[2] = {0, 0};  // bumps when a side's rows change
  // While the heatmap shows B - A past dense_rows_max_tokens (from the stored scores) or from
  // dense_diff_cells_min_tokens on (from the held rows), computed on the view worker (diff_pending until they arrive,
  // also while a side's rows are): b x b cells of the b - a of largest magnitude ([ceil(T / b)]^2, signed).
  std::vector<float> diff2d[kHeatPoolLevels];
  bool diff_pending = false;
  uint64_t version = 0;

  bool shown(int side) const { return !p[side].empty() || !norm[side].empty(); }
  // Row q of a side ([T], 0 beyond the visible keys): a pointer into p, or past dense_rows_max_tokens into a small
  // cache of computed rows (valid until a few other rows are asked for); nullptr when the side shows nothing.
  const float* row(int side, int q) const;
  // One probability (0 for a masked key; NaN when the side shows nothing).
  float at(int side, int q, int k) const;
  // Past dense_rows_max_tokens: the largest p over keys [ka, kb) of row q (the logit is monotone in the raw score,
  // so one exponential of the largest raw score); with both sides, b - a of largest magnitude over those keys.
  float max_in(int side, int q, int ka, int kb) const;
  float max_diff_in(int q, int ka, int kb) const;
  // ln of max_in for n spans of row q at once, out[i] of keys [ka[i], kb[i]) (-inf where the row shows none of
  // them): the heatmap's texels along a row, each spanning several rows, compare their logits less log Z and take
  // one exponential of the largest.
  void max_log_p_spans(int side, int q, const int* ka, const int* kb, int n, float* out) const;
  // Nothing shown for a side: no rows, metrics, label or pooled copies, not pending.
  void clear_side(int side) {
    p[side].clear();
    metrics[side].clear();
    preview[side] = exact[side] = pending[side] = false;
    label[side].clear();
    for (auto& v : pooled[side]) v.clear();
    for (auto& v : pooled2d[side]) v.clear();
    raw_run[side].reset();
    raw[side] = nullptr;
    norm[side].clear();
    cache_[side].clear();
    gen[side]++;
  }
  // Forgets the computed rows of a side (its norm or raw changed).
  void drop_cache(int side) const { cache_[side].clear(); }

 private:
  struct CachedRow {
    int q = -1;
    std::vector<float> p;
  };
  mutable std::vector<CachedRow> cache_[2];
};
// What a heatmap texel of query rows [qa, qb) and keys [ka, kb) of a layer shows (cfg null: no sliding window):
// kTexelVisible some key is visible to one of its queries, kTexelCausal every key comes after every query,
// kTexelWindow its causally visible keys all lie before the queries' sliding window (focal::window_first_key).
// O(1): the window's first key does not decrease from one query to the next.
enum TexelMask : uint8_t { kTexelVisible = 0, kTexelCausal = 1, kTexelWindow = 2 };
TexelMask texel_mask(const focal::ModelConfig* cfg, int layer, int qa, int qb, int ka, int kb);

// What one attention row of a stored run is computed from (AppState::compute_row's inputs, also copied into a view
// job): the run, the setting to show and the run's own, the model's config, the marked relevant keys, the view.
struct RowSource {
  const focal::RunCapture* run = nullptr;
  const focal::TempSpec* spec = nullptr;
  const focal::TempSpec* run_spec = nullptr;
  const focal::ModelConfig* cfg = nullptr;
  const int32_t* relevant = nullptr;
  int n_relevant = 0;
  bool hide_sink = false;
  int T = 0;
};
// Fills p[T] (0 beyond the visible keys) and metrics[kNumRowMetrics] of query q of (layer, head); false when the run
// does not hold that row. With norm: the row's normaliser over the stored scores (log_z NaN when the run has none).
bool compute_head_row(const RowSource& src, int layer, int head, int q, float* p, float* metrics,
                      RowNorm* norm = nullptr);

// Per-head divergence of the visible layer between the propagated runs A and B (means over rows 1..T-1).
struct LayerDivergence {
  int layer = -1;
  std::vector<float> kl, js;  // [n_heads] mean KL(A || B), JS(A, B) in nats over the rows (propagated runs)
  bool pending = false;       // long prompts: computed on the view worker, kl / js empty until it is done
  std::string key;
};

struct SweepResult {
  std::vector<float> temps;         // [S]
  std::vector<float> head_metrics;  // [S, n_layers, n_heads, kNumRowMetrics]
  std::vector<float> mean_nll;      // [S]
  int n_layers = 0, n_heads = 0;
  std::string base_label;
  std::string base_spec_json;  // the setting swept (TempSpec::to_json): what a stale message compares
  std::string base_key;        // sweep_key of the setting swept: a later A with other overrides makes the sweep stale
};

// What a sweep of `a` keeps fixed while t varies (its overrides, tau scale, ...): the spec as focal attention at t = 1,
// as JSON. Equal keys: the same sweep.
std::string sweep_key(const focal::TempSpec& a);

// Generation streamed from the worker: the attention rows of each new token for the selected layer.
struct GenStream {
  std::mutex mu;
  std::shared_ptr<const focal::Model> model;  // the model that generated (capture_generation refuses another)
  int layer = 0, n_heads = 0, prompt_len = 0;
  std::vector<int32_t> prompt_ids;    // [prompt_len] the tokens generation started from
  std::string spec_json, spec_label;  // A's setting that generated (TempSpec::to_json, label)
  std::vector<int32_t> ids;           // generated ids
  std::vector<std::string> pieces;
  std::vector<std::vector<float>> rows;  // per step: [n_heads, prompt_len + step + 1]
  bool running = false;
  std::string text;
};

// The model a capture's provenance names, for a capture opened without it (AppState::open_capture_model).
struct CaptureModel {
  std::string path;        // the capture's model_path
  bool available = false;  // on disk, and its weight files' checksum is the capture's
  std::string why_not;     // when not available: what is missing or different, and what would fix it
};

struct LoadedInfo {
  std::string path;  // model dir, .gguf or capture .h5
  bool is_capture = false;
  std::string device_note;  // how the device was chosen, e.g. "device: auto -> cpu (no CUDA device: ...)"
};

class AppState {
 public:
  AppState();
  ~AppState();

  // --- loading (the work runs on the worker; errors leave the previous session loaded) ---
  void open_path(const std::string& path);     // a model directory / .gguf, or a capture .h5
  void open_model_b(const std::string& path);  // compare two models: B runs this model on the same tokens
  void close_model_b();
  // A capture opened without its model: opens capture_model.path (when available) and re-runs A and B under their
  // current settings over the capture's tokens, relevant keys and prompt boundary; else an error saying why not.
  void open_capture_model();
  // Closes the model (A and B) or capture and what was run with it: the model panels show that nothing is loaded.
  // Opening a stats file of another model does this, so that no panel shows an unrelated model beside it.
  void close_session();
  bool has_model() const { return (bool)slots[0].model; }
  bool capture_only() const { return !slots[0].model && !file.token_ids.empty(); }
  const focal::ModelConfig* config() const;

  // --- prompt ---
  // Tokenizes and runs. A prompt longer than the context sets pending_truncation (truncate_prompt() accepts it).
  void set_prompt(const std::string& text);
  void truncate_prompt();
  // Marks or unmarks key position pos as relevant (file.relevant, kept sorted): the runs then report relevant
  // mass R, noise 1 - R and SNR for every row. Re-runs both sides; new tokens clear the marks.
  void toggle_relevant(int pos);
  // Runs these token ids (e.g. a benchmark's exact length); the prompt text is left as is.
  void set_tokens(std::vector<int32_t> ids) { apply_tokens(std::move(ids)); }
  int n_tokens() const { return (int)file.token_ids.size(); }

  // --- temperature ---
  void set_spec(int side, const focal::TempSpec& spec);  // preview now, propagate if live_propagate
  // Submit a re-run of that side under its setting, or (as_run) under the setting its last run had: a view change
  // (another layer's rows, relevant keys) with live propagate off keeps a new setting a preview.
  void propagate(int side, bool as_run = false);
  void propagate_all();
  // Turns live propagate on or off; turned on, it propagates what is only previewed now (the box read on while A
  // stayed "preview (not propagated)" until the next change).
  void set_live_propagate(bool on);
  void rerun_for_view();  // the runs again for what is viewed: propagate_all, or with live propagate off as_run
  void set_compare(bool on);

  // --- selection ---
  void select(int layer, int head, int query);  // query -1: the last position
  int query() const;                            // the resolved query position

  // --- jobs ---
  int poll();  // applies finished jobs; call once per frame
  bool busy() const { return !jobs.idle() || !views.idle(); }
  void run_sweep(float t_min, float t_max, int n);
  void generate(int n_new, float sample_temp);
  // Makes the finished generation the session's tokens: prompt + generated ids, with file.n_prompt_tokens marking
  // where the prompt ends, and runs A and B over exactly those tokens (export writes them as a generation capture).
  void capture_generation();
  // Why the finished generation is not of the current A and prompt ("" when it is): A's setting changed since, or
  // the prompt no longer starts with the tokens it generated from. The tab says so; capture_generation refuses.
  std::string generation_gap() const;

  // --- derived views ---
  const HeadRows& head_rows();  // recomputed when the selection, specs, runs or view options changed
  const LayerDivergence& layer_divergence();
  void stored_divergence();  // fills layer_divergence's heads without rows from a capture's stored KL / JS
  // The raw score q.k/sqrt(d_head) of (query q, key k) of the viewed head in run A, read from the run (NaN when it
  // keeps no scores of that row).
  float raw_score(int q, int k) const;
  // Mean over rows 1..T-1 of a row metric of (layer, head) in a side's propagated run, or with kInductionScore its
  // induction score (NaN if absent).
  float head_metric(int side, int layer, int head, int metric) const;
  // Mean next-token loss of the prompt in nats, over the prompt's tokens only (file.prompt_end()); NaN if not run.
  float prompt_loss(int side) const;
  // Mean loss of the generated tokens after the prompt in nats; NaN if not run or nothing was generated.
  float generated_loss(int side) const;
  // When one side runs the model's trained setting and the other a post-hoc temperature (two settings of one
  // model): a line naming both and the loss and perplexity each gives; else empty.
  std::string posthoc_banner() const;
  // Readouts a preview cannot recompute (prompt and generated loss, next tokens, every head's metrics) come from a
  // side's run: they are its current setting's only when its spec equals the run's (capture_model.cpp).
  bool readouts_current(int side) const;
  // Why they are the run's and not the current setting's ("needs the model", "not propagated"); "" when current.
  std::string readout_gap(int side) const;
  // Why a head metric is unavailable in a side's run for every head ("" when it was computed): the induction score
  // is not stored in capture files, nor computed on a CUDA device.
  std::string head_metric_gap(int side, int metric) const;
  // Why no attention rows can be shown ("" when they can): a capture stored with metrics only holds no
  // probabilities and no raw scores, so the heatmap, the distribution and the token strip have nothing to draw.
  std::string rows_gap() const;

  // --- export ---
  focal::CaptureFile capture_file() const;  // the current state: tokens and both propagated runs
  void export_capture(const std::string& path) const;

  // Everything the panels read.
  Slot slots[2];
  bool compare = true;         // show B beside A
  bool live_propagate = true;  // propagate on every change, besides the instant preview
  focal::CaptureFile file;     // header + tokens + pieces (runs live in the slots)
  std::string prompt;
  LoadedInfo loaded;
  CaptureModel capture_model;                                // set when a capture is opened
  focal::Device device = focal::Device::kAuto;               // where the next model loads (open_path / open_model_b)
  focal::WeightsMode weights = focal::WeightsMode::kNative;  // how its weight matrices are held (focal/model.h)
  focal::Precision precision = focal::Precision::kAuto;      // how the GPU computes (focal/device.h)
  // The choices model A last loaded under (the settings keep these: a device or precision that failed to load
  // was saved, and every later start failed with it). loaded_choice: a model loaded this session.
  focal::Device loaded_device = focal::Device::kAuto;
  focal::Precision loaded_precision = focal::Precision::kAuto;
  bool loaded_choice = false;
  std::string model_b_path;
  int sel_layer = 0, sel_head = 0, sel_query = -1;
  ViewOptions view;
  std::string message;  // last error or notice, shown in the window
  bool message_is_error = false;
  uint64_t error_count = 0;  // bumps on every error notice (scripts check it after a command's jobs finish)
  bool pending_truncation = false;
  std::vector<int32_t> untruncated;
  int max_store_tokens = 1024;  // above this, runs keep raw scores only (probabilities are derived)
  // A run keeps the visible layer's rows of every head while they take at most this (n_heads x T x T fp32; SmolLM2's
  // 9 heads to about 14 000 tokens); past it only the viewed head's, and choosing another head re-runs the side from
  // the kept layer input at or below the layer.
  size_t layer_rows_bytes = size_t(3) << 30;
  // The same on a CUDA device, where each stored row crosses to the host while another head is a re-run of one layer
  // on the device: an 8B model's 32 heads at T = 4096 (2 GiB of scores) keep the viewed head's rows only.
  size_t device_layer_rows_bytes = size_t(256) << 20;
  // The three above as the runs' request takes them (focal::live_capture_request).
  focal::LiveRowsPolicy rows_policy() const { return {max_store_tokens, layer_rows_bytes, device_layer_rows_bytes}; }
  // rows_bytes past this: a prompt is refused with the estimate. 60 % of the machine's memory (at least 4 GiB).
  size_t rows_budget_bytes = default_rows_budget_bytes();
  static size_t default_rows_budget_bytes();
  std::vector<std::string> recent;
  std::shared_ptr<SweepResult> sweep;
  std::shared_ptr<GenStream> gen;
  std::shared_ptr<CorpusView> corpus;  // a focal batch stats file opened with open_path (the Corpus tab)
  JobQueue jobs;
  // Derived views of long prompts (rows of the viewed head, layer divergence) are computed here, beside the runs, so
  // that no frame waits for a T x T pass; below sync_rows_max_tokens tokens they are computed at once.
  JobQueue views;
  int sync_rows_max_tokens = 2048;
  // Past this many tokens the panels' rows are not held as [T, T] per side but computed from the stored scores when
  // read (HeadRows::row): 32K tokens would take 4 GiB per side and a third while one is recomputed.
  int dense_rows_max_tokens = 16384;
  // From this many tokens B - A's heatmap cells (HeadRows::diff2d) are also computed from held [T, T] rows: a
  // zoomed-out frame would otherwise read every key of both sides (16K tokens: ~100 ms of CPU per frame).
  int dense_diff_cells_min_tokens = 4096;
  // app_rows_bytes for T tokens of the loaded model under the settings above.
  size_t rows_bytes(int T) const;
  uint64_t state_version = 1;  // bumps on any change the derived views depend on

  void notify(const std::string& msg, bool error);
  void add_recent(const std::string& path);

 private:
  focal::CaptureRequest request_for(int side) const;
  void refresh_head_rows();
  void refresh_diff_cells();  // submits HeadRows::diff2d's job when B - A is shown past dense_rows_max_tokens
  std::string diff_key_;      // what rows_.diff2d was (or is being) computed from
  void after_tokens_changed();
  bool apply_tokens(std::vector<int32_t> ids);  // false: refused (app_rows_bytes past rows_budget_bytes)
  // Fills p[T] (0 beyond the visible keys) and metrics[kNumRowMetrics] of query q of (layer, head) for a side under
  // its current spec; false when its run does not hold that row.
  // propagated: use the run's own spec (the stored rows) instead of the side's current one.
  bool compute_row(int side, int layer, int head, int q, float* p, float* metrics, bool propagated = false) const;
  RowSource row_source(int side, bool propagated) const;  // points into this state: use on the UI thread only
  std::shared_ptr<const focal::Model> model_for(int side) const;
  HeadRows rows_;
  uint64_t rows_version_ = 0;
  std::string rows_key_[2];  // what each side of rows_ was computed from: recomputed only when it changes
  focal::ModelConfig cfg_;   // of model A, or parsed from an opened capture
  bool has_cfg_ = false;
  struct RunnerBox;  // a side's LiveRunner and its last result, used on the worker only
  std::shared_ptr<RunnerBox> box_[2];
  LayerDivergence div_;
  std::vector<focal::Comparison> stored_comparisons_;  // a capture opened without its model: its stored KL / JS
  struct HeadMeans {  // head_metric's means of one side's run: [kNumRowMetrics][n_layers x n_heads], filled on demand
    const focal::RunCapture* run = nullptr;  // with the slot's version: a new run at a freed one's address differs
    uint64_t version = 0;
    int T = 0;
    std::array<std::vector<float>, focal::kNumRowMetrics> means;
  };
  mutable HeadMeans head_means_[2];
};

// B's setting when comparing two settings of one model: focal t = 0.4 for a standard-trained model, else standard.
focal::TempSpec default_b_spec(const focal::ModelConfig& c);
// Why model B (config b) cannot be compared with model A (config a): another vocabulary (the same token ids run on
// both) or other layers x heads (compared head by head); empty when it can.
std::string model_b_mismatch(const focal::ModelConfig& b, const focal::ModelConfig& a);

// Whether the model a capture names (its provenance's model_path and weights checksum) is on disk with the same
// weights; hashes the weight files (seconds for an 8B model: call it on the worker).
CaptureModel find_capture_model(const std::string& model_path, uint64_t weights_checksum);

// Whether a path names a capture file (HDF5 signature) rather than a model.
bool is_capture_path(const std::string& path);

}  // namespace focalscope
