// Jobs run one at a time on one worker thread, in the order they came; a bounded number
// wait behind the running one, and a submission past that is refused (the HTTP layer
// answers 429), so memory and latency stay bounded however many clients call. Finished
// jobs are kept for polling up to a count, oldest forgotten first.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "server/jobs.h"

namespace sd::server {

class JobQueue final : public Jobs {
 public:
  // `cancel_running` asks the engine to stop the generation in progress (called from any
  // thread).
  JobQueue(int max_waiting, int history, std::function<void()> cancel_running);
  ~JobQueue() override;

  Submitted submit(std::string kind, Work work);
  Submitted submit(JobTicket ticket) override {
    return submit(ticket.kind, std::move(ticket.work));
  }

  std::optional<JobState> find(const std::string& id) const override;
  CancelOutcome cancel(const std::string& id) override;

  // Blocks until the job has finished (or is unknown); returns its last state.
  std::optional<JobState> wait_finished(const std::string& id);
  std::optional<JobState> wait_finished(const std::string& id, int64_t timeout_ms) override;
  std::optional<JobState> wait_changed(const std::string& id, uint64_t version,
                                       int timeout_ms) override;

  // Refuses new jobs, cancels the waiting ones and the running one, and joins the worker.
  void shutdown() override;
  // All clients share one limit here.
  int waiting(const std::string& tenant = "") const override;
  int max_waiting() const override { return max_waiting_; }
  // 10 before any job ran.
  int64_t last_run_seconds() const override;

 private:
  struct Job;
  void run_worker();
  JobState snapshot(const Job& job) const;
  void finish(Job& job, JobStatus status);  // with mutex_ held

  const int max_waiting_, history_;
  std::function<void()> cancel_running_;
  mutable std::mutex mutex_;
  std::condition_variable wake_worker_;
  mutable std::condition_variable changed_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  std::deque<std::shared_ptr<Job>> waiting_;
  std::deque<std::string> finished_order_;
  std::shared_ptr<Job> running_;
  bool stopping_ = false;
  int64_t last_run_seconds_ = 10;
  std::thread worker_;
};

}  // namespace sd::server
