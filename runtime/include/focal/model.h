// A loaded LLaMA-family model and the sessions that run it. The forward pass does no I/O: whatever a caller wants
// to record (attention rows, per-row metrics, tau, logits) it receives through a ForwardObserver.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "focal/config.h"
#include "focal/device.h"
#include "focal/temp_spec.h"
#include "focal/tokenizer.h"

namespace focal {

// Per-row metric order in every metrics array [.., kNumRowMetrics]; definitions in docs/metrics.md.
enum RowMetric : int {
  kEntropyNats = 0,  // H = -sum_j p_j ln p_j
  kEntropyNorm,      // H / ln n_i (0 when n_i = 1)
  kEffSupport,       // exp(H)
  kMaxProb,          // max_j p_j
  kTopkMass,         // sum of the k largest p_j (k = RunOptions::topk_mass_k)
  kTailMass,         // sum_j p_j [p_j < 1/n_i]
  kSinkMass,         // p_i0
  kRelevantMass,     // R = sum of p_j over the relevant keys visible to row i; NaN if none is given or visible
  kNumRowMetrics
};
const char* row_metric_name(int m);  // "entropy_nats", "entropy_norm", ...

// What the forward reports after each layer. Pointers are valid only during the call.
struct LayerRecord {
  int layer = 0;
  int n_tokens = 0;  // T rows of this call
  int pos0 = 0;      // absolute position of row 0
  int n_heads = 0;
  const float* metrics = nullptr;    // [n_heads, T, kNumRowMetrics], null unless wants_metrics()
  const float* row_scale = nullptr;  // [n_heads, T] logit multiplier applied to raw scores
  const float* tau = nullptr;        // [T] tau used per row (after clip and tau_scale), null unless kLearned
  const float* tau_raw = nullptr;    // [T] mean(X.w_tau)+b before the clip, null unless kLearned
};

// Observer of a forward call. on_rows is called from worker threads, concurrently, each call on a disjoint
// (head, row block) of one layer; every other method is called from the calling thread. Must not throw.
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  virtual bool wants_metrics() const { return false; }
  virtual bool wants_rows(int /*layer*/, int /*head*/) const { return false; }
  // probs and raw: [n_rows, stride]; row r is query position row0 + r and has row0 + r + 1 valid keys (the rest 0).
  // raw = q.k / sqrt(d_head) before any temperature scaling.
  virtual void on_rows(int /*layer*/, int /*head*/, int /*row0*/, int /*n_rows*/, int /*stride*/,
                       const float* /*probs*/, const float* /*raw*/) {}
  virtual void on_layer(const LayerRecord& /*rec*/) {}
  // Logits block by block, for callers that need every row ([T, vocab] at once can be GBs): when wants_logits(),
  // after the last layer the forward calls on_logits for consecutive row blocks, logits [n_rows, vocab] of this
  // call's rows row0..row0+n_rows-1 (a device backend downloads each block: next_token_k below keeps them there).
  virtual bool wants_logits() const { return false; }
  virtual void on_logits(int /*row0*/, int /*n_rows*/, const float* /*logits*/) {}
  // Next-token statistics of every row (a capture's top-k tokens and loss), block by block: when next_token_k() > 0,
  // after the last layer the forward computes, for consecutive blocks of this call's rows row0..row0+n_rows-1, each
  // row's log-sum-exp of its logits, its k largest logits (ids and values, descending, ties lower id first) and the
  // logit of next_token_targets()[row] (an id < 0: NaN) on the backend (Backend::next_token_rows: a device keeps the
  // [rows, vocab] logits, 2.1 GB for an 8B model at T = 4096) and calls on_next_tokens with [n_rows] / [n_rows, k]
  // arrays.
  virtual int next_token_k() const { return 0; }
  virtual const int32_t* next_token_targets() const { return nullptr; }  // [this call's rows]
  virtual void on_next_tokens(int /*row0*/, int /*n_rows*/, const float* /*lse*/, const int32_t* /*topk_ids*/,
                              const float* /*topk_logits*/, const float* /*target_logits*/) {}
  // Polled between layers; returning true abandons the call (Session::forward then returns false).
  virtual bool cancelled() const { return false; }
};

struct RunOptions {
  int topk_mass_k = 5;            // k of the top-k mass metric
  std::vector<int32_t> relevant;  // key positions for the relevant-mass metric (synthetic tasks)
  bool all_logits = true;         // logits for every new row, or only for the last one
  bool probs_fp16 = false;        // observed probability rows arrive rounded to fp16 (a capture storing fp16)
};

class Backend;  // runtime-internal compute backend (CPU now, CUDA later)

// How weight matrices are held (Model::load). kNative keeps quantized GGUF blocks and fp16 / bf16 values as the
// file stores them, memory-mapped (about 0.6 bytes per parameter for Q4 files, 2 for 16-bit ones) and computes from
// them; logits agree with kFp32 to about 1e-5 relative. kFp32 widens every matrix to fp32 at load (4 bytes per
// parameter), the mode that matches Hugging Face transformers to 1e-5. Files of fp32 weights load the same either way.
enum class WeightsMode { kNative, kFp32 };
const char* weights_mode_name(WeightsMode m);          // "native", "fp32"
WeightsMode parse_weights_mode(const std::string& s);  // throws Error listing the choices

