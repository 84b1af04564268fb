#include "server/pg_job_queue.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "cli/cli_log.h"
#include "server/pg_schema.h"

namespace sd::server {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "unknown-host";
  return host;
}

// Names the process in the jobs' history: host, process id, and a random part so that a
// restarted process with a recycled id is another worker.
std::string new_worker_id() {
  std::random_device random;
  char text[64];
  std::snprintf(text, sizeof text, "-%d-%08x", static_cast<int>(getpid()), random());
  return host_name() + text;
}

// The columns read_job reads, in order.
const char* kJobColumns = R"sql(
  SELECT id, kind, state,
         extract(epoch FROM created)::bigint,
         COALESCE(extract(epoch FROM started)::bigint, 0),
         COALESCE(extract(epoch FROM completed)::bigint, 0),
         CASE WHEN state = 'queued' THEN
           (SELECT count(*) FROM {s}.jobs q
             WHERE q.state = 'queued' AND q.model = j.model
               AND (q.priority > j.priority OR (q.priority = j.priority AND q.seq <= j.seq)))
         ELSE 0 END,
         step, steps, seconds_per_step, preview_step,
         CASE WHEN state = 'generating' THEN preview END,
         output_format, error_code, error_message, attempts, version,
         COALESCE(fps, 0), COALESCE(frame_count, 0)
    FROM {s}.jobs j WHERE id = $1)sql";

// A job whose worker stopped renewing its lease goes back to the queue, or fails when it
// has had all its attempts (or is cancelled when a client asked for that).
const char* kReapExpiredLeases = R"sql(
  WITH expired AS (
    SELECT id FROM {s}.jobs
     WHERE state = 'generating' AND lease_deadline < now()
     FOR UPDATE SKIP LOCKED),
  taken AS (
    UPDATE {s}.jobs j SET
      state = CASE WHEN j.cancel_requested THEN 'cancelled'
                   WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'queued' END,
      completed = CASE WHEN j.cancel_requested OR j.attempts >= j.max_attempts THEN now() END,
      error_code = CASE WHEN j.cancel_requested THEN 'cancelled'
                        WHEN j.attempts >= j.max_attempts THEN 'worker_lost' END,
      error_message = CASE
        WHEN j.cancel_requested THEN 'job cancelled by client (its worker had stopped answering)'
        WHEN j.attempts >= j.max_attempts THEN
          'the job ran ' || j.attempts || ' times and each time its worker stopped answering '
          '(lease expired); see the job''s history' END,
      request = CASE WHEN j.cancel_requested OR j.attempts >= j.max_attempts THEN ''
                     ELSE j.request END,
      lease_owner = NULL, lease_deadline = NULL, started = NULL,
      step = 0, steps = 0, preview_step = 0, preview = NULL
    FROM expired WHERE j.id = expired.id
    RETURNING j.id)
  UPDATE {s}.attempts a SET ended = now(), outcome = 'lease_expired',
                            error = 'the worker stopped renewing its lease'
    FROM taken WHERE a.job_id = taken.id AND a.ended IS NULL)sql";

// Takes the oldest job of the highest priority for this worker's model, with a lease, and
// records the run (numbered apart from the attempts counted: a run a stopping worker hands
// back is recorded, not counted).
const char* kClaim = R"sql(
  WITH claimed AS (
    UPDATE {s}.jobs SET state = 'generating', attempts = attempts + 1, lease_owner = $1,
                        lease_deadline = now() + make_interval(secs => $3), started = now(),
                        step = 0, steps = 0, preview_step = 0, preview = NULL
     WHERE id = (SELECT id FROM {s}.jobs
                  WHERE state = 'queued' AND model = $2 AND NOT cancel_requested
                  ORDER BY priority DESC, seq
                  FOR UPDATE SKIP LOCKED LIMIT 1)
    RETURNING id, request),
  noted AS (
    INSERT INTO {s}.attempts (job_id, number, worker)
    SELECT id, (SELECT COALESCE(max(number), 0) + 1 FROM {s}.attempts a WHERE a.job_id = claimed.id),
           $1
      FROM claimed
    RETURNING job_id, number)
  SELECT claimed.id, claimed.request, noted.number
    FROM claimed JOIN noted ON noted.job_id = claimed.id)sql";

const char* kRenewLease = R"sql(
  UPDATE {s}.jobs SET lease_deadline = now() + make_interval(secs => $3)
   WHERE id = $1 AND lease_owner = $2 AND state = 'generating'
  RETURNING cancel_requested)sql";

