// The HTTP layer against the attacks a server on a network meets: header floods, slow and
// idle connections, bodies sent to a server that will refuse them, workers kept busy. Raw
// sockets over loopback; every read is bounded (20 s) so that a hang fails, not blocks.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace sd::server {
namespace {

class Socket {
 public:
  explicit Socket(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    timeval bound{20, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  ~Socket() { close(fd_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool connected() const { return connected_; }

  // False once the server has closed its side (a flood is cut off).
  bool send_all(const std::string& data) {
    for (size_t sent = 0; sent < data.size();) {
      const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // Everything until the server closes (or the bound passes).
  std::string read_all() {
    std::string out;
    char chunk[4096];
    ssize_t n;
    while ((n = recv(fd_, chunk, sizeof chunk, 0)) > 0) out.append(chunk, static_cast<size_t>(n));
    return out;
  }

  // Reads until `text` has arrived; what came, "" if the connection ended first.
  std::string read_until(const std::string& text) {
    char c;
    while (received_.find(text) == std::string::npos) {
      if (recv(fd_, &c, 1, 0) != 1) return {};
      received_ += c;
    }
    std::string out = received_.substr(0, received_.find(text) + text.size());
    received_.erase(0, out.size());
    return out;
  }

  // One answer with a Content-Length body, on a connection that stays open.
  std::string read_answer() {
    std::string head = read_until("\r\n\r\n");
    const size_t at = head.find("Content-Length: ");
    if (head.empty() || at == std::string::npos) return head;
    size_t length = std::stoul(head.substr(at + 16));
    char c;
    while (received_.size() < length && recv(fd_, &c, 1, 0) == 1) received_ += c;
    head += received_.substr(0, length);
    received_.erase(0, length);
    return head;
  }

  // True when the server closed the connection (a read ends without data).
  bool closed_by_server() {
    char c;
    return recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_;
  bool connected_ = false;
  std::string received_;
};

// A server on a free loopback port, run on its own thread.
class Served {
 public:
  explicit Served(const HttpLimits& limits) : server(limits) {
    server.route("GET", "/hello",
                 [](const Request&, Response& res) { res.set_content("hello", "text/plain"); });
    server.route("GET", "/items/([0-9]+)", [](const Request& req, Response& res) {
      res.set_content("item " + req.matches[1] + " query " + req.query, "text/plain");
    });
    server.route("POST", "/echo", [](const Request& req, Response& res) {
      res.set_content(req.body, "text/plain");
    });
    server.set_gate([](const Request& req, Response& res) {
      if (req.header("Authorization") == "ok" || req.path == "/hello") return false;
      res.status = 401;
      res.set_content("who are you?", "text/plain");
      return true;
    });
    server.set_error_filler([](const Request&, Response& res, const std::string& what) {
      res.set_content("error: " + what, "text/plain");
    });
  }
  ~Served() { stop(); }

  void start() {
    port = server.bind("127.0.0.1", 0);
    ASSERT_GT(port, 0);
    thread = std::thread([this] { server.run(); });
  }
  void stop() {
    server.stop();
    if (thread.joinable()) thread.join();
  }

  HttpServer server;
  std::thread thread;
  int port = 0;
};

std::string get(const std::string& path, const std::string& headers = "Authorization: ok\r\n") {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + "\r\n";
}

TEST(HttpServer, RoutesRequestsAndKeepsTheConnection) {
  Served s(HttpLimits{});
  s.start();
  Socket c(s.port);
  ASSERT_TRUE(c.connected());
  // Two requests in one write (pipelined), then a third on the same connection.
  ASSERT_TRUE(c.send_all(get("/hello") + get("/items/42?x=1")));
  EXPECT_NE(c.read_answer().find("\r\n\r\nhello"), std::string::npos);
  EXPECT_NE(c.read_answer().find("item 42 query x=1"), std::string::npos);
  ASSERT_TRUE(c.send_all(get("/nowhere")));
  const std::string missing = c.read_answer();
  EXPECT_EQ(missing.rfind("HTTP/1.1 404", 0), 0u) << missing;
  EXPECT_NE(missing.find("error: no endpoint GET /nowhere"), std::string::npos) << missing;
  ASSERT_TRUE(c.send_all("HEAD /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string head = c.read_all();
  EXPECT_NE(head.find("Content-Length: 5\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("hello"), std::string::npos) << head;
}

TEST(HttpServer, RefusesAHeaderFloodWithoutReadingIt) {
  HttpLimits limits;
  limits.max_header_bytes = 8 << 10;
  Served s(limits);
  s.start();
  Socket c(s.port);
  std::string flood = "GET /hello HTTP/1.1\r\nHost: x\r\n";
  while (flood.size() < (size_t{32} << 20)) flood += "X-Filler: " + std::string(100, 'a') + "\r\n";
  // The server answers and closes long before 32 MiB are sent (what it reads: the head's
  // limit, then at most 1 MiB drained so that its answer is not lost to a reset).
  EXPECT_FALSE(c.send_all(flood));
  const std::string answer = c.read_all();
  if (!answer.empty()) {
    EXPECT_EQ(answer.rfind("HTTP/1.1 431", 0), 0u) << answer.substr(0, 200);
  }
  // A head just over the limit, sent whole, is answered 431.
  Socket d(s.port);
  std::string over =
      "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(9 << 10, 'b') + "\r\n\r\n";
  ASSERT_TRUE(d.send_all(over));
  const std::string refused = d.read_all();
  EXPECT_EQ(refused.rfind("HTTP/1.1 431", 0), 0u) << refused.substr(0, 200);
  EXPECT_NE(refused.find("larger than 8 KiB"), std::string::npos) << refused;
}

TEST(HttpServer, RefusesTooManyHeaderLines) {
  Served s(HttpLimits{});
  s.start();
  Socket c(s.port);
  std::string many = "GET /hello HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 150; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
  ASSERT_TRUE(c.send_all(many + "\r\n"));
  const std::string answer = c.read_all();
  EXPECT_EQ(answer.rfind("HTTP/1.1 431", 0), 0u) << answer.substr(0, 200);
  EXPECT_NE(answer.find("151 header lines"), std::string::npos) << answer;
}

TEST(HttpServer, JudgesTheHeadBeforeAnyBodyByte) {
  HttpLimits limits;
  limits.max_body_bytes = size_t{1} << 30;
  Served s(limits);
  s.start();
  // A client without the token announces 512 MiB and sends none of it: answered at once.
  Socket c(s.port);
  ASSERT_TRUE(c.send_all("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 536870912\r\n\r\n"));
  const std::string answer = c.read_all();
  EXPECT_EQ(answer.rfind("HTTP/1.1 401", 0), 0u) << answer;
  // With the token, a body past the limit is refused from its length alone.
  Socket d(s.port);
  ASSERT_TRUE(d.send_all(
      "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: ok\r\nContent-Length: 2147483648\r\n\r\n"));
  EXPECT_EQ(d.read_all().rfind("HTTP/1.1 413", 0), 0u);
  // A chunked body, whose size is known only once read, is refused.
  Socket e(s.port);
  ASSERT_TRUE(e.send_all(
      "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: ok\r\nTransfer-Encoding: chunked\r\n\r\n"));
  EXPECT_EQ(e.read_all().rfind("HTTP/1.1 411", 0), 0u);
}

TEST(HttpServer, AsksForTheBodyOnExpectContinue) {
  Served s(HttpLimits{});
  s.start();
  Socket c(s.port);
  ASSERT_TRUE(
      c.send_all("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: ok\r\nExpect: 100-continue\r\n"
                 "Content-Length: 5\r\n\r\n"));
  EXPECT_EQ(c.read_until("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(c.send_all("12345"));
  const std::string answer = c.read_answer();
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("\r\n\r\n12345"), std::string::npos) << answer;
}

TEST(HttpServer, IdleAndSlowConnectionsHoldNoWorker) {
  HttpLimits limits;
  limits.worker_threads = 1;
  Served s(limits);
  s.start();
  std::vector<std::unique_ptr<Socket>> idle;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(std::make_unique<Socket>(s.port));
    if (i % 2) idle.back()->send_all("POST /echo HTTP/1.1\r\nHost: x\r\n");  // half a head
  }
  Socket c(s.port);
  ASSERT_TRUE(c.send_all(get("/hello")));
  EXPECT_NE(c.read_answer().find("hello"), std::string::npos);
}

TEST(HttpServer, ClosesAHeadThatTakesTooLong) {
  HttpLimits limits;
  limits.head_seconds = 0.3;
  Served s(limits);
  s.start();
  Socket idle(s.port);
  Socket slow(s.port);
  ASSERT_TRUE(slow.send_all("GET /hello HTTP/1.1\r\n"));
  EXPECT_TRUE(idle.closed_by_server());
  EXPECT_TRUE(slow.closed_by_server());
}

TEST(HttpServer, TheOldestIdleConnectionGivesWayPastTheLimit) {
  HttpLimits limits;
  limits.max_connections = 4;
  Served s(limits);
  s.start();
  std::vector<std::unique_ptr<Socket>> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(std::make_unique<Socket>(s.port));
  // Let the server accept them in order before the next arrives.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Socket c(s.port);
  ASSERT_TRUE(c.send_all(get("/hello")));
  EXPECT_NE(c.read_answer().find("hello"), std::string::npos);
  EXPECT_TRUE(idle.front()->closed_by_server());
}

TEST(HttpServer, TheGateAnswersWhileEveryWorkerIsBusy) {
  HttpLimits limits;
  limits.worker_threads = 1;
  Served s(limits);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> entered{false};
  s.server.route("GET", "/slow", [&](const Request&, Response& res) {
    entered = true;
    released.wait();
    res.set_content("slow", "text/plain");
  });
  s.start();
  Socket busy(s.port);
  ASSERT_TRUE(busy.send_all(get("/slow")));
  while (!entered) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // Refused from its head; with no body left unread, its connection stays open.
  Socket stranger(s.port);
  ASSERT_TRUE(stranger.send_all(get("/items/1", "") + get("/items/2", "")));
  EXPECT_EQ(stranger.read_answer().rfind("HTTP/1.1 401", 0), 0u);
  EXPECT_EQ(stranger.read_answer().rfind("HTTP/1.1 401", 0), 0u);
  release.set_value();
  EXPECT_NE(busy.read_answer().find("slow"), std::string::npos);
}

TEST(HttpServer, StreamsRunOffTheWorkers) {
  HttpLimits limits;
  limits.worker_threads = 1;
  Served s(limits);
  std::promise<void> hello_served;
  std::shared_future<void> served = hello_served.get_future().share();
  s.server.route("GET", "/events", [&](const Request&, Response& res) {
    auto sent = std::make_shared<int>(0);
    res.set_stream("text/event-stream", [sent, served](StreamSink& sink) {
      if (*sent == 1) served.wait();  // the worker is free while the stream waits
      return sink.write("event " + std::to_string((*sent)++) + "\n") && *sent < 3;
    });
  });
  s.start();
  Socket stream(s.port);
  ASSERT_TRUE(stream.send_all(get("/events")));
  EXPECT_NE(stream.read_until("event 0\n"), "");
  Socket c(s.port);
  ASSERT_TRUE(c.send_all(get("/hello")));
  EXPECT_NE(c.read_answer().find("hello"), std::string::npos);
  hello_served.set_value();
  const std::string rest = stream.read_all();
  EXPECT_NE(rest.find("event 1\n"), std::string::npos) << rest;
  EXPECT_NE(rest.find("event 2\n"), std::string::npos) << rest;
  EXPECT_NE(rest.find("\r\n0\r\n\r\n"), std::string::npos) << rest;  // the last chunk
}

TEST(HttpServer, StopsWithConnectionsOpenAndAnswersTheRequestsItHolds) {
  Served s(HttpLimits{});
  std::atomic<bool> entered{false};
  s.server.route("GET", "/wait", [&](const Request&, Response& res) {
    entered = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    res.set_content("done", "text/plain");
  });
  s.start();
  Socket idle(s.port);
  Socket waiting(s.port);
  ASSERT_TRUE(waiting.send_all(get("/wait")));
  while (!entered) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  s.stop();
  const std::string answer = waiting.read_all();
  EXPECT_NE(answer.find("done"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  EXPECT_TRUE(idle.closed_by_server());
}

TEST(HttpServer, AHandlerThatThrowsIsAnswered500) {
  Served s(HttpLimits{});
  s.server.route("GET", "/throws",
                 [](const Request&, Response&) { throw std::runtime_error("broken"); });
  s.start();
  Socket c(s.port);
  ASSERT_TRUE(c.send_all(get("/throws") + get("/hello")));
  const std::string answer = c.read_answer();
  EXPECT_EQ(answer.rfind("HTTP/1.1 500", 0), 0u) << answer;
  EXPECT_NE(answer.find("internal error: broken"), std::string::npos) << answer;
  EXPECT_NE(c.read_answer().find("hello"), std::string::npos);  // the connection goes on
}

TEST(HttpServer, AMalformedRequestIsAnswered400) {
  Served s(HttpLimits{});
  s.start();
  for (const char* bad : {"NOT HTTP AT ALL\r\n\r\n",
                          "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                          "Content-Length: 40\r\n\r\n{}"}) {
    Socket c(s.port);
    ASSERT_TRUE(c.send_all(bad));
    const std::string answer = c.read_all();
    EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
  }
}

}  // namespace
}  // namespace sd::server