struct LoadOptions {
  // NaN or infinite weights are refused at load, naming the tensor; true loads them anyway (for studying broken
  // checkpoints) and notes each such tensor in config().warnings.
  bool allow_nonfinite_weights = false;
  WeightsMode weights = WeightsMode::kNative;
  // > 0: a model whose weights, as they would be held in this mode, take more bytes than this is refused before
  // anything is allocated (Error field "budget", with the estimate); 0: no check.
  size_t budget_bytes = 0;
  bool budget_is_machine = false;  // the budget is the machine's memory (the message then says so)
  // A GGUF file whose weights stay as stored (native mode, CPU): false copies the file into process memory at load
  // (on every thread, after the budget check), which decode streams faster than the page cache's map on the
  // machines measured (docs/performance.md, issue 14); true maps the file instead (open without reading it, pages
  // shared with other processes that map it, e.g. several MPI ranks on one node). Other files are always mapped.
  bool map_weights = false;
  // Progress of that copy (bytes done, total), called on the loading thread; may be empty; must not throw.
  std::function<void(size_t done, size_t total)> on_read;
  // How the CUDA backend computes (focal/device.h). kFast on the CPU is refused (Error field "precision").
  Precision precision = Precision::kAuto;
  // Non-empty: a rope_scaling override (apply_rope_override's TYPE:FACTOR, focal/config.h) replacing config.json's;
  // refused (Error field "rope_scaling") for a model without rotary positions. Noted in config().warnings.
  std::string rope_scaling;
};

class Model {
 public:
  // Loads a Hugging Face model directory (config.json, model.safetensors or model.safetensors.index.json shards,
  // optional tokenizer.json or tokenizer.model). Throws Error naming the file and field at fault. `device` picks the backend the
  // weights are uploaded to (focal/device.h; kCuda without a usable device throws). Training needs kCpu.
  // A config.json (or GGUF metadata) that does not fit the weights — more layers than the files hold, a size no
  // tensor has — is refused before anything is allocated. What loading assumed is in config().warnings.
  static std::unique_ptr<Model> load(const std::string& dir, Device device = Device::kCpu,
                                     const LoadOptions& options = LoadOptions());
  ~Model();

  const ModelConfig& config() const { return cfg_; }
  const std::string& path() const { return path_; }
  // The path as files record it (captures, sweeps, batches, evaluations): absolute for a local directory or file, so
  // that a capture opened from another directory still finds its model (a relative path was stored as typed).
  const std::string& recorded_path() const { return recorded_path_; }
  // Null when the directory has no tokenizer; require_tokenizer() throws a clear Error instead.
  const Tokenizer* tokenizer() const { return tok_.get(); }
  const Tokenizer& require_tokenizer() const;
  // FNV-1a 64 over the weight files' bytes. Native-weight models compute it on the first call (several seconds for
  // an 8B file), so that opening stays quick; thread-safe.
  uint64_t weights_checksum() const;
  // The same checksum of the model at `path` (directory or .gguf) without loading it: opens its headers and hashes
  // the weight files (seconds for an 8B file). Throws Error naming the path when it is not a loadable model.
  static uint64_t files_checksum(const std::string& path);
  WeightsMode weights_mode() const { return weights_mode_; }  // kFp32 when no matrix is held in a stored format
  size_t weight_bytes() const;  // bytes of the weight matrices as held (mapped file bytes for stored weights)
  // Device memory (bytes) the model's backend has held at its peak so far: weights, the sessions' activations and
  // caches, scratch, freed buffers kept for reuse; by its own count (the CUDA context and cuBLAS's memory are not in
  // it). 0 on the CPU.
  size_t device_bytes_peak() const;
  size_t n_params() const { return n_params_; }
  // Weight matrices re-laid out at load in the CPU decode kernel's panels of 16 rows (GGUF Q4_0 / Q4_1 / Q4_K /
  // Q5_K held in memory on a CPU with AVX2, Q8_0 with AVX-512 VNNI; ops::pack_panels); 0 otherwise.
  int decode_panels() const { return decode_panels_; }
  Device device() const { return device_; }           // kCpu or kCuda: where the weights live and the forward runs
  Precision precision() const { return precision_; }  // kExact or kFast, resolved at load (always kExact on the CPU)

  struct Weights;
  const Weights& weights() const { return *w_; }
  Backend& backend() const { return *backend_; }

 private:
  Model() = default;
  ModelConfig cfg_;
  std::string path_;
  std::string recorded_path_;  // recorded_path(): path_ made absolute at load when it is local
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Weights> w_;
  mutable std::once_flag checksum_once_;
  mutable uint64_t checksum_ = 0;
  std::function<uint64_t()> checksum_fn_;  // set when the checksum is computed lazily
  WeightsMode weights_mode_ = WeightsMode::kFp32;
  size_t n_params_ = 0;
  int decode_panels_ = 0;
  Device device_ = Device::kCpu;
  Precision precision_ = Precision::kExact;
};

