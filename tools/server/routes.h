// sd-server's HTTP surface: the OpenAI (/v1), AUTOMATIC1111 (/sdapi/v1) and native async
// (/sdcpp/v1) endpoints, the web page at /, the token check and CORS. Every error is a
// JSON object {"error": {"code", "message"}} whose message names the problem and the fix.
#pragma once

#include <atomic>
#include <string>

#include <httplib.h>

#include "server/generator.h"
#include "server/jobs.h"
#include "server/request.h"
#include "server/server_options.h"

namespace sd::server {

struct ServerState {
  const ServerOptions* options = nullptr;
  RequestContext requests;
  Generator* generator = nullptr;  // null on an --accept-only server (no model loaded)
  Jobs* queue = nullptr;
  bool durable_queue = false;  // jobs go to a shared queue as the requests clients sent
  std::string index_html;
  preview_t live_preview = PREVIEW_NONE;  // what jobs' live previews show
  std::atomic<bool> stopping{false};
  // Event streams hold a request thread each while open: at most this many at once (half
  // the threads), so that polling, cancel and new jobs are always served.
  int max_event_streams = 4;
  std::atomic<int> event_streams{0};
};

void install_routes(httplib::Server& server, ServerState& state);

}  // namespace sd::server
