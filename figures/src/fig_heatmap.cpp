// heatmap: one head's query x key probabilities (the causal lower triangle) with a colour bar, one panel per run;
// grid: thumbnails of every stored layer x head of one run on a shared colour scale.
#include <algorithm>
#include <cmath>

#include "focal/error.h"
#include "kinds.h"
#include "plot.h"
#include "select.h"

namespace focal::figures {
namespace {

// A head's attention as an n x n matrix over positions first..T-1 (first = 1 without the sink): row i = query
// first + i, column j = key first + j. NaN above the diagonal; rows of queries not stored are `missing`.
struct HeadMatrix {
  int n = 0;
  std::vector<double> v;      // [n, n]
  std::vector<char> missing;  // [n]
  double max = 0;             // over rows with two or more visible keys
};

constexpr int kThumbMaxCells = 192;  // a thumbnail's cells at most (max-pooled beyond)

// max_n > 0: at most max_n x max_n cells, each the maximum over its block of queries x keys (a thumbnail cannot
// show more, and a long prompt's full matrices would not fit in memory for hundreds of heads).
HeadMatrix head_matrix(const RunRef& r, int a, int b, bool no_sink, int max_n = 0) {
  const int T = r.file->n_tokens(), first = no_sink ? 1 : 0, full = T - first;
  const int pool = max_n > 0 && full > max_n ? (full + max_n - 1) / max_n : 1;
  HeadMatrix m;
  m.n = (full + pool - 1) / pool;
  m.v.assign((size_t)m.n * m.n, NAN);
  m.missing.assign(m.n, 1);
  for (size_t c = 0; c < r.run->queries.size(); ++c) {
    const int q = r.run->queries[c];
    if (q < first) continue;
    std::vector<double> p = attention_row(r, a, b, (int)c);
    if (no_sink) p = drop_sink(p);
    const int i = (q - first) / pool;
    m.missing[i] = 0;
    for (size_t j = 0; j < p.size(); ++j) {
      double& cell = m.v[(size_t)i * m.n + j / pool];
      cell = std::isnan(cell) ? p[j] : std::max(cell, p[j]);
      // A row with one visible key is always 1; leaving it out of the maximum keeps the colour range for the rest.
      if (p.size() > 1) m.max = std::max(m.max, p[j]);
    }
  }
  return m;
}

// Whether a linear colour scale would leave most cells dark: the median visible cell (rows with two or more keys)
// is below 5 % of the largest probability. Then the grid defaults to log colour.
bool mass_concentrated(const std::vector<HeadMatrix>& mats, double vmax) {
  std::vector<double> v;
  for (const HeadMatrix& m : mats)
    for (int i = 1; i < m.n; ++i)
      for (int j = 0; j <= i; ++j)
        if (!std::isnan(m.v[(size_t)i * m.n + j])) v.push_back(m.v[(size_t)i * m.n + j]);
  if (v.empty() || !(vmax > 0)) return false;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2] < 0.05 * vmax;
}

// Whether a linear colour scale would leave most rows nearly black: more than half of the rows with two or more
// visible keys peak below 10 % of the largest probability (a diffuse head over a long prompt, whose early rows hold
// the few large values). Then the heatmap defaults to log colour. A sharp head (each row peaking high) stays linear.
bool rows_faint(const std::vector<HeadMatrix>& mats, double vmax) {
  if (!(vmax > 0)) return false;
  size_t rows = 0, faint = 0;
  for (const HeadMatrix& m : mats)
    for (int i = 1; i < m.n; ++i) {
      if (m.missing[i]) continue;
      double row_max = 0;
      for (int j = 0; j <= i; ++j)
        if (!std::isnan(m.v[(size_t)i * m.n + j])) row_max = std::max(row_max, m.v[(size_t)i * m.n + j]);
      ++rows;
      if (row_max < 0.1 * vmax) ++faint;
    }
  return rows > 0 && 2 * faint > rows;
}

// Colour of p on the figure's scale.
struct ProbScale {
  ColorScale cs;
  bool log = false;
  double floor = 1e-4;
  Rgb operator()(double p) const { return cs(log ? std::log10(std::max(p, floor)) : p); }
};

ProbScale prob_scale(const FigureOptions& opt, double vmax, bool log = false) {
  ProbScale s;
  s.log = opt.log_scale || log;
  s.floor = opt.log_floor;
  const std::string title = opt.no_sink ? "Probability (sink excluded)" : "Attention probability";
  if (s.log)
    s.cs = log_scale(std::log10(opt.log_floor), 0.0, title);
  else
    s.cs = linear_scale(0.0, vmax > 0 ? vmax : 1.0, title);
  return s;
}

void draw_head(Canvas& c, const Rect& area, const HeadMatrix& m, const ProbScale& s, bool force_image) {
  draw_cells(
      c, area, m.n, m.n,
      [&](int i, int j, Rgb* out) {
        if (j > i) return false;
        if (m.missing[i]) {
          *out = kMissing;
          return true;
        }
        const double v = m.v[(size_t)i * m.n + j];
        if (std::isnan(v)) return false;
        *out = s(v);
        return true;
      },
      force_image);
}

std::vector<std::string> position_labels(const CaptureFile& f, int first) {
  std::vector<std::string> labels;
  for (int j = first; j < f.n_tokens(); ++j)
    labels.push_back(f.pieces.empty() ? std::to_string(j) : token_label(f.pieces[j]));
  return labels;
}

// Whether two labelled ticks (every step-th label) would read the same: then each label names its position too,
// "mat (29)", as the distribution figure names the top key (a repeated prompt showed "mat" four times).
bool labelled_ticks_repeat(const std::vector<std::string>& labels, int step) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < labels.size(); i += (size_t)std::max(1, step)) shown.push_back(labels[i]);
  std::sort(shown.begin(), shown.end());
  return std::adjacent_find(shown.begin(), shown.end()) != shown.end();
}

}  // namespace

