// The data pipeline (see training/loader.h).
#include "training/loader.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "common/splitmix.h"
#include "nn/features.h"
#include "nn/layers_backward.h"

namespace jiriki::training {

namespace {

// splitmix64 with a bounded draw, for the shuffle (std::shuffle differs between platforms).
struct SplitMix : SplitMix64 {
  // Uniform in [0, n) by multiply-shift (no modulo bias worth the name for n < 2^32).
  uint32_t below(uint32_t n) { return uint32_t((unsigned __int128)next() * n >> 64); }
};

}  // namespace

void build_sample(const Dataset& data, uint32_t index, Batch& batch, int row, Position& pos, bool mirror) {
  const TrainingPosition& tp = data.positions[index];
  if (auto err = decode_hcp(tp.record.hcp, pos)) throw std::logic_error("a checked position fails to decode: " + *err);
  const Color us = pos.side_to_move();
  float* features = batch.features + int64_t(row) * nn::INPUT_SIZE;
  nn::encode_features(pos, features);
  if (mirror) nn::mirror_features(features);
  auto index_of = [&](uint16_t move16) {
    const int i = nn::move_to_label(Move(move16), us);
    return mirror ? nn::mirror_policy_index(i) : i;
  };

  float* target = batch.policy_target + int64_t(row) * nn::POLICY_SIZE;
  std::fill(target, target + nn::POLICY_SIZE, 0.0f);
  if (tp.candidate_count == 0) {
    target[index_of(tp.record.move16)] = 1.0f;
  } else {
    const Hcpe3Candidate* c = &data.candidates[tp.candidate_begin];
    uint32_t total = 0;
    for (int i = 0; i < tp.candidate_count; ++i) total += c[i].visits;
    for (int i = 0; i < tp.candidate_count; ++i) target[index_of(c[i].move16)] += float(c[i].visits) / float(total);
  }

  const GameResult result = GameResult(tp.record.result & hcpe3::RESULT_MASK);
  batch.value_result[row] = result == DRAW ? 0.5f : (result == BLACK_WIN) == (us == BLACK) ? 1.0f : 0.0f;
  batch.value_eval[row] = nn::eval_to_win_probability(tp.record.eval);
}

Loader::Loader(const Dataset& data, const LoaderOptions& options) : data_(data), opt_(options) {
  if (data.positions.empty()) throw std::invalid_argument("the loader needs at least one position");
  if (data.positions.size() >= (uint64_t(1) << 32)) throw std::invalid_argument("more than 2^32 positions");
  if (opt_.batch_size < 1) throw std::invalid_argument("the batch size must be at least 1");
  if (opt_.end < opt_.start) throw std::invalid_argument("the stream ends before it starts");
  if (opt_.stride == 0) opt_.stride = uint64_t(opt_.batch_size);
  if (opt_.offset + uint64_t(opt_.batch_size) > opt_.stride)
    throw std::invalid_argument("a replica's slice reaches past its global batch");
  if (!opt_.teacher && !opt_.timing_only && !std::all_of(data.positions.begin(), data.positions.end(), has_own_target))
    throw std::invalid_argument("positions without a target of their own need a teacher network");
  const int threads = std::max(1, opt_.threads);
  batches_ = opt_.end == UINT64_MAX ? UINT64_MAX : (opt_.end - opt_.start + opt_.stride - 1) / opt_.stride;
  slots_.resize(opt_.queue > 0 ? opt_.queue : 2 * threads + 1);
  for (size_t i = 0; i < slots_.size(); ++i) {
    slots_[i].batch.allocate(opt_.batch_size, opt_.allocator);
    slots_[i].job = i;
  }
  for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { worker_loop(); });
}

Loader::~Loader() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  slot_free_.notify_all();
  slot_filled_.notify_all();
  for (auto& t : workers_) t.join();
}

const std::vector<uint32_t>& Loader::permutation(uint64_t epoch) {
  auto it = permutations_.find(epoch);
  if (it != permutations_.end()) return it->second;
  // Batches take their positions in stream order (under the mutex), so an epoch older than the
  // previous one is never asked for again.
  while (!permutations_.empty() && permutations_.begin()->first + 1 < epoch) permutations_.erase(permutations_.begin());
  std::vector<uint32_t>& p = permutations_[epoch];
  p.resize(data_.positions.size());
  for (uint32_t i = 0; i < p.size(); ++i) p[i] = i;
  if (opt_.shuffle) {  // Fisher-Yates
    SplitMix rng{{opt_.seed * 0xd1342543de82ef95ULL + epoch}};
    for (uint32_t i = uint32_t(p.size()) - 1; i > 0; --i) std::swap(p[i], p[rng.below(i + 1)]);
  }
  return p;
}

void Loader::positions_of(uint64_t job, std::vector<uint32_t>& out, std::vector<uint8_t>& mirrored) {
  const uint64_t n = data_.positions.size();
  const uint64_t first = opt_.start + job * opt_.stride + opt_.offset;
  const uint64_t last = std::min(first + opt_.batch_size, opt_.end);
  out.clear();
  mirrored.clear();
  for (uint64_t s = first; s < last; ++s) {
    out.push_back(permutation(s / n)[s % n]);
    mirrored.push_back(opt_.mirror && (splitmix64(opt_.seed * 0x9e3779b97f4a7c15ULL ^ s) & 1));
  }
}

void Loader::build(const std::vector<uint32_t>& positions, const std::vector<uint8_t>& mirrored, Batch& batch,
                   Position& scratch, Teacher* teacher) {
  for (size_t i = 0; i < positions.size(); ++i) build_sample(data_, positions[i], batch, int(i), scratch, mirrored[i]);
  batch.size = int(positions.size());
  if (teacher) teacher->apply(data_, positions, mirrored, batch, scratch);
}

void Loader::worker_loop() {
  Position scratch;
  std::vector<uint32_t> positions;
  std::vector<uint8_t> mirrored;
  std::unique_ptr<Teacher> teacher;
  if (opt_.teacher) {
    try {
      teacher = opt_.teacher();
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      slot_filled_.notify_all();
      return;
    }
  }
  for (;;) {
    uint64_t job;
    Slot* slot;
    {
      std::unique_lock lock(mutex_);
      if (stopping_ || next_job_ >= batches_) return;
      job = next_job_++;
      positions_of(job, positions, mirrored);
      slot = &slots_[job % slots_.size()];
      slot_free_.wait(lock, [&] { return stopping_ || (slot->job == job && !slot->filled); });
      if (stopping_) return;
    }
    auto t0 = std::chrono::steady_clock::now();
    try {
      build(positions, mirrored, slot->batch, scratch, teacher.get());
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    busy_ns_ +=
        uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    samples_built_ += positions.size();
    {
      std::lock_guard lock(mutex_);
      slot->filled = true;
    }
    slot_filled_.notify_all();
  }
}

const Batch* Loader::acquire() {
  std::unique_lock lock(mutex_);
  if (next_acquire_ >= batches_) return nullptr;
  const uint64_t job = next_acquire_;
  Slot& slot = slots_[job % slots_.size()];
  slot_filled_.wait(lock, [&] { return error_ || (slot.job == job && slot.filled); });
  if (error_) std::rethrow_exception(error_);
  ++next_acquire_;
  return &slot.batch;
}

void Loader::release(const Batch* batch) {
  {
    std::lock_guard lock(mutex_);
    for (Slot& s : slots_)
      if (&s.batch == batch) {
        s.filled = false;
        s.job += slots_.size();
      }
  }
  slot_free_.notify_all();
}

}  // namespace jiriki::training
