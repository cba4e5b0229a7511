// What a match writes as its games end: one JSON object per game (games.jsonl), each game as CSA
// (and KIF on request), and training records whose evaluations are the engines' own scores: hcpe3
// (the played move as the policy target with one visit) and hcpe (one record per engine move).
#pragma once
#include <cstdio>
#include <mutex>
#include <string>

#include "match/game.h"
#include "shogi/hcpe3.h"

namespace jiriki::match {

struct RecordPaths {
  std::string dir;          // games.jsonl, csa/; "" writes none of these
  bool kif = false;         // also dir/kif/*.kif
  std::string hcpe3, hcpe;  // training files ("" for none); appended game by game
};

// Where a game stood in the tournament, for its JSON line.
struct GameInfo {
  int64_t number = 0;   // 1, 2, ... in the order games were scheduled
  int64_t pair = 0;     // games with the same pair number share an opening, colours swapped
  std::string opening;  // as an openings-file line
};

// The game as dlshogi's hcpe3: every engine move a training target with its mover's score.
// Throws std::invalid_argument when the start position lacks some of the 40 pieces.
Hcpe3Game hcpe3_from_game(const PlayedGame& game);

class RecordWriter {
 public:
  // Creates the directories and truncates the files of a fresh run.
  explicit RecordWriter(RecordPaths paths);
  // Writes one finished game everywhere asked for; safe to call from several threads. Returns a
  // warning ("" for none), e.g. when a start position cannot be coded as hcp. Throws
  // std::runtime_error naming the file and the reason when a write fails (a full disk); each file
  // then keeps the games written before, whole.
  std::string write(const PlayedGame& game, const GameInfo& info);

 private:
  RecordPaths paths_;
  std::mutex mutex_;
};

}  // namespace jiriki::match
