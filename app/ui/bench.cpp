#include "bench.h"

#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace focalscope {

namespace {

double now_ms() { return glfwGetTime() * 1000.0; }

double pct(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)std::lround(p * (v.size() - 1)))];
}

// Token ids of a long text, cut to n (the bundled tokenizer; repeated text is fine for timing).
std::vector<int32_t> bench_tokens(const AppState& st, int n) {
  const focal::Tokenizer& tok = st.slots[0].model->require_tokenizer();
  const std::string sentence =
      "The researcher dragged the temperature slider and watched each attention head sharpen. ";
  // One encode per doubling (re-encoding after every sentence took minutes at 32K tokens).
  std::string text = sentence;
  std::vector<int32_t> ids = tok.encode(text, true);
  while ((int)ids.size() < n) {
    text += text;
    ids = tok.encode(text, true);
  }
  ids.resize(n);
  return ids;
}

}  // namespace

void Bench::set_t(Ui& ui, float t) {
  focal::TempSpec s = ui.st.slots[0].spec;
  s.mode = focal::AttnMode::kFocal;
  s.focal_temp = t;
  ui.st.set_spec(0, s);
}

// Phases: 0 wait for the model, set T = 512; 1 wait for both runs; 2 preview; 3 propagate; 4 job fps;
// 5 long model load; 6 long propagate; 7 long zoom/pan; 10 long query moves; 11 long idle; 13 long preview (A's
// rows under another t, then B - A's cells); 14 long B - A zoom/pan; 12 long head switch; 8 write; 9 idle frames
// (between 1 and 2).
void Bench::before_frame(Ui& ui) {
  AppState& st = ui.st;
  const double t = now_ms();
  switch (phase_) {
    case 0:
      if (st.has_model() && !st.busy()) {
        st.live_propagate = true;
        st.set_tokens(bench_tokens(st, 512));
        T_ = 512;
        phase_ = 1;
      }
      break;
    case 1:
      if (!st.busy() && st.slots[0].run && st.slots[1].run) {
        st.live_propagate = false;
        phase_ = 9;  // idle frames first
        i_ = 0;
        last_frame_ = t;
      }
      break;
    case 2: {  // preview: the slider moves, the frame shows the re-tempered head
      set_t(ui, 0.3f + 0.01f * (i_ % 50));
      t0_ = t;
      st.head_rows();  // what the heatmap panel would do first in this frame: timed apart as the logic part
      preview_logic_ms_.push_back(now_ms() - t);
      armed_ = true;
      break;
    }
    case 3:  // propagate: the slider moves, wait for the re-run to be applied and drawn
      if (!armed_ && !st.busy()) {
        seen_version_ = st.slots[0].version;
        set_t(ui, 0.3f + 0.013f * (i_ % 40));
        t0_ = t;
        armed_ = true;
      }
      break;
    case 4:
      if (i_ == 0) {
        st.run_sweep(0.05f, 2.0f, 60);  // a long job on the worker
        phase_start_ = t;
        last_frame_ = t;
        i_ = 1;
      }
      break;
    case 5:
      if (i_ == 0) {
        if (long_model_.empty()) {
          phase_ = 8;
          break;
        }
        st.open_path(long_model_);
        i_ = 1;
      } else if (!st.busy() && st.capture_only() && st.slots[0].run) {
        // A capture (--bench-long-model FILE.h5): its tokens and stored head, no runs to time.
        long_T_ = st.n_tokens();
        const auto& r = *st.slots[0].run;
        if (!r.layers.empty() && !r.heads.empty()) st.select(r.layers[0], r.heads[0], -1);
        t0_ = t;  // long_propagate_ms: here the time to the first rows
        phase_ = 6;
      } else if (!st.busy() && st.loaded.path == long_model_ && st.slots[0].run) {
        st.live_propagate = true;
        const focal::ModelConfig& c = *st.config();
        long_T_ =
            c.arch.position == focal::PositionKind::kRope ? long_tokens_ : std::min(long_tokens_, c.max_positions);
        st.set_tokens(bench_tokens(st, long_T_));
        t0_ = t;
        phase_ = 6;
      }
      break;
    case 6:
      // The runs of the long prompt, then the viewed head's rows (the view worker's job that head_rows submits).
      if (!st.busy() && st.slots[0].run && (int)st.slots[0].run->token_nll.size() == long_T_ &&
          !st.head_rows().pending[0] && st.head_rows().shown(0) && !st.busy()) {
        long_propagate_ms_ = t - t0_;
        phase_ = 7;
        i_ = 0;
        last_frame_ = t;
      }
      break;
    case 13:
      if (i_ == 0) {  // a new t for A, not propagated: the view worker recomputes the viewed head's rows
        st.live_propagate = false;
        set_t(ui, 0.3f);
        t0_ = t;
        i_ = 1;
      }
      break;
    case 14:
    case 7: {  // zoom in and out, pan: every frame changes the view, so the texture is rebuilt every frame
      HeatView& v = ui.heat_view;
      const double T = long_T_;
      const double span = T * (0.1 + 0.9 * (0.5 + 0.5 * std::cos(i_ * 0.15)));
      const double c = T * (0.5 + 0.3 * std::sin(i_ * 0.07));
      v.T = long_T_;
      v.k0 = std::clamp(c - span / 2, 0.0, T - span);
      v.q0 = v.k0;
      v.k1 = v.k0 + span;
      v.q1 = v.q0 + span;
      break;
    }
    case 10:  // the selected query moves every frame: the distribution and the token strip redraw its row
      st.select(st.sel_layer, st.sel_head, (int)((long long)(i_ + 1) * 7919 % long_T_));
      break;
    case 12:
      if (st.capture_only()) {  // a capture holds its stored heads only
        phase_ = 8;
        break;
      }
      if (i_ == 0) {
        // A back to the setting it ran (the long preview moved its t, unpropagated): a head switch alone
        st.live_propagate = false;
        st.set_spec(0, st.slots[0].run_spec);
        st.select(st.sel_layer, (st.sel_head + 1) % st.config()->n_heads, -1);
        t0_ = t;
        i_ = 1;
      }
      break;
    default: break;
  }
  frame_cpu_t0_ = now_ms();
}

