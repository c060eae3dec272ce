// temps: the temperatures of a `focal calibrate` file as a layer x head matrix (t in each cell, colour on log2 t,
// diverging about t = 1: blue sharper, red flatter), with the held-out loss before and after on a line under the
// title.
#include <algorithm>
#include <cmath>

#include "focal/error.h"
#include "focal_figures/temps.h"
#include "kinds.h"
#include "plot.h"

namespace focal::figures {

std::string render_temps(const TempFile& f, const std::string& label, const FigureOptions& opt, Format fmt) {
  const std::string kind = "temps";
  reject_option(opt.layer >= 0, "layer", kind);
  reject_option(opt.head >= 0, "head", kind);
  reject_option(opt.query >= 0, "query", kind);
  reject_option(!opt.metric.empty(), "metric", kind);
  reject_option(!opt.runs.empty(), "runs", kind);
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

  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt);
  std::vector<std::string> row_labels, col_labels;
  for (int l : layers) row_labels.push_back(std::to_string(l));
  for (int h : heads) col_labels.push_back(std::to_string(h));
  const double ylab = max_label_width(c, row_labels, kTickSize);
  double left = kMargin + title_height() + 3.0 + kTickLen + 1.5 + ylab;
  const double right = kMargin + colorbar_width(c, cs);
  const double bottom = kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0 + title_height() + kMargin;
  const bool loss_known = f.val_loss_init > 0.0 && f.val_loss > 0.0;
  const double note = loss_known ? 1.4 * kTickSize : 0.0;
  const double top = title_space(opt) + note + 2.0;
  // Square cells up to 42 pt; a tall matrix is kept within 1.3 x the width by flatter cells (as the entropy matrix).
  double cell_w = std::min((W - left - right) / Hn, 42.0);
  const double limit = opt.height_in > 0 ? opt.height_in * 72.0 : std::max(1.3 * W, 216.0);
  double cell_h = std::min(cell_w, (limit - top - bottom) / L);
  const double H = page_height(opt, top + cell_h * L + bottom);
  cell_h = std::min(cell_h, (H - top - bottom) / L);
  if (opt.height_in <= 0) cell_w = std::min(cell_w, std::max(cell_h, 2.5 * cell_h));
  if (std::min(cell_w, cell_h) < 1.0)
    throw Error("width_in", "width_in/height_in: the figure is too small for " + std::to_string(L) + " x " +
                                std::to_string(Hn) + " cells; make it larger");
  left += (W - left - right - cell_w * Hn) / 2;
  const Rect plot{left, top, cell_w * Hn, cell_h * L};

  const char* gran = f.granularity == CalibGranularity::kModel   ? "one t"
                     : f.granularity == CalibGranularity::kLayer ? "t per layer"
                                                                 : "t per head";
  const std::string auto_title = label + ": calibrated " + gran;
  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  if (loss_known) {
    char b[160];
    std::snprintf(b, sizeof b, "held-out loss %.3f \xE2\x86\x92 %.3f nats/token (from t = %s, %d steps)",
                  f.val_loss_init, f.val_loss, format_sig(f.init_temp, 3).c_str(), f.steps);  // →
    c.text(b, W / 2, title_space(opt) + 0.2, kTickSize, 0.5, 0.0, 0, false, kInk);
  }
  draw_cells(c, plot, L, Hn, [&](int l, int h, Rgb* out) {
    *out = cs(std::log2(t[(size_t)l * Hn + h]));
    return true;
  });
  int digits = 3;
  auto widest_at = [&](int d) {
    double w = 0;
    for (double x : t) w = std::max(w, c.text_width(format_sig(x, d), kTickSize));
    return w;
  };
  double widest = widest_at(digits);
  while (digits > 1 && widest > cell_w - 3.0) widest = widest_at(--digits);
  if (widest <= cell_w - 3.0 && cell_h >= 1.6 * kTickSize)
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < Hn; ++h) {
        const double x = t[(size_t)l * Hn + h];
        const Rgb ink = luminance(cs(std::log2(x))) > 0.35 ? kInk : Rgb{1, 1, 1};
        c.text(format_sig(x, digits), plot.x + (h + 0.5) * cell_w, plot.y + (l + 0.5) * cell_h, kTickSize, 0.5, 0.5, 0,
               false, ink);
      }
  const int xstep = category_step(cell_w, c.text_width(col_labels.back(), kTickSize) + 3.0);
  const int ystep = category_step(cell_h, 1.1 * kTickSize);
  for (int h = 0; h < Hn; h += xstep) {
    const double x = plot.x + (h + 0.5) * cell_w;
    c.line(x, plot.bottom(), x, plot.bottom() + kTickLen, kAxisWidth, kInk);
    c.text(col_labels[h], x, plot.bottom() + kTickLen + 1.5, kTickSize, 0.5, 1.0, 0, false, kInk);
  }
  for (int l = 0; l < L; l += ystep) {
    const double y = plot.y + (l + 0.5) * cell_h;
    c.line(plot.x - kTickLen, y, plot.x, y, kAxisWidth, kInk);
    c.text(row_labels[l], plot.x - kTickLen - 1.5, y, kTickSize, 1.0, 0.5, 0, false, kInk);
  }
  c.stroke_rect(plot.x, plot.y, plot.w, plot.h, 0.4, kInk);
  draw_colorbar(c, cs, plot.right(), plot.y, plot.h);
  draw_y_title(c, plot.x - kTickLen - 1.5 - ylab - 3.0 - title_height(), plot, "Layer");
  draw_x_title(c, plot, plot.bottom() + kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0, "Head");
  return c.finish();
}

}  // namespace focal::figures
