// Gradient buckets (see training/buckets.h).
#include "training/buckets.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace jiriki::training {

int backward_stage(const std::string& name, int blocks) {
  if (name.starts_with("stem.")) return blocks + 1;
  if (name.starts_with("blocks.")) {
    const int i = std::stoi(name.substr(7));
    if (i < 0 || i >= blocks) throw std::invalid_argument("no block " + std::to_string(i) + " in " + name);
    return blocks - i;
  }
  return 0;  // policy and value heads
}

std::vector<Bucket> plan_buckets(std::vector<GradientSlot> slots, size_t bucket_floats, size_t merge_gap) {
  // Rank every slot by offset: only slots adjacent in the whole buffer may share a range, so that a
  // merged range never covers a tensor of another bucket.
  std::sort(slots.begin(), slots.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < slots.size(); ++i)
    if (slots[i].offset < slots[i - 1].offset + slots[i - 1].count)
      throw std::invalid_argument("gradient slots " + slots[i - 1].name + " and " + slots[i].name + " overlap");
  std::map<int, std::vector<size_t>> by_stage;  // stage -> indices into slots (by offset)
  for (size_t i = 0; i < slots.size(); ++i) by_stage[slots[i].stage].push_back(i);

  std::vector<Bucket> buckets;
  std::vector<size_t> members;
  size_t floats = 0;
  auto close = [&](int stage) {
    if (members.empty()) return;
    std::sort(members.begin(), members.end());
    Bucket b;
    b.ready_stage = stage;
    for (size_t k = 0; k < members.size(); ++k) {
      const GradientSlot& s = slots[members[k]];
      b.tensors.push_back(s.name);
      const bool joins = k > 0 && members[k] == members[k - 1] + 1 && s.offset - b.ranges.back().second <= merge_gap;
      if (joins) b.ranges.back().second = s.offset + s.count;
      else b.ranges.emplace_back(s.offset, s.offset + s.count);
    }
    for (auto& r : b.ranges) {
      b.floats += r.second - r.first;
      r.second -= r.first;  // stored as (offset, count)
    }
    buckets.push_back(std::move(b));
    members.clear();
    floats = 0;
  };
  for (const auto& [stage, indices] : by_stage) {
    for (size_t i : indices) {
      members.push_back(i);
      floats += slots[i].count;
    }
    if (floats >= bucket_floats) close(stage);
  }
  if (!by_stage.empty()) close(by_stage.rbegin()->first);
  return buckets;
}

}  // namespace jiriki::training
