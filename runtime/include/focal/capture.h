// Captures: what attention did in one or more named runs over the same tokens, in memory and in the HDF5 capture
// file (format: docs/capture-format.md). The app and the figures read captures without the model.
#pragma once

#include <cmath>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "focal/model.h"
#include "focal/provenance.h"
#include "focal/temp_spec.h"

namespace focal {

// What to record. Empty selections mean "all".
struct CaptureRequest {
  std::vector<int> layers;   // layers whose probabilities / scores are stored
  std::vector<int> heads;    // heads stored in each chosen layer
  std::vector<int> queries;  // query positions stored
  bool store_probs = true;
  bool store_scores = true;               // raw logits q.k * scale (before focal t and soft-cap): re-temperable
  bool probs_fp16 = false;                // probabilities stored as fp16: capture_run then hands them over rounded to
                                          // fp16 already (a CUDA device downloads 16 bits); clear it for a run whose
                                          // fp32 rows are needed in memory (compare_runs) and pass it to write_capture
  int topk_tokens = 10;                   // next-token top-k stored per position
  bool induction = false;                 // RunCapture::induction of every layer, head and row (observes every
                                          // head's rows: cheap on the CPU, a copy per head on a CUDA device)
  RunOptions run;                         // top-k mass k, relevant keys
  size_t budget_bytes = size_t(2) << 30;  // memory budget for the capture (all runs)
};

// One named run. Shapes use Lc = layers.size(), Hc = heads.size(), Qc = queries.size(), T = tokens.
struct RunCapture {
  std::string name;            // e.g. "standard", "focal_t0.4"
  std::string temp_spec_json;  // TempSpec::to_json()
  // A run of another model than the file's (the app's two-models compare): its path and weights checksum; empty and
  // 0 for a run of the file's own model.
  std::string model_path;
  uint64_t weights_checksum = 0;
  std::vector<int> layers, heads, queries;
  std::vector<float> probs;       // [Lc, Hc, Qc, T], keys beyond the query position are 0; empty if not stored
  std::vector<float> scores;      // [Lc, Hc, Qc, T] raw logits q.k * scale (1/sqrt(d_head) or the architecture's),
                                  // before focal t and soft-cap; 0 beyond the query and outside a sliding window
  std::vector<float> metrics;     // [n_layers, n_heads, T, kNumRowMetrics] for every layer, head and row
  std::vector<float> row_scale;   // [n_layers, n_heads, T] logit multiplier that was applied to raw scores
  std::vector<float> tau;         // [n_layers, T] learned tau used per row; empty unless mode is learned
  std::vector<int32_t> topk_ids;  // [T, k] most likely next tokens after each position
  std::vector<float> topk_probs;  // [T, k]
  // [T, k] the tokenizer's display text of each topk_ids entry, so that a capture opened without its model shows
  // text; empty when the model has no tokenizer, and in files written before it was stored (dataset topk_pieces).
  std::vector<std::string> topk_pieces;
  std::vector<float> token_nll;  // [T] -ln p(token[i+1] | ..i) in nats; NaN for the last position
  std::vector<float> induction;  // [n_layers, n_heads, T] row induction mass (metrics.h); NaN for rows whose token
                                 // did not occur before; empty unless CaptureRequest::induction (not in files yet)
  int topk_mass_k = 5;
};

// Row comparison of two runs on the captured rows present in both with probabilities.
struct Comparison {
  std::string run_a, run_b;
  std::vector<int> layers, heads, queries;  // the common selection
  std::vector<float> kl;                    // [Lc, Hc, Qc] KL(a || b) in nats
  std::vector<float> js;                    // [Lc, Hc, Qc] Jensen-Shannon divergence in nats
};

struct CaptureFile : Provenance {  // provenance: model_path, model_config_json, weights_checksum, tool_version, ...
  static constexpr const char* kFormatName = "focalscope-capture";
  static constexpr int kFormatVersion = 1;

