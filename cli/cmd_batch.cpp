// `focal batch`: attention statistics over a corpus, standard against focal, in one process or as one rank of an
// MPI job (mpirun / srun). A thin front end over focal_batch (batch/).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "args.h"
#include "device_option.h"
#include "output_option.h"
#include "error_flags.h"
#include "focal/atomic_file.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal_batch/batch.h"
#include "focal_batch/stats_file.h"
#include "temp_options.h"
#include "print_provenance.h"

namespace focal::cli {

namespace {

const char* kBatchHelp = R"(usage: focal batch MODEL --data PATH --runs standard,focal:0.4[,...] -o STATS.h5 [options]

Runs every document of a corpus once per temperature setting and keeps, per setting x layer x head x metric, the
count, mean and variance (Welford within a document, Chan between documents and ranks), min and max, a fixed-bin
histogram and the mean by log-spaced position bucket; a summary row per document; and optionally sampled attention
rows. Memory does not grow with the corpus. Format: docs/batch.md.

  --data PATH           a .jsonl file ({"text": ..., optional "id", optional "relevant": [key positions]}),
                        a text file (one document per blank-line-separated block) or a directory of .txt files
  --runs LIST           settings, comma-separated, each in the spec grammar of `focal capture --help`: standard,
                        native, focal:T, learned[:X], ssmax[:S], calibrated:FILE, +L=T / +L:H=T overrides
                        (default standard,focal:0.4)
  -o, --output FILE     the stats file (written under a temporary name and renamed)
  --max-tokens N        tokens per forward (default 512, or the model's context when shorter)
  --long cut|window     a longer document: keep its first N tokens (cut, default) or run it in windows of N
  --keep-rows N         keep N attention rows sampled uniformly over the corpus (default 0)
  --seed S              the row sample's seed (default 1)
  --bins N              histogram bins per metric (default 64)
  --topk-mass K         k of the topk_mass metric (default 5)
  --limit N             only the first N documents
  --on-error fail|skip  a malformed JSONL line: stop with its line number (default) or report it and skip it
  --checkpoint-every S  checkpoint every S seconds (default 60; 0: after every document)
  --resume              continue a killed batch from its checkpoint (STATS.h5.ckpt and STATS.h5.rows)
  --quiet               no progress line

MPI: built with FOCAL_MPI, `mpirun -np N focal batch ...` (or srun) shares documents among N ranks through a
dynamic queue on rank 0; each rank writes a shard in STATS.h5.d/, rank 0 merges the statistics with MPI reductions
and writes STATS.h5, whose /docs datasets are virtual datasets over the shards (keep STATS.h5.d beside it).
Threads per rank: OMP_NUM_THREADS.
)";

std::vector<batch::BatchRun> parse_runs(const std::string& list, const ModelConfig& cfg) {
  std::vector<batch::BatchRun> runs;
  std::set<std::string> names;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw UsageError{"--runs: empty item in '" + list + "' (use e.g. standard,focal:0.4)"};
    batch::BatchRun r;
    r.spec = compare_spec(item, "--runs", cfg);
    // a run with overrides is named by its whole spec, so two of them stay apart; a temperature file by its item
    // (calibrated:FILE), not by the hundreds of overrides it stands for
    if (!r.spec.temp_file.empty())
      r.name = item;
    else
      r.name = r.spec.layer_temp.empty() && r.spec.head_temp.empty() ? r.spec.label() : r.spec.text();
    if (!names.insert(r.name).second) throw UsageError{"--runs: '" + item + "' is given twice"};
    runs.push_back(std::move(r));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return runs;
}

// An error on one rank of an MPI job ends the job. Every rank parses the same options and opens the same files, so
// most errors happen on all of them at once: rank 0 reports and ends the job at once; another rank waits a moment
// first and reports only what rank 0 did not end the job for (a file its node lacks, a document it held), so that
// 64 ranks print one message, not 64 copies of it.
[[noreturn]] void report_and_abort(batch::Comm& comm, const std::string& message, int code) {
  if (comm.rank() != 0) ::sleep(3);
  std::fprintf(stderr, "focal batch [rank %d]: error: %s\n", comm.rank(), message.c_str());
  std::fflush(stderr);
  batch::abort_job(comm, code);
  std::exit(code);
}

}  // namespace

int cmd_batch(int argc, char** argv) {
  const std::set<std::string> flags = {"--help", "--resume", "--quiet", kLoadFlag, kMmapFlag};
  const std::set<std::string> opts = {"--data",
                                      "--runs",
                                      "-o",
                                      "--output",
                                      "--max-tokens",
                                      "--long",
                                      "--keep-rows",
                                      "--seed",
                                      "--bins",
                                      "--topk-mass",
                                      "--limit",
                                      "--on-error",
                                      "--checkpoint-every",
                                      kDeviceOption,
                                      kWeightsOption,
                                      kPrecisionOption};
  // The job first (MPI_Init under mpirun / srun), so that an error in the options is reported once, not by each rank.
  std::unique_ptr<batch::Comm> comm = batch::make_comm(&argc, &argv);
  try {
    Args a(argc, argv, 2, flags, opts);
    if (a.has("--help")) {
      std::printf("%s%s\n", kBatchHelp, kDeviceHelp);
      return 0;
    }
    batch::BatchOptions o;
    o.data_path = a.get("--data");
    if (o.data_path.empty()) throw UsageError{"give the corpus with --data PATH"};
    o.out_path = a.has("-o") ? a.get("-o") : a.get("--output");
    if (o.out_path.empty()) throw UsageError{"give the output file with -o STATS.h5"};
    o.max_tokens = a.get_int32("--max-tokens", 512);
    const std::string lng = a.get("--long", "cut");
    if (lng != "cut" && lng != "window") throw UsageError{"--long: '" + lng + "' is not cut or window"};
    o.window = lng == "window";
    o.keep_rows = a.get_int32("--keep-rows", 0);
    o.seed = a.get_u64("--seed", 1);
    o.n_bins = a.get_int32("--bins", 64);
    o.topk_mass_k = a.get_int32("--topk-mass", 5);  // checked by run_batch
    o.limit = a.get_int("--limit", 0);
    if (a.has("--limit")) check_limit_option(a);
    const std::string oe = a.get("--on-error", "fail");
    if (oe != "fail" && oe != "skip") throw UsageError{"--on-error: '" + oe + "' is not fail or skip"};
    o.on_error = oe == "skip" ? batch::OnError::kSkip : batch::OnError::kFail;
    o.checkpoint_s = a.get_double("--checkpoint-every", 60);  // checked by run_batch
    o.resume = a.has("--resume");
    check_output(o.out_path);  // a bad -o fails now, not after the model is loaded and the corpus scanned
    check_outputs_apart(a, {"--output", "-o"}, {model_arg(a, argv[1])});
    auto model = load_model(a, model_arg(a, argv[1]));
    // The default is 512 tokens, or the model's context when that is shorter (a small model's batch failed with
    // the default); a --max-tokens given past the context is still refused.
    if (!a.has("--max-tokens")) o.max_tokens = std::min(o.max_tokens, model->config().max_positions);
    o.runs = parse_runs(a.get("--runs", "standard,focal:0.4"), model->config());
    const bool quiet = a.has("--quiet");
    if (comm->rank() == 0 && !quiet)
      std::fprintf(stderr, "focal batch: %s, %d rank%s; runs", comm->kind(), comm->size(), comm->size() > 1 ? "s" : "");
    for (const auto& r : o.runs)
      if (comm->rank() == 0 && !quiet) std::fprintf(stderr, " %s", r.name.c_str());
    if (comm->rank() == 0 && !quiet) std::fprintf(stderr, "\n");
    // A terminal gets one line redrawn with \r; a log gets a whole line about every 5 s and the last one.
    const bool tty = ::isatty(::fileno(stderr)) == 1;
    double last_line_s = -1e9;
    batch::run_batch(*model, o, *comm, [&](const batch::BatchProgress& p) {
      if (quiet) return;
      const bool last = p.final;  // under MPI every document is handed out before the work ends
      if (!tty && !last && p.elapsed_s - last_line_s < 5.0) return;
      if (!last && p.docs >= p.total_docs) return;  // the final line follows (a log showed "documents 20/20" twice)
      last_line_s = p.elapsed_s;
      // The rate counts this process's documents only: after --resume the earlier ones took no time here.
      const int64_t here = p.docs - p.docs_at_start;
      const double rate = p.elapsed_s > 0 ? here / p.elapsed_s : 0;
      char eta[48];
      if (here > 0 && rate > 0)
        std::snprintf(eta, sizeof eta, "ETA %.0fs", (p.total_docs - p.docs) / rate);
      else
        std::snprintf(eta, sizeof eta, "ETA after the first document");
      std::fprintf(stderr, "%sdocuments %lld/%lld  tokens %llu (rank 0)  %.0f tok/s  %.0fs elapsed, %s%s",
                   tty ? "\r" : "", (long long)p.docs, (long long)p.total_docs, (unsigned long long)p.tokens,
                   p.elapsed_s > 0 ? p.tokens / p.elapsed_s : 0.0, p.elapsed_s, eta, tty && !last ? "   " : "\n");
      std::fflush(stderr);
    });
    if (comm->rank() == 0) std::printf("wrote %s\n", o.out_path.c_str());
    return 0;
  } catch (const UsageError& e) {
    if (comm->size() > 1) report_and_abort(*comm, e.msg + " (see focal batch --help)", 2);
    throw;
  } catch (const Error& e) {
    if (comm->size() > 1) report_and_abort(*comm, with_flag(e), 1);
    throw;
  }
}

int inspect_stats(const std::string& path) {
  const batch::StatsFile f = batch::read_stats(path, false);  // the statistics only: no shard files needed
  const batch::StatsShape& s = f.stats.shape;
  const Provenance& p = f.provenance;
  std::printf("batch statistics %s: %llu documents (%llu skipped), %llu tokens, %d layers x %d heads\n", path.c_str(),
              (unsigned long long)f.stats.n_docs, (unsigned long long)f.stats.n_skipped,
              (unsigned long long)f.stats.n_tokens, s.n_layers, s.n_heads);
  std::printf("model %s, tool %s, created %s, %d rank%s\n", p.model_path.c_str(), p.tool_version.c_str(),
              p.created_utc.c_str(), f.n_ranks, f.n_ranks == 1 ? "" : "s");
  print_computed(p);
  std::printf("corpus %s, --max-tokens %d, --long %s\n", f.data_path.c_str(), s.max_tokens,
              f.window ? "window" : "cut");
  // Each run's setting as capture inspect shows it: a temperature file's t summarised, not every head's (270 for
  // SmolLM2 on one line).
  std::printf("runs:");
  for (int r = 0; r < s.n_runs; ++r)
    std::printf("%s %s %s", r ? "," : "", f.run_names[(size_t)r].c_str(),
                TempSpec::brief_json(f.run_specs_json[(size_t)r]).c_str());
  std::printf("\n");

  // Corpus means: every layer, head and row >= 1 pooled (each cell weighted by its rows), as the figure's boxes.
  auto pooled = [&](int run, int metric, double* rows) {
    double sum = 0, n = 0;
    for (int l = 0; l < s.n_layers; ++l)
      for (int h = 0; h < s.n_heads; ++h) {
        const batch::Moments& m = f.stats.moments[f.stats.cell(run, l, h, metric)];
        sum += m.mean * m.n;
        n += m.n;
      }
    if (rows) *rows = n;
    return n > 0 ? sum / n : NAN;
  };
  bool rel = false;  // relevant mass only when documents named relevant positions
  for (int r = 0; r < s.n_runs; ++r) {
    double n = 0;
    pooled(r, kRelevantMass, &n);
    rel |= n > 0;
  }
  std::vector<int> cols = {kEntropyNats, kEntropyNorm, kEffSupport, kMaxProb, kTopkMass, kSinkMass, kTailMass};
  if (rel) cols.push_back(kRelevantMass);
  const char* heads[] = {"entropy", "H/lnN", "eff_supp", "max_p", "topk", "sink", "tail", "relevant"};
  size_t name_w = 3;  // run names, and "B - A" for each run's difference from the first
  for (int r = 0; r < s.n_runs; ++r)
    name_w = std::max(name_w, f.run_names[(size_t)r].size() + (r ? 3 + f.run_names[0].size() : 0));
  std::printf("\ncorpus means over every layer, head and row >= 1:\n  %-*s %12s", (int)name_w, "run", "rows");
  for (size_t k = 0; k < cols.size(); ++k) std::printf(" %9s", heads[k]);
  std::printf("\n");
  std::vector<std::vector<double>> means((size_t)s.n_runs);
  for (int r = 0; r < s.n_runs; ++r) {
    double rows = 0;
    pooled(r, kEntropyNats, &rows);
    std::printf("  %-*s %12.0f", (int)name_w, f.run_names[(size_t)r].c_str(), rows);
    for (int m : cols) {
      means[(size_t)r].push_back(pooled(r, m, nullptr));
      std::printf(" %9.4f", means[(size_t)r].back());
    }
    std::printf("\n");
  }
  for (int r = 1; r < s.n_runs; ++r) {
    const std::string label = f.run_names[(size_t)r] + " - " + f.run_names[0];
    std::printf("  %-*s %12s", (int)name_w, label.c_str(), "");
    for (size_t k = 0; k < cols.size(); ++k) std::printf(" %+9.4f", means[(size_t)r][k] - means[0][k]);
    std::printf("\n");
  }
  return 0;
}

}  // namespace focal::cli