const char* kReportProgress = R"sql(
  UPDATE {s}.jobs SET step = $3, steps = $4, seconds_per_step = $5,
                      lease_deadline = now() + make_interval(secs => $6)
   WHERE id = $1 AND lease_owner = $2 AND state = 'generating'
  RETURNING cancel_requested)sql";

// Waits between retries while the database is away: 0.25 s, doubling up to 5 s.
class Backoff {
 public:
  milliseconds next() {
    const milliseconds now = wait_;
    wait_ = std::min(wait_ * 2, milliseconds(5000));
    return now;
  }
  void reset() { wait_ = milliseconds(250); }

 private:
  milliseconds wait_{250};
};

// Logs the database going away and coming back once each, not per failed statement.
class DatabaseStateLog {
 public:
  void failed(const std::string& why) {
    if (!down_.exchange(true))
      cli::log_message(SD_LOG_WARN, "queue database unavailable (%s); retrying with backoff",
                       why.c_str());
  }
  void ok() {
    if (down_.exchange(false)) cli::log_message(SD_LOG_INFO, "queue database reachable again");
  }
  // An outage is logged once; any other error (a statement the database refused) each time.
  void failed(const PgError& e, const char* doing) {
    if (e.connection_lost()) {
      failed(e.what());
    } else {
      cli::log_message(SD_LOG_ERROR, "%s: %s", doing, e.what());
    }
  }

 private:
  std::atomic<bool> down_{false};
};
DatabaseStateLog database_state;

// Runs `f` with a pooled connection; a database that cannot be reached becomes
// QueueUnavailable for the HTTP layer.
template <typename F>
auto with_connection(PgPool& pool, F f) {
  try {
    PgPool::Lease c = pool.borrow();
    auto out = f(*c);
    database_state.ok();
    return out;
  } catch (const PgError& e) {
    if (!e.connection_lost()) throw;
    database_state.failed(e.what());
    throw QueueUnavailable(e.what());
  }
}

}  // namespace

PgJobQueue::PgJobQueue(PgQueueOptions options)
    : options_(std::move(options)), worker_id_(new_worker_id()), pool_(options_.url, 32) {
  PgPool::Lease c = pool_.borrow();
  migrate_queue_schema(*c, options_.schema);
}

void PgJobQueue::start(QueuedWork run, std::function<void()> cancel_running) {
  run_ = std::move(run);
  cancel_running_ = std::move(cancel_running);
  if (options_.worker) {
    PgPool::Lease c = pool_.borrow();
    c->exec(sql("INSERT INTO {s}.workers (id, model, host) VALUES ($1, $2, $3)"),
            {pg_text(worker_id_), pg_text(options_.model), pg_text(host_name())});
  }
  listener_ = std::thread([this] { listen_loop(); });
  upkeep_ = std::thread([this] { upkeep_loop(); });
  if (options_.worker) worker_ = std::thread([this] { work_loop(); });
}

PgJobQueue::~PgJobQueue() {
  shutdown();
}

std::string PgJobQueue::sql(const char* text) const {
  return in_schema(text, options_.schema);
}

