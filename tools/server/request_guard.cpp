#include "server/request_guard.h"

#include <algorithm>
#include <cctype>

#include "backend/rpc/access.h"
#include "tensor/text.h"

namespace sd::server {

namespace {

bool listed(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// A loopback server answers only to loopback names (and --allowed-hosts): a page of
// another site whose name was made to resolve to 127.0.0.1 sends its own name. A server on
// a network address is reached by names this one cannot know; --allowed-hosts narrows them.
bool host_allowed(const ServerOptions& o, const std::string& host) {
  if (listed(o.allowed_hosts, "*") || listed(o.allowed_hosts, host)) return true;
  if (rpc::is_loopback_host(host)) return true;
  if (rpc::is_loopback_host(o.listen_ip)) return false;
  return o.allowed_hosts.empty() || host == ascii_lower(o.listen_ip);
}

}  // namespace

std::string host_name(const std::string& host_header) {
  std::string h = ascii_lower(host_header);
  if (!h.empty() && h.front() == '[') {
    const size_t close = h.find(']');
    return close == std::string::npos ? h : h.substr(1, close - 1);
  }
  const size_t colon = h.find(':');
  return colon == std::string::npos ? h : h.substr(0, colon);
}

std::optional<Refusal> guard_request(const ServerOptions& o, const RequestHeaders& h) {
  // One framing only: two lengths, or a length beside chunks, is how requests are smuggled
  // past a proxy.
  const bool lengths_differ = std::adjacent_find(h.content_length.begin(), h.content_length.end(),
                                                 std::not_equal_to<>()) != h.content_length.end();
  if (lengths_differ || h.transfer_encoding.size() > 1 ||
      (!h.content_length.empty() && !h.transfer_encoding.empty()))
    return Refusal{400, "invalid_request",
                   "the request gives its body's length more than one way (Content-Length "
                   "twice, or beside Transfer-Encoding); send one"};
  // The body is read after this check, within --max-body-mb only when its length is given:
  // chunks and compressed bodies are read whole by the HTTP layer, whatever their size (a
  // 510 KB gzip body inflated to 512 MiB). No client of these APIs needs them.
  if (!h.transfer_encoding.empty())
    return Refusal{411, "length_required",
                   "send the request body with a Content-Length (Transfer-Encoding '" +
                       h.transfer_encoding.front() + "' is not accepted)"};
  for (const std::string& encoding : h.content_encoding)
    if (ascii_lower(encoding) != "identity")
      return Refusal{415, "unsupported_media_type",
                     "send the request body uncompressed (Content-Encoding '" + encoding +
                         "' is not accepted)"};
  if (h.host.size() > 1)
    return Refusal{400, "invalid_request", "the request has more than one Host header"};
  if (!h.host.empty()) {
    const std::string host = host_name(h.host.front());
    if (!host_allowed(o, host))
      return Refusal{403, "forbidden",
                     "this server does not answer to the host name '" + host +
                         "'; start it with --allowed-hosts " + host + " to allow it"};
  }
  // Browsers name the page's origin on every cross-site request and on same-site POSTs.
  if (!h.origin.empty() && h.method != "OPTIONS") {
    const std::string origin = h.origin.front();
    const std::string self = h.host.empty() ? "" : ascii_lower(h.host.front());
    const bool same_site = !self.empty() && (ascii_lower(origin) == "http://" + self ||
                                             ascii_lower(origin) == "https://" + self);
    if (!same_site && !listed(o.allowed_origins, origin))
      return Refusal{403, "forbidden",
                     "origin '" + origin +
                         "' may not call this server; start it with --cors-origins " + origin};
  }
  // A body is JSON, or a multipart form for the OpenAI edit (which names that itself): a
  // form or text/plain body is what a cross-site page can send without asking.
  const bool has_body = !h.transfer_encoding.empty() ||
                        (!h.content_length.empty() && h.content_length.front() != "0");
  if (h.method == "POST" && has_body && h.path != "/v1/images/edits") {
    const std::string type = h.content_type.empty() ? "" : ascii_lower(h.content_type.front());
    if (!type.starts_with("application/json"))
      return Refusal{415, "unsupported_media_type",
                     "the request body must be JSON sent with 'Content-Type: application/json' "
                     "(got '" +
                         (h.content_type.empty() ? std::string("none") : h.content_type.front()) +
                         "')"};
  }
  return std::nullopt;
}

}  // namespace sd::server