std::string render_heatmap(const std::vector<Source>& src, const FigureOptions& opt, Format fmt) {
  const std::string kind = "heatmap";
  reject_option(opt.matrix, "matrix", kind);
  reject_option(opt.per_layer, "per_layer", kind);
  reject_option(opt.lines, "lines", kind);
  reject_option(opt.overlay, "overlay", kind);
  reject_option(opt.query >= 0, "query", kind);
  reject_option(!opt.metric.empty(), "metric", kind);
  reject_option(opt.linear_scale && opt.log_scale, "linear_scale", "heatmap with log_scale");
  check_page_options(opt);
  const std::vector<RunRef> runs = select_runs(capture_runs(src, kind), opt.runs, 1, 3, kind);
  for (const RunRef& r : runs) require_rows(r, kind);
  const RunCapture& r0 = *runs[0].run;
  const int layer = opt.layer >= 0 ? opt.layer : r0.layers.front();
  const int head = opt.head >= 0 ? opt.head : r0.heads.front();
  const CaptureFile& f0 = *runs[0].file;
  if (opt.no_sink && f0.n_tokens() < 2)
    throw Error("no_sink", "no_sink: the capture has one token; nothing is left without it");
  std::vector<HeadMatrix> mats;
  double vmax = 0;
  for (const RunRef& r : runs) {
    if (r.file->token_ids != f0.token_ids)
      throw Error("runs", "runs: runs '" + runs[0].label + "' and '" + r.label + "' are over different tokens");
    mats.push_back(head_matrix(r, stored_index(r.run->layers, layer, "layer", "layer", r),
                               stored_index(r.run->heads, head, "head", "head", r), opt.no_sink));
    vmax = std::max(vmax, mats.back().max);
  }
  const bool auto_log = !opt.log_scale && !opt.linear_scale && rows_faint(mats, vmax);
  const ProbScale scale = prob_scale(opt, vmax, auto_log);
  const int first = opt.no_sink ? 1 : 0, n = mats[0].n, n_panels = (int)runs.size();
  std::vector<std::string> labels = position_labels(f0, first);

  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt), gap = 8.0;
  const double right = kMargin + colorbar_width(c, scale.cs);
  double side = 0;
  double ylab_w = 0;
  int ystep = 1;
  // The query labels' width depends on how many fit, which depends on the panel size: settle it in two passes (a
  // third when the labels take their positions). Keys are labelled at the same step as queries.
  for (int pass = 0; pass < 3; ++pass) {
    const double left = kMargin + title_height() + 3.0 + kTickLen + 1.5 + ylab_w;
    side = (W - left - right - (n_panels - 1) * gap) / n_panels;
    ystep = category_step(side / n, 1.05 * kTickSize);
    if (pass == 1 && !f0.pieces.empty() && labelled_ticks_repeat(labels, ystep))
      for (int i = 0; i < n; ++i) labels[(size_t)i] += " (" + std::to_string(first + i) + ")";
    std::vector<std::string> shown;
    for (int i = 0; i < n; i += ystep) shown.push_back(labels[i]);
    ylab_w = max_label_width(c, shown, kTickSize);
  }
  const double left = kMargin + title_height() + 3.0 + kTickLen + 1.5 + ylab_w;
  side = (W - left - right - (n_panels - 1) * gap) / n_panels;
  CategoryAxis xa = layout_category_axis(c, labels, side / n, kTickSize, false);
  const double strip = n_panels > 1 ? 1.35 * kPanelSize : 0.0;
  const double top = title_space(opt) + strip;
  const double bottom = xa.depth + 3.0 + title_height() + kMargin;
  const double H = page_height(opt, top + side + bottom);
  side = std::min(side, H - top - bottom);
  if (side < 30)
    throw Error("width_in", "width_in: the page is too small for " + std::to_string(n_panels) +
                                " heatmap panel(s); make it wider or taller");
  xa = layout_category_axis(c, labels, side / n, kTickSize, false);

  std::string auto_title = "Layer " + std::to_string(layer) + ", head " + std::to_string(head);
  if (n_panels == 1) auto_title = runs[0].label + ": layer " + std::to_string(layer) + ", head " + std::to_string(head);
  if (scale.log) auto_title += " (log scale)";
  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  size_t cells = 0;
  for (const auto& m : mats) cells += (size_t)m.n * (m.n + 1) / 2;
  for (int p = 0; p < n_panels; ++p) {
    const Rect area{left + p * (side + gap), top, side, side};
    draw_head(c, area, mats[p], scale, cells > kMaxVectorCells);
    // Frame the diagonal edge and the axes only: the masked triangle stays open.
    c.line(area.x, area.y, area.x, area.bottom(), kAxisWidth, kInk);
    c.line(area.x, area.bottom(), area.right(), area.bottom(), kAxisWidth, kInk);
    std::vector<double> xs(n);
    for (int j = 0; j < n; ++j) xs[j] = area.x + (j + 0.5) * side / n;
    draw_category_axis(c, xa, xs, area.bottom(), -1);
    if (p == 0)
      for (int i = 0; i < n; ++i) {
        const double y = area.y + (i + 0.5) * side / n;
        if (i % ystep) {
          if (side / n >= kMinorTickGap) c.line(area.x - kTickLen * 0.5, y, area.x, y, kAxisWidth * 0.7, kInk);
          continue;
        }
        c.line(area.x - kTickLen, y, area.x, y, kAxisWidth, kInk);
        c.text(labels[i], area.x - kTickLen - 1.5, y, kTickSize, 1.0, 0.5, 0, false, kInk);
      }
    if (n_panels > 1)  // within its panel: a long run name ran over the next panel's title
      c.text(fit_text_middle(c, runs[p].label, kPanelSize, side, true), area.x, area.y - 0.35 * kPanelSize, kPanelSize,
             0.0, 0.0, 0, true, kInk);
    // A generation capture: the first generated position P, as a row edge (queries from P on were generated) and a
    // column edge (keys from P on), each running to the diagonal; labelled in the empty upper triangle.
    const int gen = f0.prompt_end() - first;
    if (f0.has_generated() && gen > 0 && gen < n) {
      const double cell = side / n, xg = area.x + gen * cell, yg = area.y + gen * cell;
      draw_boundary(c, area.x, yg, xg, yg);
      draw_boundary(c, xg, yg, xg, area.bottom());
      const std::string label = "generated from " + std::to_string(f0.prompt_end());
      const double lw = c.text_width(label, kTickSize);
      // Its baseline just above the row edge, or, where the label has to start left of the column edge to fit,
      // higher: above the diagonal at its first key, in the masked triangle (it was drawn over row P - 1's cells).
      const double lx = std::min(xg + 2.0, area.right() - lw);
      double ly = std::min(yg - 2.0, area.y + std::floor((lx - area.x) / cell) * cell - 1.5);
      if (ly - kCapHeight * kTickSize < area.y) ly = yg - 2.0;  // no room above the diagonal
      if (p == 0) draw_boundary_label(c, label, lx, ly);
    }
  }
  const Rect all{left, top, n_panels * side + (n_panels - 1) * gap, side};
  draw_colorbar(c, scale.cs, all.right(), top, side);
  draw_y_title(c, kMargin, all, "Query token");
  draw_x_title(c, all, all.bottom() + xa.depth + 3.0, "Key token");
  return c.finish();
}

