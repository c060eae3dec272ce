// `focal`: run LLaMA-family models under focal attention temperatures, capture what attention did into HDF5,
// sweep temperatures, generate, and inspect captures. Exit codes: 0 ok, 1 error (bad file, model or value),
// 2 usage error (unknown option, malformed value), 3 internal error.
#include <csignal>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "args.h"
#include "device_option.h"
#include "model_options.h"
#include "output_option.h"
#include "temp_options.h"
#include "error_flags.h"
#include "focal/atomic_file.h"
#include "focal/eval.h"
#include "focal/provenance.h"
#include "focal/trainer.h"
#include "focal_batch/stats_file.h"
#include "focal/calibrate.h"
#include "focal/capture.h"
#include "focal/error.h"
#include "focal/metrics.h"
#include "focal/model.h"
#include "focal/progress.h"
#include "focal/model_writer.h"
#include "print_provenance.h"

using namespace focal;
using focal::cli::Args;
using focal::cli::check_output;
using focal::cli::compare_spec;
using focal::cli::kTempHelp;
using focal::cli::kTempOpts;
using focal::cli::temp_spec_from;
using focal::cli::UsageError;
using focal::cli::with_flag;

namespace focal::cli {
int cmd_train(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);  // cmd_calibrate.cpp
int cmd_export(int argc, char** argv);
int cmd_eval(int argc, char** argv, TempSpec (*spec_from)(const Args&, const ModelConfig&));
int cmd_eval_positions(int argc, char** argv);
int cmd_figure(int argc, char** argv);  // cmd_figure.cpp
int cmd_demo(int argc, char** argv);
int cmd_batch(int argc, char** argv);        // cmd_batch.cpp
int inspect_stats(const std::string& path);  // cmd_batch.cpp: the summary of a stats file of focal batch
// cmd_inspect_files.cpp: the other files focalscope writes
int inspect_position_loss(const std::string& path);
int inspect_train_log(const std::string& path);
int inspect_eval(const std::string& path);
int inspect_temps(const std::string& path);
}  // namespace focal::cli

namespace {

const char* kMainHelp =
    R"(focal — run LLaMA-family models with Focal Attention temperatures and record what attention did.

usage: focal COMMAND [options]      (focal COMMAND --help for details)

commands:
  info MODEL          model configuration, parameter count, tokenizer, native attention setting
  capture MODEL       run a prompt and write attention probabilities, raw scores and metrics to HDF5
  sweep MODEL         attention metrics and prompt loss against the focal temperature t
  generate MODEL      greedy or sampled generation with a KV cache, optionally capturing attention
  inspect FILE        summary of any file focal writes: capture (per layer x head table), sweep, batch stats,
                      evaluation, position loss, training or calibration log, temperature file (.json)
  init DIR            write a randomly initialised model directory (for demos and tests)
  figure KIND FILE..  publication figure (PNG, SVG, PDF) from captures, sweeps, logs, evaluations, stats, temps
  demo                capture standard vs focal on the demo model and write a gallery of figures
  train               train a small standard / focal / learned-temperature model on the CPU
  calibrate MODEL     learn a pretrained model's temperatures per model, layer or head, every weight frozen
  batch MODEL         attention statistics over a corpus (many documents), standard vs focal; MPI-ready
  eval MODEL          validation loss, retrieval accuracy and relevant-token attention by context length
  export SRC DST      copy a model directory with bf16 / fp16 weights (bundling a checkpoint)

MODEL is a Hugging Face model directory (config.json, model.safetensors[.index.json], tokenizer.json or
tokenizer.model), a .gguf file, or a name ORG/NAME[@REVISION] resolved offline in the Hugging Face cache
($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub; never downloaded); of Llama 3.x, Qwen2, Mistral,
Gemma 2, Phi-3, OLMo 2 or GPT-2. When it is left out, the bundled focal model assets/models/focal-t0.4 is used.
-v, --verbose with any command (before or after it): informational notes on stderr (e.g. the device auto chose
and why). focal --version: the version and the CPU GEMM kernels this machine runs.
exit codes: 0 success, 1 error in a file, model or value, 2 usage error, 3 internal error.
)";

std::set<std::string> with(std::set<std::string> a, const std::set<std::string>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

std::string read_prompt(const Args& a) {
  if (a.has("--prompt") && a.has("--prompt-file")) throw UsageError{"give either --prompt or --prompt-file, not both"};
  if (a.has("--prompt")) return a.get("--prompt");
  if (a.has("--prompt-file")) {
    focal::require_not_directory(a.get("--prompt-file"), "--prompt-file");  // read as "empty"; a pipe is fine
    std::ifstream f(a.get("--prompt-file"), std::ios::binary);
    if (!f) throw Error("--prompt-file: cannot read '" + a.get("--prompt-file") + "': " + std::strerror(errno));
    std::stringstream ss;
    ss << f.rdbuf();
    // Latin-1 text ran as U+FFFD pieces (sentencepiece) or its raw bytes (byte-level BPE), without a word.
    focal::require_utf8_text(ss.str(), "--prompt-file '" + a.get("--prompt-file") + "'");
    return ss.str();
  }
  throw UsageError{"give the prompt with --prompt TEXT or --prompt-file FILE"};
}

// Past the model's trained context: a rotary model runs with a warning on stderr (the capture's provenance keeps
// it too); learned absolute positions (GPT-2) refuse, naming `what`.
void warn_past_context(const ModelConfig& c, int n_tokens, const std::string& what) {
  try {
    const std::string w = context_length_warning(c, n_tokens);
    if (!w.empty()) std::fprintf(stderr, "warning: %s\n", w.c_str());
  } catch (const Error& e) { throw Error(what + ": " + e.what()); }
}

std::vector<int32_t> tokenize_prompt(const Model& m, const std::string& text) {
  if (text.empty()) throw Error("the prompt is empty: give some text with --prompt or --prompt-file");
  std::vector<int32_t> ids = m.require_tokenizer().encode(text, m.config().add_bos);
  warn_past_context(m.config(), (int)ids.size(), "the prompt");
  return ids;
}

// The token ids of `focal capture --ids FILE`: integers separated by whitespace and / or commas. Read before the
// model loads, so a malformed file fails at once; check_ids checks them against the model.
std::vector<int32_t> read_ids_file(const std::string& path) {
  focal::require_not_directory(path, "--ids");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("--ids: cannot read '" + path + "': " + std::strerror(errno));
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  for (char& c : text)
    if (c == ',') c = ' ';
  std::istringstream in(text);
  std::vector<int32_t> ids;
  for (std::string item; in >> item;) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used, 10);
    } catch (const std::exception&) { used = 0; }
    if (used != item.size() || item.empty() || v < INT32_MIN || v > INT32_MAX)
      throw Error("--ids '" + path + "': item " + std::to_string(ids.size()) + " '" + item +
                  "' is not a token id (integers separated by spaces, newlines or commas)");
    ids.push_back((int32_t)v);
  }
  if (ids.empty())
    throw Error("--ids '" + path + "' holds no token ids (integers separated by spaces, newlines or commas)");
  return ids;
}

