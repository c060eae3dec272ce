// The process group of a batch (batch.h's Comm) as the driver uses it: the dynamic work queue, reductions onto rank
// 0 and byte gathers. comm.cpp: one process; comm_mpi.cpp: MPI (built with FOCAL_MPI).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "focal_batch/batch.h"
#include "focal_batch/stats.h"

namespace focal::batch {

class CommImpl : public Comm {
 public:
  // The next document index this rank should process. Indices rise on every rank, so each rank reads the corpus
  // once, front to back.
  virtual int64_t next_index() = 0;
  // Rank 0 answers pending queue requests (called between layers and between documents); no-op elsewhere.
  virtual void serve() {}
  // This rank's reader ran out of documents: workers tell rank 0; rank 0 serves until every worker has.
  virtual void finish_queue() {}
  // Documents handed out so far (rank 0; the progress line under MPI).
  virtual int64_t handed_out() const = 0;
  // Merges every rank's statistics into rank 0's (MPI reductions; Chan's formula as a user-defined operation).
  virtual void reduce_stats(CorpusStats& /*s*/) {}
  // Rank 0 receives every rank's bytes, in rank order; other ranks get an empty vector.
  virtual std::vector<std::string> gather_bytes(const std::string& mine) { return {mine}; }
  virtual std::string bcast_string(const std::string& s) { return s; }
  virtual void barrier() {}
};

}  // namespace focal::batch
