// A request as sd-server's routes see it and the answer they fill in, independent of the
// HTTP layer that reads and writes them (http_server.h).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sd::server {

// One part of a multipart/form-data body (multipart.h).
struct FormPart {
  std::string name, filename, content_type, content;
};

struct Request {
  std::string method;
  std::string path;                                          // the target without its query
  std::string query;                                         // after '?', as sent
  std::vector<std::pair<std::string, std::string>> headers;  // in the order sent
  std::string body;
  std::vector<std::string> matches;  // the route pattern's groups; [0] is the whole path
  std::vector<FormPart> files;       // the parts of a multipart/form-data body

  // The i-th value of a header (names compare without case); "" when absent.
  std::string header(std::string_view name, size_t i = 0) const;
  size_t header_count(std::string_view name) const;
  bool is_multipart_form_data() const;
};

// Where a streamed answer's pieces go (Server-Sent Events).
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // False when the client has gone (or the server stops): end the stream.
  virtual bool write(std::string_view data) = 0;
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string content_type;
  // A body made as it goes: called again and again, on a thread of its own, until it
  // returns false. Its chunks are sent as they are written.
  std::function<bool(StreamSink&)> stream;

  void set_header(std::string name, std::string value);
  void set_content(std::string content, std::string type);
  void set_stream(std::string type, std::function<bool(StreamSink&)> producer);
};

}  // namespace sd::server