std::optional<JobState> PgJobQueue::read_job(PgConnection& c, const std::string& id) const {
  PgResult r = c.exec(sql(kJobColumns), {pg_text(id)});
  if (r.rows() == 0) return std::nullopt;
  JobState s;
  s.id = r.text(0, 0);
  s.kind = r.text(0, 1);
  s.status = parse_job_status(r.text(0, 2)).value_or(JobStatus::Failed);
  s.created = r.integer(0, 3);
  s.started = r.integer(0, 4);
  s.completed = r.integer(0, 5);
  s.queue_position = static_cast<int>(r.integer(0, 6));
  s.progress = {static_cast<int>(r.integer(0, 7)), static_cast<int>(r.integer(0, 8)), r.real(0, 9)};
  if (!r.is_null(0, 11)) {
    s.preview.step = static_cast<int>(r.integer(0, 10));
    s.preview.png = std::make_shared<const std::string>(r.bytes(0, 11));
  }
  s.result.output_format = r.text(0, 12);
  s.error_code = r.text(0, 13);
  s.error_message = r.text(0, 14);
  s.attempts = static_cast<int>(r.integer(0, 15));
  s.version = static_cast<uint64_t>(r.integer(0, 16));
  s.result.fps = static_cast<int>(r.integer(0, 17));
  s.result.frame_count = static_cast<int>(r.integer(0, 18));
  if (s.status == JobStatus::Completed) {
    PgResult images =
        c.exec(sql("SELECT seed, infotext, image FROM {s}.results WHERE job_id = $1 ORDER BY idx"),
               {pg_text(id)});
    for (int i = 0; i < images.rows(); ++i) {
      s.result.seeds.push_back(images.integer(i, 0));
      s.result.infotexts.push_back(images.text(i, 1));
      s.result.images.push_back(images.bytes(i, 2));
    }
  }
  PgResult runs = c.exec(sql(R"sql(
      SELECT number, worker, extract(epoch FROM started)::bigint,
             COALESCE(extract(epoch FROM ended)::bigint, 0), outcome, error
        FROM {s}.attempts WHERE job_id = $1 ORDER BY number)sql"),
                         {pg_text(id)});
  s.history = nlohmann::json::array();
  for (int i = 0; i < runs.rows(); ++i) {
    s.history.push_back({{"run", runs.integer(i, 0)},
                         {"worker", runs.text(i, 1)},
                         {"started", runs.integer(i, 2)},
                         {"ended", runs.is_null(i, 3) || runs.integer(i, 3) == 0
                                       ? nlohmann::json(nullptr)
                                       : nlohmann::json(runs.integer(i, 3))},
                         {"outcome", runs.is_null(i, 4) ? nlohmann::json("running")
                                                        : nlohmann::json(runs.text(i, 4))},
                         {"error", runs.is_null(i, 5) ? nlohmann::json(nullptr)
                                                      : nlohmann::json(runs.text(i, 5))}});
  }
  return s;
}

Jobs::Submitted PgJobQueue::submit(JobTicket ticket) {
  if (stopping_) return {std::nullopt, Refusal::Stopping};
  try {
    return with_connection(pool_, [&](PgConnection& c) -> Submitted {
      c.exec("BEGIN");
      // One tenant's submissions are counted one at a time, so the limit holds exactly.
      c.exec("SELECT pg_advisory_xact_lock(hashtext($1))",
             {pg_text(options_.schema + " tenant " + ticket.tenant)});
      PgResult waiting =
          c.exec(sql("SELECT count(*) FROM {s}.jobs WHERE tenant = $1 AND state = 'queued'"),
                 {pg_text(ticket.tenant)});
      if (waiting.integer(0, 0) >= options_.max_waiting) {
        c.exec("ROLLBACK");
        return {std::nullopt, Refusal::Full};
      }
      const std::string id = new_job_id();
      c.exec(sql(R"sql(INSERT INTO {s}.jobs (id, kind, model, tenant, request, max_attempts)
                       VALUES ($1, $2, $3, $4, $5, $6))sql"),
             {pg_text(id), pg_text(ticket.kind), pg_text(options_.model), pg_text(ticket.tenant),
              pg_text(ticket.payload.dump()), pg_text(std::to_string(options_.max_attempts))});
      c.exec("COMMIT");
      return {read_job(c, id), Refusal::None};
    });
  } catch (const QueueUnavailable&) {
    return {std::nullopt, Refusal::Unavailable};
  }
}

std::optional<JobState> PgJobQueue::find(const std::string& id) const {
  return with_connection(pool_, [&](PgConnection& c) { return read_job(c, id); });
}

Jobs::CancelOutcome PgJobQueue::cancel(const std::string& id) {
  return with_connection(pool_, [&](PgConnection& c) {
    // SET reads the row as it was: a queued job ends here, a running one is flagged for
    // its worker, which sees the flag at its next step.
    PgResult r = c.exec(sql(R"sql(
        UPDATE {s}.jobs SET
          cancel_requested = true,
          state = CASE WHEN state = 'queued' THEN 'cancelled' ELSE state END,
          completed = CASE WHEN state = 'queued' THEN now() ELSE completed END,
          error_code = CASE WHEN state = 'queued' THEN 'cancelled' ELSE error_code END,
          error_message = CASE WHEN state = 'queued'
                               THEN 'job cancelled by client before it started'
                               ELSE error_message END,
          request = CASE WHEN state = 'queued' THEN '' ELSE request END
         WHERE id = $1 AND state IN ('queued', 'generating')
        RETURNING state)sql"),
                        {pg_text(id)});
    if (r.rows() == 1)
      return r.text(0, 0) == "cancelled" ? CancelOutcome::Cancelled : CancelOutcome::Requested;
    PgResult known = c.exec(sql("SELECT 1 FROM {s}.jobs WHERE id = $1"), {pg_text(id)});
    return known.rows() ? CancelOutcome::AlreadyFinished : CancelOutcome::NotFound;
  });
}

