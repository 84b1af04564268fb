// What the HTTP layer needs of a job queue, whichever one runs the jobs: the in-process
// queue of one server (job_queue.h) or the durable queue that many servers share
// (pg_job_queue.h). Jobs are identified by unguessable ids; a client polls, waits on or
// cancels them through any server that shares the queue.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sd::server {

enum class JobStatus { Queued, Generating, Completed, Failed, Cancelled };
const char* job_status_name(JobStatus status);
std::optional<JobStatus> parse_job_status(const std::string& name);
bool job_finished(JobStatus status);  // completed, failed or cancelled

// Unguessable, so one client cannot poll or cancel another's job by counting.
std::string new_job_id();

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
  std::string output_format;        // "png", "jpeg", "webp"; a video's "webm", "mp4", ...
  std::vector<std::string> images;  // encoded files (a video: its one container)
  std::vector<int64_t> seeds;       // one per image
  std::vector<std::string> infotexts;
  int fps = 0, frame_count = 0;  // a video's
};

// The media type of a video container named by its output format ("webm" -> video/webm).
const char* video_mime_type(const std::string& output_format);

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
  int attempts = 0;        // runs started (a durable queue runs a job again when its worker dies)
  nlohmann::json history;  // a durable queue's record of each run (null: none)
  uint64_t version = 0;    // changes whenever anything above does
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

// A job as it is handed to a queue: runnable in this process, and as the client sent it,
// so that a worker in another process can parse and run it.
struct JobTicket {
  std::string kind = "img_gen";
  Work work;               // the in-process queue runs this
  nlohmann::json payload;  // a durable queue stores this (request.h: parse_queued_request)
  std::string tenant;      // whose waiting jobs it counts against ("" the server's clients)
};

// The queue's store cannot be reached (a durable queue's database is down): the HTTP layer
// answers 503 with Retry-After, and the job a client sent is not lost, it was never taken.
class QueueUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Jobs {
 public:
  virtual ~Jobs() = default;

  enum class Refusal { None, Full, Stopping, Unavailable };
  struct Submitted {
    std::optional<JobState> job;
    Refusal refusal = Refusal::None;
  };
  virtual Submitted submit(JobTicket ticket) = 0;

  // Throw QueueUnavailable when the store is unreachable.
  virtual std::optional<JobState> find(const std::string& id) const = 0;
  enum class CancelOutcome { Cancelled, Requested, AlreadyFinished, NotFound };
  // A waiting job is cancelled at once; a running one is asked to stop (Requested) and
  // ends as cancelled when the engine returns.
  virtual CancelOutcome cancel(const std::string& id) = 0;
  // Blocks until the job has finished or `timeout_ms` passed: its state then.
  virtual std::optional<JobState> wait_finished(const std::string& id, int64_t timeout_ms) = 0;
  // Blocks until the job's version differs from `version` or `timeout_ms` passed.
  virtual std::optional<JobState> wait_changed(const std::string& id, uint64_t version,
                                               int timeout_ms) = 0;

  // Refuses new jobs and stops running the queue's jobs in this process.
  virtual void shutdown() = 0;
  // Jobs waiting to run (for `tenant`, where the queue counts per tenant).
  virtual int waiting(const std::string& tenant = "") const = 0;
  virtual int max_waiting() const = 0;
  // Wall seconds the last finished job ran (at least 1), for Retry-After.
  virtual int64_t last_run_seconds() const = 0;
  // The servers behind a shared queue and the models they serve (null: this server alone).
  virtual nlohmann::json fleet() const { return nullptr; }
};

}  // namespace sd::server
