// scheduler/policy.cpp — the order between requests (one key per policy),
// tenant virtual time, the SJF predictor, policy names and dump().
#include <algorithm>
#include <cstdio>
#include <limits>

#include "core/assert.h"
#include "scheduler/scheduler.h"

namespace tern {

namespace {

struct PolicyName {
  SchedulePolicy policy;
  const char* name;
};
constexpr PolicyName kPolicyNames[] = {
    {SchedulePolicy::Fcfs, "fcfs"},
    {SchedulePolicy::Priority, "priority"},
    {SchedulePolicy::ShortestJobFirst, "sjf"},
    {SchedulePolicy::FairShare, "fair"},
};

const char* status_name(SeqStatus s) {
  switch (s) {
    case SeqStatus::Waiting: return "waiting";
    case SeqStatus::Running: return "running";
    case SeqStatus::Swapped: return "swapped";
  }
  return "?";
}

}  // namespace

Result<SchedulePolicy> parse_schedule_policy(std::string_view name) {
  for (const PolicyName& p : kPolicyNames)
    if (name == p.name) return p.policy;
  return error(ErrorKind::InvalidArgument,
               "unknown schedule policy '" + std::string(name) + "' (valid: fcfs, priority, sjf, fair)");
}

const char* schedule_policy_name(SchedulePolicy p) {
  for (const PolicyName& n : kPolicyNames)
    if (n.policy == p) return n.name;
  return "?";
}

Result<PreemptionMode> parse_preemption_mode(std::string_view name) {
  if (name == "recompute") return PreemptionMode::Recompute;
  if (name == "swap") return PreemptionMode::Swap;
  return error(ErrorKind::InvalidArgument,
               "unknown preemption mode '" + std::string(name) + "' (valid: recompute, swap)");
}

// Ageing counts from arrival for everyone, running or not. For Priority this
// makes the key equivalent to priority + ageing * arrival, fixed per request:
// a request that preempted another can never be preempted back by it, so
// priority preemption cannot ping-pong. For SJF the remaining work shrinks
// while a request runs, which only moves it up.
Scheduler::RankKey Scheduler::rank_key(const SchedRequest& r, double now_s, const TenantTimes& vt) const {
  RankKey k;
  k.arrival_s = r.arrival_s;
  k.id = r.id.value;
  const double age_s = std::max(0.0, now_s - r.arrival_s);
  switch (config_.policy) {
    case SchedulePolicy::Fcfs: break;
    case SchedulePolicy::Priority: k.primary = r.priority - config_.ageing_per_s * age_s; break;
    case SchedulePolicy::ShortestJobFirst:
      k.primary = static_cast<double>(r.n_tokens - r.n_computed) + predicted_output(r) - config_.ageing_per_s * age_s;
      break;
    case SchedulePolicy::FairShare: {
      auto it = vt.find(r.tenant);
      k.primary = it == vt.end() ? 0.0 : it->second;
      break;
    }
  }
  return k;
}

std::vector<RequestId> Scheduler::ranked(std::vector<RequestId> ids, double now_s, const TenantTimes& vt) const {
  std::vector<std::pair<RankKey, RequestId>> keyed;
  keyed.reserve(ids.size());
  for (RequestId id : ids) keyed.emplace_back(rank_key(requests_.at(id), now_s, vt), id);
  // Stable: equal keys keep the order given (arrival order for the queues).
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < keyed.size(); ++i) ids[i] = keyed[i].second;
  return ids;
}

// Output tokens still to come: min(max_tokens, mean of finished requests) less
// what it has generated. Before any request finished, max_tokens is all we know.
double Scheduler::predicted_output(const SchedRequest& r) const {
  double predicted = static_cast<double>(r.max_tokens);
  if (n_outputs_ > 0) predicted = std::min(predicted, mean_output_);
  return std::max(0.0, predicted - static_cast<double>(r.n_tokens - r.n_prompt));
}

double Scheduler::tenant_weight(const std::string& tenant) const {
  auto it = config_.tenant_weights.find(tenant);
  return it == config_.tenant_weights.end() ? 1.0 : it->second;
}

// A tenant that was idle (or is new) starts at the least virtual time of the
// active tenants, not at its old value: otherwise it would own the machine
// until it had "caught up" on the time it was away.
void Scheduler::activate_tenant(const std::string& tenant) {
  if (tenant_live_[tenant]++ > 0) return;
  double floor = std::numeric_limits<double>::infinity();
  for (const auto& [name, n_live] : tenant_live_) {
    if (n_live == 0 || name == tenant) continue;
    auto it = tenant_served_.find(name);
    floor = std::min(floor, it == tenant_served_.end() ? 0.0 : it->second);
  }
  double& vt = tenant_served_[tenant];
  if (floor != std::numeric_limits<double>::infinity()) vt = std::max(vt, floor);
}

void Scheduler::record_output_length(int32_t n_generated) {
  ++n_outputs_;
  mean_output_ += (static_cast<double>(n_generated) - mean_output_) / static_cast<double>(n_outputs_);
}

std::string Scheduler::dump() const {
  std::string s;
  char line[256];
  std::snprintf(line, sizeof line,
                "scheduler: policy=%s preemption=%s max_num_seqs=%d max_batched_tokens=%d watermark=%.3f ageing=%.3f\n",
                schedule_policy_name(config_.policy),
                config_.preemption == PreemptionMode::Swap ? "swap" : "recompute", config_.max_num_seqs,
                config_.max_batched_tokens, config_.watermark, config_.ageing_per_s);
  s += line;
  auto list = [&](const char* title, const std::vector<RequestId>& ids) {
    std::snprintf(line, sizeof line, "  %s (%zu):\n", title, ids.size());
    s += line;
    for (RequestId id : ids) {
      const SchedRequest& r = requests_.at(id);
      std::snprintf(line, sizeof line,
                    "    r%llu %-8s computed=%d/%d prompt=%d prio=%d tenant='%s' arrival=%.3f preempted=%d\n",
                    static_cast<unsigned long long>(id.value), status_name(r.status), r.n_computed, r.n_tokens,
                    r.n_prompt, r.priority, r.tenant.c_str(), r.arrival_s, r.n_preemptions);
      s += line;
    }
  };
  list("running", running_);
  list("waiting+swapped", waiting_);
  for (const auto& [tenant, vt] : tenant_served_) {
    auto live = tenant_live_.find(tenant);
    std::snprintf(line, sizeof line, "  tenant '%s' weight=%.3f virtual_time=%.1f live=%d\n", tenant.c_str(),
                  tenant_weight(tenant), vt, live == tenant_live_.end() ? 0 : live->second);
    s += line;
  }
  std::snprintf(line, sizeof line, "  sjf mean_output=%.1f over %lld; preemptions=%lld\n", mean_output_,
                static_cast<long long>(n_outputs_), static_cast<long long>(n_preemptions_));
  s += line;
  return s;
}

}  // namespace tern
