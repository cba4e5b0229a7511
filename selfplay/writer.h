// Where finished games go: hcpe3 files in the output directory, written under a temporary name
// and renamed when complete (common/atomic_file.h), so that no reader ever sees a partial file.
// A file is written when `games_per_file` games wait or the oldest has waited `flush_seconds`,
// and at the end of the run (Ctrl-C included): a crash loses the games in progress and at most
// the finished games of one flush interval. With CSA on, each game is also written to
// csa/NAME-0000000.csa, -0000001, .... Numbers continue after the highest already in the
// directory, so a second run with the same name adds files rather than overwriting them.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "shogi/hcpe3.h"

namespace jiriki::selfplay {

class RecordWriter {
 public:
  // Files are named DIR/NAME-00000.hcpe3, -00001, ...; the directory is created.
  RecordWriter(std::string dir, std::string name, int games_per_file, double flush_seconds, bool csa);
  ~RecordWriter();  // writes what waits (errors are reported on stderr then)

  void add(Hcpe3Game game);  // thread-safe; never writes (write_due and flush do)
  // Writes a file of `games_per_file` games while that many wait, and every waiting game when the
  // oldest has waited `flush_seconds`. So files hold games_per_file games each (in the order the
  // games finished) but for time-outs and the last one. Throws std::runtime_error naming the file
  // on failure; the games of a failed hcpe3 file stay queued for the next try. One thread at a time.
  void write_due();
  void flush();  // writes every waiting game, in files of at most games_per_file
  int64_t files_written() const;
  int64_t games_written() const;

 private:
  bool write_file(bool partial);  // one file of up to games_per_file games; false when none is due

  std::string dir_, name_;
  int games_per_file_;
  double flush_seconds_;
  bool csa_;
  mutable std::mutex mutex_;
  std::deque<Hcpe3Game> waiting_;
  std::chrono::steady_clock::time_point oldest_;
  int64_t next_file_ = 0, next_csa_ = 0;  // numbers of the next files
  int64_t files_ = 0, games_ = 0;         // written by this writer
};

}  // namespace jiriki::selfplay