// While it lives, the listener counts the notifications of job `id`.
struct PgJobQueue::Watch {
  Watch(const PgJobQueue& q, const std::string& id) : q(q), id(id) {
    std::lock_guard<std::mutex> lock(q.notes_mutex_);
    ++q.watchers_[id];
  }
  ~Watch() {
    std::lock_guard<std::mutex> lock(q.notes_mutex_);
    if (--q.watchers_[id] == 0) {
      q.watchers_.erase(id);
      q.notes_.erase(id);
    }
  }
  const PgJobQueue& q;
  const std::string& id;
};

uint64_t PgJobQueue::note_count(const std::string& id) const {
  std::lock_guard<std::mutex> lock(notes_mutex_);
  auto it = notes_.find(id);
  return (it == notes_.end() ? 0 : it->second) + reconnects_;
}

bool PgJobQueue::wait_note(const std::string& id, uint64_t seen, int timeout_ms) const {
  std::unique_lock<std::mutex> lock(notes_mutex_);
  noted_.wait_for(lock, milliseconds(timeout_ms), [&] {
    auto it = notes_.find(id);
    return stopping_ || (it == notes_.end() ? 0 : it->second) + reconnects_ != seen;
  });
  return !stopping_;
}

std::optional<JobState> PgJobQueue::wait_changed(const std::string& id, uint64_t version,
                                                 int timeout_ms) {
  const auto deadline = Clock::now() + milliseconds(timeout_ms);
  const Watch watch(*this, id);
  std::optional<JobState> last;
  for (;;) {
    const uint64_t seen = note_count(id);
    try {
      last = find(id);
    } catch (const QueueUnavailable&) {
      if (!last || Clock::now() >= deadline) throw;  // nothing to show yet: the caller says 503
    }
    if (!last) return last;
    if (last->version != version || job_finished(last->status)) return last;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return last;
    // Notifications wake us at once; a poll each second covers any that were missed.
    if (!wait_note(id, seen, static_cast<int>(std::min<int64_t>(left, 1000)))) return last;
  }
}

std::optional<JobState> PgJobQueue::wait_finished(const std::string& id, int64_t timeout_ms) {
  const auto deadline = Clock::now() + milliseconds(timeout_ms);
  const Watch watch(*this, id);
  // Until the end, each change costs one small read of the job's state; the whole job
  // (its images, its history) is read once.
  for (;;) {
    const uint64_t seen = note_count(id);
    const std::optional<std::string> state = with_connection(pool_, [&](PgConnection& c) {
      PgResult r = c.exec(sql("SELECT state FROM {s}.jobs WHERE id = $1"), {pg_text(id)});
      return r.rows() ? std::optional<std::string>(r.text(0, 0)) : std::nullopt;
    });
    if (!state) return std::nullopt;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    const std::optional<JobStatus> status = parse_job_status(*state);
    if ((status && job_finished(*status)) || left <= 0 || stopping_) return find(id);
    wait_note(id, seen, static_cast<int>(std::min<int64_t>(left, 1000)));
  }
}

int PgJobQueue::waiting(const std::string& tenant) const {
  return with_connection(pool_, [&](PgConnection& c) {
    PgResult r = c.exec(sql("SELECT count(*) FROM {s}.jobs WHERE tenant = $1 AND state = 'queued'"),
                        {pg_text(tenant)});
    return static_cast<int>(r.integer(0, 0));
  });
}

