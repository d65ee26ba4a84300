// Jinja evaluator: walks a Program with a stack of variable scopes and appends to one output
// string. Scoping follows Jinja2 where templates notice it: `set` inside a for loop is local
// to the iteration (hence namespace() objects, which are shared and mutable), while `if`
// blocks open no scope. Undefined variables, missing keys and out-of-range indices yield
// Undefined, which is falsy and renders as "". Every error becomes the render's Status.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <optional>

#include "tokenizer/jinja_ast.h"

namespace tern::jinja {
namespace {

class Renderer {
 public:
  Renderer(const RenderLimits& limits, Dict globals) : limits_(limits) { scopes_.push_back(std::move(globals)); }

  Result<std::string> run(const Program& program) {
    Flow flow = exec_body(program.body);
    if (flow == Flow::Error) return error_;
    return std::move(out_);
  }

 private:
  enum class Flow { Normal, Break, Continue, Error };

  // ---- errors and budgets ----

  Status located(int line, int column, ErrorKind kind, const std::string& message) const {
    return error(kind, "chat template: line " + std::to_string(line) + ", column " + std::to_string(column) + ": " +
                           message);
  }
  Value fail(const Expr& at, const std::string& message, ErrorKind kind = ErrorKind::InvalidArgument) {
    if (error_.is_ok()) error_ = located(at.line, at.column, kind, message);
    return {};
  }
  Value fail_status(const Expr& at, const Status& s) { return fail(at, s.message(), s.kind()); }
  bool failed() const { return !error_.is_ok(); }

  // Counts one unit of work; false (with error_ set) once the budget is spent.
  bool step(int line, int column) {
    if (++n_steps_ <= limits_.max_steps) return true;
    if (error_.is_ok()) {
      error_ = located(line, column, ErrorKind::OutOfRange,
                       "template exceeded its evaluation budget of " + std::to_string(limits_.max_steps) + " steps");
    }
    return false;
  }

  struct DepthGuard {
    Renderer* r;
    explicit DepthGuard(Renderer* renderer) : r(renderer) { ++r->depth_; }
    ~DepthGuard() { --r->depth_; }
    bool too_deep() const { return r->depth_ > r->limits_.max_depth; }
  };

  // Rejects values over the size limits, so no later step copies or grows them further.
  Value checked(const Expr& at, Value v) {
    if (v.is_string() && v.s.size() > limits_.max_output_bytes) {
      return fail(at, "a string grew past " + std::to_string(limits_.max_output_bytes) + " bytes",
                  ErrorKind::OutOfRange);
    }
    if (v.kind == ValueKind::Array && v.list->size() > limits_.max_list_items) {
      return fail(at, "a list grew past " + std::to_string(limits_.max_list_items) + " items", ErrorKind::OutOfRange);
    }
    return v;
  }

  // ---- scopes ----

  const Value* lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      for (const auto& [k, v] : *scope) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }

  static void assign(Dict& scope, const std::string& name, Value v) {
    for (auto& [k, old] : scope) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    scope.emplace_back(name, std::move(v));
  }

  // ---- statements ----

