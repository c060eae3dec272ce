// Shared UI helpers: textures, colours, the temperature widgets both sides use, the heatmap pixel builder and the
// bottom tab bar.
#include <GL/gl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "focal_figures/colormap.h"
#include "focal_figures/figures.h"
#include "focal/atomic_file.h"
#include "focal/metrics.h"
#include "focal/error.h"
#include "overrides.h"
#include "ui.h"

namespace focalscope {

const char* const kFigureKinds[5] = {"distribution", "heatmap", "grid", "entropy", "temps"};

void write_app_figure(const AppState& st, const std::string& kind, const std::string& path) {
  if (kind == "temps") {  // a temperature file and a standard run, not the capture's selected head
    write_temps_figure(st, path);
    return;
  }
  const focal::CaptureFile cf = st.capture_file();
  focal::figures::FigureOptions o;  // each kind gets only the options it takes (figures reject the others)
  if (kind == "distribution" || kind == "heatmap") {
    o.layer = st.sel_layer;
    o.head = st.sel_head;
  }
  if (kind == "distribution") {
    o.query = st.query();
    o.overlay = true;
  }
  if (kind == "distribution" || kind == "heatmap" || kind == "grid") o.no_sink = st.view.hide_sink;
  if (kind == "heatmap" || kind == "grid") o.log_scale = st.view.log_color;
  focal::figures::Source src;
  src.capture = &cf;
  src.label = "app";
  focal::write_file_atomically(path,
                               focal::figures::render_figure(kind, {src}, o, focal::figures::format_from_path(path)));
}

void Texture::upload(const std::vector<uint8_t>& rgba, int tw, int th) {
  if (!id) glGenTextures(1, &id);
  glBindTexture(GL_TEXTURE_2D, id);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
  if (tw != w || th != h) {
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, tw, th, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba.data());
    w = tw;
    h = th;
  } else {
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, tw, th, GL_RGBA, GL_UNSIGNED_BYTE, rgba.data());
  }
}

void Texture::release() {
  if (id) glDeleteTextures(1, &id);
  id = 0;
  w = h = 0;
}

static ImU32 to_u32(focal::figures::Rgb8 c, int a = 255) { return IM_COL32(c.r, c.g, c.b, a); }
// The colours of runs A and B now: the figures' colour of each run's name (set_run_colours).
static ImU32 g_run_colour[2] = {to_u32(focal::figures::category8(0)), to_u32(focal::figures::category8(1))};
void set_run_colours(const std::string& name_a, const std::string& name_b) {
  const std::vector<focal::figures::Rgb8> c = focal::figures::run_colors8({name_a, name_b});
  g_run_colour[0] = to_u32(c[0]);
  g_run_colour[1] = to_u32(c[1]);
}
void set_run_colours(const AppState& st) { set_run_colours(st.slots[0].spec.label(), st.slots[1].spec.label()); }
ImU32 col_run(int side) { return side >= 0 && side < 2 ? g_run_colour[side] : to_u32(focal::figures::category8(side)); }
std::string col_hex(ImU32 c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02X%02X%02X", (unsigned)(c & 255), (unsigned)(c >> 8 & 255),
                (unsigned)(c >> 16 & 255));
  return buf;
}
ImVec4 col_run_v4(int side) { return ImGui::ColorConvertU32ToFloat4(col_run(side)); }
ImU32 col_generated() { return IM_COL32(240, 64, 128, 255); }
ImVec4 col_generated_v4() { return ImGui::ColorConvertU32ToFloat4(col_generated()); }
ImU32 col_viridis(double t) { return to_u32(focal::figures::viridis8(t)); }
ImU32 col_diverging(double t) { return to_u32(focal::figures::diverging8(t)); }
const char* side_name(int side) { return side == 0 ? "A" : "B"; }

const char* const kPanelNames[7] = {"window", "heatmap", "overview", "distribution", "tokens", "details", "controls"};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pending_suffix(const HeadRows& rows, int side) {
  return rows.pending[side] && !rows.label[side].empty() ? " (of " + rows.label[side] + ", computing the new setting)"
                                                         : "";
}

