#include "engine/model_runner.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "core/assert.h"

namespace tern {

ModelRunner::ModelRunner(const Model& model, KvManager& kv, int32_t n_ctx_seq) : model_(model), kv_(kv) {
  input_.n_ctx_seq = n_ctx_seq;
}

void ModelRunner::add_request(RequestId id, const RunnerRequest& r) {
  auto st = std::make_unique<RequestState>(Sampler(r.sampling, model_.hparams().n_vocab), r.n_logprobs);
  for (TokenId t : r.prompt) st->sampler.accept(t);
  st->logit_bias = r.logit_bias;
  st->embed = r.embed;
  st->embed_normalize = r.embed_normalize;
  st->n_prompt = static_cast<int32_t>(r.prompt.size());
  if (r.n_prompt_logprobs >= 0) {
    st->n_prompt_logprobs = r.n_prompt_logprobs;
    st->prompt.assign(r.prompt.begin(), r.prompt.end());
  }
  if (r.grammar) {
    TERN_ASSERT_MSG(r.vocab != nullptr, "runner: a grammar needs the vocabulary's pieces");
    st->matcher = std::make_unique<grammar::Matcher>(r.grammar);
    st->matcher->share_masks(masks_for(r));
    st->vocab = r.vocab;
    st->end_ids = r.end_ids;
  }
  requests_[id] = std::move(st);
}

std::shared_ptr<grammar::MaskCache> ModelRunner::masks_for(const RunnerRequest& r) {
  auto it = mask_caches_.find(r.grammar.get());
  if (it != mask_caches_.end() && it->second.vocab == r.vocab) return it->second.masks;
  if (mask_caches_.size() >= kIdleMaskCaches) {
    // Drop the caches no request holds any more (a matcher holds one while its request lives).
    std::erase_if(mask_caches_, [](const auto& e) { return e.second.masks.use_count() == 1; });
  }
  auto masks = std::make_shared<grammar::MaskCache>();
  mask_caches_[r.grammar.get()] = {r.grammar, r.vocab, masks};
  return masks;
}

void ModelRunner::constrain(RequestState& st, std::span<float> row) {
  for (const auto& [tok, bias] : st.logit_bias) row[static_cast<size_t>(tok)] += bias;
  if (!st.matcher) return;
  const std::vector<uint64_t>& bits = st.matcher->mask_bits(st.vocab->trie);
  std::vector<float>& end_logits = st.end_logits;
  end_logits.clear();
  for (TokenId e : st.end_ids) end_logits.push_back(row[static_cast<size_t>(e)]);
  // Word by word: a word of 64 allowed tokens (most of a JSON string's
  // vocabulary) costs one compare; only disallowed bits touch the row.
  constexpr float kNever = -std::numeric_limits<float>::infinity();
  bool any = false;
  const size_t n_words = std::min(bits.size(), (row.size() + 63) / 64);
  for (size_t w = 0; w < n_words; ++w) {
    const uint64_t word = bits[w];
    if (word != 0) any = true;
    if (word == ~uint64_t{0}) continue;
    for (uint64_t off = ~word; off != 0; off &= off - 1) {
      const size_t t = w * 64 + static_cast<size_t>(std::countr_zero(off));
      if (t >= row.size()) break;
      row[t] = kNever;
    }
  }
  for (size_t t = n_words * 64; t < row.size(); ++t) row[t] = kNever;  // ids the vocabulary's trie does not have
  // End-of-text where the sentence is complete — and also when nothing else
  // fits (a grammar needing bytes no token has): ending beats sampling from nothing.
  if (st.matcher->can_end() || !any)
    for (size_t i = 0; i < st.end_ids.size(); ++i) row[static_cast<size_t>(st.end_ids[i])] = end_logits[i];
}

void ModelRunner::accept_token(RequestState& st, TokenId tok) {
  st.sampler.accept(tok);
  if (!st.matcher || std::find(st.end_ids.begin(), st.end_ids.end(), tok) != st.end_ids.end()) return;
  // The mask allowed it, so the grammar takes it.
  const bool ok = st.matcher->accept(st.vocab->pieces[static_cast<size_t>(tok)]);
  TERN_ASSERT_MSG(ok, "runner: the grammar refused a token its own mask allowed");
}

void ModelRunner::remove_request(RequestId id) { requests_.erase(id); }

Status ModelRunner::build_input(const SchedulerOutput& so, const Scheduler& sched, std::span<const int> n_rows) {
  ForwardInput& in = input_;
  in.clear();
  const int n_groups = kv_.n_groups();
  in.kv.resize(static_cast<size_t>(n_groups));
  pools_.clear();
  for (int g = 0; g < n_groups; ++g) {
    in.kv[static_cast<size_t>(g)].table_begin.push_back(0);
    pools_.push_back(kv_.pool(g));
  }
  const int bs = kv_.block_size();
  // Tree fields only when some chunk carries a tree: the plain form otherwise.
  bool any_tree = false, any_window = false;
  for (const ScheduledChunk& c : so.chunks)
    if (const SchedRequest* r = sched.find(c.id)) {
      any_tree = any_tree || (c.n_spec > 0 && !r->spec_parents.empty());
      any_window = any_window || r->window.active() || r->window.evicting();
    }
  for (size_t i = 0; i < so.chunks.size(); ++i) {
    const ScheduledChunk& c = so.chunks[i];
    const SchedRequest* r = sched.find(c.id);
    if (!r) return error(ErrorKind::Internal, "runner: scheduled request " + std::to_string(c.id.value) + " is unknown");
    const int32_t begin = r->n_computed, end = begin + c.n_tokens;
    TERN_ASSERT(end - c.n_spec <= static_cast<int32_t>(r->tokens.size()) &&
                c.n_spec <= static_cast<int32_t>(r->spec_tokens.size()));
    const int32_t si = in.n_seqs++;
    if (any_window) {  // every sequence's, once one keeps less than all
      in.windows.push_back(r->window);
      in.kv_mass.push_back(kv_.mass_for(*r, end));
    }
    // Recurrent layers: the prompt's state at every snapshot interval this chunk passes (prefix caching).
    if (const int every = kv_.snapshot_interval(); every > 0 && c.n_spec == 0)
      for (int32_t p = (begin / every + 1) * every; p <= std::min(end, r->n_prompt); p += every)
        if (const int32_t slot = kv_.reserve_snapshot(*r, p); slot >= 0) in.snapshots.push_back({si, p, slot});
    for (int g = 0; g < n_groups; ++g) {
      ForwardInput::KvGroup& kg = in.kv[static_cast<size_t>(g)];
      for (BlockId b : kv_.block_table(g, r->seq)) kg.table_data.push_back(b.value);
      kg.table_begin.push_back(static_cast<int32_t>(kg.table_data.size()));
    }
    const int32_t first_row = end - n_rows[i];
    const auto [hidden_from, hidden_to] = i < hidden_.size() ? hidden_[i] : std::pair<int32_t, int32_t>{0, 0};
    const int32_t n_real = static_cast<int32_t>(r->tokens.size());
    // A token tree: proposal j sits at storage n_real + j, one position past
    // its parent (the last real token, which this chunk holds, for -1).
    const bool tree = c.n_spec > 0 && !r->spec_parents.empty();
    if (tree) {
      TERN_ASSERT(begin < n_real);
      depth_.assign(static_cast<size_t>(c.n_spec), 1);
    }
    const int32_t root_index = static_cast<int32_t>(in.tokens.size()) + (n_real - 1 - begin);
    for (int32_t p = begin; p < end; ++p) {
      if (p >= first_row) in.logits_rows.push_back(static_cast<int32_t>(in.tokens.size()));
      if (p >= hidden_from && p < hidden_to) in.hidden_rows.push_back(static_cast<int32_t>(in.tokens.size()));
      in.tokens.push_back(p < n_real ? r->tokens[static_cast<size_t>(p)] : r->spec_tokens[static_cast<size_t>(p - n_real)]);
      int32_t pos = p, parent = -1;
      if (tree && p >= n_real) {
        const size_t j = static_cast<size_t>(p - n_real);
        const int32_t pj = r->spec_parents[j];
        if (pj >= 0) depth_[j] = depth_[static_cast<size_t>(pj)] + 1;
        pos = n_real - 1 + depth_[j];
        parent = pj < 0 ? root_index : root_index + 1 + pj;
      }
      in.positions.push_back(pos);
      if (any_tree) {
        in.parent.push_back(parent);
        in.kv_pos.push_back(p);
      }
      in.seq.push_back(si);
      for (int g = 0; g < n_groups; ++g) {
        ForwardInput::KvGroup& kg = in.kv[static_cast<size_t>(g)];
        const std::span<const int32_t> table = kg.table(si);
        if (kv_.spec(g).kind == CacheKind::Recurrent) {  // every token names its sequence's state slot
          kg.slots.push_back(table.empty() ? -1 : table[0]);
          continue;
        }
        const size_t ib = static_cast<size_t>(p / bs);
        kg.slots.push_back(ib < table.size() ? static_cast<int64_t>(table[ib]) * bs + p % bs : -1);
      }
    }
  }
  return Status::ok();
}

Result<std::vector<float>> ModelRunner::logits(const SchedulerOutput& so, const Scheduler& sched,
                                               std::span<const int> n_rows) {
  TERN_ASSERT(n_rows.size() == so.chunks.size());
  hidden_.clear();
  for (size_t i = 0; i < n_rows.size(); ++i) TERN_ASSERT(n_rows[i] >= 0 && n_rows[i] <= so.chunks[i].n_tokens);
  TERN_RETURN_IF_ERROR(build_input(so, sched, n_rows));
  std::vector<float> out;
  TERN_RETURN_IF_ERROR(model_.forward(input_, pools_, out));
  return out;
}

int32_t ModelRunner::verify_chunk(RequestState& st, const SchedRequest& r, const ScheduledChunk& c,
                                  std::span<float> rows, ChunkResult& res, std::vector<TokenLogprobs>& logprobs) {
  const size_t n_vocab = static_cast<size_t>(model_.hparams().n_vocab);
  std::vector<float> raw;
  auto emit = [&](TokenId tok) {
    res.new_tokens.push_back(tok);
    accept_token(st, tok);  // the penalties and the grammar of the next row see it, as without speculation
    if (st.n_logprobs < 0) return;
    TokenLogprobs lp;
    lp.logprob = Sampler::log_softmax_at(raw, tok);
    for (const auto& [id, p] : Sampler::top_logprobs(raw, st.n_logprobs)) lp.top.push_back({id, p});
    logprobs.push_back(std::move(lp));
  };
  // Walk down from the last real token (row 0; proposal j's row is j + 1):
  // the children of the node reached are verified together; an accepted one
  // is the next node, a rejection's replacement ends the chunk, and a node
  // without children gives one token more. A chain is the tree where j's
  // parent is j - 1.
  const bool tree = !r.spec_parents.empty();
  auto parent_of = [&](int32_t j) { return tree ? r.spec_parents[static_cast<size_t>(j)] : j - 1; };
  path_.clear();
  std::vector<TokenId>& cands = cands_;
  std::vector<int32_t>& kids = kids_;
  for (int32_t node = -1;;) {
    const std::span<float> row = rows.subspan(static_cast<size_t>(node + 1) * n_vocab, n_vocab);
    if (st.n_logprobs >= 0) raw.assign(row.begin(), row.end());
    constrain(st, row);
    kids.clear();
    cands.clear();
    for (int32_t j = node + 1; j < c.n_spec; ++j)
      if (parent_of(j) == node) {
        kids.push_back(j);
        cands.push_back(r.spec_tokens[static_cast<size_t>(j)]);
      }
    if (kids.empty()) {
      emit(st.sampler.sample(row));
      break;
    }
    const Sampler::TreeVerdict v = st.sampler.verify_any(row, cands);
    emit(v.token);
    if (v.accepted < 0) break;
    node = kids[static_cast<size_t>(v.accepted)];
    path_.push_back(node);
  }
  const int32_t n_accepted = static_cast<int32_t>(path_.size());
  // The accepted path's keys/values go to the places their positions name
  // (a chain's already are): proposal path_[d] was stored at n_real + path_[d].
  bool moved = false;
  for (int32_t d = 0; d < n_accepted; ++d) moved |= path_[static_cast<size_t>(d)] != d;
  if (moved) {
    const int32_t n_real = static_cast<int32_t>(r.tokens.size());
    const int bs = kv_.block_size();
    for (int g = 0; g < kv_.n_groups(); ++g) {
      if (kv_.spec(g).kind == CacheKind::Recurrent) continue;
      const std::span<const BlockId> table = kv_.block_table(g, r.seq);
      auto slot = [&](int32_t at) {
        return static_cast<int64_t>(table[static_cast<size_t>(at / bs)].value) * bs + at % bs;
      };
      std::vector<int64_t> src, dst;
      for (int32_t d = 0; d < n_accepted; ++d) {
        src.push_back(slot(n_real + path_[static_cast<size_t>(d)]));
        dst.push_back(slot(n_real + d));
      }
      model_.backend().copy_kv(pools_[static_cast<size_t>(g)], src, dst);
    }
  }
  // The real tokens' K/V stay; of the proposals', only the accepted ones'.
  res.n_accepted = c.n_tokens - c.n_spec + n_accepted;
  return n_accepted;
}

int ModelRunner::rows_wanted(const ScheduledChunk& c, const SchedRequest& r, const RequestState* state) const {
  // A chunk that reaches the end of its request's tokens samples the next
  // one; with proposals, one row per proposal more.
  int n = r.n_computed + c.n_tokens - c.n_spec == r.n_tokens ? 1 + c.n_spec : 0;
  if (c.n_spec == 0 && state != nullptr && state->n_prompt_logprobs >= 0) {
    // Rows up to the prompt's last token, from the first position still to be scored.
    const RequestState& st = *state;
    const int32_t n_prompt = static_cast<int32_t>(st.prompt.size());
    const int32_t from = std::max(r.n_computed, st.prompt_lp_next - 1);
    const int32_t to = std::min(r.n_computed + c.n_tokens, n_prompt - 1);  // row p scores token p + 1
    if (to > from) n = std::max(n, r.n_computed + c.n_tokens - from);
  }
  return n;
}

std::pair<int32_t, int32_t> ModelRunner::hidden_wanted(const ScheduledChunk& c, const SchedRequest& r,
                                                        const RequestState* state) const {
  if (c.n_spec > 0 || state == nullptr || state->embed == Pooling::None) return {0, 0};
  const RequestState& st = *state;
  const int32_t from = std::max(r.n_computed, st.embed == Pooling::Last ? st.n_prompt - 1 : st.embed_next);
  const int32_t to = std::min(r.n_computed + c.n_tokens, st.n_prompt);
  return from < to && st.embed_next < st.n_prompt ? std::pair{from, to} : std::pair{0, 0};
}

std::vector<float> ModelRunner::pool_hidden(RequestState& st, int32_t from, const float* rows, int32_t n,
                                            bool samples) {
  const size_t n_embd = static_cast<size_t>(model_.hparams().n_embd);
  if (st.embed_sum.empty()) st.embed_sum.assign(n_embd, 0.0);
  for (int32_t k = 0; k < n; ++k) {
    if (from + k != st.embed_next && st.embed != Pooling::Last) continue;  // a recomputed row: added already
    for (size_t j = 0; j < n_embd; ++j) st.embed_sum[j] += rows[static_cast<size_t>(k) * n_embd + j];
    st.embed_next = from + k + 1;
  }
  if (!samples || st.embed_next < st.n_prompt || st.embed_sum.empty()) return {};
  // Mean over the prompt's tokens (the last token's alone for Last), then unit length.
  const double count = st.embed == Pooling::Mean ? static_cast<double>(st.n_prompt) : 1.0;
  std::vector<float> v(n_embd);
  double norm2 = 0;
  for (size_t j = 0; j < n_embd; ++j) norm2 += (st.embed_sum[j] / count) * (st.embed_sum[j] / count);
  const double scale = st.embed_normalize && norm2 > 0 ? 1.0 / std::sqrt(norm2) : 1.0;
  for (size_t j = 0; j < n_embd; ++j) v[j] = static_cast<float>(st.embed_sum[j] / count * scale);
  st.embed_sum.clear();  // handed over once
  return v;
}

void ModelRunner::score_prompt(RequestState& st, int32_t first_pos, const float* rows, int32_t n) {
  const size_t n_vocab = static_cast<size_t>(model_.hparams().n_vocab);
  const int32_t n_prompt = static_cast<int32_t>(st.prompt.size());
  for (int32_t k = 0; k < n; ++k) {
    const int32_t target = first_pos + k + 1;  // the prompt token this row predicts
    if (target != st.prompt_lp_next || target >= n_prompt) continue;
    const std::span<const float> row(rows + static_cast<size_t>(k) * n_vocab, n_vocab);
    PromptTokenLogprob lp;
    lp.token = st.prompt[static_cast<size_t>(target)];
    lp.logprob = Sampler::log_softmax_at(row, lp.token);
    const float x = row[static_cast<size_t>(lp.token)];
    lp.rank = 1 + static_cast<int32_t>(std::count_if(row.begin(), row.end(), [x](float v) { return v > x; }));
    for (const auto& [id, p] : Sampler::top_logprobs(row, st.n_prompt_logprobs)) lp.top.push_back({id, p});
    st.prompt_lps.push_back(std::move(lp));
    ++st.prompt_lp_next;
  }
}

Result<RunnerOutput> ModelRunner::execute(const SchedulerOutput& so, const Scheduler& sched) {
  // Each chunk's request and runner state, looked up once per step.
  std::vector<int> n_rows(so.chunks.size(), 0);
  hidden_.assign(so.chunks.size(), {0, 0});
  chunk_states_.assign(so.chunks.size(), nullptr);
  for (size_t i = 0; i < so.chunks.size(); ++i) {
    const SchedRequest* r = sched.find(so.chunks[i].id);
    if (!r) continue;
    auto it = requests_.find(so.chunks[i].id);
    if (it != requests_.end()) chunk_states_[i] = it->second.get();
    n_rows[i] = rows_wanted(so.chunks[i], *r, chunk_states_[i]);
    hidden_[i] = hidden_wanted(so.chunks[i], *r, chunk_states_[i]);
  }
  TERN_RETURN_IF_ERROR(build_input(so, sched, n_rows));
  TERN_RETURN_IF_ERROR(model_.forward(input_, pools_, logits_, input_.hidden_rows.empty() ? nullptr : &hidden_rows_));
  const size_t n_embd = static_cast<size_t>(model_.hparams().n_embd);
  size_t hidden_row = 0;
  RunnerOutput out;
  out.n_tokens = static_cast<int64_t>(input_.n_tokens());
  out.results.resize(so.chunks.size());
  out.logprobs.resize(so.chunks.size());
  out.prompt_logprobs.resize(so.chunks.size());
  out.embeddings.resize(so.chunks.size());
  const int n_vocab = model_.hparams().n_vocab;
  size_t row = 0;
  for (size_t i = 0; i < so.chunks.size(); ++i) {
    const ScheduledChunk& c = so.chunks[i];
    ChunkResult& res = out.results[i];
    res.n_accepted = c.n_tokens;
    const auto [hidden_from, hidden_to] = hidden_[i];
    if (n_rows[i] == 0 && hidden_to == hidden_from) continue;
    TERN_ASSERT_MSG(chunk_states_[i] != nullptr, "runner: no sampler for a request");
    RequestState& st = *chunk_states_[i];
    const SchedRequest& r = *sched.find(c.id);
    const bool samples = r.n_computed + c.n_tokens - c.n_spec == r.n_tokens;
    if (st.embed != Pooling::None) {
      const int32_t n_hidden = hidden_to - hidden_from;
      out.embeddings[i] = pool_hidden(st, hidden_from, hidden_rows_.data() + hidden_row * n_embd, n_hidden, samples);
      hidden_row += static_cast<size_t>(n_hidden);
    }
    if (n_rows[i] == 0) continue;
    if (st.n_prompt_logprobs >= 0 && c.n_spec == 0) {
      const int32_t end = r.n_computed + c.n_tokens;
      score_prompt(st, end - n_rows[i], logits_.data() + row * n_vocab, n_rows[i]);
      // Handed over with the prompt's first sampled token (the step that reports the request).
      if (samples && !st.prompt_lps.empty()) {
        out.prompt_logprobs[i] = std::move(st.prompt_lps);
        st.prompt_lps.clear();
      }
      // Only the chunk's last row samples.
      row += static_cast<size_t>(n_rows[i] - (samples ? 1 : 0));
      if (!samples) continue;
    }
    if (c.n_spec > 0) {
      const std::span<float> rows(logits_.data() + row * n_vocab, static_cast<size_t>(n_rows[i]) * n_vocab);
      row += static_cast<size_t>(n_rows[i]);
      out.n_spec_proposed += c.n_spec;
      ++out.n_spec_verifies;
      out.n_spec_accepted += verify_chunk(st, r, c, rows, res, out.logprobs[i]);
      for (size_t d = 0; d < path_.size(); ++d) out.n_spec_branch_accepted += path_[d] != static_cast<int32_t>(d);
      continue;
    }
    const std::span<float> logits(logits_.data() + row * n_vocab, static_cast<size_t>(n_vocab));
    ++row;
    TokenLogprobs lp;
    // Log-probabilities from the raw logits: sample() applies penalties in place.
    std::vector<float> raw;
    if (st.n_logprobs >= 0) raw.assign(logits.begin(), logits.end());
    constrain(st, logits);
    const TokenId tok = st.sampler.sample(logits);
    accept_token(st, tok);
    res.new_tokens.push_back(tok);
    if (st.n_logprobs >= 0) {
      lp.logprob = Sampler::log_softmax_at(raw, tok);
      for (const auto& [id, p] : Sampler::top_logprobs(raw, st.n_logprobs)) lp.top.push_back({id, p});
      out.logprobs[i].push_back(std::move(lp));
    }
  }
  return out;
}

}  // namespace tern
