// Internals of focal_batch shared by the driver, the HDF5 writer and the MPI layer: the per-document record of the
// append-only row file, and the writers of stats.h5 and rank shards.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "focal_batch/stats_file.h"

namespace focal {
class Model;
}

namespace focal::batch {

struct BatchOptions;

// The checkpoint's options key (resume_key.cpp): the model's weights, --data (absolute) and a stamp of its files,
// and every option that shapes the statistics; and the options two keys differ in, named as the CLI spells them.
std::string absolute_data_path(const std::string& p);  // as given when it does not exist
std::string options_key(const Model& model, const BatchOptions& o);
std::string key_difference(const std::string& was, const std::string& now);

// One single-process batch writes an -o at a time (output_lock.cpp): an exclusive lock (flock) on OUT.rows, held
// until the run ends, so that a second batch over the same -o — a --resume of a batch still running — is refused
// rather than mixing two runs' rows into one file. Taking it removes the temporaries a killed run left beside OUT and
// its checkpoint. A run that ends without done() removes the row file when it is still empty and no checkpoint is
// there (a corpus refused before its first document left an empty OUT.rows).
class OutputLock {
 public:
  explicit OutputLock(const std::string& out_path);  // throws Error naming -o when another batch holds it
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;
  void done() { done_ = true; }
  bool rows_existed() const { return rows_existed_; }  // whether OUT.rows was there before the lock made it

 private:
  int fd_ = -1;
  std::string rows_, ckpt_;
  bool done_ = false, rows_existed_ = false;
};

// One document's summary as it sits in the row file: a fixed-size header followed by head_means [R, L, H, M].
struct DocRecord {
  int64_t index = 0;
  int32_t n_tokens = 0, n_tokens_total = 0, n_windows = 0;
  std::string id;
  std::vector<float> head_means;  // [R, L, H, M]
};
// Throws the error for a failed write of `path` with errno `err`: a full disk names the file and says that the same
// command with --resume goes on once there is space (from the last checkpoint, or from the start before one).
[[noreturn]] void write_failed(const std::string& path, int err);
size_t doc_record_bytes(const StatsShape& s);
void write_doc_record(std::FILE* f, const StatsShape& s, const DocRecord& r, const std::string& path);
// Reads records [first, first + n) of a row file.
std::vector<DocRecord> read_doc_records(std::FILE* f, const StatsShape& s, size_t first, size_t n,
                                        const std::string& path);

// What the root of stats.h5 and of every shard records.
struct StatsHeader {
  Provenance provenance;
  std::string data_path;
  bool window = false;
  int n_ranks = 1;
  std::vector<std::string> run_names, run_specs_json;
};

// A shard's per-document datasets, for the virtual datasets of the merged file.
struct ShardInfo {
  std::string file;              // relative to the directory of the stats file
  std::vector<int64_t> indices;  // document index of each shard row, in row order
};

// Writes the whole stats file atomically. docs: either a row file (single process: real datasets) or shards (MPI:
// virtual datasets over them, mapped by document index).
void write_stats_file(const std::string& path, const StatsHeader& h, const CorpusStats& st,
                      const std::vector<KeptRow>& kept, const std::string& row_file,
                      const std::vector<ShardInfo>* shards);
// Writes one rank's shard: the per-document datasets of its row file. Returns the document indices in row order.
std::vector<int64_t> write_shard(const std::string& path, const StatsHeader& h, const StatsShape& s,
                                 const std::string& row_file);

}  // namespace focal::batch