void Bench::after_render() {
  const double t = now_ms();
  if (phase_ == 2 && armed_) preview_cpu_ms_.push_back(t - t0_);
  last_cpu_ms_ = t - frame_cpu_t0_;
}

void Bench::frame_phase(std::vector<double>& frame_ms, std::vector<double>& cpu_ms, double t, int n_frames,
                        int next_phase) {
  frame_ms.push_back(t - last_frame_);
  cpu_ms.push_back(last_cpu_ms_);
  last_frame_ = t;
  if (++i_ == n_frames) {
    phase_ = next_phase;
    i_ = 0;
  }
}

bool Bench::after_frame(Ui& ui) {
  AppState& st = ui.st;
  const double t = now_ms();
  if (phase_ != reported_phase_) {  // progress on stderr: a long prompt's runs take minutes on a small machine
    static const char* const kNames[] = {"loading",          "first runs",   "preview",        "propagate",
                                         "job frames",       "long model",   "long runs",      "long zoom",
                                         "writing",          "idle frames",  "long query",     "long idle",
                                         "long head switch", "long preview", "long B - A zoom"};
    std::fprintf(stderr, "bench: %.1f s: %s\n", t / 1000.0, kNames[phase_]);
    reported_phase_ = phase_;
  }
  switch (phase_) {
    case 9:
      if (i_ > 0) idle_frame_ms_.push_back(t - last_frame_);
      last_frame_ = t;
      if (++i_ == 40) {
        phase_ = 2;
        i_ = 0;
      }
      break;
    case 2:
      if (armed_) {
        preview_ms_.push_back(t - t0_);
        heat_build_ms_.push_back(ui.heat_build_ms);
        armed_ = false;
        if (++i_ == 60) {
          st.live_propagate = true;
          phase_ = 3;
          i_ = 0;
        }
      }
      break;
    case 3:
      if (armed_ && st.slots[0].version != seen_version_) {
        propagate_ms_.push_back(t - t0_);
        armed_ = false;
        if (++i_ == 30) {
          phase_ = 4;
          i_ = 0;
        }
      }
      break;
    case 4:
      if (i_ > 0) {
        job_frame_ms_.push_back(t - last_frame_);
        last_frame_ = t;
        if (!st.busy() || t - phase_start_ > 4000.0) {
          st.jobs.cancel("sweep");
          phase_ = 5;
          i_ = 0;
        }
      }
      break;
    case 7: frame_phase(long_frame_ms_, long_frame_cpu_ms_, t, 90, 10); break;
    case 10: frame_phase(long_query_frame_ms_, long_query_cpu_ms_, t, 60, 11); break;
    case 11: frame_phase(long_idle_frame_ms_, long_idle_cpu_ms_, t, 40, 13); break;
    case 13:
      if (i_ == 1 && !st.head_rows().pending[0] && !st.busy()) {
        long_preview_ms_ = t - t0_;
        if (st.compare) {
          st.view.show = ViewRun::kDiff;
          st.state_version++;
        }
        t0_ = t;
        i_ = 2;
      } else if (i_ == 2) {
        long_diff_wait_cpu_ms_.push_back(last_cpu_ms_);  // the frames that first draw B - A, until its cells are there
        if (!st.head_rows().diff_pending && !st.busy()) {
          long_diff_cells_ms_ = st.compare ? t - t0_ : NAN;
          phase_ = st.compare ? 14 : 12;
          i_ = 0;
          last_frame_ = t;
        }
      }
      break;
    case 14:
      frame_phase(long_diff_frame_ms_, long_diff_cpu_ms_, t, 40, 12);
      if (phase_ == 12) {
        st.view.show = ViewRun::kA;
        st.state_version++;
      }
      break;
    case 12:  // the new head's rows shown (a re-run when the run held the viewed head only)
      if (i_ == 1 && st.jobs.idle() && std::isnan(long_head_switch_runs_ms_)) {
        long_head_switch_runs_ms_ = t - t0_;  // the runs done; the view worker's rows follow
        switch_layer_ = st.sel_layer;
        switch_first_ = st.slots[0].first_layer_run;
        switch_last_ = st.slots[0].last_layer_run;
      }
      if (i_ == 1 && !st.busy() && st.head_rows().head == st.sel_head && st.head_rows().shown(0)) {
        long_head_switch_ms_ = t - t0_;
        phase_ = 8;
      }
      break;
    case 8: {
      char buf[4096];
      std::snprintf(buf, sizeof buf,
                    "{\n  \"T\": %d,\n  \"idle_frame_ms_median\": %.3f,\n  \"preview_logic_ms_median\": %.3f,\n"
                    "  \"heat_texture_ms_median\": %.3f,\n  \"preview_cpu_ms_median\": %.3f,\n  \"preview_ms_median\": "
                    "%.3f,\n  \"preview_ms_p90\": %.3f,\n"
                    "  \"propagate_ms_median\": %.3f,\n  \"propagate_ms_p90\": %.3f,\n"
                    "  \"fps_while_job_runs\": %.1f,\n  \"frame_ms_while_job_runs_median\": %.3f,\n"
                    "  \"frames_while_job_runs\": %zu,\n  \"long_T\": %d,\n  \"long_propagate_ms\": %.1f,\n"
                    "  \"long_zoom_frame_ms_median\": %.3f,\n  \"long_zoom_frame_ms_p90\": %.3f,\n"
                    "  \"long_zoom_frame_ms_max\": %.3f,\n"
                    "  \"long_query_frame_ms_median\": %.3f,\n  \"long_query_frame_ms_max\": %.3f,\n"
                    "  \"long_idle_frame_ms_median\": %.3f,\n  \"long_idle_frame_ms_max\": %.3f,\n"
                    "  \"long_preview_ms\": %.1f,\n  \"long_diff_cells_ms\": %.1f,\n"
                    "  \"long_diff_zoom_frame_ms_median\": %.3f,\n  \"long_diff_zoom_frame_ms_max\": %.3f,\n"
                    "  \"long_zoom_cpu_ms_median\": %.3f,\n  \"long_zoom_cpu_ms_max\": %.3f,\n"
                    "  \"long_query_cpu_ms_median\": %.3f,\n  \"long_idle_cpu_ms_median\": %.3f,\n"
                    "  \"long_diff_zoom_cpu_ms_median\": %.3f,\n  \"long_diff_cells_wait_cpu_ms_max\": %.3f,\n"
                    "  \"long_head_switch_ms\": %.1f,\n  \"long_head_switch_runs_ms\": %.1f,\n"
                    "  \"long_head_switch_layer\": %d,\n  \"long_head_switch_rerun_layers\": [%d, %d]\n}\n",
                    T_, pct(idle_frame_ms_, 0.5), pct(preview_logic_ms_, 0.5), pct(heat_build_ms_, 0.5),
                    pct(preview_cpu_ms_, 0.5), pct(preview_ms_, 0.5), pct(preview_ms_, 0.9), pct(propagate_ms_, 0.5),
                    pct(propagate_ms_, 0.9), job_frame_ms_.empty() ? NAN : 1000.0 / pct(job_frame_ms_, 0.5),
                    pct(job_frame_ms_, 0.5), job_frame_ms_.size(), long_T_, long_propagate_ms_,
                    pct(long_frame_ms_, 0.5), pct(long_frame_ms_, 0.9), pct(long_frame_ms_, 1.0),
                    pct(long_query_frame_ms_, 0.5), pct(long_query_frame_ms_, 1.0), pct(long_idle_frame_ms_, 0.5),
                    pct(long_idle_frame_ms_, 1.0), long_preview_ms_, long_diff_cells_ms_, pct(long_diff_frame_ms_, 0.5),
                    pct(long_diff_frame_ms_, 1.0), pct(long_frame_cpu_ms_, 0.5), pct(long_frame_cpu_ms_, 1.0),
                    pct(long_query_cpu_ms_, 0.5), pct(long_idle_cpu_ms_, 0.5), pct(long_diff_cpu_ms_, 0.5),
                    pct(long_diff_wait_cpu_ms_, 1.0), long_head_switch_ms_, long_head_switch_runs_ms_, switch_layer_,
                    switch_first_, switch_last_);
      std::ofstream f(out_);
      f << buf;
      std::fputs(buf, stdout);
      if (!f) error_ = "cannot write '" + out_ + "'";
      return false;
    }
    default: break;
  }
  return true;
}

}  // namespace focalscope
