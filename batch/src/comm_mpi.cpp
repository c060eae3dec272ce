// The MPI Comm (built with FOCAL_MPI): rank 0 hands out document indices on request (a dynamic queue, so one long
// document does not hold up the rest) while it computes too, answering between layers; statistics are merged with
// MPI reductions, Chan's formula being a user-defined operation.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <memory>

#include "comm.h"
#include "focal/error.h"

namespace focal::batch {

namespace {

constexpr int kTagRequest = 11, kTagIndex = 12, kTagDone = 13;

void chan_op(void* in, void* inout, int* len, MPI_Datatype*) {
  const Moments* a = static_cast<const Moments*>(in);
  Moments* b = static_cast<Moments*>(inout);
  for (int i = 0; i < *len; ++i) {
    Moments m = a[i];  // in ⊕ inout, in rank order as MPI asks of a non-commutative op
    m.merge(b[i]);
    b[i] = m;
  }
}

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(std::string("MPI: ") + what + " failed");
}

class MpiComm : public CommImpl {
 public:
  MpiComm(int* argc, char*** argv) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Type_contiguous(3, MPI_DOUBLE, &moments_type_);
    MPI_Type_commit(&moments_type_);
    MPI_Op_create(&chan_op, 0, &chan_);
  }
  ~MpiComm() override {
    MPI_Op_free(&chan_);
    MPI_Type_free(&moments_type_);
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* kind() const override { return "MPI"; }
  int64_t handed_out() const override { return next_; }

  int64_t next_index() override {
    if (rank_ == 0) return next_++;
    int64_t idx = -1;
    char c = 0;
    check(MPI_Send(&c, 1, MPI_CHAR, 0, kTagRequest, MPI_COMM_WORLD), "send");
    check(MPI_Recv(&idx, 1, MPI_INT64_T, 0, kTagIndex, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "recv");
    return idx;
  }
  void serve() override {
    if (rank_ != 0 || size_ == 1) return;
    for (;;) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
      if (!flag) return;
      answer(st);
    }
  }
  void finish_queue() override {
    if (rank_ != 0) {
      char c = 0;
      check(MPI_Send(&c, 1, MPI_CHAR, 0, kTagDone, MPI_COMM_WORLD), "send");
      return;
    }
    while (done_ < size_ - 1) {
      MPI_Status st;
      check(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st), "probe");
      answer(st);
    }
  }
  void reduce_stats(CorpusStats& s) override {
    auto reduce = [&](void* buf, size_t n, MPI_Datatype t, MPI_Op op) {
      if (rank_ == 0)
        check(MPI_Reduce(MPI_IN_PLACE, buf, (int)n, t, op, 0, MPI_COMM_WORLD), "reduce");
      else
        check(MPI_Reduce(buf, nullptr, (int)n, t, op, 0, MPI_COMM_WORLD), "reduce");
    };
    reduce(s.moments.data(), s.moments.size(), moments_type_, chan_);
    reduce(s.min.data(), s.min.size(), MPI_DOUBLE, MPI_MIN);
    reduce(s.max.data(), s.max.size(), MPI_DOUBLE, MPI_MAX);
    reduce(s.hist.data(), s.hist.size(), MPI_UINT64_T, MPI_SUM);
    reduce(s.pos_sum.data(), s.pos_sum.size(), MPI_DOUBLE, MPI_SUM);
    reduce(s.pos_count.data(), s.pos_count.size(), MPI_UINT64_T, MPI_SUM);
    uint64_t totals[2] = {s.n_docs, s.n_tokens};
    reduce(totals, 2, MPI_UINT64_T, MPI_SUM);
    s.n_docs = totals[0];
    s.n_tokens = totals[1];
  }
  std::vector<std::string> gather_bytes(const std::string& mine) override {
    long long n = (long long)mine.size();
    std::vector<long long> sizes((size_t)size_);
    check(MPI_Gather(&n, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD), "gather");
    std::vector<int> counts((size_t)size_), displs((size_t)size_);
    std::string all;
    if (rank_ == 0) {
      long long off = 0;
      for (int r = 0; r < size_; ++r) {
        if (sizes[(size_t)r] > INT32_MAX || off > INT32_MAX) throw Error("MPI: gathered data over 2 GiB");
        counts[(size_t)r] = (int)sizes[(size_t)r];
        displs[(size_t)r] = (int)off;
        off += sizes[(size_t)r];
      }
      all.resize((size_t)off);
    }
    check(MPI_Gatherv(mine.data(), (int)mine.size(), MPI_CHAR, &all[0], counts.data(), displs.data(), MPI_CHAR, 0,
                      MPI_COMM_WORLD),
          "gatherv");
    std::vector<std::string> out;
    if (rank_ == 0)
      for (int r = 0; r < size_; ++r) out.push_back(all.substr((size_t)displs[(size_t)r], (size_t)counts[(size_t)r]));
    return out;
  }
  std::string bcast_string(const std::string& s) override {
    long long n = (long long)s.size();
    check(MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD), "bcast");
    std::string out = s;
    out.resize((size_t)n);
    check(MPI_Bcast(&out[0], (int)n, MPI_CHAR, 0, MPI_COMM_WORLD), "bcast");
    return out;
  }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

 private:
  void answer(const MPI_Status& st) {
    char c = 0;
    check(MPI_Recv(&c, 1, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "recv");
    if (st.MPI_TAG == kTagRequest) {
      const int64_t idx = next_++;
      check(MPI_Send(&idx, 1, MPI_INT64_T, st.MPI_SOURCE, kTagIndex, MPI_COMM_WORLD), "send");
    } else if (st.MPI_TAG == kTagDone) {
      ++done_;
    }
  }

  int rank_ = 0, size_ = 1, done_ = 0;
  int64_t next_ = 0;
  MPI_Datatype moments_type_{};
  MPI_Op chan_{};
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(int* argc, char*** argv) { return std::make_unique<MpiComm>(argc, argv); }

void mpi_abort(Comm&, int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
}

}  // namespace focal::batch
