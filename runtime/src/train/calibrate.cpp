// focal calibrate's loop: log t per model / layer / head by Adam on the next-token loss of text windows, every
// weight frozen (train/calib_grad.cpp), held-out loss, a JSON checkpoint swapped in by rename, the training-log
// HDF5 of the trainer and the temperature file. Deterministic: the windows of step s are a function of (seed, s).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "focal/atomic_file.h"
#include "focal/calibrate.h"
#include "focal/error.h"
#include "focal/tokenizer.h"
#include "focal/model.h"
#include "focal/model_writer.h"
#include "focal/trainer.h"
#include "fnv1a.h"
#include "focal_kernels/backward.h"
#include "train/calib_grad.h"
#include "train/checkpoint.h"

namespace focal {

using json = nlohmann::json;

namespace {

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// The ids' little-endian bytes (x86-64 holds them so).
uint64_t fnv1a_tokens(const std::vector<int32_t>& ids) {
  return fnv1a_fold(kFnv1aOffset, ids.data(), ids.size() * sizeof(int32_t));
}

void validate(const CalibConfig& c, const ModelConfig& mc) {
  check_calib_options(c);
  if (c.seq_len > mc.max_positions)
    throw Error("seq_len", "seq_len = " + num(c.seq_len) +
                               " exceeds the model's context, max_positions = " + num(mc.max_positions));
}

// Adam's learning rate at `step`: cosine from lr to 10 % of it at `steps`.
double calib_lr(const CalibConfig& c, int step) {
  const double prog = std::min(1.0, step / (double)std::max(1, c.steps));
  return c.lr * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * prog)));
}

// The options that shape the run: a resume must give the same ones.
json run_json(const CalibConfig& c, uint64_t data_checksum, uint64_t base_checksum) {
  json j;
  j["kind"] = "calibration";
  j["granularity"] = calib_granularity_name(c.granularity);
  j["steps"] = c.steps;
  j["batch"] = c.batch;
  j["seq_len"] = c.seq_len;
  j["lr"] = c.lr;
  j["val_frac"] = c.val_frac;
  j["val_windows"] = c.val_windows;
  j["eval_every"] = c.eval_every;
  j["init_temp"] = c.init_temp;
  j["seed"] = c.seed;
  j["data"] = c.data_path;
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)data_checksum);
  j["data_token_checksum"] = b;
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)base_checksum);
  j["base_checksum"] = b;
  return j;
}

// Every difference between the checkpoint's run and this one, "name X (run) vs Y (now)", comma-separated.
std::string run_differences(const json& was, const json& now) {
  std::string out;
  for (const auto& [k, v] : now.items()) {
    if (k == "data") continue;  // the path may move; the token checksum says whether it is the same data
    if (!was.contains(k) || was.at(k) != v)
      out += (out.empty() ? "" : ", ") + k + " " + (was.contains(k) ? was.at(k).dump() : "(none)") + " (run) vs " +
             v.dump() + " (now)";
  }
  return out;
}

}  // namespace

void check_calib_options(const CalibConfig& c) {
  auto need = [](bool ok, const char* field, const std::string& msg) {
    if (!ok) throw Error(field, msg);
  };
  need(!c.out_path.empty(), "out_path", "give the temperature file to write (-o FILE)");
  need(c.steps > 0, "steps", "steps = " + num(c.steps) + " must be positive");
  need(c.batch > 0, "batch", "batch = " + num(c.batch) + " must be positive");
  need(c.seq_len >= 2, "seq_len", "seq_len = " + num(c.seq_len) + " must be at least 2");
  need(c.lr > 0 && std::isfinite(c.lr), "lr", "lr = " + num(c.lr) + " must be a positive number");
  need(c.val_frac > 0 && c.val_frac < 1, "val_frac", "val_frac = " + num(c.val_frac) + " must be in (0, 1)");
  need(c.val_windows > 0, "val_windows", "val_windows = " + num(c.val_windows) + " must be positive");
  need(c.eval_every > 0, "eval_every", "eval_every = " + num(c.eval_every) + " must be positive");
  need(temp_in_range(c.init_temp), "init_temp", "init_temp = " + num(c.init_temp) + " " + kTempRangeText);
  const std::string ckpt_path = c.out_path + ".ckpt.json";
  if (c.resume && !path_exists(ckpt_path))
    throw Error("resume", "resume: '" + ckpt_path + "' does not exist: no calibration to continue (run without " +
                              "--resume to start one)");
  if (!c.resume && path_exists(ckpt_path))
    throw Error("out_path", "'" + ckpt_path + "' holds a calibration checkpoint; continue it with --resume, or " +
                                "remove it to start again");
}

