// corpus: three panels from a batch stats file. (a) per layer, one box per run: 25-75 % box, median line, 5-95 %
// whiskers and the mean as a dot, all from the corpus histograms (pooled over heads); (b) the mean over layers and
// heads by context-position bucket, one line per run; (c) the layer x head matrix of corpus means, run b - run a.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "focal/error.h"
#include "focal/model.h"
#include "focal_figures/corpus.h"
#include "kinds.h"
#include "plot.h"
#include "select.h"

namespace focal::figures {

namespace {

// Quantile q of a histogram with edges e (linear interpolation inside the bin); NaN when empty.
double hist_quantile(const std::vector<double>& counts, const std::vector<double>& e, double q) {
  double total = 0;
  for (double c : counts) total += c;
  if (total <= 0) return NAN;
  const double want = q * total;
  double cum = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    if (counts[b] > 0 && cum + counts[b] >= want) {
      const double f = std::clamp((want - cum) / counts[b], 0.0, 1.0);
      return e[b] + f * (e[b + 1] - e[b]);
    }
    cum += counts[b];
  }
  return e.back();
}

struct Box {
  double p5 = NAN, p25 = NAN, p50 = NAN, p75 = NAN, p95 = NAN, mean = NAN;
};

// Pooled over the selected heads.
Box layer_box(const batch::StatsFile& f, int run, int layer, const std::vector<int>& heads, int metric) {
  const batch::StatsShape& s = f.stats.shape;
  std::vector<double> counts((size_t)s.n_bins, 0.0);
  double sum = 0, n = 0;
  for (int h : heads) {
    const size_t c = f.stats.cell(run, layer, h, metric);
    for (int b = 0; b < s.n_bins; ++b) counts[(size_t)b] += (double)f.stats.hist[c * s.n_bins + b];
    sum += f.stats.moments[c].mean * f.stats.moments[c].n;
    n += f.stats.moments[c].n;
  }
  const std::vector<double>& e = f.hist_edges[(size_t)metric];
  Box bx;
  bx.p5 = hist_quantile(counts, e, 0.05);
  bx.p25 = hist_quantile(counts, e, 0.25);
  bx.p50 = hist_quantile(counts, e, 0.50);
  bx.p75 = hist_quantile(counts, e, 0.75);
  bx.p95 = hist_quantile(counts, e, 0.95);
  bx.mean = n > 0 ? sum / n : NAN;
  return bx;
}

// Mean over the selected layers and heads per position bucket.
std::vector<double> position_means(const batch::StatsFile& f, int run, const std::vector<int>& layers,
                                   const std::vector<int>& heads, int metric) {
  const batch::StatsShape& s = f.stats.shape;
  const int P = s.n_buckets();
  std::vector<double> out((size_t)P, NAN);
  for (int b = 0; b < P; ++b) {
    double sum = 0, n = 0;
    for (int l : layers)
      for (int h : heads) {
        const size_t c = f.stats.cell(run, l, h, metric) * P + b;
        sum += f.stats.pos_sum[c];
        n += (double)f.stats.pos_count[c];
      }
    if (n > 0) out[(size_t)b] = sum / n;
  }
  return out;
}

int find_run(const batch::StatsFile& f, const std::string& name) {
  for (size_t i = 0; i < f.run_names.size(); ++i)
    if (f.run_names[i] == name) return (int)i;
  std::string names;
  for (const std::string& n : f.run_names) names += (names.empty() ? "" : ", ") + n;
  throw Error("runs", "runs: the stats file has no run '" + name + "' (runs: " + names + ")");
}

}  // namespace