  Flow exec_body(const Body& body) {
    DepthGuard guard(this);
    if (guard.too_deep()) {
      if (error_.is_ok()) error_ = error(ErrorKind::OutOfRange, "chat template: blocks nested too deeply");
      return Flow::Error;
    }
    for (const NodePtr& node : body) {
      Flow flow = exec(*node);
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

  Flow emit_error(const Node& n) {
    if (error_.is_ok()) {
      error_ = located(n.line, n.column, ErrorKind::OutOfRange,
                       "rendered prompt exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
    }
    return Flow::Error;
  }

  Flow exec(const Node& n) {
    if (!step(n.line, n.column)) return Flow::Error;
    switch (n.kind) {
      case NodeKind::Text:
        if (out_.size() + n.text.size() > limits_.max_output_bytes) return emit_error(n);
        out_ += n.text;
        return Flow::Normal;
      case NodeKind::Output: {
        Value v = eval(*n.expr);
        if (failed()) return Flow::Error;
        if (!append_str(v, out_, limits_.max_output_bytes)) return emit_error(n);
        return Flow::Normal;
      }
      case NodeKind::If:
        for (size_t k = 0; k < n.conditions.size(); ++k) {
          Value cond = eval(*n.conditions[k]);
          if (failed()) return Flow::Error;
          if (truthy(cond)) return exec_body(n.bodies[k]);
        }
        if (n.bodies.size() > n.conditions.size()) return exec_body(n.bodies.back());
        return Flow::Normal;
      case NodeKind::For: return exec_for(n);
      case NodeKind::Set: return exec_set(n);
      case NodeKind::Break: return Flow::Break;
      case NodeKind::Continue: return Flow::Continue;
      case NodeKind::Block: return exec_body(n.bodies[0]);
      case NodeKind::SetBlock: {
        auto text = capture(n.bodies[0]);
        if (!text) return Flow::Error;
        assign(scopes_.back(), n.targets[0], Value::of_string(std::move(*text)));
        return Flow::Normal;
      }
      case NodeKind::Macro: {
        Value m;
        m.kind = ValueKind::Macro;
        m.macro = &n;
        assign(scopes_.back(), n.targets[0], std::move(m));
        return Flow::Normal;
      }
      case NodeKind::CallBlock: return exec_call_block(n);
      case NodeKind::FilterBlock: {
        auto text = capture(n.bodies[0]);
        if (!text) return Flow::Error;
        // The filters over the body's text, innermost first (the chain's root is a placeholder;
        // the program is shared by concurrent renders, so it is read, never written).
        std::vector<const Expr*> chain;
        for (const Expr* f = n.expr.get(); f->kind == ExprKind::Filter; f = f->args[0].get()) chain.push_back(f);
        Value v = Value::of_string(std::move(*text));
        for (auto f = chain.rbegin(); f != chain.rend(); ++f) {
          CallArgs call;
          if (!eval_args(**f, 1, call)) return Flow::Error;
          auto r = apply_filter((*f)->name, v, call, limits_.max_output_bytes);
          if (!r.is_ok()) {
            fail_status(**f, r.status());
            return Flow::Error;
          }
          v = checked(**f, std::move(r.value()));
          if (failed()) return Flow::Error;
        }
        if (!append_str(v, out_, limits_.max_output_bytes)) return emit_error(n);
        return Flow::Normal;
      }
    }
    return Flow::Normal;
  }

  // Renders `body` into a string of its own (a block set, a macro, a filter block).
  std::optional<std::string> capture(const Body& body) {
    std::string saved;
    saved.swap(out_);
    const Flow flow = exec_body(body);
    std::string text;
    text.swap(out_);
    out_.swap(saved);
    if (flow == Flow::Error) return std::nullopt;
    if (out_.size() + text.size() > limits_.max_output_bytes) {
      if (error_.is_ok()) error_ = error(ErrorKind::OutOfRange, "chat template: a block's text exceeds the output limit");
      return std::nullopt;
    }
    return text;
  }

  // A macro call: its parameters bound from the arguments (then the defaults), its body run
  // with the template's top level and those parameters in view — or, for a call block's
  // caller(), in the scopes of the call site — and its text returned.
  Value call_macro(const Expr& at, const Value& m, const CallArgs& call, const Value* caller) {
    const Node& def = *m.macro;
    struct MacroDepth {  // counts this call while it runs, whatever way it returns
      int& depth;
      explicit MacroDepth(int& d) : depth(++d) {}
      ~MacroDepth() { --depth; }
    } guard(macro_depth_);
    if (macro_depth_ > kMaxMacroDepth) return fail(at, "macros nested too deeply", ErrorKind::OutOfRange);
    Dict params;
    if (m.closure == nullptr) {
      if (call.args.size() > def.params.size())
        return fail(at, "macro '" + def.targets[0] + "' takes " + std::to_string(def.params.size()) +
                            " arguments, got " + std::to_string(call.args.size()));
      for (size_t k = 0; k < def.params.size(); ++k) {
        const std::string& name = def.params[k].first;
        if (k < call.args.size()) {
          params.emplace_back(name, call.args[k]);
        } else if (const Value* v = call.kwarg(name)) {
          params.emplace_back(name, *v);
        } else if (def.params[k].second) {
          params.emplace_back(name, eval(*def.params[k].second));
          if (failed()) return {};
        } else {
          params.emplace_back(name, Value{});  // Jinja: a missing argument is undefined
        }
      }
      if (caller) params.emplace_back("caller", *caller);
    }
    std::vector<Dict> saved;
    saved.swap(scopes_);
    if (m.closure) {
      scopes_ = *m.closure;
    } else {
      scopes_.push_back(saved.front());  // the globals and top-level sets
    }
    scopes_.push_back(std::move(params));
    auto text = capture(def.bodies[0]);  // a macro's body, or a call block's
    scopes_.swap(saved);
    if (!text) return {};
    return Value::of_string(std::move(*text));
  }

  Flow exec_call_block(const Node& n) {
    const Expr& call_expr = *n.expr;
    const Value* m = lookup(call_expr.name);
    if (m == nullptr || m->kind != ValueKind::Macro) {
      fail(call_expr, "'" + call_expr.name + "' is not a macro");
      return Flow::Error;
    }
    const Value macro = *m;
    CallArgs call;
    if (!eval_args(call_expr, 0, call)) return Flow::Error;
    Value caller;
    caller.kind = ValueKind::Macro;
    caller.macro = &n;
    caller.closure = std::make_shared<const std::vector<Dict>>(scopes_);
    Value v = call_macro(call_expr, macro, call, &caller);
    if (failed()) return Flow::Error;
    if (out_.size() + v.s.size() > limits_.max_output_bytes) return emit_error(n);
    out_ += v.s;
    return Flow::Normal;
  }

  // Binds the loop variables of `n` to `item` in `scope`; false (error set) if it cannot unpack.
  bool bind_targets(const Node& n, const Value& item, Dict& scope) {
    if (n.targets.size() == 1) {
      assign(scope, n.targets[0], item);
      return true;
    }
    if (item.kind != ValueKind::Array || item.list->size() != n.targets.size()) {
      fail(*n.expr, "cannot unpack " + std::string(type_name(item)) + " into " + std::to_string(n.targets.size()) +
                        " loop variables");
      return false;
    }
    for (size_t k = 0; k < n.targets.size(); ++k) assign(scope, n.targets[k], (*item.list)[k]);
    return true;
  }

  Flow exec_for(const Node& n) {
    Value iterable = eval(*n.expr);
    if (failed()) return Flow::Error;
    // Lists are iterated in place (they are never mutated); other iterables are listed first.
    std::shared_ptr<List> items = iterable.list;
    if (iterable.kind != ValueKind::Array) {
      auto listed = apply_filter("list", iterable, CallArgs{}, limits_.max_output_bytes);
      if (!listed.is_ok()) {
        fail_status(*n.expr, listed.status());
        return Flow::Error;
      }
      items = listed.value().list;
    }
    if (n.filter) {
      auto kept = std::make_shared<List>();
      scopes_.emplace_back();
      for (const Value& item : *items) {
        if (!step(n.line, n.column)) break;
        scopes_.back().clear();
        Value keep = bind_targets(n, item, scopes_.back()) ? eval(*n.filter) : Value{};
        if (failed()) break;
        if (truthy(keep)) kept->push_back(item);
      }
      scopes_.pop_back();
      if (failed()) return Flow::Error;
      items = std::move(kept);
    }
    const auto n_items = static_cast<int64_t>(items->size());
    // One scope and one loop object serve every iteration and are updated in place, so an
    // iteration allocates nothing beyond what its body does. Scope layout: [loop, targets...,
    // variables the body sets]; the latter are dropped after each iteration.
    Value loop = Value::of_dict({{"index", Value::of_int(0)},
                                 {"index0", Value::of_int(0)},
                                 {"revindex", Value::of_int(0)},
                                 {"revindex0", Value::of_int(0)},
                                 {"first", Value::of_bool(false)},
                                 {"last", Value::of_bool(false)},
                                 {"length", Value::of_int(n_items)},
                                 {"previtem", Value{}},     // undefined on the first iteration
                                 {"nextitem", Value{}}});  // and on the last
    Dict& fields = *loop.dict;
    scopes_.emplace_back();
    scopes_.back().emplace_back("loop", loop);
    for (const std::string& target : n.targets) scopes_.back().emplace_back(target, Value{});
    const size_t n_fixed = 1 + n.targets.size();
    Flow flow = Flow::Normal;
    for (int64_t k = 0; k < n_items; ++k) {
      if (!step(n.line, n.column)) {  // an empty body still costs a step
        flow = Flow::Error;
        break;
      }
      fields[0].second.i = k + 1;
      fields[1].second.i = k;
      fields[2].second.i = n_items - k;
      fields[3].second.i = n_items - k - 1;
      fields[4].second.b = k == 0;
      fields[5].second.b = k == n_items - 1;
      fields[7].second = k > 0 ? (*items)[static_cast<size_t>(k - 1)] : Value{};
      fields[8].second = k + 1 < n_items ? (*items)[static_cast<size_t>(k + 1)] : Value{};
      Dict& scope = scopes_.back();
      scope.resize(n_fixed);
      const Value& item = (*items)[static_cast<size_t>(k)];
      if (n.targets.size() == 1) {
        scope[1].second = item;
      } else if (item.kind == ValueKind::Array && item.list->size() == n.targets.size()) {
        for (size_t j = 0; j < n.targets.size(); ++j) scope[1 + j].second = (*item.list)[j];
      } else {
        fail(*n.expr, "cannot unpack " + std::string(type_name(item)) + " into " + std::to_string(n.targets.size()) +
                          " loop variables");
        flow = Flow::Error;
        break;
      }
      flow = exec_body(n.bodies[0]);
      if (flow == Flow::Error || flow == Flow::Break) break;
      flow = Flow::Normal;  // Continue ends only this iteration
    }
    scopes_.pop_back();
    if (flow == Flow::Error) return flow;
    if (n_items == 0 && n.bodies.size() > 1) return exec_body(n.bodies[1]);
    return Flow::Normal;
  }

  Flow exec_set(const Node& n) {
    Value v = eval(*n.expr);
    if (failed()) return Flow::Error;
    if (n.attr.empty()) {
      assign(scopes_.back(), n.targets[0], std::move(v));
      return Flow::Normal;
    }
    const Value* target = lookup(n.targets[0]);
    if (target == nullptr || target->kind != ValueKind::Namespace) {
      fail(*n.expr, "cannot set attribute '" + n.attr + "' on " +
                        (target == nullptr ? std::string("undefined '") + n.targets[0] + "'"
                                           : std::string("a ") + type_name(*target)));
      return Flow::Error;
    }
    assign(*target->dict, n.attr, std::move(v));  // shared storage: visible outside the loop
    return Flow::Normal;
  }

  // ---- expressions ----

  Value eval(const Expr& e) {
    DepthGuard guard(this);
    if (guard.too_deep()) return fail(e, "expression nested too deeply", ErrorKind::OutOfRange);
    if (!step(e.line, e.column)) return {};
    Value v = eval_node(e);
    if (failed()) return {};
    return checked(e, std::move(v));
  }

  // Evaluates positional and keyword arguments starting at args[first].
  bool eval_args(const Expr& e, size_t first, CallArgs& call) {
    for (size_t k = first; k < e.args.size(); ++k) {
      call.args.push_back(eval(*e.args[k]));
      if (failed()) return false;
    }
    for (const auto& [key, expr] : e.kwargs) {
      call.kwargs.emplace_back(key, eval(*expr));
      if (failed()) return false;
    }
    return true;
  }

  Value eval_node(const Expr& e) {
    switch (e.kind) {
      case ExprKind::Literal: return e.literal;
      case ExprKind::Name: {
        const Value* v = lookup(e.name);
        return v != nullptr ? *v : Value{};
      }
      case ExprKind::ListLit: {
        CallArgs items;
        if (!eval_args(e, 0, items)) return {};
        return Value::of_list(std::move(items.args));
      }
      case ExprKind::DictLit: {
        Dict d;
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Value key = eval(*e.args[k]);
          Value value = eval(*e.args[k + 1]);
          if (failed()) return {};
          if (!key.is_string()) return fail(*e.args[k], "dict keys must be strings");
          assign(d, key.s, std::move(value));
        }
        return Value::of_dict(std::move(d));
      }
      case ExprKind::GetAttr: {
        Value obj = eval(*e.args[0]);
        const Value* found = obj.find(e.name);
        return found != nullptr ? *found : Value{};
      }
      case ExprKind::GetItem: return eval_get_item(e);
      case ExprKind::Slice: return eval_slice(e);
      case ExprKind::Call: return eval_call(e);
      case ExprKind::MethodCall: {
        Value obj = eval(*e.args[0]);
        CallArgs call;
        if (failed() || !eval_args(e, 1, call)) return {};
        auto r = call_method(obj, e.name, call, limits_.max_output_bytes);
        return r.is_ok() ? std::move(r.value()) : fail_status(e, r.status());
      }
      case ExprKind::Filter: {
        Value in = eval(*e.args[0]);
        CallArgs call;
        if (failed() || !eval_args(e, 1, call)) return {};
        auto r = apply_filter(e.name, in, call, limits_.max_output_bytes);
        return r.is_ok() ? std::move(r.value()) : fail_status(e, r.status());
      }
      case ExprKind::Test: {
        Value in = eval(*e.args[0]);
        CallArgs call;
        if (failed() || !eval_args(e, 1, call)) return {};
        auto r = apply_test(e.name, in, call);
        return r.is_ok() ? Value::of_bool(r.value() != e.negated) : fail_status(e, r.status());
      }
      case ExprKind::Unary: return eval_unary(e);
      case ExprKind::Binary: return eval_binary(e);
      case ExprKind::Ternary: {
        Value cond = eval(*e.args[1]);
        if (failed()) return {};
        if (truthy(cond)) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : Value{};
      }
    }
    return {};
  }

  // Python indexing by code point for strings, with negative indices; misses are Undefined.
  Value eval_get_item(const Expr& e) {
    Value obj = eval(*e.args[0]);
    Value index = eval(*e.args[1]);
    if (failed()) return {};
    if (index.is_string()) {
      const Value* found = obj.find(index.s);
      return found != nullptr ? *found : Value{};
    }
    if (index.kind != ValueKind::Int) return {};
    if (obj.kind == ValueKind::Array) {
      int64_t n = static_cast<int64_t>(obj.list->size());
      int64_t k = index.i < 0 ? index.i + n : index.i;
      return k >= 0 && k < n ? (*obj.list)[static_cast<size_t>(k)] : Value{};
    }
    if (obj.is_string()) {
      std::vector<size_t> cps = code_points(obj.s);
      int64_t n = static_cast<int64_t>(cps.size()) - 1;
      int64_t k = index.i < 0 ? index.i + n : index.i;
      if (k < 0 || k >= n) return {};
      return Value::of_string(obj.s.substr(cps[k], cps[k + 1] - cps[k]));
    }
    return {};
  }

  Value eval_slice(const Expr& e) {
    Value obj = eval(*e.args[0]);
    int64_t bounds[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!e.args[k + 1]) continue;
      Value v = eval(*e.args[k + 1]);
      if (failed()) return {};
      if (v.kind == ValueKind::None) continue;
      if (v.kind != ValueKind::Int) return fail(*e.args[k + 1], "slice indices must be integers or none");
      bounds[k] = v.i;
      given[k] = true;
    }
    if (failed()) return {};
    const int64_t step = bounds[2];
    if (step == 0) return fail(e, "slice step cannot be zero");
    std::vector<size_t> cps;
    int64_t n = 0;
    if (obj.kind == ValueKind::Array) {
      n = static_cast<int64_t>(obj.list->size());
    } else if (obj.is_string()) {
      cps = code_points(obj.s);
      n = static_cast<int64_t>(cps.size()) - 1;
    } else if (obj.is_undefined()) {
      return {};
    } else {
      return fail(e, std::string("cannot slice a ") + type_name(obj));
    }
    // Python's slice.indices(): clamp into range, with -1 meaning "before the first" for step < 0.
    auto adjust = [&](int64_t v, bool present, int64_t fallback) {
      if (!present) return fallback;
      if (v < 0) v += n;
      if (v < 0) return step < 0 ? int64_t{-1} : int64_t{0};
      if (v >= n) return step < 0 ? n - 1 : n;
      return v;
    };
    int64_t start = adjust(bounds[0], given[0], step > 0 ? 0 : n - 1);
    int64_t stop = adjust(bounds[1], given[1], step > 0 ? n : -1);
    List items;
    std::string text;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (obj.kind == ValueKind::Array) {
        items.push_back((*obj.list)[static_cast<size_t>(k)]);
      } else {
        text.append(obj.s, cps[k], cps[k + 1] - cps[k]);
      }
    }
    return obj.kind == ValueKind::Array ? Value::of_list(std::move(items)) : Value::of_string(std::move(text));
  }

