// Base64 (RFC 4648, standard alphabet): images in JSON bodies (encode what the server sends,
// decode what clients send, raw or as a data URL "data:image/png;base64,..."), and token
// bytes in tokenizer files (Mistral's tekken.json).
#pragma once

#include <optional>
#include <string>

namespace sd {

std::string base64_encode(const std::string& bytes);
// nullopt for anything that is not base64 (whitespace inside is allowed, as line-wrapped
// encoders write it).
std::optional<std::string> base64_decode(const std::string& text);

}  // namespace sd
