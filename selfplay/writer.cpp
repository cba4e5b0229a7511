// Atomic, chunked writing of self-play records.
#include "selfplay/writer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "common/atomic_file.h"
#include "shogi/csa.h"

namespace fs = std::filesystem;

namespace jiriki::selfplay {

namespace {
// One past the highest number N of the files PREFIX-N.EXT in `dir` (0 when there are none).
int64_t next_number(const fs::path& dir, const std::string& prefix, const std::string& ext) {
  int64_t next = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.size() <= prefix.size() + ext.size() || !f.starts_with(prefix) || !f.ends_with(ext)) continue;
    const std::string digits = f.substr(prefix.size(), f.size() - prefix.size() - ext.size());
    if (digits.empty() || digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    next = std::max<int64_t>(next, std::stoll(digits) + 1);
  }
  return next;
}
}  // namespace

RecordWriter::RecordWriter(std::string dir, std::string name, int games_per_file, double flush_seconds, bool csa)
    : dir_(std::move(dir)),
      name_(std::move(name)),
      games_per_file_(std::max(games_per_file, 1)),
      flush_seconds_(flush_seconds),
      csa_(csa) {
  fs::create_directories(dir_);
  next_file_ = next_number(dir_, name_ + "-", ".hcpe3");
  if (csa_) {
    fs::create_directories(fs::path(dir_) / "csa");
    next_csa_ = next_number(fs::path(dir_) / "csa", name_ + "-", ".csa");
  }
}

RecordWriter::~RecordWriter() {
  try {
    flush();
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
}

void RecordWriter::add(Hcpe3Game game) {
  std::lock_guard lock(mutex_);
  if (waiting_.empty()) oldest_ = std::chrono::steady_clock::now();
  waiting_.push_back(std::move(game));
}

void RecordWriter::write_due() {
  bool timed_out;
  {
    std::lock_guard lock(mutex_);
    timed_out = !waiting_.empty() &&
                std::chrono::duration<double>(std::chrono::steady_clock::now() - oldest_).count() >= flush_seconds_;
  }
  while (write_file(timed_out)) {}
}

void RecordWriter::flush() {
  while (write_file(true)) {}
}

bool RecordWriter::write_file(bool partial) {
  std::vector<Hcpe3Game> games;
  {
    std::lock_guard lock(mutex_);
    const size_t n = std::min(waiting_.size(), size_t(games_per_file_));
    if (n == 0 || (n < size_t(games_per_file_) && !partial)) return false;
    games.assign(std::make_move_iterator(waiting_.begin()), std::make_move_iterator(waiting_.begin() + n));
    waiting_.erase(waiting_.begin(), waiting_.begin() + n);
    oldest_ = std::chrono::steady_clock::now();  // the next game's wait starts no earlier than this
  }
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "-%05lld.hcpe3", (long long)next_file_);
  if (auto err = write_hcpe3_file((fs::path(dir_) / (name_ + suffix)).string(), games)) {
    std::lock_guard lock(mutex_);  // keep the games, in order, for the next try
    waiting_.insert(waiting_.begin(), std::make_move_iterator(games.begin()), std::make_move_iterator(games.end()));
    throw std::runtime_error(*err);
  }
  {
    std::lock_guard lock(mutex_);
    next_file_ += 1;
    files_ += 1;
    games_ += int64_t(games.size());
  }
  if (csa_)
    for (const Hcpe3Game& g : games) {
      GameRecord rec = record_from_hcpe3(g);
      rec.black = rec.white = "jiriki";
      rec.event = "jiriki selfplay";
      std::snprintf(suffix, sizeof suffix, "-%07lld.csa", (long long)next_csa_++);
      write_file_atomically((fs::path(dir_) / "csa" / (name_ + suffix)).string(), write_csa(rec));
    }
  return true;
}

int64_t RecordWriter::files_written() const {
  std::lock_guard lock(mutex_);
  return files_;
}

int64_t RecordWriter::games_written() const {
  std::lock_guard lock(mutex_);
  return games_;
}

}  // namespace jiriki::selfplay