  Value eval_call(const Expr& e) {
    CallArgs call;
    if (!eval_args(e, 0, call)) return {};
    if (const Value* m = lookup(e.name); m != nullptr && m->kind == ValueKind::Macro) {
      const Value macro = *m;
      return call_macro(e, macro, call, nullptr);
    }
    if (e.name == "raise_exception") {
      std::string message;
      if (!call.args.empty()) append_str(call.args[0], message, limits_.max_output_bytes);
      if (error_.is_ok()) error_ = error(ErrorKind::InvalidArgument, "chat template: " + message);
      return {};
    }
    if (e.name == "namespace" || e.name == "dict") {
      Dict d;
      if (!call.args.empty() && call.args[0].kind == ValueKind::Map) d = *call.args[0].dict;
      for (auto& [k, v] : call.kwargs) assign(d, k, std::move(v));
      return Value::of_dict(std::move(d), e.name == "namespace" ? ValueKind::Namespace : ValueKind::Map);
    }
    if (e.name == "range") return eval_range(e, call);
    if (e.name == "strftime_now") return eval_strftime_now(e, call);
    return fail(e, "unknown function '" + e.name + "'");
  }

  // strftime_now(format), the clock function transformers gives templates (for "Today Date: ...").
  Value eval_strftime_now(const Expr& e, const CallArgs& call) {
    if (call.args.size() != 1 || !call.args[0].is_string()) return fail(e, "strftime_now() takes one format string");
    const std::time_t t = limits_.now_unix != 0 ? static_cast<std::time_t>(limits_.now_unix) : std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[256];
    // The template chooses the format: that is the function's point (strftime only formats).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    const size_t n = call.args[0].s.size() < 128 ? std::strftime(buf, sizeof buf, call.args[0].s.c_str(), &tm) : 0;
#pragma GCC diagnostic pop
    if (n == 0 && !call.args[0].s.empty()) return fail(e, "strftime_now(): format is too long or formats to nothing");
    return Value::of_string(std::string(buf, n));
  }

