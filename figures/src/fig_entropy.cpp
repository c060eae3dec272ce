// entropy: the per-layer mean of a row metric for several runs side by side (grouped bars, or lines with --lines);
// with --matrix, the layer x head matrix of the metric for one run or of its difference between two runs.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "focal/error.h"
#include "kinds.h"
#include "plot.h"
#include "select.h"

namespace focal::figures {
namespace {

std::string render_layer_means(const std::vector<RunRef>& runs, int metric, const FigureOptions& opt, Format fmt) {
  const int L_all = runs[0].file->n_layers, H_all = runs[0].file->n_heads;
  const std::vector<int> layers = pick_indices(opt.layers, L_all, "layer", "the model"),
                         heads = pick_indices(opt.heads, H_all, "head", "the model");
  const int L = (int)layers.size();
  std::vector<std::vector<double>> vals;
  double lo = 0, hi = 0;
  for (const RunRef& r : runs) {
    if (r.file->n_layers != L_all || r.file->n_heads != H_all)
      throw Error("runs", "runs: runs '" + runs[0].label + "' and '" + r.label +
                              "' come from models with different layer or head counts");
    const std::vector<double> hm = head_means(r, metric);
    std::vector<double> means;  // over the selected heads of each selected layer, NaN heads skipped
    for (int l : layers) {
      double acc = 0;
      int n = 0;
      for (int h : heads)
        if (!std::isnan(hm[(size_t)l * H_all + h])) acc += hm[(size_t)l * H_all + h], ++n;
      means.push_back(n ? acc / n : NAN);
    }
    vals.push_back(std::move(means));
    require_values(vals.back(), metric, "run '" + r.label + "'");
    for (double v : vals.back())
      if (!std::isnan(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  const int topk = runs[0].run->topk_mass_k;
  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt);
  const Ticks yt = nice_ticks(lo, hi > lo ? hi : lo + 1, 6, true);
  const double left = kMargin + title_height() + 3.0 + left_axis_width(c, yt);
  const double right = kMargin + 2.0;
  const double plot_w = W - left - right;
  std::vector<std::string> run_names;
  run_names.reserve(runs.size());
  for (const RunRef& r : runs) run_names.push_back(r.run->name);
  const std::vector<Rgb> colors = run_colors(run_names);  // by attention kind, the same in every figure
  std::vector<LegendItem> legend;
  for (size_t i = 0; i < runs.size(); ++i) legend.push_back({runs[i].label, colors[i], opt.lines});
  const double top = title_space(opt) + legend_height(c, legend, plot_w) + 4.0;
  const double bottom = kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0 + title_height() + kMargin;
  const double H = page_height(opt, top + 105.0 + bottom);
  const Rect plot{left, top, plot_w, H - top - bottom};
  if (plot.h < 20 || plot.w < 40) throw Error("width_in", "width_in: the page is too small; make it wider or taller");

  const std::string auto_title = "Mean " + metric_noun(metric) + " per layer";
  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  draw_legend(c, legend, left, title_space(opt), plot_w);
  const LinearMap y{yt.lo, yt.hi, plot.bottom(), plot.y};
  draw_hgrid(c, plot, yt, y);
  const double slot = plot.w / L;
  const int step = category_step(slot, c.text_width(std::to_string(layers.back()), kTickSize) + 4.0);
  std::vector<double> xs(L);
  for (int l = 0; l < L; ++l) xs[l] = plot.x + (l + 0.5) * slot;
  const int n = (int)runs.size();
  if (opt.lines) {
    for (int k = 0; k < n; ++k) {
      std::vector<double> ys(L);
      for (int l = 0; l < L; ++l) ys[l] = std::isnan(vals[k][l]) ? NAN : y(vals[k][l]);
      c.polyline(xs, ys, 1.2, colors[k]);
      for (int l = 0; l < L; ++l)
        if (!std::isnan(ys[l])) c.marker(xs[l], ys[l], L > 40 ? 1.0 : 1.8, colors[k]);
    }
  } else {
    const double group = std::min(0.8 * slot, slot - 0.3), bar = group / n;
    const double base = y(std::max(yt.lo, 0.0));
    for (int k = 0; k < n; ++k)
      for (int l = 0; l < L; ++l) {
        const double v = vals[k][l];
        if (std::isnan(v)) continue;
        const double x0 = xs[l] - group / 2 + k * bar, yv = y(v);
        c.fill_rect(x0, std::min(yv, base), std::max(bar - (n > 1 && bar > 2 ? 0.4 : 0.0), 0.3), std::fabs(base - yv),
                    colors[k]);
      }
  }
  draw_left_axis(c, plot, yt, y);
  c.line(plot.x, plot.bottom(), plot.right(), plot.bottom(), kAxisWidth, kInk);
  for (int l = 0; l < L; ++l) {
    const bool label = l % step == 0;
    c.line(xs[l], plot.bottom(), xs[l], plot.bottom() + (label ? kTickLen : kTickLen / 2), kAxisWidth, kInk);
    if (label)
      c.text(std::to_string(layers[l]), xs[l], plot.bottom() + kTickLen + 1.5, kTickSize, 0.5, 1.0, 0, false, kInk);
  }
  draw_y_title(c, kMargin, plot, metric_title(metric, topk));
  draw_x_title(c, plot, plot.bottom() + kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0, "Layer");
  return c.finish();
}

std::string render_matrix(const std::vector<RunRef>& runs, int metric, const FigureOptions& opt, Format fmt) {
  const int L_all = runs[0].file->n_layers, H_all = runs[0].file->n_heads;
  const std::vector<int> layers = pick_indices(opt.layers, L_all, "layer", "the model"),
                         heads = pick_indices(opt.heads, H_all, "head", "the model");
  const int L = (int)layers.size(), Hn = (int)heads.size();
  auto select = [&](const std::vector<double>& all) {  // [L_all, H_all] -> [L, Hn]
    std::vector<double> out;
    for (int l : layers)
      for (int h : heads) out.push_back(all[(size_t)l * H_all + h]);
    return out;
  };
  std::vector<double> v = select(head_means(runs[0], metric));
  require_values(v, metric, "run '" + runs[0].label + "'");
  const bool diff = runs.size() == 2;
  const int topk = runs[0].run->topk_mass_k;
  std::string what = metric_title(metric, topk);
  if (diff) {
    const RunRef& b = runs[1];
    if (b.file->n_layers != L_all || b.file->n_heads != H_all)
      throw Error("runs", "runs: runs '" + runs[0].label + "' and '" + b.label +
                              "' come from models of different shapes; their matrices cannot be subtracted");
    const std::vector<double> vb = select(head_means(b, metric));
    require_values(vb, metric, "run '" + b.label + "'");
    // A difference under the metrics' own precision (fp32 per row: ~1e-7 of the value, 1e-6 after the mean) is
    // shown as 0, not as a residue such as 7e-09 between equal heads; the precision of values near 0 is that of the
    // matrix's scale (a pure sink head, entropy ~0 in both runs, read "1.1e-08" among differences of order 1).
    double scale = 0;
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isnan(v[i]) && !std::isnan(vb[i])) scale = std::max({scale, std::fabs(v[i]), std::fabs(vb[i])});
    for (size_t i = 0; i < v.size(); ++i) {
      const double d = vb[i] - v[i];
      v[i] = std::fabs(d) <= 1e-6 * std::max({std::fabs(vb[i]), std::fabs(v[i]), scale}) ? 0.0 : d;
    }
  }
  double lo = INFINITY, hi = -INFINITY, amax = 0;
  for (double x : v)
    if (!std::isnan(x)) lo = std::min(lo, x), hi = std::max(hi, x), amax = std::max(amax, std::fabs(x));
  const ColorScale cs = diff ? diverging_scale(amax, "\xCE\x94 " + what)  // Δ
                             : linear_scale(lo, hi, what);

  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt);
  std::vector<std::string> row_labels, col_labels;
  for (int l : layers) row_labels.push_back(std::to_string(l));
  for (int h : heads) col_labels.push_back(std::to_string(h));
  const double ylab = max_label_width(c, row_labels, kTickSize);
  double left = kMargin + title_height() + 3.0 + kTickLen + 1.5 + ylab;
  const double right = kMargin + colorbar_width(c, cs);
  const double bottom = kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0 + title_height() + kMargin;
  const double top = title_space(opt) + 2.0;
  // Square cells up to 42 pt; a tall matrix (30 layers in a column) is kept within 1.3 x the width by flatter cells.
  double cell_w = std::min((W - left - right) / Hn, 42.0);
  const double limit = opt.height_in > 0 ? opt.height_in * 72.0 : std::max(1.3 * W, 216.0);
  double cell_h = std::min(cell_w, (limit - top - bottom) / L);
  const double H = page_height(opt, top + cell_h * L + bottom);
  cell_h = std::min(cell_h, (H - top - bottom) / L);
  if (opt.height_in <= 0) cell_w = std::min(cell_w, std::max(cell_h, 2.5 * cell_h));
  const double cell = std::min(cell_w, cell_h);
  if (cell < 1.0)
    throw Error("width_in", "width_in: the page is too small for " + std::to_string(L) + " x " + std::to_string(Hn) +
                                " cells; make it wider or taller");
  left += (W - left - right - cell_w * Hn) / 2;  // centre the block when cells are capped
  const Rect plot{left, top, cell_w * Hn, cell_h * L};

  const std::string auto_title =
      (diff ? runs[1].label + " \xE2\x88\x92 " + runs[0].label : runs[0].label) + ": " + metric_noun(metric);
  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  draw_cells(c, plot, L, Hn, [&](int l, int h, Rgb* out) {
    const double x = v[(size_t)l * Hn + h];
    *out = std::isnan(x) ? kMissing : cs(x);
    return true;
  });
  // Values in the cells when they fit at the tick size: 3 significant digits, else 2, else 1 (never rounded to
  // a bare integer, so a small difference never reads "−0").
  draw_cell_values(
      c, plot, L, Hn, cell_w, cell_h, v, [&](double x) { return cs(x); }, diff);
  draw_matrix_ticks(c, plot, cell_w, cell_h, row_labels, col_labels);
  c.stroke_rect(plot.x, plot.y, plot.w, plot.h, 0.4, kInk);
  draw_colorbar(c, cs, plot.right(), plot.y, plot.h);
  draw_y_title(c, plot.x - kTickLen - 1.5 - ylab - 3.0 - title_height(), plot, "Layer");
  draw_x_title(c, plot, plot.bottom() + kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0, "Head");
  return c.finish();
}

}  // namespace

std::string render_entropy(const std::vector<Source>& src, const FigureOptions& opt, Format fmt) {
  const std::string kind = "entropy";
  reject_option(opt.per_layer, "per_layer", kind);
  reject_option(opt.overlay, "overlay", kind);
  reject_option(opt.no_sink, "no_sink", kind);
  reject_option(opt.log_scale, "log_scale", kind);
  reject_option(opt.layer >= 0, "layer", kind);
  reject_option(opt.head >= 0, "head", kind);
  reject_option(opt.query >= 0, "query", kind);
  check_page_options(opt);
  const int metric = parse_metric(opt.metric.empty() ? "entropy_nats" : opt.metric, false);
  const std::vector<RunRef> all = capture_runs(src, kind);
  if (opt.matrix) {
    reject_option(opt.lines, "lines", "entropy matrix");
    return render_matrix(select_runs(all, opt.runs, 1, 2, "entropy matrix"), metric, opt, fmt);
  }
  return render_layer_means(select_runs(all, opt.runs, kNumCategoryColors, kNumCategoryColors, kind), metric, opt, fmt);
}

}  // namespace focal::figures
