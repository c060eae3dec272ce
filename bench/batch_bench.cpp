// focal batch throughput against a plain forward over the same tokens (docs/performance.md, issue 15): the first N
// documents of a corpus, cut to max_tokens, under standard and focal t = 0.4. "plain": Session::forward with no
// observer; "metrics": an observer asking for the 8 row metrics of every layer x head and doing nothing with them;
// "batch": run_batch itself (tokenizing, statistics, per-document rows, the stats file). Median of REPS.
//   usage: batch_bench MODEL CORPUS [N_DOCS=40] [MAX_TOKENS=256] [REPS=3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

#include "focal/model.h"
#include "focal_batch/batch.h"
#include "focal_batch/corpus.h"

using namespace focal;

namespace {
struct MetricsOnly : ForwardObserver {
  bool wants_metrics() const override { return true; }
};
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: batch_bench MODEL CORPUS [N_DOCS=40] [MAX_TOKENS=256] [REPS=3]\n");
    return 2;
  }
  const std::string model_path = argv[1], corpus = argv[2];
  const int n_docs = argc > 3 ? std::atoi(argv[3]) : 40;
  const int max_tokens = argc > 4 ? std::atoi(argv[4]) : 256;
  const int reps = argc > 5 ? std::atoi(argv[5]) : 3;
  try {
    auto model = Model::load(model_path);
    const ModelConfig& c = model->config();
    std::vector<std::vector<int32_t>> docs;
    batch::CorpusReader r(corpus, batch::OnError::kSkip);
    batch::Document d;
    size_t tokens = 0;
    while ((int)docs.size() < n_docs && r.next(d)) {
      std::vector<int32_t> ids = model->require_tokenizer().encode(d.text, c.add_bos);
      if ((int)ids.size() > max_tokens) ids.resize((size_t)max_tokens);
      tokens += ids.size();
      docs.push_back(std::move(ids));
    }
    const std::vector<batch::BatchRun> runs = {{"standard", TempSpec::standard()},
                                               {"focal_t0.4", TempSpec::focal(0.4f)}};
    const double total_tokens = double(tokens) * runs.size();
    Session s(*model, max_tokens);
    RunOptions ro;
    ro.all_logits = false;
    auto forward_all = [&](ForwardObserver* obs) {
      const double t0 = now_s();
      for (const batch::BatchRun& run : runs)
        for (const auto& ids : docs) {
          s.reset();
          s.forward(ids.data(), (int)ids.size(), run.spec, ro, obs, nullptr);
        }
      return now_s() - t0;
    };
    const std::string out = "/tmp/batch_bench." + std::to_string((long)::getpid()) + ".h5";
    auto batch_all = [&]() {
      batch::BatchOptions o;
      o.data_path = corpus;
      o.out_path = out;
      o.runs = runs;
      o.max_tokens = max_tokens;
      o.limit = (int64_t)docs.size();
      o.on_error = batch::OnError::kSkip;
      int ac = 0;
      char** av = nullptr;
      auto comm = batch::make_comm(&ac, &av);
      const double t0 = now_s();
      batch::run_batch(*model, o, *comm, {});
      return now_s() - t0;
    };
    forward_all(nullptr);  // warm-up
    std::vector<double> plain, metrics, full;
    MetricsOnly mo;
    for (int i = 0; i < reps; ++i) {
      plain.push_back(forward_all(nullptr));
      metrics.push_back(forward_all(&mo));
      full.push_back(batch_all());
    }
    std::remove(out.c_str());
    const double p = median(plain), m = median(metrics), b = median(full);
    std::printf("model %s: %zu documents x %zu runs, %zu tokens per run (max %d), threads %s, %d reps (median)\n",
                model_path.c_str(), docs.size(), runs.size(), tokens, max_tokens,
                std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "default", reps);
    std::printf("plain forward      %8.1f tok/s  (%.2f s)\n", total_tokens / p, p);
    std::printf("forward + metrics  %8.1f tok/s  (%.2f s)  %.1f %% of plain\n", total_tokens / m, m, 100.0 * p / m);
    std::printf("focal batch        %8.1f tok/s  (%.2f s)  %.1f %% of plain\n", total_tokens / b, b, 100.0 * p / b);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "batch_bench: %s\n", e.what());
    return 1;
  }
}
