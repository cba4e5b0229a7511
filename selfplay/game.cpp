// One self-play game: the turn loop around the shared playout steps of engine/search/playout.h.
#include "selfplay/game.h"

#include <algorithm>
#include <cmath>

#include "common/splitmix.h"
#include "engine/mate.h"

namespace jiriki::selfplay {

using namespace search;

namespace {
GameResult win_for(Color c) { return c == BLACK ? BLACK_WIN : WHITE_WIN; }
}  // namespace

Game::Game(const GameSettings& settings, NodePool& pool, Counters& counters)
    : s_(settings), pool_(pool), counters_(counters) {
  tree_.params = &s_.search;
  tree_.pool = &pool_;
}

Game::~Game() { abandon(); }

void Game::abandon() {
  if (tree_.root) pool_.release(tree_.root);
  tree_.root = nullptr;
  active_ = false;
}

void Game::start(uint64_t index) {
  abandon();
  index_ = index;
  rng_.seed(splitmix64(splitmix64(s_.seed) ^ index));  // streams of seeds one bit apart decorrelated
  record_ = Hcpe3Game{};
  const Opening* o = s_.openings.empty() ? nullptr : &s_.openings[rng_() % s_.openings.size()];
  if (o) pos_.set_sfen(o->sfen);  // checked when the openings were loaded
  else pos_.set_startpos();
  record_.start = encode_hcp(pos_);
  if (o)
    for (Move m : o->moves) {
      record_.moves.push_back({m, 0, {}});
      pos_.do_move(m);
    }
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  resign_disabled_ = s_.resign_winrate > 0 && uniform(rng_) < s_.no_resign_fraction;
  would_resign_.reset();
  plies_ = 0;
  positions_ = 0;
  active_ = true;
  turn_pending_ = true;
  searching_ = false;
}

Game::Progress Game::step(LeafBatch& lb) {
  count_playouts();
  for (;;) {
    if (turn_pending_) {
      turn_pending_ = false;
      if (begin_turn()) return Progress::FINISHED;
    }
    if (!tree_.root) {
      // The root goes to the network with the other games' leaves; the search starts next step.
      // A spent pool (other games' trees) is waited out: their moves release memory.
      queue_root(tree_, pos_, lb);
      return Progress::RUNNING;
    }
    if (!searching_) begin_search();
    if (!search_done()) {
      const int queued = add_playouts(lb);
      count_playouts();  // playouts that ended on proven or final nodes landed at once
      if (queued > 0 || !search_done()) return Progress::RUNNING;
    }
    if (finish_move()) return Progress::FINISHED;
  }
}

// The position as the rules see it at the start of a turn: the game may be over, or the move
// may need no search (the only legal move, or a short mate found directly).
bool Game::begin_turn() {
  for (;;) {
    MoveList moves;
    switch (judge_position(pos_, s_.search.rules, moves)) {
      case Ending::NONE: break;
      case Ending::REPETITION_DRAW: end_game(EndKind::SENNICHITE, DRAW | hcpe3::SENNICHITE); return true;
      case Ending::REPETITION_WIN:
        end_game(EndKind::PERPETUAL_CHECK, win_for(pos_.side_to_move()) | hcpe3::SENNICHITE);
        return true;
      case Ending::REPETITION_LOSS:
        end_game(EndKind::PERPETUAL_CHECK, win_for(~pos_.side_to_move()) | hcpe3::SENNICHITE);
        return true;
      case Ending::MATED: end_game(EndKind::MATE, win_for(~pos_.side_to_move())); return true;
      case Ending::DECLARATION:
        end_game(EndKind::DECLARATION, win_for(pos_.side_to_move()) | hcpe3::DECLARATION);
        return true;
      case Ending::MAX_MOVES: end_game(EndKind::MAX_MOVES, DRAW | hcpe3::MAX_MOVES); return true;
    }
    // A forced move teaches the policy nothing: played unsearched and not recorded for training.
    if (moves.size() == 1) {
      play(moves.moves[0], 0, {});
      continue;
    }
    // A short forced mate is played directly and recorded as a training target with the mating
    // move as the only candidate: the policy should learn it whatever the playout cap.
    Move mate = MOVE_NONE;
    if (s_.root_mate_plies > 0 && mate_in_ply(pos_, s_.root_mate_plies, &mate)) {
      play(mate, int16_t(winrate_to_cp(1.0f)), {{uint16_t(mate), 1}});
      continue;
    }
    return false;
  }
}

void Game::begin_search() {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const bool randomised = s_.full_playouts > 0;
  full_search_ = !randomised || uniform(rng_) < s_.full_probability;
  cap_ = randomised && full_search_ ? s_.full_playouts : s_.playouts;
  tree_.playouts = 0;
  counted_playouts_ = 0;
  tree_.engine = pos_.side_to_move();
  pool_full_ = false;
  if (full_search_ && s_.dirichlet_weight > 0) add_noise(tree_.root);
  searching_ = true;
}

// Adds the playouts landed since the last call to the run's count, so that rates are live.
void Game::count_playouts() {
  const int64_t landed = tree_.playouts.load(std::memory_order_relaxed);
  counters_.playouts.fetch_add(landed - counted_playouts_, std::memory_order_relaxed);
  counted_playouts_ = landed;
}

bool Game::search_done() const {
  return pool_full_ || tree_.playouts.load(std::memory_order_relaxed) >= cap_ ||
         tree_.root->outcome() != Outcome::UNKNOWN;
}

int Game::add_playouts(LeafBatch& lb) {
  const int want = s_.leaves_per_step;
  int queued = 0;
  for (int attempts = 0; queued < want && attempts < 4 * want + 16 && !lb.batch.full(); ++attempts) {
    if (tree_.playouts.load(std::memory_order_relaxed) + queued >= cap_ || tree_.root->outcome() != Outcome::UNKNOWN)
      break;
    switch (run_playout(tree_, pos_, lb)) {
      case PlayoutEnd::QUEUED:
      case PlayoutEnd::COLLISION: ++queued; break;
      case PlayoutEnd::LANDED: break;
      case PlayoutEnd::FULL: pool_full_ = true; return queued;
    }
  }
  return queued;
}

bool Game::finish_move() {
  Node* root = tree_.root;
  Edge* best = most_visited(root);
  if (!best)
    best = std::max_element(root->begin(), root->end(), [](const Edge& a, const Edge& b) { return a.prior < b.prior; });
  const float winrate = edge_winrate(*best);
  const Color us = pos_.side_to_move();
  if (s_.resign_winrate > 0 && winrate < s_.resign_winrate && mate_of(*best) <= 0) {
    if (!resign_disabled_) {
      end_game(EndKind::RESIGN, win_for(~us));
      return true;
    }
    if (!would_resign_) would_resign_ = us;
  }
  std::vector<Hcpe3Candidate> candidates;
  if (full_search_)
    for (const Edge& e : *root)
      if (int v = e.visits.load(std::memory_order_relaxed); v > 0)
        candidates.push_back({uint16_t(e.move), uint16_t(std::min(v, 65535))});
  Edge* chosen = plies_ < s_.temperature_plies && mate_of(*best) <= 0 ? sample_by_visits(root) : best;
  play(chosen ? chosen->move : best->move, int16_t(winrate_to_cp(winrate)), std::move(candidates));
  return begin_turn();
}

// Moves with playouts, drawn with probability visits^(1/T); moves proven to lose are left out
// while any other is there.
Edge* Game::sample_by_visits(Node* root) {
  std::vector<Edge*> edges;
  std::vector<double> weights;
  for (bool allow_lost : {false, true}) {
    for (Edge& e : *root) {
      const int v = e.visits.load(std::memory_order_relaxed);
      if (v > 0 && (allow_lost || mate_of(e) >= 0)) {
        edges.push_back(&e);
        weights.push_back(std::pow(double(v), 1.0 / s_.temperature));
      }
    }
    if (!edges.empty()) break;
  }
  if (edges.empty()) return nullptr;
  std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
  return edges[pick(rng_)];
}

void Game::add_noise(Node* root) {
  std::gamma_distribution<double> gamma(s_.dirichlet_alpha, 1.0);
  std::vector<double> noise(root->num_edges);
  double sum = 0;
  for (double& x : noise) sum += (x = gamma(rng_));
  if (sum <= 0) return;
  const float w = s_.dirichlet_weight;
  for (int i = 0; i < root->num_edges; ++i)
    root->edges[i].prior = (1.0f - w) * root->edges[i].prior + w * float(noise[i] / sum);
}

void Game::play(Move m, int16_t eval, std::vector<Hcpe3Candidate> candidates) {
  const bool target = !candidates.empty();
  record_.moves.push_back({m, eval, std::move(candidates)});
  counters_.moves.fetch_add(1, std::memory_order_relaxed);
  if (target) {
    ++positions_;
    counters_.positions.fetch_add(1, std::memory_order_relaxed);
  }
  pos_.do_move(m);
  advance_tree(m);
  ++plies_;
  turn_pending_ = true;
}

// Keeps the subtree of the move played when it can be searched from (expanded, not an end of the
// game inside the tree), and frees the rest.
void Game::advance_tree(Move m) {
  Node* keep = nullptr;
  if (tree_.root && tree_.root->ready())
    for (Edge& e : *tree_.root)
      if (e.move == m) {
        Node* child = e.child.load(std::memory_order_acquire);
        if (child && child->ready() && !child->terminal) {
          e.child.store(nullptr);
          keep = child;
        }
      }
  if (tree_.root) pool_.release(tree_.root);
  tree_.root = keep;
  searching_ = false;
}

void Game::end_game(EndKind kind, uint8_t result) {
  record_.result = result;
  finished_.record = std::move(record_);
  finished_.index = index_;
  finished_.end = kind;
  finished_.positions = positions_;
  finished_.resign_disabled = resign_disabled_;
  finished_.would_resign = would_resign_;
  abandon();
}

}  // namespace jiriki::selfplay
