// Jupyter's rich view of a capture: a summary table and an inline heatmap (py_objects.h capture_html).
#include <sstream>

#include "focal/error.h"
#include "focal/temp_spec.h"
#include "focal_figures/figures.h"
#include "py_objects.h"

namespace focalscope::py {

namespace {

std::string base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += k[(v >> 6) & 63];
    out += k[v & 63];
  }
  if (i + 1 == in.size()) {
    const unsigned v = (unsigned char)in[i] << 16;
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += k[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// Jupyter's rich view of a capture: a summary table and the first run's first stored head as an inline PNG (a data:

}  // namespace

// URI; no script, nothing fetched).
std::string capture_html(const PyCapture& c) {
  const focal::CaptureFile& f = c.file;
  std::ostringstream h;
  h << "<div class=\"focalscope-capture\"><p><b>focalscope capture</b>: " << f.n_tokens() << " tokens";
  if (f.has_generated())  // generated tokens are framed crimson below
    h << " (" << f.prompt_end() << " prompt + " << f.n_tokens() - f.prompt_end() << " generated)";
  h << ", " << f.n_layers << " layers &times; " << f.n_heads << " heads, model <code>"
    << focal::figures::xml_escape(f.model_path) << "</code></p>";
  h << "<p style=\"font-family:monospace\">";
  for (int i = 0; i < f.n_tokens() && i < 48; ++i)
    h << "<span style=\"border:1px solid " << (i >= f.prompt_end() ? "#d81b60" : "#ccc")
      << ";margin:1px;padding:0 2px\">"
      << focal::figures::xml_escape(f.pieces.empty() ? std::to_string(f.token_ids[i]) : f.pieces[i]) << "</span>";
  if (f.n_tokens() > 48) h << " &hellip;";
  h << "</p><table><tr><th>run</th><th>setting</th><th>stored rows (layers &times; heads &times; queries)</th>"
       "<th>arrays</th></tr>";
  for (const focal::RunCapture& r : f.runs)
    h << "<tr><td>" << focal::figures::xml_escape(r.name) << "</td><td><code>"
      << focal::figures::xml_escape(focal::TempSpec::brief_json(r.temp_spec_json)) << "</code></td><td>"
      << r.layers.size() << " &times; " << r.heads.size() << " &times; " << r.queries.size() << "</td><td>"
      << (r.probs.empty() ? "" : "probs ") << (r.scores.empty() ? "" : "scores ") << "metrics"
      << (r.tau.empty() ? "" : " tau") << "</td></tr>";
  h << "</table>";
  for (const focal::Comparison& cmp : f.comparisons) {
    const focal::ComparisonMeans m = focal::comparison_means(cmp);
    if (m.n_rows > 0)
      h << "<p>" << focal::figures::xml_escape(cmp.run_a) << " vs " << focal::figures::xml_escape(cmp.run_b)
        << ": mean KL " << m.kl << " nats, mean JS " << m.js << " nats over " << m.n_rows << " rows ("
        << focal::figures::xml_escape(m.rows) << ")</p>";
  }
  if (!f.runs.empty() && !f.runs[0].probs.empty()) {
    try {
      focal::figures::FigureOptions opt;
      opt.runs = {f.runs[0].name};
      focal::figures::Source src;
      src.capture = &f;
      const std::string png = focal::figures::render_figure("heatmap", {src}, opt, focal::figures::Format::kPng);
      h << "<img alt=\"attention heatmap\" style=\"max-width:480px\" src=\"data:image/png;base64," << base64(png)
        << "\"/>";
    } catch (const focal::Error& e) { h << "<p>(no heatmap: " << focal::figures::xml_escape(e.what()) << ")</p>"; }
  }
  h << "</div>";
  return h.str();
}

}  // namespace focalscope::py
