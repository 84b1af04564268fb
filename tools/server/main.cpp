// sd-server: one model, loaded once, behind the OpenAI, AUTOMATIC1111 and native async
// image APIs and a web page. Takes sd-cli's model, placement and generation flags (the
// generation flags become every request's defaults) plus the listening options.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>

#include "cli/args.h"
#include "cli/cli_log.h"
#include "server/generator.h"
#include "server/http_server.h"
#include "server/job_queue.h"
#include "server/pg_job_queue.h"
#include "server/request.h"
#include "server/routes.h"
#include "server/server_options.h"
#include "server/web_page.h"
#include "stable-diffusion.h"
#include "tensor/error.h"

#ifndef SD_VERSION
#define SD_VERSION "unknown"
#endif

namespace {

using namespace sd;

std::string read_page(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SD_CHECK(in, "--serve-html-path: cannot read '%s'", path.c_str());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Jobs show a live preview by default: the latent projected to colours costs next to
// nothing per step. An explicit --preview picks another mode, or none.
preview_t live_preview_mode(int argc, char** argv, preview_t parsed) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--preview") == 0 || std::strncmp(argv[i], "--preview=", 10) == 0)
      return parsed;
  return PREVIEW_PROJ;
}

// Connects to the shared queue (before the model loads: a wrong URL is said at once).
std::unique_ptr<server::PgJobQueue> open_shared_queue(const server::ServerOptions& so,
                                                      const server::ServerState& state) {
  server::PgQueueOptions q;
  q.url = so.queue_url;
  q.schema = so.queue_schema;
  q.model = server::model_name(state);  // servers loading the same file share its jobs
  q.worker = !so.accept_only;
  q.max_waiting = so.max_queue;
  q.max_attempts = so.max_attempts;
  q.lease_seconds = so.lease_seconds;
  q.keep_results_seconds = so.keep_results_seconds;
  try {
    auto queue = std::make_unique<server::PgJobQueue>(q);
    const std::string role =
        q.worker ? "worker " + queue->worker_id() : std::string("accepting only");
    cli::log_message(SD_LOG_INFO, "sharing the job queue at %s (schema %s): %s, model '%s'",
                     server::redact_database_url(q.url).c_str(), q.schema.c_str(), role.c_str(),
                     q.model.c_str());
    return queue;
  } catch (const server::PgError& e) {
    fail("%s%s", e.what(),
         e.connection_lost() ? "; is PostgreSQL running and does --queue (or SD_QUEUE_URL) name it?"
                             : "");
  }
}

// How a worker runs a stored request: parsed with this server's limits, as if a client had
// sent it here; a request that can never run is an InvalidJob (no retry).
server::QueuedWork queued_work(const server::ServerState& state, server::Generator* generator) {
  return [&state, generator](const nlohmann::json& payload, const server::JobReporter& report) {
    server::GenRequest request;
    try {
      request = server::parse_queued_request(payload, state.requests);
    } catch (const server::BadRequest& e) {
      throw server::InvalidJob(e.what());
    } catch (const nlohmann::json::exception& e) {
      throw server::InvalidJob(std::string("the queued request is not readable: ") + e.what());
    }
    if (const std::string problem = generator->check(request); !problem.empty())
      throw server::InvalidJob("invalid request: " + server::flags_to_fields(problem));
    return generator->run(request, report);
  };
}

int run(int argc, char** argv) {
  server::ServerOptions so;
  const std::vector<cli::Section> extra = {server::server_section(so)};
  cli::Arguments a = cli::parse_arguments(argc, argv, extra);
  if (a.cli.help) {
    std::printf("sd-server version %s\n%s", SD_VERSION, cli::usage(argv[0], extra).c_str());
    return 0;
  }
  if (a.cli.version) {
    std::printf("sd-server version %s\n", SD_VERSION);
    return 0;
  }
  server::resolve(so);
  cli::set_log_style(a.cli.verbose, a.cli.color);
  // Requests start from the flags as given: a seed of -1 must draw a new seed per request.
  const cli::GenerationOptions defaults = a.generation;
  cli::resolve_and_validate(a);

  server::ServerState state;
  state.options = &so;
  state.requests.defaults = defaults;
  state.requests.context = a.context;
  state.requests.max_image_side = so.max_image_side;
  state.requests.max_batch = so.max_batch;
  state.requests.max_megapixel_steps = so.max_megapixel_steps;
  state.requests.canny = a.cli.canny;
  state.index_html = so.serve_html_path.empty() ? server::kWebPage : read_page(so.serve_html_path);

  // SIGINT/SIGTERM are taken by one thread that stops the server in order; every other
  // thread (created below) inherits the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not end the process

  state.live_preview = live_preview_mode(argc, argv, a.cli.preview_method);
  std::unique_ptr<server::PgJobQueue> shared_queue;
  if (!so.queue_url.empty()) shared_queue = open_shared_queue(so, state);
  // The generator outlives the queue, whose worker calls it.
  std::unique_ptr<server::Generator> generator;
  if (!so.accept_only) generator = std::make_unique<server::Generator>(a, state.live_preview);
  auto cancel_running = [g = generator.get()] {
    if (g) g->cancel();
  };
  std::unique_ptr<server::Jobs> queue;
  if (shared_queue) {
    shared_queue->start(queued_work(state, generator.get()), cancel_running);
    queue = std::move(shared_queue);
  } else {
    queue = std::make_unique<server::JobQueue>(so.max_queue, so.job_history, cancel_running);
  }
  state.generator = generator.get();
  state.queue = queue.get();

  server::HttpLimits limits;
  // Synchronous API calls hold a worker while their job waits; leave room for polling.
  limits.worker_threads = 8 + static_cast<size_t>(std::min(so.max_queue, 56));
  limits.max_body_bytes = static_cast<size_t>(so.max_body_mb) << 20;
  state.max_event_streams = static_cast<int>(limits.worker_threads / 2);
  server::HttpServer http(limits);
  server::install_routes(http, state);
  const int port = http.bind(so.listen_ip, so.listen_port);
  SD_CHECK(port > 0,
           "cannot listen on %s:%d: %s (is another server using the port? choose "
           "another with --listen-port)",
           so.listen_ip.c_str(), so.listen_port, std::strerror(errno));
  // An IPv6 address goes in brackets in a URL.
  const bool v6 = so.listen_ip.find(':') != std::string::npos;
  std::printf("sd-server listening on http://%s%s%s:%d%s\n", v6 ? "[" : "", so.listen_ip.c_str(),
              v6 ? "]" : "", port, so.token.empty() ? "" : " (token required)");
  std::fflush(stdout);

  std::atomic<bool> ended{false};
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (ended) return;  // run() failed and woke us
    cli::log_message(SD_LOG_INFO, "stopping (%s): cancelling the jobs, then closing",
                     strsignal(sig));
    state.stopping = true;
    queue->shutdown();  // the running job stops at its next step; waiting ones are cancelled
    http.stop();        // the requests being handled are answered, then run() returns
  });
  try {
    http.run();
  } catch (...) {
    ended = true;
    pthread_kill(stopper.native_handle(), SIGTERM);
    stopper.join();
    throw;
  }
  stopper.join();
  cli::log_message(SD_LOG_INFO, "stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sd-server: error: %s\n", sd::escape_control_chars(e.what()).c_str());
    return 1;
  }
}
