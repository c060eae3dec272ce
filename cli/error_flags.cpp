// The field -> option table behind with_flag (error_flags.h).
#include "error_flags.h"

#include <map>

namespace focal::cli {

std::string flag_for_field(const std::string& field) {
  // Fields of TempSpec, CaptureRequest / RunOptions, run_sweep, Device and FigureOptions, and their options.
  static const std::map<std::string, std::string> kFlags = {
      {"focal_temp", "--temp"},
      {"layer_temp", "--layer-temp"},
      {"head_temp", "--head-temp"},
      {"mode", "--mode"},
      {"tau_scale", "--tau-scale"},
      {"ssmax_s", "--ssmax-s"},
      {"prompt", "--prompt"},
      {"layers", "--layers"},
      {"heads", "--heads"},
      {"queries", "--queries"},
      {"topk_tokens", "--topk"},
      {"topk_mass_k", "--topk-mass"},
      {"relevant", "--relevant"},
      {"budget_bytes", "--budget"},
      {"temps", "--temps"},
      {"device", "--device"},
      {"precision", "--precision"},
      {"weights", "--weights"},
      {"rope_scaling", "--rope-scaling"},
      {"budget", "--budget"},
      {"layer", "--layer"},
      {"head", "--head"},
      {"query", "--query"},
      {"runs", "--runs"},
      {"metric", "--metric"},
      {"task_kind", "--kind"},
      {"labels", "--labels"},
      {"no_sink", "--no-sink"},
      {"log_scale", "--log"},
      {"overlay", "--overlay"},
      {"lines", "--lines"},
      {"matrix", "--matrix"},
      {"per_layer", "--per-layer"},
      {"x_axis", "--x"},
      {"tau", "--tau"},
      {"clip", "--clip"},
      {"width_in", "--width"},
      {"height_in", "--height"},
      {"dpi", "--dpi"},
      {"log_floor", "--floor"},
      {"keys", "--keys"},
      {"top_keys", "--top-keys"},
      {"linear_scale", "--linear"},
      {"output", "-o"},
      {"steps", "--steps"},
      {"batch", "--batch"},
      {"seq_len", "--seq-len"},
      {"task_frac", "--task-frac"},
      {"lr", "--lr"},
      {"warmup_steps", "--warmup"},
      {"eval_every", "--eval-every"},
      {"eval_sequences", "--eval-sequences"},
      {"out_dir", "--out"},
      {"resume", "--resume"},
      {"data_dir", "--data"},
      {"grad_clip", "--grad-clip"},
      {"weight_decay", "--weight-decay"},
      {"model.focal_temp", "--temp"},
      {"init_std", "--init-std"},
      {"tau_lr_mult", "--tau-lr-mult"},
      {"task_set", "--tasks"},
      {"val_frac", "--val-frac"},
      {"val_windows", "--val-windows"},
      {"init_temp", "--init-temp"},
      {"out_path", "-o"},
  };
  const auto it = kFlags.find(field);
  return it == kFlags.end() ? std::string() : it->second;
}

std::string with_flag(const Error& e) {
  std::string msg = e.what();
  const std::string& field = e.field();
  const std::string flag = flag_for_field(field);
  if (flag.empty()) return msg;
  // A message that opens with the field as a word ("layer 7: ...", "runs: ...", "device cuda: ...") reads as the
  // option itself; one that opens otherwise ("layer_temp[7] = -1", "mode = learned", "the prompt ...") gets the
  // option in front.
  const size_t n = field.size();
  if (msg.compare(0, n, field) == 0 && msg.size() > n &&
      (msg[n] == ':' || (msg[n] == ' ' && msg.compare(n, 2, " =") != 0)))
    return flag + msg.substr(n);
  return flag + ": " + msg;
}

}  // namespace focal::cli
