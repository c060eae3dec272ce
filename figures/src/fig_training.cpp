// training: loss curves of several training logs on one axis against training steps or tokens (the paper's
// Fig. 3a / 4), one line per run; or with --tau the learned temperature tau per layer over the steps of one log,
// with --clip a second panel with the fraction of tau values at a clip bound.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "focal/calibrate.h"
#include "focal/config.h"
#include "focal/error.h"
#include "focal/log.h"
#include "focal/trainer.h"
#include "kinds.h"
#include "plot.h"
#include "select.h"
#include "series.h"

namespace focal::figures {
namespace {

const char* kTau = "\xCF\x84";  // τ

struct Log {
  const TrainLog* log = nullptr;
  std::string label;  // legend label
  std::string name;   // the file, for messages
};

// One line: values against steps (converted to the x axis when drawn); NaN values are gaps.
struct Line {
  std::vector<double> steps, y;
  std::vector<double> raw;  // step_loss: the unsmoothed values, drawn faint under y
  double per_step = 1;      // x units per step (tokens per step / unit with --x tokens)
  Rgb color;
  Shape shape = Shape::kCircle;
};

struct RefLine {  // a dashed horizontal reference line labelled inside the plot at its left end (tau's bounds)
  double y;
  std::string label;
  bool label_below;
};

struct Panel {
  std::vector<Line> lines;
  std::string y_title;
  double natural_h = 105;
  std::vector<RefLine> refs;
  bool from_zero = false;  // y axis starts at 0
  bool markers = true;     // markers at the points (when there are at most 40 per line)
  Ticks yt;
};

// batch x seq_len from the log's train_config_json; 0 when it does not say.
double tokens_per_step(const TrainLog& log) {
  try {
    const nlohmann::json j = nlohmann::json::parse(log.train_config_json);
    if (j.is_object() && j.contains("batch") && j.contains("seq_len") && j["batch"].is_number() &&
        j["seq_len"].is_number()) {
      const double b = j["batch"].get<double>(), s = j["seq_len"].get<double>();
      if (b > 0 && s > 0 && std::isfinite(b * s)) return b * s;
    }
  } catch (const std::exception& e) {
    log_warning("training log '" + log.run_name + "': train_config_json is malformed (" + e.what() +
                "); the training figure counts steps instead of tokens");
  }
  return 0;
}

// Centred running mean over `window` values, truncated at the ends (the first value averages the first
// window / 2 + 1), NaN values skipped.
std::vector<double> running_mean(const std::vector<double>& v, int window) {
  const int n = (int)v.size(), half = std::max(0, window / 2);
  std::vector<double> sum(n + 1, 0.0), cnt(n + 1, 0.0);
  for (int i = 0; i < n; ++i) {
    sum[i + 1] = sum[i] + (std::isnan(v[i]) ? 0.0 : v[i]);
    cnt[i + 1] = cnt[i] + (std::isnan(v[i]) ? 0.0 : 1.0);
  }
  std::vector<double> out(n, NAN);
  for (int i = 0; i < n; ++i) {
    const int a = std::max(0, i - half), b = std::min(n - 1, i + half);
    const double c = cnt[b + 1] - cnt[a];
    if (c > 0) out[i] = (sum[b + 1] - sum[a]) / c;
  }
  return out;
}

bool all_nan(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isnan(x)) return false;
  return true;
}

// layer_bar, when set, replaces the legend: a colour bar by layer right of the panels (more than 8 lines).
std::string draw_panels(std::vector<Panel>& panels, const std::vector<SeriesItem>& legend, double x_max,
                        const std::string& x_title, const std::string& auto_title, const FigureOptions& opt, Format fmt,
                        const ColorScale* layer_bar = nullptr) {
  Canvas c(fmt, opt.dpi);
  const double W = page_width(opt);
  double axis_w = 0;
  for (Panel& p : panels) {
    double lo = INFINITY, hi = -INFINITY;
    for (const Line& l : p.lines) {
      for (double v : l.y)
        if (!std::isnan(v)) lo = std::min(lo, v), hi = std::max(hi, v);
      for (double v : l.raw)
        if (!std::isnan(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
    for (const RefLine& r : p.refs) lo = std::min(lo, r.y), hi = std::max(hi, r.y);
    if (p.from_zero) lo = 0, hi = std::max(hi, 1.0);
    p.yt = nice_ticks(lo, hi, p.natural_h < 60 ? 3 : 7, true);
    // Reference lines and their labels stay clear of the frame.
    const double span = p.yt.hi - p.yt.lo;
    for (const RefLine& r : p.refs) {
      if (r.y - p.yt.lo < 0.08 * span) p.yt.lo = std::min(p.yt.lo, r.y - 0.12 * span);
      if (p.yt.hi - r.y < 0.08 * span) p.yt.hi = std::max(p.yt.hi, r.y + 0.12 * span);
    }
    axis_w = std::max(axis_w, left_axis_width(c, p.yt));
  }
  const double left = kMargin + title_height() + 3.0 + axis_w;
  // x ticks: as many round ones as fit side by side with room to spare.
  Ticks xt;
  double right = 0, plot_w = 0;
  for (int max_ticks = 7; max_ticks >= 2; --max_ticks) {
    xt = nice_ticks(0, x_max > 0 ? x_max : 1, max_ticks, false);
    right = kMargin + 0.5 * c.text_width(xt.labels.empty() ? "0" : xt.labels.back(), kTickSize);
    if (layer_bar) right = std::max(right, kMargin + colorbar_width(c, *layer_bar));
    plot_w = W - left - right;
    const double spacing = xt.values.size() > 1 ? plot_w * (xt.values[1] - xt.values[0]) / (xt.hi - xt.lo) : 1e9;
    if (spacing >= max_label_width(c, xt.labels, kTickSize) + 6.0) break;
  }
  const double top = title_space(opt) + (legend.empty() ? 0.0 : series_legend_height(c, legend, plot_w) + 4.0);
  const double bottom = kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0 + title_height() + kMargin;
  const double gap = 9.0;
  double natural = 0;
  for (const Panel& p : panels) natural += p.natural_h;
  const double H = page_height(opt, top + natural + gap * (panels.size() - 1) + bottom);
  const double avail = H - top - bottom - gap * (panels.size() - 1);
  if (avail < 20.0 * panels.size() || plot_w < 40)
    throw Error("width_in", "width_in: the page is too small; make it wider or taller");

  c.begin(W, H, title_text(opt, auto_title));
  draw_title(c, opt, auto_title);
  if (!legend.empty()) draw_series_legend(c, legend, left, title_space(opt), plot_w);
  const LinearMap x{xt.lo, xt.hi, left, left + plot_w};
  double y0 = top;
  for (size_t pi = 0; pi < panels.size(); ++pi) {
    const Panel& p = panels[pi];
    const Rect plot{left, y0, plot_w, avail * p.natural_h / natural};
    y0 = plot.bottom() + gap;
    const LinearMap y{p.yt.lo, p.yt.hi, plot.bottom(), plot.y};
    draw_hgrid(c, plot, p.yt, y);
    auto page_x = [&](const Line& l, size_t i) { return x(l.steps[i] * l.per_step); };
    // Whether a data line (with its markers' radius) crosses the box [x0, x1] x [ya, yb] on the page.
    auto crosses = [&](double x0, double x1, double ya, double yb) {
      const double pad = 2.5;
      for (const Line& l : p.lines)
        for (size_t i = 0; i < l.y.size(); ++i) {
          if (std::isnan(l.y[i])) continue;
          const double xa = page_x(l, i), ya0 = y(l.y[i]);
          if (xa >= x0 - pad && xa <= x1 + pad && ya0 >= ya - pad && ya0 <= yb + pad) return true;
          if (i + 1 >= l.y.size() || std::isnan(l.y[i + 1])) continue;
          const double xb = page_x(l, i + 1), yb0 = y(l.y[i + 1]);
          const double lo = std::max(x0, std::min(xa, xb)), hi = std::min(x1, std::max(xa, xb));
          if (lo > hi || xb == xa) continue;
          const double y_lo = ya0 + (yb0 - ya0) * (lo - xa) / (xb - xa),
                       y_hi = ya0 + (yb0 - ya0) * (hi - xa) / (xb - xa);
          if (std::max(y_lo, y_hi) >= ya - 1.0 && std::min(y_lo, y_hi) <= yb + 1.0) return true;
        }
      return false;
    };
    for (const RefLine& r : p.refs) {
      c.line(plot.x, y(r.y), plot.right(), y(r.y), 0.6, gray(0.45), true);
      // At the left end, else the right end, else the middle: wherever no layer's line runs through it.
      const double w = c.text_width(r.label, kTickSize), h = kCapHeight * kTickSize;
      const double base = y(r.y) + (r.label_below ? 2.0 : -2.0);
      const double top_y = r.label_below ? base : base - h, bottom_y = r.label_below ? base + h : base;
      double lx = plot.x + 3.0;
      for (const double cand : {plot.x + 3.0, plot.right() - 3.0 - w, plot.x + 0.5 * (plot.w - w)})
        if (!crosses(cand, cand + w, top_y, bottom_y)) {
          lx = cand;
          break;
        }
      c.text(r.label, lx, base, kTickSize, 0.0, r.label_below ? 1.0 : 0.0, 0, false, gray(0.35));
    }
    for (const Line& l : p.lines) {
      if (l.raw.empty()) continue;
      std::vector<double> xs, ys;
      for (size_t i = 0; i < l.raw.size(); ++i) {
        xs.push_back(page_x(l, i));
        ys.push_back(std::isnan(l.raw[i]) ? NAN : y(l.raw[i]));
      }
      c.polyline(xs, ys, 0.4, lighten(l.color, 0.6));
    }
    size_t most = 0;
    for (const Line& l : p.lines) most = std::max(most, l.steps.size());
    const bool markers = p.markers && most <= 40;
    for (const Line& l : p.lines) {
      std::vector<double> xs, ys;
      for (size_t i = 0; i < l.y.size(); ++i) {
        xs.push_back(page_x(l, i));
        ys.push_back(std::isnan(l.y[i]) ? NAN : y(l.y[i]));
      }
      c.polyline(xs, ys, l.raw.empty() ? 1.2 : 1.0, l.color);
    }
    if (markers)
      for (const Line& l : p.lines)
        for (size_t i = 0; i < l.y.size(); ++i)
          if (!std::isnan(l.y[i])) draw_shape(c, page_x(l, i), y(l.y[i]), most > 20 ? 1.4 : 1.8, l.shape, l.color);
    draw_left_axis(c, plot, p.yt, y);
    draw_y_title(c, kMargin, plot, p.y_title);
    if (pi + 1 < panels.size()) {  // ticks without labels between panels
      c.line(plot.x, plot.bottom(), plot.right(), plot.bottom(), kAxisWidth, kInk);
      for (double v : xt.values) c.line(x(v), plot.bottom(), x(v), plot.bottom() + kTickLen * 0.6, kAxisWidth, kInk);
    } else {
      draw_bottom_axis(c, plot, xt, x);
      draw_x_title(c, plot, plot.bottom() + kTickLen + 1.5 + (kCapHeight + kDescent) * kTickSize + 3.0, x_title);
    }
  }
  if (layer_bar) draw_colorbar(c, *layer_bar, left + plot_w, top, y0 - gap - top);
  return c.finish();
}

}  // namespace

std::string render_training(const std::vector<Source>& src, const FigureOptions& opt, Format fmt) {
  const std::string kind = "training";
  reject_option(opt.matrix, "matrix", kind);
  reject_option(opt.overlay, "overlay", kind);
  reject_option(opt.no_sink, "no_sink", kind);
  reject_option(opt.log_scale, "log_scale", kind);
  reject_option(opt.lines, "lines", kind);
  reject_option(opt.per_layer, "per_layer", kind);
  if (!opt.runs.empty())
    throw Error("runs",
                "runs does not apply to the training figure: it draws one line per file given (labels names them)");
  reject_option(opt.layer >= 0, "layer", kind);
  reject_option(opt.head >= 0, "head", kind);
  reject_option(opt.query >= 0, "query", kind);
  reject_option(!opt.task_kind.empty(), "task_kind", kind);
  if (opt.clip && !opt.tau)
    throw Error("clip", "clip adds the clipped-" + std::string(kTau) + " panel to tau: add tau");
  check_page_options(opt);
  if (src.empty()) throw Error("the training figure needs a training log (OUT/train_log.h5, written by focal train)");

  std::vector<Log> logs;
  std::vector<std::string> names, fallback;
  for (const Source& s : src) {
    const std::string file = s.path.empty() ? s.label : s.path;
    if (!s.train_log)
      throw Error("the training figure reads training logs (OUT/train_log.h5, written by focal train), but '" + file +
                  "' is " +
                  (s.capture ? "an attention capture"
                   : s.sweep ? "a temperature sweep"
                   : s.eval  ? "an evaluation file (draw it with the retrieval figure)"
                             : "not loaded"));
    const TrainLog& t = *s.train_log;
    const size_t N = t.eval_step.size();
    for (const auto* v : {&t.train_loss, &t.val_loss, &t.tau_clip_frac})
      if (v->size() != N) throw Error("the training log '" + file + "' is malformed: its columns differ in length");
    if (t.n_layers < 0 || t.tau_mean.size() != N * (size_t)t.n_layers)
      throw Error("the training log '" + file + "' is malformed: tau_mean is not [evaluations, n_layers]");
    logs.push_back({s.train_log, "", file});
    names.push_back(s.train_log->run_name);
    fallback.push_back(s.label.empty() ? file : s.label);
  }
  const std::vector<std::string> labels = given_or_automatic_labels(opt.labels, series_labels(names, fallback));
  for (size_t i = 0; i < logs.size(); ++i) logs[i].label = labels[i];
  if (logs.size() > (size_t)kNumCategoryColors)
    throw Error("the training figure draws at most " + std::to_string(kNumCategoryColors) +
                " training logs (one colour each); " + std::to_string(logs.size()) + " were given");

  // The x axis: steps, or tokens (batch x seq_len per step) in thousands / millions / billions.
  const std::string x_axis = opt.x_axis.empty() ? "steps" : opt.x_axis;
  if (x_axis != "steps" && x_axis != "tokens")
    throw Error("x_axis", "x_axis: unknown axis '" + x_axis + "' (axes: steps, tokens)");
  const bool tokens = x_axis == "tokens";
  std::vector<double> per_step(logs.size(), 1.0);
  if (tokens)
    for (size_t i = 0; i < logs.size(); ++i) {
      per_step[i] = tokens_per_step(*logs[i].log);
      if (per_step[i] <= 0)
        throw Error("x_axis", "x_axis tokens: the training log '" + logs[i].name +
                                  "' does not record batch and seq_len in its train_config_json; use x_axis steps");
    }

  std::vector<Panel> panels;
  std::vector<SeriesItem> legend;
  ColorScale by_layer;  // --tau with more than 8 layers: colours by layer and a colour bar instead of a legend
  bool layer_bar = false;
  std::string auto_title;
  double max_step = 0, max_x = 0;  // max_x in tokens before the unit
  auto note_step = [&](size_t li, double step) {
    max_step = std::max(max_step, step);
    max_x = std::max(max_x, step * per_step[li]);
  };

  if (opt.tau) {
    if (logs.size() != 1)
      throw Error("tau",
                  "tau draws one training log (one line per layer); " + std::to_string(logs.size()) + " were given");
    if (!opt.metric.empty())
      throw Error("metric", "metric does not apply with tau (it draws " + std::string(kTau) + " per layer)");
    const TrainLog& log = *logs[0].log;
    const size_t N = log.eval_step.size(), L = (size_t)log.n_layers;
    std::string mode;
    float tau_min = NAN, tau_max = NAN;
    // a calibration log: tau / sqrt(d_head) = t, the unit its temperature file holds
    const double t_per_tau = calib_log_t_per_tau(log);
    const bool calib = t_per_tau > 0.0;
    const double t_scale = calib ? t_per_tau : 1.0;
    try {
      const ModelConfig mc = parse_config(log.model_config_json, logs[0].name);
      mode = attn_mode_name(mc.focal.mode);
      if (mc.focal.mode == AttnMode::kLearned && mc.focal.tau_max > mc.focal.tau_min)
        tau_min = mc.focal.tau_min, tau_max = mc.focal.tau_max;
    } catch (const Error& e) {
      log_warning("training log '" + logs[0].name + "': model_config_json is unreadable (" + e.what() +
                  "); the tau panel leaves out the attention mode and the clip range");
    }
    if (N == 0 || L == 0 || all_nan(log.tau_mean))
      throw Error("tau", "tau: the training log '" + logs[0].name + "' has no learned temperature " + kTau + " (" +
                             (N == 0 ? std::string("it holds no evaluations yet")
                                     : "tau_mean is NaN at every evaluation" +
                                           (mode.empty()
                                                ? std::string("")
                                                : ": run '" + log.run_name + "' trained with " + mode + " attention")) +
                             "); tau needs a model trained with learned attention");
    Panel p;
    p.y_title = calib ? "Calibrated t, mean over heads" : std::string("Learned ") + kTau;
    const std::vector<int> layers = pick_indices(opt.layers, (int)L, "layer", "the training log");
    layer_bar = layers.size() > (size_t)kNumCategoryColors;
    if (layer_bar) {
      by_layer = linear_scale(0.0, (double)L - 1.0, "Layer");
      by_layer.span = 0.9;
      for (auto& s : by_layer.ticks.labels) s = format_number(std::stod(s), 1.0);
    }
    for (const int li : layers) {
      const size_t l = (size_t)li;
      Line line;
      line.per_step = per_step[0];
      line.color = layer_bar ? by_layer((double)l) : series_color(l, L);
      line.shape = series_shape((int)l);
      for (size_t i = 0; i < N; ++i) {
        line.steps.push_back(log.eval_step[i]);
        line.y.push_back((float)(log.tau_mean[i * L + l] * t_scale));
        note_step(0, log.eval_step[i]);
      }
      p.lines.push_back(std::move(line));
      if (!layer_bar) legend.push_back({"layer " + std::to_string(l), series_color(l, L), series_shape((int)l), true});
    }
    if (!std::isnan(tau_max) && !calib) {
      p.refs.push_back({tau_max, kTau + std::string(" max"), true});
      p.refs.push_back({tau_min, kTau + std::string(" min"), false});
    }
    panels.push_back(std::move(p));
    if (opt.clip && (calib || all_nan(log.tau_clip_frac)))  // it drew an empty panel over a 0..1 axis
      throw Error("clip", "clip: the log '" + logs[0].name + "' records no clipped fraction of " + kTau +
                              (calib ? std::string(" (a calibration log: calibrated t is not clipped)")
                                     : std::string(" (NaN at every evaluation)")) +
                              "; leave clip out");
    if (opt.clip) {
      Panel q;
      q.y_title = "Clipped (%)";
      q.natural_h = 45;
      q.from_zero = true;
      Line line;
      line.per_step = per_step[0];
      line.color = gray(0.3);
      for (size_t i = 0; i < N; ++i) {
        line.steps.push_back(log.eval_step[i]);
        line.y.push_back(100.0 * log.tau_clip_frac[i]);
      }
      q.lines.push_back(std::move(line));
      panels.push_back(std::move(q));
    }
    auto_title = logs[0].label +
                 (calib ? std::string(": calibrated t per layer") : ": learned " + std::string(kTau) + " per layer") +
                 (layers.size() == L ? std::string() : " (" + indices_text("layer", layers) + ")");
  } else {
    const std::string metric = opt.metric.empty() ? "val_loss" : opt.metric;
    if (metric != "val_loss" && metric != "train_loss" && metric != "step_loss")
      throw Error("metric", "metric: unknown metric '" + metric +
                                "' for the training figure (metrics: val_loss, "
                                "train_loss, step_loss)");
    const bool steps = metric == "step_loss";
    Panel p;
    p.y_title = metric == "val_loss" ? "Validation loss (nats)" : "Training loss (nats)";
    p.markers = !steps;
    // step_loss: a running mean over 2 % of the longest run's steps (odd, at least 3) shows the trend, the same
    // window for every run; the raw losses stay faint below.
    size_t longest = 0;
    for (const Log& l : logs) longest = std::max(longest, l.log->step_loss.size());
    const int window = std::max(3, (int)std::lround(0.02 * longest) | 1);
    std::vector<std::string> labels;
    labels.reserve(logs.size());
    for (const Log& l : logs) labels.push_back(l.label);
    const std::vector<Rgb> colors = series_colors(labels);  // by attention kind, as in the capture figures
    for (size_t k = 0; k < logs.size(); ++k) {
      const TrainLog& log = *logs[k].log;
      Line line;
      line.per_step = per_step[k];
      line.color = colors[k];
      line.shape = series_shape((int)k);
      if (steps) {
        if (log.step_loss.empty())
          throw Error("metric", "metric step_loss: the training log '" + logs[k].name + "' holds no steps yet");
        std::vector<double> raw(log.step_loss.begin(), log.step_loss.end());
        for (size_t i = 0; i < raw.size(); ++i) line.steps.push_back((double)i + 1);
        line.y = raw.size() >= 10 ? running_mean(raw, window) : raw;
        if (raw.size() >= 10) line.raw = raw;
        note_step(k, (double)raw.size());
      } else {
        const std::vector<float>& v = metric == "val_loss" ? log.val_loss : log.train_loss;
        if (log.eval_step.empty())
          throw Error("the training log '" + logs[k].name +
                      "' holds no evaluations yet (the first comes after eval_every steps); metric step_loss "
                      "draws every step's training loss");
        if (all_nan(v))
          throw Error("metric", "metric " + metric + ": the training log '" + logs[k].name + "' has no values");
        for (size_t i = 0; i < log.eval_step.size(); ++i) {
          line.steps.push_back(log.eval_step[i]);
          line.y.push_back(v[i]);
          note_step(k, log.eval_step[i]);
        }
      }
      p.lines.push_back(std::move(line));
      legend.push_back({logs[k].label, colors[k], series_shape((int)k), !steps});
    }
    panels.push_back(std::move(p));
    auto_title = metric == "val_loss"     ? "Validation loss"
                 : metric == "train_loss" ? "Training loss"
                                          : "Training loss per step";
    if (logs.size() == 1) {
      auto_title = logs[0].label + ": " + auto_title;
      auto_title[logs[0].label.size() + 2] = (char)std::tolower((unsigned char)auto_title[logs[0].label.size() + 2]);
      legend.clear();
    }
  }

  std::string x_title = "Training step";
  double unit = 1;
  if (tokens) {
    const char* words[] = {"", " (thousands)", " (millions)", " (billions)"};
    int u = 0;
    while (u < 3 && max_x >= std::pow(1e3, u + 1)) ++u;
    unit = std::pow(1e3, u);
    x_title = std::string("Training tokens") + words[u];
    for (Panel& p : panels)
      for (Line& l : p.lines) l.per_step /= unit;
    max_x /= unit;
  } else {
    max_x = max_step;
  }
  return draw_panels(panels, legend, max_x, x_title, auto_title, opt, fmt, layer_bar ? &by_layer : nullptr);
}

}  // namespace focal::figures
