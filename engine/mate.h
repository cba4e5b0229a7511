// Checkmate search. MateSolver is a df-pn (depth-first proof-number) solver for `go mate` and for a
// root mate thread beside the tree search; mate_in_ply is a small fixed-depth search cheap enough
// for every new leaf of the tree. The attacker is the side to move: it may play checks only, the
// defender any legal reply (counter-checks included); the generators already exclude the illegal
// pawn-drop mate. A line that repeats a position is a failure for the attacker (perpetual check
// loses), so every mate reported is a finite forced mate. Repetitions are looked for from the root
// of the solve on: the game before it does not count.
//
// The solver's table is keyed by the board with the hands apart (a mate with fewer attacker pieces
// in hand proves the position with more), holds for each position the shortest mate proven and the
// length within which there is none, and stores a disproof that relied on a repetition together with
// the ancestors it relied on, so that it is reused only where they are on the path again.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "shogi/position.h"

namespace jiriki {

// How long a solve may run; every limit left at its default is absent.
struct MateLimits {
  int64_t time_ms = -1;                     // wall-clock milliseconds; < 0: no limit (`go mate infinite`)
  uint64_t max_nodes = 0;                   // positions visited; 0: no limit
  int max_ply = 255;                        // longest mate looked for, in plies
  uint64_t shorten_nodes = 1000000;         // nodes spent, once a mate is found, on shorter ones
                                            // (0: report the first mate found)
  const std::atomic<bool>* stop = nullptr;  // set by another thread to stop at once
};

struct MateResult {
  enum Status { MATE, NO_MATE, TIMEOUT };
  Status status = TIMEOUT;
  std::vector<Move> pv;  // MATE: the mating line from the attacker's move to checkmate, the shortest
                         // when shortening finished in time, the defender resisting longest
  uint64_t nodes = 0;    // positions visited (moves made), PV extraction included
};

// A df-pn solver with its own bounded transposition table. Not thread-safe: use one per thread.
// The table is kept between solves (its results do not depend on the root); clear() empties it.
class MateSolver {
 public:
  explicit MateSolver(size_t hash_mb = 16);  // table size in MiB (at least one cluster)
  ~MateSolver();
  MateSolver(const MateSolver&) = delete;
  MateSolver& operator=(const MateSolver&) = delete;

  // Solves the position for its side to move; pos is restored before returning.
  MateResult solve(Position& pos, const MateLimits& limits = {});
  void clear();  // forgets every stored result

 private:
  struct Search;
  std::unique_ptr<Search> s_;
};

// One-shot convenience: a fresh solver with a table of hash_mb MiB.
MateResult solve_mate(Position& pos, const MateLimits& limits = {}, size_t hash_mb = 16);

// True when the side to move mates within `plies` (1, 3, 5, ...: any odd number, though cost grows
// fast beyond 5); *first, when given, receives the first move of a shortest such mate. Uses no
// table or shared state: safe from any thread.
bool mate_in_ply(Position& pos, int plies, Move* first = nullptr);

}  // namespace jiriki
