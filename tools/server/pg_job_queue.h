// The job queue many sd-servers share, durable in PostgreSQL: every server enqueues the
// requests it accepts; every worker claims the oldest job for the model it has loaded
// (SELECT ... FOR UPDATE SKIP LOCKED), holds a lease on it that its heartbeat renews, and
// writes progress, previews and results back. A job whose worker dies (its lease expires)
// is queued again and counted as an attempt; after --max-attempts it fails with the last
// error. Changes reach every server through LISTEN/NOTIFY, so polling, SSE streams, cancel
// and results work on any of them. Finished jobs are swept after --keep-results.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "server/jobs.h"
#include "server/pg_connection.h"

namespace sd::server {

// A request the worker cannot run however often it tries (it fails at once, no retry).
class InvalidJob : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PgQueueOptions {
  std::string url;               // postgresql://...
  std::string schema = "sdcpp";  // the queue's tables live here
  std::string model;             // the model this server's jobs need and its worker serves
  bool worker = true;            // false: accept and serve state only (--accept-only)
  int max_waiting = 4;           // queued jobs per tenant
  int max_attempts = 3;
  int lease_seconds = 30;  // a silent worker's job is taken back after this
  int64_t keep_results_seconds = 3600;
};

// Runs a job's stored request: throws InvalidJob for a request that can never run, any other
// exception for a failed run (retried).
using QueuedWork = std::function<JobResult(const nlohmann::json& payload, const JobReporter&)>;

class PgJobQueue final : public Jobs {
 public:
  // Connects and creates or migrates the tables; throws PgError when it cannot. Before a
  // model is loaded, so that a wrong URL is said at once.
  explicit PgJobQueue(PgQueueOptions options);
  ~PgJobQueue() override;
  // Starts listening, upkeep and (for a worker) running jobs with `run`; `cancel_running`
  // stops the run in progress (any thread).
  void start(QueuedWork run, std::function<void()> cancel_running);

  Submitted submit(JobTicket ticket) override;
  std::optional<JobState> find(const std::string& id) const override;
  CancelOutcome cancel(const std::string& id) override;
  std::optional<JobState> wait_finished(const std::string& id, int64_t timeout_ms) override;
  std::optional<JobState> wait_changed(const std::string& id, uint64_t version,
                                       int timeout_ms) override;
  // Stops claiming; a job running here stops and goes back to the queue (the attempt does
  // not count), for another worker to run.
  void shutdown() override;
  int waiting(const std::string& tenant = "") const override;
  int max_waiting() const override { return options_.max_waiting; }
  int64_t last_run_seconds() const override { return last_run_seconds_; }
  nlohmann::json fleet() const override;

  const std::string& worker_id() const { return worker_id_; }

 private:
  struct Watch;
  std::string sql(const char* text) const;
  std::optional<JobState> read_job(PgConnection& c, const std::string& id) const;
  void listen_loop();
  void work_loop();
  void upkeep_loop();
  bool claim_and_run();
  void run_claimed(const std::string& id, const std::string& request, int run);
  // Waits for a change of `id` (a notification) or `timeout_ms`; false when stopping.
  bool wait_note(const std::string& id, uint64_t seen, int timeout_ms) const;
  uint64_t note_count(const std::string& id) const;
  void sleep_unless_stopping(std::chrono::milliseconds d);

  const PgQueueOptions options_;
  QueuedWork run_;
  std::function<void()> cancel_running_;
  const std::string worker_id_;
  mutable PgPool pool_;

  // Notifications: per job id the number seen; waiters compare counts.
  mutable std::mutex notes_mutex_;
  mutable std::condition_variable noted_;
  mutable std::map<std::string, uint64_t> notes_;
  mutable std::map<std::string, int> watchers_;
  uint64_t reconnects_ = 0;   // every waiter re-reads after the listener reconnects
  bool queued_note_ = false;  // a job for our model became claimable

  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> last_run_seconds_{10};
  std::mutex running_mutex_;
  std::string running_id_;  // the job this worker runs now ("" none)
  std::atomic<bool> lease_lost_{false};
  std::atomic<bool> cancel_seen_{false};
  std::thread listener_, worker_, upkeep_;
};

}  // namespace sd::server
