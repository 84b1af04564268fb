// Who may call the server, checked before any route and before the token: requests that name
// another host (DNS rebinding: a page of attacker.example made to resolve to 127.0.0.1),
// that come from a page of another origin (a cross-site form or fetch can create jobs even
// when it cannot read the answer), or whose body is not the type the API reads, or is framed
// two ways at once.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/server_options.h"

namespace sd::server {

struct Refusal {
  int status;
  std::string code;
  std::string message;
};

// The request's headers the guard reads (several values of one header are all given).
struct RequestHeaders {
  std::string method, path;
  std::vector<std::string> host, origin, content_type, content_length, transfer_encoding,
      content_encoding;
};

// nullopt: the request may go on.
std::optional<Refusal> guard_request(const ServerOptions& options, const RequestHeaders& h);

// The host part of a Host header ("[::1]:1234" -> "::1", "Example.COM:80" -> "example.com").
std::string host_name(const std::string& host_header);

}  // namespace sd::server
