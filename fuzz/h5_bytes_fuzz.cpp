// Byte-level fuzzer of the project's HDF5 files (issue 36): damages real captures, sweeps, batch statistics files,
// training logs and evaluations byte by byte (overwrites, bit flips in the first 64 KiB, an 8-byte field set to a
// huge value, a truncation) and opens each through the same protected path the CLI, the app and Python use. Unlike
// fuzz/capture_fuzz.cpp, which mutates through the HDF5 API, this reaches libhdf5's own parsing of the container
// (object headers, B-trees, the global heap).
//
// Each input is opened in a fresh process, as the CLI opens one file, and must either open or be refused with a
// focal::Error. That process dying (a crash that escaped the child-process check of runtime/src/h5_guard.cpp, or a
// hang past --hang-s), or any other exception (an internal error), is a finding: the input that caused it is left in
// WORK as mutant-N.KIND.h5 and the fuzzer exits non-zero (scripts/fuzz.sh copies leftovers to
// fuzz/regressions/h5_bytes/). --one-process opens every input in the fuzzer's own process instead, like an app
// or a Python kernel that opens damaged file after damaged file (state libhdf5 keeps between files is then tested too).
//
//   usage: h5_bytes_fuzz [--seconds S] [--runs N] [--seed X] [--work DIR] [--keep-damaged DIR] SEED...
//          h5_bytes_fuzz --time-check FILE...   (the wall time of the damaged-file check alone, for bench/run_h5_check.sh)
//          h5_bytes_fuzz --replay [--expect-damaged] FILE_OR_DIR...   (opens each file once; exit 1 on a finding,
//          and with --expect-damaged on a file that is not refused as damaged)
// --seconds and --runs bound a run together, whichever ends it first (60 s when neither is given).
// A seed's kind comes from its file name: capture*, sweep*, stats*, trainlog*, eval*, or *.KIND.h5. --keep-damaged copies every
// input that crashed or hung libhdf5 in the child (the files the check exists for) into DIR.
#include <dirent.h>
#include <sys/wait.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/error.h"
#include "focal/eval.h"
#include "focal/trainer.h"
#include "focal_batch/stats_file.h"
#include "h5_guard.h"