void check_ids(const std::vector<int32_t>& ids, const std::string& path, const ModelConfig& cfg) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= cfg.vocab_size)
      throw Error("--ids '" + path + "': position " + std::to_string(i) + " holds id " + std::to_string(ids[i]) +
                  ", outside the model's vocabulary 0.." + std::to_string(cfg.vocab_size - 1));
  warn_past_context(cfg, (int)ids.size(), "--ids '" + path + "'");
}

// The input of capture and sweep: --ids FILE, read by read_ids_file before the model loads (`preread`), checked
// against the model here; else the tokenized --prompt / --prompt-file.
std::vector<int32_t> input_ids(const Args& a, const Model& model, std::vector<int32_t> preread) {
  if (!a.has("--ids")) return tokenize_prompt(model, read_prompt(a));
  check_ids(preread, a.get("--ids"), model.config());
  return preread;
}
std::vector<int32_t> read_ids_option(const Args& a) {
  if (!a.has("--ids")) return {};
  if (a.has("--prompt") || a.has("--prompt-file"))
    throw UsageError{"give the input as --ids FILE or as a prompt (--prompt / --prompt-file), not both"};
  return read_ids_file(a.get("--ids"));  // a malformed file fails before the model loads
}

using Progress = focal::ProgressReporter;

// Writes a capture with progress per run and comparison, and says how large the file came out.
void write_capture_reporting(const CaptureFile& file, const std::string& path, bool fp16) {
  Progress prog("write " + path + ": part");
  write_capture(file, path, fp16, [&](int d, int t) { prog.update(d, t); });
}

// The settings a capture records: the main one (named by --name, else by its label) and, with --compare SPEC, a
// second one in the spec grammar (a clash of names gets "_b").
std::vector<std::pair<std::string, TempSpec>> capture_settings(const Args& a, const TempSpec& spec,
                                                               const ModelConfig& cfg) {
  std::vector<std::pair<std::string, TempSpec>> runs = {{a.get("--name", spec.label()), spec}};
  if (runs[0].first.empty()) throw UsageError{"--name is empty: give the run a name, or leave --name out"};
  if (const std::string other = spec.other_setting_named(runs[0].first, &cfg); !other.empty())
    throw Error("--name " + runs[0].first + " names the setting " + other + ", and the run is " + spec.label() +
                ": every figure and table would show it under that setting; give another name, or leave --name out");
  if (a.has("--compare")) {
    TempSpec other = compare_spec(a.get("--compare"), "--compare", cfg);
    std::string name = other.label();
    if (name == runs[0].first) name += "_b";
    runs.push_back({name, other});
  }
  return runs;
}

// Runs every setting over file.token_ids into file.runs, and with two settings the per-row KL / JS between them
// (from the fp32 rows, also when the file stores fp16). Progress per layer of each run and of the comparison.
// Without stored probabilities (--store metrics or scores) the two runs go in lockstep, a layer at a time
// (capture_runs_lockstep): the first run's rows of one layer are held until the second has compared its own with
// them, so the file gets KL / JS and no T^2 data, and memory holds one layer's rows.
void capture_settings_into(CaptureFile& file, const Model& model,
                           const std::vector<std::pair<std::string, TempSpec>>& runs, const CaptureRequest& req) {
  CaptureRequest run_req = req;
  if (runs.size() == 2) run_req.probs_fp16 = false;  // KL / JS below from the fp32 rows; the file still stores fp16
  if (runs.size() == 2 && !req.store_probs) {
    Progress prog("capture " + runs[0].first + " and " + runs[1].first +
                  " in lockstep (a layer of each in turn): step");
    RunCapture a, b;
    Comparison cmp;
    capture_runs_lockstep(model, file.token_ids, runs[0].second, runs[0].first, runs[1].second, runs[1].first, run_req,
                          &a, &b, &cmp, {}, [&](int d, int t) { prog.update(d, t); });
    file.runs.push_back(std::move(a));
    file.runs.push_back(std::move(b));
    file.comparisons.push_back(std::move(cmp));
    return;
  }
  for (const auto& [name, s] : runs) {
    Progress prog("capture " + name + ": layer");
    file.runs.push_back(capture_run(model, file.token_ids, s, run_req, name, [&](int d, int t) { prog.update(d, t); }));
  }
  if (runs.size() == 2 && req.store_probs) {
    Progress prog("compare " + runs[0].first + " vs " + runs[1].first + ": layer");
    file.comparisons.push_back(
        compare_runs(file, runs[0].first, runs[1].first, [&](int d, int t) { prog.update(d, t); }));
  }
}

CaptureRequest request_from(const Args& a, const ModelConfig& cfg) {
  CaptureRequest r;
  r.layers = cli::parse_index_list(a.get("--layers"), "--layers");
  r.heads = cli::parse_index_list(a.get("--heads"), "--heads");
  r.queries = cli::parse_index_list(a.get("--queries"), "--queries");
  const std::string store = a.get("--store", "probs,scores");
  r.store_probs = store.find("probs") != std::string::npos;
  r.store_scores = store.find("scores") != std::string::npos;
  if (!r.store_probs && !r.store_scores && store != "metrics")
    throw UsageError{"--store: use probs, scores, probs,scores or metrics"};
  r.probs_fp16 = a.has("--fp16");
  if (a.has("--budget")) r.budget_bytes = cli::parse_bytes(a.get("--budget"), "--budget");
  r.topk_tokens = a.get_int32("--topk", 10);
  r.run.topk_mass_k = a.get_int32("--topk-mass", 5);
  for (int p : cli::parse_index_list(a.get("--relevant"), "--relevant")) r.run.relevant.push_back(p);
  (void)cfg;
  return r;
}

