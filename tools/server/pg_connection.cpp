#include "server/pg_connection.h"

#include <poll.h>

#include <cstdlib>
#include <regex>

#include <libpq-fe.h>

namespace sd::server {

namespace {

std::string trimmed_error(const char* text) {
  std::string s = text ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::string redact_database_url(const std::string& url) {
  // URL form: scheme://user:password@host...; key=value form: password=...
  static const std::regex userinfo(R"(^([a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@?]*):[^@/?]*@)");
  static const std::regex keyword(R"((^|[\s?&])password=('[^']*'|[^\s&]*))");
  std::string out = std::regex_replace(url, userinfo, "$1:***@");
  return std::regex_replace(out, keyword, "$1password=***");
}

PgResult::~PgResult() {
  if (r_) PQclear(r_);
}

int PgResult::rows() const {
  return PQntuples(r_);
}

bool PgResult::is_null(int row, int col) const {
  return PQgetisnull(r_, row, col) != 0;
}

std::string PgResult::text(int row, int col) const {
  if (is_null(row, col)) return "";
  return std::string(PQgetvalue(r_, row, col), PQgetlength(r_, row, col));
}

int64_t PgResult::integer(int row, int col) const {
  return is_null(row, col) ? 0 : std::strtoll(PQgetvalue(r_, row, col), nullptr, 10);
}

double PgResult::real(int row, int col) const {
  return is_null(row, col) ? 0 : std::strtod(PQgetvalue(r_, row, col), nullptr);
}

bool PgResult::boolean(int row, int col) const {
  return !is_null(row, col) && PQgetvalue(r_, row, col)[0] == 't';
}

std::string PgResult::bytes(int row, int col) const {
  if (is_null(row, col)) return "";
  size_t length = 0;
  unsigned char* raw =
      PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r_, row, col)), &length);
  if (!raw) throw PgError("out of memory decoding a bytea value", false);
  std::string out(reinterpret_cast<const char*>(raw), length);
  PQfreemem(raw);
  return out;
}

PgConnection::PgConnection(const std::string& url) {
  // The URL's own settings win: they come after the defaults here.
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"5", "sd-server", url.c_str(), nullptr};
  conn_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
    const std::string why = conn_ ? trimmed_error(PQerrorMessage(conn_)) : "out of memory";
    if (conn_) PQfinish(conn_);
    conn_ = nullptr;
    throw PgError("cannot connect to the queue database " + redact_database_url(url) + ": " + why,
                  true);
  }
  // Notices (a schema that already exists, ...) are not the server log's business.
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
}

PgConnection::~PgConnection() {
  if (conn_) PQfinish(conn_);
}

bool PgConnection::reusable() const {
  return conn_ && PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) == PQTRANS_IDLE;
}

namespace {

PgResult checked(pg_conn* conn, PGresult* raw) {
  PgResult r(raw);
  const ExecStatusType status = raw ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return r;
  const bool lost = PQstatus(conn) != CONNECTION_OK;
  std::string why = trimmed_error(raw ? PQresultErrorMessage(raw) : PQerrorMessage(conn));
  if (why.empty()) why = trimmed_error(PQerrorMessage(conn));
  throw PgError((lost ? "lost the queue database: " : "queue database error: ") + why, lost);
}

}  // namespace

void PgConnection::exec_script(const std::string& sql) {
  checked(conn_, PQexec(conn_, sql.c_str()));
}

PgResult PgConnection::exec(const std::string& sql, const std::vector<PgParam>& params) {
  std::vector<const char*> values(params.size());
  std::vector<int> lengths(params.size()), formats(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    values[i] = params[i].value ? params[i].value->data() : nullptr;
    lengths[i] = params[i].value ? static_cast<int>(params[i].value->size()) : 0;
    formats[i] = params[i].binary ? 1 : 0;
  }
  return checked(conn_, PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                                     values.data(), lengths.data(), formats.data(), 0));
}

std::vector<PgConnection::Notification> PgConnection::wait_notifications(int timeout_ms) {
  std::vector<Notification> out;
  auto drain = [&] {
    if (!PQconsumeInput(conn_))
      throw PgError("lost the queue database: " + trimmed_error(PQerrorMessage(conn_)), true);
    while (PGnotify* n = PQnotifies(conn_)) {
      out.push_back({n->relname ? n->relname : "", n->extra ? n->extra : ""});
      PQfreemem(n);
    }
  };
  drain();
  if (!out.empty()) return out;
  pollfd fd{PQsocket(conn_), POLLIN, 0};
  if (fd.fd < 0) throw PgError("lost the queue database: no socket", true);
  if (poll(&fd, 1, timeout_ms) > 0) drain();
  return out;
}

PgPool::PgPool(std::string url, int max_connections)
    : url_(std::move(url)), max_(max_connections) {}

std::unique_ptr<PgConnection> PgPool::connect() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::chrono::steady_clock::now() < retry_at_)
      throw PgError("the queue database " + redact_database_url(url_) +
                        " is unreachable; retrying in the background",
                    true);
  }
  try {
    auto c = std::make_unique<PgConnection>(url_);
    std::lock_guard<std::mutex> lock(mutex_);
    backoff_ = std::chrono::milliseconds(0);
    return c;
  } catch (const PgError&) {
    std::lock_guard<std::mutex> lock(mutex_);
    backoff_ = std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(5000),
        backoff_.count() ? backoff_ * 2 : std::chrono::milliseconds(250));
    retry_at_ = std::chrono::steady_clock::now() + backoff_;
    throw;
  }
}

PgPool::Lease PgPool::borrow() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    freed_.wait(lock, [this] { return !idle_.empty() || open_ < max_; });
    if (!idle_.empty()) {
      std::unique_ptr<PgConnection> c = std::move(idle_.back());
      idle_.pop_back();
      return Lease(*this, std::move(c));
    }
    ++open_;
  }
  try {
    return Lease(*this, connect());
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    --open_;
    freed_.notify_one();
    throw;
  }
}

void PgPool::give_back(std::unique_ptr<PgConnection> c) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (c && c->reusable()) {
    idle_.push_back(std::move(c));
  } else {
    --open_;  // a broken connection (or one left inside a transaction) is dropped; the next
              // borrower opens a fresh one
  }
  freed_.notify_one();
}

PgPool::Lease::~Lease() {
  if (pool_ && c_) pool_->give_back(std::move(c_));
}

}  // namespace sd::server
