// `focal train` and `focal eval`: training the small standard / focal / learned-temperature models and evaluating
// them (loss, perplexity, retrieval accuracy and relevant-token attention mass by context length).
#include <cmath>
#include <csignal>
#include <chrono>
#include <unistd.h>
#include <cstdio>

#include "args.h"
#include "device_option.h"
#include "output_option.h"
#include "model_options.h"
#include "focal/error.h"
#include "focal/progress.h"
#include "focal/eval.h"
#include "focal/model.h"
#include "focal/model_writer.h"
#include "focal/trainer.h"

namespace focal::cli {

namespace {

const char* kTrainHelp = R"(usage: focal train --data DIR --out DIR [options]

Trains a LLaMA-style model on the CPU from the data made by scripts/data/build_data.py (docs/data.md): text
windows mixed with synthetic retrieval tasks. AdamW (beta 0.9/0.95, weight decay on matrices only), gradient-norm
clip, linear warm-up then cosine decay to 10 % of the peak. Every --eval-every steps: validation loss, a row of
DIR/train_log.h5 and a checkpoint (an HF model directory: config.json, model.safetensors, tokenizer.model,
optimizer.safetensors, trainer_state.json), swapped in atomically. Deterministic for a seed and thread count
(OMP_NUM_THREADS).

attention:
  --attn standard|focal|learned   (default standard)
  --temp T              focal temperature for --attn focal (default 0.4)
  --tau-mode M          prefix_mean (default) | per_token | sequence_mean (non-causal) for --attn learned
  --tau-min X --tau-max Y   learned tau bounds (default 5 and 10 scaled by sqrt(d_head/128))
  --tau-lr-mult X       learning rate of tau_proj = X * --lr (default 1)
architecture:
  --hidden N --layers N --heads N --kv-heads N --intermediate N --context N  (defaults 192 4 6 2 512 2048)
  --qk-norm
  --rope-theta X        RoPE base (default 10000); larger bases rotate the slow dimensions less over a context
  --attn-bias           biases on q/k/v/o_proj (config attention_bias), zero at the start
optimisation:
  --steps N (1000) --batch N (8) --seq-len N (256) --lr X (3e-3) --warmup N (100) --weight-decay X (0.05)
  --grad-clip X (1.0) --task-frac X (0.25) --seed S (1) --eval-every N (100) --eval-sequences N (16)
  --task-kinds K,...    train on these task kinds only: kv, mqar, needle, prev (default all)
  --task-loss all|answers   the loss of a task sequence: every token (default) or its answer tokens only
  (the validation loss is on --eval-sequences windows of DIR/text_val.bin; with --task-frac 1 the model sees no
   text, so it is on that many held-out tasks of DIR/tasks_eval.jsonl that fit --seq-len, over the rows that
   --task-loss counts, and learned tau is measured on them too; the progress line then says val(tasks))
  --init-std X          standard deviation of the initial weights (default 0.02; residual outputs / sqrt(2 layers))
  --init-from DIR       start from this model's weights (a curriculum stage, e.g. a 1-layer model trained on the
                        prev drill): tensors of the same name are copied, the others initialised as usual
  --resume              continue the checkpoint in --out from its step: give the command that started it plus
                        --resume (options that differ from the run's are refused, each named)
Ctrl-C (or SIGTERM) saves the step under way as a checkpoint and stops (exit 130); --resume goes on from it exactly.
)";

const char* kEvalHelp = R"(usage: focal eval MODEL --data DIR [-o EVAL.h5] [options]

Validation loss and perplexity on held-out text (DIR/text_val.bin), retrieval accuracy by task kind and context
length (DIR/tasks_eval.jsonl, lengths beyond training included; tasks longer than the model's context are skipped),
and the mean attention mass on the relevant tokens (and entropy) at each answer's query row, per layer.
  --val-seq-len N      validation window (default 256, or the model's context when shorter)
  --val-sequences N    validation windows (default 32)
  --max-tasks N        tasks per (kind, length) (default all)
  --tasks eval|distract  eval (default): DIR/tasks_eval.jsonl by context length; distract: DIR/tasks_distract.jsonl
                       (kv and mqar at 256 tokens) by the number of distractor pairs
  temperature options as for capture (--mode, --temp, --tau-scale, ...): evaluate under another setting
  --positions          instead: next-token loss by position over long documents under several settings
                       (focal eval --positions --help)
)";

}  // namespace

namespace {
// Set by the first Ctrl-C / SIGTERM of a training run; the handlers it replaced (main.cpp's: remove the temporaries
// being written, then die), put back for the next one.
volatile std::sig_atomic_t g_train_stop = 0;
struct sigaction g_prev_int = {}, g_prev_term = {};
}  // namespace

int cmd_train(int argc, char** argv) {
  std::set<std::string> flags = {"--help", "--resume", "--attn-bias"},
                        opts = {"--data",      "--output",      "--out",        "--steps",          "--batch",
                                "--seq-len",   "--lr",          "--warmup",     "--weight-decay",   "--grad-clip",
                                "--task-frac", "--seed",        "--eval-every", "--eval-sequences", "--task-kinds",
                                "--init-std",  "--tau-lr-mult", "--task-loss",  "--init-from",      "--rope-theta"};
  flags.insert(kModelFlags.begin(), kModelFlags.end());
  opts.insert(kModelOptions.begin(), kModelOptions.end());
  Args a(argc, argv, 2, flags, opts);
  if (a.has("--help")) {
    std::printf("%s", kTrainHelp);
    return 0;
  }
  if (!a.positional().empty()) throw UsageError{"train takes no positional arguments (use --data and --out)"};
  if (!a.has("--data")) throw UsageError{"give the data directory with --data DIR"};
  TrainConfig tc;
  tc.data_dir = a.get("--data");
  tc.out_dir = a.has("--out") ? a.get("--out") : a.get("--output");
  if (tc.out_dir.empty()) throw UsageError{"give the checkpoint directory with --out DIR"};
  tc.resume = a.has("--resume");
  tc.model = model_config_from(a, ArchDefaults{192, 4, 6, 2, 512, 2048});
  tc.model.attention_bias = a.has("--attn-bias");
  tc.model.rope_theta = (float)a.get_double("--rope-theta", 10000.0);
  if (!(tc.model.rope_theta > 1.0f) || !std::isfinite(tc.model.rope_theta))
    throw UsageError{"--rope-theta: give a RoPE base above 1 (default 10000)"};
  tc.model.rms_eps = 1e-5f;
  tc.steps = a.get_int32("--steps", 1000);
  tc.batch = a.get_int32("--batch", 8);
  tc.seq_len = a.get_int32("--seq-len", 256);
  tc.lr = (float)a.get_double("--lr", 3e-3);
  tc.warmup_steps = a.get_int32("--warmup", 100);
  tc.weight_decay = (float)a.get_double("--weight-decay", 0.05);
  tc.grad_clip = (float)a.get_double("--grad-clip", 1.0);
  tc.task_frac = (float)a.get_double("--task-frac", 0.25);
  for (const std::string& k : split_names(a.get("--task-kinds"))) {
    if (k != "kv" && k != "mqar" && k != "needle" && k != "prev")
      throw UsageError{"--task-kinds: '" + k +
                       "' is not a task kind; give a comma-separated list of kv, mqar, needle, prev"};
    tc.task_kinds.push_back(k);
  }
  tc.tau_lr_mult = (float)a.get_double("--tau-lr-mult", 1.0);
  tc.init_std = (float)a.get_double("--init-std", 0.02);
  tc.init_from = a.get("--init-from");
  if (tc.resume && !tc.init_from.empty())
    throw UsageError{"--init-from starts a new run; --resume continues one: give only one of them"};
  const std::string task_loss = a.get("--task-loss", "all");
  if (task_loss != "all" && task_loss != "answers")
    throw UsageError{"--task-loss: use all (every token of a task sequence) or answers (its answer tokens only)"};
  tc.task_loss_answers = task_loss == "answers";
  tc.seed = a.get_u64("--seed", 1);
  tc.eval_every = a.get_int32("--eval-every", 100);
  tc.eval_sequences = a.get_int32("--eval-sequences", 16);

  // On a terminal the step line is rewritten in place; in a log (not a terminal) it is a whole line at most every
  // 5 s, besides every evaluation line.
  const bool tty = ::isatty(::fileno(stderr)) == 1;
  auto last_line = std::chrono::steady_clock::now() - std::chrono::hours(1);
  // Ctrl-C (or SIGTERM, a scheduler's end of the job) asks for a stop: the step under way finishes and is saved as a
  // checkpoint, then the run ends. A second one ends the process at once (main.cpp's handler).
  g_train_stop = 0;
  struct sigaction sa = {};
  sa.sa_handler = [](int sig) {
    g_train_stop = 1;
    sigaction(sig, sig == SIGINT ? &g_prev_int : &g_prev_term, nullptr);
  };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_prev_int);
  sigaction(SIGTERM, &sa, &g_prev_term);
  const int done = train(
      tc,
      [&](const TrainProgress& p) {
        const char* cr = tty ? "\r" : "";
        const auto now = std::chrono::steady_clock::now();
        if (p.val_loss >= 0) {
          std::fprintf(stderr, "%sstep %6d/%d  step loss %.4f  %s %.4f  lr %.2e  |g| %.3f  %.0f tok/s  ETA %.0fs", cr,
                       p.step, p.steps, p.train_loss, p.val_on_tasks ? "val(tasks)" : "val", p.val_loss, p.lr,
                       p.grad_norm, p.tokens_per_s, p.eta_s);
          if (!p.tau_mean.empty() && !std::isnan(p.tau_mean[0])) {
            std::fprintf(stderr, "  tau");
            for (float t : p.tau_mean) std::fprintf(stderr, " %.2f", t);
            std::fprintf(stderr, " (clipped %.0f%%)", 100.0 * p.tau_clip_frac);
          }
          std::fprintf(stderr, "\n");
          last_line = now;
        } else if (tty) {
          std::fprintf(stderr, "\rstep %6d/%d  step loss %.4f  lr %.2e  |g| %.3f  %.0f tok/s  ETA %.0fs   ", p.step,
                       p.steps, p.train_loss, p.lr, p.grad_norm, p.tokens_per_s, p.eta_s);
        } else if (now - last_line >= std::chrono::seconds(5) || p.step == p.steps) {
          std::fprintf(stderr, "step %6d/%d  step loss %.4f  lr %.2e  |g| %.3f  %.0f tok/s  ETA %.0fs\n", p.step,
                       p.steps, p.train_loss, p.lr, p.grad_norm, p.tokens_per_s, p.eta_s);
          last_line = now;
        }
        std::fflush(stderr);
      },
      [] { return g_train_stop != 0; });
  std::string out = tc.out_dir;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  std::printf("checkpoint: %s (train log %s/train_log.h5)\n", out.c_str(), out.c_str());
  if (done < tc.steps) {
    std::fprintf(stderr,
                 "%sfocal train: stopped at step %d of %d (interrupted); its checkpoint is saved: run the same "
                 "command with --resume to go on\n",
                 tty ? "\n" : "", done, tc.steps);
    return 130;
  }
  return 0;
}