nlohmann::json PgJobQueue::fleet() const {
  return with_connection(pool_, [&](PgConnection& c) {
    PgResult r = c.exec(sql(R"sql(
        SELECT m.model, COALESCE(w.count, 0), COALESCE(q.count, 0)
          FROM (SELECT model FROM {s}.workers
                 WHERE heartbeat > now() - make_interval(secs => $1)
                UNION SELECT model FROM {s}.jobs WHERE state = 'queued') m
          LEFT JOIN (SELECT model, count(*) FROM {s}.workers
                      WHERE heartbeat > now() - make_interval(secs => $1)
                      GROUP BY model) w ON w.model = m.model
          LEFT JOIN (SELECT model, count(*) FROM {s}.jobs WHERE state = 'queued'
                      GROUP BY model) q ON q.model = m.model
         ORDER BY m.model)sql"),
                        {pg_text(std::to_string(2 * options_.lease_seconds))});
    nlohmann::json models = nlohmann::json::array();
    int64_t workers = 0;
    for (int i = 0; i < r.rows(); ++i) {
      models.push_back(
          {{"model", r.text(i, 0)}, {"workers", r.integer(i, 1)}, {"queued", r.integer(i, 2)}});
      workers += r.integer(i, 1);
    }
    return nlohmann::json{{"queue", "postgresql"},
                          {"schema", options_.schema},
                          {"schema_version", queue_schema_version()},
                          {"this_server",
                           {{"worker", options_.worker ? nlohmann::json(worker_id_) : nullptr},
                            {"model", options_.model}}},
                          {"workers", workers},
                          {"models", models}};
  });
}

void PgJobQueue::sleep_unless_stopping(milliseconds d) {
  std::unique_lock<std::mutex> lock(notes_mutex_);
  noted_.wait_for(lock, d, [this] { return stopping_.load(); });
}

void PgJobQueue::listen_loop() {
  Backoff backoff;
  const std::string jobs_channel = options_.schema + "_jobs";
  const std::string queued_channel = options_.schema + "_queued";
  while (!stopping_) {
    try {
      std::unique_ptr<PgConnection> c = pool_.connect();
      c->exec("LISTEN " + jobs_channel);
      c->exec("LISTEN " + queued_channel);
      backoff.reset();
      {
        // Changes made while we were not listening: every waiter reads again.
        std::lock_guard<std::mutex> lock(notes_mutex_);
        ++reconnects_;
        queued_note_ = true;
      }
      noted_.notify_all();
      while (!stopping_) {
        std::vector<PgConnection::Notification> notes = c->wait_notifications(500);
        if (notes.empty()) continue;
        {
          std::lock_guard<std::mutex> lock(notes_mutex_);
          for (const auto& n : notes) {
            if (n.channel == jobs_channel && watchers_.count(n.payload)) ++notes_[n.payload];
            if (n.channel == queued_channel && n.payload == options_.model) queued_note_ = true;
          }
        }
        noted_.notify_all();
      }
    } catch (const PgError& e) {
      database_state.failed(e, "cannot listen for job changes");
      sleep_unless_stopping(backoff.next());
    }
  }
}

void PgJobQueue::work_loop() {
  Backoff backoff;
  while (!stopping_) {
    bool ran = false;
    try {
      ran = claim_and_run();
      backoff.reset();
    } catch (const PgError& e) {
      database_state.failed(e, "cannot claim a job");
      sleep_unless_stopping(backoff.next());
      continue;
    }
    if (ran) continue;
    // Nothing to do: sleep until a job for our model is queued (or a while, in case a
    // notification was missed).
    std::unique_lock<std::mutex> lock(notes_mutex_);
    noted_.wait_for(lock, milliseconds(2000), [this] { return stopping_ || queued_note_; });
    queued_note_ = false;
  }
}

bool PgJobQueue::claim_and_run() {
  std::string id, request;
  int run = 0;
  {
    PgPool::Lease c = pool_.borrow();
    PgResult r = c->exec(sql(kClaim), {pg_text(worker_id_), pg_text(options_.model),
                                       pg_text(std::to_string(options_.lease_seconds))});
    database_state.ok();
    if (r.rows() == 0) return false;
    id = r.text(0, 0);
    request = r.text(0, 1);
    run = static_cast<int>(r.integer(0, 2));
  }
  run_claimed(id, request, run);
  return true;
}

