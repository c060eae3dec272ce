// positions: mean next-token NLL by position bucket, one line per setting (markers at bucket centres) over its
// bootstrap band drawn as a light bar per bucket; a dashed line at the trained context, labelled. metric entropy: one
// run's attention entropy by query position, a line per layer.
#include <algorithm>
#include <cmath>

#include "focal/error.h"
#include "focal/temp_spec.h"
#include "focal_figures/positions.h"
#include "kinds.h"
#include "plot.h"
#include "series.h"

namespace focal::figures {

namespace {

Rgb tint(Rgb c, double keep) { return {1 - keep * (1 - c.r), 1 - keep * (1 - c.g), 1 - keep * (1 - c.b)}; }

// Where bucket b is drawn: its centre, or the middle of what is left of it before x_end (a last, partial bucket).
double bucket_mid(const batch::PositionLossFile& f, size_t b, double x_end) {
  return std::min((double)f.bucket_start[b] + f.bucket_tokens / 2.0, ((double)f.bucket_start[b] + x_end) / 2);
}

// One series over the buckets, values [B]: a polyline at the bucket centres, broken where a value is NaN (a lone
// point becomes a marker).
void draw_bucket_series(Canvas& c, const batch::PositionLossFile& f, const float* values, double x_end,
                        const LinearMap& x, const LinearMap& y, double width, double marker, Rgb col) {
  std::vector<double> xs, ys;
  auto flush = [&]() {
    if (xs.size() > 1) c.polyline(xs, ys, width, col);
    if (xs.size() == 1) c.marker(xs[0], ys[0], marker, col);
    xs.clear();
    ys.clear();
  };
  for (size_t b = 0; b < f.n_buckets(); ++b) {
    if (std::isnan(values[b])) {
      flush();
      continue;
    }
    xs.push_back(x(bucket_mid(f, b, x_end)));
    ys.push_back(y(values[b]));
  }
  flush();
}

// The model's context as its config.json declares it (max_position_embeddings) as a dashed line, labelled by that
// name, when it falls inside the axis: the sequences a model was trained on may have been shorter (the bundled
// models: 256 tokens), so "trained context" claimed more than the file knows.
void draw_trained_context(Canvas& c, const batch::PositionLossFile& f, const Ticks& xt, const LinearMap& x,
                          const Rect& r) {
  if (f.trained_context <= 0 || f.trained_context >= xt.hi) return;
  const double xc = x(f.trained_context);
  c.line(xc, r.y, xc, r.bottom(), 0.8, kBoundaryInk, true);
  // Left of the line when it fits inside the plot, else right of it (a context near the left edge put the label off
  // the page, over the y axis's labels), else the short form.
  for (const std::string& label : {"max_position_embeddings " + std::to_string(f.trained_context),
                                   "context " + std::to_string(f.trained_context)}) {
    const double w = c.text_width(label, kTickSize);
    if (xc - 2.0 - w >= r.x + 1.0) {
      c.text(label, xc - 2.0, r.y + 2.0, kTickSize, 1.0, 1.0, 0, false, kBoundaryInk);
      return;
    }
    if (xc + 2.0 + w <= r.right() - 1.0) {
      c.text(label, xc + 2.0, r.y + 2.0, kTickSize, 0.0, 1.0, 0, false, kBoundaryInk);
      return;
    }
  }
}

// metric entropy: one run's attention entropy by query position, one line per layer (mean over heads and the
// bucket's rows of every document), a legend of the layers (a colour bar past 8); max_position_embeddings marked.
std::string render_position_entropy(const batch::PositionLossFile& f, int run, const FigureOptions& opt, Format fmt) {
  const size_t B = f.n_buckets(), L = (size_t)f.n_layers;
  if (L == 0 || f.mean_entropy.size() != f.n_runs() * L * B)
    throw Error("metric",
                "metric entropy: the position-loss file holds no per-layer entropy (written before it was "
                "recorded); run focal eval --positions again");
  std::vector<int> layers = opt.layers;
  if (layers.empty())
    for (int l = 0; l < (int)L; ++l) layers.push_back(l);
  for (int l : layers)
    if (l < 0 || l >= (int)L)
      throw Error("layers", "layers: layer " + std::to_string(l) + " is out of range (the file has " +
                                std::to_string(L) + " layers)");
  const double W0 = (double)f.bucket_tokens;
  const float* me = f.mean_entropy.data() + (size_t)run * L * B;
  double lo = INFINITY, hi = -INFINITY, x_end = 0;
  for (int l : layers)
    for (size_t b = 0; b < B; ++b) {
      const float v = me[(size_t)l * B + b];
      if (std::isnan(v)) continue;
      lo = std::min(lo, (double)v);
      hi = std::max(hi, (double)v);
      x_end = std::max(x_end, std::min((double)f.bucket_start[b] + W0, (double)f.max_tokens));
    }
  if (!(lo <= hi)) throw Error("the position-loss file holds no bucket with an attention row for this run");

  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt);
  const Ticks yt = nice_ticks(lo, hi > lo ? hi : lo + 1, 5, true);
  const Ticks xt = nice_ticks(0, x_end, 5, false);
  ColorScale cs = linear_scale(layers.front(), std::max(layers.back(), layers.front() + 1), "Layer");
  cs.span = 0.9;
  // Up to 8 layers: a legend of one colour each, as the training figure's tau (a colour bar of 4 layers read as a
  // continuum); more: colours along viridis and the colour bar.
  const bool use_legend = layers.size() <= (size_t)kNumCategoryColors;
  std::vector<LegendItem> legend;
  auto layer_color = [&](size_t i) { return use_legend ? series_color(i, layers.size()) : cs(layers[i]); };
  if (use_legend)
    for (size_t i = 0; i < layers.size(); ++i)
      legend.push_back({"layer " + std::to_string(layers[i]), layer_color(i), true, false});
  const double left = kMargin + title_height() + 3.0 + left_axis_width(c, yt);
  // The axis' last tick label is centred on its end: half of it must fit in the right margin (it read "20" for 200).
  const double right = kMargin + (use_legend ? c.text_width(std::to_string((int)xt.hi), kTickSize) / 2 + 2.0
                                             : colorbar_width(c, cs) + 4.0);
  if (W - left - right < 60) throw Error("width_in", "width_in: the page is too small; make it wider or taller");
  const double note_h = 1.4 * kTickSize + 1.3;  // the line under the title
  const double top = title_space(opt) + note_h + (use_legend ? legend_height(c, legend, W - left - right) : 0.0) + 4.0;
  const double x_axis_h = kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0 + title_height();
  const double natural = top + 150.0 + x_axis_h + kMargin;
  const double H = page_height(opt, natural);
  const double plot_h = H - top - x_axis_h - kMargin;
  if (plot_h < 40) throw Error("width_in", "width_in: the page is too small; make it wider or taller");
  const std::string docs = std::to_string(f.n_docs()) + (f.n_docs() == 1 ? " document" : " documents");
  // The title says which model (first: a long title's … cuts its end, and it cut "SmolLM2-135M-Instruc…") and what;
  // the line under it which run over how many documents.
  const std::string model = base_name(f.model_path);
  const std::string auto_title = model.empty() ? "Entropy by position" : model + ": entropy by position";
  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  c.text(f.run_names[(size_t)run] + ", " + docs, W / 2, title_space(opt) + 1.5, kTickSize, 0.5, 0.0, 0, false, kInk);
  const Rect r{left, top, W - left - right, plot_h};
  const LinearMap y{yt.lo, yt.hi, r.bottom(), r.y};
  const LinearMap x{xt.lo, xt.hi, r.x, r.right()};
  draw_hgrid(c, r, yt, y);
  for (size_t i = 0; i < layers.size(); ++i)
    draw_bucket_series(c, f, me + (size_t)layers[i] * B, x_end, x, y, 0.8, 1.0, layer_color(i));
  draw_trained_context(c, f, xt, x, r);
  draw_left_axis(c, r, yt, y);
  draw_bottom_axis(c, r, xt, x);
  if (use_legend)
    draw_legend(c, legend, left, title_space(opt) + note_h, W - left - right);
  else
    draw_colorbar(c, cs, r.right() + 6.0, r.y, r.h);
  draw_y_title(c, kMargin, r, "Entropy (nats), mean over heads");
  draw_x_title(c, r, r.bottom() + kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0,
               "Query position (bucket of " + std::to_string(f.bucket_tokens) + " tokens)");
  return c.finish();
}

}  // namespace