const char* kCaptureHelp =
    R"(usage: focal capture MODEL (--prompt TEXT | --prompt-file FILE | --ids FILE) [options] -o OUT.h5

Runs the prompt once per setting and writes one HDF5 capture file (format: docs/capture-format.md): tokens,
attention probabilities and raw scores (q.k/sqrt(d_head), before any temperature) of the selected layers, heads
and query rows, per-row metrics for every layer x head x row, tau for learned models, top-k next tokens.

input (one of):
  --prompt TEXT      the prompt, tokenized by the model's tokenizer
  --prompt-file FILE the prompt read from a file
  --ids FILE         token ids as they are (no tokenizer, no BOS added): integers separated by spaces,
                     newlines or commas, each in 0..vocab-1, e.g. the tokens of a generation

selection:
  --layers LIST      layers whose rows are stored, e.g. 0,2-3 (default all)
  --heads LIST       heads stored (default all)
  --queries LIST     query positions stored (default all)
  --store WHAT       probs,scores (default) | probs | scores | metrics (no T^2 data at all)
  --fp16             store probabilities as float16 in the file
  --budget SIZE      memory budget, e.g. 512M, 2G (default 2G); over budget fails before running
  --topk K           next-token top-k stored per position (default 10)
  --topk-mass K      k of the top-k mass metric (default 5)
  --relevant LIST    key positions counted as relevant (relevant mass, noise, SNR)
  --compare SPEC     add a second run in the spec grammar (below), e.g. standard (with per-row KL/JS, also with
                     --store metrics: the first run's rows are then held in memory during the second, not written)
  --name NAME        name of the main run (default: derived from the setting, e.g. focal_t0.4)
  -o FILE            output .h5 (written to a temporary name, then renamed)
)";

int cmd_capture(int argc, char** argv) {
  const std::set<std::string> flags = {"--help", "--fp16", cli::kLoadFlag, cli::kMmapFlag};
  const std::set<std::string> opts =
      with(kTempOpts, {"--prompt", "--prompt-file", "--ids", "--layers", "--heads", "--queries", "--store", "--budget",
                       "--topk", "--topk-mass", "--relevant", "--compare", "--name", "--output", cli::kDeviceOption,
                       cli::kWeightsOption, cli::kPrecisionOption, cli::kRopeScalingOption});
  Args a(argc, argv, 2, flags, opts);
  if (a.has("--help")) {
    std::printf("%s%s%s\n%s", kCaptureHelp, cli::kDeviceHelp, cli::kRopeScalingHelp, kTempHelp);
    return 0;
  }
  const std::string out = a.get("--output");
  check_output(out);
  check_outputs_apart(a, {"--output"}, {cli::model_arg(a, argv[1])});
  std::vector<int32_t> ids = read_ids_option(a);
  auto model = cli::load_model(a, cli::model_arg(a, argv[1]));
  const ModelConfig& cfg = model->config();
  const TempSpec spec = temp_spec_from(a, cfg);
  ids = input_ids(a, *model, std::move(ids));
  const CaptureRequest req = request_from(a, cfg);
  const std::vector<std::pair<std::string, TempSpec>> runs = capture_settings(a, spec, cfg);
  validate_capture_request(cfg, (int)ids.size(), req, (int)runs.size());

  CaptureFile file = make_capture_file(*model, ids);
  file.relevant = req.run.relevant;
  capture_settings_into(file, *model, runs, req);
  write_capture_reporting(file, out, req.probs_fp16);
  std::printf("wrote %s: %d tokens, runs:", out.c_str(), (int)ids.size());
  for (auto& r : file.runs) std::printf(" %s", r.name.c_str());
  std::printf("\n");
  if (model->device_bytes_peak() > 0)  // on the GPU: what this run held there, to read beside nvidia-smi
    std::printf(
        "device memory at peak: %.2f GiB held by focalscope (weights %.2f GiB); the CUDA context and "
        "cuBLAS come on top\n",
        model->device_bytes_peak() / 1073741824.0, model->weight_bytes() / 1073741824.0);
  return 0;
}

int cmd_info(int argc, char** argv) {
  Args a(argc, argv, 2, {"--help", cli::kLoadFlag, cli::kMmapFlag},
         {cli::kDeviceOption, cli::kWeightsOption, cli::kPrecisionOption, cli::kRopeScalingOption});
  if (a.has("--help")) {
    std::printf(
        "usage: focal info MODEL [--device D]\n\nPrints the configuration of a model directory, its parameter "
        "count, weights checksum, tokenizer, native attention setting and the device it was loaded on, and the\n"
        "architecture with its attention features (norms, MLP, logit scale, soft-caps, sliding window, RoPE\n"
        "scaling).\n%s%s",
        cli::kDeviceHelp, cli::kRopeScalingHelp);
    return 0;
  }
  auto m = cli::load_model(a, cli::model_arg(a, argv[1]));
  const ModelConfig& c = m->config();
  std::printf("model        %s\n", m->path().c_str());
  for (const auto& [label, text] : arch_summary(c)) std::printf("%-12s %s\n", label.c_str(), text.c_str());
  std::printf("parameters   %zu (%.2fM)\n", m->n_params(), m->n_params() / 1e6);
  std::printf("layers       %d\nhidden       %d\nintermediate %d\n", c.n_layers, c.hidden, c.intermediate);
  std::printf("heads        %d query, %d key/value (GQA group %d), head_dim %d\n", c.n_heads, c.n_kv_heads,
              c.n_heads / c.n_kv_heads, c.d_head);
  // The norms' epsilon (RMSNorm's, or LayerNorm's for GPT-2); rope theta, biases and qk_norm are in the summary
  // above (a "bias no" line contradicted its "biases q/k/v", and GPT-2 got a rope_theta it does not have).
  std::printf("vocab        %d\ncontext      %d\nnorm_eps     %g\n", c.vocab_size, c.max_positions, c.rms_eps);
  std::printf("tied         %s\n", c.tied_embeddings ? "yes" : "no");
  std::printf("attention    %s", attn_mode_name(c.focal.mode));
  if (c.focal.mode == AttnMode::kFocal) std::printf(" (focal_temp %g)", c.focal.focal_temp);
  if (c.focal.mode == AttnMode::kLearned)
    std::printf(" (tau in [%g, %g], %s%s)", c.focal.tau_min, c.focal.tau_max, tau_mode_name(c.focal.tau_mode),
                c.focal.tau_bias ? ", with bias" : "");
  std::printf("\ntokenizer    %s\nchecksum     fnv1a64:%016llx\n",
              m->tokenizer()
                  ? (m->tokenizer()->source + ", " + std::to_string(m->tokenizer()->vocab_size()) + " pieces").c_str()
                  : "none",
              (unsigned long long)m->weights_checksum());
  std::printf("device       %s\nprecision    %s\n", device_name(m->device()), precision_name(m->precision()));
  std::printf("weights      %s, %.1f MB held (%.2f bytes per parameter)\n", weights_mode_name(m->weights_mode()),
              m->weight_bytes() / 1e6, m->n_params() ? (double)m->weight_bytes() / (double)m->n_params() : 0.0);
  if (m->decode_panels() > 0)
    std::printf(
        "decode       %d matrices in panels of 16 rows for the decode kernel (--mmap keeps the file's layout)\n",
        m->decode_panels());
  return 0;
}

