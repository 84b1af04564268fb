#include "server/http_message.h"

#include "server/multipart.h"
#include "tensor/text.h"

namespace sd::server {

namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ascii_lower(a) == ascii_lower(b);
}

}  // namespace

std::string Request::header(std::string_view name, size_t i) const {
  for (const auto& [key, value] : headers)
    if (same_name(key, name) && i-- == 0) return value;
  return {};
}

size_t Request::header_count(std::string_view name) const {
  size_t n = 0;
  for (const auto& header : headers) n += same_name(header.first, name);
  return n;
}

bool Request::is_multipart_form_data() const {
  return multipart_boundary(header("Content-Type")).has_value();
}

void Response::set_header(std::string name, std::string value) {
  headers.emplace_back(std::move(name), std::move(value));
}

void Response::set_content(std::string content, std::string type) {
  body = std::move(content);
  content_type = std::move(type);
}

void Response::set_stream(std::string type, std::function<bool(StreamSink&)> producer) {
  content_type = std::move(type);
  stream = std::move(producer);
}

}  // namespace sd::server
