// `focal batch`: attention statistics over a corpus, standard against focal (or any temperature settings), in one
// process or across MPI ranks. Each document is tokenized, cut or windowed to max_tokens and run once per setting;
// the forward's per-row metrics of every layer and head stream into CorpusStats (stats.h), a summary row per
// document goes to an append-only row file, and the result is one stats.h5 (docs/batch.md, stats_file.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "focal/model.h"
#include "focal/temp_spec.h"
#include "focal_batch/corpus.h"

namespace focal::batch {

struct BatchRun {
  std::string name;  // e.g. "standard", "focal_t0.4"
  TempSpec spec;
};

struct BatchOptions {
  std::string data_path;              // --data
  std::string out_path;               // -o stats.h5
  std::vector<BatchRun> runs;         // --runs
  int max_tokens = 512;               // --max-tokens: tokens per forward (cut, or window length)
  bool window = false;                // --long window: a longer document is split into windows; cut: first window only
  int keep_rows = 0;                  // --keep-rows N: attention rows sampled uniformly over the corpus
  uint64_t seed = 1;                  // --seed: the row sample
  OnError on_error = OnError::kFail;  // --on-error
  int n_bins = 64;                    // --bins
  int topk_mass_k = 5;                // --topk-mass
  int64_t limit = 0;                  // --limit: at most this many documents (0: all)
  double checkpoint_s = 60;           // --checkpoint-every SECONDS (0: after every document)
  bool resume = false;                // --resume
};

struct BatchProgress {
  int64_t docs = 0;           // documents finished (MPI: handed out by the queue)
  int64_t total_docs = 0;     // documents in the corpus (after --limit)
  int64_t docs_at_start = 0;  // finished before this process started (--resume): not part of its rate
  bool final = false;         // the last report: every document is done
  uint64_t tokens = 0;        // corpus tokens this rank finished: each document's once, however many settings
  double elapsed_s = 0;
};

// The process group a batch runs in. Single-process runs use make_comm's default; an MPI build started by mpirun
// or srun gets the MPI one (dynamic work queue on rank 0, reductions, shard files). Public so the CLI can pick; the
// MPI header stays private.
class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* kind() const = 0;  // "single process" or "MPI"
};

// MPI when the library was built with it (FOCAL_MPI) and the process was started by an MPI launcher; otherwise a
// single process. Calls MPI_Init in the first case (MPI_Finalize when the Comm is destroyed).
std::unique_ptr<Comm> make_comm(int* argc, char*** argv);
bool built_with_mpi();

// Ends the whole job after an error on one rank (MPI_Abort) so the others do not wait forever; no-op otherwise.
void abort_job(Comm& comm, int code);

// Runs the batch and writes opt.out_path (temporary name + rename; the previous file stays intact until then).
// Throws Error naming the option or file at fault. progress is called on rank 0 about once a second.
void run_batch(const Model& model, const BatchOptions& opt, Comm& comm,
               const std::function<void(const BatchProgress&)>& progress);

// Counts the documents of a corpus (the ETA's denominator), at most `limit` when limit > 0; honours on_error like the
// batch, logging each skipped line once, and stores the number of skipped lines read in *skipped when given.
int64_t count_documents(const std::string& path, OnError on_error, int64_t limit = 0, uint64_t* skipped = nullptr);

}  // namespace focal::batch