const char* kSweepHelp =
    R"(usage: focal sweep MODEL (--prompt TEXT | --prompt-file FILE | --ids FILE) --temps FROM:TO:STEP [-o SWEEP.h5]

Runs the prompt once per focal temperature t and reports, per t, the mean over rows (from row 1) of every
attention metric per layer and head, and the prompt's mean next-token loss. --temps also takes a list: 0.3,0.4,1.
The runs are focal attention at each t; per-layer/per-head overrides from the temperature options stay fixed while
t varies (a --mode or --temp setting other than focal is refused: t means nothing there).
  --ids FILE        token ids as they are (no tokenizer, no BOS added), as capture's --ids: for a model that
                    stores no tokenizer
  --relevant LIST   key positions counted as relevant
  --topk-mass K     k of the top-k mass metric (default 5)
)";

// One row of the sweep table: t, prompt loss, and entropy / sink / tail mass averaged over layers and heads.
// The sweep table: mean over heads of each metric at each t; relevant mass and noise when the sweep had relevant keys.
void print_sweep_header(const SweepFile& sf) {
  std::printf("%8s %12s %12s %12s %12s", "t", "loss_nats", "entropy", "sink_mass", "tail_mass");
  std::printf(sf.relevant.empty() ? "\n" : " %12s %12s\n", "relevant", "noise");
}

void print_sweep_row(const SweepFile& sf, size_t s) {
  const size_t per = (size_t)sf.n_layers * sf.n_heads;
  double e = 0, sk = 0, tl = 0, rm = 0;
  int n_rel = 0;
  for (size_t i = 0; i < per; ++i) {
    const float* m = &sf.head_metrics[(s * per + i) * kNumRowMetrics];
    e += m[kEntropyNats];
    sk += m[kSinkMass];
    tl += m[kTailMass];
    if (!std::isnan(m[kRelevantMass])) rm += m[kRelevantMass], ++n_rel;
  }
  std::printf("%8.3g %12.4f %12.4f %12.4f %12.4f", sf.focal_temps[s], sf.mean_nll[s], e / per, sk / per, tl / per);
  if (!sf.relevant.empty()) {
    const float r = n_rel ? (float)(rm / n_rel) : NAN;
    std::printf(" %12.4f %12.4f", r, noise_mass(r));
  }
  std::printf("\n");
  std::fflush(stdout);
}

int cmd_sweep(int argc, char** argv) {
  Args a(argc, argv, 2, {"--help", cli::kLoadFlag, cli::kMmapFlag},
         with(kTempOpts, {"--prompt", "--prompt-file", "--ids", "--temps", "--output", "--relevant", "--topk-mass",
                          cli::kDeviceOption, cli::kWeightsOption, cli::kPrecisionOption, cli::kRopeScalingOption}));
  if (a.has("--help")) {
    std::printf("%s%s%s\n%s", kSweepHelp, cli::kDeviceHelp, cli::kRopeScalingHelp, kTempHelp);
    return 0;
  }
  if (!a.has("--temps")) throw UsageError{"sweep needs --temps FROM:TO:STEP (e.g. 0.3:1.0:0.1)"};
  const std::vector<float> temps = cli::parse_float_range(a.get("--temps"), "--temps");
  for (float t : temps)
    if (!temp_in_range(t)) {
      char got[32];
      std::snprintf(got, sizeof got, "%g", t);
      throw Error(std::string("--temps: every temperature ") + kTempRangeText + " (got " + got + ")");
    }
  const std::string out = a.get("--output");
  if (!out.empty()) check_output(out);
  check_outputs_apart(a, {"--output"}, {cli::model_arg(a, argv[1])});
  std::vector<int32_t> preread = read_ids_option(a);
  auto model = cli::load_model(a, cli::model_arg(a, argv[1]));
  TempSpec base = temp_spec_from(a, model->config());
  // A temperature file (calibrated:FILE) is judged by run_sweep, which names it: a layer or head file sets every t.
  if ((a.has("--mode") || a.has("--temp")) && base.mode != AttnMode::kFocal && base.temp_file.empty())
    throw UsageError{std::string("sweep runs focal attention at each t of --temps; the setting given is ") +
                     attn_mode_name(base.mode) + " (leave --mode / --temp out, or give a focal one)"};
  base.mode = AttnMode::kFocal;  // the model's native overrides (if any) stay; t is swept
  const std::vector<int32_t> ids = input_ids(a, *model, std::move(preread));
  RunOptions run;
  run.topk_mass_k = a.get_int32("--topk-mass", 5);
  for (int p : cli::parse_index_list(a.get("--relevant"), "--relevant")) run.relevant.push_back(p);
  Progress prog("sweep: temperature");
  const SweepFile sf =
      run_sweep(*model, ids, base, temps, run, [&](size_t s) { prog.update((int)s + 1, (int)temps.size()); });
  print_sweep_header(sf);
  for (size_t s = 0; s < temps.size(); ++s) print_sweep_row(sf, s);
  if (!out.empty()) {
    write_sweep(sf, out);
    std::printf("wrote %s\n", out.c_str());
  }
  return 0;
}

