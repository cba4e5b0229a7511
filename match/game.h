// One game between two USI engine processes: the match runner keeps the clocks (from the moment
// `go` is written to the moment the `bestmove` line arrives), reads each engine's last score from
// its `info` lines, and asks the referee (adjudicate.h) after every answer and every move.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "match/adjudicate.h"
#include "match/engine_process.h"
#include "match/openings.h"
#include "shogi/record.h"

namespace jiriki::match {

// Time control of both sides. byoyomi with time 0 is a fixed time per move; time with inc is
// Fischer, without inc and byoyomi sudden death; nodes > 0 sends `go nodes N` and no clock.
struct TimeControl {
  int64_t time_ms = 0, inc_ms = 0, byoyomi_ms = 0, nodes = 0;
};

struct GameSettings {
  TimeControl tc;
  int64_t margin_ms = 0;       // an answer this late beyond the clock is still on time
  int64_t timeout_ms = 60000;  // the most a move may take under `nodes`, and each start-up answer
  int64_t grace_ms = 1000;     // after a time forfeit, how long `stop` may take before the engine is killed
  GameRules rules;             // the declaration rule; the ply limit counts from the opening's start position
  ScoreRules scores;
  const std::atomic<bool>* interrupt = nullptr;  // when set, the game stops before the next move (GameEnd::ABORT)
};

// One side's thinking over games: its answered moves and their time, and the nodes it reported
// (the last `info ... nodes N` before each bestmove; moves without one are left out of the rates).
struct SearchStats {
  int64_t moves = 0, ms = 0;                     // answered moves and their thinking time
  int64_t counted = 0, nodes = 0, nodes_ms = 0;  // the moves that reported nodes: count, nodes, time
  // Each counted move's nodes/s. Their median is the engine's speed in an ordinary position: the
  // mean (nodes_per_second) also counts decided positions, where a tree search's playouts end in
  // proven wins and losses without a network call and its nodes/s rises many times over.
  std::vector<int64_t> move_nps;
  // One answered move: its thinking time, and the nodes it reported, if any.
  void record(int64_t elapsed_ms, std::optional<int64_t> reported_nodes) {
    moves++, ms += elapsed_ms;
    if (!reported_nodes) return;
    counted++, nodes += *reported_nodes, nodes_ms += elapsed_ms;
    move_nps.push_back(*reported_nodes * 1000 / std::max<int64_t>(elapsed_ms, 1));
  }
  void add(const SearchStats& o) {
    moves += o.moves, ms += o.ms, counted += o.counted, nodes += o.nodes, nodes_ms += o.nodes_ms;
    for (int64_t r : o.move_nps) move_nps.push_back(r);  // (insert() trips a false -Wstringop-overflow of GCC 12)
  }
  double ms_per_move() const { return moves ? double(ms) / double(moves) : 0.0; }
  double nodes_per_move() const { return counted ? double(nodes) / double(counted) : 0.0; }
  double nodes_per_second() const { return nodes_ms ? 1e3 * double(nodes) / double(nodes_ms) : 0.0; }
  // The median of move_nps (the mean of the middle two for an even count); 0 when there is none.
  double median_nodes_per_second() const {
    if (move_nps.empty()) return 0.0;
    std::vector<int64_t> v = move_nps;
    const size_t h = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + h, v.end());
    if (v.size() % 2) return double(v[h]);
    return 0.5 * double(v[h] + *std::max_element(v.begin(), v.begin() + h));
  }
};

struct PlayedGame {
  GameRecord record;                       // all moves, the opening's included; comments hold scores
  std::vector<int64_t> move_ms;            // per move, -1 for the opening's moves
  std::vector<std::optional<int>> scores;  // per move, the mover's score (cp; mate as +-(32000 - plies))
  int opening_plies = 0;
  Verdict verdict;
  bool failed[COLOR_NB] = {false, false};  // the engine crashed or stopped answering: restart it
  SearchStats search[COLOR_NB];            // each side's moves, time and nodes
  // The runner's own time per move, summed: wall time from a bestmove line's arrival (the reader
  // thread's time stamp) to the next go written, and the game thread's CPU time from taking the
  // line to writing the next position (wall time on a loaded machine also counts the waits for a core).
  double runner_us = 0, runner_cpu_us = 0;
  int runner_moves = 0;
};

