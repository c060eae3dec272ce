// Writing a chunked, shuffle + deflate dataset of attention rows: HDF5's filter pipeline (H5Dwrite, one thread)
// against focalscope's parallel chunk writer (h5::write_chunks_deflated, OpenMP threads), the same dataset shape and
// chunking as a capture's probs ([1, H, Q, T], chunks of 64 query rows), in one run. The data are causal softmax rows
// of random logits. Prints seconds and MB/s for each, best of the repetitions.
// usage: h5_write_bench [--heads H] [--tokens T] [--reps N] [--out FILE]     (defaults 32, 1024, 3, /tmp/...)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "h5_io.h"

using namespace focal;

int main(int argc, char** argv) {
  hsize_t heads = 32, T = 1024;
  int reps = 3;
  std::string out = "/tmp/focal_h5_write_bench.h5";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: h5_write_bench [--heads H] [--tokens T] [--reps N] [--out FILE]\n"
          "Writes H heads x T x T attention probabilities (float32) chunked and compressed as a capture "
          "does, through HDF5's filter pipeline and through focalscope's parallel chunk writer; prints "
          "the best time of N repetitions of each (defaults 32, 1024, 3, %s).\n",
          out.c_str());
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "h5_write_bench: %s needs a value (see --help)\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (a == "--heads")
      heads = hsize_t(std::atol(v));
    else if (a == "--tokens")
      T = hsize_t(std::atol(v));
    else if (a == "--reps")
      reps = std::atoi(v);
    else if (a == "--out")
      out = v;
    else {
      std::fprintf(stderr, "h5_write_bench: unknown option %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (heads < 1 || T < 1 || reps < 1) {
    std::fprintf(stderr, "h5_write_bench: --heads, --tokens and --reps must be positive\n");
    return 2;
  }
  const h5::Dims dims = {1, heads, T, T}, chunk = {1, 1, std::min<hsize_t>(64, T), T};
  std::vector<float> probs(size_t(heads * T * T));  // [heads, T queries, T keys]
  std::mt19937 rng(1);
  std::normal_distribution<float> logit(0.0f, 2.0f);
  for (size_t r = 0; r < size_t(heads * T); ++r) {
    const size_t q = r % size_t(T);
    float* row = &probs[r * size_t(T)];
    float sum = 0.0f;
    for (size_t t = 0; t < size_t(T); ++t) sum += row[t] = t <= q ? std::exp(logit(rng)) : 0.0f;
    for (size_t t = 0; t < size_t(T); ++t) row[t] /= sum;
  }
  const double mb = double(probs.size()) * 4 / 1e6;
  double best_lib = 1e30, best_par = 1e30;
  for (int r = 0; r < reps; ++r) {
    h5::H5Call call;
    h5::FileId file(H5Fcreate(out.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    if (file.get() < 0) {
      std::fprintf(stderr, "h5_write_bench: cannot create %s\n", out.c_str());
      return 1;
    }
    h5::SpaceId space(H5Screate_simple(4, dims.data(), nullptr));
    h5::PlistId dcpl(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(dcpl.get(), 4, chunk.data());
    H5Pset_shuffle(dcpl.get());
    H5Pset_deflate(dcpl.get(), 4);
    h5::DatasetId lib(H5Dcreate2(file.get(), "lib", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
    h5::DatasetId par(H5Dcreate2(file.get(), "par", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
    const auto t0 = std::chrono::steady_clock::now();
    H5Dwrite(lib.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, probs.data());
    const auto t1 = std::chrono::steady_clock::now();
    h5::write_chunks_deflated(
        par.get(), "/par", h5::Where{"h5_write_bench"}, dims, chunk, 4,
        [&](size_t first, size_t n, unsigned char* dst) { std::memcpy(dst, &probs[first], n * 4); }, 4);
    const auto t2 = std::chrono::steady_clock::now();
    best_lib = std::min(best_lib, std::chrono::duration<double>(t1 - t0).count());
    best_par = std::min(best_par, std::chrono::duration<double>(t2 - t1).count());
  }
  std::remove(out.c_str());
  std::printf("%.0f MB of float32 rows (%llu heads x %llu x %llu), best of %d:\n", mb, (unsigned long long)heads,
              (unsigned long long)T, (unsigned long long)T, reps);
  std::printf("  %-40s %7.2f s %8.1f MB/s\n", "HDF5 filter pipeline (H5Dwrite)", best_lib, mb / best_lib);
  std::printf("  %-40s %7.2f s %8.1f MB/s   %.2fx\n", "parallel chunks (write_chunks_deflated)", best_par,
              mb / best_par, best_lib / best_par);
  return 0;
}