std::string render_corpus(const batch::StatsFile& f, const FigureOptions& opt, Format fmt) {
  const std::string kind = "corpus";
  reject_option(opt.layer >= 0, "layer", kind);
  reject_option(opt.head >= 0, "head", kind);
  reject_option(opt.query >= 0, "query", kind);
  reject_option(opt.no_sink, "no_sink", kind);
  reject_option(opt.log_scale, "log_scale", kind);
  reject_option(opt.overlay, "overlay", kind);
  reject_option(opt.lines, "lines", kind);
  reject_option(opt.matrix, "matrix", kind);
  reject_option(opt.per_layer, "per_layer", kind);
  check_page_options(opt);
  const int metric = parse_metric(opt.metric.empty() ? "entropy_nats" : opt.metric, false);
  std::vector<int> runs;
  if (opt.runs.empty()) {
    runs.push_back(0);
    if (f.run_names.size() > 1) runs.push_back(1);
  } else {
    if (opt.runs.size() > 2) throw Error("runs", "runs: the corpus figure compares one or two runs");
    for (const std::string& r : opt.runs) runs.push_back(find_run(f, r));
  }
  const batch::StatsShape& s = f.stats.shape;
  // --layers / --heads: the layers drawn (boxes, matrix columns) and the heads pooled and drawn (matrix rows).
  const std::vector<int> layers = pick_indices(opt.layers, s.n_layers, "layer", "the stats file"),
                         heads = pick_indices(opt.heads, s.n_heads, "head", "the stats file");
  const bool all_layers = (int)layers.size() == s.n_layers, all_heads = (int)heads.size() == s.n_heads;
  const int L = (int)layers.size(), Hn = (int)heads.size(), P = s.n_buckets();
  const int n_runs = (int)runs.size();
  const bool diff = n_runs == 2;

  // Data.
  std::vector<std::vector<Box>> boxes((size_t)n_runs);
  std::vector<std::vector<double>> pos((size_t)n_runs);
  double lo = INFINITY, hi = -INFINITY, plo = INFINITY, phi = -INFINITY;
  for (int k = 0; k < n_runs; ++k) {
    for (int l : layers) {
      boxes[(size_t)k].push_back(layer_box(f, runs[(size_t)k], l, heads, metric));
      const Box& b = boxes[(size_t)k].back();
      if (!std::isnan(b.p5)) lo = std::min(lo, b.p5), hi = std::max(hi, b.p95);
    }
    pos[(size_t)k] = position_means(f, runs[(size_t)k], layers, heads, metric);
    for (double v : pos[(size_t)k])
      if (!std::isnan(v)) plo = std::min(plo, v), phi = std::max(phi, v);
  }
  if (!(lo <= hi))
    throw Error("metric", "metric: the stats file holds no value of " + std::string(row_metric_name(metric)) +
                              (std::string(row_metric_name(metric)) == "relevant_mass"
                                   ? " (relevant_mass needs documents with \"relevant\" positions)"
                                   : " (its documents gave no attention row past the first token)"));
  std::vector<double> mat((size_t)L * Hn, NAN);  // [L, H]: b - a, or a
  double amax = 0, mlo = INFINITY, mhi = -INFINITY;
  for (int li = 0; li < L; ++li)
    for (int hi_ = 0; hi_ < Hn; ++hi_) {
      const int l = layers[(size_t)li], h = heads[(size_t)hi_];
      const batch::Moments& a = f.stats.moments[f.stats.cell(runs[0], l, h, metric)];
      double v = a.n > 0 ? a.mean : NAN;
      if (diff) {
        const batch::Moments& b = f.stats.moments[f.stats.cell(runs[1], l, h, metric)];
        v = b.n > 0 && a.n > 0 ? b.mean - a.mean : NAN;
      }
      mat[(size_t)li * Hn + hi_] = v;
      if (!std::isnan(v)) amax = std::max(amax, std::fabs(v)), mlo = std::min(mlo, v), mhi = std::max(mhi, v);
    }
  const std::string what = metric_title(metric);
  const std::string name_a = f.run_names[(size_t)runs[0]];
  const std::string name_b = diff ? f.run_names[(size_t)runs[1]] : "";
  // The colour bar names the metric and its unit, as the entropy figure's matrix (it read "Δ mean").
  const ColorScale cs = diff ? diverging_scale(amax > 0 ? amax : 1.0, "\xCE\x94 " + what)
                             : linear_scale(mlo, mhi > mlo ? mhi : mlo + 1, what);
  // The position axis ends with the last bucket that holds a row of the drawn runs, layers and heads: documents of
  // 24 tokens end it at 32, not at --max-tokens.
  int n_pos = 0;
  for (int k = 0; k < n_runs; ++k)
    for (int b = 0; b < P; ++b)
      if (!std::isnan(pos[(size_t)k][(size_t)b])) n_pos = std::max(n_pos, b + 1);
  if (n_pos == 0) n_pos = P;

  // Layout: three panels sharing the left edge; titles wrap rather than run off the page.
  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt);
  const Ticks yt = nice_ticks(lo, hi > lo ? hi : lo + 1, 5, true);
  const Ticks pt = nice_ticks(plo, phi > plo ? phi : plo + 1, 4, true);
  std::vector<std::string> head_labels;
  head_labels.reserve((size_t)Hn);
  for (int h : heads) head_labels.push_back(std::to_string(h));
  const double axis_w = std::max(
      {left_axis_width(c, yt), left_axis_width(c, pt), kTickLen + 1.5 + max_label_width(c, head_labels, kTickSize)});
  const double left = kMargin + title_height() + 3.0 + axis_w;
  const double right_plain = kMargin + 2.0;
  const double right_bar = kMargin + colorbar_width(c, cs);
  // Panel (b) names its last bucket edge under the axis' end: half that label must fit inside the margin.
  const double right_pos =
      std::max(right_plain, kMargin + c.text_width(std::to_string(f.pos_edges[(size_t)n_pos]), kTickSize) / 2);
  if (W - left - right_bar < 60) throw Error("width_in", "width_in: the page is too small; make it wider or taller");
  std::vector<std::string> shown_names;
  shown_names.reserve((size_t)n_runs);
  for (int k = 0; k < n_runs; ++k) shown_names.push_back(f.run_names[(size_t)runs[(size_t)k]]);
  const std::vector<Rgb> run_col = run_colors(shown_names);  // by attention kind, as in every figure
  std::vector<LegendItem> legend;
  legend.reserve((size_t)n_runs);
  for (int k = 0; k < n_runs; ++k) legend.push_back({shown_names[(size_t)k], run_col[(size_t)k], false});
  const double x_axis_h = kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0 + title_height();
  const std::string title_a = std::string("(a) Per layer: 5/25/50/75/95 % and mean (dot), rows \xE2\x89\xA5 1") +
                              (all_heads ? "" : ", " + indices_text("head", heads));
  const std::string title_b = "(b) By query position, mean over " +
                              (all_layers ? std::string("layers") : indices_text("layer", layers)) + " and " +
                              (all_heads ? std::string("heads") : indices_text("head", heads));
  const std::string title_c = diff ? "(c) Corpus mean, " + name_b + " \xE2\x88\x92 " + name_a + ", per layer and head"
                                   : "(c) Corpus mean per layer and head";
  const double title_w = W - left - kMargin;
  const std::vector<std::vector<std::string>> panel_titles = {wrap_text(c, title_a, kPanelSize, title_w, true),
                                                              wrap_text(c, title_b, kPanelSize, title_w, true),
                                                              wrap_text(c, title_c, kPanelSize, title_w, true)};
  const double title_pitch = 1.2 * kPanelSize;
  auto panel_title_h = [&](int i) {
    return (double)(panel_titles[(size_t)i].size() - 1) * title_pitch + kPanelSize * (kCapHeight + kDescent) + 4.0;
  };
  const double titles_h = panel_title_h(0) + panel_title_h(1) + panel_title_h(2);
  const double legend_h = legend_height(c, legend, W - left - right_plain);
  const double top = title_space(opt) + legend_h + 3.0;
  // Each panel at least as tall as its rotated axis title.
  const double y_title_w = c.text_width(what, kLabelSize) + 4.0;
  const double box_h = std::max(95.0, y_title_w), pos_h = std::max(70.0, y_title_w);
  const double cell_w = (W - left - right_bar) / L;
  const double cell_h = std::clamp(cell_w, 5.0, 12.0);
  const double mat_min = std::max(colorbar_min_height(c, cs), c.text_width("Head", kLabelSize) + 4.0);
  const double mat_h = std::max(cell_h * Hn, mat_min);
  const double gap = 8.0;
  const double natural = top + titles_h + box_h + pos_h + mat_h + 3 * x_axis_h + 2 * gap + kMargin;
  const double H = page_height(opt, natural);
  const double scale = (H - (natural - box_h - pos_h - mat_h)) / (box_h + pos_h + mat_h);
  if (scale <= 0.3) throw Error("width_in", "width_in: the page is too small; make it wider or taller");

  // The longest automatic title that fits the page.
  const std::string docs = std::to_string(f.stats.n_docs) + (f.stats.n_docs == 1 ? " document" : " documents");
  std::string noun = metric_noun(metric);
  noun[0] = (char)std::toupper((unsigned char)noun[0]);
  std::string auto_title = noun + ", " + docs;
  for (const std::string& t :
       {"Corpus " + metric_noun(metric) + ": " + docs + (diff ? ", " + name_a + " vs " + name_b : ", " + name_a),
        "Corpus " + metric_noun(metric) + ": " + docs})
    if (c.text_width(t, kTitleSize, true) <= W - 2 * kMargin) {
      auto_title = t;
      break;
    }
  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  draw_legend(c, legend, left, title_space(opt), W - left - right_plain);

  double y0 = top;
  auto panel_title = [&](int i, const Rect& r) {
    const std::vector<std::string>& lines = panel_titles[(size_t)i];
    for (size_t k = 0; k < lines.size(); ++k)
      c.text(lines[k], r.x, r.y - 3.0 - (double)(lines.size() - 1 - k) * title_pitch, kPanelSize, 0.0, 0.0, 0, true,
             kInk);
  };
  auto layer_axis = [&](const Rect& r, double slot) {
    const int step = category_step(slot, c.text_width(std::to_string(layers.back()), kTickSize) + 4.0);
    c.line(r.x, r.bottom(), r.right(), r.bottom(), kAxisWidth, kInk);
    for (int li = 0; li < L; ++li) {
      const double x = r.x + (li + 0.5) * slot;
      const bool lab = li % step == 0;
      c.line(x, r.bottom(), x, r.bottom() + (lab ? kTickLen : kTickLen / 2), kAxisWidth, kInk);
      if (lab)
        c.text(std::to_string(layers[(size_t)li]), x, r.bottom() + kTickLen + 1.5, kTickSize, 0.5, 1.0, 0, false, kInk);
    }
    draw_x_title(c, r, r.bottom() + kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0, "Layer");
  };

  // (a) per-layer boxes.
  {
    const Rect r{left, y0 + panel_title_h(0), W - left - right_plain, box_h * scale};
    panel_title(0, r);
    const LinearMap y{yt.lo, yt.hi, r.bottom(), r.y};
    draw_hgrid(c, r, yt, y);
    const double slot = r.w / L, group = std::min(0.8 * slot, slot - 0.5), bw = group / n_runs;
    for (int k = 0; k < n_runs; ++k) {
      const Rgb col = run_col[(size_t)k];
      for (int l = 0; l < L; ++l) {
        const Box& b = boxes[(size_t)k][(size_t)l];
        if (std::isnan(b.p50)) continue;
        const double xc = r.x + (l + 0.5) * slot - group / 2 + (k + 0.5) * bw;
        const double w = std::max(bw * 0.8, 0.8);
        c.line(xc, y(b.p5), xc, y(b.p25), 0.6, col);
        c.line(xc, y(b.p75), xc, y(b.p95), 0.6, col);
        c.fill_rect(xc - w / 2, y(b.p75), w, std::max(y(b.p25) - y(b.p75), 0.4), col);
        c.line(xc - w / 2, y(b.p50), xc + w / 2, y(b.p50), 0.8, Rgb{1, 1, 1});
        if (!std::isnan(b.mean)) c.marker(xc, y(b.mean), std::min(1.6, w / 2 + 0.4), kInk);
      }
    }
    draw_left_axis(c, r, yt, y);
    layer_axis(r, slot);
    draw_y_title(c, kMargin, r, what);
    y0 = r.bottom() + x_axis_h + gap;
  }
  // (b) by position.
  {
    const Rect r{left, y0 + panel_title_h(1), W - left - right_pos, pos_h * scale};
    panel_title(1, r);
    const LinearMap y{pt.lo, pt.hi, r.bottom(), r.y};
    const LinearMap x{0.0, (double)n_pos, r.x, r.right()};  // bucket b spans [b, b + 1) in log2 units
    draw_hgrid(c, r, pt, y);
    for (int k = 0; k < n_runs; ++k) {
      std::vector<double> xs, ys;
      for (int b = 0; b < n_pos; ++b)
        if (!std::isnan(pos[(size_t)k][(size_t)b])) {
          xs.push_back(x(b + 0.5));
          ys.push_back(y(pos[(size_t)k][(size_t)b]));
        }
      c.polyline(xs, ys, 1.2, run_col[(size_t)k]);
      for (size_t i = 0; i < xs.size(); ++i) c.marker(xs[i], ys[i], 1.8, run_col[(size_t)k]);
    }
    draw_left_axis(c, r, pt, y);
    c.line(r.x, r.bottom(), r.right(), r.bottom(), kAxisWidth, kInk);
    // Every edge ticked; labels thinned from the right so that the last edge (the axis' end) is always named.
    const int step =
        category_step(r.w / n_pos, c.text_width(std::to_string(f.pos_edges[(size_t)n_pos]), kTickSize) + 4.0);
    for (int b = 0; b <= n_pos; ++b) {
      const double xv = x(b);
      const bool lab = (n_pos - b) % step == 0;
      c.line(xv, r.bottom(), xv, r.bottom() + (lab ? kTickLen : kTickLen / 2), kAxisWidth, kInk);
      if (lab)
        c.text(std::to_string(f.pos_edges[(size_t)b]), xv, r.bottom() + kTickLen + 1.5, kTickSize, 0.5, 1.0, 0, false,
               kInk);
    }
    draw_x_title(c, r, r.bottom() + kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0,
                 "Query position (bucket edges)");
    draw_y_title(c, kMargin, r, what);
    y0 = r.bottom() + x_axis_h + gap;
  }
  // (c) layer x head matrix.
  {
    const double cw = (W - left - right_bar) / L;
    const double ch = std::max(mat_h * scale, mat_min) / Hn;
    const Rect r{left, y0 + panel_title_h(2), cw * L, ch * Hn};
    panel_title(2, r);
    draw_cells(c, r, Hn, L, [&](int h, int l, Rgb* out) {
      const double v = mat[(size_t)l * Hn + h];
      *out = std::isnan(v) ? kMissing : cs(v);
      return true;
    });
    c.stroke_rect(r.x, r.y, r.w, r.h, 0.4, kInk);
    const int hstep = category_step(ch, 1.1 * kTickSize);
    for (int h = 0; h < Hn; h += hstep) {
      const double yv = r.y + (h + 0.5) * ch;
      c.line(r.x - kTickLen, yv, r.x, yv, kAxisWidth, kInk);
      c.text(head_labels[(size_t)h], r.x - kTickLen - 1.5, yv, kTickSize, 1.0, 0.5, 0, false, kInk);
    }
    layer_axis(r, cw);
    draw_y_title(c, kMargin, r, "Head");
    draw_colorbar(c, cs, r.right(), r.y, r.h);
  }
  return c.finish();
}

}  // namespace focal::figures