constexpr int MATE_SCORE = 32000;

// Parses the score of an `info` line into the mover's centipawns ("score cp 35", "score mate 3",
// "score mate -"); nullopt when the line has none.
std::optional<int> parse_info_score(const std::string& line);

// The node count of an `info` line ("nodes 12345"); nullopt when it has none.
std::optional<int64_t> parse_info_nodes(const std::string& line);

// A move's record comment: the mover's score and the exact time (the CSA T line holds seconds).
std::string move_comment(std::optional<int> score, int64_t ms);

// The clocks of a game as the runner keeps them for USI engines (from the moment `go` is written to
// the moment the `bestmove` line arrives): what `go` says and each side's time left.
class GameClock {
 public:
  explicit GameClock(const TimeControl& tc) : tc_(tc), remaining_{tc.time_ms, tc.time_ms} {}
  bool clocked() const { return tc_.nodes == 0; }
  // The `go` line for `us`, whose node count under a node limit is `nodes`.
  std::string go(int64_t nodes) const;
  // The longest `us`'s answer may take, the margin aside (`timeout_ms` under a node limit).
  int64_t limit_ms(Color us, int64_t timeout_ms) const {
    return clocked() ? remaining_[us] + tc_.byoyomi_ms : timeout_ms;
  }
  // Charges an answer of `elapsed_ms` to `us`; false when it came after its limit and the margin
  // (a time forfeit; nothing is charged). Always true under a node limit.
  bool charge(Color us, int64_t elapsed_ms, int64_t margin_ms);

 private:
  TimeControl tc_;
  int64_t remaining_[COLOR_NB];
};

// One engine's answer to `position ...` and `go ...`, as a game of USI engines takes it.
struct UsiAnswer {
  enum Kind {
    BESTMOVE,     // a bestmove line came (late or not: the caller's clock decides)
    INTERRUPTED,  // the runner was told to stop while waiting
    CRASH,        // the engine ended
    TIME_UP,      // no bestmove by the deadline; the engine answered `stop` within the grace
    NO_ANSWER,    // ... nor `stop` within the grace: killed
  };
  Kind kind = INTERRUPTED;
  std::string move;  // BESTMOVE: the move text (a USI move, "resign" or "win")
  std::optional<int> score;
  std::optional<int64_t> nodes;  // from the last info line that had them
  Clock::time_point sent_at;     // when `go` was written
  Clock::time_point at;          // BESTMOVE: when the bestmove line arrived
  int64_t elapsed_ms = 0;        // BESTMOVE: from `go` written to the bestmove line's arrival
  bool failed() const { return kind == CRASH || kind == NO_ANSWER; }  // restart the engine
};

// Sends `position` and `go` to `e` and waits for its bestmove until `limit_ms` (plus the margin when
// `clocked`) after the `go`; on a time-out sends `stop` and kills an engine that does not answer it
// within settings.grace_ms.
UsiAnswer ask_move(EngineProcess& e, const std::string& position, const std::string& go, int64_t limit_ms, bool clocked,
                   const GameSettings& settings);

// The verdict against `us` for an answer that is no move: a crash, a time-out (a time forfeit on a
// clock, else no answer), or an interrupted game.
Verdict failed_answer_verdict(const UsiAnswer& a, Color us, bool clocked);

// Plays a game from `opening`; both engines must be started and in sync. Names in the record are
// the engines' display names.
PlayedGame play_game(EngineProcess& black, EngineProcess& white, const Opening& opening, const GameSettings& settings);

// Plays the opening's moves on `pos` (set to the opening's start) into the game's record, with no
// time, score or comment of their own: how every game of a match, in engine processes or in the
// arena, begins.
void play_opening(Position& pos, PlayedGame& game, const Opening& opening);

}  // namespace jiriki::match
