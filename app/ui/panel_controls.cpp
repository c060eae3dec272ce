// Left column: open a model or capture (path field, recent list, drag and drop), the temperature of each side,
// A/B comparison, the update path (preview / propagate) with job progress, and export.
#include <algorithm>
#include <cstring>
#include <iterator>

#include "error_controls.h"
#include "focal/error.h"
#include "focal/hf_cache.h"
#include "ui.h"

namespace focalscope {

// Names the last item in labels["controls.clipped"] when it runs past the panel's right edge (cut off).
static void note_clipped(Ui& ui, const char* name) {
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  if (ImGui::GetItemRectMax().x > right + 0.5f) ui.labels["controls.clipped"].push_back(name);
}

static void open_section(Ui& ui) {
  ui.labels["controls.clipped"] = {};  // filled by note_clipped this frame
  AppState& st = ui.st;
  section("Model or capture");
  ImGui::SetNextItemWidth(-60);
  const bool enter = ImGui::InputTextWithHint("##path", "model dir, .gguf, ORG/NAME or capture .h5", ui.path_buf,
                                              sizeof ui.path_buf, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if (ImGui::Button("Open") || enter) st.open_path(ui.path_buf);
  if (!st.recent.empty()) {
    ImGui::SetNextItemWidth(-60);
    if (ImGui::BeginCombo("recent", "recent files")) {
      for (const std::string& p : st.recent)
        if (ImGui::Selectable(p.c_str())) {
          std::snprintf(ui.path_buf, sizeof ui.path_buf, "%s", p.c_str());
          st.open_path(p);
        }
      ImGui::EndCombo();
    }
  }
  // Models in the Hugging Face cache, by name (resolved offline; focalscope never downloads). The cache is read
  // only while the list is open.
  ImGui::SetNextItemWidth(-60);
  if (ImGui::BeginCombo("cached", "Hugging Face cache")) {
    const std::vector<std::string> names = focal::hf_cached_models();
    if (names.empty()) ImGui::TextDisabled("no models in %s", focal::hf_hub_cache_dir().c_str());
    for (const std::string& n : names)
      if (ImGui::Selectable(n.c_str())) {
        std::snprintf(ui.path_buf, sizeof ui.path_buf, "%s", n.c_str());
        st.open_path(n);
      }
    ImGui::EndCombo();
  }
  ImGui::TextDisabled("or drop a folder / file onto the window");
  // Where models run; changing it reloads the open model there.
  static const focal::Device kDevices[] = {focal::Device::kAuto, focal::Device::kCpu, focal::Device::kCuda};
  ImGui::SetNextItemWidth(90);
  if (ImGui::BeginCombo("device", focal::device_name(st.device))) {
    for (focal::Device d : kDevices)
      if (ImGui::Selectable(focal::device_name(d), d == st.device) && d != st.device) {
        st.device = d;
        if (st.has_model()) st.open_path(st.loaded.path);
      }
    ImGui::EndCombo();
  }
  help_marker(
      "auto: the CUDA backend when this build has it and a GPU is usable, else the CPU. cuda: fail with the "
      "reason when no GPU is usable. The model is reloaded on the chosen device.");
  note_clipped(ui, "device");
  // How weight matrices are held (own line: beside device it ran past a 1600 px window's panel); changing it
  // reloads the open model.
  ImGui::SetNextItemWidth(90);
  if (ImGui::BeginCombo("weights", focal::weights_mode_name(st.weights))) {
    for (focal::WeightsMode w : {focal::WeightsMode::kNative, focal::WeightsMode::kFp32})
      if (ImGui::Selectable(focal::weights_mode_name(w), w == st.weights) && w != st.weights) {
        st.weights = w;
        if (st.has_model()) st.open_path(st.loaded.path);
      }
    ImGui::EndCombo();
  }
  help_marker(
      "native: quantized GGUF blocks and fp16 / bf16 weights stay as the file stores them (memory-mapped, about "
      "0.6 bytes a parameter for Q4); fp32: widened at load (4 bytes a parameter), the mode that matches "
      "transformers to 1e-5. The model is reloaded.");
  note_clipped(ui, "weights");
  // How the GPU computes (own line: the panel is narrow); auto's label shows what the open model resolved to.
  // Changing it reloads the open model.
  ImGui::SetNextItemWidth(120);
  std::string prec_label = focal::precision_name(st.precision);
  if (st.has_model() && st.precision == focal::Precision::kAuto)
    prec_label += std::string(" (") + focal::precision_name(st.slots[0].model->precision()) + ")";
  if (ImGui::BeginCombo("precision", prec_label.c_str())) {
    for (focal::Precision p : {focal::Precision::kAuto, focal::Precision::kExact, focal::Precision::kFast})
      if (ImGui::Selectable(focal::precision_name(p), p == st.precision) && p != st.precision) {
        st.precision = p;
        if (st.has_model()) st.open_path(st.loaded.path);
      }
    ImGui::EndCombo();
  }
  help_marker(
      "How the GPU computes (the CPU always computes exact). exact: fp32 everywhere, matches the CPU to 1e-5. "
      "fast: matrix products in bf16 / fp16 and attention's QK^T and PV in fp16 on tensor cores, with the "
      "temperature, softmax and every metric in fp32. auto: fast for 16-bit and quantized weights on the GPU (in "
      "parentheses: what the open model runs). The model is reloaded.");
  note_clipped(ui, "precision");
  if (st.has_model() && !st.loaded.device_note.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", st.loaded.device_note.c_str());
    ImGui::PopStyleColor();
  }
  if (const focal::ModelConfig* c = st.config()) {
    ImGui::TextWrapped("%s", st.loaded.path.c_str());
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%d layers x %d heads (%d kv), d %d, context %d%s", c->n_layers, c->n_heads, c->n_kv_heads,
                       c->d_head, c->max_positions, st.capture_only() ? ", capture only" : "");
    ImGui::PopStyleColor();
    note_clipped(ui, "model_shape");
  }
}

static void compare_section(Ui& ui) {
  AppState& st = ui.st;
  section("Compare A / B");
  bool cmp = st.compare;
  if (ImGui::Checkbox("show B beside A", &cmp)) st.set_compare(cmp);
  if (!st.compare) return;
  if (st.has_model()) {
    int& kind = ui.b_kind;
    if (st.slots[1].model) kind = 1;
    ImGui::RadioButton("two settings", &kind, 0);
    ImGui::SameLine();
    ImGui::RadioButton("two models", &kind, 1);
    if (kind == 0 && st.slots[1].model) st.close_model_b();
    if (kind == 1) {
      if (!ui.path_b_buf[0]) std::snprintf(ui.path_b_buf, sizeof ui.path_b_buf, "%s/models/standard", FOCAL_ASSETS_DIR);
      ImGui::SetNextItemWidth(-60);
      ImGui::InputText("##pathb", ui.path_b_buf, sizeof ui.path_b_buf);
      ImGui::SameLine();
      if (ImGui::Button("Load B")) st.open_model_b(ui.path_b_buf);
      if (!st.slots[1].model) ImGui::TextDisabled("B runs model A until model B is loaded");
    }
  }
  ImGui::PushStyleColor(ImGuiCol_Text, col_run_v4(1));
  ImGui::TextUnformatted(run_title(st, 1).c_str());
  ImGui::PopStyleColor();
  if (!st.capture_only()) temperature_controls(ui, 1);
  if (ImGui::SmallButton("A <-> B settings")) {
    focal::TempSpec a = st.slots[0].spec, b = st.slots[1].spec;
    st.set_spec(0, b);
    st.set_spec(1, a);
  }
}

static void update_section(Ui& ui) {
  AppState& st = ui.st;
  section("Update");
  // Propagating runs the model: without one (a capture opened alone) the box is off and greyed, the preference kept.
  const bool can_run = st.has_model();
  ImGui::BeginDisabled(!can_run);
  bool live = st.live_propagate && can_run;
  if (ImGui::Checkbox("live propagate", &live)) st.set_live_propagate(live);
  ImGui::EndDisabled();
  help_marker(
      "Preview re-applies softmax to the stored raw scores of the visible layer at once, without running the model "
      "(exact for the first layer whose temperature changed; later layers still see the old inputs). Propagate "
      "re-runs the model on a worker thread from the first changed layer on; newer changes cancel stale runs. "
      "Both need the model: a capture opened without it previews only.");
  ImGui::SameLine();
  ImGui::BeginDisabled(!can_run);
  if (ImGui::Button("Propagate")) st.propagate_all();
  ImGui::EndDisabled();
  ui.labels["controls.live_propagate"] = {live ? "on" : "off", can_run ? "enabled" : "disabled"};
  if (st.capture_only()) {  // the one-click offer of the model the capture names, or why there is none
    const CaptureModel& cm = st.capture_model;
    if (cm.available) {
      if (ImGui::Button("Open its model")) st.open_capture_model();
      ImGui::SameLine();
      ImGui::TextDisabled("%s", cm.path.c_str());
      help_marker(
          "The model this capture was made with is on disk and its weights' checksum matches the capture's. Opening "
          "it keeps the capture's tokens and both settings, and re-runs A and B, so loss, next tokens, propagate, "
          "sweep and generation work.");
      ui.labels["controls.capture_model"] = {"offer", cm.path};
    } else {
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
      ImGui::TextWrapped("propagate needs the model: %s", cm.why_not.c_str());
      ImGui::PopStyleColor();
      ui.labels["controls.capture_model"] = {"none", cm.why_not};
    }
  }
  for (int side = 0; side < (st.compare ? 2 : 1); ++side) {
    const Slot& s = st.slots[side];
    if (!s.run) continue;
    const bool exact = st.config() && s.spec.first_changed_layer(s.run_spec, *st.config()) >= st.config()->n_layers;
    ImGui::TextColored(col_run_v4(side), "%s", side_name(side));
    ImGui::SameLine();
    if (exact && st.capture_only())
      ImGui::TextDisabled("as stored in the capture");
    else if (exact && s.last_layer_run >= 0 && s.last_layer_run < st.config()->n_layers - 1) {  // other rows only
      if (s.first_layer_run == s.last_layer_run)
        ImGui::TextDisabled("propagated: only layer %d re-run, %.1f ms", s.first_layer_run, s.run_ms);
      else
        ImGui::TextDisabled("propagated: only layers %d..%d re-run, %.1f ms", s.first_layer_run, s.last_layer_run,
                            s.run_ms);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the same setting, another layer or head viewed: the layers after it are as before");
    } else if (exact)
      ImGui::TextDisabled("propagated: layers %d.. re-run in %.1f ms", s.first_layer_run, s.run_ms);
    else if (!st.rows_gap().empty())  // a metrics-only capture: nothing to preview
      ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "not run (metrics only, no rows to preview)");
    else
      ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "preview (not propagated)");
  }
  for (const JobStatus& j : st.jobs.status()) {
    ImGui::ProgressBar(j.running ? j.progress : 0.0f, ImVec2(-1, 0),
                       (j.label + (j.running ? "" : " (queued)")).c_str());
  }
}

