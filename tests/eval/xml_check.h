// tests/eval/xml_check.h — a small XML well-formedness checker for the SVG
// tests (no libxml2 needed): one root element, matched tags, quoted
// attributes, only the five predefined and numeric entities, no raw '<' or
// '&' in text. It returns every element with its unescaped attributes and
// text so tests can look series up by name.
#pragma once

#include <cctype>
#include <map>
#include <string>
#include <vector>

namespace tern::test {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attrs;  // unescaped values
  std::string text;                          // unescaped character data directly inside
  int depth = 0;
  int parent = -1;                           // index into the element list, -1 for the root
};

struct XmlCheck {
  bool ok = false;
  std::string error;  // why not, with the byte offset
  std::vector<XmlElement> elements;  // document order
};

namespace detail {

inline bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' || c == '.' ||
         static_cast<unsigned char>(c) >= 0x80;
}

// Unescapes s[from, to); false on an unknown or unterminated entity or a raw '<'.
inline bool unescape(const std::string& s, size_t from, size_t to, std::string& out) {
  for (size_t i = from; i < to; ++i) {
    if (s[i] == '<') return false;
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    if (semi == std::string::npos || semi >= to) return false;
    const std::string ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp") out += '&';
    else if (ent == "lt") out += '<';
    else if (ent == "gt") out += '>';
    else if (ent == "quot") out += '"';
    else if (ent == "apos") out += '\'';
    else if (ent.size() > 1 && ent[0] == '#') out += '?';
    else return false;
    i = semi;
  }
  return true;
}

}  // namespace detail

inline XmlCheck check_xml(const std::string& s) {
  XmlCheck r;
  auto fail = [&](const std::string& why, size_t at) {
    r.ok = false;
    r.error = why + " at byte " + std::to_string(at);
    return r;
  };
  std::vector<int> open;  // element indices
  bool seen_root = false;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] != '<') {
      const size_t next = s.find('<', i);
      const size_t end = next == std::string::npos ? s.size() : next;
      std::string text;
      if (!detail::unescape(s, i, end, text)) return fail("bad character data", i);
      if (open.empty()) {
        if (text.find_first_not_of(" \t\r\n") != std::string::npos) return fail("text outside the root", i);
      } else {
        r.elements[open.back()].text += text;
      }
      i = end;
      continue;
    }
    if (s.compare(i, 4, "<!--") == 0) {
      const size_t end = s.find("-->", i + 4);
      if (end == std::string::npos) return fail("unterminated comment", i);
      i = end + 3;
      continue;
    }
    if (s.compare(i, 2, "<?") == 0) {
      const size_t end = s.find("?>", i + 2);
      if (end == std::string::npos) return fail("unterminated declaration", i);
      i = end + 2;
      continue;
    }
    if (s.compare(i, 2, "</") == 0) {
      size_t j = i + 2;
      while (j < s.size() && detail::is_name_char(s[j])) ++j;
      const std::string name = s.substr(i + 2, j - i - 2);
      while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j >= s.size() || s[j] != '>') return fail("bad end tag", i);
      if (open.empty() || r.elements[open.back()].name != name) return fail("mismatched end tag </" + name + ">", i);
      open.pop_back();
      i = j + 1;
      continue;
    }
    // Start tag.
    size_t j = i + 1;
    while (j < s.size() && detail::is_name_char(s[j])) ++j;
    XmlElement e;
    e.name = s.substr(i + 1, j - i - 1);
    if (e.name.empty()) return fail("empty element name", i);
    if (open.empty() && seen_root) return fail("second root element", i);
    e.depth = static_cast<int>(open.size());
    e.parent = open.empty() ? -1 : open.back();
    bool self_closing = false;
    for (;;) {
      const size_t ws = j;
      while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j >= s.size()) return fail("unterminated tag", i);
      if (s[j] == '>') break;
      if (s.compare(j, 2, "/>") == 0) {
        self_closing = true;
        ++j;
        break;
      }
      if (ws == j) return fail("attributes need whitespace between them", j);
      const size_t a0 = j;
      while (j < s.size() && detail::is_name_char(s[j])) ++j;
      const std::string attr = s.substr(a0, j - a0);
      if (attr.empty() || j + 1 >= s.size() || s[j] != '=' || (s[j + 1] != '"' && s[j + 1] != '\''))
        return fail("bad attribute", a0);
      const char q = s[j + 1];
      const size_t v_end = s.find(q, j + 2);
      if (v_end == std::string::npos) return fail("unterminated attribute value", j);
      std::string value;
      if (!detail::unescape(s, j + 2, v_end, value)) return fail("bad attribute value", j);
      if (!e.attrs.emplace(attr, value).second) return fail("duplicate attribute " + attr, a0);
      j = v_end + 1;
    }
    r.elements.push_back(e);
    seen_root = true;
    if (!self_closing) open.push_back(static_cast<int>(r.elements.size()) - 1);
    i = j + 1;
  }
  if (!open.empty()) return fail("unclosed <" + r.elements[open.back()].name + ">", s.size());
  if (!seen_root) return fail("no root element", 0);
  r.ok = true;
  return r;
}

}  // namespace tern::test