  Value eval_range(const Expr& e, const CallArgs& call) {
    int64_t a[3] = {0, 0, 1};
    if (call.args.empty() || call.args.size() > 3) return fail(e, "range() takes 1 to 3 integers");
    for (const Value& v : call.args) {
      if (v.kind != ValueKind::Int) return fail(e, "range() takes integers");
    }
    if (call.args.size() == 1) {
      a[1] = call.args[0].i;
    } else {
      for (size_t k = 0; k < call.args.size(); ++k) a[k] = call.args[k].i;
    }
    if (a[2] == 0) return fail(e, "range() step cannot be zero");
    List out;
    for (int64_t k = a[0]; a[2] > 0 ? k < a[1] : k > a[1]; k += a[2]) {
      if (out.size() >= limits_.max_list_items) return fail(e, "range() is too long", ErrorKind::OutOfRange);
      out.push_back(Value::of_int(k));
    }
    return Value::of_list(std::move(out));
  }

  Value eval_unary(const Expr& e) {
    Value v = eval(*e.args[0]);
    if (failed()) return {};
    if (e.name == "not") return Value::of_bool(!truthy(v));
    if (v.kind == ValueKind::Int) return Value::of_int(e.name == "-" ? -v.i : v.i);
    if (v.kind == ValueKind::Float) return Value::of_float(e.name == "-" ? -v.f : v.f);
    if (v.kind == ValueKind::Bool) return Value::of_int(e.name == "-" ? -int64_t{v.b} : int64_t{v.b});
    return fail(e, std::string("bad operand type for unary ") + e.name + ": '" + type_name(v) + "'");
  }

