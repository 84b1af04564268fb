// multipart/form-data bodies (RFC 7578): what `curl -F` sends to the OpenAI edit endpoint.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_message.h"

namespace sd::server {

// The boundary named by a Content-Type header, or nullopt when it is not a
// multipart/form-data type with a usable boundary.
std::optional<std::string> multipart_boundary(std::string_view content_type);

// The body's parts. Throws BadRequest naming what is malformed: no opening or closing
// boundary, a part without a blank line after its headers or without a field name.
std::vector<FormPart> parse_multipart(std::string_view body, std::string_view boundary);

}  // namespace sd::server