std::string render_grid(const std::vector<Source>& src, const FigureOptions& opt, Format fmt) {
  const std::string kind = "grid";
  reject_option(opt.matrix, "matrix", kind);
  reject_option(opt.per_layer, "per_layer", kind);
  reject_option(opt.lines, "lines", kind);
  reject_option(opt.overlay, "overlay", kind);
  reject_option(opt.layer >= 0, "layer", kind);
  reject_option(opt.head >= 0, "head", kind);
  reject_option(opt.query >= 0, "query", kind);
  reject_option(!opt.metric.empty(), "metric", kind);
  reject_option(opt.linear_scale && opt.log_scale, "linear_scale", "grid with log_scale");
  check_page_options(opt);
  const RunRef run = select_runs(capture_runs(src, kind), opt.runs, 1, 1, kind)[0];
  require_rows(run, kind);
  if (opt.no_sink && run.file->n_tokens() < 2)
    throw Error("no_sink", "no_sink: the capture has one token; nothing is left without it");
  // Selection: stored layers / heads, all by default.
  std::vector<int> li, hi;  // indices into the run's stored layers / heads
  for (int l : opt.layers.empty() ? run.run->layers : opt.layers)
    li.push_back(stored_index(run.run->layers, l, "layers", "layer", run));
  for (int h : opt.heads.empty() ? run.run->heads : opt.heads)
    hi.push_back(stored_index(run.run->heads, h, "heads", "head", run));
  const int Lc = (int)li.size(), Hc = (int)hi.size();
  std::vector<HeadMatrix> mats;
  double vmax = 0;
  for (int a : li)
    for (int b : hi) {
      mats.push_back(head_matrix(run, a, b, opt.no_sink, kThumbMaxCells));
      vmax = std::max(vmax, mats.back().max);
    }
  const bool auto_log = !opt.log_scale && !opt.linear_scale && mass_concentrated(mats, vmax);
  ProbScale scale = prob_scale(opt, vmax, auto_log);

  // Layout: layers down and heads across when that fits the page height; else (e.g. 30 x 9 in a column) layers
  // across and heads down, whichever gives the larger thumbnails. --height is filled (thumbnails up to 2:1).
  // A generation capture: the first generated position P in every thumbnail, as in the heatmap (a row edge and a
  // column edge meeting on the diagonal), at P's place among the thumbnail's max-pooled cells; a note line under the
  // title names it.
  const int T = run.file->n_tokens(), first = opt.no_sink ? 1 : 0, full = T - first;
  const int pool = full > kThumbMaxCells ? (full + kThumbMaxCells - 1) / kThumbMaxCells : 1;
  const int gen = run.file->prompt_end();
  const bool mark_gen = run.file->has_generated() && gen > first && gen < T;
  const double note = mark_gen ? 1.3 * kTickSize + 1.6 : 0.0;
  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt);
  const double header = 1.4 * kTickSize;
  const double top = title_space(opt) + note + header;
  const double right = kMargin + colorbar_width(c, scale.cs);
  const double limit = std::max(1.3 * W, 216.0);
  struct Arrangement {
    bool across = false;  // layers across (columns), heads down
    int rows = 0, cols = 0;
    double gap = 3, left = 0, sw = 0, sh = 0, H = 0;
    std::vector<std::string> row_labels, col_labels;
  };
  auto arrange = [&](bool across) {
    Arrangement g;
    g.across = across;
    g.rows = across ? Hc : Lc;
    g.cols = across ? Lc : Hc;
    g.gap = g.rows > 8 || g.cols > 8 ? 1.5 : 3.0;
    for (int a : li) (across ? g.col_labels : g.row_labels).push_back("L" + std::to_string(run.run->layers[a]));
    for (int b : hi) (across ? g.row_labels : g.col_labels).push_back("H" + std::to_string(run.run->heads[b]));
    g.left = kMargin + max_label_width(c, g.row_labels, kTickSize) + 3.0;
    g.sw = (W - g.left - right - (g.cols - 1) * g.gap) / g.cols;
    const double fixed = top + (g.rows - 1) * g.gap + kMargin + 2.0;
    if (opt.height_in > 0) {
      g.H = page_height(opt, 0);
      g.sh = (g.H - fixed) / g.rows;
      g.sw = std::min(g.sw, 2.0 * g.sh);
      g.sh = std::min(g.sh, 2.0 * g.sw);
    } else {
      g.sh = g.sw = std::min(g.sw, (limit - fixed) / g.rows);
      g.H = page_height(opt, fixed + g.rows * g.sh);
    }
    g.left += (W - g.left - right - g.cols * g.sw - (g.cols - 1) * g.gap) / 2;  // centre a narrower block
    return g;
  };
  Arrangement g = arrange(false);
  if (opt.height_in <= 0 && top + Lc * g.sw + (Lc - 1) * g.gap + kMargin + 2.0 > limit + 0.01) {
    const Arrangement t = arrange(true);
    if (t.sw > g.sw) g = t;
  }
  const double H = g.H, block_h = g.rows * g.sh + (g.rows - 1) * g.gap;
  // A grid of one or two rows can be shorter than the colour bar's rotated title: then the bar takes the short
  // title "p" (the figure's title says what p is), or none.
  const std::string full_bar_title = scale.cs.title;
  for (const char* short_title : {opt.no_sink ? "p (no sink)" : "p", "p", ""})
    if (colorbar_min_height(c, scale.cs) > block_h) scale.cs.title = short_title;
  const bool short_bar = scale.cs.title != full_bar_title;
  if (std::min(g.sw, g.sh) < 3)
    throw Error("width_in", "width_in: the page is too small for " + std::to_string(Lc) + " x " + std::to_string(Hc) +
                                " thumbnails; make it wider or taller, or select fewer layers / heads");

  const std::string auto_title =
      run.label +
      (!short_bar ? ": attention by layer and head"
                  : (opt.no_sink ? ": p (sink excluded) by layer and head" : ": attention p by layer and head")) +
      (scale.log ? " (log)" : "");
  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  if (mark_gen)
    draw_boundary_label(c, "dashed: generated from token " + std::to_string(gen), g.left,
                        title_space(opt) + 1.8);  // clear of the title's descenders (it touched "focal_t0.4"'s _)
  size_t cells = 0;
  for (const auto& m : mats) cells += (size_t)m.n * (m.n + 1) / 2;
  const int col_step = category_step(g.sw + g.gap, max_label_width(c, g.col_labels, kTickSize) + 2.0);
  const int row_step = category_step(g.sh + g.gap, 1.1 * kTickSize);
  for (int r = 0; r < g.rows; ++r) {
    const double y = top + r * (g.sh + g.gap);
    if (r % row_step == 0) c.text(g.row_labels[r], g.left - 3.0, y + g.sh / 2, kTickSize, 1.0, 0.5, 0, false, kInk);
    for (int k = 0; k < g.cols; ++k) {
      const double x = g.left + k * (g.sw + g.gap);
      if (r == 0 && k % col_step == 0)
        c.text(g.col_labels[k], x + g.sw / 2, top - 0.45 * header, kTickSize, 0.5, 0.0, 0, false, kInk);
      const int a = g.across ? k : r, b = g.across ? r : k;
      const HeadMatrix& m = mats[(size_t)a * Hc + b];
      draw_head(c, {x, y, g.sw, g.sh}, m, scale, cells > kMaxVectorCells);
      if (mark_gen && m.n > 0) {
        const double f = (double)(gen - first) / pool / m.n, xg = x + f * g.sw, yg = y + f * g.sh;
        draw_boundary(c, x, yg, xg, yg);
        draw_boundary(c, xg, yg, xg, y + g.sh);
      }
      c.stroke_rect(x, y, g.sw, g.sh, 0.3, gray(0.6));
    }
  }
  draw_colorbar(c, scale.cs, g.left + g.cols * g.sw + (g.cols - 1) * g.gap, top, block_h);
  return c.finish();
}

}  // namespace focal::figures
