// Jobs run one at a time on one worker thread, in the order they came; a bounded number
// wait behind the running one, and a submission past that is refused (the HTTP layer
// answers 429), so memory and latency stay bounded however many clients call. Finished
// jobs are kept for polling up to a count, oldest forgotten first.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace sd::server {

enum class JobStatus { Queued, Generating, Completed, Failed, Cancelled };
const char* job_status_name(JobStatus status);

struct JobProgress {
  int step = 0, steps = 0;
  double seconds_per_step = 0;  // of the last step
};

// The latest live preview of a running job: an encoded PNG of the step it shows. Shared,
// so that copying a job's state for a poll does not copy the image.
struct JobPreview {
  int step = 0;  // 0: none yet
  std::shared_ptr<const std::string> png;
};

struct JobResult {
  std::string output_format;        // "png", "jpeg", "webp"
  std::vector<std::string> images;  // encoded files
  std::vector<int64_t> seeds;       // one per image
  std::vector<std::string> infotexts;
};

// What a client sees of a job; a copy, so it can be read without the queue's lock.
struct JobState {
  std::string id, kind;
  JobStatus status = JobStatus::Queued;
  int64_t created = 0, started = 0, completed = 0;  // Unix seconds; 0: not yet
  int queue_position = 0;                           // 1: next to run; 0: not waiting
  JobProgress progress;
  JobPreview preview;
  JobResult result;
  std::string error_code, error_message;
  uint64_t version = 0;  // changes whenever anything above does
};

// Runs a job: reports progress and previews, returns the images or throws an exception
// whose message says why the job failed.
using ProgressFn = std::function<void(int step, int steps, double seconds)>;
using PreviewFn = std::function<void(int step, std::string png)>;
struct JobReporter {
  ProgressFn progress;
  PreviewFn preview;
};
using Work = std::function<JobResult(const JobReporter& report)>;

class JobQueue {
 public:
  // `cancel_running` asks the engine to stop the generation in progress (called from any
  // thread).
  JobQueue(int max_waiting, int history, std::function<void()> cancel_running);
  ~JobQueue();

  enum class Refusal { None, Full, Stopping };
  struct Submitted {
    std::optional<JobState> job;
    Refusal refusal = Refusal::None;
  };
  Submitted submit(std::string kind, Work work);

  std::optional<JobState> find(const std::string& id) const;

  enum class CancelOutcome { Cancelled, Requested, AlreadyFinished, NotFound };
  // A waiting job is cancelled at once; a running one is asked to stop (Requested) and
  // ends as cancelled when the engine returns.
  CancelOutcome cancel(const std::string& id);

  // Blocks until the job has finished (or is unknown); returns its last state.
  std::optional<JobState> wait_finished(const std::string& id);
  // The same, giving up after `timeout_ms`: the state then (not finished).
  std::optional<JobState> wait_finished(const std::string& id, int64_t timeout_ms);
  // Blocks until the job's version differs from `version` or `timeout_ms` passed.
  std::optional<JobState> wait_changed(const std::string& id, uint64_t version, int timeout_ms);

  // Refuses new jobs, cancels the waiting ones and the running one, and joins the worker.
  void shutdown();
  int waiting() const;
  int max_waiting() const { return max_waiting_; }
  // Wall seconds the last finished job ran (at least 1; 10 before any), for Retry-After.
  int64_t last_run_seconds() const;

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
