#include "script.h"

#include <GLFW/glfw3.h>

#include <algorithm>
#include <cstdlib>

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

int side_arg(const ScriptCommand& c, size_t i, const std::string& where) {
  if (c.args.size() <= i || c.args[i] == "a") return 0;
  if (c.args[i] == "b") return 1;
  throw focal::Error(where + ": the side must be a or b, got '" + c.args[i] + "'");
}

}  // namespace

bool ScriptRunner::step(Ui& ui, GLFWwindow* win) {
  AppState& st = ui.st;
  if (!error_.empty()) return false;
  if (wait_frames_ > 0) {
    --wait_frames_;
    return true;
  }
  if (awaiting_) {  // the previous command's jobs (a load replaces a queued load: never start the next one early)
    const std::string where = path_ + ":" + std::to_string(awaiting_->line);
    if (wait_started_ < 0) wait_started_ = glfwGetTime();
    if (st.busy()) {
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
          if (glfwGetTime() - wait_started_ > 120.0) throw focal::Error(where + ": still busy after 120 s");
          return true;
        }
        if (++idle_frames_ < 3) return true;  // let the panels draw the new state
        idle_frames_ = 0;
        wait_started_ = -1.0;
      } else if (c.name == "frames") {
        wait_frames_ = (int)number(c.args[0], where);
        ++pc_;
        return true;
      } else if (c.name == "open") {
        st.open_path(c.rest);
      } else if (c.name == "corpus-doc") {
        open_corpus_document(ui, (size_t)number(c.args[0], where));
        ui.force_tab = 5;
      } else if (c.name == "open-model") {  // a capture opened alone: the model it names, as "Open its model" does
        st.open_capture_model();
      } else if (c.name == "open-b") {
        st.open_model_b(c.rest);
        ui.b_kind = 1;
      } else if (c.name == "prompt") {
        st.set_prompt(c.rest);
        ui.prompt_dirty = false;
      } else if (c.name == "edit-prompt") {
        open_prompt_editor(ui);
      } else if (c.name == "truncate") {
        st.truncate_prompt();
      } else if (c.name == "temp") {
        const int side = side_arg(c, 1, where);
        focal::TempSpec s = st.slots[side].spec;
        s.mode = focal::AttnMode::kFocal;
        s.focal_temp = number(c.args[0], where);
        st.set_spec(side, s);
      } else if (c.name == "spec") {  // spec SPEC [a|b]: the whole setting, in the one spec grammar
        st.set_spec(side_arg(c, 1, where), parse_spec_command(c.args[0], st.config(), where));
      } else if (c.name == "mode") {
        const int side = side_arg(c, 1, where);
        focal::TempSpec s = st.slots[side].spec;
        s.mode = focal::parse_attn_mode(c.args[0], where);
        st.set_spec(side, s);
      } else if (c.name == "layer-temp") {
        focal::TempSpec s = st.slots[0].spec;
        s.layer_temp[(int)number(c.args[0], where)] = number(c.args[1], where);
        st.set_spec(0, s);
      } else if (c.name == "head-temp") {
        focal::TempSpec s = st.slots[0].spec;
        s.head_temp[{(int)number(c.args[0], where), (int)number(c.args[1], where)}] = number(c.args[2], where);
        st.set_spec(0, s);
      } else if (c.name == "set-temp") {  // set-temp LAYERS HEADS T [a|b]: e.g. set-temp 0-5 * 0.3; HEADS - for layers
        const int side = side_arg(c, 3, where);
        const focal::ModelConfig* cfg = st.config();
        if (!cfg) throw focal::Error(where + ": set-temp needs a loaded model");
        const std::vector<int> ls = parse_index_set(c.args[0], cfg->n_layers, "layers");
        const std::vector<int> hs =
            c.args[1] == "-" ? std::vector<int>{} : parse_index_set(c.args[1], cfg->n_heads, "heads");
        st.set_spec(side, with_overrides(st.slots[side].spec, ls, hs, number(c.args[2], where)));
      } else if (c.name == "tau-scale") {
        focal::TempSpec s = st.slots[0].spec;
        s.tau_scale = number(c.args[0], where);
        st.set_spec(0, s);
      } else if (c.name == "compare") {
        st.set_compare(on_off(c, where));
      } else if (c.name == "select") {
        st.select((int)number(c.args[0], where), (int)number(c.args[1], where),
                  c.args.size() > 2 ? (int)number(c.args[2], where) : st.sel_query);
      } else if (c.name == "relevant") {  // toggles a relevant key position, as a right-click on the token does
        const int pos = (int)number(c.args[0], where);
        if (!st.has_model() || pos < 0 || pos >= st.n_tokens())
          throw focal::Error(where + ": relevant " + c.args[0] + ": needs a loaded model and a position in 0.." +
                             std::to_string(st.n_tokens() - 1));
        st.toggle_relevant(pos);
      } else if (c.name == "view") {
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
        st.view.log_color = on_off(c, where);
        st.state_version++;
      } else if (c.name == "sink") {
        st.view.hide_sink = !on_off(c, where);
        st.state_version++;
      } else if (c.name == "keys") {  // the distribution panel's key window: the last N keys (0: all)
        ui.dist_window = std::max(0, (int)number(c.args[0], where));
      } else if (c.name == "propagate") {
        const bool on = on_off(c, where);
        if (on && !st.has_model())
          throw focal::Error(where + ": propagate on: propagating runs the model, and none is open" +
                             (st.capture_only() ? " (open the capture's model with open-model)" : ""));
        st.live_propagate = on;
      } else if (c.name == "screenshot") {  // screenshot PATH.png, or screenshot PANEL PATH.png for one panel
        const bool panel = c.args.size() == 2 && std::find(std::begin(kPanelNames), std::end(kPanelNames), c.args[0]) !=
                                                     std::end(kPanelNames);
        ui.screenshot_request = panel ? c.args[1] : c.rest;
        ui.screenshot_panel = panel ? c.args[0] : "";
        ++pc_;
        return true;  // taken after this frame renders
      } else if (c.name == "export") {
        st.export_capture(c.rest);
      } else if (c.name == "figure") {
        write_app_figure(st, c.args[0], c.args[1]);
      } else if (c.name == "sweep") {
        st.run_sweep(0.1f, 1.5f, 15);
        ui.force_tab = 2;
      } else if (c.name == "generate") {
        st.generate((int)number(c.args[0], where), 0.0f);
      } else if (c.name == "capture-generation") {  // A and B over the last generation's prompt + generated tokens
        st.capture_generation();
      } else if (c.name == "resize") {
        glfwSetWindowSize(win, (int)number(c.args[0], where), (int)number(c.args[1], where));
        ++pc_;
        wait_frames_ = 2;
        return true;
      } else if (c.name == "tab") {
        static const char* kTabs[] = {"metrics", "output", "sweep", "generation", "tau", "corpus"};
        int t = -1;
        for (int i = 0; i < 6; ++i)
          if (c.args[0] == kTabs[i]) t = i;
        if (t < 0) throw focal::Error(where + ": tab takes metrics, output, sweep, generation, tau or corpus");
        ui.force_tab = t;
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
