#include "engine/mate.h"

#include <algorithm>
#include <bit>
#include <chrono>

#include "shogi/movegen.h"

namespace jiriki {

// ---- fixed-depth search ------------------------------------------------------------------------

namespace {

bool has_evasion(const Position& pos) {
  MoveList l;
  generate<GenType::EVASIONS>(pos, l);
  return l.size() > 0;
}

bool defender_mated_within(Position& pos, int plies);

// Attacker to move: some check mates within `plies`. Mates in one are tried first, for every check,
// because they are cheap and, when they exist, the shortest.
bool attacker_mates_within(Position& pos, int plies, Move* first) {
  MoveList checks;
  generate<GenType::CHECKS>(pos, checks);
  for (Move m : checks) {
    pos.do_move(m);
    bool mate = !has_evasion(pos);
    pos.undo_move();
    if (mate) {
      if (first) *first = m;
      return true;
    }
  }
  if (plies < 3) return false;
  for (Move m : checks) {
    pos.do_move(m);
    bool mate = defender_mated_within(pos, plies - 1);
    pos.undo_move();
    if (mate) {
      if (first) *first = m;
      return true;
    }
  }
  return false;
}

// Defender to move, in check: every reply is mated within `plies`.
bool defender_mated_within(Position& pos, int plies) {
  MoveList replies;
  generate<GenType::EVASIONS>(pos, replies);
  for (Move m : replies) {
    if (plies < 2) return false;
    pos.do_move(m);
    bool mated = attacker_mates_within(pos, plies - 1, nullptr);
    pos.undo_move();
    if (!mated) return false;
  }
  return true;
}

}  // namespace

bool mate_in_ply(Position& pos, int plies, Move* first) {
  // Deepening by two plies so that the first move found belongs to a shortest mate. No repetition
  // can complete within such short lines, so none is looked for.
  for (int d = 1; d <= plies; d += 2)
    if (attacker_mates_within(pos, d, first)) return true;
  return false;
}

// ---- df-pn -------------------------------------------------------------------------------------

namespace {

constexpr uint32_t INF = 1u << 30;          // pn or dn of a solved node
constexpr uint32_t UNSOLVED_MAX = INF - 1;  // sums over unsolved children saturate here
constexpr int NEVER = 0x7fff;               // a mate length meaning "none": no proof, or no mate at all

uint32_t sat(uint64_t x) { return uint32_t(std::min<uint64_t>(x, UNSOLVED_MAX)); }
int one_more(int plies) { return plies == NEVER ? NEVER : std::min(plies + 1, NEVER - 1); }

// A hand packed into one word with a guard bit above each count, so that "at least as many of every
// piece" is one subtraction: a field that falls short borrows its guard bit.
constexpr int HAND_SHIFT[HAND_TYPE_NB] = {0, 0, 6, 10, 14, 18, 21, 24};
constexpr uint32_t HAND_GUARDS = 1u << 5 | 1u << 9 | 1u << 13 | 1u << 17 | 1u << 20 | 1u << 23 | 1u << 27;
uint32_t pack(const Hand& h) {
  uint32_t p = 0;
  for (int pt = PAWN; pt <= GOLD; ++pt) p |= uint32_t(h.count[pt]) << HAND_SHIFT[pt];
  return p;
}
bool covers(uint32_t a, uint32_t b) { return (((a | HAND_GUARDS) - b) & HAND_GUARDS) == HAND_GUARDS; }

// What a disproof relies on beyond its own subtree: a repetition of the ancestor d plies up sets
// bit d-1 of `up`; `unsafe` marks an ancestor more than 32 plies up, which cannot be checked later.
// Such disproofs hold on the current path only.
struct Dep {
  uint32_t up = 0;
  bool unsafe = false;
  bool none() const { return !up && !unsafe; }
};
// The same reliance seen from the parent; a line that returns to the parent itself is just a
// failed loop from the parent's point of view, not a dependency.
Dep to_parent(Dep d) { return {d.up >> 1, d.unsafe}; }

// A node's proof and disproof numbers. A proven node (pn 0) mates within `len` plies; a disproven
// one (dn 0) has no mate within `floor` plies (NEVER: none at all), relying on `dep`.
struct Node {
  uint32_t pn = 1, dn = 1;
  int len = NEVER;
  int floor = -1;
  Dep dep;
  bool proven() const { return pn == 0; }
  bool disproven() const { return dn == 0; }
};
Node proven_node(int len) { return {0, INF, len, -1, {}}; }
Node disproven_node(int floor, Dep dep = {}) { return {INF, 0, NEVER, floor, dep}; }

// A transposition-table entry. Positions that differ only in hands share `board` and sit in the
// same cluster, so that a mate with fewer attacker pieces in hand serves a position with more, and
// "no mate" with more serves a position with fewer. The shortest mate lies in (floor, len].
struct Entry {
  uint64_t board = 0;         // key of the board and side to move; 0 = empty
  uint32_t att = 0, def = 0;  // packed hands of attacker and defender
  uint32_t pn = 1, dn = 1;    // last estimate while unsolved
  uint32_t path_up = 0;       // a disproof that holds on some paths only: Dep::up from this node,
  uint32_t path_sum = 0;      // and the sum of those ancestors' keys, to recognise them on a new path
  uint32_t work = 0;          // positions searched below: the entry with the least is evicted first
  uint16_t len = NEVER;       // mates within len plies (NEVER: no proof known)
  int16_t floor = -1;         // no mate within floor plies (NEVER: no mate at all; -1: unknown)
  int16_t path_floor = -1;    // the path-dependent disproof: no mate within this many plies (-1: none)
  uint8_t generation = 0;     // the solve that last stored it: older entries are evicted first
};
// Eight entries a cluster: the defender's choice of piece to interpose makes many hand variants.
constexpr int CLUSTER = 8;
struct Cluster {
  Entry e[CLUSTER];
};

struct Child {
  Move move;
  Node v;
};
struct Frame {
  int n = 0;
  Child children[MoveList::MAX];
};

}  // namespace

struct MateSolver::Search {
  std::vector<Cluster> table;
  std::vector<std::unique_ptr<Frame>> frames;  // one per ply; unique_ptr keeps them in place
  std::vector<uint64_t> path;                  // keys of the positions from the root
  int base = 0;                                // repetitions are looked for from this ply on
  int bound_ply = 0;                           // only mates ending by this ply are looked for
  int max_ply = 0;                             // the solve's limit on mate length

