// temps: the temperatures of a `focal calibrate` file as a layer x head matrix (t in each cell, colour on log2 t,
// diverging about t = 1: blue sharper, red flatter), with the held-out loss before and after on a line under the
// title; with a capture of the same model, under it each head's t against its mean entropy under the capture's
// standard run.
#include <algorithm>
#include <cmath>

#include "focal/error.h"
#include "focal_figures/temps.h"
#include "kinds.h"
#include "plot.h"
#include "select.h"

namespace focal::figures {

std::string render_temps(const TempFile& f, const std::string& label, const CaptureFile* cap, const FigureOptions& opt,
                         Format fmt) {
  const std::string kind = "temps";
  reject_option(opt.layer >= 0, "layer", kind);
  reject_option(opt.head >= 0, "head", kind);
  reject_option(opt.query >= 0, "query", kind);
  reject_option(!opt.metric.empty(), "metric", kind);
  if (!cap && !opt.runs.empty())  // "runs does not apply to the temps without a capture figure"
    throw Error("runs",
                "runs picks the capture's standard run, and no capture was given (focal figure temps FILE "
                "CAPTURE)");
  reject_option(opt.log_scale, "log_scale", kind);
  reject_option(opt.no_sink, "no_sink", kind);
  reject_option(opt.matrix, "matrix", kind);
  reject_option(opt.per_layer, "per_layer", kind);
  reject_option(opt.lines, "lines", kind);
  reject_option(opt.overlay, "overlay", kind);
  check_page_options(opt);
  const int L_all = f.n_layers, H_all = f.n_heads;
  if (L_all <= 0 || H_all <= 0 || f.focal_temp.size() != (size_t)L_all * H_all)
    throw Error("the temperature file holds no layer x head temperatures");
  std::vector<int> layers = opt.layers, heads = opt.heads;
  for (auto [list, n, name] :
       {std::tuple<std::vector<int>*, int, std::string>{&layers, L_all, "layers"}, {&heads, H_all, "heads"}}) {
    for (int i : *list)
      if (i < 0 || i >= n)
        throw Error(name, name + ": " + std::to_string(i) + " is not in 0.." + std::to_string(n - 1) +
                              " (the file's model has " + std::to_string(n) + " " + name + ")");
    if (list->empty())
      for (int i = 0; i < n; ++i) list->push_back(i);
  }
  const int L = (int)layers.size(), Hn = (int)heads.size();
  std::vector<double> t;  // [L, Hn]
  double amax = 0.0;
  for (int l : layers)
    for (int h : heads) {
      t.push_back(f.focal_temp[(size_t)l * H_all + h]);
      amax = std::max(amax, std::fabs(std::log2(t.back())));
    }
  const ColorScale cs = diverging_scale(std::max(amax, 0.05), "log\xE2\x82\x82 t  (< 0: sharper)");  // log₂
  // The capture's run (--runs NAME, default "standard") and its mean entropy per selected head, rows 1..T-1.
  std::vector<double> ent;
  std::string run_name;
  if (cap) {
    if (cap->n_layers != L_all || cap->n_heads != H_all || cap->weights_checksum != f.base_checksum)
      throw Error("the capture (model '" + cap->model_path + "') was not made with the temperature file's model ('" +
                  f.base_model + "'): capture that model's standard attention to draw t against entropy");
    if (opt.runs.size() > 1) throw Error("runs", "runs: the temps figure reads one run of the capture");
    run_name = opt.runs.empty() ? "standard" : opt.runs[0];
    const RunCapture* r = cap->find_run(run_name);
    if (!r)
      throw Error("runs", "runs: the capture has no run '" + run_name + "'" +
                              (opt.runs.empty() ? " (the default): name the run to read with --runs" : ""));
    RunRef ref;
    ref.file = cap;
    ref.run = r;
    ref.label = run_name;
    const std::vector<double> all = head_means(ref, kEntropyNats);
    for (int l : layers)
      for (int h : heads) ent.push_back(all[(size_t)l * H_all + h]);
  }

  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt);
  std::vector<std::string> row_labels, col_labels;
  for (int l : layers) row_labels.push_back(std::to_string(l));
  for (int h : heads) col_labels.push_back(std::to_string(h));
  const double ylab = max_label_width(c, row_labels, kTickSize);
  double left = kMargin + title_height() + 3.0 + kTickLen + 1.5 + ylab;
  const double right = kMargin + colorbar_width(c, cs);
  const double axis_depth = kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0 + title_height();
  const double bottom = axis_depth + kMargin;
  const bool loss_known = f.val_loss_init > 0.0 && f.val_loss > 0.0;
  const double note = 1.4 * kTickSize + 1.3;  // the line under the title: the file (and its losses)
  const double top = title_space(opt) + note + 2.0;
  // With a capture, the scatter of t against entropy goes under the matrix, at full width: its plot, legend of
  // layers (up to 8) and axis.
  std::vector<LegendItem> legend;
  if (cap && L <= 8)
    for (int i = 0; i < L; ++i)
      legend.push_back({"layer " + std::to_string(layers[i]), viridis(L > 1 ? 0.9 * i / (L - 1) : 0.45), true, true,
                        /*stroke=*/false});  // dots, as the scatter draws them
  const double scatter_h = cap ? 0.42 * W : 0.0;
  const double scatter_block =
      cap ? 12.0 + (legend.empty() ? 0.0 : legend_height(c, legend, W - 2 * kMargin) + 4.0) + scatter_h + axis_depth
          : 0.0;
  // Square cells up to 42 pt; a tall matrix is kept within 1.3 x the width by flatter cells (as the entropy matrix).
  double cell_w = std::min((W - left - right) / Hn, 42.0);
  const double limit = opt.height_in > 0 ? opt.height_in * 72.0 : std::max(1.3 * W, 216.0) + scatter_block;
  double cell_h = std::min(cell_w, (limit - top - bottom - scatter_block) / L);
  const double H = page_height(opt, top + cell_h * L + scatter_block + bottom);
  cell_h = std::min(cell_h, (H - top - bottom - scatter_block) / L);
  if (opt.height_in <= 0) cell_w = std::min(cell_w, std::max(cell_h, 2.5 * cell_h));
  if (std::min(cell_w, cell_h) < 1.0)
    throw Error("width_in", "width_in: the page is too small for " + std::to_string(L) + " x " + std::to_string(Hn) +
                                " cells; make it wider or taller");
  left += (W - left - right - cell_w * Hn) / 2;
  const Rect plot{left, top, cell_w * Hn, cell_h * L};
  // A short bar cannot hold the rotated title: the short one then.
  ColorScale bar = cs;
  if (colorbar_min_height(c, bar) > plot.h) bar.title = "log\xE2\x82\x82 t";
  if (colorbar_min_height(c, bar) > plot.h) bar.title = "";

