// Helpers for tests that drive usi::Engine in this process: a stream that collects the engine's
// lines (written from its search threads) for the test thread to read with a timeout, and a tiny
// network in a model file, so that searches cost little.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

#include <unistd.h>

#include "nn/model_file.h"

namespace jiriki::testing {

class UsiLines : private std::streambuf {
 public:
  UsiLines() : stream(this) {}
  std::ostream stream;  // give this to the engine

  // The next complete line, or nullopt when none comes within timeout_ms.
  std::optional<std::string> next(int64_t timeout_ms) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !lines_.empty(); })) return std::nullopt;
    std::string l = std::move(lines_.front());
    lines_.pop_front();
    return l;
  }
  // Every complete line not read yet.
  std::vector<std::string> drain() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> v(lines_.begin(), lines_.end());
    lines_.clear();
    return v;
  }

 private:
  int overflow(int c) override {
    if (c == traits_type::eof()) return 0;
    char ch = char(c);
    xsputn(&ch, 1);
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard lock(mutex_);
    for (std::streamsize i = 0; i < n; ++i) {
      if (s[i] != '\n') {
        partial_ += s[i];
        continue;
      }
      lines_.push_back(std::move(partial_));
      partial_.clear();
      cv_.notify_all();
    }
    return n;
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::string> lines_;
  std::string partial_;
};

// A network of 1 block x 16 channels in a model file, made once per test process, removed at exit.
inline const std::string& tiny_model_path() {
  struct File {
    std::string path =
        (std::filesystem::temp_directory_path() / ("jiriki_test_usi_" + std::to_string(getpid()) + ".jnn")).string();
    File() {
      nn::Architecture a;
      a.blocks = 1;
      a.channels = 16;
      nn::Model m(a);
      nn::init_model(m, 11);
      nn::save_model(m, path);
    }
    ~File() { std::filesystem::remove(path); }
  };
  static const File file;
  return file.path;
}

}  // namespace jiriki::testing