  Position* pos = nullptr;
  Color attacker = BLACK;
  uint64_t attacker_salt = 0;  // keeps the two attackers' results apart in one table
  uint8_t generation = 0;      // counts solves, to age the table's entries
  uint64_t nodes = 0, node_limit = 0, next_check = 0;
  bool honour_clock = true;  // whether the deadline and stop flag apply to the current search
  bool has_deadline = false;
  std::chrono::steady_clock::time_point deadline;
  const std::atomic<bool>* stop = nullptr;
  bool stopped = false;

  explicit Search(size_t hash_mb) { table.resize(std::max<size_t>(1, (hash_mb << 20) / sizeof(Cluster))); }

  Frame& frame(int ply) {
    while (int(frames.size()) <= ply) frames.push_back(std::make_unique<Frame>());
    return *frames[ply];
  }

  // ---- table
  // The position key without the hands (they are added in, so they subtract out).
  uint64_t board_key() const {
    uint64_t k = pos->key();
    for (Color c : {BLACK, WHITE})
      for (int pt = PAWN; pt <= GOLD; ++pt) k -= zobrist::HAND[c][pt] * pos->hand(c)[PieceType(pt)];
    return k ^ attacker_salt;
  }
  Cluster& cluster(uint64_t board) { return table[size_t((unsigned __int128)board * table.size() >> 64)]; }

  // The sum of the keys of the ancestors named by `up` of the node at `ply`; false when one of them
  // lies above `base`, outside the current search.
  bool ancestors_sum(int ply, uint32_t up, uint32_t& sum) const {
    sum = 0;
    for (; up; up &= up - 1) {
      int a = ply - 1 - std::countr_zero(up);
      if (a < base) return false;
      sum += uint32_t(path[a]);
    }
    return true;
  }