const char* kGenerateHelp = R"(usage: focal generate MODEL (--prompt TEXT | --prompt-file FILE) [-n N] [options]

Generates N tokens with a KV cache under the chosen attention temperature and prints the text.
  -n, --n-new N     new tokens (default 32)
  --sample-temp X   sampling temperature of the next-token distribution (default 0: greedy)
  --top-k K         sample among the K most likely tokens (default: all; with --sample-temp above 0)
  --seed S          sampling seed (default 1; with --sample-temp above 0)
  --capture FILE    also write a capture .h5 of prompt + generated tokens: the attention of every generated
                    step (same selection options as capture: --layers --heads --queries --store --fp16 --budget
                    --topk --topk-mass --relevant --name); the file records where the prompt ends (n_prompt_tokens)
  --compare SPEC    with --capture: a second run over exactly the same prompt + generated tokens under SPEC (the
                    spec grammar below, e.g. standard), with per-row KL/JS, as capture --compare does
)";

int cmd_generate(int argc, char** argv) {
  std::set<std::string> opts =
      with(kTempOpts, {"--prompt", "--prompt-file", "--n-new", "--sample-temp", "--top-k", "--seed", "--capture",
                       "--compare", "--layers", "--heads", "--queries", "--store", "--budget", "--topk", "--topk-mass",
                       "--relevant", "--name"});
  opts.insert({cli::kDeviceOption, cli::kWeightsOption, cli::kPrecisionOption, cli::kRopeScalingOption});
  Args a(argc, argv, 2, {"--help", "--fp16", cli::kLoadFlag, cli::kMmapFlag}, opts);
  if (a.has("--help")) {
    std::printf("%s%s%s\n%s", kGenerateHelp, cli::kDeviceHelp, cli::kRopeScalingHelp, kTempHelp);
    return 0;
  }
  const int n_new = a.get_int32("--n-new", 32);
  if (n_new < 1) throw UsageError{"-n must be at least 1"};  // get_int names it --n-new, -n's long form
  for (const char* opt : {"--layers", "--heads", "--queries", "--store", "--budget", "--topk", "--topk-mass",
                          "--relevant", "--name", "--fp16"})
    if (a.has(opt) && !a.has("--capture"))
      throw UsageError{std::string(opt) + " describes the capture: it needs --capture FILE"};
  if (a.has("--compare") && !a.has("--capture"))
    throw UsageError{"--compare needs --capture FILE: it is a second run recorded in the capture"};
  SampleOptions so;  // before the model loads
  so.sample_temp = (float)a.get_double("--sample-temp", 0.0);
  if (!std::isfinite(so.sample_temp) || so.sample_temp < 0.0f)
    throw UsageError{"--sample-temp must be a number >= 0 (0: greedy)"};
  so.top_k = a.get_int32("--top-k", 0);
  if (so.top_k < 0) throw UsageError{"--top-k must be >= 0 (0: all tokens)"};
  so.seed = a.get_u64("--seed", 1);
  for (const char* opt : {"--top-k", "--seed"})  // greedy decoding takes the most likely token: nothing to draw
    if (a.has(opt) && so.sample_temp == 0.0f)
      throw UsageError{std::string(opt) + " " + a.get(opt) +
                       " shapes sampling, and the decoding is greedy: give --sample-temp above 0 (1: the model's "
                       "own distribution), or leave " +
                       opt + " out"};
  if (a.has("--capture")) check_output(a.get("--capture"), "--capture");
  check_outputs_apart(a, {"--capture"}, {cli::model_arg(a, argv[1])});
  auto model = cli::load_model(a, cli::model_arg(a, argv[1]));
  const ModelConfig& c = model->config();
  const TempSpec spec = temp_spec_from(a, c);
  check_spec_weights(spec, *model);  // before the prompt is printed (it was, then a temperature file was refused)
  if (!model->tokenizer())           // generate reads text and prints text (capture --ids takes token ids)
    throw Error("model '" + model->path() +
                "' has no tokenizer (tokenizer.json / tokenizer.model, or a GGUF's tokenizer.ggml.* metadata): "
                "generate needs one to read the prompt and print the text; add the model's tokenizer files");
  const std::vector<int32_t> prompt = tokenize_prompt(*model, read_prompt(a));
  // Rotary models generate past the trained context (warned once, for the longest sequence); a learned position
  // table stops at its end.
  const bool learned = c.arch.position == PositionKind::kLearned;
  if ((int64_t)prompt.size() + n_new > INT32_MAX)  // a session holds at most 2^31 - 1 positions
    throw Error("-n " + std::to_string(n_new) + ": " + std::to_string(prompt.size()) + " prompt tokens and " +
                std::to_string(n_new) + " new ones pass the 2147483647 positions a session holds; ask for fewer");
  const int cap = learned ? std::min(c.max_positions, (int)prompt.size() + n_new) : (int)prompt.size() + n_new;
  if (learned && (int)prompt.size() >= c.max_positions)
    throw Error("the prompt fills the model's learned position table (" + std::to_string(c.max_positions) +
                " positions); nothing to generate");
  if (!learned && (int)prompt.size() <= c.max_positions) warn_past_context(c, cap, "generate");
  // Capture options are checked before generating, against the longest sequence the generation can produce.
  CaptureRequest req;
  std::vector<std::pair<std::string, TempSpec>> runs;
  if (a.has("--capture")) {
    req = request_from(a, c);
    runs = capture_settings(a, spec, c);
    validate_capture_request(c, cap, req, (int)runs.size());
  }
  std::unique_ptr<Session> session;
  try {
    session = std::make_unique<Session>(*model, cap);
  } catch (const Error& e) {  // a KV cache too large to allocate
    throw Error("-n " + std::to_string(n_new) + " (" + std::to_string(prompt.size()) + " prompt tokens + " +
                std::to_string(n_new) + "): " + e.what());
  }
  Session& s = *session;
  const Tokenizer& tok = model->require_tokenizer();
  // The text goes out as UTF-8, a whole character at a time: a byte-level token that ends inside a character waits
  // for the next, and what never completes (a stray byte, a character cut off by -n) is U+FFFD, as transformers'
  // decode writes it (raw bytes made the output undecodable).
  std::string text = tok.decode(prompt);
  size_t printed = 0;
  auto print_whole = [&](bool last) {
    const size_t end = last ? text.size() : std::max(printed, utf8_whole_end(text));
    std::printf("%s", utf8_replaced(text.substr(printed, end - printed)).c_str());
    printed = end;
    std::fflush(stdout);
  };
  print_whole(false);
  std::vector<int32_t> all = prompt;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> gen = generate(s, prompt, n_new, spec, so, RunOptions{}, nullptr, [&](int32_t id) {
    all.push_back(id);
    text = tok.decode(all);
    print_whole(false);
  });
  print_whole(true);
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\n");
  std::fflush(stdout);  // the text's line ends before the timing line on stderr
  std::fprintf(stderr, "[%zu tokens in %.2fs, %s]\n", gen.size(), el, spec.label().c_str());
  // A learned position table ends the generation at its last row: said (it gave 25 of -n 40 tokens, exit 0, unsaid).
  if (learned && (int64_t)gen.size() < n_new && (int)(prompt.size() + gen.size()) >= c.max_positions)
    std::fprintf(stderr,
                 "warning: generation stopped after %zu of %lld tokens: %s's learned position table ends at %d "
                 "positions (max_position_embeddings)\n",
                 gen.size(), (long long)n_new, c.arch.name.c_str(), c.max_positions);
  if (a.has("--capture")) {
    // KV-cache decoding reproduces a prefill of the full sequence (tests/forward_test.cpp), so the capture re-runs
    // prompt + generated tokens in one pass: the attention row of every generated step, laid out as `focal capture`.
    std::string note;
    all.resize(generation_capture_tokens(model->config(), all.size(), &note));
    if (!note.empty()) std::fprintf(stderr, "warning: %s\n", note.c_str());
    if (!req.queries.empty() && *std::max_element(req.queries.begin(), req.queries.end()) >= (int)all.size())
      throw Error("--queries: a query position lies beyond the " + std::to_string(all.size()) +
                  " tokens generated (generation stopped early at end of text)");
    for (int p : req.run.relevant)
      if (p >= (int)all.size())
        throw Error("--relevant: position " + std::to_string(p) + " lies beyond the " + std::to_string(all.size()) +
                    " tokens generated (generation stopped early at end of text)");
    // With --compare the second setting re-runs exactly these tokens (it does not generate its own).
    CaptureFile file = make_capture_file(*model, all);
    file.relevant = req.run.relevant;
    file.n_prompt_tokens = (int)prompt.size();
    capture_settings_into(file, *model, runs, req);
    write_capture_reporting(file, a.get("--capture"), req.probs_fp16);
    // On stderr: stdout holds the generated text alone (the line ran into a redirected text).
    std::fprintf(stderr, "wrote %s: %zu prompt + %zu generated tokens%s, runs:", a.get("--capture").c_str(),
                 prompt.size(), all.size() - prompt.size(),
                 all.size() - prompt.size() < gen.size() ? (" (of " + std::to_string(gen.size()) + ")").c_str() : "");
    for (const RunCapture& r : file.runs) std::fprintf(stderr, " %s", r.name.c_str());
    std::fprintf(stderr, "\n");
  }
  return 0;
}

