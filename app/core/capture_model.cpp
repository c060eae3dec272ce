// A capture opened without its model (AppState, app_state.h): whether the model its provenance names is on disk with
// the same weights, opening it in one step over the capture's own tokens, and what the readouts a preview cannot
// recompute (loss, next tokens, every head's metrics) stand for meanwhile.
#include <cstdio>

#include "app_state.h"
#include "focal/error.h"

namespace focalscope {

namespace {

std::string hex16(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

}  // namespace

CaptureModel find_capture_model(const std::string& model_path, uint64_t weights_checksum) {
  CaptureModel m;
  m.path = model_path;
  if (model_path.empty()) {
    m.why_not = "the capture names no model (its model_path is empty): open the model it was made with";
    return m;
  }
  uint64_t on_disk = 0;
  try {
    on_disk = focal::Model::files_checksum(model_path);
  } catch (const focal::Error& e) {
    m.why_not = "the capture's model " + model_path + " cannot be opened here (" + e.what() +
                "): open the model it was made with";
    return m;
  }
  if (on_disk != weights_checksum) {
    m.why_not = "the model at " + model_path + " is not the capture's: its weights' checksum is " + hex16(on_disk) +
                ", the capture's " + hex16(weights_checksum) + " (open the model it was made with)";
    return m;
  }
  m.available = true;
  return m;
}

void AppState::open_capture_model() {
  if (!capture_only()) return notify("open the capture's model: no capture is open without its model", true);
  if (!capture_model.available) return notify("open the capture's model: " + capture_model.why_not, true);
  const std::string path = capture_model.path;
  const uint64_t want = file.weights_checksum;
  jobs.submit(
      "load", "load " + path,
      [this, path, want, dev = device, wm = weights, prec = precision](JobContext& ctx) -> std::function<void()> {
        std::string note;
        const focal::Device resolved = focal::resolve_device(dev, &note);
        focal::LoadOptions lo;
        lo.weights = wm;
        lo.precision = prec;
        lo.on_read = [&ctx](size_t done, size_t total) { ctx.set_progress((float)((double)done / (double)total)); };
        std::shared_ptr<const focal::Model> m(focal::Model::load(path, resolved, lo));
        if (m->weights_checksum() != want)  // the files changed since the capture was opened
          throw focal::Error("open the capture's model: the weights at " + path +
                             " changed since the capture was opened (checksum " + hex16(m->weights_checksum()) +
                             ", the capture's " + hex16(want) + ")");
        return [this, path, m, note, dev, prec] {
          if (!capture_only()) return;  // something else was opened meanwhile
          loaded_device = dev;
          loaded_precision = prec;
          loaded_choice = true;
          if (m->config().n_layers != cfg_.n_layers || m->config().n_heads != cfg_.n_heads)
            return notify("open the capture's model: " + path + " has another shape than the capture", true);
          jobs.cancel("run_a");
          jobs.cancel("run_b");
          // B's stored run of another model (a two-models capture) is not re-run on A's model under B's label.
          std::string b_note;
          if (slots[1].run && !slots[1].run->model_path.empty()) {
            b_note = "; B's stored run was of model " + slots[1].run->model_path +
                     ": B is closed (open that model as model B to compare again)";
            slots[1].run.reset();
            compare = false;
          }
          // The capture's tokens, relevant keys, prompt boundary and both sides' settings stay; the stored runs
          // stay shown until the model's runs replace them.
          const focal::CaptureFile header = focal::make_capture_file(*m, {});
          static_cast<focal::Provenance&>(file) = header;
          slots[0].model = m;
          slots[1].model.reset();
          model_b_path.clear();
          box_[0].reset();
          box_[1].reset();
          cfg_ = m->config();
          has_cfg_ = true;
          loaded = {path, false, note};
          capture_model = CaptureModel{};
          add_recent(path);
          notify("opened the capture's model " + path + " (same weights): " + (compare ? "A and B" : "A") +
                     " re-run on the capture's " + std::to_string(n_tokens()) + " tokens" + b_note,
                 false);
          state_version++;
          propagate_all();
        };
      });
}

bool AppState::readouts_current(int side) const {
  const Slot& s = slots[side];
  if (!s.run || !has_cfg_) return true;  // nothing is shown
  return s.spec.first_changed_layer(s.run_spec, cfg_) >= cfg_.n_layers;
}

std::string AppState::readout_gap(int side) const {
  if (readouts_current(side)) return "";
  if (!has_model()) return "needs the model";
  if (live_propagate && busy()) return "is still being propagated";
  return "is not propagated yet";
}

std::string AppState::head_metric_gap(int side, int metric) const {
  const Slot& s = slots[side];
  if (!s.run) return "no run";
  if (metric == kInductionScore && s.run->induction.empty())
    return capture_only() ? "not stored in capture files: needs the model"
                          : "not computed on the CUDA device (the CPU computes it)";
  return "";
}

std::string AppState::rows_gap() const {
  const Slot& s = slots[0];
  if (!s.run || !s.run->probs.empty() || !s.run->scores.empty()) return "";
  return std::string(
             "no attention rows: this capture stores metrics only (focal capture --store metrics); its "
             "per-head metrics are in Layers x heads and the Metrics tab") +
         (capture_model.available ? "; open its model to see rows" : "");
}

}  // namespace focalscope