  // What the table knows of the current position at `ply`, judged for a search that may still
  // spend `remaining` plies: a mate within them, no mate within them, or an estimate.
  bool probe(int ply, int remaining, Node& out) {
    const uint64_t board = board_key();
    const uint32_t att = pack(pos->hand(attacker)), def = pack(pos->hand(~attacker));
    const Entry* exact = nullptr;
    int len = NEVER, floor = -1;
    for (const Entry& e : cluster(board).e) {
      if (e.board != board) continue;
      if (e.len < len && covers(att, e.att) && covers(e.def, def)) len = e.len;
      if (e.floor > floor && covers(e.att, att) && covers(def, e.def)) floor = e.floor;
      if (e.att == att && e.def == def) exact = &e;
    }
    if (len <= remaining) return out = proven_node(len), true;
    if (floor >= std::max(remaining, 0)) return out = disproven_node(floor), true;
    if (!exact) return false;
    uint32_t sum;
    if (exact->path_floor >= 0 && exact->path_floor >= remaining && ancestors_sum(ply, exact->path_up, sum) &&
        sum == exact->path_sum)
      out = disproven_node(exact->path_floor, {exact->path_up, false});
    else out = Node{exact->pn, exact->dn, NEVER, -1, {}};
    return true;
  }

  // Stores what was learnt of the current position at `ply`; `estimate` is kept for a position
  // first stored with a path-dependent disproof. Proofs only shorten and floors only rise.
  void store(int ply, const Node& v, const Node& estimate, uint64_t work) {
    uint32_t sum = 0;
    if (v.disproven() && (v.dep.unsafe || !ancestors_sum(ply, v.dep.up, sum))) return;
    const uint64_t board = board_key();
    const uint32_t att = pack(pos->hand(attacker)), def = pack(pos->hand(~attacker));
    Cluster& c = cluster(board);
    Entry* slot = nullptr;
    for (Entry& e : c.e)
      if (e.board == board && e.att == att && e.def == def) slot = &e;
    if (!slot) {
      auto keep = [&](const Entry& e) { return std::pair{e.board != 0 && e.generation == generation, e.work}; };
      slot = &c.e[0];
      for (Entry& e : c.e)
        if (keep(e) < keep(*slot)) slot = &e;
      *slot = Entry{};
      slot->board = board, slot->att = att, slot->def = def;
      slot->pn = std::clamp(estimate.pn, 1u, UNSOLVED_MAX), slot->dn = std::clamp(estimate.dn, 1u, UNSOLVED_MAX);
    }
    slot->work = uint32_t(std::min<uint64_t>(slot->work + work, UINT32_MAX));
    slot->generation = generation;
    if (v.proven()) {
      slot->len = uint16_t(std::min<int>(slot->len, v.len));
    } else if (v.disproven() && v.dep.none()) {
      slot->floor = int16_t(std::max<int>(slot->floor, v.floor));
    } else if (v.disproven()) {
      slot->path_up = v.dep.up, slot->path_sum = sum, slot->path_floor = int16_t(v.floor);
    } else {
      slot->pn = v.pn, slot->dn = v.dn;
    }
  }

  // ---- limits
  bool out_of_time() const {
    return honour_clock && ((stop && stop->load(std::memory_order_relaxed)) ||
                            (has_deadline && std::chrono::steady_clock::now() >= deadline));
  }
  void check_limits() {
    if (nodes < next_check) return;
    next_check = nodes + 1024;
    if (nodes >= node_limit || out_of_time()) stopped = true;
  }

