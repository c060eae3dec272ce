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
#include <sys/resource.h>
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
// CPU seconds of this process, all threads: on a shared machine less sensitive to other jobs than wall time.
double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}
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
      const double t0 = now_s(), c0 = cpu_s();
      for (const batch::BatchRun& run : runs)
        for (const auto& ids : docs) {
          s.reset();
          s.forward(ids.data(), (int)ids.size(), run.spec, ro, obs, nullptr);
        }
      return std::make_pair(now_s() - t0, cpu_s() - c0);
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
      const double t0 = now_s(), c0 = cpu_s();
      batch::run_batch(*model, o, *comm, {});
      return std::make_pair(now_s() - t0, cpu_s() - c0);
    };
    forward_all(nullptr);  // warm-up
    std::vector<double> plain, metrics, full, plain_c, metrics_c, full_c;
    MetricsOnly mo;
    for (int i = 0; i < reps; ++i) {
      auto a = forward_all(nullptr), b = forward_all(&mo), c = batch_all();
      plain.push_back(a.first), plain_c.push_back(a.second);
      metrics.push_back(b.first), metrics_c.push_back(b.second);
      full.push_back(c.first), full_c.push_back(c.second);
    }
    std::remove(out.c_str());
    const double p = median(plain), m = median(metrics), b = median(full);
    std::printf("model %s: %zu documents x %zu runs, %zu tokens per run (max %d), threads %s, %d reps (median)\n",
                model_path.c_str(), docs.size(), runs.size(), tokens, max_tokens,
                std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "default", reps);
    const double pc = median(plain_c), mc = median(metrics_c), bc = median(full_c);
    std::printf("                   wall tok/s  wall %% of plain | CPU s   CPU tok/s  CPU %% of plain\n");
    std::printf("plain forward      %8.1f    %6.1f %%        | %6.2f  %8.1f   %6.1f %%\n", total_tokens / p, 100.0, pc,
                total_tokens / pc, 100.0);
    std::printf("forward + metrics  %8.1f    %6.1f %%        | %6.2f  %8.1f   %6.1f %%\n", total_tokens / m,
                100.0 * p / m, mc, total_tokens / mc, 100.0 * pc / mc);
    std::printf("focal batch        %8.1f    %6.1f %%        | %6.2f  %8.1f   %6.1f %%\n", total_tokens / b,
                100.0 * p / b, bc, total_tokens / bc, 100.0 * pc / bc);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "batch_bench: %s\n", e.what());
    return 1;
  }
}