void PgJobQueue::run_claimed(const std::string& id, const std::string& request, int run) {
  {
    std::lock_guard<std::mutex> lock(running_mutex_);
    running_id_ = id;
  }
  lease_lost_ = false;
  cancel_seen_ = false;
  const std::string lease = std::to_string(options_.lease_seconds);

  JobReporter report;
  report.progress = [&](int step, int steps, double seconds) {
    try {
      PgPool::Lease c = pool_.borrow();
      PgResult r = c->exec(
          sql(kReportProgress),
          {pg_text(id), pg_text(worker_id_), pg_text(std::to_string(step)),
           pg_text(std::to_string(steps)), pg_text(std::to_string(seconds)), pg_text(lease)});
      if (r.rows() == 0) {
        lease_lost_ = true;  // the job was taken back: another worker runs it now
      } else if (r.boolean(0, 0)) {
        cancel_seen_ = true;
      }
    } catch (const PgError&) {
      // The database is away: the run goes on, and the result waits for it to return.
    }
    if (lease_lost_ || cancel_seen_ || stopping_) cancel_running_();
  };
  report.preview = [&](int step, std::string png) {
    try {
      PgPool::Lease c = pool_.borrow();
      c->exec(sql(R"sql(UPDATE {s}.jobs SET preview_step = $3, preview = $4
                         WHERE id = $1 AND lease_owner = $2 AND state = 'generating')sql"),
              {pg_text(id), pg_text(worker_id_), pg_text(std::to_string(step)),
               pg_bytes(std::move(png))});
    } catch (const PgError&) {
    }
  };

  enum class Outcome { Completed, Invalid, Failed } outcome = Outcome::Failed;
  JobResult result;
  std::string error;
  const auto started = Clock::now();
  try {
    const nlohmann::json payload = nlohmann::json::parse(request);
    result = run_(payload, report);
    outcome = Outcome::Completed;
  } catch (const InvalidJob& e) {
    outcome = Outcome::Invalid;
    error = e.what();
  } catch (const nlohmann::json::exception& e) {
    outcome = Outcome::Invalid;
    error = std::string("the queued request is not readable: ") + e.what();
  } catch (const std::exception& e) {
    error = e.what();
  }
  last_run_seconds_ = std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started).count());
  {
    std::lock_guard<std::mutex> lock(running_mutex_);
    running_id_.clear();
  }

  // Writes the outcome in one transaction, if the job is still ours; while the database is
  // away, retries with backoff (the lease may run out meanwhile: then the job is someone
  // else's and this result is dropped, so it is stored once).
  auto record = [&](PgConnection& c) {
    c.exec("BEGIN");
    PgResult mine = c.exec(sql(R"sql(SELECT cancel_requested, attempts, max_attempts
                                       FROM {s}.jobs
                                      WHERE id = $1 AND lease_owner = $2
                                        AND state = 'generating' FOR UPDATE)sql"),
                           {pg_text(id), pg_text(worker_id_)});
    if (mine.rows() == 0) {
      c.exec("ROLLBACK");
      return;
    }
    const bool cancelled = mine.boolean(0, 0);
    const int64_t attempts = mine.integer(0, 1);
    const bool last_attempt = attempts >= mine.integer(0, 2);
    const std::string number = std::to_string(run);
    auto note_attempt = [&](const char* outcome_name, const std::string& why) {
      c.exec(sql(R"sql(UPDATE {s}.attempts SET ended = now(), outcome = $3, error = $4
                        WHERE job_id = $1 AND number = $2)sql"),
             {pg_text(id), pg_text(number), pg_text(outcome_name),
              why.empty() ? pg_null() : pg_text(why)});
    };
    auto end_job = [&](const char* state, const char* code, const std::string& message) {
      auto count = [](int n) { return n > 0 ? pg_text(std::to_string(n)) : pg_null(); };
      c.exec(sql(R"sql(UPDATE {s}.jobs SET state = $2, completed = now(), error_code = $3,
                              error_message = $4, output_format = $5, request = '',
                              lease_owner = NULL, lease_deadline = NULL, preview = NULL,
                              fps = $6, frame_count = $7
                        WHERE id = $1)sql"),
             {pg_text(id), pg_text(state), code ? pg_text(code) : pg_null(),
              code ? pg_text(message) : pg_null(),
              result.output_format.empty() ? pg_null() : pg_text(result.output_format),
              count(result.fps), count(result.frame_count)});
    };
    if (outcome == Outcome::Completed && !lease_lost_) {
      for (size_t i = 0; i < result.images.size(); ++i)
        c.exec(sql(R"sql(INSERT INTO {s}.results (job_id, idx, seed, infotext, image)
                          VALUES ($1, $2, $3, $4, $5))sql"),
               {pg_text(id), pg_text(std::to_string(i)), pg_text(std::to_string(result.seeds[i])),
                pg_text(result.infotexts[i]), pg_bytes(result.images[i])});
      end_job("completed", nullptr, "");
      note_attempt("completed", "");
    } else if (cancelled) {
      end_job("cancelled", "cancelled", "job cancelled by client while it was generating");
      note_attempt("cancelled", "");
    } else if (stopping_ && outcome == Outcome::Failed) {
      // This server is stopping: the job goes back for another worker, and the attempt
      // it did not finish does not count.
      c.exec(sql(R"sql(UPDATE {s}.jobs SET state = 'queued', attempts = attempts - 1,
                              lease_owner = NULL, lease_deadline = NULL, started = NULL,
                              step = 0, steps = 0, preview_step = 0, preview = NULL
                        WHERE id = $1)sql"),
             {pg_text(id)});
      note_attempt("interrupted", "the worker shut down");
    } else if (outcome == Outcome::Invalid) {
      end_job("failed", "invalid_request", error);
      note_attempt("failed", error);
    } else if (last_attempt) {
      end_job("failed", "generation_failed",
              "failed on all " + std::to_string(attempts) + " attempts; the last: " + error);
      note_attempt("failed", error);
    } else {
      c.exec(sql(R"sql(UPDATE {s}.jobs SET state = 'queued', lease_owner = NULL,
                              lease_deadline = NULL, started = NULL, step = 0, steps = 0,
                              preview_step = 0, preview = NULL
                        WHERE id = $1)sql"),
             {pg_text(id)});
      note_attempt("failed", error);
    }
    c.exec("COMMIT");
  };
  Backoff backoff;
  for (;;) {
    try {
      PgPool::Lease c = pool_.borrow();
      record(*c);
      database_state.ok();
      return;
    } catch (const PgError& e) {
      if (!e.connection_lost()) {
        cli::log_message(SD_LOG_ERROR, "job %s: cannot record its outcome: %s", id.c_str(),
                         e.what());
        return;  // its lease runs out and another worker runs it again
      }
      database_state.failed(e.what());
      if (stopping_) return;
      sleep_unless_stopping(backoff.next());
    }
  }
}

