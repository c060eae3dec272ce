#include "script.h"

#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>

#include "focal/error.h"
#include "overrides.h"

namespace focalscope {

namespace {

bool on_off(const ScriptCommand& c, const std::string& where) {
  if (c.args[0] == "on") return true;
  if (c.args[0] == "off") return false;
  throw focal::Error(where + ": '" + c.name + "' takes on or off, got '" + c.args[0] + "'");
}

float number(const std::string& s, const std::string& where) {
  char* end = nullptr;
  const float v = std::strtof(s.c_str(), &end);
  if (s.empty() || *end) throw focal::Error(where + ": '" + s + "' is not a number");
  return v;
}

// A count or an index: a number with no fraction.
int integer(const std::string& s, const std::string& where) {
  const float v = number(s, where);
  if (v != std::floor(v) || std::fabs(v) > 1e9f) throw focal::Error(where + ": '" + s + "' is not a whole number");
  return (int)v;
}

// Commands that change a setting need something loaded that the setting applies to.
void need_config(const AppState& st, const ScriptCommand& c, const std::string& where) {
  if (!st.config())
    throw focal::Error(where + ": '" + c.name + "' needs a loaded model or capture (open one first; a stats file " +
                       "alone has none: corpus-model opens its model)");
}

int side_arg(const ScriptCommand& c, size_t i, const std::string& where) {
  if (c.args.size() <= i || c.args[i] == "a") return 0;
  if (c.args[i] == "b") return 1;
  throw focal::Error(where + ": the side must be a or b, got '" + c.args[i] + "'");
}

}  // namespace

bool ScriptRunner::step(Ui& ui, GLFWwindow* win) {
  AppState& st = ui.st;
  if (!error_.empty()) return false;
  if (st.state_version != seen_version_) {
    seen_version_ = st.state_version;
    frames_since_change_ = 0;
  } else {
    ++frames_since_change_;
  }
  if (wait_frames_ > 0) {
    --wait_frames_;
    return true;
  }
  if (!startup_done_) {
    if (wait_started_ < 0) wait_started_ = glfwGetTime();
    if (st.busy()) {
      if (glfwGetTime() - wait_started_ > 120.0) {
        error_ = path_ + ": the file named on the command line still loading after 120 s";
        return false;
      }
      return true;
    }
    wait_started_ = -1.0;
    startup_done_ = true;
    if (st.error_count != 0 && st.message_is_error) {
      error_ = path_ + ": before the first command, the file named on the command line: " + st.message;
      return false;
    }
  }
  if (awaiting_) {  // the previous command's jobs (a load replaces a queued load: never start the next one early)
    const std::string where = path_ + ":" + std::to_string(awaiting_->line);
    if (wait_started_ < 0) wait_started_ = glfwGetTime();
    // corpus-doc reads its document once the batch's model is loaded (the Corpus tab, a frame later): until then it
    // is still running, and an error reading it fails the script here (it went on, exit 0).
    const bool doc_pending =
        awaiting_->name == "corpus-doc" && st.corpus && st.corpus->pending_doc >= 0 && st.error_count == errors_before_;
    if (st.busy() || doc_pending) {
      if (glfwGetTime() - wait_started_ > 120.0) {
        error_ = where + ": '" + awaiting_->name + "' still busy after 120 s";
        return false;
      }
      return true;
    }
    wait_started_ = -1.0;
    const ScriptCommand* c = awaiting_;
    awaiting_ = nullptr;
    if (st.error_count != errors_before_) {
      error_ = where + ": " + c->name + " " + c->rest + ": " + st.message;
      return false;
    }
  }
  while (pc_ < cmds_.size()) {
    const ScriptCommand& c = cmds_[pc_];
    const std::string where = path_ + ":" + std::to_string(c.line);
    const uint64_t errors_before = st.error_count;  // a command that reports an error fails the script
    try {
      if (c.name == "wait") {
        if (wait_started_ < 0) wait_started_ = glfwGetTime();
        if (st.busy() || !ui.screenshot_request.empty()) {
          idle_frames_ = 0;
          // wait S: at most S seconds (default 120), e.g. for a long prompt's runs
          const double limit_s = c.args.empty() ? 120.0 : integer(c.args[0], where);
          if (glfwGetTime() - wait_started_ > limit_s)
            throw focal::Error(where + ": still busy after " + std::to_string((int)limit_s) + " s");
          return true;
        }
        if (++idle_frames_ < 3) return true;  // let the panels draw the new state
        idle_frames_ = 0;
        wait_started_ = -1.0;
      } else if (c.name == "frames") {
        wait_frames_ = integer(c.args[0], where);
        if (wait_frames_ < 0) throw focal::Error(where + ": frames takes a count >= 0");
        ++pc_;
        return true;
      } else if (c.name == "open") {
        st.open_path(c.rest);
      } else if (c.name == "corpus-doc") {
        const int row = integer(c.args[0], where);
        if (row < 0) throw focal::Error(where + ": corpus-doc takes a row >= 0 of the stats file's /docs");
        open_corpus_document(ui, (size_t)row);
        ui.force_tab = 5;
      } else if (c.name == "corpus-model") {  // the model the corpus's batch ran, as the Corpus tab's button
        open_corpus_model(ui);
        ui.force_tab = 5;
      } else if (c.name == "details-height") {  // the details pane's height in px, as its splitter (0: automatic)
        const int px = integer(c.args[0], where);
        if (px < 0) throw focal::Error(where + ": details-height takes pixels >= 0 (0: by the window)");
        ui.details_h = (float)px;
      } else if (c.name == "open-model") {  // a capture opened alone: the model it names, as "Open its model" does
        st.open_capture_model();
      } else if (c.name == "open-b") {
        st.open_model_b(c.rest);
        ui.b_kind = 1;
      } else if (c.name == "prompt") {
        st.set_prompt(c.rest);
        ui.prompt_dirty = false;
      } else if (c.name == "edit-prompt") {
        if (!st.has_model())
          throw focal::Error(where + ": edit-prompt needs a loaded model (a capture's tokens are fixed)");
        open_prompt_editor(ui);
      } else if (c.name == "truncate") {
        if (!st.pending_truncation)
          throw focal::Error(where +
                             ": truncate: there is nothing to truncate (it follows a prompt that a model with " +
                             "learned positions, GPT-2, cannot run; a rotary model runs one past its context)");
        st.truncate_prompt();
      } else if (c.name == "temp") {
        need_config(st, c, where);
        const int side = side_arg(c, 1, where);
        focal::TempSpec s = st.slots[side].spec;
        s.mode = focal::AttnMode::kFocal;
        s.focal_temp = number(c.args[0], where);
        st.set_spec(side, s);
      } else if (c.name == "spec") {  // spec SPEC [a|b]: the whole setting, in the one spec grammar
        need_config(st, c, where);
        st.set_spec(side_arg(c, 1, where), parse_spec_command(c.args[0], st.config(), where));
      } else if (c.name == "mode") {
        need_config(st, c, where);
        const int side = side_arg(c, 1, where);
        focal::TempSpec s = st.slots[side].spec;
        s.mode = focal::parse_attn_mode(c.args[0], where);
        st.set_spec(side, s);
      } else if (c.name == "layer-temp") {
        need_config(st, c, where);
        // with_overrides' rules: on a temperature file's setting, the layer's t replaces the file's per-head t
        const float t = number(c.args[1], where);
        if (!(t > 0)) throw focal::Error(where + ": t must be > 0");
        st.set_spec(0, with_overrides(st.slots[0].spec, {integer(c.args[0], where)}, {}, t));
      } else if (c.name == "head-temp") {
        need_config(st, c, where);
        const float t = number(c.args[2], where);
        if (!(t > 0)) throw focal::Error(where + ": t must be > 0");
        st.set_spec(0, with_overrides(st.slots[0].spec, {integer(c.args[0], where)}, {integer(c.args[1], where)}, t));
      } else if (c.name == "set-temp") {  // set-temp LAYERS HEADS T [a|b]: e.g. set-temp 0-5 * 0.3; HEADS - for layers
        const int side = side_arg(c, 3, where);
        const focal::ModelConfig* cfg = st.config();
        if (!cfg) throw focal::Error(where + ": set-temp needs a loaded model");
        const std::vector<int> ls = parse_index_set(c.args[0], cfg->n_layers, "layers");
        const std::vector<int> hs =
            c.args[1] == "-" ? std::vector<int>{} : parse_index_set(c.args[1], cfg->n_heads, "heads");
        st.set_spec(side, with_overrides(st.slots[side].spec, ls, hs, number(c.args[2], where)));
      } else if (c.name == "tau-scale") {
        need_config(st, c, where);
        focal::TempSpec s = st.slots[0].spec;
        s.tau_scale = number(c.args[0], where);
        st.set_spec(0, s);
      } else if (c.name == "compare") {
        st.set_compare(on_off(c, where));
      } else if (c.name == "select") {
        // The Corpus tab's head when that tab shows (or nothing else is open), else the model's (corpus_view.h).
        const int keep = st.sel_query < st.n_tokens() ? st.sel_query : -1;
        select_head(st, integer(c.args[0], where), integer(c.args[1], where),
                    c.args.size() > 2 ? integer(c.args[2], where) : keep, ui.details_tab == 5 || ui.force_tab == 5);
      } else if (c.name == "relevant") {  // toggles a relevant key position, as a right-click on the token does
        const int pos = integer(c.args[0], where);
        if (!st.has_model() || st.n_tokens() == 0)
          throw focal::Error(where + ": relevant " + c.args[0] + ": needs a loaded model and a prompt");
        if (pos < 0 || pos >= st.n_tokens())
          throw focal::Error(where + ": relevant " + c.args[0] + ": the position must be in 0.." +
                             std::to_string(st.n_tokens() - 1));
        st.toggle_relevant(pos);
      } else if (c.name == "view") {
        if ((c.args[0] == "b" || c.args[0] == "diff") && !st.compare)  // it went on showing A
          throw focal::Error(where + ": view " + c.args[0] + " needs a B side: compare on (or open-b MODEL) first");
        if (c.args[0] == "a")
          st.view.show = ViewRun::kA;
        else if (c.args[0] == "b")
          st.view.show = ViewRun::kB;
        else if (c.args[0] == "diff")
          st.view.show = ViewRun::kDiff;
        else
          throw focal::Error(where + ": view takes a, b or diff");
        st.state_version++;
      } else if (c.name == "log") {
        if (c.args[0] == "auto")
          st.view.heat_color = HeatColor::kAuto;
        else if (c.args[0] == "on" || c.args[0] == "off")
          st.view.heat_color = on_off(c, where) ? HeatColor::kLog : HeatColor::kLinear;
        else
          throw focal::Error(where + ": 'log' takes on, off or auto (the figures' rule), got '" + c.args[0] + "'");
        st.state_version++;
      } else if (c.name == "sink") {
        st.view.hide_sink = !on_off(c, where);
        st.state_version++;
      } else if (c.name == "keys") {  // the distribution panel's key window: the last N keys (0: all)
        ui.dist_window = integer(c.args[0], where);
        if (ui.dist_window < 0) throw focal::Error(where + ": keys takes a count >= 0 (0: all keys)");
      } else if (c.name == "propagate") {
        const bool on = on_off(c, where);
        if (on && !st.has_model())
          throw focal::Error(where + ": propagate on: propagating runs the model, and none is open" +
                             (st.capture_only() ? " (open the capture's model with open-model)" : ""));
        st.set_live_propagate(on);
      } else if (c.name == "screenshot") {  // screenshot PATH.png, or screenshot PANEL PATH.png for one panel
        // Tables lay out their columns over the frames after their contents change: a screenshot as the script's
        // first command showed the Metrics table's columns one character wide.
        if (frames_since_change_ < 3) return true;
        const bool panel = c.args.size() == 2 && std::find(std::begin(kPanelNames), std::end(kPanelNames), c.args[0]) !=
                                                     std::end(kPanelNames);
        if (c.args.size() == 2 && !panel && c.args[0].find_first_of("./") == std::string::npos) {  // a mistyped panel
          std::string names;
          for (const char* n : kPanelNames) names += std::string(names.empty() ? "" : ", ") + n;
          throw focal::Error(where + ": screenshot '" + c.args[0] + "' is not a panel (" + names + ")");
        }
        ui.screenshot_request = panel ? c.args[1] : c.rest;
        ui.screenshot_panel = panel ? c.args[0] : "";
        ++pc_;
        return true;  // taken after this frame renders
      } else if (c.name == "export") {
        st.export_capture(c.rest);
      } else if (c.name == "figure") {
        write_app_figure(ui, c.args[0], c.args[1]);
      } else if (c.name == "sweep") {
        st.run_sweep(0.1f, 1.5f, 15);
        ui.force_tab = 2;
      } else if (c.name == "generate") {
        const int n_new = integer(c.args[0], where);
        if (n_new < 1) throw focal::Error(where + ": generate takes a number of tokens >= 1");
        ui.gen_n = std::min(n_new, 256);  // the Generation tab's field shows what ran (it kept its own 24)
        st.generate(n_new, 0.0f);
      } else if (c.name == "capture-generation") {  // A and B over the last generation's prompt + generated tokens
        st.capture_generation();
      } else if (c.name == "resize") {
        const int rw = integer(c.args[0], where), rh = integer(c.args[1], where);
        if (rw < 1 || rh < 1) throw focal::Error(where + ": resize takes a width and a height >= 1 pixel");
        glfwSetWindowSize(win, rw, rh);
        ++pc_;
        wait_frames_ = 2;
        return true;
      } else if (c.name == "tab") {
        static const char* kTabs[] = {"metrics", "output", "sweep", "generation", "tau", "corpus", "temps"};
        int t = -1;
        for (int i = 0; i < (int)std::size(kTabs); ++i)
          if (c.args[0] == kTabs[i]) t = i;
        if (t < 0) throw focal::Error(where + ": tab takes metrics, output, sweep, generation, tau, corpus or temps");
        ui.force_tab = t;
        // the tab's own layout (the Corpus and Temps tabs take a taller details pane) settles over two frames: a
        // screenshot right after `tab` showed the previous one
        ++pc_;
        wait_frames_ = 2;
        return true;
      } else if (c.name == "quit") {
        pc_ = cmds_.size();
        return false;
      }
      // A prompt over the context is an offer to truncate (the next command may be `truncate`), not a failure.
      const bool offer = c.name == "prompt" && st.pending_truncation;
      if (st.error_count != errors_before && !offer) throw focal::Error(st.message);  // refused at once
      // Every command that may have started a job (a load, a run, a propagate, a sweep, a generation, an export)
      // finishes before the next one is applied, and a job that fails later on the worker fails the script at this
      // command's line. A command that started nothing costs one frame.
      if (c.name != "wait") {
        awaiting_ = &c;
        errors_before_ = st.error_count;
        ++pc_;
        return true;
      }
    } catch (const std::exception& e) {
      error_ = std::string(e.what()).find(path_) == 0 ? e.what() : where + ": " + e.what();
      return false;
    }
    ++pc_;
  }
  return true;  // script done: keep the window open
}

}  // namespace focalscope
