#include "server/http_server.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "tensor/text.h"

namespace sd::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

struct Route {
  std::string method;
  std::regex pattern;
  HttpServer::Handler handler;
};

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

std::string kib(size_t bytes) {
  return std::to_string(bytes >> 10) + " KiB";
}

class Connection;

}  // namespace

struct HttpServer::Impl {
  explicit Impl(const HttpLimits& l) : limits(l) {}

  HttpLimits limits;
  Gate gate;
  ErrorFiller error_filler;
  std::vector<Route> routes;

  net::io_context io;
  tcp::acceptor acceptor{io};
  net::steady_timer accept_retry{io};
  std::list<std::shared_ptr<Connection>> connections;  // touched on the I/O thread only
  std::unique_ptr<net::thread_pool> workers;

  std::atomic<bool> stopping{false};
  std::mutex mutex;
  std::condition_variable changed;
  int open_streams = 0;

  // The time a transfer of `bytes` may take.
  std::chrono::steady_clock::duration transfer_time(size_t bytes) const {
    return seconds(std::max(limits.min_transfer_seconds,
                            static_cast<double>(bytes) / limits.min_bytes_per_second));
  }

  void accept();
  bool make_room();
  void forget(const std::list<std::shared_ptr<Connection>>::iterator& where) {
    connections.erase(where);
  }
  // Routes a complete request; on a worker thread.
  void handle(Request& request, Response& response);
  void fill_error(const Request& request, Response& response, int status, const std::string& what) {
    response.status = status;
    response.body.clear();
    response.stream = nullptr;
    if (error_filler) error_filler(request, response, what);
    if (response.body.empty()) response.set_content(what + "\n", "text/plain; charset=utf-8");
  }
};

namespace {

// One client connection: heads and bodies are read, answers written, on the I/O thread;
// the request is handled on a worker while no I/O is pending on the connection.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl& server, tcp::socket socket)
      : server_(server),
        stream_(std::move(socket)),
        buffer_(server.limits.max_header_bytes + (size_t{64} << 10)) {}

  std::list<std::shared_ptr<Connection>>::iterator where;

  void start() { read_head(); }
  bool reading_head() const { return reading_head_; }

