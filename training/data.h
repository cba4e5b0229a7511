// Training data in memory: every position of a set of hcpe and hcpe3 files, checked once when
// read and kept in a compact form (48 bytes a position, plus 4 bytes per candidate move of hcpe3
// positions). Features are built from them later, batch by batch (training/loader.h).
//
// Nothing in a file is trusted: a truncated or corrupt record is reported with its file and byte
// offset and skipped. hcpe records are independent, so only the bad record is skipped; an hcpe3
// file is a sequence of variable-length games, so a bad game ends the reading of that file (the
// games before it are kept; what follows may not even be framed where the bad game says).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "shogi/hcpe.h"
#include "shogi/hcpe3.h"

namespace jiriki::training {

// One training position. The policy target is the recorded move (hcpe) or, when candidate_count
// > 0, the visit counts of candidates [candidate_begin, candidate_begin + candidate_count) of the
// dataset (hcpe3).
struct TrainingPosition {
  HcpeRecord record;  // position, eval and move of the side to move, game result (GameResult)
  uint16_t candidate_count = 0;
  uint64_t candidate_begin = 0;
};
static_assert(sizeof(TrainingPosition) == 48, "no padding: the dataset fingerprint hashes the bytes");

// HcpeRecord::pad of a position without a target of its own: a move of an hcpe3 game played
// without a full search (the playout cap), read (LoadOptions::every_move) only for a teacher
// network's targets (training/teacher.h).
constexpr uint8_t NO_OWN_TARGET = 1;
inline bool has_own_target(const TrainingPosition& tp) { return !(tp.record.pad & NO_OWN_TARGET); }

// A problem found in a data file.
struct DataIssue {
  std::string file;
  uint64_t offset = 0;  // byte offset of the bad record or game
  std::string message;
  std::string to_string() const;  // "FILE: byte offset N: MESSAGE"
};

struct Dataset {
  std::vector<TrainingPosition> positions;
  std::vector<Hcpe3Candidate> candidates;
  std::vector<std::string> files;  // the files read, oldest first
  std::vector<DataIssue> issues;   // everything skipped, in file order
  // FNV-1a hash of the positions and candidates: the same data gives the same value whatever the
  // paths were. A checkpoint stores it so that --resume can tell whether the data changed.
  uint64_t fingerprint = 0;
};

// The files that paths name: a file as given, a directory's *.hcpe and *.hcpe3 files (recursively),
// or a glob pattern. Throws std::runtime_error for a path that names nothing, or a file whose
// extension is neither .hcpe nor .hcpe3.
std::vector<std::string> expand_data_paths(const std::vector<std::string>& paths);

struct LoadOptions {
  // Keep only the newest `window` positions with a target of their own (0: all), and the positions
  // without one among them. Files are ordered by modification time (then name); records within a
  // file are in the order they were appended.
  int64_t window = 0;
  int threads = 1;  // files are read and checked in parallel
  // hcpe3: also every move without candidates, flagged NO_OWN_TARGET: more positions for a teacher.
  bool every_move = false;
};

// Reads and checks every position of the files `paths` names. Issues are collected, not thrown;
// throws std::runtime_error when a file cannot be read at all, or when no position is left.
Dataset load_dataset(const std::vector<std::string>& paths, const LoadOptions& options);

// Positions of random legal games from the start position, for tests and benchmarks: `games`
// games of up to `plies` uniformly random moves; every position before a move is a record of that
// move, with the game's result drawn at random (draw, Black, White) and a random eval in
// [-1000, 1000].
std::vector<HcpeRecord> random_game_records(int games, int plies, uint64_t seed);

}  // namespace jiriki::training
