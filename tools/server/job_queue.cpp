#include "server/job_queue.h"

#include <algorithm>
#include <chrono>
#include <ctime>

namespace sd::server {

namespace {

int64_t now() {
  return static_cast<int64_t>(std::time(nullptr));
}

}  // namespace

struct JobQueue::Job {
  JobState state;
  Work work;
  bool cancel_requested = false;
};

JobQueue::JobQueue(int max_waiting, int history, std::function<void()> cancel_running)
    : max_waiting_(max_waiting), history_(history), cancel_running_(std::move(cancel_running)) {
  worker_ = std::thread([this] { run_worker(); });
}

JobQueue::~JobQueue() {
  shutdown();
}

JobQueue::Submitted JobQueue::submit(std::string kind, Work work) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return {std::nullopt, Refusal::Stopping};
  if (static_cast<int>(waiting_.size()) >= max_waiting_ && (running_ || !waiting_.empty()))
    return {std::nullopt, Refusal::Full};
  auto job = std::make_shared<Job>();
  job->state.id = new_job_id();
  job->state.kind = std::move(kind);
  job->state.created = now();
  job->work = std::move(work);
  jobs_[job->state.id] = job;
  waiting_.push_back(job);
  wake_worker_.notify_one();
  return {snapshot(*job), Refusal::None};
}

JobState JobQueue::snapshot(const Job& job) const {
  JobState s = job.state;
  s.queue_position = 0;
  for (size_t i = 0; i < waiting_.size(); ++i) {
    if (waiting_[i].get() == &job) s.queue_position = static_cast<int>(i) + 1;
  }
  return s;
}

std::optional<JobState> JobQueue::find(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return snapshot(*it->second);
}

void JobQueue::finish(Job& job, JobStatus status) {
  job.state.status = status;
  job.state.completed = now();
  ++job.state.version;
  job.work = nullptr;  // frees the request's images
  finished_order_.push_back(job.state.id);
  while (static_cast<int>(finished_order_.size()) > history_) {
    jobs_.erase(finished_order_.front());
    finished_order_.pop_front();
  }
  changed_.notify_all();
}

JobQueue::CancelOutcome JobQueue::cancel(const std::string& id) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return CancelOutcome::NotFound;
  Job& job = *it->second;
  if (job_finished(job.state.status)) return CancelOutcome::AlreadyFinished;
  job.cancel_requested = true;
  if (job.state.status == JobStatus::Queued) {
    for (auto w = waiting_.begin(); w != waiting_.end(); ++w) {
      if (w->get() == &job) {
        waiting_.erase(w);
        break;
      }
    }
    job.state.error_code = "cancelled";
    job.state.error_message = "job cancelled by client before it started";
    finish(job, JobStatus::Cancelled);
    return CancelOutcome::Cancelled;
  }
  lock.unlock();
  cancel_running_();
  return CancelOutcome::Requested;
}

std::optional<JobState> JobQueue::wait_finished(const std::string& id) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::nullopt;
    if (job_finished(it->second->state.status)) return snapshot(*it->second);
    changed_.wait(lock);
  }
}

std::optional<JobState> JobQueue::wait_finished(const std::string& id, int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::nullopt;
    if (job_finished(it->second->state.status) ||
        changed_.wait_until(lock, deadline) == std::cv_status::timeout)
      return snapshot(*it->second);
  }
}

std::optional<JobState> JobQueue::wait_changed(const std::string& id, uint64_t version,
                                               int timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::nullopt;
    if (it->second->state.version != version || job_finished(it->second->state.status))
      return snapshot(*it->second);
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout)
      return snapshot(*it->second);
  }
}

void JobQueue::run_worker() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_worker_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
    if (stopping_) return;
    std::shared_ptr<Job> job = waiting_.front();
    waiting_.pop_front();
    running_ = job;
    job->state.status = JobStatus::Generating;
    job->state.started = now();
    ++job->state.version;
    changed_.notify_all();
    Work work = std::move(job->work);
    lock.unlock();

    JobReporter report;
    report.progress = [this, job](int step, int steps, double seconds) {
      std::lock_guard<std::mutex> guard(mutex_);
      job->state.progress = {step, steps, seconds};
      ++job->state.version;
      changed_.notify_all();
      // A cancel that arrived before the engine started could have been reset by it.
      if (job->cancel_requested) cancel_running_();
    };
    report.preview = [this, job](int step, std::string png) {
      auto shared = std::make_shared<const std::string>(std::move(png));
      std::lock_guard<std::mutex> guard(mutex_);
      job->state.preview = {step, std::move(shared)};
      ++job->state.version;
      changed_.notify_all();
    };
    JobResult result;
    std::string error;
    bool ok = false;
    try {
      result = work(report);
      ok = true;
    } catch (const std::exception& e) {
      error = e.what();
    }
    work = nullptr;

    lock.lock();
    running_.reset();
    last_run_seconds_ = std::max<int64_t>(1, now() - job->state.started);
    if (job->cancel_requested) {
      job->state.error_code = stopping_ ? "shutdown" : "cancelled";
      job->state.error_message = stopping_ ? "the server is shutting down; submit the job again"
                                           : "job cancelled by client while it was generating";
      finish(*job, JobStatus::Cancelled);
    } else if (ok) {
      job->state.result = std::move(result);
      finish(*job, JobStatus::Completed);
    } else {
      job->state.error_code = "generation_failed";
      job->state.error_message = error;
      finish(*job, JobStatus::Failed);
    }
  }
}

void JobQueue::shutdown() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!stopping_) {
    stopping_ = true;
    for (auto& job : waiting_) {
      job->cancel_requested = true;
      job->state.error_code = "shutdown";
      job->state.error_message = "the server is shutting down; submit the job again";
      finish(*job, JobStatus::Cancelled);
    }
    waiting_.clear();
    if (running_) {
      running_->cancel_requested = true;
      lock.unlock();
      cancel_running_();
      lock.lock();
    }
    wake_worker_.notify_all();
  }
  lock.unlock();
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
}

int64_t JobQueue::last_run_seconds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_run_seconds_;
}

int JobQueue::waiting(const std::string&) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(waiting_.size());
}

}  // namespace sd::server
