#include "server/multipart.h"

#include "server/json_fields.h"
#include "tensor/text.h"

namespace sd::server {

namespace {

// The value of `key=` in a header's parameters ("form-data; name=\"a\"; filename=b"),
// unquoted; nullopt when absent. Keys compare without case.
std::optional<std::string> header_parameter(std::string_view header, std::string_view key) {
  size_t pos = header.find(';');
  while (pos != std::string_view::npos) {
    ++pos;
    while (pos < header.size() && (header[pos] == ' ' || header[pos] == '\t')) ++pos;
    const size_t eq = header.find('=', pos);
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string name = ascii_lower(trim(header.substr(pos, eq - pos)));
    size_t end = eq + 1;
    std::string value;
    if (end < header.size() && header[end] == '"') {
      for (++end; end < header.size() && header[end] != '"'; ++end) {
        if (header[end] == '\\' && end + 1 < header.size()) ++end;
        value += header[end];
      }
      if (end < header.size()) ++end;  // the closing quote
    } else {
      const size_t stop = std::min(header.find(';', end), header.size());
      value = trim(header.substr(end, stop - end));
      end = stop;
    }
    if (name == key) return value;
    pos = header.find(';', end);
  }
  return std::nullopt;
}

void read_part_headers(std::string_view head, FormPart& part) {
  size_t pos = 0;
  while (pos < head.size()) {
    size_t end = head.find("\r\n", pos);
    if (end == std::string_view::npos) end = head.size();
    const std::string_view line = head.substr(pos, end - pos);
    pos = end + 2;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      throw BadRequest("a multipart part has a header line without ':'");
    const std::string name = ascii_lower(trim(line.substr(0, colon)));
    const std::string_view value = line.substr(colon + 1);
    if (name == "content-disposition") {
      if (!ascii_lower(trim(value.substr(0, value.find(';')))).starts_with("form-data"))
        throw BadRequest("a multipart part's Content-Disposition is not form-data");
      part.name = header_parameter(value, "name").value_or("");
      part.filename = header_parameter(value, "filename").value_or("");
    } else if (name == "content-type") {
      part.content_type = trim(value);
    }
  }
  if (part.name.empty())
    throw BadRequest(
        "a multipart part has no field name (Content-Disposition: form-data; name=\"...\")");
}

}  // namespace

std::optional<std::string> multipart_boundary(std::string_view content_type) {
  if (!ascii_lower(trim(content_type.substr(0, content_type.find(';'))))
           .starts_with("multipart/form-data"))
    return std::nullopt;
  std::optional<std::string> boundary = header_parameter(content_type, "boundary");
  // RFC 2046: 1 to 70 characters.
  if (!boundary || boundary->empty() || boundary->size() > 70) return std::nullopt;
  return boundary;
}

std::vector<FormPart> parse_multipart(std::string_view body, std::string_view boundary) {
  const std::string dash = "--" + std::string(boundary);
  const std::string delimiter = "\r\n" + dash;
  // The first boundary may open the body; anything before it is a preamble.
  size_t pos;
  if (body.starts_with(dash)) {
    pos = dash.size();
  } else {
    pos = body.find(delimiter);
    if (pos == std::string_view::npos)
      throw BadRequest("the multipart body does not contain its boundary '" +
                       std::string(boundary) + "'");
    pos += delimiter.size();
  }
  std::vector<FormPart> parts;
  while (true) {
    if (body.substr(pos, 2) == "--") return parts;  // the closing boundary
    // Whitespace may follow a boundary before its line ends.
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;
    if (body.substr(pos, 2) != "\r\n")
      throw BadRequest("a multipart boundary is not followed by a line end");
    pos += 2;
    FormPart part;
    const size_t head_end = body.find("\r\n\r\n", pos);
    const size_t next = body.find(delimiter, pos);
    if (body.substr(pos, 2) == "\r\n") {
      // A part with no headers at all: it has no name either.
      read_part_headers({}, part);
    }
    if (head_end == std::string_view::npos || next == std::string_view::npos || head_end > next)
      throw BadRequest(
          "a multipart part is cut short (no blank line after its headers, or no closing "
          "boundary)");
    read_part_headers(body.substr(pos, head_end - pos), part);
    part.content = body.substr(head_end + 4, next - head_end - 4);
    parts.push_back(std::move(part));
    pos = next + delimiter.size();
  }
}

}  // namespace sd::server