std::string render_positions(const batch::PositionLossFile& f, const FigureOptions& opt, Format fmt) {
  const std::string kind = "positions";
  reject_option(opt.layer >= 0, "layer", kind);
  reject_option(opt.head >= 0, "head", kind);
  reject_option(opt.query >= 0, "query", kind);
  const bool entropy = opt.metric == "entropy";
  if (!opt.metric.empty() && !entropy && opt.metric != "nll")
    throw Error("metric", "metric: '" + opt.metric + "' is not drawn by positions; use nll (the default: next-token " +
                              "loss) or entropy (one run's attention entropy per layer)");
  reject_option(!entropy && !opt.layers.empty(), "layers", kind);
  reject_option(!opt.heads.empty(), "heads", kind);
  reject_option(opt.log_scale, "log_scale", kind);
  reject_option(opt.no_sink, "no_sink", kind);
  check_page_options(opt);
  std::vector<int> runs;
  if (opt.runs.empty()) {
    for (size_t r = 0; r < f.n_runs(); ++r) runs.push_back((int)r);
  } else {
    for (const std::string& name : opt.runs) {
      // a run as the file names it, or as --runs spelled it: "native" for "native (focal:0.4)"
      auto spelled = [](const std::string& n) {
        const size_t open = n.find(" (");
        const size_t close = open == std::string::npos ? open : n.find(')', open);
        return open == std::string::npos || close == std::string::npos ? n : n.substr(0, open) + n.substr(close + 1);
      };
      auto it = std::find(f.run_names.begin(), f.run_names.end(), name);
      if (it == f.run_names.end())
        it = std::find_if(f.run_names.begin(), f.run_names.end(),
                          [&](const std::string& n) { return spelled(n) == name; });
      // or by the name other files give the setting: "focal_t0.2" for the run spelled "focal:0.2" (same rope)
      auto label_of = [](const std::string& n) {
        const size_t at = n.find('@');
        try {
          return TempSpec::parse(n.substr(0, at), "run").label() + (at == std::string::npos ? "" : n.substr(at));
        } catch (const Error&) { return std::string(); }
      };
      if (it == f.run_names.end())
        it = std::find_if(f.run_names.begin(), f.run_names.end(), [&](const std::string& n) {
          const std::string l = label_of(n);
          return !l.empty() && l == name;
        });
      if (it == f.run_names.end()) {
        std::string names;
        for (const std::string& n : f.run_names) names += (names.empty() ? "" : ", ") + n;
        throw Error("runs", "runs: the position-loss file has no run '" + name + "' (runs: " + names + ")");
      }
      runs.push_back((int)(it - f.run_names.begin()));
    }
  }
  if (entropy) {
    if (runs.size() != 1 && !opt.runs.empty())
      throw Error("runs", "runs: metric entropy draws one run's layers; give one run");
    return render_position_entropy(f, runs.front(), opt, fmt);
  }
  const size_t B = f.n_buckets();
  const double W0 = (double)f.bucket_tokens;
  double lo = INFINITY, hi = -INFINITY, x_end = 0;
  for (int r : runs)
    for (size_t b = 0; b < B; ++b) {
      const float m = f.mean_nll[(size_t)r * B + b];
      if (std::isnan(m)) continue;
      lo = std::min({lo, (double)m, (double)f.band_lo[(size_t)r * B + b]});
      hi = std::max({hi, (double)m, (double)f.band_hi[(size_t)r * B + b]});
      x_end = std::max(x_end, std::min((double)f.bucket_start[b] + W0, (double)f.max_tokens));
    }
  if (!(lo <= hi)) throw Error("the position-loss file holds no bucket with a predicted token");

  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt);
  const Ticks yt = nice_ticks(lo, hi > lo ? hi : lo + 1, 5, true);
  const Ticks xt = nice_ticks(0, x_end, 5, false);
  std::vector<std::string> shown_names;
  shown_names.reserve(runs.size());
  for (int r : runs) shown_names.push_back(f.run_names[(size_t)r]);
  const std::vector<Rgb> run_col = run_colors(shown_names);  // by attention kind, as in every figure
  std::vector<LegendItem> legend;
  for (size_t k = 0; k < runs.size(); ++k) legend.push_back({shown_names[k], run_col[k], true, false});
  const double left = kMargin + title_height() + 3.0 + left_axis_width(c, yt);
  const double right = kMargin + c.text_width(std::to_string((int)xt.hi), kTickSize) / 2 + 2.0;
  if (W - left - right < 60) throw Error("width_in", "width_in: the page is too small; make it wider or taller");
  const double legend_h = legend_height(c, legend, W - left - right);
  const double note_h = 1.4 * kTickSize + 1.3;  // the line under the title
  const double top = title_space(opt) + note_h + legend_h + 4.0;
  const double x_axis_h = kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0 + title_height();
  const double natural = top + 130.0 + x_axis_h + kMargin;
  const double H = page_height(opt, natural);
  const double plot_h = H - top - x_axis_h - kMargin;
  if (plot_h < 40) throw Error("width_in", "width_in: the page is too small; make it wider or taller");
  const int pct = (int)std::lround(f.band_level * 100);
  // The title names the model first (a long title's … cuts its end; it cut the model's name), the line under it the
  // documents and the band. A band over documents needs two of them: one document's resamples are that document, so no
  // band is claimed.
  const std::string docs = std::to_string(f.n_docs()) + (f.n_docs() == 1 ? " document" : " documents");
  const std::string model = base_name(f.model_path);
  const std::string auto_title = model.empty() ? "Loss by position" : model + ": loss by position";
  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  c.text(docs + (f.bootstrap > 0 && f.n_docs() > 1 ? "; bars: " + std::to_string(pct) + " % CI over documents" : ""),
         W / 2, title_space(opt) + 1.5, kTickSize, 0.5, 0.0, 0, false, kInk);
  draw_legend(c, legend, left, title_space(opt) + note_h, W - left - right);

  const Rect r{left, top, W - left - right, plot_h};
  const LinearMap y{yt.lo, yt.hi, r.bottom(), r.y};
  const LinearMap x{xt.lo, xt.hi, r.x, r.right()};
  draw_hgrid(c, r, yt, y);
  // Bands first, lines over them: a vertical bar per bucket, the runs side by side around the bucket's centre so
  // that no band hides another (filled bands of several runs would cover each other).
  const double slot = x(xt.lo + W0) - x(xt.lo);
  const double spread = std::min(2.0, 0.6 * slot / (double)runs.size());
  for (size_t k = 0; k < runs.size(); ++k) {
    const size_t rr = (size_t)runs[k];
    const double dx = ((double)k - 0.5 * (double)(runs.size() - 1)) * spread;
    for (size_t b = 0; b < B; ++b) {
      const float l = f.band_lo[rr * B + b], h = f.band_hi[rr * B + b];
      if (std::isnan(l) || !(h > l)) continue;
      const double xm = x(bucket_mid(f, b, x_end)) + dx;
      c.line(xm, y(l), xm, y(h), 1.2, tint(run_col[k], 0.45));
    }
  }
  for (size_t k = 0; k < runs.size(); ++k)
    draw_bucket_series(c, f, f.mean_nll.data() + (size_t)runs[k] * B, x_end, x, y, 1.0, 1.2, run_col[k]);
  draw_trained_context(c, f, xt, x, r);
  draw_left_axis(c, r, yt, y);
  draw_bottom_axis(c, r, xt, x);
  draw_y_title(c, kMargin, r, "NLL (nats/token)");
  draw_x_title(c, r, r.bottom() + kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0,
               "Position (bucket of " + std::to_string(f.bucket_tokens) + " tokens)");
  return c.finish();
}

}  // namespace focal::figures