int cmd_eval(int argc, char** argv, TempSpec (*spec_from)(const Args&, const ModelConfig&)) {
  Args a(argc, argv, 2, {"--help", kLoadFlag, kMmapFlag},
         {"--data", "--output", "--val-seq-len", "--val-sequences", "--max-tasks", "--tasks", "--mode", "--temp",
          "--layer-temp", "--head-temp", "--tau-scale", "--ssmax-s", kDeviceOption, kWeightsOption, kPrecisionOption});
  if (a.has("--help")) {
    std::printf("%s%s", kEvalHelp, kDeviceHelp);
    return 0;
  }
  if (!a.has("--data")) throw UsageError{"give the data directory with --data DIR"};
  if (a.has("--output")) check_output(a.get("--output"));  // before the evaluation runs, not after it
  check_outputs_apart(a, {"--output"}, {model_arg(a, "eval")});
  auto model = load_model(a, model_arg(a, "eval"));
  const TempSpec spec = spec_from(a, model->config());
  EvalOptions opt;
  opt.data_dir = a.get("--data");
  opt.val_seq_len = a.get_int32("--val-seq-len", 0);  // 0: 256, or the model's context when shorter
  if (a.has("--val-seq-len") && opt.val_seq_len < 2)
    throw Error("--val-seq-len " + a.get("--val-seq-len") + ": give a window of at least 2 tokens");
  opt.val_sequences = a.get_int32("--val-sequences", 32);
  opt.max_tasks = a.get_int32("--max-tasks", 0);
  if (opt.max_tasks < 0) throw UsageError{"--max-tasks must be >= 0 (0: every task)"};
  opt.task_set = a.get("--tasks", "eval");
  if (opt.task_set != "eval" && opt.task_set != "distract")
    throw UsageError{"--tasks: use eval (tasks by context length) or distract (by number of distractor pairs)"};
  ProgressReporter prog("eval:");
  EvalFile e = evaluate(*model, spec, opt, [&](int d, int t) { prog.update(d, t); });
  std::printf("model %s (%s)\nvalidation loss %.4f nats/token, perplexity %.2f over %lld tokens\n",
              e.model_path.c_str(), spec.label().c_str(), e.val_loss, e.val_ppl, (long long)e.val_tokens);
  std::printf("\n%-8s %11s %6s %9s   relevant mass R by layer at the query row (noise = 1 - R)\n", "task",
              e.x_axis.c_str(), "n", "accuracy");
  const size_t Ln = e.lengths.size(), L = e.n_layers;
  for (size_t k = 0; k < e.task_kinds.size(); ++k)
    for (size_t li = 0; li < Ln; ++li) {
      const int n = e.n_answers[k * Ln + li];
      std::printf("%-8s %11d %6d", e.task_kinds[k].c_str(), e.lengths[li], n);
      if (n == 0) {  // no task of this length ran (longer than the context): nothing measured, not a NaN
        std::printf(" %9s   (no task fits the context)\n", "-");
        continue;
      }
      std::printf(" %9.3f  ", e.accuracy[k * Ln + li]);
      for (size_t l = 0; l < L; ++l) std::printf(" %.3f", e.relevant_mass[(k * Ln + li) * L + l]);
      std::printf("\n");
    }
  if (a.has("--output")) {
    write_eval(e, a.get("--output"));
    std::printf("wrote %s\n", a.get("--output").c_str());
  }
  return 0;
}