std::string run_title(const AppState& st, int side) {
  const Slot& s = st.slots[side];
  std::string t = std::string(side_name(side)) + ": ";
  if (side == 1 && s.model) t += st.model_b_path.substr(st.model_b_path.find_last_of('/') + 1) + ", ";
  t += s.spec.label();
  return t;
}

void help_marker(const char* text) {
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 28.0f);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

void section(const char* text) {
  ImGui::Spacing();
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.55f, 0.78f, 1.0f, 1.0f));
  ImGui::TextUnformatted(text);
  ImGui::PopStyleColor();
  ImGui::Separator();
}

bool begin_panel(const char* title, const ImVec4& r, ImGuiWindowFlags extra) {
  ImGui::SetNextWindowPos(ImVec2(r.x, r.y), ImGuiCond_Always);
  ImGui::SetNextWindowSize(ImVec2(std::max(r.z, 40.0f), std::max(r.w, 30.0f)), ImGuiCond_Always);
  return ImGui::Begin(title, nullptr,
                      ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                          ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoSavedSettings | extra);
}

void Ui::record_rect(const std::string& name) {
  const ImVec2 p = ImGui::GetWindowPos(), s = ImGui::GetWindowSize();
  rects[name] = ImVec4(p.x, p.y, s.x, s.y);
}