  int n_layers = 0, n_heads = 0, d_head = 0;
  std::vector<int32_t> token_ids;   // [T]
  std::vector<std::string> pieces;  // [T] display pieces
  std::vector<int32_t> relevant;    // key positions used for the relevant-mass metric (may be empty)
  // Tokens 0..n_prompt_tokens-1 were the prompt and the rest were generated (focal generate --capture, the app's
  // generation capture, Model.generate(capture=True)); 0: not recorded, the whole sequence is the prompt. Stored as
  // the root attribute n_prompt_tokens, only when set.
  int n_prompt_tokens = 0;
  // read_capture: a run's probabilities were stored as float16 (write_capture's probs_fp16); rewriting keeps it.
  bool probs_fp16 = false;
  std::vector<RunCapture> runs;
  std::vector<Comparison> comparisons;

  int n_tokens() const { return (int)token_ids.size(); }
  // Position of the first generated token: n_prompt_tokens, or n_tokens() when nothing was generated.
  int prompt_end() const { return n_prompt_tokens > 0 && n_prompt_tokens < n_tokens() ? n_prompt_tokens : n_tokens(); }
  bool has_generated() const { return prompt_end() < n_tokens(); }
  const RunCapture* find_run(const std::string& name) const;  // null if absent
};

// ---- Numbers derived from a run: the one definition the inspect table, the app and the figures share ----

// Mean of row metric `metric` of (layer, head) over query rows 1..T-1 (row 0 sees a single key; all rows when
// T == 1), ignoring NaN rows; NaN when no row has a value. run.metrics is [n_layers, n_heads, n_tokens, metric].
double head_metric_mean(const RunCapture& run, int n_heads, int n_tokens, int layer, int head, int metric);
// Induction score of (layer, head): the mean of the run's row induction masses over the rows that have targets
// (NaN when no row has, or the run did not compute them).
double head_induction_score(const RunCapture& run, int n_heads, int n_tokens, int layer, int head);

// Mean next-token loss of the prompt in nats over the predictions of prompt tokens 1..n_prompt-1: token_nll over
// positions 0..n_prompt-2. n_prompt 0 (or >= T): the whole sequence, positions 0..T-2. NaN when nothing is predicted.
double prompt_loss(const RunCapture& run, int n_prompt = 0);
// Mean loss in nats of the generated tokens n_prompt..T-1 (the model's own tokens when they were generated by it):
// token_nll over positions n_prompt-1..T-2. NaN when no token follows the prompt (n_prompt 0 or >= T).
double generated_loss(const RunCapture& run, int n_prompt);

// Offset in run.probs / run.scores ([Lc, Hc, Qc, n_tokens]) of the stored row at positions (li, hi, qi) of the
// run's layers, heads and queries lists.
size_t stored_row_offset(const RunCapture& run, size_t li, size_t hi, size_t qi, int n_tokens);

// Offset of the stored row of model layer `layer`, head `head` and query position `query`; -1 when the run does
// not store that row.
std::ptrdiff_t find_stored_row(const RunCapture& run, int layer, int head, int query, int n_tokens);

// Bytes the capture will hold in memory for one run (probabilities, scores, metrics, tau, top-k) plus the forward's
// working memory, so a capture over budget fails before running.
size_t estimate_capture_bytes(const ModelConfig& cfg, int n_tokens, const CaptureRequest& req);

// Throws Error if the request names a layer, head or query out of range, or does not fit req.budget_bytes
// (the message says what to narrow).
void validate_capture_request(const ModelConfig& cfg, int n_tokens, const CaptureRequest& req, int n_runs);

// Runs the model over `tokens` under `spec` and records one run. progress(layer_done, n_layers) is called between
// layers. Throws Error on bad input.
RunCapture capture_run(const Model& model, const std::vector<int32_t>& tokens, const TempSpec& spec,
                       const CaptureRequest& req, const std::string& name,
                       const std::function<void(int, int)>& progress = {});
// capture_run that can be abandoned (the Python package's Ctrl-C): cancelled() is polled between layers, on the
// calling thread; returns false, leaving *out untouched, when it turned true. Same results as capture_run.
bool capture_run_cancellable(const Model& model, const std::vector<int32_t>& tokens, const TempSpec& spec,
                             const CaptureRequest& req, const std::string& name, RunCapture* out,
                             const std::function<bool()>& cancelled,
                             const std::function<void(int, int)>& progress = {});

// Two runs over the same tokens, settings a and b, in lockstep a layer at a time (Session::forward_until): run a's
// rows of layer l are held only until run b has run layer l and compared its own rows with them. *cmp receives
// KL(a || b) and JS per row of req's (layer, head, query) selection — the numbers compare_runs gives for the two
// runs — while neither run needs to store its rows (req.store_probs may be false): the comparison holds one layer's
// rows of one run, capture_held_row_bytes, not T^2 rows of every layer. *a_out and *b_out are the runs as
// capture_run makes them. progress counts 2 * n_layers steps (a's layer l, then b's). Throws Error for an invalid
// request or a budget the two runs and the held rows exceed; returns false, with the outputs untouched, when
// cancelled.
bool capture_runs_lockstep(const Model& model, const std::vector<int32_t>& tokens, const TempSpec& spec_a,
                           const std::string& name_a, const TempSpec& spec_b, const std::string& name_b,
                           const CaptureRequest& req, RunCapture* a_out, RunCapture* b_out, Comparison* cmp,
                           const std::function<bool()>& cancelled = {},
                           const std::function<void(int, int)>& progress = {});
// Bytes of the rows capture_runs_lockstep holds: one layer's selected heads x queries x T, fp32.
size_t capture_held_row_bytes(const ModelConfig& c, int T, const CaptureRequest& req);

// Interactive captures (the app): one session kept between runs, with each layer's input, so that a run whose
// spec differs from the previous one only from layer L on re-runs layers L.. and copies the records of the layers
// before L from the previous result. The kept inputs take at most about kLiveKeptInputBytes (n_layers x T x hidden
// fp32 is 2.3 GB for SmolLM2 at 32K tokens): past it, only every few layers' inputs are kept and a re-run starts at
// the kept layer at or below L (Session::rerun_start). Not thread-safe; one job at a time.
constexpr size_t kLiveKeptInputBytes = size_t(1) << 30;
class LiveRunner {
 public:
  explicit LiveRunner(const Model& model);
  ~LiveRunner();
  const Model& model() const;
  // Like capture_run, into *out. prev: this runner's previous result (the same object the last successful call
  // filled), or null to run every layer. Returns false, leaving *out untouched, when cancelled() turned true
  // between layers. *first_layer_run receives the first layer that was re-run, *last_layer_run the last: below
  // n_layers - 1 when only other rows were asked for under the same spec (a head or layer switch): the run then
  // stops after the last stored layer (Session::rerun_layers) and the later layers' records, the next-token
  // arrays and the loss are prev's.
  // recycle: an earlier result the caller no longer needs (neither prev nor out), or null: the run takes its
  // buffers, whose pages are already mapped (its content is lost, also when cancelled). A fresh 4.3 GB of rows (an
  // 8B model's layer at T = 4096) costs more in page zeroing than the forward on a GPU.
  bool run(const std::vector<int32_t>& tokens, const TempSpec& spec, const CaptureRequest& req, const std::string& name,
           const RunCapture* prev, RunCapture* out, const std::function<bool()>& cancelled = {},
           const std::function<void(int, int)>& progress = {}, int* first_layer_run = nullptr,
           RunCapture* recycle = nullptr, int* last_layer_run = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What the app's live runs store, in one place for the app (AppState::request_for) and bench/live_bench: every
// head's metrics and the raw scores of `layer`'s heads, their probabilities too up to max_store_tokens tokens; only
// `head`'s rows once a layer's scores would pass layer_rows_bytes, or on a CUDA device device_layer_rows_bytes (each
// stored row crosses to the host and into the run's buffers: an H200's propagate spent ~2 s on 4.3 GB of them,
// while another head's rows are a re-run of one layer there); the induction score, which observes every head's
// rows, on the CPU only.
struct LiveRowsPolicy {
  int max_store_tokens = 1024;
  size_t layer_rows_bytes = size_t(3) << 30;
  size_t device_layer_rows_bytes = size_t(256) << 20;
  // The layer-rows threshold that holds on `device` (a run of the model's device).
  size_t layer_rows_bytes_on(Device device) const {
    return device == Device::kCuda && device_layer_rows_bytes < layer_rows_bytes ? device_layer_rows_bytes
                                                                                 : layer_rows_bytes;
  }
};
CaptureRequest live_capture_request(const ModelConfig& c, Device device, int n_tokens, int layer, int head,
                                    const LiveRowsPolicy& policy = {});

// Fills the header fields of a capture file from the model and tokens (pieces via the model's tokenizer, if any).
CaptureFile make_capture_file(const Model& model, const std::vector<int32_t>& tokens);

// KL and JS between two runs of `file` on the captured rows both hold. Throws Error if a run is missing or they
// share no stored rows. progress(done, total), when set, is called after each compared layer.
Comparison compare_runs(const CaptureFile& file, const std::string& run_a, const std::string& run_b,
                        const std::function<void(int, int)>& progress = {});

// The tokens a capture of a generation (prompt + generated) re-runs: all n_tokens, except past a learned position
// table (GPT-2), which ends at max_position_embeddings: the last generated token, predicted at the table's last
// position, has no position of its own and is left out (the re-run refused the whole capture). *note says so, ""
// when nothing is left out.
size_t generation_capture_tokens(const ModelConfig& c, size_t n_tokens, std::string* note);

// A comparison's mean KL and JS over the rows the per-head tables average (head_metric_mean): query 0 (one key, so
// KL = JS = 0 in every pair of runs) is left out, always (a capture of --queries 0 read "mean KL 0.0000"). NaN and
// n_rows 0 when no other row is stored. rows: the rows averaged, e.g. "layers 1,3 x heads 0,2 x queries 3-7".
struct ComparisonMeans {
  double kl = NAN, js = NAN;  // nats
  size_t n_rows = 0;
  std::string rows;
};
ComparisonMeans comparison_means(const Comparison& cmp);

// Writes the HDF5 file under a temporary name in the same directory and renames it into place; on any failure the
// temporary is removed and Error names the path. Probabilities are stored as fp16 when probs_fp16 is set.
// progress(done, total), when set, is called after each run and each comparison written.
void write_capture(const CaptureFile& file, const std::string& path, bool probs_fp16 = false,
                   const std::function<void(int, int)>& progress = {});

// Reads a capture file; throws Error naming the file and the missing or malformed item. Every declared size is
// checked before it is allocated: against the file's own header, what the file stores, and a memory budget
// (read_budget_bytes; 0: half the machine's memory, or of ulimit -v). docs/untrusted-input.md.
CaptureFile read_capture(const std::string& path, uint64_t read_budget_bytes = 0);

// Metrics against temperature: one forward per temperature, metrics averaged over rows (rows 1.. only: row 0 has a
// single visible key). Format "focalscope-sweep", docs/capture-format.md.
struct SweepFile : Provenance {
  static constexpr const char* kFormatName = "focalscope-sweep";
  static constexpr int kFormatVersion = 1;
  std::string base_spec_json;  // the spec whose focal_temp was swept
  int n_layers = 0, n_heads = 0;
  std::vector<int32_t> token_ids;   // [T]
  std::vector<float> focal_temps;   // [S]
  std::vector<float> head_metrics;  // [S, n_layers, n_heads, kNumRowMetrics] mean over rows 1..T-1
  std::vector<float> mean_nll;      // [S] mean next-token loss of the prompt in nats
  std::vector<int32_t> relevant;    // [R] key positions of the relevant_mass metric (empty: none; absent before 12-07)
};
// Runs `tokens` once per focal temperature: `base` with its focal_temp replaced by each value of `temps` (mode set to
// focal; per-layer / per-head overrides kept). Metrics per head are averaged over rows 1..T-1, ignoring NaN.
// on_temp(s) is called after temperature s is done. Throws Error on bad input.
SweepFile run_sweep(const Model& model, const std::vector<int32_t>& tokens, const TempSpec& base,
                    const std::vector<float>& temps, const RunOptions& run = {},
                    const std::function<void(size_t)>& on_temp = {},
                    const std::function<bool()>& cancelled = {});  // polled between layers; true: throws Error
void write_sweep(const SweepFile& file, const std::string& path);  // temp name + rename, like write_capture
SweepFile read_sweep(const std::string& path, uint64_t read_budget_bytes = 0);

}  // namespace focal