  bool contains(const Value& container, const Value& item, const Expr& e) {
    if (container.is_string()) {
      if (!item.is_string()) {
        fail(e, std::string("'in <string>' requires a string, not '") + type_name(item) + "'");
        return false;
      }
      return container.s.find(item.s) != std::string::npos;
    }
    if (container.kind == ValueKind::Array) {
      return std::any_of(container.list->begin(), container.list->end(), [&](const Value& v) { return equals(v, item); });
    }
    if (container.is_mapping()) return item.is_string() && container.find(item.s) != nullptr;
    if (container.is_undefined()) return false;
    fail(e, std::string("argument of type '") + type_name(container) + "' is not a container");
    return false;
  }

  Value eval_binary(const Expr& e) {
    const std::string& op = e.name;
    Value lhs = eval(*e.args[0]);
    if (failed()) return {};
    if (op == "and") return truthy(lhs) ? eval(*e.args[1]) : lhs;
    if (op == "or") return truthy(lhs) ? lhs : eval(*e.args[1]);
    Value rhs = eval(*e.args[1]);
    if (failed()) return {};
    if (op == "==") return Value::of_bool(equals(lhs, rhs));
    if (op == "!=") return Value::of_bool(!equals(lhs, rhs));
    if (op == "in" || op == "not in") {
      bool hit = contains(rhs, lhs, e);
      return failed() ? Value{} : Value::of_bool(hit != (op == "not in"));
    }
    if (op == "~") {
      std::string s;
      if (!append_str(lhs, s, limits_.max_output_bytes) || !append_str(rhs, s, limits_.max_output_bytes)) {
        return fail(e, "a string grew past the output limit", ErrorKind::OutOfRange);
      }
      return Value::of_string(std::move(s));
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") return compare(e, lhs, rhs);
    return arithmetic(e, lhs, rhs);
  }

  Value compare(const Expr& e, const Value& lhs, const Value& rhs) {
    int order = 0;
    if (lhs.is_string() && rhs.is_string()) {
      order = lhs.s.compare(rhs.s);
    } else if (is_num(lhs) && is_num(rhs)) {
      double a = num(lhs), b = num(rhs);
      order = a < b ? -1 : a > b ? 1 : 0;
    } else {
      return fail(e, "'" + e.name + "' not supported between '" + type_name(lhs) + "' and '" + type_name(rhs) + "'");
    }
    const std::string& op = e.name;
    return Value::of_bool(op == "<" ? order < 0 : op == ">" ? order > 0 : op == "<=" ? order <= 0 : order >= 0);
  }

  static bool is_num(const Value& v) { return v.is_number() || v.kind == ValueKind::Bool; }
  static bool is_int(const Value& v) { return v.kind == ValueKind::Int || v.kind == ValueKind::Bool; }
  static int64_t as_int(const Value& v) { return v.kind == ValueKind::Int ? v.i : int64_t{v.b}; }
  static double num(const Value& v) { return v.kind == ValueKind::Float ? v.f : static_cast<double>(as_int(v)); }

  Value repeat(const Expr& e, const Value& seq, int64_t times) {
    times = std::max<int64_t>(times, 0);
    size_t unit = seq.is_string() ? seq.s.size() : seq.list->size();
    size_t cap = seq.is_string() ? limits_.max_output_bytes : limits_.max_list_items;
    if (unit != 0 && static_cast<uint64_t>(times) > cap / unit) {
      return fail(e, "repetition grows past the size limit", ErrorKind::OutOfRange);
    }
    if (seq.is_string()) {
      std::string s;
      for (int64_t k = 0; k < times; ++k) s += seq.s;
      return Value::of_string(std::move(s));
    }
    List l;
    for (int64_t k = 0; k < times; ++k) l.insert(l.end(), seq.list->begin(), seq.list->end());
    return Value::of_list(std::move(l));
  }

  Value arithmetic(const Expr& e, const Value& lhs, const Value& rhs) {
    const std::string& op = e.name;
    if (op == "+") {
      if (lhs.is_string() && rhs.is_string()) return Value::of_string(lhs.s + rhs.s);
      // Undefined joins strings as "" (Jinja's default Undefined would raise; templates that
      // concatenate an optional field expect the lenient reading).
      if (lhs.is_string() && rhs.is_undefined()) return lhs;
      if (lhs.is_undefined() && rhs.is_string()) return rhs;
      if (lhs.kind == ValueKind::Array && rhs.kind == ValueKind::Array) {
        if (lhs.list->size() + rhs.list->size() > limits_.max_list_items) {
          return fail(e, "a list grew past the size limit", ErrorKind::OutOfRange);
        }
        List l = *lhs.list;
        l.insert(l.end(), rhs.list->begin(), rhs.list->end());
        return Value::of_list(std::move(l));
      }
    }
    if (op == "*" && (lhs.is_string() || lhs.kind == ValueKind::Array) && is_int(rhs)) return repeat(e, lhs, as_int(rhs));
    if (op == "*" && is_int(lhs) && (rhs.is_string() || rhs.kind == ValueKind::Array)) return repeat(e, rhs, as_int(lhs));
    if (!is_num(lhs) || !is_num(rhs)) {
      return fail(e, "unsupported operand types for " + op + ": '" + type_name(lhs) + "' and '" + type_name(rhs) + "'");
    }
    const bool ints = is_int(lhs) && is_int(rhs);
    const int64_t a = ints ? as_int(lhs) : 0, b = ints ? as_int(rhs) : 0;
    const double x = num(lhs), y = num(rhs);
    if ((op == "/" || op == "//" || op == "%") && y == 0.0) return fail(e, "division by zero");
    if (ints && b == -1 && a == std::numeric_limits<int64_t>::min() && (op == "//" || op == "%")) {
      return fail(e, "integer overflow in '" + op + "'", ErrorKind::OutOfRange);
    }
    if (ints && (op == "+" || op == "-" || op == "*")) {
      int64_t r = 0;
      bool overflow = op == "+" ? __builtin_add_overflow(a, b, &r)
                      : op == "-" ? __builtin_sub_overflow(a, b, &r)
                                  : __builtin_mul_overflow(a, b, &r);
      if (overflow) return fail(e, "integer overflow in '" + op + "'", ErrorKind::OutOfRange);
      return Value::of_int(r);
    }
    if (op == "+") return Value::of_float(x + y);
    if (op == "-") return Value::of_float(x - y);
    if (op == "*") return Value::of_float(x * y);
    if (op == "/") return Value::of_float(x / y);
    if (op == "//") {
      if (!ints) return Value::of_float(std::floor(x / y));
      int64_t q = a / b;
      return Value::of_int((a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q);  // floor, like Python
    }
    if (op == "%") {
      if (!ints) return Value::of_float(x - y * std::floor(x / y));
      int64_t r = a % b;
      return Value::of_int(r != 0 && ((r < 0) != (b < 0)) ? r + b : r);  // sign of the divisor
    }
    if (op == "**") {
      if (ints && b >= 0) {
        double p = std::pow(x, y);
        if (std::fabs(p) > 9e18) return fail(e, "integer power overflows", ErrorKind::OutOfRange);
        return Value::of_int(static_cast<int64_t>(std::llround(p)));
      }
      return Value::of_float(std::pow(x, y));
    }
    return fail(e, "unsupported operator '" + op + "'");
  }

  const RenderLimits& limits_;
  static constexpr int kMaxMacroDepth = 64;  // recursion through macros stops here
  int macro_depth_ = 0;
  std::vector<Dict> scopes_;  // [0] globals and template-level `set`; one more per loop iteration
  std::string out_;
  Status error_;
  int64_t n_steps_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<std::string> render_program(const Program& program, Dict globals, const RenderLimits& limits) {
  return Renderer(limits, std::move(globals)).run(program);
}

}  // namespace tern::jinja