static void export_section(Ui& ui) {
  AppState& st = ui.st;
  section("Export");
  ImGui::SetNextItemWidth(-70);
  ImGui::InputText("##exp", ui.export_buf, sizeof ui.export_buf);
  ImGui::SameLine();
  if (ImGui::Button("Capture")) {
    try {
      st.export_capture(ui.export_buf);
      st.notify(std::string("wrote capture ") + ui.export_buf, false);
    } catch (const focal::Error& e) { st.notify(with_control(e), true); }
  }
  ImGui::SetNextItemWidth(-70);
  ImGui::InputText("##png", ui.png_buf, sizeof ui.png_buf);
  ImGui::SameLine();
  if (ImGui::Button("PNG")) {
    ui.screenshot_request = ui.png_buf;
    ui.screenshot_panel = ui.png_panel == 0 ? "" : kPanelNames[ui.png_panel];
  }
  help_marker("Saves the window, or one panel, as it is now (the next frame) as a PNG.");
  ImGui::SetNextItemWidth(110);
  ImGui::Combo("##pngpanel", &ui.png_panel, kPanelNames, 7);
  ImGui::SameLine();
  ImGui::TextDisabled("PNG of");
  ImGui::SetNextItemWidth(110);
  ImGui::Combo("##kind", &ui.figure_kind, kFigureKinds, (int)std::size(kFigureKinds));
  ImGui::SameLine();
  ImGui::SetNextItemWidth(-70);
  ImGui::InputText("##fig", ui.figure_buf, sizeof ui.figure_buf);
  ImGui::SameLine();
  if (ImGui::Button("Figure")) {
    try {
      write_app_figure(ui, kFigureKinds[ui.figure_kind], ui.figure_buf);
      st.notify(std::string("wrote figure ") + ui.figure_buf, false);
    } catch (const focal::Error& e) { st.notify(with_control(e), true); }
  }
  ImGui::TextDisabled("figures: PNG, SVG or PDF by extension");
}

void draw_controls(Ui& ui, const ImVec4& r) {
  AppState& st = ui.st;
  if (begin_panel("focalscope", r)) {
    ui.record_rect("controls");
    open_section(ui);
    section("Temperature");
    ImGui::PushStyleColor(ImGuiCol_Text, col_run_v4(0));
    ImGui::TextUnformatted(run_title(st, 0).c_str());
    ImGui::PopStyleColor();
    if (st.config()) temperature_controls(ui, 0);
    compare_section(ui);
    update_section(ui);
    export_section(ui);
  }
  ImGui::End();
}

}  // namespace focalscope
