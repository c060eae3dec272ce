// retrieval: from evaluation files (focal eval), retrieval accuracy and the attention mass on the relevant tokens
// against context length (the paper's Fig. 9): a log2 x axis with ticks at the evaluated lengths, one line per
// file, one column of panels per task kind, a row per metric. NaN points (no answers at that length, e.g. beyond a
// model's context) are left out, never drawn as zero.
#include <algorithm>
#include <cmath>
#include <set>

#include "focal/error.h"
#include "focal/log.h"
#include "focal/eval.h"
#include "focal/temp_spec.h"
#include "kinds.h"
#include "plot.h"
#include "series.h"

namespace focal::figures {
namespace {

enum Row { kAccuracy, kRelevant, kEntropy };
const char* kRowNames[] = {"accuracy", "relevant_mass", "entropy"};

// Files drawn as one line (one file, or the seeds of one model): their mean, with a min-max bar.
struct Series {
  std::string label;
  std::vector<size_t> members;  // indices into the runs
};

struct Run {
  const EvalFile* e = nullptr;
  std::string label;  // legend
  std::string name;   // the file, for messages
};

int kind_index(const EvalFile& e, const std::string& kind) {
  for (size_t k = 0; k < e.task_kinds.size(); ++k)
    if (e.task_kinds[k] == kind) return (int)k;
  return -1;
}

// A run's value of `row` for task kind k at its length index li: accuracy in percent; relevant mass or entropy at
// `layer`, or averaged over the layers that have a value when layer < 0. NaN when there is none.
double value(const EvalFile& e, int k, int li, Row row, int layer) {
  const size_t Ln = e.lengths.size(), L = (size_t)e.n_layers, kl = (size_t)k * Ln + li;
  if (e.n_answers[kl] <= 0) return NAN;
  if (row == kAccuracy) return std::isnan(e.accuracy[kl]) ? NAN : 100.0 * e.accuracy[kl];
  const std::vector<float>& v = row == kRelevant ? e.relevant_mass : e.entropy;
  if (layer >= 0) return v[kl * L + layer];
  double s = 0;
  int n = 0;
  for (size_t l = 0; l < L; ++l)
    if (!std::isnan(v[kl * L + l])) s += v[kl * L + l], ++n;
  return n ? s / n : NAN;
}

std::string length_label(int len, bool short_form) {
  if (short_form && len >= 1024 && len % 1024 == 0) return std::to_string(len / 1024) + "k";
  return std::to_string(len);
}

}  // namespace

std::string render_retrieval(const std::vector<Source>& src, const FigureOptions& opt, Format fmt) {
  const std::string kind = "retrieval";
  reject_option(opt.matrix, "matrix", kind);
  reject_option(opt.overlay, "overlay", kind);
  reject_option(opt.no_sink, "no_sink", kind);
  reject_option(opt.log_scale, "log_scale", kind);
  reject_option(opt.lines, "lines", kind);
  reject_option(opt.per_layer, "per_layer", kind);
  reject_option(opt.head >= 0, "head", kind);
  reject_option(opt.query >= 0, "query", kind);
  reject_option(opt.tau, "tau", kind);
  reject_option(opt.clip, "clip", kind);
  reject_option(!opt.x_axis.empty(), "x_axis", kind);
  if (!opt.runs.empty())
    throw Error("runs",
                "runs does not apply to the retrieval figure: it draws one line per file given (labels names them)");
  check_page_options(opt);
  if (src.empty()) throw Error("the retrieval figure needs an evaluation file (as focal eval writes them)");

  // Runs and their labels: the model directory's name, made unique with the evaluated setting or the file.
  std::vector<Run> runs;
  std::vector<std::string> models, with_spec, fallback;
  for (const Source& s : src) {
    const std::string file = s.path.empty() ? s.label : s.path;
    if (!s.eval)
      throw Error("the retrieval figure reads evaluation files (as focal eval writes them), but '" + file + "' is " +
                  (s.train_log ? "a training log (draw it with the training figure)"
                   : s.capture ? "an attention capture"
                   : s.sweep   ? "a temperature sweep"
                               : "not loaded"));
    const EvalFile& e = *s.eval;
    const size_t K = e.task_kinds.size(), Ln = e.lengths.size(), L = e.n_layers > 0 ? (size_t)e.n_layers : 0;
    if (e.n_answers.size() != K * Ln || e.accuracy.size() != K * Ln || e.relevant_mass.size() != K * Ln * L ||
        e.entropy.size() != K * Ln * L)
      throw Error("the evaluation '" + file + "' is malformed: its tables are not [kinds, lengths(, layers)]");
    if (e.task_kinds.empty() || e.lengths.empty())
      throw Error("the evaluation file '" + file + "' holds no retrieval results (no task kinds or lengths)");
    runs.push_back({&e, "", file});
    models.push_back(base_name(e.model_path));
    std::string spec;
    try {
      spec = TempSpec::from_json(e.temp_spec_json, file).label();
    } catch (const Error& e) {
      log_warning(std::string(e.what()) + "; the legend names the model without its temperature spec");
    }
    with_spec.push_back(models.back() + (spec.empty() ? "" : " (" + spec + ")"));
    fallback.push_back(s.label.empty() ? file : s.label);
  }
  // Labels: given ones may repeat, and files with the same label (seeds of one model) are drawn as one series: the
  // mean, with a bar from the lowest to the highest file.
  if (!opt.labels.empty() && opt.labels.size() != runs.size())
    throw Error("labels", "labels: " + std::to_string(opt.labels.size()) + " label" +
                              (opt.labels.size() == 1 ? "" : "s") + " for " + std::to_string(runs.size()) + " file" +
                              (runs.size() == 1 ? "" : "s") +
                              "; give one label per file, in file order (files with the same label are averaged)");
  const std::vector<std::string> labels =
      opt.labels.empty() ? series_labels(models, series_labels(with_spec, fallback)) : opt.labels;
  for (size_t i = 0; i < runs.size(); ++i) runs[i].label = labels[i];
  std::vector<Series> series;
  for (size_t i = 0; i < runs.size(); ++i) {
    auto it = std::find_if(series.begin(), series.end(), [&](const Series& g) { return g.label == labels[i]; });
    if (it == series.end()) series.push_back({labels[i], {}}), it = series.end() - 1;
    it->members.push_back(i);
  }
  if (series.size() > (size_t)kNumCategoryColors)
    throw Error("the retrieval figure draws at most " + std::to_string(kNumCategoryColors) +
                " series (one colour each); " + std::to_string(series.size()) + " were given");

  // The x axis: context length (tasks_eval) or distractor pairs (tasks_distract); one kind per figure.
  const std::string x_axis = runs[0].e->x_axis;
  for (const Run& r : runs)
    if (r.e->x_axis != x_axis)
      throw Error("the evaluation files '" + runs[0].name + "' (by " + x_axis + ") and '" + r.name + "' (by " +
                  r.e->x_axis + ") have different x axes; draw them in separate figures");
  const bool by_distract = x_axis == "distractors";
  const std::string against = by_distract ? " against distractor pairs" : " against context length";

  // Task kinds (panels), in order of first appearance.
  std::vector<std::string> kinds;
  for (const Run& r : runs)
    for (const std::string& k : r.e->task_kinds)
      if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
  if (!opt.task_kind.empty()) {
    if (std::find(kinds.begin(), kinds.end(), opt.task_kind) == kinds.end()) {
      std::string list;
      for (const auto& k : kinds) list += (list.empty() ? "" : ", ") + k;
      throw Error("task_kind",
                  "task_kind: no evaluation file holds task kind '" + opt.task_kind + "' (kinds: " + list + ")");
    }
    kinds = {opt.task_kind};
  }

  // Metric rows.
  std::vector<Row> rows;
  if (opt.metric.empty() || opt.metric == "accuracy") rows.push_back(kAccuracy);
  if (opt.metric.empty() || opt.metric == "relevant_mass") rows.push_back(kRelevant);
  if (opt.metric == "entropy") rows.push_back(kEntropy);
  if (rows.empty())
    throw Error("metric",
                "metric: unknown metric '" + opt.metric +
                    "' for the retrieval figure (metrics: accuracy, relevant_mass, entropy; default accuracy and "
                    "relevant_mass)");
  if (opt.layer >= 0) {
    if (rows.size() == 1 && rows[0] == kAccuracy)
      throw Error("layer",
                  "layer does not apply to metric accuracy (accuracy is per answer; the layer selects the "
                  "relevant_mass or entropy row)");
    for (const Run& r : runs)
      if (opt.layer >= r.e->n_layers)
        throw Error("layer", "layer " + std::to_string(opt.layer) + ": the evaluation file '" + r.name + "' has " +
                                 std::to_string(r.e->n_layers) + " layer" + (r.e->n_layers == 1 ? "" : "s") +
                                 (r.e->n_layers > 0 ? " (0-" + std::to_string(r.e->n_layers - 1) + ")" : ""));
  }

  // Lengths (x ticks): every length at which any file answered a task (a length whose tasks were all skipped, e.g.
  // longer than the model's context, would only stretch the axis).
  std::set<int> length_set;
  for (const Run& r : runs) {
    const size_t Ln = r.e->lengths.size();
    for (size_t li = 0; li < Ln; ++li) {
      bool answered = false;
      for (size_t k = 0; k < r.e->task_kinds.size(); ++k) answered |= r.e->n_answers[k * Ln + li] > 0;
      if (r.e->lengths[li] > 0 && answered) length_set.insert(r.e->lengths[li]);
    }
  }
  if (length_set.empty())
    throw Error(std::string("the evaluation files hold no answered task at a positive ") +
                (by_distract ? "distractor count" : "context length") + ": nothing to draw");
  const std::vector<int> lengths(length_set.begin(), length_set.end());

  // Values: [row][kind][series] -> one per length of `lengths` (NaN where no file of the series has one): the mean
  // over the series' files, and their lowest and highest value.
  const size_t R = rows.size(), C = kinds.size(), N = series.size();
  using Table = std::vector<std::vector<std::vector<std::vector<double>>>>;
  Table vals(R, std::vector<std::vector<std::vector<double>>>(C, std::vector<std::vector<double>>(N)));
  Table vmin = vals, vmax = vals;
  std::vector<double> lo(R, INFINITY), hi(R, -INFINITY);
  for (size_t ri = 0; ri < R; ++ri)
    for (size_t ci = 0; ci < C; ++ci)
      for (size_t n = 0; n < N; ++n) {
        std::vector<double>& v = vals[ri][ci][n];
        std::vector<double>& vlo = vmin[ri][ci][n];
        std::vector<double>& vhi = vmax[ri][ci][n];
        v.assign(lengths.size(), NAN);
        vlo.assign(lengths.size(), INFINITY);
        vhi.assign(lengths.size(), -INFINITY);
        std::vector<int> count(lengths.size(), 0);
        for (size_t m : series[n].members) {
          const EvalFile& e = *runs[m].e;
          const int k = kind_index(e, kinds[ci]);
          if (k < 0) continue;
          for (size_t li = 0; li < e.lengths.size(); ++li) {
            const size_t at = std::lower_bound(lengths.begin(), lengths.end(), e.lengths[li]) - lengths.begin();
            if (at >= lengths.size() || lengths[at] != e.lengths[li]) continue;
            const double x = value(e, k, (int)li, rows[ri], opt.layer);
            if (std::isnan(x)) continue;
            v[at] = count[at]++ ? v[at] + x : x;
            vlo[at] = std::min(vlo[at], x);
            vhi[at] = std::max(vhi[at], x);
            lo[ri] = std::min(lo[ri], x), hi[ri] = std::max(hi[ri], x);
          }
        }
        for (size_t at = 0; at < lengths.size(); ++at)
          if (count[at]) v[at] /= count[at];
      }
  for (size_t ri = 0; ri < R; ++ri)
    if (!(hi[ri] >= lo[ri]))
      throw Error(opt.metric.empty() ? "" : "metric",
                  (opt.metric.empty() ? "" : "metric ") + std::string(kRowNames[rows[ri]]) +
                      ": no evaluation file has a value of it for " +
                      (C == 1 ? "task kind '" + kinds[0] + "'" : std::string("any task kind")) +
                      " (no answers were evaluated)");

  // Y axes: accuracy 0-100 %, relevant mass from 0, entropy over its range; padded so that points at the ends
  // do not sit on the axis lines.
  std::vector<Ticks> yt(R);
  std::vector<std::string> y_titles(R);
  for (size_t ri = 0; ri < R; ++ri) {
    Ticks t;
    if (rows[ri] == kAccuracy) {
      t = nice_ticks(0, 100, R > 1 ? 3 : 6, true);
      y_titles[ri] = "Accuracy (%)";
    } else if (rows[ri] == kRelevant) {
      t = nice_ticks(0, hi[ri] > 0 ? hi[ri] : 1.0, R > 1 ? 4 : 6, true);
      y_titles[ri] = "Relevant mass";
    } else {
      t = nice_ticks(lo[ri], hi[ri], R > 1 ? 4 : 6, true);
      y_titles[ri] = "Entropy (nats)";
    }
    const double span = t.hi - t.lo;
    if (rows[ri] != kEntropy || lo[ri] - t.lo < 0.03 * span) t.lo -= 0.05 * span;
    if (hi[ri] > t.hi - 0.03 * span) t.hi += 0.05 * span;
    yt[ri] = t;
  }

  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt);
  double axis_w = 0;
  for (const Ticks& t : yt) axis_w = std::max(axis_w, left_axis_width(c, t));
  const double left = kMargin + title_height() + 3.0 + axis_w;
  double col_gap = C > 1 ? 7.0 : 0.0;
  // x positions within a panel: log2 of the length, padded by a third of an octave (half with one length).
  const double l2lo = std::log2((double)lengths.front()), l2hi = std::log2((double)lengths.back());
  const double pad = lengths.size() > 1 ? std::max(0.3, 0.06 * (l2hi - l2lo)) : 0.5;
  const double xlo = l2lo - pad, xhi = l2hi + pad;
  // Tick labels: every length in full, else with 1k / 2k for multiples of 1024, else every 2nd, 4th ... length
  // (the longest always labelled), in full or short.
  std::vector<std::string> xlabels;
  int xstep = 1;
  double right = 0, panel_w = 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const bool short_form = attempt % 2 == 1;
    xstep = 1 << (attempt / 2);
    xlabels.clear();
    for (int len : lengths) xlabels.push_back(length_label(len, short_form));
    // The last label may reach past the panel's padding into the right margin, and between panels towards the
    // next panel's first label: widen the margin and the gaps to keep them apart.
    const int first_shown = (int)(lengths.size() - 1) % xstep;
    right = kMargin + 2.0;
    col_gap = C > 1 ? 7.0 : 0.0;
    for (int it = 0; it < 3; ++it) {
      panel_w = (W - left - right - col_gap * (C - 1)) / C;
      const double per_oct = panel_w / (xhi - xlo);
      const double right_reach = 0.5 * c.text_width(xlabels.back(), kTickSize) - per_oct * pad;
      const double left_reach = 0.5 * c.text_width(xlabels[first_shown], kTickSize) -
                                per_oct * (std::log2((double)lengths[first_shown]) - xlo);
      right = kMargin + std::max(2.0, right_reach);
      if (C > 1) col_gap = std::max(7.0, right_reach + left_reach + 4.0);
    }
    panel_w = (W - left - right - col_gap * (C - 1)) / C;
    const double per_octave = panel_w / (xhi - xlo);
    bool fits = true;
    int prev = -1;
    for (int i = (int)lengths.size() - 1; i >= 0; i -= xstep) {
      if (prev >= 0) {
        const double dist = per_octave * (std::log2((double)lengths[prev]) - std::log2((double)lengths[i]));
        const double need = 0.5 * (c.text_width(xlabels[prev], kTickSize) + c.text_width(xlabels[i], kTickSize)) + 3.0;
        if (dist < need) fits = false;
      }
      prev = i;
    }
    if (fits || xstep >= (int)lengths.size()) break;
  }

  std::vector<std::string> series_names;
  series_names.reserve(N);
  for (const Series& g : series) series_names.push_back(g.label);
  const std::vector<Rgb> colors = series_colors(series_names);  // by attention kind, as in the capture figures
  std::vector<SeriesItem> legend;
  for (size_t n = 0; n < N; ++n) {
    const size_t seeds = series[n].members.size();
    legend.push_back({series[n].label + (seeds > 1 ? " (mean of " + std::to_string(seeds) + ", min-max)" : ""),
                      colors[n], series_shape((int)n), true});
  }
  const double legend_w = W - left - right;
  const double strip = C > 1 ? 1.45 * kPanelSize : 0.0;
  const double top = title_space(opt) + series_legend_height(c, legend, legend_w) + 4.0 + strip;
  const double bottom = kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0 + title_height() + kMargin;
  const double row_gap = 6.0;
  const double natural_row = R > 1 ? 70.0 : 100.0;
  const double H = page_height(opt, top + R * natural_row + (R - 1) * row_gap + bottom);
  const double row_h = (H - top - bottom - (R - 1) * row_gap) / R;
  if (row_h < 25 || panel_w < 35)
    throw Error("width_in", "width_in: the page is too small for " + std::to_string(C) + " x " + std::to_string(R) +
                                " panels; make it wider (7 in, two columns) or taller, or draw one task kind alone");

  std::string auto_title;
  if (R == 2)
    auto_title = "Retrieval" + against;
  else if (rows[0] == kAccuracy)
    auto_title = "Retrieval accuracy" + against;
  else if (rows[0] == kRelevant)
    auto_title = "Relevant mass" + against;
  else
    auto_title = "Query-row entropy" + against;
  if (C == 1) {
    auto_title[0] = (char)std::tolower((unsigned char)auto_title[0]);
    auto_title = kinds[0] + ": " + auto_title;
  }
  if (opt.layer >= 0) auto_title += ", layer " + std::to_string(opt.layer);
  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  draw_series_legend(c, legend, left, title_space(opt), legend_w);

  // Each run's lines and markers are shifted sideways by a hair so that equal values stay visible.
  const double dodge = std::min(1.2, 0.25 * panel_w / (xhi - xlo) / std::max<size_t>(N, 1));
  for (size_t ri = 0; ri < R; ++ri) {
    const double py = top + ri * (row_h + row_gap);
    for (size_t ci = 0; ci < C; ++ci) {
      const Rect plot{left + ci * (panel_w + col_gap), py, panel_w, row_h};
      const LinearMap x{xlo, xhi, plot.x, plot.right()};
      const LinearMap y{yt[ri].lo, yt[ri].hi, plot.bottom(), plot.y};
      draw_hgrid(c, plot, yt[ri], y);
      for (int pass = 0; pass < 2; ++pass)  // lines under every marker
        for (size_t n = 0; n < N; ++n) {
          const std::vector<double>& v = vals[ri][ci][n];
          const double off = ((double)n - (N - 1) / 2.0) * dodge;
          std::vector<double> xs, ys;
          for (size_t li = 0; li < lengths.size(); ++li) {
            xs.push_back(x(std::log2((double)lengths[li])) + off);
            ys.push_back(std::isnan(v[li]) ? NAN : y(v[li]));
          }
          if (pass == 0) {
            c.polyline(xs, ys, 1.1, colors[n]);
            if (series[n].members.size() > 1)  // min-max over the series' files
              for (size_t li = 0; li < xs.size(); ++li) {
                if (std::isnan(ys[li]) || !(vmax[ri][ci][n][li] > vmin[ri][ci][n][li])) continue;
                const double y0 = y(vmin[ri][ci][n][li]), y1 = y(vmax[ri][ci][n][li]);
                c.line(xs[li], y0, xs[li], y1, 0.8, colors[n]);
                c.line(xs[li] - 1.2, y0, xs[li] + 1.2, y0, 0.8, colors[n]);
                c.line(xs[li] - 1.2, y1, xs[li] + 1.2, y1, 0.8, colors[n]);
              }
          } else
            for (size_t li = 0; li < xs.size(); ++li)
              if (!std::isnan(ys[li])) draw_shape(c, xs[li], ys[li], 1.8, series_shape((int)n), colors[n]);
        }
      // Axes: labels on the first column and the bottom row; tick marks everywhere.
      if (ci == 0) {
        draw_left_axis(c, plot, yt[ri], y);
      } else {
        c.line(plot.x, plot.y, plot.x, plot.bottom(), kAxisWidth, kInk);
        for (double v : yt[ri].values) {
          const double yy = y(v);
          if (yy >= plot.y - 0.01 && yy <= plot.bottom() + 0.01)
            c.line(plot.x - kTickLen * 0.6, yy, plot.x, yy, kAxisWidth, kInk);
        }
      }
      c.line(plot.x, plot.bottom(), plot.right(), plot.bottom(), kAxisWidth, kInk);
      const bool labelled_row = ri + 1 == R;
      for (size_t li = 0; li < lengths.size(); ++li) {
        const double xx = x(std::log2((double)lengths[li]));
        const bool label = labelled_row && ((lengths.size() - 1 - li) % xstep == 0);
        c.line(xx, plot.bottom(), xx, plot.bottom() + (labelled_row ? kTickLen : kTickLen * 0.6), kAxisWidth, kInk);
        if (label) c.text(xlabels[li], xx, plot.bottom() + kTickLen + 1.5, kTickSize, 0.5, 1.0, 0, false, kInk);
      }
      if (ri == 0 && C > 1)
        c.text(fit_text(c, kinds[ci], kPanelSize, panel_w, true), plot.x + plot.w / 2, plot.y - 0.45 * kPanelSize,
               kPanelSize, 0.5, 0.0, 0, true, kInk);
    }
    const Rect row_rect{left, py, panel_w, row_h};
    draw_y_title(c, kMargin, row_rect, y_titles[ri]);
  }
  const Rect all{left, top, C * panel_w + (C - 1) * col_gap, R * row_h + (R - 1) * row_gap};
  draw_x_title(c, all, all.bottom() + kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0,
               by_distract ? "Distractor pairs (context length fixed)" : "Context length (tokens)");
  return c.finish();
}

}  // namespace focal::figures
