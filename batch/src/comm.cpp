// The single-process Comm, and make_comm's choice between it and MPI.
#include <cstdlib>
#include <memory>

#include "comm.h"

namespace focal::batch {

namespace {
class SingleComm : public CommImpl {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* kind() const override { return "single process"; }
  int64_t next_index() override { return next_++; }
  int64_t handed_out() const override { return next_; }

 private:
  int64_t next_ = 0;
};
}  // namespace

#ifdef FOCAL_HAVE_MPI
std::unique_ptr<Comm> make_mpi_comm(int* argc, char*** argv);  // comm_mpi.cpp
void mpi_abort(Comm& comm, int code);
bool built_with_mpi() { return true; }
#else
bool built_with_mpi() { return false; }
#endif

std::unique_ptr<Comm> make_comm(int* argc, char*** argv) {
#ifdef FOCAL_HAVE_MPI
  // Started by mpirun (Open MPI), srun or another PMI launcher: run as one rank of the job.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v)) return make_mpi_comm(argc, argv);
#else
  (void)argc;
  (void)argv;
#endif
  return std::make_unique<SingleComm>();
}

void abort_job(Comm& comm, int code) {
#ifdef FOCAL_HAVE_MPI
  if (comm.size() > 1 || std::string(comm.kind()) == "MPI") mpi_abort(comm, code);
#else
  (void)comm;
  (void)code;
#endif
}

}  // namespace focal::batch