  // Closes the socket: a pending read or write ends with an error and the connection ends.
  void close() {
    reading_head_ = false;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  // Answers at once with an error and closes (too many connections).
  void refuse(int status, const std::string& what) {
    request_ = Request{};
    response_ = Response{};
    must_close_ = true;
    head_only_ = false;
    server_.fill_error(request_, response_, status, what);
    send();
  }

 private:
  void read_head() {
    if (server_.stopping) return finish();
    reading_head_ = true;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.limits.max_header_bytes));
    // Judged from the head, after the gate. (Not boost::none: Boost 1.74 compares a length
    // with an empty limit as exceeding it.)
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    stream_.expires_after(seconds(server_.limits.head_seconds));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_head(ec); });
  }

  void on_head(beast::error_code ec) {
    reading_head_ = false;
    request_ = Request{};
    response_ = Response{};
    if (ec == http::error::header_limit)
      return refuse(431, "the request's head is larger than " +
                             kib(server_.limits.max_header_bytes) +
                             "; send fewer or shorter headers");
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset ||
        ec == net::error::bad_descriptor)
      return finish();  // gone, idle too long or too slow: nobody to answer
    if (ec == http::error::bad_content_length || ec == http::error::bad_transfer_encoding)
      return refuse(400,
                    "the request's body length is malformed or given more than one way "
                    "(Content-Length twice, or beside Transfer-Encoding); send one Content-Length");
    if (ec) return refuse(400, "the request is not valid HTTP/1.1 (" + ec.message() + ")");

    const auto& head = parser_->get();
    request_.method = std::string(head.method_string());
    const std::string_view target(head.target().data(), head.target().size());
    const size_t question = target.find('?');
    request_.path = std::string(target.substr(0, question));
    if (question != std::string_view::npos)
      request_.query = std::string(target.substr(question + 1));
    for (const auto& field : head)
      request_.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    if (request_.headers.size() > server_.limits.max_header_count)
      return refuse(431, "the request has " + std::to_string(request_.headers.size()) +
                             " header lines, more than the " +
                             std::to_string(server_.limits.max_header_count) + " accepted");
    keep_alive_ = head.keep_alive();
    head_only_ = request_.method == "HEAD";

    try {
      if (server_.gate && server_.gate(request_, response_)) {
        // A body is left unread, so the connection cannot go on; without one it can.
        must_close_ = parser_->chunked() || parser_->content_length().value_or(0) > 0;
        return send();
      }
    } catch (const std::exception& e) {
      return refuse(500, std::string("internal error: ") + e.what());
    }
    if (parser_->chunked()) return refuse(411, "send the request body with a Content-Length");
    const uint64_t length = parser_->content_length().value_or(0);
    if (length > server_.limits.max_body_bytes)
      return refuse(413, "the request body is larger than the server's limit");
    parser_->body_limit(server_.limits.max_body_bytes);
    if (parser_->is_done()) return dispatch();
    if (beast::iequals(head[http::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      stream_.expires_after(server_.transfer_time(kContinue.size()));
      return net::async_write(stream_, net::buffer(kContinue),
                              [self = shared_from_this(), length](beast::error_code ec, size_t) {
                                if (ec) return self->finish();
                                self->read_body(length);
                              });
    }
    read_body(length);
  }

  void read_body(uint64_t length) {
    stream_.expires_after(server_.transfer_time(length));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->finish();  // gone, or too slow
                       self->request_.body = std::move(self->parser_->get().body());
                       self->dispatch();
                     });
  }

  void dispatch() {
    net::post(*server_.workers, [self = shared_from_this()] {
      try {
        self->server_.handle(self->request_, self->response_);
      } catch (...) {
        // Even the error answer failed (out of memory): a bare 500.
        self->response_ = Response{};
        self->response_.status = 500;
        self->response_.set_content("internal error\n", "text/plain");
      }
      net::post(self->server_.io, [self] { self->send(); });
    });
  }

  template <class Message>
  void write(std::shared_ptr<Message> message, size_t bytes) {
    stream_.expires_after(server_.transfer_time(bytes));
    http::async_write(
        stream_, *message,
        [self = shared_from_this(), message](beast::error_code ec, size_t) { self->on_sent(ec); });
  }

  template <class Message>
  void fill_head(Message& message) {
    message.version(11);
    message.result(static_cast<unsigned>(response_.status));
    for (const auto& [name, value] : response_.headers) message.insert(name, value);
    if (!response_.content_type.empty())
      message.set(http::field::content_type, response_.content_type);
    message.keep_alive(keep_alive_ && !must_close_ && !server_.stopping);
  }

  void send() {
    if (response_.stream && !head_only_) return start_stream();
    if (head_only_) {
      auto message = std::make_shared<http::response<http::empty_body>>();
      fill_head(*message);
      message->content_length(response_.body.size());
      return write(message, 0);
    }
    auto message = std::make_shared<http::response<http::string_body>>();
    fill_head(*message);
    const size_t bytes = response_.body.size();
    message->body() = std::move(response_.body);
    message->prepare_payload();
    write(message, bytes);
  }

  void on_sent(beast::error_code ec) {
    if (ec) return finish();
    if (must_close_ || !keep_alive_ || server_.stopping) return linger_close();
    read_head();
  }

  // Stops sending and reads what the client still sends for a moment before closing, so
  // that the answer is not lost to a reset (closing with unread data resets the connection).
  void linger_close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(1));
    drain(size_t{1} << 20);
  }

  void drain(size_t budget) {
    stream_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this(), budget](beast::error_code ec, size_t n) {
                              if (ec || n >= budget) return self->finish();
                              self->drain(budget - n);
                            });
  }

  // A streamed answer: chunks written as the producer makes them, on a thread of its own.
  void start_stream() {
    auto message = std::make_shared<http::response<http::empty_body>>();
    must_close_ = true;  // a stream ends with its connection
    fill_head(*message);
    message->chunked(true);
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*message);
    stream_.expires_after(server_.transfer_time(0));
    http::async_write_header(
        stream_, *serializer,
        [self = shared_from_this(), message, serializer](beast::error_code ec, size_t) {
          if (ec) return self->finish();
          {
            std::lock_guard lock(self->server_.mutex);
            ++self->server_.open_streams;
          }
          try {
            self->start_stream_thread();
          } catch (const std::system_error&) {  // no thread to be had: end the answer
            std::lock_guard lock(self->server_.mutex);
            --self->server_.open_streams;
            self->finish();
          }
        });
  }

  void start_stream_thread() {
    std::thread([self = shared_from_this()]() mutable {
      HttpServer::Impl& server = self->server_;
      self->run_stream();
      self.reset();  // before the count: run() may end once it reaches zero
      std::lock_guard lock(server.mutex);
      --server.open_streams;
      server.changed.notify_all();
    }).detach();
  }

  class Sink : public StreamSink {
   public:
    explicit Sink(Connection& connection) : connection_(connection) {}
    bool write(std::string_view data) override {
      if (data.empty()) return true;
      return connection_.write_from_stream(std::make_shared<std::string>(data));
    }

   private:
    Connection& connection_;
  };

  // Writes a chunk (null: the last, empty one) on the I/O thread and waits for it; false
  // when the write failed or the server stops. The chunk is owned by the write, which may
  // outlive the wait when the server stops.
  bool write_from_stream(std::shared_ptr<std::string> chunk) {
    auto written = std::make_shared<std::promise<bool>>();
    std::future<bool> result = written->get_future();
    net::post(server_.io, [self = shared_from_this(), chunk, written] {
      auto done = [chunk, written](beast::error_code ec, size_t) { written->set_value(!ec); };
      if (!chunk) {
        self->stream_.expires_after(self->server_.transfer_time(0));
        return net::async_write(self->stream_, http::make_chunk_last(), done);
      }
      self->stream_.expires_after(self->server_.transfer_time(chunk->size()));
      net::async_write(self->stream_, http::make_chunk(net::buffer(*chunk)), done);
    });
    while (result.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready)
      if (server_.stopping) return false;
    return result.get();
  }

  void run_stream() {
    Sink sink(*this);
    try {
      while (!server_.stopping && response_.stream(sink)) {
      }
    } catch (const std::exception&) {
      // The producer failed: end the stream as if it had finished.
    }
    if (!server_.stopping) write_from_stream(nullptr);
    net::post(server_.io, [self = shared_from_this()] { self->finish(); });
  }

  void finish() {
    if (finished_) return;
    finished_ = true;
    close();
    server_.forget(where);
  }

  HttpServer::Impl& server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Request request_;
  Response response_;
  bool reading_head_ = false;
  bool keep_alive_ = true;
  bool head_only_ = false;
  bool must_close_ = false;
  bool finished_ = false;
  char discard_[4096];
};

}  // namespace

