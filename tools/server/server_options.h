// sd-server's own flags, beside sd-cli's model, placement and generation flags (which it
// takes as they are: the generation flags become the defaults of every request).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/option_table.h"

namespace sd::server {

struct ServerOptions {
  std::string listen_ip = "127.0.0.1";
  int listen_port = 1234;          // 0: any free port (printed at start)
  std::string serve_html_path;     // empty: the page built into the binary
  std::string token_file;          // or SD_SERVER_TOKEN
  bool insecure = false;           // allow a non-loopback --listen-ip without a token
  std::string cors_origins;        // comma-separated; empty: no cross-origin access
  std::string hosts;               // --allowed-hosts, comma-separated; "*": any
  int max_body_mb = 32;            // largest request body
  int max_queue = 4;               // jobs waiting behind the running one
  int max_image_side = 2048;       // widest and tallest image a request may ask for
  int max_batch = 8;               // most images per request
  int max_megapixel_steps = 1024;  // most work per request (request.h)
  int sync_timeout = 600;          // seconds a synchronous call waits for its job
  int job_history = 64;            // finished jobs kept for polling

  // The shared durable queue (pg_job_queue.h); empty url: the in-process queue.
  std::string queue_url;  // --queue or SD_QUEUE_URL
  std::string queue_schema = "sdcpp";
  bool accept_only = false;  // --accept-only (or --no-worker): enqueue, never run jobs
  int max_attempts = 3;
  int lease_seconds = 30;
  std::string keep_results = "1h";

  // Filled by resolve().
  std::string token;
  std::vector<std::string> allowed_origins;
  std::vector<std::string> allowed_hosts;  // lower case
  int64_t keep_results_seconds = 3600;
};

// The "Server Options" -h section, writing into `o`.
cli::Section server_section(ServerOptions& o);

// "90", "90s", "30m", "2h", "7d" in seconds; throws sd::Error naming `flag`.
int64_t parse_duration_seconds(const std::string& flag, const std::string& text);

// Reads the token, splits the origin list and checks the combination: a non-loopback
// address needs a token unless --insecure. Throws sd::Error naming the flag and the fix.
void resolve(ServerOptions& o);

}  // namespace sd::server