// One sequence: KV cache, position and the running learned-tau sums. Not thread-safe; one thread per session.
class Session {
 public:
  // prefill_only: the session runs prefills from position 0 and nothing after them (captures, batches, sweeps): its
  // KV cache holds one layer, reused by each layer in turn (a 32K-token prefill of a 30-layer model keeps 1/30 of
  // the cache). A forward past position 0 (decode) then throws; reset() allows the next prefill.
  Session(const Model& model, int max_tokens, bool prefill_only = false);
  ~Session();

  // Runs ids[n] at positions n_past()..n_past()+n-1 under `spec`. logits (if not null) receives [n, vocab]
  // (or [1, vocab] with !opt.all_logits). Returns false if the observer cancelled (the session is then reset).
  // Throws Error when the tokens would exceed max_tokens or an id is outside the vocabulary.
  bool forward(const int32_t* ids, int n, const TempSpec& spec, const RunOptions& opt, ForwardObserver* obs,
               std::vector<float>* logits);

  // forward in steps (two settings compared a layer at a time): runs layers up to last_layer of ids[n] at positions
  // n_past().. and pauses there; the next call with the same ids, spec and options continues from the next layer.
  // The call that reaches the last layer finishes as forward does (logits, n_past advanced). The observer sees each
  // layer once, in the call that ran it. forward() on a paused session throws; reset() drops the pause. Throws
  // Error for a layer out of range or one that already ran, other ids than the paused ones, or keep_layer_inputs on.
  bool forward_until(const int32_t* ids, int n, const TempSpec& spec, const RunOptions& opt, ForwardObserver* obs,
                     int last_layer, std::vector<float>* logits);

  // Interactive re-runs (the app). With keep_layer_inputs(true), a prefill from position 0 keeps each layer's input
  // [n, hidden] in host memory. rerun_from(L, ...) then redoes that same prefill (the same ids) from layer L on:
  // layers before L keep their KV cache and are neither re-run nor reported to the observer, which is exact when
  // `spec` differs from the last run's only from layer L on (TempSpec::first_changed_layer). A cancelled prefill
  // or re-run that started at layer F leaves layers 0..F as they were: kept_layers() becomes F, and re-runs from any
  // L <= kept_layers() stay exact against the last completed run. Throws Error if the kept prefill was not of these
  // ids, or L > kept_layers(). budget_bytes > 0 bounds the kept inputs: when every layer's would take more, only
  // those of layers 0, s, 2s, ... are kept (s the smallest stride that fits, at least layer 0's), and a re-run from L
  // starts at rerun_start(L), the kept layer at or below L (the layers between give the same results again).
  void keep_layer_inputs(bool on, size_t budget_bytes = 0);
  bool rerun_from(int first_layer, const int32_t* ids, int n, const TempSpec& spec, const RunOptions& opt,
                  ForwardObserver* obs, std::vector<float>* logits);
  // A re-run that only observes other rows of the last completed prefill (another layer's or head's rows stored,
  // `spec` the same as that run's): redoes layers rerun_start(first_layer)..last_layer and stops there. The layers
  // after last_layer are neither run nor reported and no logits are computed; their kept inputs stay valid. The
  // results of the layers it runs are exact only when spec is the last completed run's. Throws Error as rerun_from
  // does, or for a range that is not first_layer <= last_layer < n_layers. Returns false when the observer cancelled.
  bool rerun_layers(int first_layer, int last_layer, const int32_t* ids, int n, const TempSpec& spec,
                    const RunOptions& opt, ForwardObserver* obs);
  // Leading layers whose kept input (and KV cache) is still that of the last completed prefill of the kept ids:
  // n_layers after a completed prefill, F after one cancelled that started at layer F, 0 before any.
  int kept_layers() const;
  // The layer rerun_from(first_layer, ...) starts at: first_layer (n_layers - 1 for n_layers) rounded down to a layer
  // whose input is kept.
  int rerun_start(int first_layer) const;
  size_t kept_input_bytes() const;  // host memory the kept layer inputs take now

  int n_past() const;
  int max_tokens() const;
  const Model& model() const { return model_; }
  void reset();

  struct State;
  State& state() { return *st_; }  // runtime-internal

 private:
  const Model& model_;
  std::unique_ptr<State> st_;
};

struct SampleOptions {
  float sample_temp = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: whole vocabulary
  uint64_t seed = 1;
  bool stop_at_eos = true;
};

// Prefills `prompt`, then generates up to n_new tokens with the KV cache. on_token(id) is called per generated
// token. Returns the generated ids.
std::vector<int32_t> generate(Session& s, const std::vector<int32_t>& prompt, int n_new, const TempSpec& spec,
                              const SampleOptions& so, const RunOptions& opt, ForwardObserver* obs,
                              const std::function<void(int32_t)>& on_token = {});

// Version string of the tool, e.g. "0.1.0".
const char* version();
// The CPU backend's GEMM kernels in words, e.g. "OpenBLAS SkylakeX" (focal --version and the benchmarks print it).
const char* cpu_gemm_kernels();

}  // namespace focal