double calib_log_t_per_tau(const TrainLog& log) {
  try {
    const json j = json::parse(log.train_config_json);
    if (!j.is_object() || j.value("kind", std::string()) != "calibration") return 0.0;
    const ModelConfig mc = parse_config(log.model_config_json, "training log '" + log.run_name + "'");
    return mc.d_head > 0 ? 1.0 / std::sqrt((double)mc.d_head) : 0.0;
  } catch (const std::exception&) { return 0.0; }
}

std::string calib_log_path(const std::string& out_path) {
  std::string stem = out_path;
  if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".json") == 0) stem.resize(stem.size() - 5);
  return stem + ".log.h5";
}

CalibWindows split_calib_windows(const std::vector<int32_t>& tokens, int seq_len, double val_frac,
                                 const std::string& what) {
  const size_t n = seq_len > 0 ? tokens.size() / (size_t)seq_len : 0;
  if (n < 2)
    throw Error("data", what + " holds " + std::to_string(tokens.size()) + " tokens; calibration needs at least 2 x " +
                            "seq_len = " + std::to_string(2 * (size_t)seq_len) +
                            " (a training and a held-out window): give more text or a smaller --seq-len");
  const size_t n_val = std::min(n - 1, std::max<size_t>(1, (size_t)std::floor(val_frac * (double)n)));
  CalibWindows w;
  for (size_t i = 0; i < n; ++i) {
    std::vector<int32_t> win(tokens.begin() + (ptrdiff_t)(i * seq_len),
                             tokens.begin() + (ptrdiff_t)((i + 1) * seq_len));
    (i < n - n_val ? w.train : w.val).push_back(std::move(win));
  }
  return w;
}

std::vector<int32_t> load_calib_tokens(const Model& model, const std::string& path) {
  require_not_directory(path, "data file");  // a directory read as an empty file; a pipe is fine
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("data", "data file '" + path + "' cannot be opened: " + std::strerror(errno) +
                            "; give a UTF-8 text file (or .jsonl with a \"text\" field per line)");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  // Latin-1 or UTF-16 text would calibrate on the byte-level tokens of mis-decoded characters, without a word.
  require_utf8_text(text, "data file '" + path + "'", "data");
  const bool jsonl = path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  if (jsonl) {
    std::string joined, line;
    std::istringstream ls(text);
    int line_no = 0;
    while (std::getline(ls, line)) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        const json j = json::parse(line);
        joined += j.at("text").get<std::string>() + "\n\n";
      } catch (const json::exception& e) {
        throw Error("data", "data file '" + path + "' line " + std::to_string(line_no) +
                                ": not a JSON object with a \"text\" string (" + e.what() + ")");
      }
    }
    text.swap(joined);
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw Error("data", "data file '" + path + "' is empty; give a UTF-8 text file to calibrate on");
  const Tokenizer& tok = model.require_tokenizer();
  // The whole text in one call, as capture, eval and Python tokenize it: pieces cut at paragraph breaks ended in
  // "\n\n", which a byte-level BPE spells as one token there and as two inside the text (SmolLM2: 9864 tokens against
  // 9877), so the held-out loss was of a token stream no other command sees. Encoding is linear in the text (2 MB of
  // SmolLM2 text in 0.7 s).
  const bool bos = model.config().add_bos && tok.bos_id() >= 0;
  return tok.encode(text, bos);
}