bool temperature_controls(Ui& ui, int side) {
  AppState& st = ui.st;
  const focal::ModelConfig* cfg = side == 1 && st.slots[1].model ? &st.slots[1].model->config() : st.config();
  if (!cfg) return false;
  focal::TempSpec spec = st.slots[side].spec;
  bool changed = false;
  ImGui::PushID(side);
  static const char* kModes[] = {"standard", "focal", "learned", "ssmax"};
  int mode = (int)spec.mode;
  ImGui::SetNextItemWidth(-70);
  if (ImGui::Combo("mode", &mode, kModes, 4)) {
    if (mode == (int)focal::AttnMode::kLearned && !cfg->focal.has_tau) {
      st.notify("mode learned: this model has no learned temperature (tau_proj); use focal", true);
    } else {
      spec.mode = (focal::AttnMode)mode;
      changed = true;
    }
  }
  {  // What the temperature acts on: the architecture's logit scale, then its soft-cap (after the temperature).
    const focal::ArchConfig& a = cfg->arch;
    char scale_txt[48];
    if (a.query_pre_attn_scalar > 0.0f)
      std::snprintf(scale_txt, sizeof scale_txt, "q.k / sqrt(%g)", a.query_pre_attn_scalar);
    else
      std::snprintf(scale_txt, sizeof scale_txt, "q.k / sqrt(%d)", cfg->d_head);
    if (a.attn_softcap > 0.0f)
      ImGui::TextDisabled("logit %s, then soft-cap %g tanh(x / %g)", scale_txt, a.attn_softcap, a.attn_softcap);
    else
      ImGui::TextDisabled("logit %s, no soft-cap", scale_txt);
    help_marker(
        "The temperature divides the model's own attention logit (q.k times its scale); a soft-capped model "
        "(Gemma 2) applies the cap after the temperature, so t below 1 saturates toward the cap.");
  }
  if (spec.mode == focal::AttnMode::kFocal || spec.mode == focal::AttnMode::kStandard) {
    float t = spec.mode == focal::AttnMode::kStandard ? 1.0f : spec.focal_temp;
    ImGui::SetNextItemWidth(-70);
    if (ImGui::SliderFloat("t", &t, 0.05f, 2.0f, "%.3f", ImGuiSliderFlags_Logarithmic)) {
      spec.mode = focal::AttnMode::kFocal;
      spec.focal_temp = t;
      changed = true;
    }
    if (ImGui::Button("1.0 standard")) {
      spec.mode = focal::AttnMode::kStandard;
      spec.focal_temp = 1.0f;
      changed = true;
    }
    ImGui::SameLine();
    if (ImGui::Button("0.4 paper")) {
      spec.mode = focal::AttnMode::kFocal;
      spec.focal_temp = 0.4f;
      changed = true;
    }
    ImGui::SameLine();
    if (ImGui::Button("0.2")) {
      spec.mode = focal::AttnMode::kFocal;
      spec.focal_temp = 0.2f;
      changed = true;
    }
  } else if (spec.mode == focal::AttnMode::kLearned) {
    ImGui::SetNextItemWidth(-70);
    if (ImGui::SliderFloat("tau x", &spec.tau_scale, 0.1f, 4.0f, "%.3f", ImGuiSliderFlags_Logarithmic)) changed = true;
    help_marker("Multiplier on the learned tau of every layer: tau_used = clip(mean(X w_tau) + b) x this.");
  } else if (spec.mode == focal::AttnMode::kSsmax) {
    ImGui::SetNextItemWidth(-70);
    if (ImGui::SliderFloat("s", &spec.ssmax_s, 0.05f, 2.0f, "%.3f", ImGuiSliderFlags_Logarithmic)) changed = true;
    help_marker("Scalable softmax: logits x s x ln(n), n the keys visible to the query.");
  }
  // Overrides for the selected layer and head.
  const int L = st.sel_layer, H = st.sel_head;
  auto lt = spec.layer_temp.find(L);
  bool has_l = lt != spec.layer_temp.end();
  char label[64];
  std::snprintf(label, sizeof label, "layer %d", L);
  if (ImGui::Checkbox(label, &has_l)) {
    if (has_l)
      spec.layer_temp[L] = spec.mode == focal::AttnMode::kFocal ? spec.focal_temp : 1.0f;
    else
      spec.layer_temp.erase(L);
    changed = true;
  }
  if (has_l) {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(-70);
    if (ImGui::SliderFloat("##lt", &spec.layer_temp[L], 0.05f, 2.0f, "t %.3f", ImGuiSliderFlags_Logarithmic))
      changed = true;
  }
  auto ht = spec.head_temp.find({L, H});
  bool has_h = ht != spec.head_temp.end();
  std::snprintf(label, sizeof label, "head %d.%d", L, H);
  if (ImGui::Checkbox(label, &has_h)) {
    if (has_h)
      spec.head_temp[{L, H}] =
          has_l ? spec.layer_temp[L] : (spec.mode == focal::AttnMode::kFocal ? spec.focal_temp : 1.0f);
    else
      spec.head_temp.erase({L, H});
    changed = true;
  }
  if (has_h) {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(-70);
    if (ImGui::SliderFloat("##ht", &spec.head_temp[{L, H}], 0.05f, 2.0f, "t %.3f", ImGuiSliderFlags_Logarithmic))
      changed = true;
  }
  // Overrides for a set of layers (or of heads in them) at once: e.g. layers 0-5,9 (heads empty), or layers * and
  // heads 2,4.
  if (ImGui::TreeNode("overrides for a set")) {
    ImGui::SetNextItemWidth(90);
    ImGui::InputTextWithHint("##set_l", "layers 0-5,9", ui.set_layers_buf[side], sizeof ui.set_layers_buf[side]);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(80);
    ImGui::InputTextWithHint("##set_h", "heads (all)", ui.set_heads_buf[side], sizeof ui.set_heads_buf[side]);
    ImGui::SetNextItemWidth(90);
    ImGui::SliderFloat("##set_t", &ui.set_t[side], 0.05f, 2.0f, "t %.3f", ImGuiSliderFlags_Logarithmic);
    ImGui::SameLine();
    const bool apply = ImGui::SmallButton("apply");
    ImGui::SameLine();
    const bool clear = ImGui::SmallButton("clear");
    if (apply || clear) {
      try {
        const std::vector<int> ls = parse_index_set(ui.set_layers_buf[side], cfg->n_layers, "layers");
        const std::vector<int> hs = parse_index_set(ui.set_heads_buf[side], cfg->n_heads, "heads");
        spec = with_overrides(spec, ls, hs, clear ? 0.0f : ui.set_t[side]);
        changed = true;
      } catch (const focal::Error& e) { st.notify(e.what(), true); }
    }
    ImGui::TreePop();
  }
  const size_t n_over = spec.layer_temp.size() + spec.head_temp.size();
  if (n_over) {
    if (ImGui::SmallButton("reset overrides")) {
      spec.layer_temp.clear();
      spec.head_temp.clear();
      changed = true;
    }
    ImGui::SameLine();
    ImGui::TextDisabled("%zu override%s", n_over, n_over == 1 ? "" : "s");
  }
  ImGui::PopID();
  if (changed) st.set_spec(side, spec);
  return changed;
}

