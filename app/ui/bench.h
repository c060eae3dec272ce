// `focalscope --bench OUT.json`: measures the real app (window, ImGui, textures) on the bundled model at T = 512:
// slider-to-updated-frame in preview and when propagating, frames per second while a job runs, and with
// --bench-long-model a long prompt on that model (--bench-long-tokens, default 4096; a rotary model runs past its
// context): frame times while the heatmap zooms and pans, while the selected query moves (distribution and token
// strip), and idle; and the time a head switch takes to show (a re-run past the app's layer row budget).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "ui.h"

namespace focalscope {

class Bench {
 public:
  Bench(std::string out_path, std::string long_model, int long_tokens)
      : out_(std::move(out_path)), long_model_(std::move(long_model)), long_tokens_(long_tokens) {}
  // before_frame: called before the panels draw; after_frame: after Render and glFinish. Return false when done.
  void before_frame(Ui& ui);
  // after_render: right after ImGui::Render(), before any GL drawing: the CPU part of a preview frame (the app's
  // work and ImGui's layout and draw lists) is timed apart from the rasteriser's part.
  void after_render();
  bool after_frame(Ui& ui);
  const std::string& error() const { return error_; }

 private:
  void set_t(Ui& ui, float t);
  // Records the frame just presented; after n_frames of them moves on to next_phase.
  // cpu_ms receives the frame's CPU part (from before ImGui's new frame to its draw lists: panels, row computation,
  // texture uploads), without the GL rasterising and presenting that follow.
  void frame_phase(std::vector<double>& frame_ms, std::vector<double>& cpu_ms, double t, int n_frames, int next_phase);
  std::string out_, long_model_, error_;
  int phase_ = 0, i_ = 0, reported_phase_ = -1;
  double t0_ = 0.0, phase_start_ = 0.0;
  uint64_t seen_version_ = 0;
  bool armed_ = false;
  std::vector<double> idle_frame_ms_, preview_cpu_ms_, preview_logic_ms_, heat_build_ms_, preview_ms_, propagate_ms_,
      job_frame_ms_, long_frame_ms_, long_query_frame_ms_, long_idle_frame_ms_, long_diff_frame_ms_, long_frame_cpu_ms_,
      long_query_cpu_ms_, long_idle_cpu_ms_, long_diff_cpu_ms_,
      long_diff_wait_cpu_ms_;                      // frames while B - A's cells are computed
  double frame_cpu_t0_ = 0.0, last_cpu_ms_ = NAN;  // the current frame's start; the last frame's CPU part
  double long_propagate_ms_ = 0.0, long_head_switch_ms_ = 0.0, last_frame_ = 0.0;
  // The head switch: its runs alone (to the jobs' end; NAN until then), the viewed layer and the layers re-run.
  double long_head_switch_runs_ms_ = NAN;
  int switch_layer_ = -1, switch_first_ = -1, switch_last_ = -1;
  double long_preview_ms_ = NAN, long_diff_cells_ms_ = NAN;  // rows of a new setting; B - A's cells
  int T_ = 0, long_T_ = 0, long_tokens_ = 4096;
};

}  // namespace focalscope
