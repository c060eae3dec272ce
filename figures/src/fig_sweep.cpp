// sweep: a metric against the focal temperature t from sweep files: the mean over layers and heads (one line per
// file), or one line per layer with --per-layer; --metric loss draws the prompt's mean next-token loss.
#include <algorithm>
#include <cmath>
#include <cctype>
#include <numeric>

#include "focal/error.h"
#include "focal/temp_spec.h"
#include "kinds.h"
#include "plot.h"
#include "select.h"
#include "series.h"

namespace focal::figures {

std::string render_sweep(const std::vector<Source>& src, const FigureOptions& opt, Format fmt) {
  const std::string kind = "sweep";
  reject_option(opt.matrix, "matrix", kind);
  reject_option(opt.overlay, "overlay", kind);
  reject_option(opt.no_sink, "no_sink", kind);
  reject_option(opt.log_scale, "log_scale", kind);
  reject_option(opt.lines, "lines", kind);
  reject_option(!opt.runs.empty(), "runs", kind);
  reject_option(opt.layer >= 0, "layer", kind);
  reject_option(opt.head >= 0, "head", kind);
  reject_option(opt.query >= 0, "query", kind);
  check_page_options(opt);
  const int metric = parse_metric(opt.metric.empty() ? "entropy_nats" : opt.metric, true);
  const std::vector<const SweepFile*> sweeps = sweep_sources(src);
  if (opt.per_layer && sweeps.size() > 1)
    throw Error("per_layer", "per_layer draws one sweep file (one line per layer); " + std::to_string(sweeps.size()) +
                                 " were given");
  if (opt.per_layer && metric < 0)
    throw Error("per_layer",
                "per_layer: the loss is one value per temperature, not per layer; drop per_layer or pick a metric");

  // Layers and heads averaged (or drawn, per layer): all, or --layers / --heads.
  const int L0 = sweeps[0]->n_layers, H0 = sweeps[0]->n_heads;
  for (const SweepFile* sw : sweeps)
    if (sw->n_layers != L0 || sw->n_heads != H0)
      if (!opt.layers.empty() || !opt.heads.empty() || opt.per_layer)
        throw Error("layers", "layers/heads: the sweep files come from models of different shapes");
  const std::vector<int> sel_layers = pick_indices(opt.layers, L0, "layer", "the sweep"),
                         sel_heads = pick_indices(opt.heads, H0, "head", "the sweep");
  if (metric < 0 && (!opt.layers.empty() || !opt.heads.empty()))
    throw Error("layers", "layers/heads: the loss is one value per temperature, not per head; drop them");

  struct Line {
    int layer = -1;
    std::string label;
    std::vector<double> t, v;  // sorted by t
  };
  std::vector<Line> lines;
  if (!opt.labels.empty() && opt.per_layer)
    throw Error("labels", "labels name the sweep files' lines; per_layer draws one line per layer of one file");
  std::vector<std::string> file_labels;
  file_labels.reserve(src.size());
  for (const Source& s : src) file_labels.push_back(s.label);
  file_labels = given_or_automatic_labels(opt.labels, file_labels);  // one per file, in file order
  // A sweep whose setting fixed some layers or heads (--layer-temp, --head-temp) swept t elsewhere only: its lines say
  // which, and t = 1 is not standard attention there.
  std::vector<std::string> fixed(sweeps.size());
  for (size_t k = 0; k < sweeps.size(); ++k) {
    try {
      const TempSpec base = TempSpec::from_json(sweeps[k]->base_spec_json, "the sweep's setting");
      if (!base.layer_temp.empty() || !base.head_temp.empty()) {
        const std::string text = base.text();
        std::string over = text.substr(text.find('+') + 1);
        for (char& ch : over)
          if (ch == '+') ch = ' ';
        fixed[k] = "fixed " + over;
      }
    } catch (const Error&) {  // unreadable: nothing claimed either way
    }
  }
  const bool any_fixed = std::any_of(fixed.begin(), fixed.end(), [](const std::string& f) { return !f.empty(); });
  for (size_t k = 0; k < sweeps.size(); ++k) {
    const SweepFile& s = *sweeps[k];
    const int S = (int)s.focal_temps.size(), L = s.n_layers, Hn = s.n_heads;
    // Each file's own layers and heads: files of models of other shapes are each averaged over all of theirs (the
    // first file's selection read past a smaller model's metrics); a selection across shapes is refused above.
    const std::vector<int> file_layers = L == L0 ? sel_layers : pick_indices({}, L, "layer", "the sweep"),
                           file_heads = Hn == H0 ? sel_heads : pick_indices({}, Hn, "head", "the sweep");
    if (!fixed[k].empty() && sweeps.size() > 1) file_labels[k] += " (" + fixed[k] + ")";
    std::vector<int> order(S);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s.focal_temps[a] < s.focal_temps[b]; });
    const int n_lines = opt.per_layer ? (int)sel_layers.size() : 1;
    for (int li = 0; li < n_lines; ++li) {
      Line line;
      if (opt.per_layer) line.layer = sel_layers[li];
      line.label = opt.per_layer ? "layer " + std::to_string(line.layer) : file_labels[k];
      for (int i : order) {
        double acc = 0;
        int n = 0;
        if (metric < 0) {
          acc = s.mean_nll[i];
          n = std::isnan(acc) ? 0 : 1;
        } else {
          for (int l : file_layers) {
            if (opt.per_layer && l != line.layer) continue;
            for (int h : file_heads) {
              const float x = s.head_metrics[(((size_t)i * L + l) * Hn + h) * kNumRowMetrics + metric];
              if (!std::isnan(x)) acc += x, ++n;
            }
          }
        }
        line.t.push_back(s.focal_temps[i]);
        line.v.push_back(n ? acc / n : NAN);
      }
      lines.push_back(std::move(line));
    }
  }
  double tmin = INFINITY, tmax = -INFINITY, vmin = INFINITY, vmax = -INFINITY;
  for (const Line& l : lines)
    for (size_t i = 0; i < l.t.size(); ++i) {
      tmin = std::min(tmin, l.t[i]);
      tmax = std::max(tmax, l.t[i]);
      if (!std::isnan(l.v[i])) vmin = std::min(vmin, l.v[i]), vmax = std::max(vmax, l.v[i]);
    }
  if (!(vmax >= vmin)) {
    std::vector<double> none = {NAN};
    require_values(none, metric, "the sweep");
  }

  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt);
  const Ticks yt = nice_ticks(vmin, vmax, 6, true);
  const double pad = tmax > tmin ? 0.04 * (tmax - tmin) : 0.05;
  const Ticks xt = nice_ticks(tmin - pad, tmax + pad, 6, false);
  const double left = kMargin + title_height() + 3.0 + left_axis_width(c, yt);
  // More than 8 layers: colours along viridis by layer and a colour bar instead of a legend (a legend of 30 entries
  // would cover the plot).
  const bool layer_bar = opt.per_layer && lines.size() > (size_t)kNumCategoryColors;
  ColorScale by_layer;
  if (layer_bar) {
    by_layer = linear_scale(lines.front().layer, lines.back().layer, "Layer");
    by_layer.span = 0.9;
    by_layer.ticks = nice_ticks(lines.front().layer, lines.back().layer, 6, false);
    for (auto& l : by_layer.ticks.labels) l = format_number(std::stod(l), 1.0);
  }
  const double right = layer_bar ? kMargin + colorbar_width(c, by_layer)
                                 : kMargin + 0.5 * c.text_width(xt.labels.empty() ? "0" : xt.labels.back(), kTickSize);
  const double plot_w = W - left - right;
  std::vector<LegendItem> legend;
  auto color = [&](size_t i) {
    if (layer_bar) return by_layer(lines[i].layer);
    return lines.size() <= (size_t)kNumCategoryColors ? category_color((int)i)
                                                      : viridis(0.9 * (double)i / (lines.size() - 1));
  };
  // One line has no legend, unless --labels named it (a label given was dropped without a word).
  if ((lines.size() > 1 || !opt.labels.empty()) && !layer_bar)
    for (size_t i = 0; i < lines.size(); ++i) legend.push_back({lines[i].label, color(i), true});
  const double top = title_space(opt) + (legend.empty() ? 0.0 : legend_height(c, legend, plot_w) + 4.0);
  const double bottom = kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0 + title_height() + kMargin;
  const double H = page_height(opt, top + 110.0 + bottom);
  const Rect plot{left, top, plot_w, H - top - bottom};
  if (plot.h < 20 || plot.w < 40) throw Error("width_in", "width_in: the page is too small; make it wider or taller");

  std::string auto_title = metric_noun(metric) + " against focal temperature";
  auto_title[0] = (char)std::toupper((unsigned char)auto_title[0]);
  if (sweeps.size() == 1 && !fixed[0].empty()) auto_title += " (" + fixed[0] + ")";
  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  if (!legend.empty()) draw_legend(c, legend, left, title_space(opt), plot_w);
  const LinearMap x{xt.lo, xt.hi, plot.x, plot.right()};
  const LinearMap y{yt.lo, yt.hi, plot.bottom(), plot.y};
  draw_hgrid(c, plot, yt, y);
  if (xt.lo <= 1.0 && 1.0 <= xt.hi) {  // standard attention is t = 1, where no layer or head was held fixed
    c.line(x(1.0), plot.y, x(1.0), plot.bottom(), 0.6, gray(0.45), true);
    c.text(any_fixed ? "t = 1" : "standard", x(1.0) - 2.0, plot.y + 1.0, kTickSize, 1.0, 1.0, 0, false, gray(0.35));
  }
  const bool many = lines.size() > 4 || lines[0].t.size() > 25;
  for (size_t k = 0; k < lines.size(); ++k) {
    std::vector<double> xs, ys;
    for (size_t i = 0; i < lines[k].t.size(); ++i) {
      xs.push_back(x(lines[k].t[i]));
      ys.push_back(std::isnan(lines[k].v[i]) ? NAN : y(lines[k].v[i]));
    }
    c.polyline(xs, ys, 1.2, color(k));
    for (size_t i = 0; i < xs.size(); ++i)
      if (!std::isnan(ys[i])) c.marker(xs[i], ys[i], many ? 1.2 : 1.8, color(k));
  }
  draw_left_axis(c, plot, yt, y);
  draw_bottom_axis(c, plot, xt, x);
  if (layer_bar) draw_colorbar(c, by_layer, plot.right(), plot.y, plot.h);
  draw_y_title(c, kMargin, plot, metric_title(metric, 0));
  draw_x_title(c, plot, plot.bottom() + kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0,
               "Focal temperature t");
  return c.finish();
}

}  // namespace focal::figures