namespace {

// The figures' colour maps sampled at 1025 points ([0, 1] for viridis, [-1, 1] for the diverging map), so a texel
// costs a table lookup; nearest sample, at most a fifth of an 8-bit level from the exact colour.
struct ColorLut {
  static constexpr int kN = 1024;
  focal::figures::Rgb8 c[kN + 1];
  explicit ColorLut(bool diverging) {
    for (int i = 0; i <= kN; ++i)
      c[i] = diverging ? focal::figures::diverging8(2.0 * i / kN - 1.0) : focal::figures::viridis8((double)i / kN);
  }
  // t in [0, 1] (NaN -> 0)
  const focal::figures::Rgb8& at(float t) const {
    t = t > 0.0f ? (t < 1.0f ? t : 1.0f) : 0.0f;
    return c[(int)std::lround(t * kN)];
  }
};

}  // namespace

float build_heat_pixels(const AppState& st, const HeadRows& rows, const HeatView& v, int w, int h,
                        std::vector<uint8_t>& out) {
  static const ColorLut viridis(false), diverging(true);
  out.assign((size_t)w * h * 4, 0);
  const int T = rows.T;
  const ViewRun show = st.view.show;
  const std::vector<float>* A = rows.p[0].empty() ? nullptr : &rows.p[0].get();
  const std::vector<float>* B = rows.p[1].empty() ? nullptr : &rows.p[1].get();
  const int ps = show == ViewRun::kB ? 1 : 0;
  const std::vector<float>* P = ps == 1 ? B : A;
  const bool diff = show == ViewRun::kDiff;
  if (T == 0 || (!diff && !rows.shown(ps)) || (diff && (!rows.shown(0) || !rows.shown(1)))) return 1.0f;
  // Past AppState::dense_rows_max_tokens a side holds no [T, T] rows: a texel's keys are read as their largest raw
  // score and one exponential (HeadRows::max_in), B - A from both sides' normalisers (max_diff_in).
  const bool on_demand = diff ? (!A || !B) : !P;
  // Max-pool (for differences: the value of largest magnitude) each texel's block of the matrix.
  std::vector<float> val((size_t)w * h, 0.0f);
  std::vector<float> scale_val((size_t)w * h, 0.0f);         // the same without row 0 (one visible key: always 1)
  std::vector<uint8_t> masked((size_t)w * h, kTexelCausal);  // TexelMask
  const focal::ModelConfig* cfg = st.config();
  const double sx = (v.k1 - v.k0) / w, sy = (v.q1 - v.q0) / h;
  // Long prompts: a texel that spans at least b keys reads its rows' max over blocks of b keys (HeadRows::pooled),
  // blocks that straddle its edges included (a max over up to b - 1 keys of the next texel); B - A reads every key.
  int pool_b = 0, pool_n = 0;
  const float* pool = nullptr;
  for (int i = 2; i >= 0 && !diff; --i) {
    const int b = kHeatPoolKeys[i];
    if (sx >= b && rows.pooled[ps][i].size() == (size_t)T * ((T + b - 1) / b)) {
      pool_b = b;
      pool_n = (T + b - 1) / b;
      pool = rows.pooled[ps][i].data();
      break;
    }
  }
  // Texels at least b rows high and b keys wide: cells of b x b (pooled2d; a key a sliding window hides is 0 in them),
  // the causal and window masks from the texel's span (texel_mask).
  int pool2_b = 0, pool2_n = 0;
  const float* pool2 = nullptr;
  // B - A of long prompts: the cells of the largest |b - a| (HeadRows::diff2d), where they are computed.
  for (int i = 2; i >= 0; --i) {
    const int b = kHeatPoolKeys[i], n = (T + b - 1) / b;
    const std::vector<float>& cells = diff ? rows.diff2d[i] : rows.pooled2d[ps][i];
    if (sx >= b && sy >= b && cells.size() == (size_t)n * n) {
      pool2_b = b;
      pool2_n = n;
      pool2 = cells.data();
      break;
    }
  }
  // B - A at texels of 8 keys or more without its cells: past dense_rows_max_tokens every key of both sides would be
  // two exponentials per texel row, and while the view worker computes them from held rows a read of every key (16K
  // tokens: ~280 ms in one frame). Not drawn.
  if (diff && (on_demand || rows.diff_pending) && !pool2 && sx >= kHeatPoolKeys[0]) return -1.0f;
  if (pool2) {
#pragma omp parallel for schedule(static)
    for (int y = 0; y < h; ++y) {
      const int qa = std::max(0, (int)std::floor(v.q0 + y * sy)),
                qb = std::min(T, std::max(qa + 1, (int)std::floor(v.q0 + (y + 1) * sy)));
      const int ia = qa / pool2_b, ie = (qb - 1) / pool2_b;
      for (int x = 0; x < w; ++x) {
        const int ka = std::max(0, (int)std::floor(v.k0 + x * sx)),
                  kb = std::min(T, std::max(ka + 1, (int)std::floor(v.k0 + (x + 1) * sx)));
        const size_t o = (size_t)y * w + x;
        masked[o] = texel_mask(cfg, st.sel_layer, qa, qb, ka, kb);
        if (masked[o] != kTexelVisible) continue;
        float best = 0.0f, best_rest = 0.0f;  // of largest magnitude (B - A's cells are signed)
        for (int i = ia; i <= ie; ++i) {
          const float* c = pool2 + (size_t)i * pool2_n;
          float m = 0.0f;
          for (int j = ka / pool2_b, je = (kb - 1) / pool2_b; j <= je; ++j)
            if (std::fabs(c[j]) > std::fabs(m)) m = c[j];
          if (std::fabs(m) > std::fabs(best)) best = m;
          if (i > 0 && std::fabs(m) > std::fabs(best_rest)) best_rest = m;  // as below, without query row 0's block
        }
        val[o] = best;
        scale_val[o] = best_rest;
      }
    }
  } else {
#pragma omp parallel for schedule(dynamic, 8)
    for (int y = 0; y < h; ++y) {
      const int qa = std::max(0, (int)std::floor(v.q0 + y * sy)),
                qb = std::min(T, std::max(qa + 1, (int)std::floor(v.q0 + (y + 1) * sy)));
      for (int x = 0; x < w; ++x) {
        const int ka = std::max(0, (int)std::floor(v.k0 + x * sx)),
                  kb = std::min(T, std::max(ka + 1, (int)std::floor(v.k0 + (x + 1) * sx)));
        float best = 0.0f, best_rest = 0.0f;
        bool any = false;
        bool windowed = false;  // causally visible keys of the texel that a sliding window hides
        for (int q = qa; q < qb; ++q) {
          const int kend = std::min(kb, q + 1);
          if (ka >= kend) continue;
          const int lo = cfg ? focal::window_first_key(*cfg, st.sel_layer, q + 1) : 0;
          if (std::max(ka, lo) >= kend) {
            windowed = true;
            continue;
          }
          any = true;
          float row_best = 0.0f;
          if (pool) {
            const float* c = pool + (size_t)q * pool_n;
            for (int j = std::max(ka, lo) / pool_b, je = (kend - 1) / pool_b; j <= je; ++j)
              row_best = std::max(row_best, c[j]);
          } else if (on_demand) {
            row_best = diff ? rows.max_diff_in(q, std::max(ka, lo), kend) : rows.max_in(ps, q, std::max(ka, lo), kend);
          } else if (diff) {
            const float* a = A->data() + (size_t)q * T;
            const float* b = B->data() + (size_t)q * T;
            for (int k = ka; k < kend; ++k) {
              const float d = b[k] - a[k];
              if (std::fabs(d) > std::fabs(row_best)) row_best = d;
            }
          } else {
            const float* p = P->data() + (size_t)q * T;
            for (int k = ka; k < kend; ++k) row_best = std::max(row_best, p[k]);
          }
          if (std::fabs(row_best) > std::fabs(best)) best = row_best;
          if (q > 0 && std::fabs(row_best) > std::fabs(best_rest)) best_rest = row_best;
        }
        val[(size_t)y * w + x] = best;
        scale_val[(size_t)y * w + x] = best_rest;
        masked[(size_t)y * w + x] = any ? kTexelVisible : windowed ? kTexelWindow : kTexelCausal;
      }
    }
  }
  float vmax = 0.0f;
  for (size_t i = 0; i < val.size(); ++i)  // as the figures: row 0 (p = 1 on its one key) takes the top colour
    if (!masked[i]) vmax = std::max(vmax, std::fabs(scale_val[i]));
  if (vmax <= 0.0f) vmax = 1.0f;
  const float floor_log = -4.0f;  // log colour: 1e-4 .. 1
  const bool log_color = st.view.log_color;
  const float inv_vmax = 1.0f / vmax;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < val.size(); ++i) {
    uint8_t* px = &out[i * 4];
    if (masked[i] == kTexelCausal) {  // keys after the query: causal mask
      px[0] = px[1] = px[2] = 28;
      px[3] = 255;
      continue;
    }
    if (masked[i] == kTexelWindow) {  // keys before the sliding window: a violet-grey, distinct from the causal mask
      px[0] = 62;
      px[1] = 48;
      px[2] = 78;
      px[3] = 255;
      continue;
    }
    focal::figures::Rgb8 c;
    if (diff) {
      c = diverging.at(0.5f * (val[i] * inv_vmax + 1.0f));
    } else if (log_color) {
      const float lv = std::log10(std::max(1e-12f, val[i]));
      c = viridis.at((lv - floor_log) / -floor_log);
    } else {
      c = viridis.at(val[i] * inv_vmax);
    }
    px[0] = c.r;
    px[1] = c.g;
    px[2] = c.b;
    px[3] = 255;
  }
  return vmax;
}

