// server/http_framing.h — the pure parts of HTTP/1.1 framing that the
// transport (http_server.cpp) uses: response heads, transport-level error
// bodies, and the request framing rules of RFC 9112 that decide where a body
// ends. Pure functions, no state; unit-tested in tests/server.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_server.h"

namespace tern::server {

const char* reason_phrase(int status);

// Status line and headers; a body of content_length bytes, or chunked when absent.
std::string head_text(int status, std::string_view content_type, const HeaderList& headers, bool keep_alive,
                      std::optional<size_t> content_length);

// {"error": {...}} for failures found before any route runs.
std::string error_json(std::string_view message, std::string_view type, int status);

// How a request's body is delimited, judged from its Transfer-Encoding field
// values (every instance, in order), whether it has a Content-Length, and its
// HTTP version (10 or 11). status == 0: acceptable (no transfer coding, or
// exactly one "chunked"). Otherwise the status to answer before closing: 400
// when the final coding is not chunked (the body length cannot be known: a
// body read as empty would be parsed as the next request), when "chunked"
// appears twice, with a Content-Length too, or on HTTP/1.0; 501 for codings
// before "chunked" that we do not decode (gzip, ...).
struct FramingVerdict {
  int status = 0;
  std::string message;
};
FramingVerdict check_request_framing(const std::vector<std::string_view>& transfer_encodings,
                                     bool has_content_length, int http_version);

}  // namespace tern::server
