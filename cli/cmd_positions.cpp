// `focal eval MODEL --positions`: next-token loss by position over long documents under several settings
// (focal_batch/position_loss.h), into one HDF5 file that `focal figure positions` draws.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "args.h"
#include "device_option.h"
#include "output_option.h"
#include "focal/byte_size.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal/progress.h"
#include "focal_batch/position_loss.h"

namespace focal::cli {

namespace {

const char* kPositionsHelp = R"(usage: focal eval MODEL --positions --data PATH --max-tokens N -o LOSS.h5 [options]

Next-token loss by position: each document's first N tokens run once per setting in one forward; the NLL of every
predicted token (position p: -log softmax(logits of row p-1)[token p], nats) goes into buckets of positions. The
file keeps per document and bucket the token count and the summed NLL of each setting, and per setting and bucket
the mean over documents (token-weighted) with a bootstrap band over documents. `focal figure positions LOSS.h5`
draws it with the model's trained context (max_position_embeddings) marked. Rotary models run past the trained
context with a warning; GPT-2 (learned positions) refuses.

  --data PATH          a .jsonl file ({"text": ...}), a text file (blank-line-separated documents) or a directory
                       of .txt files (focal batch's corpus readers)
  --max-tokens N       a document's first N tokens (shorter documents run whole)
  --runs LIST          settings, comma-separated, each SPEC[@ROPE]: SPEC in the grammar of `focal capture --help`
                       (standard, native, focal:T, ssmax[:S], learned[:X], overrides), ROPE a rope_scaling
                       override TYPE:FACTOR (linear, dynamic, yarn) or default, e.g.
                       standard,focal:0.4,ssmax,native,standard@dynamic:2 (default standard,focal:0.4)
  -o, --output FILE    the file (written under a temporary name and renamed)
  --bucket N           positions per bucket (default N / 32)
  --limit D            only the first D documents
  --on-error fail|skip a malformed JSONL line or a document that is not UTF-8: stop (default) or skip it with a
                       warning
  --bootstrap K        resamples of the documents for the bands (default 1000; 0: none)
  --level L            the band's coverage (default 0.95)
  --budget SIZE        memory one forward may take (default: the machine's memory); a larger --max-tokens is
                       refused with the estimate before anything runs
  --quiet              no progress line
)";

}  // namespace

int cmd_eval_positions(int argc, char** argv) {
  Args a(argc, argv, 2, {"--help", "--positions", "--quiet", kLoadFlag, kMmapFlag},
         {"--data", "--max-tokens", "--runs", "-o", "--output", "--bucket", "--limit", "--on-error", "--bootstrap",
          "--level", "--budget", kDeviceOption, kWeightsOption, kPrecisionOption});
  if (a.has("--help")) {
    std::printf("%s%s", kPositionsHelp, kDeviceHelp);
    return 0;
  }
  if (!a.has("--data")) throw UsageError{"give the corpus with --data PATH"};
  if (!a.has("--max-tokens")) throw UsageError{"give the document length with --max-tokens N"};
  const std::string out = a.has("-o") ? a.get("-o") : a.get("--output", "");
  if (out.empty()) throw UsageError{"give the output file with -o LOSS.h5"};
  batch::PositionLossOptions o;
  o.max_tokens = a.get_int32("--max-tokens", 0);
  if (o.max_tokens < 2)
    throw Error("--max-tokens " + a.get("--max-tokens") + ": give at least 2 (a token and its successor)");
  o.bucket_tokens = a.get_int32("--bucket", 0);
  if (a.has("--bucket") && o.bucket_tokens < 1)
    throw Error("--bucket " + a.get("--bucket") +
                ": give at least 1 position per bucket (or leave --bucket out: N / 32)");
  o.limit_docs = a.get_int("--limit", 0);
  if (a.has("--limit")) check_limit_option(a);
  const std::string oe = a.get("--on-error", "fail");
  if (oe != "fail" && oe != "skip") throw UsageError{"--on-error: '" + oe + "' is not fail or skip"};
  o.on_error = oe == "skip" ? batch::OnError::kSkip : batch::OnError::kFail;
  o.bootstrap = a.get_int32("--bootstrap", 1000);
  if (o.bootstrap < 0) throw Error("--bootstrap " + a.get("--bootstrap") + ": give 0 or more resamples (0: no band)");
  o.band_level = a.get_double("--level", 0.95);
  if (!(o.band_level > 0.0 && o.band_level < 1.0))  // a value out of range exits 1, as --bucket 0 (it exited 2)
    throw Error("--level " + a.get("--level") + ": the band's coverage must lie between 0 and 1 (e.g. 0.95)");
  size_t budget = 0;
  if (a.has("--budget")) {
    budget = parse_bytes(a.get("--budget"), "--budget");
  } else {
    budget = focal::machine_memory_bytes();
  }
  check_output(out);  // a bad -o fails now, not after the documents ran
  const std::string dir = model_arg(a, "eval");
  check_outputs_apart(a, {"--output"}, {dir});
  auto load = [&](const std::string& rope) { return load_model(a, dir, rope); };
  ProgressReporter prog("eval --positions: document-run");
  const bool quiet = a.has("--quiet");
  batch::PositionLossFile f = batch::run_position_loss(
      load, a.get("--data"), a.get("--runs", "standard,focal:0.4"), o, budget,
      [&](int64_t done, int64_t total) {
        if (!quiet) prog.update((int)done, (int)total);
      },
      nullptr);
  if (!f.warnings.empty()) std::fprintf(stderr, "warning: %s\n", f.warnings.c_str());
  batch::write_position_loss(f, out);
  const size_t B = f.n_buckets();
  std::printf("%zu documents, %zu settings, %zu buckets of %d positions (trained context %d)\n", f.n_docs(), f.n_runs(),
              B, f.bucket_tokens, f.trained_context);
  // The last bucket any document reaches (the same for every setting: they run the same tokens), and the positions
  // the two columns cover.
  // The first and last buckets any document reaches (the same for every setting: they run the same tokens); with
  // --bucket 1 the first bucket, position 0, holds no prediction (it printed "positions 1..0", nan).
  size_t first = B, last = 0;
  for (size_t d = 0; d < f.n_docs(); ++d)
    for (size_t b = 0; b < B; ++b)
      if (f.doc_count[d * B + b] > 0) first = std::min(first, b), last = std::max(last, b);
  if (first == B) first = 0;
  auto bucket_end = [&](size_t b) { return std::min<int>(f.bucket_start[b] + f.bucket_tokens, f.max_tokens) - 1; };
  std::printf("mean NLL (nats) in the first bucket with tokens (positions %d..%d) and the last one (%d..%d)\n",
              std::max(1, f.bucket_start[first]), bucket_end(first), std::max(1, f.bucket_start[last]),
              bucket_end(last));
  std::printf("%-28s %12s %12s\n", "setting", "first bucket", "last bucket");
  for (size_t r = 0; r < f.n_runs(); ++r)
    std::printf("%-28s %12.4f %12.4f\n", f.run_names[r].c_str(), f.mean_nll[r * B + first], f.mean_nll[r * B + last]);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace focal::cli
