// `focal calibrate`: learn a pretrained model's attention temperatures (per model, layer or head) with every weight
// frozen, and write the temperature file that capture, sweep, generate, eval, batch, the app and Python take as
// calibrated:FILE.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "args.h"
#include "device_option.h"
#include "error_flags.h"
#include "output_option.h"
#include "temp_options.h"
#include "focal/calibrate.h"
#include "focal/error.h"
#include "focal/model.h"

namespace focal::cli {

namespace {

const char* kCalibrateHelp = R"(usage: focal calibrate MODEL --data FILE -o TEMPS.json [options]

Learns log t (t: the focal temperature, logits / (t sqrt(d_head))) by Adam on the next-token loss of FILE, every
model weight frozen: the backward carries activation gradients only, and 16-bit or quantized matrices stay as
stored (each is widened into one scratch matrix while the backward passes it). FILE (UTF-8 text, or .jsonl with a
"text" field per line) is tokenized with the model's tokenizer and cut into windows of --seq-len tokens; the last
--val-frac of them are held out. LLaMA-layout models (Llama 2 / 3 with RoPE scaling, SmolLM2, Qwen2 with biases,
Qwen3 QK-norm, Mistral with a window no narrower than --seq-len); other architectures are refused, naming what the
backward lacks. CPU only: the model loads on the CPU whatever a GPU machine has (--device takes cpu, or auto, which
means the CPU here; the --device line below is the other commands').

Writes TEMPS.json (format focalscope-temps: t per layer x head, the base model's weights checksum, the data, steps
and losses), TEMPS.json.ckpt.json at every evaluation (swapped in by rename) and the training log TEMPS.log.h5
(format focalscope-trainlog: `focal figure training` draws it; tau_mean holds t sqrt(d_head) per layer).
Apply the result to any run with --temp calibrated:TEMPS.json (batch: --runs standard,calibrated:TEMPS.json).

options:
  --data FILE           calibration text (required)
  -o, --output FILE     the temperature file to write (required)
  --granularity G       model (one t) | layer (one t per layer) | head (one t per head; default) |
                        tau-proj: the paper's learned temperature (Eq. 6) per layer on top of the frozen weights,
                        tau_i = clip(mean_{j<=i} X_j . w_tau + b, 0.05 sqrt(d_head), 20 sqrt(d_head)) from the
                        layer's normalised input X; w_tau starts at 0 and b at --init-temp sqrt(d_head); Adam moves
                        b / sqrt(d_head) at --lr and w_tau / sqrt(d_head) at --lr / hidden. The file holds the
                        projections (runs use mode learned with them) and, as t, each layer's mean tau / sqrt(d_head)
                        over the held-out tokens
  --steps N (200) --batch N (4 windows) --seq-len N (256) --lr X (0.05; cosine to 10 %) --seed S (1)
  --init-temp T         every t at the start (default: the model's own t, 0.4 for a model trained with focal
                        attention at t = 0.4, else 1: standard attention)
  --val-frac X          share of the windows held out (default 0.1, at least one window)
  --val-windows N       held-out windows evaluated (default 8, evenly spaced)
  --eval-every N        held-out loss, log row and checkpoint every N steps (default 50, and at the end)
  --log FILE            the training log (default: TEMPS without .json + .log.h5)
  --resume              continue from TEMPS.json.ckpt.json: give the command that started it plus --resume (options
                        that differ are refused, each named); the result is the same as an uninterrupted run
)";

}  // namespace

int cmd_calibrate(int argc, char** argv) {
  Args a(argc, argv, 2, {"--help", "--resume", kLoadFlag, kMmapFlag},
         {"--data", "--output", "--granularity", "--steps", "--batch", "--seq-len", "--lr", "--seed", "--init-temp",
          "--val-frac", "--val-windows", "--eval-every", "--log", kDeviceOption, kWeightsOption, kPrecisionOption});
  if (a.has("--help")) {
    std::printf("%s%s", kCalibrateHelp, kDeviceHelp);
    return 0;
  }
  if (!a.has("--data")) throw UsageError{"give the calibration text with --data FILE"};
  if (!a.has("--output")) throw UsageError{"give the temperature file to write with -o FILE"};
  CalibConfig cfg;
  cfg.data_path = a.get("--data");
  cfg.out_path = a.get("--output");
  cfg.log_path = a.get("--log");
  cfg.resume = a.has("--resume");
  try {
    cfg.granularity = parse_calib_granularity(a.get("--granularity", "head"), "--granularity");
  } catch (const Error& e) { throw UsageError{e.what()}; }
  cfg.steps = a.get_int32("--steps", 200);
  cfg.batch = a.get_int32("--batch", 4);
  cfg.seq_len = a.get_int32("--seq-len", 256);
  cfg.lr = a.get_double("--lr", 0.05);
  cfg.seed = a.get_u64("--seed", 1);
  cfg.init_temp = a.get_double("--init-temp", 1.0);
  cfg.val_frac = a.get_double("--val-frac", 0.1);
  cfg.val_windows = a.get_int32("--val-windows", 8);
  cfg.eval_every = a.get_int32("--eval-every", 50);
  // Every option, and the checkpoint --resume continues, before the model loads (an 8B model takes seconds); the
  // default --init-temp is a focal model's own t, known after loading, so it is checked then.
  check_calib_options(cfg);
  // The three files it writes, before the model loads (an unwritable directory failed after the first step).
  check_output(cfg.out_path);
  check_output(cfg.out_path + ".ckpt.json", "-o (its checkpoint)");
  check_output(cfg.log_path.empty() ? calib_log_path(cfg.out_path) : cfg.log_path, "--log");
  check_outputs_apart(a, {"--output", "--log"}, {model_arg(a, "calibrate")});
  // The checkpoint is written beside -o and deleted at the end: a --log there was overwritten, then removed.
  if (!cfg.log_path.empty() && same_path(cfg.log_path, cfg.out_path + ".ckpt.json"))
    throw Error("--log '" + cfg.log_path + "' is -o's checkpoint file (" + cfg.out_path +
                ".ckpt.json, written during the run and removed at its end): give the log another path");

  // The frozen-weight backward has no CUDA twin: the CPU, even where auto would pick a GPU (it loaded there and
  // then refused, "load the model with --device cpu").
  if (a.has(kDeviceOption)) {
    Device d = Device::kAuto;
    try {
      d = parse_device(a.get(kDeviceOption));  // a typo is named as one (it read "runs on the CPU only")
    } catch (const Error& e) { throw UsageError{with_flag(e)}; }
    if (d == Device::kCuda)
      throw UsageError{"--device cuda: calibration runs on the CPU only (give --device cpu, or leave it out)"};
  }
  // The CPU computes exactly: fast would be refused by the load with advice (choose device cuda) calibrate refuses.
  if (a.has(kPrecisionOption) && a.get(kPrecisionOption) == "fast")
    throw UsageError{
        "--precision fast: calibration runs on the CPU, which computes exactly (give --precision exact, "
        "or leave it out)"};
  auto model = load_model(a, model_arg(a, "calibrate"), "", Device::kCpu);
  // The start, and the loss the result is compared with, is what the model runs: a focal model's own t (starting a
  // focal-t0.4 model at t = 1 reported a gain over a setting it never runs).
  if (!a.has("--init-temp") && model->config().focal.mode == AttnMode::kFocal)
    cfg.init_temp = model->config().focal.focal_temp;
  const std::vector<std::string> gaps = calibration_gaps(model->config(), cfg.seq_len);
  if (!gaps.empty()) {  // before tokenizing: calibrate() says the same, but a big file need not be read first
    std::string list;
    for (const std::string& g : gaps) list += (list.empty() ? "" : ", ") + g;
    throw Error("model", "'" + model->path() + "' (" + model->config().arch.name +
                             ") cannot be calibrated: the frozen-weight backward does not cover " + list +
                             "; calibration takes LLaMA-layout models");
  }
  const std::vector<int32_t> tokens = load_calib_tokens(*model, cfg.data_path);
  std::fprintf(stderr, "calibrate: %zu tokens of %s, %s granularity, %d steps of %d x %d tokens\n", tokens.size(),
               cfg.data_path.c_str(), calib_granularity_name(cfg.granularity), cfg.steps, cfg.batch, cfg.seq_len);
  const bool tty = ::isatty(::fileno(stderr)) == 1;
  auto last_line = std::chrono::steady_clock::now() - std::chrono::hours(1);
  const TempFile f = calibrate(*model, tokens, cfg, [&](const CalibProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    const bool eval = p.val_loss >= 0;
    if (!eval && !tty && now - last_line < std::chrono::seconds(5)) return;
    std::fprintf(stderr, "%sstep %5d/%d  step loss %.4f", tty ? "\r" : "", p.step, p.steps, p.train_loss);
    if (eval) std::fprintf(stderr, "  held-out %.4f", p.val_loss);
    std::fprintf(stderr, "  |g| %.3g  lr %.2e  t %.3f..%.3f  %.0f tok/s  ETA %.0fs%s", p.grad_norm, p.lr, p.temp_min,
                 p.temp_max, p.tokens_per_s, p.eta_s, eval || !tty ? "\n" : "   ");
    std::fflush(stderr);
    last_line = now;
  });
  print_temp_table(f);  // the learned t per layer x head
  std::printf("held-out loss %.5f nats/token at t = %g, %.5f calibrated (%s granularity, %d held-out tokens)\n",
              f.val_loss_init, f.init_temp, f.val_loss, calib_granularity_name(f.granularity), (int)f.n_val_tokens);
  std::printf("wrote %s (apply with --temp %s)\n", cfg.out_path.c_str(),
              shell_word("calibrated:" + cfg.out_path).c_str());
  return 0;
}

}  // namespace focal::cli
