#include "jobs.h"

#include <omp.h>

#include <algorithm>
#include <exception>

#include "error_controls.h"
#include "focal/error.h"

namespace focalscope {

JobQueue::JobQueue() : thread_([this] { worker(); }) {}

JobQueue::~JobQueue() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    queue_.clear();
    if (running_ctx_) running_ctx_->cancel_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t JobQueue::submit(const std::string& key, const std::string& label, JobFn fn) {
  std::lock_guard<std::mutex> lk(mu_);
  cancel_locked(key);
  const uint64_t id = next_id_++;
  queue_.push_back(Job{id, key, label, std::move(fn), std::make_shared<JobContext>()});
  cv_.notify_all();
  return id;
}

void JobQueue::cancel(const std::string& key) {
  std::lock_guard<std::mutex> lk(mu_);
  cancel_locked(key);
}

void JobQueue::cancel_locked(const std::string& key) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->key == key) {
      it = queue_.erase(it);
      ++cancelled_;
    } else {
      ++it;
    }
  }
  if (running_ctx_ && running_key_ == key) running_ctx_->cancel_ = true;
}

int job_worker_threads() { return std::max(1, omp_get_num_procs() - 1); }

void JobQueue::worker() {
  // Model work leaves one core to the UI thread (and the GL driver), so frames keep coming while a job runs.
  omp_set_num_threads(job_worker_threads());
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      running_ctx_ = job.ctx;
      running_key_ = job.key;
      running_label_ = job.label;
    }
    std::function<void()> apply;
    std::string error;
    try {
      apply = job.fn(*job.ctx);
    } catch (const focal::Error& e) {
      error = with_control(e);  // a field's error names the app's control for it
    } catch (const std::exception& e) { error = e.what(); } catch (...) {
      error = "unknown error in job '" + job.label + "'";
    }
    std::lock_guard<std::mutex> lk(mu_);
    running_ctx_.reset();
    running_key_.clear();
    running_label_.clear();
    if (job.ctx->cancelled()) {
      ++cancelled_;  // a cancelled job's result is stale: drop it
    } else if (!error.empty()) {
      errors_.push_back(error);
    } else {
      if (apply) done_.push_back(std::move(apply));
      ++completed_;
    }
  }
}

int JobQueue::poll(const std::function<void(const std::string&)>& on_error) {
  std::vector<std::function<void()>> done;
  std::vector<std::string> errors;
  {
    std::lock_guard<std::mutex> lk(mu_);
    done.swap(done_);
    errors.swap(errors_);
  }
  // A result that throws while being applied is reported like a failed job instead of ending the app.
  for (auto& f : done) {
    try {
      f();
    } catch (const std::exception& e) { errors.push_back(e.what()); }
  }
  for (auto& e : errors)
    if (on_error) on_error(e);
  return (int)done.size();
}

std::vector<JobStatus> JobQueue::status() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<JobStatus> s;
  if (running_ctx_) s.push_back({running_key_, running_label_, running_ctx_->progress_.load(), true});
  for (const Job& j : queue_) s.push_back({j.key, j.label, 0.0f, false});
  return s;
}

bool JobQueue::idle() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queue_.empty() && !running_ctx_ && done_.empty() && errors_.empty();
}

}  // namespace focalscope