int cmd_export(int argc, char** argv) {
  Args a(argc, argv, 2, {"--help", "--force"}, {"--dtype"});
  if (a.has("--help")) {
    std::printf(
        "usage: focal export SRC_MODEL DST_DIR [--dtype BF16|F16|F32] [--force]\n\nWrites a copy of a model "
        "directory (config.json, model.safetensors, tokenizer.model or tokenizer.json with tokenizer_config.json, "
        "special_tokens_map.json and generation_config.json; no optimizer state) with weights in the given dtype "
        "(default BF16), e.g. to bundle a trained checkpoint. DST_DIR must be new or empty (--force: write over its "
        "files) and not SRC_MODEL itself; a GGUF file is refused (it runs as it is).\n");
    return 0;
  }
  if (a.positional().size() != 2) throw UsageError{"export needs SRC_MODEL and DST_DIR"};
  const std::string dtype = a.get("--dtype", "BF16");
  if (dtype != "BF16" && dtype != "F16" && dtype != "F32") throw UsageError{"--dtype: use BF16, F16 or F32"};
  check_new_model_dir(a.positional()[1], a.has("--force"), "DST_DIR");
  export_model(a.positional()[0], a.positional()[1], dtype);
  std::printf("wrote %s (%s)\n", a.positional()[1].c_str(), dtype.c_str());
  return 0;
}

}  // namespace focal::cli