  // ---- search
  // The value of the position just reached at `ply` before it is searched: a repetition, a stored
  // result, a mate (defender to move without a reply), the ply bound, or a first estimate.
  Node first_value(int ply, bool or_node) {
    path[ply] = pos->key();
    for (int a = ply - 4; a >= base; a -= 2)
      if (path[a] == path[ply]) {
        int d = ply - a;
        return disproven_node(NEVER, d <= 32 ? Dep{1u << (d - 1), false} : Dep{0, true});
      }
    const int remaining = bound_ply - ply;
    Node v;
    const bool known = probe(ply, remaining, v);
    if (known && (v.proven() || v.disproven())) return v;
    // An estimate in the table means the node was searched: a defender there has a reply.
    if (remaining <= 0 && (or_node || known)) return disproven_node(0);
    if (known) return v;
    if (or_node) return Node{};
    MoveList replies;
    generate<GenType::EVASIONS>(*pos, replies);
    if (replies.size() == 0) {
      v = proven_node(0);
      store(ply, v, Node{}, 0);
      return v;
    }
    if (remaining <= 0) return disproven_node(0);
    // Every reply must be refuted: more replies, more work to prove.
    return Node{uint32_t(replies.size()), 1, NEVER, -1, {}};
  }

  void expand(int ply, bool or_node, Frame& f) {
    MoveList list;
    if (or_node) generate<GenType::CHECKS>(*pos, list);
    else generate<GenType::EVASIONS>(*pos, list);
    f.n = 0;
    for (Move m : list) {
      Child& c = f.children[f.n++];
      c.move = m;
      pos->do_move(m);
      ++nodes;
      c.v = first_value(ply + 1, !or_node);
      pos->undo_move();
    }
  }

  // The node's value from its children's; `best` is the child to search next and `second` the
  // runner-up's pn (OR node) or dn (AND node).
  static Node summarize(const Frame& f, bool or_node, int& best, uint32_t& second) {
    best = -1;
    second = INF;
    uint32_t lo = INF;  // OR: min pn; AND: min dn
    uint64_t sum = 0;   // OR: sum of dn; AND: sum of pn
    int len = or_node ? NEVER : 0;
    int floor = or_node ? NEVER : -1;
    Dep dep;
    for (int i = 0; i < f.n; ++i) {
      const Node& c = f.children[i].v;
      uint32_t key = or_node ? c.pn : c.dn;
      if (key < lo) second = lo, lo = key, best = i;
      else if (key < second) second = key;
      sum += or_node ? c.dn : c.pn;
      if (c.proven()) len = or_node ? std::min(len, c.len) : std::max(len, c.len);
      if (!c.disproven()) continue;
      if (or_node) {  // every check must fail: the weakest failure counts, and every reliance
        floor = std::min(floor, c.floor);
        dep.up |= c.dep.up, dep.unsafe |= c.dep.unsafe;
      } else if (floor < 0 || (c.dep.none() && !dep.none()) ||
                 (c.dep.none() == dep.none() && c.floor > floor)) {  // one defence is enough: the best
        floor = c.floor, dep = c.dep;
      }
    }
    if (or_node) {
      if (lo == 0) return proven_node(len + 1);
      if (sum == 0) return disproven_node(one_more(floor), to_parent(dep));
      return Node{lo, sat(sum), NEVER, -1, {}};
    }
    if (sum == 0) return proven_node(f.n ? len + 1 : 0);
    if (lo == 0) return disproven_node(one_more(floor), to_parent(dep));
    return Node{sat(sum), lo, NEVER, -1, {}};
  }

  // Threshold for the best child given the runner-up: the 1+epsilon trick (epsilon = 1/4) lets the
  // child run a little past the runner-up so that the search does not thrash between the two.
  static uint32_t runner_up_threshold(uint32_t second) {
    return uint32_t(std::min<uint64_t>(INF, uint64_t(second) + second / 4 + 1));
  }

