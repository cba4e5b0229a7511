// The tournament scheduler: pairings (a match of two engines, a gauntlet of the first engine
// against each other one, or a round robin), each opening played twice with colours swapped,
// games on `concurrency` threads that each own their engine processes (restarted after a crash or
// a stall), statistics as games end, and an SPRT that stops a two-engine match once it decides.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "match/engine_process.h"
#include "match/game.h"
#include "match/openings.h"
#include "match/records.h"
#include "match/stats.h"

namespace jiriki::match {

struct TournamentConfig {
  std::vector<EngineSpec> engines;
  bool gauntlet = false;  // engine 0 against each other one; else every pair of engines
  int64_t games = 10;     // games per pairing (pairs of two, colours swapped)
  int concurrency = 1;    // games at once
  int cpus_per_game = 0;  // > 0: the engines of game slot k confined to the k-th such run of the
                          // runner's CPUs (cpus_for_slot), so that games at once never share a core
  uint64_t seed = 1;      // opening order and random openings
  GameSettings game;
  std::vector<Opening> openings;  // empty: random_plies random moves from the initial position
  int random_plies = 0;
  std::optional<SprtParams> sprt;  // only for a single pairing
  int64_t start_within_ms = 0;     // > 0: a pair of games starts only this soon after the tournament
                                   // did, and every pair started is played out (a time budget that
                                   // drops no game, so long games are not the ones left out)
  RecordPaths records;
  bool progress = true;  // a progress line on stderr as games end
  std::string log;       // file for every line to and from the engines ("" for none)
};

// Games each engine lost by a fault of its own.
struct EngineFaults {
  int64_t time = 0, illegal = 0, crash = 0, no_answer = 0;
};

// Results of one pairing from the first engine's view.
struct PairingResult {
  int first = 0, second = 1;  // engine indices
  int64_t wins = 0, draws = 0, losses = 0;
  Penta penta{};  // finished pairs by the first engine's points: LL, LD, DD/WL, WD, WW
  int64_t games() const { return wins + draws + losses; }
};

struct TournamentResult {
  std::vector<PairingResult> pairings;
  std::vector<EngineFaults> faults;  // per engine
  std::vector<SearchStats> search;   // per engine: moves, thinking time and nodes over all its games
  // per engine, per game thread: each instance's own figures (each thread runs its own engine
  // processes; with several games at once sharing a GPU, what each instance got of it)
  std::vector<std::vector<SearchStats>> instances;
  int64_t games = 0;
  double llr = 0;
  SprtResult sprt = SprtResult::NONE;
  double runner_us_per_move = 0;      // mean time from a bestmove line's arrival to the next go
  double runner_cpu_us_per_move = 0;  // the game thread's CPU time from taking the line to that go
  int64_t runner_moves = 0;
  std::string error;         // an engine that could not start, a record that could not be
                             // written: the tournament stopped
  bool interrupted = false;  // request_stop() came: the games in progress were dropped
};

// One finished game as the score counts it.
struct GameOutcome {
  int pairing = 0;               // index into TournamentResult::pairings
  int64_t pair = 0;              // within the pairing, the games of one opening share this
  int black = 0, white = 1;      // engine indices
  std::optional<Color> winner;   // nullopt: a draw
  std::string reason;            // how it ended, as games.jsonl says ("resign", "time forfeit", ...)
  SearchStats search[COLOR_NB];  // each side's answered moves, time and nodes
  int thread = -1;               // the game thread that played it (-1: not known, e.g. read from a file)
};

// Keeps the score as games end: results, colour-swapped pairs, faults and search figures. The
// runner and `jiriki match --summarize` (games.jsonl files read back) both count through it.
class Tally {
 public:
  explicit Tally(TournamentResult& result) : result_(result) {}
  // Adds one game to result.pairings[g.pairing], result.faults and result.search (which must
  // cover its engines); returns true when it completed a pair, changing the pentanomial counts.
  bool add(const GameOutcome& g);

 private:
  TournamentResult& result_;
  std::map<std::pair<int, int64_t>, int> half_pairs_;  // the first game's half points of unfinished pairs
};

// A tournament's games in schedule order (pair-major: both colours of an opening one after the
// other), their openings, and the score as they end: records, tally, SPRT (which stops the
// schedule once decided) and the progress line. Shared by the game threads of run_tournament and
// by the in-process arena (arena.h); thread-safe.
class Schedule {
 public:
  Schedule(const TournamentConfig& config, TournamentResult& result);
  ~Schedule();
  Schedule(const Schedule&) = delete;
  Schedule& operator=(const Schedule&) = delete;

  // One game to play.
  struct Job {
    int pairing = 0;
    int64_t pair = 0;          // index of the opening pair within the pairing
    bool swapped = false;      // the second game of the pair: the second engine plays Black
    int64_t number = 0;        // 1, 2, ... in schedule order
    int black = 0, white = 1;  // engine indices
  };
  // The next game to play; false when none is left or the tournament stops (SPRT decided, a
  // failure, request_stop()).
  bool next(Job& job);
  const Opening& opening(const Job& job) const { return openings_[job.pair]; }
  // Records and counts a finished game; `thread` is the game thread (or arena worker) that played it.
  void finish(const Job& job, int thread, const PlayedGame& game);
  // Stops the tournament with `error` (the first one is kept).
  void fail(const std::string& error);
  // True once no new game may start; the games in progress may be dropped.
  bool stopping() const;
  // Fills in the run's means and the interrupted flag once every game thread has ended.
  void done();
  TrafficLog* traffic_log() const { return log_.get(); }

 private:
  bool pair_starts(int64_t j, const Job& job);
  void progress();
  void print_progress(const std::string& s);

  const TournamentConfig& config_;
  TournamentResult& result_;
  RecordWriter writer_;
  std::unique_ptr<TrafficLog> log_;
  std::vector<Job> jobs_;
  std::vector<Opening> openings_;
  std::atomic<int64_t> next_job_{0};
  enum { UNDECIDED, PLAY, SKIP };
  std::vector<std::atomic<int>> pair_decision_;  // by the index of the pair's first game
  const std::chrono::steady_clock::time_point started_at_ = std::chrono::steady_clock::now();
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  Tally tally_{result_};
  double runner_us_ = 0, runner_cpu_us_ = 0;
};

// Stops a running tournament soon (safe in a signal handler): no new game starts, and the games
// in progress end before their next move, unrecorded.
void request_stop();
// The flag request_stop() sets: GameSettings::interrupt and the engine processes' interrupt.
const std::atomic<bool>* stop_flag();

// The process of engine `engine` for game slot `slot` (spec_for_slot; confined to `cpus` when not
// empty) in sync and ready for a game: started, or started again when it does not answer. nullptr
// when three starts in a row failed (the schedule then fails: the engine is broken, not unlucky) or
// when the runner is told to stop meanwhile (an interrupted start is no failure).
EngineProcess* ready_engine(std::unique_ptr<EngineProcess>& process, const TournamentConfig& config, Schedule& schedule,
                            int engine, int slot, const std::vector<int>& cpus);

// The pairings (engine index pairs) of a tournament.
std::vector<std::pair<int, int>> make_pairings(int engines, bool gauntlet);

TournamentResult run_tournament(const TournamentConfig& config);

}  // namespace jiriki::match
