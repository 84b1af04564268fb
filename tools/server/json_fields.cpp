#include "server/json_fields.h"

#include <algorithm>
#include <cmath>

namespace sd::server {

namespace {

const char* type_name(const nlohmann::json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

}  // namespace

JsonFields::JsonFields(const nlohmann::json& object, std::string prefix)
    : object_(object), prefix_(std::move(prefix)) {
  if (!object_.is_object()) {
    const std::string where = prefix_.empty() ? "the request body" : "'" + prefix_ + "'";
    throw BadRequest(where + " must be a JSON object, got " + type_name(object_));
  }
}

const nlohmann::json* JsonFields::get(const char* key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<std::string> JsonFields::text(const char* key) const {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_string())
    throw BadRequest("field '" + path(key) + "' must be a string, got " + type_name(*v));
  return v->get<std::string>();
}

namespace {

// A JSON value as a whole number in [lo, hi]; `where` names it in errors.
int64_t whole_number(const nlohmann::json& v, const std::string& where, int64_t lo, int64_t hi) {
  int64_t value = 0;
  if (v.is_number_integer()) {
    value = v.get<int64_t>();
  } else if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    value = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  } else if (v.is_number_float() && std::nearbyint(v.get<double>()) == v.get<double>() &&
             std::fabs(v.get<double>()) < 9e15) {
    value = static_cast<int64_t>(v.get<double>());  // 512.0 is a whole number too
  } else {
    throw BadRequest("field '" + where + "' must be an integer, got " + type_name(v));
  }
  if (value < lo || value > hi)
    throw BadRequest("field '" + where + "' must be from " + std::to_string(lo) + " to " +
                     std::to_string(hi) + ", got " + std::to_string(value));
  return value;
}

}  // namespace

std::optional<int64_t> JsonFields::integer(const char* key, int64_t lo, int64_t hi) const {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  return whole_number(*v, path(key), lo, hi);
}

std::optional<double> JsonFields::number(const char* key, double lo, double hi) const {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_number())
    throw BadRequest("field '" + path(key) + "' must be a number, got " + type_name(*v));
  const double value = v->get<double>();
  if (!(value >= lo && value <= hi))
    throw BadRequest("field '" + path(key) + "' must be from " + nlohmann::json(lo).dump() +
                     " to " + nlohmann::json(hi).dump() + ", got " + v->dump());
  return value;
}

std::optional<bool> JsonFields::boolean(const char* key) const {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>();
  // A1111 clients send some switches as 0/1.
  if (v->is_number_integer() && (v->get<int64_t>() == 0 || v->get<int64_t>() == 1))
    return v->get<int64_t>() == 1;
  throw BadRequest("field '" + path(key) + "' must be true or false, got " + type_name(*v));
}

std::optional<std::vector<double>> JsonFields::numbers(const char* key) const {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_array())
    throw BadRequest("field '" + path(key) + "' must be an array of numbers, got " + type_name(*v));
  std::vector<double> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const nlohmann::json& e = (*v)[i];
    if (!e.is_number() || !std::isfinite(e.get<double>()))
      throw BadRequest("field '" + path(key) + "[" + std::to_string(i) + "]' must be a number");
    out.push_back(e.get<double>());
  }
  return out;
}

std::optional<std::vector<int64_t>> JsonFields::integers(const char* key, int64_t lo,
                                                         int64_t hi) const {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_array())
    throw BadRequest("field '" + path(key) + "' must be an array of integers, got " +
                     type_name(*v));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v->size(); ++i)
    out.push_back(whole_number((*v)[i], path(key) + "[" + std::to_string(i) + "]", lo, hi));
  return out;
}

std::optional<std::vector<std::string>> JsonFields::texts(const char* key) const {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_array())
    throw BadRequest("field '" + path(key) + "' must be an array of strings, got " + type_name(*v));
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const nlohmann::json& e = (*v)[i];
    if (!e.is_string())
      throw BadRequest("field '" + path(key) + "[" + std::to_string(i) +
                       "]' must be a string, got " + type_name(e));
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::optional<JsonFields> JsonFields::object(const char* key) const {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  return JsonFields(*v, path(key) + ".");
}

void JsonFields::reject_unknown(const std::vector<std::string>& known) const {
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw BadRequest("unknown field '" + prefix_ + it.key() + "'; known fields here: " + list);
    }
  }
}

namespace {

// Whether `text` nests arrays and objects deeper than `limit`, brackets inside strings not
// counted; a scan that allocates nothing, before the parser builds anything.
bool nested_deeper_than(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

nlohmann::json parse_json_object(std::string_view text, const std::string& what) {
  if (nested_deeper_than(text, kMaxJsonDepth))
    throw BadRequest(what + " nests arrays or objects more than " + std::to_string(kMaxJsonDepth) +
                     " deep; no field of this API needs that");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded())
    throw BadRequest(what +
                     " is not valid JSON; send a JSON object (Content-Type: application/json)");
  if (!j.is_object()) throw BadRequest(what + " must be a JSON object");
  return j;
}

nlohmann::json parse_json_body(const std::string& body) {
  if (body.empty()) throw BadRequest("the request body is empty; send a JSON object");
  return parse_json_object(body, "the request body");
}

}  // namespace sd::server