  // Multiple-iterative-deepening step: searches the current position (at `ply`) until its pn
  // reaches thpn or its dn reaches thdn, and returns its value.
  Node mid(int ply, uint32_t thpn, uint32_t thdn) {
    const bool or_node = pos->side_to_move() == attacker;
    Frame& f = frame(ply);
    const uint64_t start = nodes;
    expand(ply, or_node, f);
    Node v, estimate;
    for (bool first = true;; first = false) {
      int best;
      uint32_t second;
      v = summarize(f, or_node, best, second);
      if (first) estimate = v.proven() || v.disproven() ? Node{} : v;
      if (v.pn >= thpn || v.dn >= thdn || v.proven() || v.disproven() || stopped) break;
      Child& c = f.children[best];
      uint32_t cthpn, cthdn;
      if (or_node) {
        cthpn = std::min(thpn, runner_up_threshold(second));
        cthdn = uint32_t(std::min<uint64_t>(INF, uint64_t(thdn) - v.dn + c.v.dn));
      } else {
        cthdn = std::min(thdn, runner_up_threshold(second));
        cthpn = uint32_t(std::min<uint64_t>(INF, uint64_t(thpn) - v.pn + c.v.pn));
      }
      pos->do_move(c.move);
      ++nodes;
      path[ply + 1] = pos->key();
      c.v = mid(ply + 1, cthpn, cthdn);
      pos->undo_move();
      check_limits();
    }
    store(ply, v, estimate, nodes - start);
    return v;
  }

  // Solves the current position (at `ply`) for mates within `within` plies (and by max_ply), as a
  // root of its own: the path above it is ignored, so the value holds wherever the position is met.
  // The search stops at `limit` nodes (and at the deadline or stop flag when `clock`); `stopped` is
  // cleared on return.
  Node solve_here(int ply, int within, uint64_t limit, bool clock) {
    const int saved_base = base, saved_bound = bound_ply;
    base = ply, bound_ply = std::min(ply + within, max_ply);
    node_limit = limit, honour_clock = clock, next_check = nodes, stopped = false;
    Node v = mid(ply, INF, INF);
    base = saved_base, bound_ply = saved_bound, stopped = false;
    return v;
  }

  // ---- the mating line
  // The value of the current position (at `ply`) for the line: a mate on the board or what the
  // table knows, whatever the length.
  Node known_value(int ply, bool or_node) {
    Node v;
    if (!or_node && !has_evasion(*pos)) return proven_node(0);
    return probe(ply, max_ply, v) ? v : Node{};
  }

  // The mating line from the proven root, `root_len` plies long. At OR nodes the attacker plays
  // its shortest known mate; at AND nodes the defender its longest resistance. When `exact` (the
  // root's length is known to be the shortest), that resistance is made exact: a defence whose
  // known mate is one ply shorter than the node's is taken only once it is shown to have no
  // shorter one. Table entries lost to eviction are proven again under `pv_limit`; exactness checks
  // run under `check_limit` and the clock, and are dropped when that runs out.
  std::vector<Move> mating_line(int root_len, bool exact, uint64_t check_limit, uint64_t pv_limit) {
    std::vector<Move> pv;
    int ply = 0, expect = root_len;
    while (ply <= max_ply) {
      const bool or_node = pos->side_to_move() == attacker;
      Frame& f = frame(ply);
      MoveList list;
      if (or_node) generate<GenType::CHECKS>(*pos, list);
      else generate<GenType::EVASIONS>(*pos, list);
      if ((!or_node && list.size() == 0) || ply == max_ply) break;  // checkmate (or a table gone wrong)
      f.n = 0;
      int best = -1;
      for (Move m : list) {
        Child& c = f.children[f.n++];
        c.move = m;
        pos->do_move(m);
        ++nodes;
        path[ply + 1] = pos->key();
        c.v = known_value(ply + 1, !or_node);
        // Every defence of a proven node is refuted: if the table lost how, find it again.
        if (!or_node && !c.v.proven()) c.v = solve_here(ply + 1, max_ply - ply - 1, pv_limit, false);
        pos->undo_move();
        if (!or_node && !c.v.proven()) return undo_line(pv);  // out of nodes: give up the line
        if (c.v.proven() &&
            (best < 0 || (or_node ? c.v.len < f.children[best].v.len : c.v.len > f.children[best].v.len)))
          best = f.n - 1;
      }
      if (or_node && (best < 0 || f.children[best].v.len > expect - 1)) {
        // The table lost part of this node's proof: prove it again within the length its parent
        // promised. The search leaves its children's values in this same frame.
        solve_here(ply, std::min(expect, max_ply - ply), pv_limit, false);
        best = -1;
        for (int i = 0; i < f.n; ++i)
          if (f.children[i].v.proven() && (best < 0 || f.children[i].v.len < f.children[best].v.len)) best = i;
      }
      if (best < 0) break;
      if (!or_node && exact) {
        int pick = exact_longest(ply, f, expect - 1, check_limit);
        if (pick < 0) exact = false;
        else best = pick;
      }
      const Child& c = f.children[best];
      expect = c.v.len;
      pv.push_back(c.move);
      pos->do_move(c.move);
      path[++ply] = pos->key();
    }
    return undo_line(pv);
  }
  std::vector<Move> undo_line(const std::vector<Move>& pv) {
    for (size_t i = 0; i < pv.size(); ++i) pos->undo_move();
    return pv;
  }

