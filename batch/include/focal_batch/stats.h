// Corpus statistics of attention metrics, mergeable across documents, checkpoints and MPI ranks: per run × layer ×
// head × metric the count, mean and M2 (Welford within a document, Chan's formula between partial results), min and
// max, a fixed-bin histogram and sums by log-spaced position bucket. Plain data; no I/O (stats_file.h writes it).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace focal::batch {

// The axes every array shares; fixed for a whole batch so partial results line up.
struct StatsShape {
  int n_runs = 0, n_layers = 0, n_heads = 0, n_metrics = 0;
  int n_bins = 64;                                                                  // histogram bins per metric
  int max_tokens = 0;                                                               // positions 0..max_tokens-1
  size_t cells() const { return (size_t)n_runs * n_layers * n_heads * n_metrics; }  // [R, L, H, M]
  int n_buckets() const;  // log-spaced position buckets covering 1..max_tokens-1 (row 0 is never counted)
  bool operator==(const StatsShape& o) const;
};

// Bucket b covers positions [2^b, 2^(b+1)) (the last one ends at max_tokens). Edges [n_buckets + 1].
std::vector<int32_t> position_bucket_edges(const StatsShape& s);
int position_bucket(int pos);  // floor(log2(pos)) for pos >= 1

// Histogram edges of metric m, [n_bins + 1], fixed by the metric's range: [0, ln max_tokens] for entropy_nats,
// log-spaced [1, max_tokens] for eff_support, [0, 1] for the probability-valued metrics. Values outside are counted
// in the first or last bin.
std::vector<double> histogram_edges(const StatsShape& s, int metric);

// Count / mean / M2 of one cell, merged exactly with Chan et al.'s pairwise formula.
struct Moments {
  double n = 0, mean = 0, m2 = 0;
  void add(double x) {
    n += 1;
    const double d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
  }
  void merge(const Moments& o);
  double variance() const { return n > 1 ? m2 / (n - 1) : 0.0; }  // sample variance
  // As the stats file stores them (and Python reads them): NaN where no row (mean) or fewer than two (variance)
  // was counted, so an empty cell never reads as a measured 0.
  double mean_or_nan() const { return n > 0 ? mean : std::numeric_limits<double>::quiet_NaN(); }
  double variance_or_nan() const { return n > 1 ? variance() : std::numeric_limits<double>::quiet_NaN(); }
};

struct CorpusStats {
  StatsShape shape;
  std::vector<Moments> moments;     // [R, L, H, M]
  std::vector<double> min, max;     // [R, L, H, M]; +inf / -inf while empty
  std::vector<uint64_t> hist;       // [R, L, H, M, n_bins]
  std::vector<double> pos_sum;      // [R, L, H, M, n_buckets]
  std::vector<uint64_t> pos_count;  // [R, L, H, M, n_buckets]
  uint64_t n_docs = 0, n_tokens = 0, n_skipped = 0;

  explicit CorpusStats(const StatsShape& s = StatsShape());
  void merge(const CorpusStats& o);  // o must have the same shape
  size_t cell(int run, int layer, int head, int metric) const {
    return (((size_t)run * shape.n_layers + layer) * shape.n_heads + head) * shape.n_metrics + metric;
  }
};

// Adds one forward's metrics for one run to `stats` and returns the per-document moments `doc` ([L, H, M] for this
// run, caller-owned, merged into stats by the caller through merge_document). metrics: [n_heads, T, M] of `layer`.
// Rows 0 (one visible key, always one-hot) and NaN values are not counted.
class Accumulator {
 public:
  explicit Accumulator(const StatsShape& s);
  // Adds the rows of one layer of one forward; bins and buckets go straight into `stats`, moments into doc_.
  void add_layer(CorpusStats& stats, int run, int layer, int n_tokens, const float* metrics);
  // Chan-merges the document's moments into stats and returns its per-cell means [R, L, H, M] (NaN where empty).
  std::vector<float> finish_document(CorpusStats& stats);

 private:
  StatsShape shape_;
  std::vector<std::vector<double>> edges_;  // [M][n_bins + 1]
  std::vector<bool> log_bins_;              // [M]
  std::vector<Moments> doc_;                // [R, L, H, M]
};

int histogram_bin(const std::vector<double>& edges, bool log_bins, double x);

}  // namespace focal::batch