namespace {

// Sums tau / sqrt(d_head) of every row per layer (learned mode).
struct TauSumObserver : ForwardObserver {
  std::vector<double>* sum = nullptr;  // [n_layers]
  double sqrt_d = 1.0;
  void on_layer(const LayerRecord& rec) override {
    if (rec.tau)
      for (int i = 0; i < rec.n_tokens; ++i) (*sum)[rec.layer] += rec.tau[i] / sqrt_d;
  }
};

}  // namespace

double calib_val_loss(const Model& model, const std::vector<std::vector<int32_t>>& windows, const TempSpec& spec,
                      std::vector<double>* layer_t) {
  double loss = 0.0;
  size_t n = 0, rows = 0;
  TauSumObserver obs;
  obs.sqrt_d = std::sqrt((double)model.config().d_head);
  if (layer_t) {
    layer_t->assign(model.config().n_layers, 0.0);
    obs.sum = layer_t;
  }
  for (const std::vector<int32_t>& w : windows) {
    Session s(model, (int)w.size());
    std::vector<float> logits;  // [T, V]
    s.forward(w.data(), (int)w.size(), spec, RunOptions{}, layer_t ? &obs : nullptr, &logits);
    rows += w.size();
    std::vector<float> dl(logits.size());
    loss +=
        ops::cross_entropy<float>(logits.data(), w.data(), (int)w.size(), model.config().vocab_size, 1.0, dl.data());
    n += w.size() - 1;
  }
  if (layer_t)
    for (double& t : *layer_t) t /= (double)std::max<size_t>(1, rows);
  return loss / (double)std::max<size_t>(1, n);
}