void PgJobQueue::upkeep_loop() {
  const milliseconds period(std::max(1000, options_.lease_seconds * 1000 / 3));
  while (!stopping_) {
    try {
      PgPool::Lease c = pool_.borrow();
      if (options_.worker) {
        c->exec(sql(R"sql(INSERT INTO {s}.workers (id, model, host) VALUES ($1, $2, $3)
                          ON CONFLICT (id) DO UPDATE SET heartbeat = now())sql"),
                {pg_text(worker_id_), pg_text(options_.model), pg_text(host_name())});
        std::string running;
        {
          std::lock_guard<std::mutex> lock(running_mutex_);
          running = running_id_;
        }
        if (!running.empty()) {
          PgResult r = c->exec(sql(kRenewLease), {pg_text(running), pg_text(worker_id_),
                                                  pg_text(std::to_string(options_.lease_seconds))});
          if (r.rows() == 0) lease_lost_ = true;
          if (r.rows() == 1 && r.boolean(0, 0)) cancel_seen_ = true;
          if (lease_lost_ || cancel_seen_) cancel_running_();
        }
      }
      c->exec(sql(kReapExpiredLeases));
      c->exec(sql("DELETE FROM {s}.jobs WHERE completed < now() - make_interval(secs => $1)"),
              {pg_text(std::to_string(options_.keep_results_seconds))});
      c->exec(sql("DELETE FROM {s}.workers WHERE heartbeat < now() - interval '1 day'"));
      database_state.ok();
    } catch (const PgError& e) {
      database_state.failed(e, "queue upkeep failed");
    }
    sleep_unless_stopping(period);
  }
}

void PgJobQueue::shutdown() {
  if (stopping_.exchange(true)) return;
  { std::lock_guard<std::mutex> lock(notes_mutex_); }
  noted_.notify_all();
  bool running = false;
  {
    std::lock_guard<std::mutex> lock(running_mutex_);
    running = !running_id_.empty();
  }
  if (running) cancel_running_();
  if (worker_.joinable()) worker_.join();
  if (listener_.joinable()) listener_.join();
  if (upkeep_.joinable()) upkeep_.join();
  if (options_.worker) {
    try {
      PgPool::Lease c = pool_.borrow();
      c->exec(sql("DELETE FROM {s}.workers WHERE id = $1"), {pg_text(worker_id_)});
    } catch (const PgError&) {
    }
  }
}

}  // namespace sd::server
