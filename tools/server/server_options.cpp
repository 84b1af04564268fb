#include "server/server_options.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "backend/rpc/access.h"
#include "tensor/error.h"
#include "tensor/text.h"

namespace sd::server {

namespace {

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

int bounded(const std::string& flag, const std::string& text, int lo, int hi) {
  const int v = cli::parse_int(flag, text);
  SD_CHECK(v >= lo && v <= hi, "%s must be from %d to %d, got %d", flag.c_str(), lo, hi, v);
  return v;
}

cli::Option bounded_option(std::string long_name, std::string description, int* target, int lo,
                           int hi) {
  cli::Option o = cli::int_option("", long_name, std::move(description), target);
  o.apply = [=](const std::string& value) { *target = bounded(long_name, value, lo, hi); };
  return o;
}

}  // namespace

cli::Section server_section(ServerOptions& o) {
  cli::Section s{"Server Options", {}};
  auto& v = s.options;
  v.push_back(cli::text_option("", "--listen-ip", "address to listen on (default: 127.0.0.1)",
                               &o.listen_ip));
  v.push_back(cli::text_option("", "--serve-html-path",
                               "serve this HTML file at / instead of the built-in page",
                               &o.serve_html_path));
  v.push_back(cli::text_option("", "--token-file",
                               "clients must send 'Authorization: Bearer TOKEN' with this "
                               "file's token (or set SD_SERVER_TOKEN)",
                               &o.token_file));
  v.push_back(cli::text_option("", "--cors-origins",
                               "origins allowed to call the API from a browser, comma-separated, "
                               "e.g. http://localhost:3000 (default: none)",
                               &o.cors_origins, ','));
  v.push_back(cli::text_option("", "--allowed-hosts",
                               "host names clients may reach this server by, comma-separated, "
                               "or * for any (default: a loopback server answers to loopback "
                               "names only, a network one to any)",
                               &o.hosts, ','));
  v.push_back(bounded_option("--listen-port",
                             "port to listen on; 0 picks a free one (default: 1234)",
                             &o.listen_port, 0, 65535));
  v.push_back(bounded_option("--max-body-mb", "largest request body in MiB (default: 32)",
                             &o.max_body_mb, 1, 4096));
  v.push_back(bounded_option("--max-queue",
                             "jobs that may wait behind the running one; more get 429 (default: 4)",
                             &o.max_queue, 0, 100000));
  v.push_back(bounded_option("--max-image-side",
                             "largest width or height a request may ask for (default: 2048)",
                             &o.max_image_side, 64, 16384));
  v.push_back(bounded_option("--max-batch", "most images one request may ask for (default: 8)",
                             &o.max_batch, 1, 64));
  v.push_back(bounded_option("--max-megapixel-steps",
                             "most work one request may ask for: images x width x height x "
                             "steps (plus the hires pass), in millions (default: 1024)",
                             &o.max_megapixel_steps, 1, 1000000000));
  v.push_back(bounded_option("--sync-timeout",
                             "seconds a synchronous call (OpenAI, A1111) waits for its job "
                             "before answering 504; the job goes on (default: 600)",
                             &o.sync_timeout, 1, 86400));
  v.push_back(bounded_option("--job-history", "finished jobs kept for polling (default: 64)",
                             &o.job_history, 1, 100000));
  v.push_back(cli::text_option("", "--queue",
                               "share a durable job queue with other sd-servers: "
                               "postgresql://USER:PASSWORD@HOST/DB (or set SD_QUEUE_URL); "
                               "see docs/server.md",
                               &o.queue_url));
  v.push_back(cli::text_option("", "--queue-schema",
                               "the database schema of the queue's tables (default: sdcpp)",
                               &o.queue_schema));
  v.push_back(cli::switch_option("", "--accept-only",
                                 "with --queue: take requests and serve results, run no jobs "
                                 "(the model is not loaded; its flags name what jobs need)",
                                 &o.accept_only));
  v.push_back(cli::switch_option("", "--no-worker", "the same as --accept-only", &o.accept_only));
  v.push_back(bounded_option("--max-attempts",
                             "with --queue: runs a job gets when its worker fails or dies "
                             "before it fails for good (default: 3)",
                             &o.max_attempts, 1, 100));
  v.push_back(bounded_option("--lease-seconds",
                             "with --queue: a worker that stops renewing its lease this long "
                             "loses its job to another (default: 30)",
                             &o.lease_seconds, 3, 3600));
  v.push_back(cli::text_option("", "--keep-results",
                               "with --queue: how long finished jobs and their images are kept, "
                               "e.g. 90s, 30m, 2h, 7d (default: 1h)",
                               &o.keep_results));
  v.push_back(cli::switch_option("", "--insecure",
                                 "allow a non-loopback --listen-ip without a token", &o.insecure));
  return s;
}

int64_t parse_duration_seconds(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long count = std::strtoll(text.c_str(), &end, 10);
  const std::string unit = end ? end : "";
  const int64_t scale = unit.empty() || unit == "s" ? 1
                        : unit == "m"               ? 60
                        : unit == "h"               ? 3600
                        : unit == "d"               ? 86400
                                                    : 0;
  SD_CHECK(!text.empty() && end != text.c_str() && errno == 0 && scale > 0 && count >= 0 &&
               count <= int64_t{3650} * 86400 / scale,
           "%s takes a duration such as 90s, 30m, 2h or 7d (up to 3650d), got '%s'", flag.c_str(),
           text.c_str());
  return count * scale;
}

void resolve(ServerOptions& o) {
  if (const char* t = std::getenv("SD_SERVER_TOKEN")) o.token = trimmed(t);
  if (o.queue_url.empty())
    if (const char* q = std::getenv("SD_QUEUE_URL")) o.queue_url = trimmed(q);
  if (o.queue_url.empty()) {
    SD_CHECK(!o.accept_only,
             "--accept-only runs no jobs, so it needs a shared queue: give --queue "
             "postgresql://... (or SD_QUEUE_URL)");
  } else {
    SD_CHECK(o.queue_url.rfind("postgresql://", 0) == 0 || o.queue_url.rfind("postgres://", 0) == 0,
             "--queue takes a PostgreSQL URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE "
             "(got something else)");
    SD_CHECK(!o.queue_schema.empty() && o.queue_schema.size() <= 48 &&
                 o.queue_schema.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") ==
                     std::string::npos &&
                 !std::isdigit(static_cast<unsigned char>(o.queue_schema[0])),
             "--queue-schema must be a lower-case name of letters, digits and _ (up to 48, not "
             "starting with a digit), got '%s'",
             o.queue_schema.c_str());
  }
  o.keep_results_seconds = parse_duration_seconds("--keep-results", o.keep_results);
  if (!o.token_file.empty()) {
    std::ifstream in(o.token_file, std::ios::binary);
    SD_CHECK(in, "--token-file: cannot read '%s'", o.token_file.c_str());
    std::stringstream s;
    s << in.rdbuf();
    o.token = trimmed(s.str());
    SD_CHECK(!o.token.empty(), "--token-file: '%s' is empty", o.token_file.c_str());
  }
  // Anyone who reaches the port could otherwise run work here and read every result.
  SD_CHECK(rpc::is_loopback_host(o.listen_ip) || !o.token.empty() || o.insecure,
           "sd-server would listen on %s without a token, so anyone who can reach it could use "
           "this machine; give a token with --token-file (or SD_SERVER_TOKEN), or pass "
           "--insecure",
           o.listen_ip.c_str());
  o.allowed_origins.clear();
  for (size_t start = 0; start < o.cors_origins.size();) {
    size_t end = o.cors_origins.find(',', start);
    if (end == std::string::npos) end = o.cors_origins.size();
    const std::string origin = o.cors_origins.substr(start, end - start);
    SD_CHECK(origin != "*",
             "--cors-origins: '*' would let every web page use this server; list the origins");
    if (!origin.empty()) o.allowed_origins.push_back(origin);
    start = end + 1;
  }
  o.allowed_hosts.clear();
  for (size_t start = 0; start < o.hosts.size();) {
    size_t end = o.hosts.find(',', start);
    if (end == std::string::npos) end = o.hosts.size();
    const std::string host = ascii_lower(trimmed(o.hosts.substr(start, end - start)));
    SD_CHECK(host.find_first_of(":/[] ") == std::string::npos,
             "--allowed-hosts: '%s' is not a host name (give names without port or scheme, "
             "e.g. sd.example.com)",
             host.c_str());
    if (!host.empty()) o.allowed_hosts.push_back(host);
    start = end + 1;
  }
}

}  // namespace sd::server
