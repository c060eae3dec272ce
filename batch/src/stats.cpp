// Streaming, mergeable corpus statistics (stats.h): Welford within a document, Chan between partial results.
#include "focal_batch/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "focal/error.h"
#include "focal/model.h"

namespace focal::batch {

bool StatsShape::operator==(const StatsShape& o) const {
  return n_runs == o.n_runs && n_layers == o.n_layers && n_heads == o.n_heads && n_metrics == o.n_metrics &&
         n_bins == o.n_bins && max_tokens == o.max_tokens;
}

int position_bucket(int pos) {
  int b = 0;
  while (pos > 1) {
    pos >>= 1;
    ++b;
  }
  return b;
}

int StatsShape::n_buckets() const { return max_tokens <= 1 ? 1 : position_bucket(max_tokens - 1) + 1; }

std::vector<int32_t> position_bucket_edges(const StatsShape& s) {
  std::vector<int32_t> e;
  e.reserve((size_t)s.n_buckets() + 1);
  for (int b = 0; b < s.n_buckets(); ++b) e.push_back(int32_t(1) << b);
  e.push_back(std::max(s.max_tokens, 2));
  return e;
}

namespace {
bool is_log_metric(int m) { return m == kEffSupport; }
double metric_hi(const StatsShape& s, int m) {
  const double t = std::max(s.max_tokens, 2);
  if (m == kEntropyNats) return std::log(t);
  if (m == kEffSupport) return t;
  return 1.0;
}
double metric_lo(int m) { return m == kEffSupport ? 1.0 : 0.0; }
}  // namespace

std::vector<double> histogram_edges(const StatsShape& s, int metric) {
  const double lo = metric_lo(metric), hi = metric_hi(s, metric);
  std::vector<double> e((size_t)s.n_bins + 1);
  for (int i = 0; i <= s.n_bins; ++i) {
    const double f = double(i) / s.n_bins;
    e[(size_t)i] = is_log_metric(metric) ? lo * std::pow(hi / lo, f) : lo + (hi - lo) * f;
  }
  return e;
}

int histogram_bin(const std::vector<double>& edges, bool log_bins, double x) {
  const int n_bins = (int)edges.size() - 1;
  const double lo = edges.front(), hi = edges.back();
  double f = log_bins ? std::log(std::max(x, lo) / lo) / std::log(hi / lo) : (x - lo) / (hi - lo);
  int b = (int)std::floor(f * n_bins);
  b = std::clamp(b, 0, n_bins - 1);
  // The formula can land one off an edge through rounding; the stored edges decide.
  if (b > 0 && x < edges[(size_t)b]) --b;
  if (b < n_bins - 1 && x >= edges[(size_t)b + 1]) ++b;
  return b;
}

void Moments::merge(const Moments& o) {
  if (o.n == 0) return;
  if (n == 0) {
    *this = o;
    return;
  }
  const double nt = n + o.n;
  const double d = o.mean - mean;
  mean += d * (o.n / nt);
  m2 += o.m2 + d * d * (n * o.n / nt);
  n = nt;
}

CorpusStats::CorpusStats(const StatsShape& s)
    : shape(s),
      moments(s.cells()),
      min(s.cells(), std::numeric_limits<double>::infinity()),
      max(s.cells(), -std::numeric_limits<double>::infinity()),
      hist(s.cells() * (size_t)s.n_bins, 0),
      pos_sum(s.cells() * (size_t)s.n_buckets(), 0.0),
      pos_count(s.cells() * (size_t)s.n_buckets(), 0) {}

void CorpusStats::merge(const CorpusStats& o) {
  if (!(shape == o.shape)) throw Error("corpus statistics of different shapes cannot be merged");
  for (size_t i = 0; i < moments.size(); ++i) {
    moments[i].merge(o.moments[i]);
    min[i] = std::min(min[i], o.min[i]);
    max[i] = std::max(max[i], o.max[i]);
  }
  for (size_t i = 0; i < hist.size(); ++i) hist[i] += o.hist[i];
  for (size_t i = 0; i < pos_sum.size(); ++i) {
    pos_sum[i] += o.pos_sum[i];
    pos_count[i] += o.pos_count[i];
  }
  n_docs += o.n_docs;
  n_tokens += o.n_tokens;
  n_skipped += o.n_skipped;
}

Accumulator::Accumulator(const StatsShape& s) : shape_(s), doc_(s.cells()) {
  for (int m = 0; m < s.n_metrics; ++m) {
    edges_.push_back(histogram_edges(s, m));
    log_bins_.push_back(is_log_metric(m));
  }
}

void Accumulator::add_layer(CorpusStats& st, int run, int layer, int n_tokens, const float* metrics) {
  const int M = shape_.n_metrics, B = shape_.n_bins, P = shape_.n_buckets();
  for (int h = 0; h < shape_.n_heads; ++h) {
    for (int m = 0; m < M; ++m) {
      const size_t c = st.cell(run, layer, h, m);
      Moments& mo = doc_[c];
      double lo = st.min[c], hi = st.max[c];
      uint64_t* hist = &st.hist[c * (size_t)B];
      double* psum = &st.pos_sum[c * (size_t)P];
      uint64_t* pcount = &st.pos_count[c * (size_t)P];
      const float* col = metrics + (size_t)h * n_tokens * M + m;  // [T] with stride M
      for (int i = 1; i < n_tokens; ++i) {
        const double x = col[(size_t)i * M];
        if (std::isnan(x)) continue;
        mo.add(x);
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        ++hist[histogram_bin(edges_[(size_t)m], log_bins_[(size_t)m], x)];
        const int b = position_bucket(i);
        psum[b] += x;
        ++pcount[b];
      }
      st.min[c] = lo;
      st.max[c] = hi;
    }
  }
}

std::vector<float> Accumulator::finish_document(CorpusStats& st) {
  std::vector<float> means(doc_.size());
  for (size_t c = 0; c < doc_.size(); ++c) {
    means[c] = doc_[c].n > 0 ? (float)doc_[c].mean : std::numeric_limits<float>::quiet_NaN();
    st.moments[c].merge(doc_[c]);
    doc_[c] = Moments();
  }
  return means;
}

}  // namespace focal::batch