int cmd_inspect(int argc, char** argv) {
  Args a(argc, argv, 2, {"--help"}, {"--run", "--budget"});
  if (a.has("--help")) {
    std::printf(
        "usage: focal inspect FILE [--run NAME] [--budget SIZE]\n\nPrints a capture's tokens, runs and a table per "
        "layer "
        "and head of mean entropy (nats), normalised entropy, max probability, sink mass, tail mass and "
        "relevant mass over rows 1..T-1, and each run's prompt loss. A generation capture (focal generate\n"
        "--capture) shows where the prompt ends (|| in the tokens); its prompt loss covers the prompt's tokens only\n"
        "and the generated tokens get their own line. For a sweep file, mean metrics against t; for a stats file of "
        "focal batch,\nits documents, tokens, runs and provenance and each run's corpus means of the metrics; for a "
        "position-loss file\n(focal eval --positions), each setting's mean NLL within max_position_embeddings and "
        "past it; for a training\nor calibration log, its evaluations; for an evaluation file, its accuracy table; "
        "for a temperature file\n(focal calibrate), its provenance, losses and t by layer x head.\n"
        "  --run NAME      a capture: only this run's table\n"
        "  --budget SIZE   a capture or a sweep: memory the file may take when read, e.g. 512M, 8G (default: half\n"
        "                  the machine's memory); a file declaring more is refused before anything is allocated\n");
    return 0;
  }
  if (a.positional().size() != 1) throw UsageError{"inspect needs exactly one file"};
  const std::string path = a.positional()[0];
  const uint64_t budget = a.has("--budget") ? cli::parse_bytes(a.get("--budget"), "--budget") : 0;
  // What the file is, from its own header: a temperature file is JSON; the HDF5 files say their format.
  {
    focal::require_regular_input(path, "inspect:");
    std::ifstream head(path, std::ios::binary);
    char c = 0;
    while (head.get(c) && std::isspace((unsigned char)c)) {}
    if (head && c == '{' && a.has("--run"))  // it would be ignored
      throw UsageError{"--run picks a run of a capture; '" + path + "' is a temperature file"};
    if (head && c == '{' && a.has("--budget"))
      throw UsageError{"--budget bounds the reading of a capture or a sweep; '" + path + "' is a temperature file"};
    if (head && c == '{') return cli::inspect_temps(path);
  }
  const std::string format = focal::read_file_format(path);
  // Options the other kinds' summaries would ignore (a stats file's --run nosuch printed every run, exit 0)
  if (a.has("--run") && !format.empty() && format != focal::CaptureFile::kFormatName)
    throw UsageError{"--run picks a run of a capture; '" + path + "' is a " + format + " file"};
  if (a.has("--budget") && !format.empty() && format != focal::CaptureFile::kFormatName &&
      format != SweepFile::kFormatName)
    throw UsageError{"--budget bounds the reading of a capture or a sweep; '" + path + "' is a " + format + " file"};
  if (format == focal::batch::kStatsFormat) return cli::inspect_stats(path);
  if (format == "focalscope-position-loss") return cli::inspect_position_loss(path);
  if (format == TrainLog::kFormatName) return cli::inspect_train_log(path);
  if (format == EvalFile::kFormatName) return cli::inspect_eval(path);
  if (format == SweepFile::kFormatName) {
    const SweepFile sw = read_sweep(path, budget);
    std::printf("sweep %s: %zu temperatures, %d layers x %d heads, %zu tokens\n", path.c_str(), sw.focal_temps.size(),
                sw.n_layers, sw.n_heads, sw.token_ids.size());
    cli::print_provenance(sw);
    // The setting each t replaced the focal_temp of: per-layer / per-head overrides stay at every row.
    std::printf("swept setting %s (t below replaces its focal_temp)\n",
                TempSpec::brief_json(sw.base_spec_json).c_str());
    if (!sw.relevant.empty()) {
      std::printf("relevant keys:");
      for (int32_t k : sw.relevant) std::printf(" %d", k);
      std::printf(" (relevant mass R over them, noise 1 - R)\n");
    }
    print_sweep_header(sw);
    for (size_t s = 0; s < sw.focal_temps.size(); ++s) print_sweep_row(sw, s);
    return 0;
  }
  const CaptureFile f = read_capture(path, budget);  // a capture, or the reader's refusal naming what it is
  if (a.has("--run") &&
      std::none_of(f.runs.begin(), f.runs.end(), [&](const RunCapture& r) { return r.name == a.get("--run"); })) {
    std::string names;
    for (const RunCapture& r : f.runs) names += (names.empty() ? "" : ", ") + r.name;
    throw Error("--run: '" + path + "' has no run named '" + a.get("--run") + "'; its runs: " + names);
  }
  const int T = f.n_tokens(), P = f.prompt_end();
  std::string count = std::to_string(T) + " tokens";
  if (f.has_generated()) count += " (" + std::to_string(P) + " prompt + " + std::to_string(T - P) + " generated)";
  std::printf("capture %s: %s, %d layers x %d heads, model %s, tool %s, created %s\n", path.c_str(), count.c_str(),
              f.n_layers, f.n_heads, f.model_path.c_str(), f.tool_version.c_str(), f.created_utc.c_str());
  cli::print_computed(f);
  std::printf("tokens:");
  for (int i = 0; i < T && i < 40; ++i) {
    if (f.has_generated() && i == P) std::printf(" ||");  // where generation begins
    std::printf(" [%s]", i < (int)f.pieces.size() ? f.pieces[i].c_str() : std::to_string(f.token_ids[i]).c_str());
  }
  std::printf(T > 40 ? " ...\n" : "\n");
  if (f.has_generated())
    std::printf("generated: positions %d..%d follow the prompt%s\n", P, T - 1, P < 40 ? " (|| above)" : "");
  for (const RunCapture& r : f.runs) {
    if (a.has("--run") && r.name != a.get("--run")) continue;
    std::printf("\nrun %s  %s\n", r.name.c_str(), TempSpec::brief_json(r.temp_spec_json).c_str());
    if (r.probs.empty() && r.scores.empty())
      std::printf("  stored rows: none (metrics only)\n");
    else
      std::printf("  stored rows: %zu layers x %zu heads x %zu queries (%s%s)\n", r.layers.size(), r.heads.size(),
                  r.queries.size(), r.probs.empty() ? "" : "probs ", r.scores.empty() ? "" : "scores");
    // Prompt loss over the prompt's own tokens; a generation's tokens (the model's own choices) get their own line.
    if (P > 1)
      std::printf("  prompt loss %.4f nats/token (tokens 1..%d)\n", prompt_loss(r, P), P - 1);
    else  // left out unsaid; Python gives NaN
      std::printf("  prompt loss - (a one-token prompt has no token to predict)\n");
    if (f.has_generated())
      std::printf("  generated loss %.4f nats/token (generated tokens %d..%d)\n", generated_loss(r, P), P, T - 1);
    // A head whose override (+L=T, +L:H=T) replaced the learned tau: its tau column says so.
    TempSpec run_spec;
    try {
      run_spec = TempSpec::from_json(r.temp_spec_json, "the run's setting");
    } catch (const Error&) {  // unreadable: no head marked
    }
    auto head_overridden = [&](int l, int h) {
      return run_spec.layer_temp.count(l) > 0 || run_spec.head_temp.count({l, h}) > 0;
    };
    const bool rel = !f.relevant.empty();  // relevant mass / noise only when the capture names relevant keys
    std::printf("  %5s %4s %9s %9s %9s %9s %9s", "layer", "head", "entropy", "H/lnN", "max_p", "sink", "tail");
    if (rel) std::printf(" %9s %9s", "relevant", "noise");
    std::printf(r.tau.empty() ? "\n" : " %9s\n", "tau");
    for (int l = 0; l < f.n_layers; ++l)
      for (int h = 0; h < f.n_heads; ++h) {
        double m[kNumRowMetrics];
        for (int k = 0; k < kNumRowMetrics; ++k) m[k] = head_metric_mean(r, f.n_heads, T, l, h, k);
        // A mean over no row (relevant keys no row sees, under a sliding window) is "-", not nan.
        auto cell = [](double v) { std::isnan(v) ? std::printf(" %9s", "-") : std::printf(" %9.4f", v); };
        std::printf("  %5d %4d", l, h);
        for (int k : {kEntropyNats, kEntropyNorm, kMaxProb, kSinkMass, kTailMass}) cell(m[k]);
        if (rel) {
          cell(m[kRelevantMass]);
          cell(noise_mass((float)m[kRelevantMass]));
        }
        if (!r.tau.empty() && head_overridden(l, h)) {
          std::printf(" %9s", "override");  // its own t replaced tau (the layer's tau is other heads')
        } else if (!r.tau.empty()) {        // over rows 1..T-1 as the metrics (row 0 alone when T = 1)
          const int first = T > 1 ? 1 : 0;
          double t = 0;
          for (int i = first; i < T; ++i) t += r.tau[(size_t)l * T + i];
          std::printf(" %9.4f", t / (T - first));
        }
        std::printf("\n");
      }
  }
  for (const Comparison& cmp : f.comparisons) {
    const ComparisonMeans m = comparison_means(cmp);
    if (m.n_rows == 0)
      std::printf(
          "\ncompare %s vs %s: no compared row past query 0 (query 0 sees one key: KL = JS = 0 in every "
          "pair of runs)\n",
          cmp.run_a.c_str(), cmp.run_b.c_str());
    else
      std::printf("\ncompare %s vs %s: mean KL %.4f nats, mean JS %.4f nats over %zu rows (%s)\n", cmp.run_a.c_str(),
                  cmp.run_b.c_str(), m.kl, m.js, m.n_rows, m.rows.c_str());
  }
  return 0;
}

