// What running the diffusion net on a remote device costs over loopback, side by side with
// the local CPU in one process: seconds per sampling step, the first step (which uploads
// or packs the weights), the bytes sent for weights, and raw upload throughput. The
// numbers docs/performance.md reports for RPC. Loading is eager, so the load column is
// where weights are read and uploaded.
//
//   sd-rpc-run MODEL [SIZE] [STEPS]
//
// Starts sd-rpc-server (from this binary's folder) on a free loopback port; needs
// SD_CLIP_VOCAB or a cached vocabulary.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "backend/rpc/client/rpc_device.h"
#include "backend/rpc/protocol.h"
#include "pipeline/stable_diffusion.h"
#include "tensor/error.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Run {
  double load = 0, first_step = 0, per_step = 0, total = 0;
};

Run generate(const sd::pipeline::ModelOptions& o, int size, int steps) {
  const auto start = Clock::now();
  sd::pipeline::StableDiffusion sd(o);  // eager: every weight is read (and sent) here
  Run run;
  run.load = seconds_since(start);
  sd::pipeline::ImageRequest r;
  r.prompt = "a photograph of an astronaut riding a horse";
  r.width = r.height = size;
  r.steps = steps;
  r.seed = 42;
  int timed = 0;
  r.progress = [&](int step, int, double s) {
    if (step == 1) run.first_step = s;
    if (step > 1) {
      run.per_step += s;
      ++timed;
    }
  };
  sd.generate(r);
  run.per_step = timed ? run.per_step / timed : 0;
  run.total = seconds_since(start);
  return run;
}

// Starts sd-rpc-server on a free port; returns its pid and port.
std::pair<pid_t, int> start_server() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  SD_CHECK(n > 0, "cannot find this program's folder");
  self[n] = '\0';
  std::string server = self;
  server = server.substr(0, server.rfind('/')) + "/sd-rpc-server";
  int out[2];
  SD_CHECK(pipe(out) == 0, "pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    execl(server.c_str(), server.c_str(), "--port", "0", "--threads", "2", nullptr);
    _exit(127);
  }
  close(out[1]);
  FILE* f = fdopen(out[0], "r");
  char line[256] = {};
  SD_CHECK(std::fgets(line, sizeof line, f), "sd-rpc-server did not start (%s)", server.c_str());
  const char* colon = std::strrchr(line, ':');
  SD_CHECK(colon, "unexpected first line from sd-rpc-server: %s", line);
  return {pid, std::atoi(colon + 1)};
}

void print_row(const char* what, const Run& r, const sd::rpc::TrafficStats* s) {
  std::printf("| %s | %.2f | %.2f | %.2f | %.1f |", what, r.load, r.first_step, r.per_step,
              r.total);
  if (s)
    std::printf(" %s | %s |\n", sd::rpc::human_bytes(s->weight_bytes_sent).c_str(),
                sd::rpc::human_bytes(s->weight_bytes_cached).c_str());
  else
    std::printf(" - | - |\n");
}

// One small call's round trip: allocations of 4 KiB, each freed again.
void round_trip(sd::rpc::Connection& c) {
  const int n = 500;
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) c.free(c.alloc(0, 4096));
  std::printf("round trip (alloc + free of 4 KiB): %.3f ms each\n",
              seconds_since(start) * 1000 / (2 * n));
  std::vector<uint8_t> bytes(256 << 10, 1);
  const auto w = Clock::now();
  for (int i = 0; i < n; ++i) {
    const uint64_t b = c.alloc(0, bytes.size());
    bytes[0] = static_cast<uint8_t>(i);
    c.write(b, 0, bytes.data(), bytes.size(), true);
    c.free(b);
  }
  std::printf("one 256 KiB weight (alloc, cached write miss, free): %.2f ms each\n",
              seconds_since(w) * 1000 / n);
}

// Raw transport: `total` bytes in 64 MiB writes, plain and through the weight cache.
void upload_throughput(sd::rpc::Connection& c, size_t total) {
  const size_t piece = size_t{64} << 20;
  std::vector<uint8_t> bytes(piece);
  for (size_t i = 0; i < piece; ++i) bytes[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  for (bool cached : {false, true}) {
    std::vector<uint64_t> buffers;
    const auto start = Clock::now();
    for (size_t done = 0; done < total; done += piece) {
      bytes[0] = static_cast<uint8_t>(done >> 26);  // each piece its own hash
      buffers.push_back(c.alloc(0, piece));
      c.write(buffers.back(), 0, bytes.data(), piece, cached);
    }
    const double s = seconds_since(start);
    std::printf("upload %s: %.0f MB in %.2f s = %.0f MB/s\n",
                cached ? "of weights (hashed, verified, cache miss)" : "plain", total / 1e6, s,
                total / 1e6 / s);
    for (uint64_t b : buffers) c.free(b);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [SIZE] [STEPS]\n", argv[0]);
    return 2;
  }
  const int size = argc > 2 ? std::atoi(argv[2]) : 512;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 4;
  pid_t server = 0;
  try {
    sd::pipeline::ModelOptions o;
    o.model = argv[1];
    if (const char* v = std::getenv("SD_CLIP_VOCAB")) o.clip_vocab = v;
    const auto [pid, port] = start_server();
    server = pid;
    const std::string endpoint = "127.0.0.1:" + std::to_string(port);
    const std::string device = sd::rpc::add_rpc_servers(
        sd::DeviceRegistry::instance(), endpoint, sd::rpc::client_options_from_environment())[0];
    auto& remote = dynamic_cast<sd::rpc::RpcDevice&>(sd::DeviceRegistry::instance().get(device));
    std::printf("%dx%d, %d steps; server %s\n\n", size, size, steps, endpoint.c_str());
    std::printf(
        "| diffusion on | load s | first step s | s/step | total s | weights sent | "
        "weights from cache |\n|---|---|---|---|---|---|---|\n");
    // Eager loading reads (and uploads) every weight before the first step, so load time
    // is the upload and the first step is the weight packing alone.
    o.eager_load = true;
    if (std::getenv("SD_RPC_RUN_TRANSPORT_ONLY")) {
      round_trip(remote.connection());
      upload_throughput(remote.connection(), size_t{1} << 30);
      kill(server, SIGTERM);
      return 0;
    }
    print_row("CPU (local)", generate(o, size, steps), nullptr);
    o.backend = "diffusion=" + device;
    for (const char* what : {"RPC0, new server", "RPC0, weights cached"}) {
      const sd::rpc::TrafficStats before = remote.connection().stats();
      const Run r = generate(o, size, steps);
      sd::rpc::TrafficStats s = remote.connection().stats();
      s.weight_bytes_sent -= before.weight_bytes_sent;
      s.weight_bytes_cached -= before.weight_bytes_cached;
      print_row(what, r, &s);
    }
    std::printf("\n");
    round_trip(remote.connection());
    upload_throughput(remote.connection(), size_t{1} << 30);
  } catch (const sd::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    if (server) kill(server, SIGTERM);
    return 1;
  }
  kill(server, SIGTERM);
  waitpid(server, nullptr, 0);
  return 0;
}
