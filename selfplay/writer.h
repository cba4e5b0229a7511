// Where finished games go: hcpe3 files in the output directory, each holding the games finished
// since the last one was written, written under a temporary name and renamed when complete
// (common/atomic_file.h), so that no reader ever sees a partial file. A file is written when
// `games_per_file` games wait or the oldest has waited `flush_seconds`, and at the end of the
// run (Ctrl-C included): a crash loses the games in progress and at most the games of one
// flush interval. With CSA on, each game is also written to csa/NAME-0000000.csa, -0000001, ....
// Numbers continue after the highest already in the directory, so a second run with the same name
// adds files rather than overwriting them.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/hcpe3.h"

namespace jiriki::selfplay {

class RecordWriter {
 public:
  // Files are named DIR/NAME-00000.hcpe3, -00001, ...; the directory is created.
  RecordWriter(std::string dir, std::string name, int games_per_file, double flush_seconds, bool csa);
  ~RecordWriter();  // writes what waits (errors are reported on stderr then)

  void add(Hcpe3Game game);  // thread-safe; never writes (flush_due + flush do)
  bool flush_due();          // enough games wait, or the oldest has waited long enough
  // Writes every waiting game; throws std::runtime_error naming the file on failure (when the
  // hcpe3 file failed, the games stay queued for the next try). One thread at a time.
  void flush();
  int64_t files_written() const;
  int64_t games_written() const;

 private:
  std::string dir_, name_;
  int games_per_file_;
  double flush_seconds_;
  bool csa_;
  mutable std::mutex mutex_;
  std::vector<Hcpe3Game> waiting_;
  std::chrono::steady_clock::time_point oldest_;
  int64_t next_file_ = 0, next_csa_ = 0;  // numbers of the next files
  int64_t files_ = 0, games_ = 0;        // written by this writer
};

}  // namespace jiriki::selfplay