const char* kInitHelp = R"(usage: focal init DIR [options]

Writes a randomly initialised LlamaForCausalLM model directory (config.json, model.safetensors) — a stand-in for
demos and tests until trained models exist. Deterministic for a seed.
  --tokenizer FILE      sentencepiece tokenizer.model to copy in (sets the vocabulary size)
  --vocab N             vocabulary size without a tokenizer (default 512)
  --hidden N --layers N --heads N --kv-heads N --intermediate N --context N   (defaults 128 4 4 2 352 1024)
  --attn standard|focal|learned   attention the config declares (default standard; focal uses --temp, 0.4)
  --temp T              focal_temp for --attn focal
  --tau-mode M          sequence_mean | prefix_mean | per_token for --attn learned (default prefix_mean)
  --tau-min X --tau-max Y   learned tau bounds (default 5 and 10 scaled by sqrt(d_head/128))
  --qk-norm             add per-head q_norm / k_norm weights (Qwen3 style)
  --dtype F32|F16|BF16  (default F32)
  --seed S              (default 1)
  --force               write into a DIR that is not empty (its config.json and weights are replaced)
)";

int cmd_init(int argc, char** argv) {
  Args a(argc, argv, 2, with({"--help", "--force"}, cli::kModelFlags),
         with({"--tokenizer", "--vocab", "--dtype", "--seed"}, cli::kModelOptions));
  if (a.has("--help")) {
    std::printf("%s", kInitHelp);
    return 0;
  }
  if (a.positional().size() != 1) throw UsageError{"init needs exactly one output DIR"};
  cli::check_new_model_dir(a.positional()[0], a.has("--force"), "DIR");
  ModelConfig c = cli::model_config_from(a, cli::ArchDefaults{128, 4, 4, 2, 352, 1024});
  const std::string tok_path = a.get("--tokenizer");
  if (!tok_path.empty()) {
    auto tok = Tokenizer::load(tok_path);
    c.vocab_size = tok->vocab_size();
    c.bos_id = tok->bos_id();
    c.eos_id = tok->eos_id();
  } else {
    c.vocab_size = a.get_int32("--vocab", 512);
    c.bos_id = 1;
    c.eos_id = 2;
  }
  const std::string dir = a.positional()[0];
  const std::vector<NamedTensor> tensors = random_model_tensors(c, a.get_u64("--seed", 1));
  write_model_dir_staged(dir, [&](const std::string& stage) {  // whole or not at all, over --force's files too
    write_model_dir(stage, c, tensors, a.get("--dtype", "F32"), tok_path);
  });
  std::printf("wrote %s (%s attention)\n", dir.c_str(), attn_mode_name(c.focal.mode));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A file size limit (RLIMIT_FSIZE) makes a write fail with EFBIG, reported like a full disk ("no space left on
  // FILE", exit 1, the temporary removed), instead of killing the process half-way through a file.
  std::signal(SIGXFSZ, SIG_IGN);
  // Ctrl-C, a kill or a closed terminal during a write: the temporaries being written are removed (nothing written
  // half stays behind), then the signal does what it would have done.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction sa = {};
    sa.sa_handler = [](int s) {
      focal::remove_pending_temporaries();
      std::signal(s, SIG_DFL);
      std::raise(s);
    };
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
    std::printf("%s", kMainHelp);
    return argc < 2 ? 2 : 0;
  }
  if (std::string(argv[1]) == "--version") {
    std::printf("focal %s\nCPU GEMM: %s\n", version(), cpu_gemm_kernels());
    return 0;
  }
  // -v before the command as after it ("focal -v inspect F" read "-v" as the command).
  while (argc > 2 && (std::string(argv[1]) == "-v" || std::string(argv[1]) == "--verbose")) {
    focal::cli::g_verbose = true;
    ++argv;
    --argc;
  }
  const std::string cmd = argv[1];
  // -v / --verbose applies to every command: strip it before the command parses its options.
  int kept = 2;
  for (int i = 2; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "-v" || s == "--verbose")
      focal::cli::g_verbose = true;
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  argv[argc] = nullptr;
  try {
    if (cmd == "info") return cmd_info(argc, argv);
    if (cmd == "capture") return cmd_capture(argc, argv);
    if (cmd == "sweep") return cmd_sweep(argc, argv);
    if (cmd == "generate") return cmd_generate(argc, argv);
    if (cmd == "inspect") return cmd_inspect(argc, argv);
    if (cmd == "init") return cmd_init(argc, argv);
    if (cmd == "figure") return focal::cli::cmd_figure(argc, argv);
    if (cmd == "demo") return focal::cli::cmd_demo(argc, argv);
    if (cmd == "train") return focal::cli::cmd_train(argc, argv);
    if (cmd == "calibrate") return focal::cli::cmd_calibrate(argc, argv);
    if (cmd == "export") return focal::cli::cmd_export(argc, argv);
    if (cmd == "batch") return focal::cli::cmd_batch(argc, argv);
    if (cmd == "eval" &&
        std::any_of(argv + 2, argv + argc, [](const char* s) { return !std::strcmp(s, "--positions"); }))
      return focal::cli::cmd_eval_positions(argc, argv);
    if (cmd == "eval") return focal::cli::cmd_eval(argc, argv, &temp_spec_from);
    std::fprintf(stderr, "focal: error: unknown command '%s' (see focal --help)\n", cmd.c_str());
    return 2;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "focal %s: error: %s (see focal %s --help)\n", cmd.c_str(), e.msg.c_str(), cmd.c_str());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "focal %s: error: %s\n", cmd.c_str(), with_flag(e).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "focal %s: internal error: %s\n", cmd.c_str(), e.what());
    return 3;
  }
}