  // At an AND node at `ply` whose shortest mate is known to be one ply more than `target`: the
  // child whose shortest mate is exactly `target` plies, shown by finding no mate within
  // target - 2; -1 when the checks run out of nodes or time.
  int exact_longest(int ply, Frame& f, int target, uint64_t check_limit) {
    for (int i = 0; i < f.n; ++i) {
      Child& c = f.children[i];
      if (c.v.len != target) continue;
      if (target <= 1) return i;  // an OR node cannot mate in fewer than one ply
      pos->do_move(c.move);
      path[ply + 1] = pos->key();
      Node v = solve_here(ply + 1, target - 2, check_limit, true);
      pos->undo_move();
      if (v.disproven()) return i;
      if (!v.proven()) return -1;
      c.v.len = v.len;  // shorter than thought: not the longest defence
    }
    return -1;
  }

  MateResult solve(Position& p, const MateLimits& limits) {
    pos = &p;
    ++generation;
    attacker = p.side_to_move();
    attacker_salt = attacker == WHITE ? 0x9e3779b97f4a7c14ull : 0;  // bit 0 clear: it is the side to move
    max_ply = std::clamp(limits.max_ply, 1, NEVER - 2);
    path.assign(size_t(max_ply) + 2, 0);
    path[0] = p.key();
    base = 0;
    nodes = 0;
    has_deadline = limits.time_ms >= 0;
    // Capped at 2^40 ms (35 years): a GUI may send any 64-bit figure, and steady_clock counts
    // nanoseconds in 64 bits.
    deadline = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(std::clamp<int64_t>(limits.time_ms, 0, int64_t(1) << 40));
    stop = limits.stop;
    const uint64_t max_nodes = limits.max_nodes ? limits.max_nodes : UINT64_MAX;

    MateResult r;
    Node root = solve_here(0, max_ply, max_nodes, true);
    if (root.proven()) {
      // df-pn stops at the first proof, often not the shortest: look for mates two plies shorter
      // until there is none, within the shortening allowance and the limits of the solve.
      const uint64_t check_limit = std::min(max_nodes, nodes + limits.shorten_nodes);
      int len = root.len;
      bool exact = len <= 1;
      while (!exact) {
        Node v = solve_here(0, len - 2, check_limit, true);
        if (v.proven()) len = v.len, exact = len <= 1;
        else if (v.disproven()) exact = true;
        else break;
      }
      // The line is the answer: it is completed even past the clock, with a node allowance.
      r.pv = mating_line(len, exact, check_limit, nodes + std::max<uint64_t>(nodes, 1 << 20));
      r.status = MateResult::MATE;
    } else if (root.disproven()) {
      r.status = MateResult::NO_MATE;
    }
    r.nodes = nodes;
    return r;
  }
};

MateSolver::MateSolver(size_t hash_mb) : s_(std::make_unique<Search>(hash_mb)) {}
MateSolver::~MateSolver() = default;

MateResult MateSolver::solve(Position& pos, const MateLimits& limits) { return s_->solve(pos, limits); }

void MateSolver::clear() { std::fill(s_->table.begin(), s_->table.end(), Cluster{}); }

MateResult solve_mate(Position& pos, const MateLimits& limits, size_t hash_mb) {
  MateSolver solver(hash_mb);
  return solver.solve(pos, limits);
}

}  // namespace jiriki
