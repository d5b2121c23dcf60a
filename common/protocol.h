#pragma once
// akad protocol v1: one JSON object per line over a Unix stream socket (docs/protocol.md).
// Shared by the daemon (parsing requests, building responses) and akactl (building requests,
// reading responses). Error codes are part of the protocol: never renumber them.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace akad::protocol {

using nlohmann::json;

// The longest request line the daemon reads, newline excluded. Longer lines get
// kRequestTooLarge and the connection is closed (the rest of the line cannot be trusted).
inline constexpr std::size_t kMaxLineBytes = 1024 * 1024;

// Error codes. The JSON-RPC 2.0 numbers where the meaning is the same; -32000..-32099 are akad's.
inline constexpr int kParseError = -32700;      // the line is not JSON
inline constexpr int kInvalidRequest = -32600;  // JSON, but not {"id","method","params"}
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;   // missing/extra/wrong-typed params
inline constexpr int kInternalError = -32603;   // the daemon failed (store I/O...); see its log
inline constexpr int kNotFound = -32000;        // no such run/attempt
inline constexpr int kNoTasksMatch = -32001;    // a task selector matched nothing
inline constexpr int kConflict = -32002;        // the object is in the wrong state (e.g. already ended)
inline constexpr int kPermissionDenied = -32003;
inline constexpr int kShuttingDown = -32004;    // the daemon is stopping; retry against its successor
inline constexpr int kRequestTooLarge = -32005;
inline constexpr int kOverloaded = -32006;      // too many connections (the daemon's, or the caller's own limit)
inline constexpr int kRateLimited = -32007;     // the caller sent more requests per second than its limit
inline constexpr int kQuotaExceeded = -32008;   // the request would take the caller past one of its limits
// Never sent by the daemon: akactl/Client use it for "could not talk to the daemon at all".
inline constexpr int kUnreachable = -32099;

std::string_view errorName(int code);

// A request after validation. `id` is a string or an integer, echoed back verbatim.
struct Request {
  json id;
  std::string method;
  json params;  // always an object
};

// Parses and validates one request line. On failure the Error's code is kParseError or
// kInvalidRequest, and `idOut` holds the request's id if one could be read (else null), so the
// error response can still be matched by the client.
Result<Request> parseRequest(std::string_view line, json& idOut);

json makeRequest(const json& id, std::string_view method, const json& params);
json makeResult(const json& id, const json& result);
json makeError(const json& id, int code, std::string_view message);
json makeEvent(const json& id, const json& event);
// One line on the wire: compact JSON + '\n'. Invalid UTF-8 is replaced, never thrown on.
std::string toLine(const json& message);

// ---- Parameter validation for method handlers ----
// Each returns kInvalidParams with a message naming the parameter and what was expected.
Status allowOnly(const json& params, std::initializer_list<std::string_view> names);
Result<std::string> requireString(const json& params, std::string_view name);
// Absent or null -> nullopt.
Result<std::optional<std::string>> optionalString(const json& params, std::string_view name);
Result<std::int64_t> optionalInt(const json& params, std::string_view name, std::int64_t fallback,
                                 std::int64_t min, std::int64_t max);
Result<bool> optionalBool(const json& params, std::string_view name, bool fallback);

}  // namespace akad::protocol
