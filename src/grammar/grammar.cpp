#include "grammar/grammar.h"

#include <algorithm>
#include <functional>

#include "core/utf8.h"

namespace tern::grammar {

namespace {

int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// [lo, hi] all of one encoded length: split until every byte position can
// range independently (a range that starts or ends mid-way through a
// continuation-byte block is cut at the block boundary), then emit one
// sequence per piece.
void split_same_length(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  const int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = utf8::encode(lo), b = utf8::encode(hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t k = 0; k < a.size(); ++k) seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  out.push_back(std::move(seq));
}

std::string set_key(const ByteSet& s) {
  return std::string(reinterpret_cast<const char*>(s.bits.data()), sizeof(s.bits));
}

}  // namespace

std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> out;
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  // Pieces without surrogates, each within one encoded length.
  const uint32_t bounds[][2] = {{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
  for (const auto& b : bounds) {
    const uint32_t a = std::max(lo, b[0]), z = std::min(hi, b[1]);
    if (a <= z) split_same_length(a, z, out);
  }
  return out;
}

uint32_t GrammarBuilder::rule(std::string_view name) {
  auto it = by_name_.find(std::string(name));
  if (it != by_name_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(g_.rules.size());
  g_.rules.push_back({std::string(name), {}});
  defined_.push_back(false);
  by_name_.emplace(std::string(name), id);
  if (g_.rules.size() > kMaxRules) too_big_ = true;
  return id;
}

uint32_t GrammarBuilder::fresh_rule(std::string_view hint) {
  // '#' never appears in a GBNF name, so generated names cannot clash.
  return rule(std::string(hint) + "#" + std::to_string(n_fresh_++));
}

void GrammarBuilder::add_alt(uint32_t rule, std::vector<Symbol> symbols) {
  n_symbols_ += symbols.size() + 1;
  if (n_symbols_ > kMaxSymbols) too_big_ = true;
  defined_[rule] = true;
  g_.rules[rule].alts.push_back(static_cast<uint32_t>(g_.alts.size()));
  g_.alts.push_back(std::move(symbols));
}

Symbol GrammarBuilder::bytes(const ByteSet& set) {
  const std::string key = set_key(set);
  auto it = byte_set_ids_.find(key);
  if (it == byte_set_ids_.end()) {
    it = byte_set_ids_.emplace(key, static_cast<uint32_t>(g_.byte_sets.size())).first;
    g_.byte_sets.push_back(set);
  }
  return {Symbol::Kind::Bytes, it->second};
}

Symbol GrammarBuilder::char_class(std::vector<CodeRange> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end(), [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  std::vector<CodeRange> merged;
  for (const CodeRange& r : ranges) {
    if (r.lo > r.hi) continue;
    if (!merged.empty() && r.lo <= merged.back().hi + 1)
      merged.back().hi = std::max(merged.back().hi, r.hi);
    else
      merged.push_back(r);
  }
  if (negated) {
    std::vector<CodeRange> comp;
    uint32_t next = 0;
    for (const CodeRange& r : merged) {
      if (r.lo > next) comp.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= 0x10FFFF) comp.push_back({next, 0x10FFFF});
    merged = std::move(comp);
  }
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
  for (const CodeRange& r : merged)
    for (auto& s : utf8_sequences(r.lo, r.hi)) seqs.push_back(std::move(s));
  if (seqs.empty()) {
    empty_class_ = true;
    return bytes(ByteSet{});  // matches nothing; finish() reports it
  }
  // ASCII-only (or any single-byte) classes are one byte set: the common case.
  ByteSet single;
  bool all_single = true;
  for (const auto& s : seqs) {
    if (s.size() != 1) all_single = false;
    else single.add_range(s[0].first, s[0].second);
  }
  if (all_single) return bytes(single);
  std::string key;
  for (const auto& s : seqs) {
    for (auto [a, b] : s) key += {static_cast<char>(a), static_cast<char>(b)};
    key += '|';
  }
  auto it = class_rules_.find(key);
  if (it != class_rules_.end()) return rule_ref(it->second);
  const uint32_t r = fresh_rule("char");
  // Single-byte sequences share one alternative; the others one each.
  if (!(single == ByteSet{})) add_alt(r, {bytes(single)});
  for (const auto& s : seqs) {
    if (s.size() == 1) continue;
    std::vector<Symbol> alt;
    for (auto [a, b] : s) {
      ByteSet set;
      set.add_range(a, b);
      alt.push_back(bytes(set));
    }
    add_alt(r, std::move(alt));
  }
  class_rules_.emplace(key, r);
  return rule_ref(r);
}

void GrammarBuilder::literal(std::string_view utf8, std::vector<Symbol>& out) {
  for (char c : utf8) {
    ByteSet s;
    s.add(static_cast<uint8_t>(c));
    out.push_back(bytes(s));
  }
}

Result<Symbol> GrammarBuilder::repeat(std::vector<Symbol> body, int min, int max) {
  if (min < 0 || (max >= 0 && max < min))
    return error(ErrorKind::InvalidArgument, "grammar: repetition {" + std::to_string(min) + "," +
                                                 std::to_string(max) + "} has max below min");
  if (std::max(min, max) > kMaxRepeatCount)
    return error(ErrorKind::OutOfRange, "grammar: repetition count " + std::to_string(std::max(min, max)) +
                                            " is too large (at most " + std::to_string(kMaxRepeatCount) + ")");
  // ?, * and + as rules: their states recur by themselves, no count needed.
  if (min <= 1 && (max < 0 || max <= 1)) return unrolled(std::move(body), min, max);
  const uint32_t r = fresh_rule("body");
  add_alt(r, std::move(body));
  g_.repeats.push_back({r, static_cast<uint32_t>(min), max < 0 ? Repeat::kUnbounded : static_cast<uint32_t>(max)});
  return Symbol{Symbol::Kind::Repeat, static_cast<uint32_t>(g_.repeats.size() - 1)};
}

Result<Symbol> GrammarBuilder::unrolled(std::vector<Symbol> body, int min, int max) {
  const size_t copies = static_cast<size_t>(std::max(min, max));
  if (copies * (body.size() + 2) > kMaxSymbols)
    return error(ErrorKind::OutOfRange, "grammar: repetition count " + std::to_string(copies) + " is too large");
  const uint32_t r = fresh_rule("repeat");
  std::vector<Symbol> seq;
  for (int i = 0; i < min; ++i) seq.insert(seq.end(), body.begin(), body.end());
  if (max < 0) {
    // tail ::= body tail | ε — right recursion, so the matcher never loops.
    const uint32_t tail = fresh_rule("star");
    std::vector<Symbol> more = body;
    more.push_back(rule_ref(tail));
    add_alt(tail, std::move(more));
    add_alt(tail, {});
    seq.push_back(rule_ref(tail));
  } else if (max > min) {
    // opt_k ::= body opt_{k+1} | ε, nested so at most max - min more copies.
    uint32_t next = 0;
    bool has_next = false;
    for (int k = max - min; k > 0; --k) {
      const uint32_t opt = fresh_rule("opt");
      std::vector<Symbol> alt = body;
      if (has_next) alt.push_back(rule_ref(next));
      add_alt(opt, std::move(alt));
      add_alt(opt, {});
      next = opt;
      has_next = true;
    }
    seq.push_back(rule_ref(next));
  }
  add_alt(r, std::move(seq));
  return rule_ref(r);
}

std::vector<bool> GrammarBuilder::nullable_rules() const {
  const size_t n = g_.rules.size();
  std::vector<bool> nullable(n, false);
  const auto sym_nullable = [&](const Symbol& s) {
    if (s.kind == Symbol::Kind::Rule) return static_cast<bool>(nullable[s.id]);
    if (s.kind == Symbol::Kind::Repeat) return g_.repeats[s.id].min == 0 || nullable[g_.repeats[s.id].body];
    return false;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (uint32_t a : g_.rules[r].alts) {
        if (std::all_of(g_.alts[a].begin(), g_.alts[a].end(), sym_nullable)) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

Status GrammarBuilder::unroll_nullable_repeats() {
  const std::vector<bool> nullable = nullable_rules();
  std::unordered_map<uint32_t, Symbol> replaced;  // repeat id -> its unrolled rule
  for (size_t i = 0; i < g_.repeats.size(); ++i) {
    const Repeat rep = g_.repeats[i];
    if (!nullable[rep.body]) continue;
    // A body that can match nothing makes the lower bound moot: body{m,n} = body{0,n}.
    auto r = unrolled({rule_ref(rep.body)}, 0, rep.max == Repeat::kUnbounded ? -1 : static_cast<int>(rep.max));
    if (!r.is_ok()) return r.status();
    replaced.emplace(static_cast<uint32_t>(i), *r);
  }
  if (replaced.empty()) return Status::ok();
  for (auto& alt : g_.alts)
    for (Symbol& s : alt)
      if (s.kind == Symbol::Kind::Repeat)
        if (auto it = replaced.find(s.id); it != replaced.end()) s = it->second;
  return Status::ok();
}

Result<Grammar> GrammarBuilder::finish(std::string_view root_name) {
  const auto too_big = [] {
    return error(ErrorKind::OutOfRange, "grammar: too large (over " + std::to_string(kMaxSymbols) + " symbols or " +
                                            std::to_string(kMaxRules) + " rules)");
  };
  if (too_big_) return too_big();
  if (empty_class_) return error(ErrorKind::InvalidArgument, "grammar: a character class matches no character");
  auto root = by_name_.find(std::string(root_name));
  if (root == by_name_.end()) return error(ErrorKind::InvalidArgument, "grammar: no rule named '" + std::string(root_name) + "'");
  for (size_t r = 0; r < g_.rules.size(); ++r)
    if (!defined_[r]) return error(ErrorKind::InvalidArgument, "grammar: rule '" + g_.rules[r].name + "' is used but not defined");
  g_.root = root->second;

  if (Status st = unroll_nullable_repeats(); !st.is_ok()) return st;
  if (too_big_) return too_big();
  const size_t n = g_.rules.size();
  const std::vector<bool> nullable = nullable_rules();
  // Left edges: r -> s when s can be the first thing r matches.
  std::vector<std::vector<uint32_t>> edges(n);
  for (size_t r = 0; r < n; ++r)
    for (uint32_t a : g_.rules[r].alts)
      for (const Symbol& s : g_.alts[a]) {
        if (s.kind == Symbol::Kind::Bytes) break;
        if (s.kind == Symbol::Kind::Repeat) {
          const Repeat& rep = g_.repeats[s.id];
          edges[r].push_back(rep.body);
          if (rep.min > 0) break;  // the body is not nullable here (unrolled above otherwise)
          continue;
        }
        edges[r].push_back(s.id);
        if (!nullable[s.id]) break;
      }
  // Iterative DFS for a cycle (0 = new, 1 = on the path, 2 = done).
  std::vector<uint8_t> color(n, 0);
  for (size_t start = 0; start < n; ++start) {
    if (color[start]) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(start), 0}};
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == edges[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t s = edges[r][i++];
      if (color[s] == 1)
        return error(ErrorKind::InvalidArgument, "grammar: rule '" + g_.rules[s].name +
                                                     "' is left-recursive (it can start with itself); rewrite it "
                                                     "with repetition, e.g. a ::= b (op b)*");
      if (color[s] == 0) {
        color[s] = 1;
        path.emplace_back(s, 0);
      }
    }
  }
  return std::move(g_);
}

}  // namespace tern::grammar
