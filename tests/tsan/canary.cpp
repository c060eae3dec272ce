// ThreadSanitizer canary for the TSan tier (scripts/tsan.sh): proves the tier's setup (clang, libomp, archer)
// reports a real race on OpenMP threads and on a std::thread worker, and stays quiet on correctly synchronised
// code, so a green tier means "no race found" rather than "TSan saw nothing". Usage: canary race|clean
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

int main(int argc, char** argv) {
  const bool race = argc > 1 && std::strcmp(argv[1], "race") == 0;
  long sum = 0;  // [1] shared accumulator
  if (race) {
#pragma omp parallel for
    for (int i = 0; i < 10000; ++i) sum += i;  // unsynchronised: a data race between the OpenMP threads
    long worker_value = 0;
    std::thread t([&] { worker_value = 1; });
    worker_value = 2;  // races with the worker's write
    t.join();
    sum += worker_value;
  } else {
#pragma omp parallel for reduction(+ : sum)
    for (int i = 0; i < 10000; ++i) sum += i;
    std::mutex mu;
    long worker_value = 0;
    std::thread t([&] {
      std::lock_guard<std::mutex> lock(mu);
      worker_value = 1;
    });
    {
      std::lock_guard<std::mutex> lock(mu);
      worker_value += 2;
    }
    t.join();
    sum += worker_value;
  }
  std::printf("%ld\n", sum);
  return 0;
}
