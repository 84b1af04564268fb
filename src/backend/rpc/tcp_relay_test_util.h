// A loopback TCP relay between RPC clients and a server, for fault tests. It forwards bytes
// both ways until cut(); then it drops them silently and keeps every connection open, as a
// cut network or a powered-off host does: no reset reaches either side, so only keep-alive
// pings and call deadlines can tell. restore() forwards again, as a network that heals.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <stdexcept>
#include <thread>
#include <vector>

namespace sd::rpc {

class TcpRelay {
 public:
  explicit TcpRelay(int target_port) : target_port_(target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(0);
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(listen_fd_, 16) != 0)
      throw std::runtime_error("the test relay cannot listen on loopback");
    socklen_t len = sizeof a;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~TcpRelay() {
    stop_ = true;
    thread_.join();
    for (const auto& [fd, peer] : peer_) close(fd);
    close(listen_fd_);
  }
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  int port() const { return port_; }
  void cut() { cut_ = true; }
  void restore() { cut_ = false; }

 private:
  static sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }

  void accept_one() {
    const int client = accept(listen_fd_, nullptr, nullptr);
    if (client < 0) return;
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(target_port_);
    if (server < 0 || connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(client);
      if (server >= 0) close(server);
      return;
    }
    peer_[client] = server;
    peer_[server] = client;
  }

  void drop_pair(int fd) {
    const int other = peer_.at(fd);
    close(fd);
    close(other);
    peer_.erase(fd);
    peer_.erase(other);
  }

  // Bytes read while cut are dropped; the connections stay open.
  void run() {
    std::vector<char> bytes(1 << 16);
    while (!stop_) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (const auto& [fd, peer] : peer_) fds.push_back({fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) accept_one();
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)) || !peer_.count(fds[i].fd)) continue;
        const ssize_t n = read(fds[i].fd, bytes.data(), bytes.size());
        if (n <= 0) {
          drop_pair(fds[i].fd);
          continue;
        }
        if (cut_) continue;
        for (ssize_t done = 0; done < n;) {
          const ssize_t w = write(peer_.at(fds[i].fd), bytes.data() + done, n - done);
          if (w <= 0) break;
          done += w;
        }
      }
    }
  }

  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> cut_{false}, stop_{false};
  std::map<int, int> peer_;  // both directions: client -> server fd and back
  std::thread thread_;
};

}  // namespace sd::rpc