void HttpServer::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open() || stopping) return;
    if (ec) {
      // Out of descriptors (or an aborted handshake): try again in a moment, not at once.
      accept_retry.expires_after(std::chrono::milliseconds(100));
      accept_retry.async_wait([this](beast::error_code) { accept(); });
      return;
    }
    const bool room = connections.size() < limits.max_connections || make_room();
    auto connection = std::make_shared<Connection>(*this, std::move(socket));
    connections.push_back(connection);
    connection->where = std::prev(connections.end());
    if (!room)
      connection->refuse(503, "the server has " + std::to_string(limits.max_connections) +
                                  " connections busy; retry in a moment");
    else
      connection->start();
    accept();
  });
}

// The oldest connection still sending its head (or idle between requests) gives way.
bool HttpServer::Impl::make_room() {
  for (const auto& connection : connections) {
    if (connection->reading_head()) {
      connection->close();
      return true;
    }
  }
  return false;
}

void HttpServer::Impl::handle(Request& request, Response& response) {
  const std::string method = request.method == "HEAD" ? "GET" : request.method;
  for (const Route& route : routes) {
    std::smatch match;
    if (route.method != method || !std::regex_match(request.path, match, route.pattern)) continue;
    request.matches.assign(match.begin(), match.end());
    try {
      route.handler(request, response);
    } catch (const std::exception& e) {
      fill_error(request, response, 500, std::string("internal error: ") + e.what());
    }
    return;
  }
  fill_error(request, response, 404, "no endpoint " + request.method + " " + request.path);
}

HttpServer::HttpServer(const HttpLimits& limits) : impl_(std::make_unique<Impl>(limits)) {}

HttpServer::~HttpServer() = default;

void HttpServer::set_gate(Gate gate) {
  impl_->gate = std::move(gate);
}

void HttpServer::set_error_filler(ErrorFiller filler) {
  impl_->error_filler = std::move(filler);
}

void HttpServer::route(const std::string& method, const std::string& pattern, Handler handler) {
  impl_->routes.push_back({method, std::regex(pattern), std::move(handler)});
}

int HttpServer::bind(const std::string& ip, int port) {
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(ip, ec);
  if (ec) {
    errno = EINVAL;
    return -1;
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    errno = ec.value();
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
    return -1;
  }
  return impl_->acceptor.local_endpoint().port();
}

void HttpServer::run() {
  Impl& s = *impl_;
  s.workers = std::make_unique<net::thread_pool>(std::max<size_t>(1, s.limits.worker_threads));
  auto keep_running = net::make_work_guard(s.io);
  net::post(s.io, [&s] { s.accept(); });
  std::thread io_thread([&s] {
    // A handler that throws (out of memory) loses its connection, not the server.
    while (true) {
      try {
        s.io.run();
        return;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sd-server: a connection failed: %s\n", e.what());
      }
    }
  });

  {
    std::unique_lock lock(s.mutex);
    s.changed.wait(lock, [&s] { return s.stopping.load(); });
  }
  // No new connections; idle ones close; the requests being handled are answered.
  net::post(s.io, [&s] {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    s.accept_retry.cancel();
    for (const auto& connection : s.connections)
      if (connection->reading_head()) connection->close();
  });
  s.workers->join();
  // The last answers are being written: give them a moment, then close everything.
  for (int i = 0; i < 40; ++i) {
    std::promise<bool> any;
    net::post(s.io, [&s, &any] { any.set_value(!s.connections.empty()); });
    if (!any.get_future().get()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  net::post(s.io, [&s] {
    for (const auto& connection : s.connections) connection->close();
    s.io.stop();
  });
  io_thread.join();
  keep_running.reset();
  {
    std::unique_lock lock(s.mutex);
    s.changed.wait(lock, [&s] { return s.open_streams == 0; });
  }
  // What the closes and the streams left queued ends the connections.
  s.io.restart();
  s.io.poll();
  s.connections.clear();
}

void HttpServer::stop() {
  std::lock_guard lock(impl_->mutex);
  impl_->stopping = true;
  impl_->changed.notify_all();
}

}  // namespace sd::server
