// sd-server's HTTP/1.1 layer, on Boost.Beast and Asio. Built so that a client cannot take
// the server from others without the token:
// - connections are read asynchronously on one I/O thread: an idle or slow connection
//   costs a socket and a small buffer, never a request thread;
// - a request's head is bounded in bytes, header count and time, and the gate (host,
//   origin, token) judges it before any body byte is read;
// - a body is read only up to its declared Content-Length within the limit;
// - complete requests run on the worker pool; streamed answers (Server-Sent Events) run on
//   threads of their own, so streams never hold a request thread;
// - past the connection limit, the oldest connection still sending its head is closed.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "server/http_message.h"

namespace sd::server {

struct HttpLimits {
  size_t max_body_bytes = size_t{32} << 20;
  size_t max_header_bytes = size_t{64} << 10;  // the request line and every header line
  size_t max_header_count = 100;
  double head_seconds = 10;             // from the connection (or the last answer) to a full head
  double min_bytes_per_second = 65536;  // a body or an answer slower than this is cut off
  double min_transfer_seconds = 30;     // ... after at least this long
  size_t max_connections = 256;
  size_t worker_threads = 8;
};

class HttpServer {
 public:
  using Handler = std::function<void(const Request&, Response&)>;
  // Judges a request from its head alone (Request::body is empty). Returns true when it
  // answered (the body is then never read and the connection closes); it may also add
  // headers to the answer and let the request go on.
  using Gate = std::function<bool(const Request&, Response&)>;
  // Fills the body of an answer the layer gives itself (404, 413, 431, ...; the status is
  // set), from the layer's explanation `what`.
  using ErrorFiller = std::function<void(const Request&, Response&, const std::string& what)>;

  explicit HttpServer(const HttpLimits& limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void set_gate(Gate gate);
  void set_error_filler(ErrorFiller filler);
  // A route: the method and a regular expression the whole path must match.
  void route(const std::string& method, const std::string& pattern, Handler handler);

  // Binds; port 0 picks a free one. Returns the port, or -1 with errno set.
  int bind(const std::string& ip, int port);
  // Serves until stop(): the requests being handled are answered first.
  void run();
  // From any thread, also before run().
  void stop();

  struct Impl;  // http_server.cpp

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sd::server
