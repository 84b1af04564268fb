// Typed reads of a request body's fields, each failure a BadRequest naming the field by
// its path ("sample_params.sample_steps") and what was expected, so a client sees which
// field to fix. A missing field and a JSON null both read as "not given".
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sd::server {

// A client's mistake: answered with 400 (or `status`) and this message.
class BadRequest : public std::runtime_error {
 public:
  explicit BadRequest(const std::string& message, int status = 400)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

class JsonFields {
 public:
  // `prefix` is the path of `object` itself ("" for the body, "sample_params." inside).
  JsonFields(const nlohmann::json& object, std::string prefix);

  std::optional<std::string> text(const char* key) const;
  std::optional<int64_t> integer(const char* key, int64_t lo, int64_t hi) const;
  std::optional<double> number(const char* key, double lo, double hi) const;
  std::optional<bool> boolean(const char* key) const;
  std::optional<std::vector<double>> numbers(const char* key) const;
  // Whole numbers in [lo, hi], each (2.5 and 1e300 are not layer indices).
  std::optional<std::vector<int64_t>> integers(const char* key, int64_t lo, int64_t hi) const;
  std::optional<std::vector<std::string>> texts(const char* key) const;
  // A nested object's fields; nullopt when the key is absent or null.
  std::optional<JsonFields> object(const char* key) const;
  const nlohmann::json* get(const char* key) const;  // nullptr: absent or null
  std::string path(const char* key) const { return prefix_ + key; }

  // Fails on a key not in `known`: a misspelt field would otherwise be silently ignored.
  void reject_unknown(const std::vector<std::string>& known) const;

 private:
  const nlohmann::json& object_;
  std::string prefix_;
};

// The deepest nesting of arrays and objects a request may have: every API's own fields need
// a few levels, and a value nested tens of thousands deep would otherwise cost a recursion
// per level wherever it is copied, dumped or freed.
inline constexpr int kMaxJsonDepth = 400;

// Parses text that must be one JSON object, nested at most kMaxJsonDepth deep; BadRequest
// naming `what` ("the request body") otherwise.
nlohmann::json parse_json_object(std::string_view text, const std::string& what);
// parse_json_object of a request body (which must not be empty).
nlohmann::json parse_json_body(const std::string& body);

}  // namespace sd::server
