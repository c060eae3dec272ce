// Background jobs for the app: one worker thread runs model work so the UI thread never waits on the model.
// A job has a key ("run_a", "sweep", ...); submitting a job under a key cancels the running job of that key and
// replaces a queued one, so stale work is dropped. Results come back as closures the UI thread applies in poll().
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace focalscope {

// What a running job sees: its cancel flag and a progress setter (fraction in [0, 1]).
class JobContext {
 public:
  bool cancelled() const { return cancel_.load(std::memory_order_relaxed); }
  void set_progress(float fraction) { progress_.store(fraction, std::memory_order_relaxed); }

 private:
  friend class JobQueue;
  std::atomic<bool> cancel_{false};
  std::atomic<float> progress_{0.0f};
};

// Runs on the worker; returns the closure to apply on the UI thread (may be empty). Exceptions thrown by a job are
// caught and passed to the queue's error handler on the UI thread.
using JobFn = std::function<std::function<void()>(JobContext&)>;

struct JobStatus {
  std::string key, label;
  float progress = 0.0f;
  bool running = false;  // false: queued
};

// OpenMP threads of the job worker: all cores but one (left to the UI thread and the GL driver). OpenBLAS's sgemm
// does not give the same bits at every thread count, so a run is reproduced exactly only at this count.
int job_worker_threads();

class JobQueue {
 public:
  JobQueue();
  ~JobQueue();  // cancels everything and joins the worker

  // Queues fn under key; cancels the running job with the same key and drops a queued one. Returns a job id.
  uint64_t submit(const std::string& key, const std::string& label, JobFn fn);
  void cancel(const std::string& key);
  // Applies finished jobs' closures on the calling (UI) thread; returns how many were applied. on_error receives
  // the message of a job that threw.
  int poll(const std::function<void(const std::string&)>& on_error);
  std::vector<JobStatus> status() const;
  bool idle() const;  // nothing queued, running, or waiting to be applied
  uint64_t completed() const { return completed_.load(); }
  uint64_t cancelled_count() const { return cancelled_.load(); }

 private:
  struct Job {
    uint64_t id;
    std::string key, label;
    JobFn fn;
    std::shared_ptr<JobContext> ctx;
  };
  void worker();
  void cancel_locked(const std::string& key);  // mu_ held: drop queued jobs of key, flag the running one

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::shared_ptr<JobContext> running_ctx_;
  std::string running_key_, running_label_;
  std::vector<std::function<void()>> done_;
  std::vector<std::string> errors_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  std::atomic<uint64_t> completed_{0}, cancelled_{0};
  std::thread thread_;
};

}  // namespace focalscope