void draw_bottom(Ui& ui, const ImVec4& r) {
  if (begin_panel("Details", r)) {
    ui.record_rect("details");
    if (ui.st.corpus.get() != ui.corpus_seen) {  // a stats file just opened: show it
      ui.corpus_seen = ui.st.corpus.get();
      if (ui.corpus_seen) ui.force_tab = 5;
    }
    if (ImGui::BeginTabBar("details_tabs")) {
      if (ImGui::BeginTabItem("Metrics", nullptr, ui.force_tab == 0 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 0;
        draw_metrics(ui);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Output", nullptr, ui.force_tab == 1 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 1;
        draw_output(ui);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Sweep", nullptr, ui.force_tab == 2 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 2;
        draw_sweep(ui);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Generation", nullptr, ui.force_tab == 3 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 3;
        draw_generation(ui);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Learned tau", nullptr, ui.force_tab == 4 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 4;
        draw_tau(ui);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Corpus", nullptr, ui.force_tab == 5 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 5;
        draw_corpus(ui);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Temps", nullptr, ui.force_tab == 6 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 6;
        draw_temps(ui);
        ImGui::EndTabItem();
      }
      ImGui::EndTabBar();
    }
    ui.force_tab = -1;
  }
  ImGui::End();
}

}  // namespace focalscope
