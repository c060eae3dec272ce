// distribution: attention probability over the context tokens for one (layer, head, query), one panel per run
// (or grouped bars in one panel with --overlay) — the paper's Fig. 1, standard vs focal.
#include <algorithm>
#include <functional>
#include <cmath>

#include "focal/error.h"
#include "kinds.h"
#include "plot.h"
#include "select.h"

namespace focal::figures {

namespace {
constexpr double kMinBar = 0.8;            // pt: the narrowest bar drawn
constexpr double kTopKeySize = kTickSize;  // pt: labels of the top keys (7 pt, as the docs say of all labels)
// Narrow slots get 2 pt of room inside each end of the axis, so that the first bar is not hidden by the spine.
double key_pad(double plot_w, int n_keys) { return plot_w / n_keys < 4.0 ? 2.0 : 0.0; }
double key_slot(double plot_w, int n_keys) { return (plot_w - 2 * key_pad(plot_w, n_keys)) / n_keys; }
}  // namespace

std::string render_distribution(const std::vector<Source>& src, const FigureOptions& opt, Format fmt) {
  const std::string kind = "distribution";
  reject_option(opt.matrix, "matrix", kind);
  reject_option(opt.per_layer, "per_layer", kind);
  reject_option(opt.lines, "lines", kind);
  reject_option(opt.log_scale, "log_scale", kind);
  reject_option(!opt.metric.empty(), "metric", kind);
  check_page_options(opt);
  const std::vector<RunRef> runs = select_runs(capture_runs(src, kind), opt.runs, 3, 3, kind);
  for (const RunRef& r : runs) require_rows(r, kind);

  // Selection: defaults come from the first run; every run must store the same row.
  const RunCapture& r0 = *runs[0].run;
  const int layer = opt.layer >= 0 ? opt.layer : r0.layers.front();
  const int head = opt.head >= 0 ? opt.head : r0.heads.front();
  const int query = opt.query >= 0 ? opt.query : r0.queries.back();
  const CaptureFile& f0 = *runs[0].file;
  std::vector<std::vector<double>> rows;
  for (const RunRef& r : runs) {
    if (r.file->token_ids != f0.token_ids)
      throw Error("runs", "runs: runs '" + runs[0].label + "' and '" + r.label + "' are over different tokens");
    const int a = stored_index(r.run->layers, layer, "layer", "layer", r);
    const int b = stored_index(r.run->heads, head, "head", "head", r);
    const int c = stored_index(r.run->queries, query, "query", "query", r);
    std::vector<double> p = attention_row(r, a, b, c);
    if (opt.no_sink) {
      if (query == 0) throw Error("no_sink", "no_sink: query 0 sees only the first token; choose a later query");
      p = drop_sink(p);
    }
    rows.push_back(std::move(p));
  }
  // The key window: keys k0..k1 of the row (first_key..query by default).
  const int first_key = opt.no_sink ? 1 : 0;
  int k0 = first_key, k1 = query;
  if (opt.key_window > 0) k0 = std::max(first_key, query - opt.key_window + 1);
  if (opt.key_first >= 0) k0 = opt.key_first;
  if (opt.key_last >= 0) k1 = opt.key_last;
  if (k0 > k1 && k0 >= first_key && k1 <= query)
    throw Error("keys", "keys: " + std::to_string(k0) + ":" + std::to_string(k1) +
                            " runs backwards: give FIRST:LAST with "
                            "FIRST <= LAST, e.g. " +
                            std::to_string(k1) + ":" + std::to_string(k0));
  if (k0 < first_key || k1 > query || k0 > k1)
    throw Error("keys", "keys: keys " + std::to_string(k0) + ":" + std::to_string(k1) + " are not within the keys " +
                            std::to_string(first_key) + ":" + std::to_string(query) + " that query " +
                            std::to_string(query) + " sees" + (opt.no_sink ? " (the sink excluded)" : ""));
  for (auto& p : rows) p = std::vector<double>(p.begin() + (k0 - first_key), p.begin() + (k1 - first_key + 1));
  const int n_keys = (int)rows[0].size();
  std::vector<std::string> labels, numbers;
  for (int j = k0; j <= k1; ++j) {
    labels.push_back(f0.pieces.empty() ? std::to_string(j) : token_label(f0.pieces[j]));
    numbers.push_back(std::to_string(j));
  }
  double ymax = 0;
  for (const auto& p : rows)
    for (double v : p) ymax = std::max(ymax, v);

  // Layout, outside in.
  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt);
  const bool overlay = opt.overlay && runs.size() > 1;
  const int n_panels = overlay ? 1 : (int)runs.size();
  // Ticks from the data, never past probability 1; the axis runs on above the top tick when the highest bar's label
  // needs the room (a peak at 0.99 gets ticks to 1.0 and an axis to 1.11, not ticks to 1.5).
  const double headroom = ymax > 0 ? ymax * (1.0 + 0.12 * (opt.top_keys != 0)) : 1.0;
  const int max_ticks = n_panels > 1 ? 4 : 6;
  Ticks yt = nice_ticks(0, std::min(headroom, 1.0), max_ticks, true);
  if (yt.hi > 1.0) yt = nice_ticks(0, 1.0, max_ticks, true);
  const double y_top = std::max(yt.hi, headroom);
  const double strip = overlay || runs.size() == 1 ? 0.0 : 1.35 * kPanelSize;  // run name over each panel
  double left = kMargin + title_height() + 3.0 + left_axis_width(c, yt);
  const double right = kMargin + 2.0;
  CategoryAxis xa;
  double plot_w = 0;
  for (int pass = 0; pass < 2; ++pass) {  // the labels' lean can widen the left margin once
    plot_w = W - left - right;
    const double sw = key_slot(plot_w, n_keys);
    // Every token when each slot can take its label; otherwise key positions at round steps (a thinned token axis
    // would put a neighbour's token under a peak) and the top keys labelled at their bars.
    xa = layout_category_axis(c, labels, sw, kTickSize);
    if (xa.step > 1) {
      xa = layout_category_axis(c, numbers, sw, kTickSize, false);
      int widest = 1;
      for (const auto& s : numbers) widest = std::max(widest, (int)s.size());
      xa.step = category_step(sw, c.text_width(std::string((size_t)widest, '0'), kTickSize) + 4.0);
      xa.angle = 0;
      xa.depth = kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize;
      xa.left_overhang = 0;
      xa.offset = k0;
    }
    const double first_centre = left + key_pad(plot_w, n_keys) + sw / 2;
    if (first_centre - xa.left_overhang >= kMargin) break;
    left += kMargin - (first_centre - xa.left_overhang);
  }
  std::vector<std::string> run_names;
  run_names.reserve(runs.size());
  for (const RunRef& r : runs) run_names.push_back(r.run->name);
  const std::vector<Rgb> colors = run_colors(run_names);  // by attention kind, the same in every figure
  const int top_keys = opt.top_keys >= 0 ? opt.top_keys : (xa.angle == 0 ? 3 : 0);
  std::vector<LegendItem> legend;
  if (overlay)
    for (size_t i = 0; i < runs.size(); ++i) legend.push_back({runs[i].label, colors[i]});
  const double top = title_space(opt) + (legend.empty() ? 0.0 : legend_height(c, legend, plot_w) + 3.0);
  const double bottom = xa.depth + 3.0 + title_height() + kMargin;
  const double gap = 5.0;
  const double natural_panel = overlay || runs.size() == 1 ? 100.0 : 64.0;
  const double H = page_height(opt, top + n_panels * (strip + natural_panel) + (n_panels - 1) * gap + bottom);
  const double panel_h = (H - top - bottom - (n_panels - 1) * gap) / n_panels - strip;
  if (panel_h < 20 || plot_w < 40)
    throw Error("width_in", "width_in: the page is too small for " + std::to_string(n_keys) + " tokens in " +
                                std::to_string(n_panels) + " panel(s); make it wider or taller");