  // What was calibrated, then the model it belongs to (named: the file's stem said nothing of it), last so that a
  // long name is what the title's … shortens.
  const char* gran = f.granularity == CalibGranularity::kModel     ? "t, one for the model"
                     : f.granularity == CalibGranularity::kLayer   ? "t per layer"
                     : f.granularity == CalibGranularity::kTauProj ? "\xCF\x84 (mean t per layer)"
                                                                   : "t per head";
  // the model, then the file (two calibrations of one model: seeds, data)
  // The model first (a long title's … cuts its end: it cut the model's name), the file and the losses on the line
  // under it.
  const std::string model = f.base_model.empty() ? "" : base_name(f.base_model);
  const std::string auto_title = model.empty() ? std::string("Calibrated ") + gran : model + ": calibrated " + gran;
  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  if (loss_known) {
    // Decimals enough to show the change (3 printed 4.75243 -> 4.75172 as "4.752 -> 4.752").
    const int dec = std::fabs(f.val_loss - f.val_loss_init) >= 0.005 ? 3 : 5;
    char loss[96], run[64];
    std::snprintf(loss, sizeof loss, "held-out loss %.*f \xE2\x86\x92 %.*f", dec, f.val_loss_init, dec,
                  f.val_loss);  // →
    std::snprintf(run, sizeof run, "from t = %s, %d steps", format_sig(f.init_temp, 3).c_str(), f.steps);
    // The longest form that fits the page (a single column cut it at both ends).
    std::string line;
    for (const std::string& s :
         {label + ": " + loss + " nats/token (" + run + ")",
          label + ": " + loss + " nats/token (from t = " + format_sig(f.init_temp, 3) + ")",
          label + ": " + loss + " nats/token", std::string(loss) + " nats/token", std::string(loss) + " nats"}) {
      line = s;
      if (c.text_width(s, kTickSize) <= W - 2 * kMargin) break;
    }
    c.text(line, W / 2, title_space(opt) + 1.5, kTickSize, 0.5, 0.0, 0, false,
           kInk);  // clear of the title's descenders
  } else {
    c.text(label, W / 2, title_space(opt) + 1.5, kTickSize, 0.5, 0.0, 0, false, kInk);
  }
  draw_cells(c, plot, L, Hn, [&](int l, int h, Rgb* out) {
    *out = cs(std::log2(t[(size_t)l * Hn + h]));
    return true;
  });
  draw_cell_values(c, plot, L, Hn, cell_w, cell_h, t, [&](double x) { return cs(std::log2(x)); });
  draw_matrix_ticks(c, plot, cell_w, cell_h, row_labels, col_labels);
  c.stroke_rect(plot.x, plot.y, plot.w, plot.h, 0.4, kInk);
  draw_colorbar(c, bar, plot.right(), plot.y, plot.h);
  draw_y_title(c, plot.x - kTickLen - 1.5 - ylab - 3.0 - title_height(), plot, "Layer");
  draw_x_title(c, plot, plot.bottom() + kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0, "Head");
  if (cap) {  // t against entropy: one dot per head, coloured by layer (viridis), a dashed line at t = 1
    double e0 = INFINITY, e1 = -INFINITY, t0 = 1.0, t1 = 1.0;
    for (size_t i = 0; i < t.size(); ++i) {
      if (!std::isnan(ent[i])) e0 = std::min(e0, ent[i]), e1 = std::max(e1, ent[i]);
      t0 = std::min(t0, t[i]), t1 = std::max(t1, t[i]);
    }
    if (!(e0 <= e1)) throw Error("the capture's run '" + run_name + "' has no entropy for the selected heads");
    if (e1 - e0 < 1e-6) e0 -= 0.5, e1 += 0.5;
    const Ticks xt = nice_ticks(e0, e1, 6, true), yt = nice_ticks(t0, t1, 5, true);
    double y = plot.bottom() + axis_depth + 12.0;
    if (!legend.empty()) {
      draw_legend(c, legend, kMargin, y, W - 2 * kMargin);
      y += legend_height(c, legend, W - 2 * kMargin) + 4.0;
    }
    const double sx = kMargin + title_height() + 3.0 + left_axis_width(c, yt);
    // More than 8 layers have no legend: a colour bar of the layers beside the plot says which colour is which
    // (a 30-layer model's dots had no key).
    ColorScale layer_cs = linear_scale(layers.front(), std::max(layers.back(), layers.front() + 1), "Layer");
    layer_cs.span = 0.9;
    const bool layer_bar = legend.empty() && L > 1;
    const double bar_w = layer_bar ? colorbar_width(c, layer_cs) + 6.0 : 0.0;
    const Rect sp{sx, y, W - kMargin - 4.0 - sx - bar_w, scatter_h};
    const LinearMap mx{xt.lo, xt.hi, sp.x, sp.right()}, my{yt.lo, yt.hi, sp.bottom(), sp.y};
    draw_hgrid(c, sp, yt, my);
    c.line(sp.x, my(1.0), sp.right(), my(1.0), 0.6, gray(0.45), true);
    c.text("t = 1 (standard)", sp.right() - 2.0, my(1.0) + 2.0, kTickSize, 1.0, 1.0, 0, false, gray(0.35));
    for (size_t i = 0; i < t.size(); ++i) {
      if (std::isnan(ent[i])) continue;
      const int l = (int)(i / Hn);
      c.marker(mx(ent[i]), my(t[i]), 1.8, layer_bar ? layer_cs(layers[l]) : viridis(L > 1 ? 0.9 * l / (L - 1) : 0.45));
    }
    draw_left_axis(c, sp, yt, my);
    draw_bottom_axis(c, sp, xt, mx);
    if (layer_bar) draw_colorbar(c, layer_cs, sp.right() + 6.0, sp.y, sp.h);
    draw_y_title(c, kMargin, sp, "t");
    draw_x_title(c, sp, sp.bottom() + kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0,
                 "Entropy under " + run_name + " (nats)");
  }
  return c.finish();
}

}  // namespace focal::figures
