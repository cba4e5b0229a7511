// One self-play game and its search tree. A game never blocks: step() advances it as far as it
// can without the network (deciding and playing moves whose search is complete, ending the game
// when the rules say so) and leaves its next new leaves in the caller's LeafBatch, which holds
// those of many games; the caller evaluates the batch and lands it (search::finish_batch) before
// stepping the game again. The tree is kept from move to move (the played move's subtree).
//
// Each move is searched with a playout cap: `playouts` new playouts, or with playout-cap
// randomisation (KataGo) `full_playouts` with probability `full_probability`. Full searches get
// Dirichlet noise at the root and their root visit counts are recorded as the policy target;
// the others have no noise and are recorded with no candidates (not for training). Moves of the
// first `temperature_plies` plies are drawn with probability proportional to visits^(1/T). Moves
// that need no search are played directly: the only legal move (not recorded for training) and a
// mate within `root_mate_plies` (recorded, with the mating move as the only candidate).
#pragma once
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "engine/search/playout.h"
#include "engine/search/search.h"
#include "selfplay/openings.h"
#include "selfplay/stats.h"
#include "shogi/hcpe3.h"

namespace jiriki::selfplay {

// How games are played; shared, read-only, by every game of a run.
struct GameSettings {
  search::SearchParams search;     // PUCT constants, leaf mate search, and the game's rules (search.rules;
                                   // openings start at move 1, so rules.max_plies counts the game's plies)
  int playouts = 800;              // new playouts per move (the small cap under playout-cap randomisation)
  int full_playouts = 0;           // > 0: playout-cap randomisation, full cap ...
  double full_probability = 0.25;  // ... taken with this probability
  int leaves_per_step = 1;         // new leaves a game adds to one batch
  float dirichlet_alpha = 0.15f;
  float dirichlet_weight = 0.25f;  // 0: no noise
  int temperature_plies = 30;      // plies (after the opening) whose move is drawn by visit counts
  float temperature = 1.0f;
  float resign_winrate = 0.02f;     // resign when the best move's win rate is below; 0: never
  double no_resign_fraction = 0.1;  // games played out with resignation disabled
  int root_mate_plies = 3;          // mate search before each move's tree search; 0: none
  std::vector<Opening> openings;    // empty: every game starts from the initial position
  uint64_t seed = 1;                // game i draws from a stream seeded by (seed, i)
};

// A finished game: its record and what the statistics need.
struct FinishedGame {
  Hcpe3Game record;
  uint64_t index = 0;  // the game's number in the run
  EndKind end = EndKind::MATE;
  int positions = 0;  // moves recorded as training targets
  bool resign_disabled = false;
  std::optional<Color> would_resign;  // resign_disabled: the side that would have resigned first
};

class Game {
 public:
  Game(const GameSettings& settings, search::NodePool& pool, Counters& counters);
  ~Game();
  Game(const Game&) = delete;
  Game& operator=(const Game&) = delete;

  // Starts game number `index` (its random stream depends on the seed and the index only).
  void start(uint64_t index);
  bool active() const { return active_; }

  enum class Progress { RUNNING, FINISHED };
  // Advances the game; the batch must have room for at least one position. FINISHED: the game is
  // over, take_finished() holds it and the game is inactive until the next start().
  Progress step(search::LeafBatch& lb);
  FinishedGame take_finished() { return std::move(finished_); }
  // Drops the game in progress (the run is stopping). Nothing may be in flight for it.
  void abandon();

 private:
  bool begin_turn();    // judges the position, plays forced and mating moves; true: game over
  void begin_search();  // the root is ready: choose the cap, add noise
  bool search_done() const;
  void count_playouts();
  int add_playouts(search::LeafBatch& lb);  // new leaves queued (collisions included)
  bool finish_move();                       // decides, resigns or plays; true: game over
  void play(Move m, int16_t eval, std::vector<Hcpe3Candidate> candidates);
  void advance_tree(Move m);
  void add_noise(search::Node* root);
  search::Edge* sample_by_visits(search::Node* root);
  void end_game(EndKind kind, uint8_t result);

  const GameSettings& s_;
  search::NodePool& pool_;
  Counters& counters_;
  search::Tree tree_;
  Position pos_;
  std::mt19937_64 rng_;
  bool active_ = false;
  bool turn_pending_ = false;     // a move was played (or the game started): judge before searching
  bool searching_ = false;        // the root is ready and the search of this move has begun
  bool pool_full_ = false;        // this move's search ran out of node pool
  bool full_search_ = true;       // this move's search has the full cap (recorded for training)
  int cap_ = 0;                   // playouts of this move's search
  int64_t counted_playouts_ = 0;  // of tree_.playouts, already added to the run's count
  int plies_ = 0;                 // moves played by self-play (after the opening)
  uint64_t index_ = 0;
  Hcpe3Game record_;
  int positions_ = 0;
  bool resign_disabled_ = false;
  std::optional<Color> would_resign_;
  FinishedGame finished_;
};

}  // namespace jiriki::selfplay