  std::string auto_title =
      "Layer " + std::to_string(layer) + ", head " + std::to_string(head) + ", query " + std::to_string(query);
  if (!f0.pieces.empty()) auto_title += " " + quoted(token_label(f0.pieces[query], 16));
  if (query >= f0.prompt_end()) auto_title += " (generated)";
  if (runs.size() == 1) auto_title = runs[0].label + ": l" + auto_title.substr(1);
  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  if (!legend.empty()) draw_legend(c, legend, left, title_space(opt), plot_w);

  const double slot = key_slot(plot_w, n_keys), pad = key_pad(plot_w, n_keys);
  std::vector<double> xs(n_keys);
  for (int j = 0; j < n_keys; ++j) xs[j] = left + pad + (j + 0.5) * slot;
  Rect all{left, top, plot_w, 0};
  for (int p = 0; p < n_panels; ++p) {
    const Rect plot{left, top + p * (strip + panel_h + gap) + strip, plot_w, panel_h};
    all.h = plot.bottom() - all.y;
    const LinearMap y{yt.lo, y_top, plot.bottom(), plot.y};
    draw_hgrid(c, plot, yt, y);
    const int n_bars = overlay ? (int)runs.size() : 1;
    // Bars at least kMinBar wide so that a peak among hundreds of keys stays visible (neighbours may touch).
    const double group = std::min(0.8 * slot, slot - 0.3), bar = std::max(group / n_bars, kMinBar / n_bars);
    for (int k = 0; k < n_bars; ++k) {
      const int run = overlay ? k : p;
      for (int j = 0; j < n_keys; ++j) {
        const double v = rows[run][j];
        if (!(v > 0)) continue;
        const double x0 = xs[j] - bar * n_bars / 2 + k * bar;
        c.fill_rect(x0, y(v), bar, plot.bottom() - y(v), colors[run]);
      }
    }
    // The top keys of this panel (of any run with --overlay), labelled at their bars: token and position.
    std::vector<std::pair<double, int>> order;
    for (int j = 0; j < n_keys; ++j) {
      double v = 0;
      for (int k = 0; k < n_bars; ++k) v = std::max(v, rows[overlay ? k : p][j]);
      order.push_back({-v, j});
    }
    std::sort(order.begin(), order.end());
    // A label sits on its bar, centred, else ending or starting at the bar, wherever it crosses neither a label
    // already drawn nor a taller bar (two top keys a few positions apart: the second was left unlabelled).
    struct Box {
      double x0, x1, y0, y1;
    };
    std::vector<Box> placed;
    for (int t = 0; t < top_keys && t < (int)order.size(); ++t) {
      const int j = order[t].second;
      const double v = -order[t].first;
      if (!(v > 0)) break;
      const std::string s = labels[j] + " (" + numbers[j] + ")";
      const double w = c.text_width(s, kTopKeySize);
      // At the bar's top, else stacked just above a label already drawn (a runner-up beside the top key: its label
      // goes above the top key's, its position in parentheses saying which bar it names).
      const double base = std::max(y(v) - 1.0, plot.y + kTopKeySize);  // baseline at the bar
      std::vector<double> tys = {base};
      for (const Box& o : placed)
        if (o.y0 - 1.5 < base && o.y0 - 1.5 >= plot.y + kTopKeySize) tys.push_back(o.y0 - 1.5);
      std::sort(tys.begin(), tys.end(), std::greater<>());  // lowest on the page first
      bool drawn = false;
      for (size_t level = 0; level < tys.size() && !drawn; ++level) {
        const double ty = tys[level];
        const Box row{0, 0, ty - kTopKeySize, ty + 1.0};
        for (double anchor : {0.5, 1.0, 0.0}) {
          const double x0 = std::clamp(xs[j] - anchor * w +
                                           (anchor == 1.0   ? slot / 2
                                            : anchor == 0.0 ? -slot / 2
                                                            : 0),
                                       plot.x, plot.right() - w);
          const Box b{x0, x0 + w, row.y0, row.y1};
          bool clash = false;
          for (const Box& o : placed) clash |= b.x0 < o.x1 + 2.0 && b.x1 > o.x0 - 2.0 && b.y0 < o.y1 && b.y1 > o.y0;
          for (int k = 0; k < n_keys && !clash; ++k) {  // a taller bar under the label's extent
            if (k == j || xs[k] + slot / 2 < b.x0 || xs[k] - slot / 2 > b.x1) continue;
            double vk = 0;
            for (int r = 0; r < n_bars; ++r) vk = std::max(vk, rows[overlay ? r : p][k]);
            clash = y(vk) < b.y1;
          }
          if (clash) continue;
          placed.push_back(b);
          c.text(s, x0, ty, kTopKeySize, 0.0, 0.0, 0, false, kInk);
          drawn = true;
          break;
        }
      }
      // The labels name the first keys of the ranking and no others: a key without room ends them (labelling the
      // next one instead read as the runner-up, a key of 0.047 beside an unlabelled 0.362).
      if (!drawn) break;
    }
    // A generation capture: a line before the first generated key P (keys from P on were generated).
    const int gen = f0.prompt_end();
    if (f0.has_generated() && gen > k0 && gen <= k1) {
      const double xg = xs[gen - k0] - slot / 2;
      draw_boundary(c, xg, plot.y, xg, plot.bottom());
      // Right of the line, else ending at it (the arrow still points at the generated keys): past the page's edge
      // it was cut to "gene".
      const std::string label = "generated \xE2\x86\x92";  // →
      const double lw = c.text_width(label, kTickSize);
      if (p == 0)
        draw_boundary_label(c, label, xg + 2.0 + lw <= plot.right() ? xg + 2.0 : xg - 2.0 - lw, plot.y + kTickSize);
    }
    draw_left_axis(c, plot, yt, y);
    c.line(plot.x, plot.bottom(), plot.right(), plot.bottom(), kAxisWidth, kInk);
    if (!overlay && runs.size() > 1)
      c.text(fit_text_middle(c, runs[p].label, kPanelSize, plot.w, true), plot.x, plot.y - 0.35 * kPanelSize,
             kPanelSize, 0.0, 0.0, 0, true, colors[p]);
    if (p + 1 < n_panels)
      for (int j = 0; j < n_keys; j += xa.step) c.line(xs[j], plot.bottom(), xs[j], plot.bottom() + 1.2, 0.4, kInk);
  }
  draw_category_axis(c, xa, xs, all.bottom(), query <= k1 ? query - k0 : -1);
  draw_y_title(c, kMargin, all, opt.no_sink ? "Probability (sink excluded)" : "Attention probability");
  draw_x_title(c, all, all.bottom() + xa.depth + 3.0, xa.angle == 0 ? "Key position" : "Key token");
  return c.finish();
}

}  // namespace focal::figures