namespace {

struct Seed {
  std::string path, kind;
  std::string bytes;
};

// capture-x.h5 (a seed) or mutant-12.capture.h5 (a finding left by a run): the kind, or "".
std::string kind_of(const std::string& path) {
  const std::string base = path.substr(path.find_last_of('/') + 1);
  for (const char* k : {"capture", "sweep", "stats", "trainlog", "eval"}) {
    const std::string dotted = std::string(".") + k + ".h5";
    if (base.rfind(k, 0) == 0 ||
        (base.size() > dotted.size() && base.compare(base.size() - dotted.size(), dotted.size(), dotted) == 0))
      return k;
  }
  return "";
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  return bool(f);
}

// Opens `path` as a file of `kind` the way the front ends do. Returns "" when it opened or was refused with an
// Error (`refusal` gets the message), else what went wrong.
std::string open_as(const std::string& path, const std::string& kind, std::string& refusal) {
  try {
    if (kind == "capture")
      (void)focal::read_capture(path);
    else if (kind == "sweep")
      (void)focal::read_sweep(path);
    else if (kind == "stats")
      (void)focal::batch::read_stats(path);
    else if (kind == "trainlog")
      (void)focal::read_train_log(path);
    else if (kind == "eval")
      (void)focal::read_eval(path);
    return "";
  } catch (const focal::Error& e) {
    refusal = e.what();
    return "";
  } catch (const std::exception& e) {
    return std::string("internal error (") + typeid(e).name() + "): " + e.what();
  } catch (...) { return "internal error: an exception that is not a std::exception"; }
}

// Opens `path` as open_as does, in a fresh process (fork) that is killed after hang_s seconds: one damaged file per
// process, as the CLI meets it. Returns "" or what went wrong ("the protected open died: signal 11", an internal
// error); `refusal` as open_as.
std::string open_isolated(const std::string& path, const std::string& kind, unsigned hang_s, std::string& refusal) {
  int fds[2];
  if (::pipe(fds) != 0) return "cannot make a pipe";
  const pid_t pid = ::fork();
  if (pid < 0) return "cannot fork";
  if (pid == 0) {
    ::close(fds[0]);
    alarm(hang_s);
    std::string text;
    const std::string bad = open_as(path, kind, text);
    const std::string msg = (bad.empty() ? (text.empty() ? "o" : "r" + text) : "i" + bad);
    (void)!::write(fds[1], msg.data(), msg.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[4096];
  ssize_t got;
  while ((got = ::read(fds[0], buf, sizeof buf)) != 0) {
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    msg.append(buf, size_t(got));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFSIGNALED(status))
    return "the protected open died: signal " + std::to_string(WTERMSIG(status)) +
           (WTERMSIG(status) == SIGALRM ? " (it hung)" : "");
  if (msg.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return "the protected open ended without a result";
  if (msg[0] == 'i') return msg.substr(1);
  if (msg[0] == 'r') refusal = msg.substr(1);
  return "";
}

void mutate(std::string& b, std::mt19937_64& rng) {
  if (b.empty()) return;
  const int n_mut = 1 + int(rng() % 3);
  for (int m = 0; m < n_mut; ++m) {
    const size_t head = std::min<size_t>(b.size(), 64 * 1024);
    switch (rng() % 5) {
      case 0: {  // overwrite a few bytes anywhere
        const size_t at = rng() % b.size(), n = 1 + rng() % 8;
        for (size_t i = at; i < std::min(b.size(), at + n); ++i) b[i] = char(rng());
        break;
      }
      case 1:  // a bit flip in the first 64 KiB (headers, heaps, B-tree nodes live there)
      case 2: b[rng() % head] ^= char(1u << (rng() % 8)); break;
      case 3: {  // an aligned 8-byte field (an address, a length) set to a huge value
        if (head < 8) break;
        size_t at = (rng() % (head - 7)) & ~size_t(7);
        const uint64_t v = (rng() % 2) ? ~uint64_t(0) : (uint64_t(1) << (32 + rng() % 31)) + rng() % 4096;
        std::memcpy(&b[at], &v, 8);
        break;
      }
      default:  // a truncated download
        if (b.size() > 64) b.resize(64 + rng() % (b.size() - 64));
        break;
    }
  }
}

// The files named, with each directory replaced by the .h5 files in it (sorted).
std::vector<std::string> expand(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const std::string& p : inputs) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      std::vector<std::string> in_dir;
      if (DIR* d = ::opendir(p.c_str())) {
        while (dirent* e = ::readdir(d))
          if (e->d_name[0] != '.' && std::string(e->d_name).size() > 3 &&
              std::string(e->d_name).compare(std::string(e->d_name).size() - 3, 3, ".h5") == 0)
            in_dir.push_back(p + "/" + e->d_name);
        ::closedir(d);
      }
      std::sort(in_dir.begin(), in_dir.end());
      out.insert(out.end(), in_dir.begin(), in_dir.end());
    } else {
      out.push_back(p);
    }
  }
  return out;
}

int usage(int rc) {
  std::fprintf(rc ? stderr : stdout,
               "usage: h5_bytes_fuzz [--seconds S] [--runs N] [--seed X] [--work DIR] [--keep-damaged DIR] "
               "[--hang-s S] [--one-process] SEED...\n"
               "       h5_bytes_fuzz --replay [--expect-damaged] FILE_OR_DIR...\n"
               "       h5_bytes_fuzz --time-check FILE...\n"
               "Damages the seeds byte by byte and opens each result through the protected HDF5 path; a crash, "
               "hang or internal error is a finding (exit 1, the input left in --work).\n");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = -1;  // unset: 60 unless --runs bounds the run
  long runs = -1, start = 0;
  uint64_t seed = 1;
  unsigned hang_s = 60;
  std::string work = ".", keep_damaged;
  bool replay = false, expect_damaged = false, time_check = false, one_process = false;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "h5_bytes_fuzz: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") return usage(0);
    if (a == "--seconds")
      seconds = std::atof(value().c_str());
    else if (a == "--runs")
      runs = std::atol(value().c_str());
    else if (a == "--seed")
      seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--work")
      work = value();
    else if (a == "--keep-damaged")
      keep_damaged = value();
    else if (a == "--hang-s")
      hang_s = unsigned(std::atoi(value().c_str()));
    else if (a == "--replay")
      replay = true;
    else if (a == "--expect-damaged")
      expect_damaged = true;
    else if (a == "--time-check")
      time_check = true;
    else if (a == "--one-process")
      one_process = true;
    else if (a == "--start")  // make (but do not open) the inputs before N: to narrow a finding down
      start = std::atol(value().c_str());
    else if (!a.empty() && a[0] == '-')
      return usage(2);
    else
      inputs.push_back(a);
  }
  if (inputs.empty()) return usage(2);
  if (seconds < 0 && runs < 0) seconds = 60;
  ::signal(SIGALRM, SIG_DFL);  // a hang past --hang-s ends this process: a finding

  if (time_check) {
    for (const std::string& p : inputs) {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        focal::h5::check_in_child(p, "'" + p + "'");
      } catch (const focal::Error& e) {
        std::printf("%s: %s\n", p.c_str(), e.what());
        return 1;
      }
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%s: the check took %.4f s\n", p.c_str(), dt);
    }
    return 0;
  }
  if (replay) {
    int failures = 0;
    const std::vector<std::string> files = expand(inputs);
    if (files.empty()) {
      std::fprintf(stderr, "h5_bytes_fuzz: no files to replay\n");
      return 2;
    }
    for (const std::string& p : files) {
      const std::string kind = kind_of(p).empty() ? "capture" : kind_of(p);
      std::string refusal;
      alarm(hang_s);
      const std::string bad = open_as(p, kind, refusal);
      alarm(0);
      std::printf("%s: %s\n", p.c_str(), !bad.empty() ? bad.c_str() : refusal.empty() ? "opened" : refusal.c_str());
      // A check past its time limit (a hang under a sanitizer, a loaded machine) says "could not be checked".
      const bool not_damaged = expect_damaged && refusal.find(" is damaged: ") == std::string::npos &&
                               refusal.find(" could not be checked: ") == std::string::npos;
      if (not_damaged) std::printf("%s: FAILED: expected a refusal as damaged\n", p.c_str());
      failures += !bad.empty() || not_damaged;
    }
    return failures ? 1 : 0;
  }

  std::vector<Seed> seeds;
  for (const std::string& p : inputs) {
    Seed s{p, kind_of(p), read_bytes(p)};
    if (s.kind.empty() || s.bytes.empty()) {
      std::fprintf(stderr,
                   "h5_bytes_fuzz: seed '%s' is empty or its name does not start with capture, sweep, "
                   "stats, trainlog or eval\n",
                   p.c_str());
      return 2;
    }
    seeds.push_back(std::move(s));
  }
  std::mt19937_64 rng(seed);
  const auto t0 = std::chrono::steady_clock::now();
  long n = 0, opened = 0, refused = 0, damaged = 0;
  // Inputs kept on disk after they were opened: in one process a heap broken by one input may only crash a few
  // inputs later, in this loop's own allocations, so on a crash the culprit is among the last 16; in a process per
  // input the one that died is the culprit.
  const long kKeep = one_process ? 16 : 1;
  std::vector<std::string> kind_at(size_t(kKeep), "");  // the kind of each of the last kKeep inputs, by n % kKeep
  for (; runs < 0 || n < runs; ++n) {
    if (seconds > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= seconds) break;
    const Seed& s = seeds[rng() % seeds.size()];
    std::string bytes = s.bytes;
    mutate(bytes, rng);
    if (n < start) continue;
    // A new name each time: the check caches its result per path and file identity.
    const std::string path = work + "/mutant-" + std::to_string(n) + "." + s.kind + ".h5";
    if (!write_bytes(path, bytes)) {
      std::fprintf(stderr, "h5_bytes_fuzz: cannot write '%s'\n", path.c_str());
      return 2;
    }
    std::string refusal;
    std::string bad;
    if (one_process) {
      alarm(hang_s);
      bad = open_as(path, s.kind, refusal);
      alarm(0);
    } else {
      bad = open_isolated(path, s.kind, hang_s, refusal);
    }
    if (!bad.empty()) {
      std::fprintf(stderr, "h5_bytes_fuzz: FINDING on %s (from %s): %s\n", path.c_str(), s.path.c_str(), bad.c_str());
      return 1;
    }
    if (refusal.empty()) {
      ++opened;
    } else if (refusal.find(" is damaged: ") != std::string::npos ||
               refusal.find(" could not be checked: ") != std::string::npos) {
      ++damaged;
      if (!keep_damaged.empty())
        (void)write_bytes(
            keep_damaged + "/" + s.kind + "-damaged-" + std::to_string(seed) + "-" + std::to_string(n) + ".h5", bytes);
    } else {
      ++refused;
    }
    if (n >= kKeep)
      ::unlink((work + "/mutant-" + std::to_string(n - kKeep) + "." + kind_at[size_t(n % kKeep)] + ".h5").c_str());
    kind_at[size_t(n % kKeep)] = s.kind;
  }
  for (long i = std::max(0L, n - kKeep); i < n; ++i)
    ::unlink((work + "/mutant-" + std::to_string(i) + "." + kind_at[size_t(i % kKeep)] + ".h5").c_str());
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "h5_bytes_fuzz: %ld inputs in %.0f s from %zu seeds: %ld opened, %ld refused with an error, %ld "
      "damaged (libhdf5 crashed or hung in the check's child), 0 findings\n",
      n, dt, seeds.size(), opened, refused, damaged);
  return 0;
}
