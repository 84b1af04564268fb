// PostgreSQL through libpq (Debian's libpq-dev): a connection that runs parameterized
// statements and receives LISTEN notifications, and a pool of them that reconnects with
// backoff. Everything that fails throws PgError, whose message never holds the password.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

struct pg_conn;
struct pg_result;

namespace sd::server {

class PgError : public std::runtime_error {
 public:
  PgError(const std::string& message, bool connection_lost)
      : std::runtime_error(message), connection_lost_(connection_lost) {}
  // The server cannot be reached (or went away mid-statement): retry later. Otherwise the
  // statement itself failed.
  bool connection_lost() const { return connection_lost_; }

 private:
  bool connection_lost_;
};

// A statement's parameter: text (SQL NULL when empty optional) or raw bytes for bytea.
struct PgParam {
  std::optional<std::string> value;
  bool binary = false;
};
inline PgParam pg_text(std::string v) {
  return {std::move(v), false};
}
inline PgParam pg_bytes(std::string v) {
  return {std::move(v), true};
}
inline PgParam pg_null() {
  return {std::nullopt, false};
}

class PgResult {
 public:
  explicit PgResult(pg_result* r) : r_(r) {}
  PgResult(PgResult&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  PgResult& operator=(PgResult&&) = delete;
  ~PgResult();

  int rows() const;
  bool is_null(int row, int col) const;
  std::string text(int row, int col) const;  // "" for NULL
  int64_t integer(int row, int col) const;   // 0 for NULL
  double real(int row, int col) const;
  bool boolean(int row, int col) const;
  std::string bytes(int row, int col) const;  // a bytea column

 private:
  pg_result* r_;
};

// "postgresql://user:***@host/db": the URL as it may be logged.
std::string redact_database_url(const std::string& url);

class PgConnection {
 public:
  // Connects (a URL or key=value string, as libpq takes it); throws PgError.
  explicit PgConnection(const std::string& url);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  PgResult exec(const std::string& sql, const std::vector<PgParam>& params = {});
  // Several statements separated by ';', without parameters (a migration).
  void exec_script(const std::string& sql);
  // Connected and outside any transaction: fit for the next borrower.
  bool reusable() const;

  struct Notification {
    std::string channel, payload;
  };
  // Waits up to `timeout_ms` for notifications of the channels this connection LISTENs
  // to and returns those that came (none on timeout).
  std::vector<Notification> wait_notifications(int timeout_ms);

 private:
  pg_conn* conn_ = nullptr;
};

// Connections shared by threads, one statement sequence per borrower. After a failed
// connect, new connects wait out a backoff (0.25 s doubling to 5 s) and fail fast meanwhile,
// so a database that is down costs requests nothing but a 503.
class PgPool {
 public:
  PgPool(std::string url, int max_connections);

  class Lease {
   public:
    Lease(PgPool& pool, std::unique_ptr<PgConnection> c) : pool_(&pool), c_(std::move(c)) {}
    Lease(Lease&&) = default;
    ~Lease();
    PgConnection* operator->() { return c_.get(); }
    PgConnection& operator*() { return *c_; }

   private:
    PgPool* pool_;
    std::unique_ptr<PgConnection> c_;
  };
  Lease borrow();  // throws PgError (connection_lost) when none can be had
  const std::string& url() const { return url_; }
  // Opens a connection outside the pool (a listener's), with the same backoff.
  std::unique_ptr<PgConnection> connect();

 private:
  void give_back(std::unique_ptr<PgConnection> c);

  const std::string url_;
  const int max_;
  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<PgConnection>> idle_;
  int open_ = 0;
  std::chrono::steady_clock::time_point retry_at_{};
  std::chrono::milliseconds backoff_{0};
};

}  // namespace sd::server
