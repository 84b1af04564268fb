// sd-server's HTTP surface: the OpenAI (/v1), AUTOMATIC1111 (/sdapi/v1) and native async
// (/sdcpp/v1) endpoints, the web page at /, the token check and CORS. Every error is a
// JSON object {"error": {"code", "message"}} whose message names the problem and the fix.
#pragma once

#include <atomic>
#include <string>

#include "server/generator.h"
#include "server/http_server.h"
#include "server/jobs.h"
#include "server/request.h"
#include "server/server_options.h"

namespace sd::server {

struct ServerState {
  const ServerOptions* options = nullptr;
  RequestContext requests;
  Generator* generator = nullptr;  // null on an --accept-only server (no model loaded)
  Jobs* queue = nullptr;
  std::string index_html;
  preview_t live_preview = PREVIEW_NONE;  // what jobs' live previews show
  std::atomic<bool> stopping{false};
  // Event streams hold a thread each while open (not a request thread): at most this many
  // at once.
  int max_event_streams = 4;
  std::atomic<int> event_streams{0};

  // Jobs go to a shared queue (--queue) as the requests clients sent.
  bool durable_queue() const { return !options->queue_url.empty(); }
};

void install_routes(HttpServer& server, ServerState& state);

// The model file the server was started with (-m, else --diffusion-model), and its stem: the
// name /v1/models and A1111's sd-models show, and the model a shared queue's jobs need.
std::string model_path(const ServerState& s);
std::string model_name(const ServerState& s);

}  // namespace sd::server
