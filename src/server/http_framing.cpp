#include "server/http_framing.h"

#include <cctype>
#include <cstdio>

namespace tern::server {

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

std::string head_text(int status, std::string_view content_type, const HeaderList& headers, bool keep_alive,
                      std::optional<size_t> content_length) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  h += "Server: tern\r\n";
  if (!content_type.empty()) h += "Content-Type: " + std::string(content_type) + "\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  if (content_length)
    h += "Content-Length: " + std::to_string(*content_length) + "\r\n";
  else
    h += "Transfer-Encoding: chunked\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

std::string error_json(std::string_view message, std::string_view type, int status) {
  std::string m;
  for (char c : message) {
    if (c == '"' || c == '\\') {
      m += '\\';
      m += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char u[8];
      std::snprintf(u, sizeof u, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      m += u;
    } else {
      m += c;
    }
  }
  return R"({"error":{"message":")" + m + R"(","type":")" + std::string(type) +
         R"(","param":null,"code":)" + std::to_string(status) + "}}";
}

namespace {

// The comma-separated codings of every field instance, trimmed and lower-cased.
std::vector<std::string> codings_of(const std::vector<std::string_view>& values) {
  std::vector<std::string> out;
  for (std::string_view v : values) {
    size_t pos = 0;
    while (pos <= v.size()) {
      size_t comma = v.find(',', pos);
      if (comma == std::string_view::npos) comma = v.size();
      std::string_view item = v.substr(pos, comma - pos);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      // Parameters (";q=...") belong to the coding; compare the name.
      item = item.substr(0, item.find(';'));
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      std::string name(item);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!name.empty()) out.push_back(std::move(name));  // empty list elements are allowed and ignored
      pos = comma + 1;
    }
  }
  return out;
}

}  // namespace

FramingVerdict check_request_framing(const std::vector<std::string_view>& transfer_encodings,
                                     bool has_content_length, int http_version) {
  if (transfer_encodings.empty()) return {};
  const std::vector<std::string> codings = codings_of(transfer_encodings);
  if (http_version < 11) return {400, "Transfer-Encoding is not allowed on an HTTP/1.0 request"};
  if (codings.empty()) return {400, "empty Transfer-Encoding"};
  if (has_content_length) return {400, "a request must not carry both Transfer-Encoding and Content-Length"};
  if (codings.back() != "chunked")
    return {400, "the final transfer coding must be 'chunked' (got '" + codings.back() +
                     "'): the body's length cannot be determined"};
  for (size_t i = 0; i + 1 < codings.size(); ++i) {
    if (codings[i] == "chunked") return {400, "'chunked' may be applied only once"};
  }
  if (codings.size() > 1) return {501, "transfer coding '" + codings.front() + "' is not supported"};
  return {};
}

}  // namespace tern::server