TempFile calibrate(const Model& model, const std::vector<int32_t>& tokens, const CalibConfig& cfg,
                   const std::function<void(const CalibProgress&)>& progress) {
  const ModelConfig& mc = model.config();
  // One calibration writes an -o at a time (two shared its checkpoint and log, and one's result was lost); taken
  // before the checks of its checkpoint, which another run may be writing.
  const OutDirLock lock(cfg.out_path, "focal calibrate", "out_path");
  validate(cfg, mc);
  const std::vector<std::string> gaps = calibration_gaps(mc, cfg.seq_len);
  if (!gaps.empty()) {
    std::string list;
    for (const std::string& g : gaps) list += (list.empty() ? "" : ", ") + g;
    throw Error("model", "'" + model.path() + "' (" + mc.arch.name + ") cannot be calibrated: the frozen-weight " +
                             "backward does not cover " + list + "; calibration takes LLaMA-layout models " +
                             "(RMSNorm, SwiGLU, RoPE with or without scaling; q/k/v biases, QK-norm per head and a " +
                             "sliding window no narrower than --seq-len are fine)");
  }
  if (model.device() != Device::kCpu)
    throw Error("device", "calibration runs on the CPU only; load the model with --device cpu");
  const CalibWindows win = split_calib_windows(tokens, cfg.seq_len, cfg.val_frac, "the data '" + cfg.data_path + "'");
  std::vector<std::vector<int32_t>> val;  // evenly spaced held-out windows
  {
    const size_t n = std::min(win.val.size(), (size_t)cfg.val_windows);
    for (size_t i = 0; i < n; ++i) val.push_back(win.val[win.val.size() * i / n]);
  }
  const uint64_t data_sum = fnv1a_tokens(tokens), base_sum = model.weights_checksum();
  const json run = run_json(cfg, data_sum, base_sum);
  const std::string ckpt_path = cfg.out_path + ".ckpt.json";
  const std::string log_path = cfg.log_path.empty() ? calib_log_path(cfg.out_path) : cfg.log_path;

  TempParams params = TempParams::uniform(cfg.granularity, mc, cfg.init_temp);
  const size_t P = params.theta.size();
  const bool tau_proj = cfg.granularity == CalibGranularity::kTauProj;
  std::vector<float> last_t = params.head_temps();  // [n_layers, n_heads] t at the last evaluation (file summary)
  std::vector<double> adam_m(P, 0.0), adam_v(P, 0.0);
  int step0 = 0;
  double val_loss_init = 0.0, last_val = 0.0;
  TrainLog log;
  bool wrote_log = false;  // whether this process wrote log_path (a full disk removes only its own log)
  if (cfg.resume) {        // the checkpoint is there (validate)
    json ck;
    try {
      std::ifstream in(ckpt_path);
      ck = json::parse(in);
      const std::string diffs = run_differences(ck.at("run"), run);
      if (!diffs.empty())
        throw Error("resume", "resume: the options differ from the run in '" + ckpt_path + "': " + diffs +
                                  "; resume with the command that started it, or write to another -o");
      step0 = ck.at("step").get<int>();
      params.theta = ck.at(ck.contains("theta") ? "theta" : "log_temp").get<std::vector<double>>();
      adam_m = ck.at("adam_m").get<std::vector<double>>();
      adam_v = ck.at("adam_v").get<std::vector<double>>();
      val_loss_init = ck.at("val_loss_init").get<double>();
      last_val = ck.at("val_loss").get<double>();
    } catch (const json::exception& e) {
      throw Error("resume", "resume: '" + ckpt_path + "' is not a calibration checkpoint (" + e.what() + ")");
    }
    if (params.theta.size() != P || adam_m.size() != P || adam_v.size() != P)
      throw Error("resume", "resume: '" + ckpt_path + "' holds " + std::to_string(params.theta.size()) +
                                " temperatures, this model and granularity " + std::to_string(P));
    if (step0 >= cfg.steps)  // the run reached its end, then stopped before the temperature file was written
      throw Error("resume", "resume: the checkpoint is already at step " + std::to_string(step0) +
                                " (steps = " + std::to_string(cfg.steps) + "): the run finished but its temperature " +
                                "file was not written; remove '" + ckpt_path + "' and run the command again");
    try {
      log = read_train_log(log_path);
    } catch (const Error& e) {  // removed or damaged since: said with what to do (it named the file alone)
      throw Error("resume", "resume: the run's training log cannot be read (" + std::string(e.what()) +
                                "): put it back, or remove '" + ckpt_path +
                                "' and run without --resume to start again");
    }
    // A crash between the log and the checkpoint leaves the log a row ahead: keep what the checkpoint covers.
    size_t rows = 0;
    while (rows < log.eval_step.size() && log.eval_step[rows] <= step0) ++rows;
    for (auto* v : {&log.train_loss, &log.val_loss, &log.lr, &log.grad_norm, &log.tokens_per_s, &log.tau_clip_frac})
      v->resize(rows);
    log.eval_step.resize(rows);
    log.tau_mean.resize(rows * (size_t)mc.n_layers);
  } else {  // no checkpoint to throw away (validate)
    val_loss_init = last_val = calib_val_loss(model, val, params.spec());
    // Row 0 of the log: the start (no training loss, gradient or speed yet), so a figure shows where it began.
    log.eval_step.push_back(0);
    log.train_loss.push_back(NAN);
    log.val_loss.push_back((float)val_loss_init);
    log.lr.push_back((float)calib_lr(cfg, 0));
    log.grad_norm.push_back(NAN);
    log.tokens_per_s.push_back(NAN);
    log.tau_mean.insert(log.tau_mean.end(), (size_t)mc.n_layers, (float)(cfg.init_temp * std::sqrt((double)mc.d_head)));
    log.tau_clip_frac.push_back(NAN);
  }
  log.run_name = cfg.out_path.substr(cfg.out_path.rfind('/') + 1);
  log.train_config_json = run.dump();
  log.model_config_json = config_to_json(mc);
  log.tool_version = version();
  log.n_layers = mc.n_layers;
  log.step_loss.resize(std::min<size_t>(log.step_loss.size(), (size_t)step0));

  // `step`: the 0-based index of the step that failed, shown 1-based as the progress line counts, with the learning
  // rate that step used (it named the next step's).
  auto fail = [&](const std::string& what, int step) {
    const std::string kept =
        path_exists(ckpt_path)
            ? "the last good checkpoint '" + ckpt_path + "' is kept (continue from it with --resume, or lower --lr " +
                  "and start again)"
            : "no checkpoint was written yet (the first is at step " + std::to_string(cfg.eval_every) + ")";
    throw Error("calibration diverged: " + what + " at step " + std::to_string(step + 1) + " (learning rate " +
                num(calib_lr(cfg, step)) + "); nothing else is written; " + kept);
  };

  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  const int V = mc.vocab_size;
  (void)V;
  const auto t0 = std::chrono::steady_clock::now();
  auto t_last = t0;
  double tokens_since = 0.0, loss_since = 0.0;
  int steps_since = 0;
  CalibProgress pr;
  pr.steps = cfg.steps;
  double train_loss = 0.0, gnorm = 0.0;
  for (int step = step0; step < cfg.steps; ++step) {
    std::mt19937_64 rng(cfg.seed * 0x9E3779B97F4A7C15ULL + (uint64_t)step * 0xBF58476D1CE4E5B9ULL + 7);
    std::uniform_int_distribution<size_t> pick(0, win.train.size() - 1);
    std::vector<size_t> idx(cfg.batch);
    for (size_t& i : idx) i = pick(rng);
    double n_total = 0.0;
    for (size_t i : idx) n_total += (double)win.train[i].size() - 1;
    std::vector<double> grad(P, 0.0), layer_t_sum(mc.n_layers, 0.0);
    double loss = 0.0;
    for (size_t i : idx)
      loss += calib_loss_and_grad(model, win.train[i].data(), (int)win.train[i].size(), params, n_total, grad,
                                  tau_proj ? &layer_t_sum : nullptr);
    loss /= n_total;
    double sq = 0.0;
    for (double g : grad) sq += g * g;
    if (!std::isfinite(loss) || !std::isfinite(sq)) fail("the loss is " + num(loss), step);
    train_loss = loss;
    gnorm = std::sqrt(sq);
    const double lr = calib_lr(cfg, step);
    const double bc1 = 1.0 - std::pow(beta1, step + 1), bc2 = 1.0 - std::pow(beta2, step + 1);
    for (size_t p = 0; p < P; ++p) {
      adam_m[p] = beta1 * adam_m[p] + (1.0 - beta1) * grad[p];
      adam_v[p] = beta2 * adam_v[p] + (1.0 - beta2) * grad[p] * grad[p];
      params.theta[p] -= lr * params.lr_mult(p) * (adam_m[p] / bc1) / (std::sqrt(adam_v[p] / bc2) + eps);
    }
    for (float t : params.head_temps())
      if (!std::isfinite(t) || (!tau_proj && !temp_in_range(t)))
        fail("a temperature left the range a run takes, [1e-6, 1e6] (t = " + num(t) + ")", step);
    log.step_loss.push_back((float)loss);
    tokens_since += n_total + (double)idx.size();
    loss_since += loss;
    ++steps_since;

    const auto now = std::chrono::steady_clock::now();
    pr.step = step + 1;
    pr.train_loss = loss;
    pr.grad_norm = gnorm;
    pr.lr = lr;
    pr.tokens_per_s = tokens_since / std::max(1e-9, std::chrono::duration<double>(now - t_last).count());
    pr.eta_s = std::chrono::duration<double>(now - t0).count() / (step + 1 - step0) * (cfg.steps - step - 1);
    std::vector<float> t = params.head_temps();  // tau-proj: each layer's mean t over this step's rows
    if (tau_proj)
      for (int l = 0; l < mc.n_layers; ++l)
        std::fill_n(t.begin() + (ptrdiff_t)l * mc.n_heads, mc.n_heads,
                    (float)(layer_t_sum[l] / (n_total + (double)idx.size())));
    pr.temp_min = *std::min_element(t.begin(), t.end());
    pr.temp_max = *std::max_element(t.begin(), t.end());
    pr.val_loss = -1.0;
    if ((step + 1) % cfg.eval_every == 0 || step + 1 == cfg.steps) {
      std::vector<double> val_t;  // tau-proj: each layer's mean t over the held-out rows
      const double vl = calib_val_loss(model, val, params.spec(), tau_proj ? &val_t : nullptr);
      if (tau_proj)
        for (int l = 0; l < mc.n_layers; ++l)
          std::fill_n(t.begin() + (ptrdiff_t)l * mc.n_heads, mc.n_heads, (float)val_t[l]);
      last_t = t;
      if (!std::isfinite(vl)) fail("the held-out loss is " + num(vl), step);
      last_val = pr.val_loss = vl;
      log.eval_step.push_back(step + 1);
      log.train_loss.push_back((float)(loss_since / steps_since));
      log.val_loss.push_back((float)vl);
      log.lr.push_back((float)lr);
      log.grad_norm.push_back((float)gnorm);
      log.tokens_per_s.push_back((float)pr.tokens_per_s);
      // tau = t sqrt(d_head) (the learned temperature's unit), mean over the layer's heads
      for (int l = 0; l < mc.n_layers; ++l) {
        double s = 0.0;
        for (int h = 0; h < mc.n_heads; ++h) s += t[(size_t)l * mc.n_heads + h];
        log.tau_mean.push_back((float)(s / mc.n_heads * std::sqrt((double)mc.d_head)));
      }
      log.tau_clip_frac.push_back(NAN);
      // A full disk at either write: say what is left for a resume, and leave no log without a checkpoint.
      const bool had_checkpoint = path_exists(ckpt_path);
      try {
        write_train_log(log, log_path);
        wrote_log = true;  // this process's log now: removing it below deletes no earlier run's
        json ck;
        ck["format"] = "focalscope-calibration-checkpoint";
        ck["run"] = run;
        ck["step"] = step + 1;
        ck["theta"] = params.theta;
        ck["adam_m"] = adam_m;
        ck["adam_v"] = adam_v;
        ck["val_loss_init"] = val_loss_init;
        ck["val_loss"] = vl;
        write_file_atomically(ckpt_path, ck.dump() + "\n", {.fsync = true});
      } catch (const Error& e) {
        const std::string once = std::string(e.what()).find("no space left") != std::string::npos
                                     ? "once there is space"
                                     : "once the cause above is fixed";
        if (had_checkpoint)
          throw Error(std::string(e.what()) + " — the checkpoint of the last evaluation in '" + ckpt_path +
                      "' and its log are kept: run the same command with --resume " + once);
        const bool drop_log = !cfg.resume && wrote_log;  // no checkpoint to resume from: the log alone is no use
        if (drop_log) std::remove(log_path.c_str());
        throw Error(std::string(e.what()) + " — no checkpoint was saved yet" +
                    (drop_log ? ", so the log '" + log_path + "' was removed too" : std::string()) +
                    ": run the command again " + once);
      }
      tokens_since = loss_since = 0.0;
      steps_since = 0;
      t_last = std::chrono::steady_clock::now();
    }
    if (progress) progress(pr);
  }

  TempFile f;
  f.granularity = cfg.granularity;
  f.n_layers = mc.n_layers;
  f.n_heads = mc.n_heads;
  f.n_kv_heads = mc.n_kv_heads;
  f.d_head = mc.d_head;
  f.hidden = mc.hidden;
  f.vocab_size = mc.vocab_size;
  f.focal_temp = last_t;
  f.tau_proj = params.tau_proj();
  f.base_model = model.path();
  f.base_checksum = base_sum;
  f.data_path = cfg.data_path;
  f.data_checksum = data_sum;
  f.n_train_tokens = (int64_t)win.train.size() * cfg.seq_len;
  f.n_val_tokens = (int64_t)val.size() * cfg.seq_len;
  f.steps = cfg.steps;
  f.seq_len = cfg.seq_len;
  f.batch = cfg.batch;
  f.lr = cfg.lr;
  f.seed = cfg.seed;
  f.init_temp = cfg.init_temp;
  f.val_loss_init = val_loss_init;
  f.val_loss = last_val;
  f.train_loss = train_loss;
  write_temp_file(f, cfg.out_path);
  // The run is complete and its result is in the temperature file: the checkpoint would only make the same command
  // refuse to run again ("continue it with --resume", which then said the run was already at its last step).
  std::remove(ckpt_path.c_str());
  return f;
}

}  // namespace focal
