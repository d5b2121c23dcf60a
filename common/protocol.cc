#include "common/protocol.h"

#include <limits>

namespace akad::protocol {
namespace {

// nlohmann's parser is iterative, but dump() recurses; a 1 MiB line of '[' would overflow the
// daemon's stack when stored params are serialized. Requests never need deep nesting.
constexpr int kMaxDepth = 64;

bool nestingTooDeep(std::string_view text) {
  int depth = 0;
  bool inString = false;
  bool escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') inString = false;
      continue;
    }
    if (c == '"') inString = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

Error invalidParams(std::string message) { return Error{std::move(message), kInvalidParams}; }

std::string typeName(const json& v) { return v.type_name(); }

}  // namespace

std::string_view errorName(int code) {
  switch (code) {
    case kParseError: return "parse error";
    case kInvalidRequest: return "invalid request";
    case kMethodNotFound: return "unknown method";
    case kInvalidParams: return "invalid params";
    case kInternalError: return "internal error";
    case kNotFound: return "not found";
    case kNoTasksMatch: return "no tasks match";
    case kConflict: return "conflict";
    case kPermissionDenied: return "permission denied";
    case kShuttingDown: return "shutting down";
    case kRequestTooLarge: return "request too large";
    case kOverloaded: return "overloaded";
    case kRateLimited: return "rate limited";
    case kQuotaExceeded: return "quota exceeded";
    case kUnreachable: return "daemon unreachable";
  }
  return "error";
}

Result<Request> parseRequest(std::string_view line, json& idOut) {
  idOut = nullptr;
  if (line.size() > kMaxLineBytes) {
    return Error{"request line is " + std::to_string(line.size()) + " bytes; the limit is " +
                     std::to_string(kMaxLineBytes),
                 kRequestTooLarge};
  }
  if (nestingTooDeep(line)) {
    return Error{"request nests deeper than " + std::to_string(kMaxDepth) + " levels",
                 kInvalidRequest};
  }
  json doc = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Error{"request is not valid JSON", kParseError};
  if (!doc.is_object()) {
    return Error{"request must be a JSON object, got " + typeName(doc), kInvalidRequest};
  }
  auto id = doc.find("id");
  if (id != doc.end() && (id->is_string() || id->is_number_integer())) idOut = *id;
  if (id == doc.end()) return Error{"request has no \"id\"", kInvalidRequest};
  if (!id->is_string() && !id->is_number_integer()) {
    return Error{"request \"id\" must be a string or an integer, got " + typeName(*id),
                 kInvalidRequest};
  }
  auto method = doc.find("method");
  if (method == doc.end() || !method->is_string()) {
    return Error{"request \"method\" must be a string", kInvalidRequest};
  }
  Request req;
  req.id = *id;
  req.method = method->get<std::string>();
  auto params = doc.find("params");
  if (params == doc.end() || params->is_null()) {
    req.params = json::object();
  } else if (params->is_object()) {
    req.params = std::move(*params);
  } else {
    return Error{"request \"params\" must be an object, got " + typeName(*params),
                 kInvalidRequest};
  }
  for (const auto& [key, value] : doc.items()) {
    if (key != "id" && key != "method" && key != "params") {
      return Error{"request has unknown field \"" + key + "\"", kInvalidRequest};
    }
  }
  return req;
}

json makeRequest(const json& id, std::string_view method, const json& params) {
  return json{{"id", id}, {"method", method}, {"params", params}};
}

json makeResult(const json& id, const json& result) { return json{{"id", id}, {"result", result}}; }

json makeError(const json& id, int code, std::string_view message) {
  return json{{"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

json makeEvent(const json& id, const json& event) { return json{{"id", id}, {"event", event}}; }

std::string toLine(const json& message) {
  std::string line = message.dump(-1, ' ', false, json::error_handler_t::replace);
  line.push_back('\n');
  return line;
}

Status allowOnly(const json& params, std::initializer_list<std::string_view> names) {
  for (const auto& [key, value] : params.items()) {
    bool known = false;
    for (auto n : names) known = known || key == n;
    if (!known) {
      std::string list;
      for (auto n : names) list += (list.empty() ? "" : ", ") + std::string(n);
      return invalidParams("unknown parameter \"" + key + "\" (accepted: " +
                           (list.empty() ? "none" : list) + ")");
    }
  }
  return {};
}

Result<std::string> requireString(const json& params, std::string_view name) {
  auto it = params.find(name);
  if (it == params.end()) return invalidParams("missing parameter \"" + std::string(name) + "\"");
  if (!it->is_string()) {
    return invalidParams("parameter \"" + std::string(name) + "\" must be a string, got " +
                         typeName(*it));
  }
  return it->get<std::string>();
}

Result<std::optional<std::string>> optionalString(const json& params, std::string_view name) {
  auto it = params.find(name);
  if (it == params.end() || it->is_null()) return std::optional<std::string>{};
  if (!it->is_string()) {
    return invalidParams("parameter \"" + std::string(name) + "\" must be a string or null, got " +
                         typeName(*it));
  }
  return std::optional<std::string>{it->get<std::string>()};
}

Result<std::int64_t> optionalInt(const json& params, std::string_view name, std::int64_t fallback,
                                 std::int64_t min, std::int64_t max) {
  auto it = params.find(name);
  if (it == params.end() || it->is_null()) return fallback;
  std::string range = " in " + std::to_string(min) + ".." + std::to_string(max);
  if (!it->is_number_integer()) {
    return invalidParams("parameter \"" + std::string(name) + "\" must be an integer" + range +
                         ", got " + typeName(*it));
  }
  // Unsigned values above int64 max arrive as number_unsigned; they are out of range anyway.
  if (it->is_number_unsigned() &&
      it->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return invalidParams("parameter \"" + std::string(name) + "\" is out of range" + range);
  }
  std::int64_t v = it->get<std::int64_t>();
  if (v < min || v > max) {
    return invalidParams("parameter \"" + std::string(name) + "\" is " + std::to_string(v) +
                         ", must be" + range);
  }
  return v;
}

Result<bool> optionalBool(const json& params, std::string_view name, bool fallback) {
  auto it = params.find(name);
  if (it == params.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    return invalidParams("parameter \"" + std::string(name) + "\" must be a boolean, got " +
                         typeName(*it));
  }
  return it->get<bool>();
}

}  // namespace akad::protocol
