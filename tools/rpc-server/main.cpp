// sd-rpc-server: lends this machine's devices to sd-cli / sd-server processes elsewhere,
// which place modules on them with --rpc-servers and --backend.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "backend/registry.h"
#include "backend/rpc/server/descriptor_guard.h"
#include "backend/rpc/server/server.h"
#include "tensor/error.h"

namespace {

const char* kUsage = R"(usage: sd-rpc-server [options]

Serves this machine's devices to remote clients (sd-cli --rpc-servers HOST:PORT).

  -H, --host HOST        address to listen on (default: 127.0.0.1, this machine only)
  -p, --port PORT        port (default: 50052; 0 picks a free one)
  -d, --device NAMES     devices to serve, comma-separated (default: all but software
                         ones such as lavapipe; see --list-devices)
  -t, --threads N        compute threads per client (default: all cores)
  -m, --mem MiB          most memory clients may hold per device (default: 90% of it)
  -c, --cache-dir DIR    keep uploaded weights on disk too, so they survive a restart
      --cache-mem MiB    weight cache in memory (default: 4096; 0 disables it), within
                         --mem: cached weights give way to clients' allocations
      --max-sessions N   clients served at once (default: 8); more are refused
      --compute-timeout S  seconds one compute call may run before it is stopped
                         (default: 600; 0: no limit)
      --token-file FILE  clients must send this token (or set SD_RPC_TOKEN)
      --tls-cert FILE    serve TLS with this PEM certificate ...
      --tls-key FILE     ... and its PEM private key
      --insecure         allow a non-loopback --host without a token
      --list-devices     print the local devices and exit
  -v, --verbose          log every failed request (by default: failures inside a
                         session, not refused connections or weight-cache misses)
  -h, --help             this text
      --version          print the version

A non-loopback --host needs a token (--token-file or SD_RPC_TOKEN) unless --insecure is
given: anyone who can reach the port can otherwise run work and read memory there.
)";

void log_line(const std::string& line) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  std::fprintf(stderr, "[%s] %s\n", stamp, sd::escape_control_chars(line).c_str());
  std::fflush(stderr);
}

std::string read_file(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  SD_CHECK(in, "%s: cannot read '%s'", flag, path.c_str());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

long parse_number(const std::string& flag, const std::string& value, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value.c_str(), &end, 10);
  SD_CHECK(!value.empty() && *end == '\0' && errno == 0 && v >= lo && v <= hi,
           "%s: '%s' is not a number from %ld to %ld", flag.c_str(), value.c_str(), lo, hi);
  return v;
}

int run(int argc, char** argv) {
  sd::rpc::ServerOptions o;
  o.log = log_line;
  std::string token_file, cert_file, key_file, device_names;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      SD_CHECK(i + 1 < argc, "%s needs a value (see --help)", a.c_str());
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--version") {
      std::printf("sd-rpc-server %s\n", SD_VERSION);
      return 0;
    } else if (a == "--list-devices") {
      for (const auto& d : sd::DeviceRegistry::instance().devices())
        std::printf("%s\t%s\n", d->name().c_str(), d->description().c_str());
      return 0;
    } else if (a == "-H" || a == "--host") {
      o.host = value();
    } else if (a == "-p" || a == "--port") {
      o.port = static_cast<int>(parse_number(a, value(), 0, 65535));
    } else if (a == "-d" || a == "--device") {
      device_names = value();
    } else if (a == "-t" || a == "--threads") {
      o.threads = static_cast<int>(parse_number(a, value(), 1, 1024));
    } else if (a == "-m" || a == "--mem") {
      o.memory_limit = static_cast<size_t>(parse_number(a, value(), 1, 1L << 30)) << 20;
    } else if (a == "-c" || a == "--cache-dir") {
      o.cache_dir = value();
    } else if (a == "--cache-mem") {
      o.cache_memory = static_cast<size_t>(parse_number(a, value(), 0, 1L << 30)) << 20;
    } else if (a == "--max-sessions") {
      o.max_sessions = static_cast<int>(parse_number(a, value(), 1, 4096));
    } else if (a == "--compute-timeout") {
      o.compute_timeout = static_cast<int>(parse_number(a, value(), 0, 86400 * 7));
    } else if (a == "--token-file") {
      token_file = value();
    } else if (a == "--tls-cert") {
      cert_file = value();
    } else if (a == "--tls-key") {
      key_file = value();
    } else if (a == "--insecure") {
      o.insecure = true;
    } else if (a == "-v" || a == "--verbose") {
      o.verbose = true;
    } else {
      sd::fail("unknown option '%s' (see --help)", a.c_str());
    }
  }
  if (const char* t = std::getenv("SD_RPC_TOKEN")) o.token = t;
  if (!token_file.empty()) o.token = trimmed(read_file(token_file, "--token-file"));
  SD_CHECK(token_file.empty() || !o.token.empty(), "--token-file: '%s' is empty",
           token_file.c_str());
  if (!cert_file.empty()) o.tls_cert_pem = read_file(cert_file, "--tls-cert");
  if (!key_file.empty()) o.tls_key_pem = read_file(key_file, "--tls-key");
  for (size_t start = 0; start < device_names.size();) {
    size_t end = device_names.find(',', start);
    if (end == std::string::npos) end = device_names.size();
    const std::string name = device_names.substr(start, end - start);
    if (!name.empty()) o.devices.push_back(&sd::DeviceRegistry::instance().get(name));
    start = end + 1;
  }

  // SIGINT/SIGTERM end the server cleanly: one thread waits for them, the rest never
  // see them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // Each client connection holds a descriptor; the common soft limit of 1024 is too few to
  // ride out a connection flood, so take what the hard limit allows.
  const sd::rpc::DescriptorLimit fds = sd::rpc::raise_descriptor_limit();
  if (fds.after > fds.before) {
    log_line("open-file limit raised from " + std::to_string(fds.before) + " to " +
             std::to_string(fds.after));
  }
  sd::rpc::Server server(o);
  std::printf("sd-rpc-server listening on %s:%d\n", o.host.c_str(), server.port());
  std::fflush(stdout);
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    log_line(std::string("stopping (") + strsignal(sig) + ")");
    server.shutdown();
  });
  stopper.detach();
  server.wait();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Tensor bytes arrive in 1 MiB messages; with glibc's defaults each message's memory is
  // mapped fresh and given back, and faulting it in again costs more than copying it. Keep
  // such blocks in the heap, and give freed memory back only past 256 MiB.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sd-rpc-server: error: %s\n", sd::escape_control_chars(e.what()).c_str());
    return 1;
  }
}
