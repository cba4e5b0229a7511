// The in-process arena: games of two search trees each, stepped by worker threads that batch the
// leaves of all their games per network (see arena.h).
#include "match/arena.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <thread>

#include "common/cpus.h"
#include "common/platform.h"
#include "engine/mate.h"
#include "engine/network_setup.h"
#include "engine/search/eval_queue.h"
#include "engine/search/playout.h"
#include "nn/model_file.h"
#include "shogi/movegen.h"

namespace jiriki::match {

using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t TREE_BYTES = size_t(256) << 20;  // each tree's share of its worker's node pool

bool iequals(const std::string& a, const char* b) {
  size_t i = 0;
  for (; i < a.size() && b[i]; ++i)
    if (std::tolower((unsigned char)a[i]) != std::tolower((unsigned char)b[i])) return false;
  return i == a.size() && !b[i];
}

// What every worker shares.
struct Shared {
  const TournamentConfig& config;
  const std::vector<ArenaEngine>& engines;
  const std::vector<bool>& unloaded;  // by engine: its network could not be loaded, so it resigns
  Schedule& schedule;
  bool usi(int engine) const { return config.engines[engine].model.empty(); }  // a USI engine process
};

// One game between two engines' trees, stepped without ever blocking (as selfplay/game.h steps a
// self-play game): step() plays as far as it can without the network and leaves the next batch of
// leaves of the side to move in that engine's LeafBatch.
class ArenaGame {
 public:
  // `slot`: the game slot among all the arena's games at once, whose USI engine processes this game
  // keeps from game to game, confined to `cpus` when not empty (--cpus-per-game).
  ArenaGame(const Shared& shared, search::NodePool& pool, MateSolver& solver, int slot, std::vector<int> cpus)
      : s_(shared), solver_(solver), slot_(slot), cpus_(std::move(cpus)) {
    for (auto& side : sides_) side.tree.pool = &pool;
    settings_ = s_.config.game;
    settings_.interrupt = stop_flag();
  }
  ~ArenaGame() { drop(); }
  ArenaGame(const ArenaGame&) = delete;
  ArenaGame& operator=(const ArenaGame&) = delete;

  bool active() const { return active_; }
  const Schedule::Job& job() const { return job_; }
  const PlayedGame& played() const { return game_; }

  // Starts `job` from its opening, as play_game does; false when a USI engine of it cannot be made
  // ready (the schedule then fails, or the runner stops).
  bool start(const Schedule::Job& job) {
    drop();
    for (int engine : {job.black, job.white})
      if (s_.usi(engine) && !ready_engine(processes_[engine], s_.config, s_.schedule, engine, slot_, cpus_))
        return false;
    job_ = job;
    game_ = PlayedGame{};
    clock_ = GameClock(s_.config.game.tc);
    const Opening& opening = s_.schedule.opening(job);
    pos_.set_sfen(opening.sfen);  // checked when the openings were made
    game_.record.start = pos_;
    rules_ = s_.config.game.rules.counted_from(pos_);  // a game's plies count from its start, as play_game's
    game_.record.black = s_.config.engines[job.black].name;
    game_.record.white = s_.config.engines[job.white].name;
    play_opening(pos_, game_, opening);
    for (Color c : {BLACK, WHITE}) {
      const int engine = c == BLACK ? job.black : job.white;
      sides_[c].engine = engine;
      sides_[c].tree.params = &s_.engines[engine].params;
      const int64_t own = s_.config.engines[engine].nodes;
      sides_[c].nodes = own > 0 ? own : s_.config.game.tc.nodes;
      if (s_.usi(engine)) processes_[engine]->send("usinewgame");
    }
    phase_ = Phase::TURN;
    active_ = true;
    return true;
  }

  // Drops the game (finished, or the match stops); no leaf of it may be in flight. A USI engine's
  // move in flight is waited for (it ends at once when the runner is told to stop).
  void drop() {
    if (usi_answer_.valid()) usi_answer_.wait();
    usi_answer_ = {};
    for (auto& side : sides_) {
      if (side.tree.root) side.tree.pool->release(side.tree.root);
      side.tree.root = nullptr;
    }
    active_ = false;
  }

  enum class Progress { RUNNING, FINISHED };
  // Advances the game; `batches` are the worker's, by engine index, and whatever it queued there
  // before must have been evaluated and landed. FINISHED: played() holds the game, now inactive.
  Progress step(std::vector<search::LeafBatch>& batches) {
    for (;;) {
      if (phase_ == Phase::USI) {
        if (usi_answer_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return Progress::RUNNING;
        if (take_usi_answer()) return Progress::FINISHED;
        continue;
      }
      if (phase_ == Phase::STOPPED) return Progress::RUNNING;  // the match stops: the worker drops it
      if (phase_ == Phase::TURN) {
        if (begin_turn()) return Progress::FINISHED;
        continue;
      }
      if (phase_ == Phase::DECIDE) {
        if (decide()) return Progress::FINISHED;
        continue;
      }
      Side& side = sides_[pos_.side_to_move()];
      search::LeafBatch& lb = batches[side.engine];
      if (phase_ == Phase::ROOT) {
        // A spent pool (other games' trees) is waited out: their moves release memory.
        if (lb.batch.full() || !search::queue_root(side.tree, pos_, lb)) return Progress::RUNNING;
        phase_ = Phase::SEARCH;
        return Progress::RUNNING;
      }
      const int batch = side.tree.params->batch_size;
      if (lb.batch.capacity() - lb.batch.size() < batch) return Progress::RUNNING;  // the next round
      if (add_leaves(side, lb, batch) > 0) return Progress::RUNNING;
    }
  }

 private:
  enum class Phase { TURN, ROOT, SEARCH, DECIDE, USI, STOPPED };
  struct Side {
    search::Tree tree;
    int engine = 0;
    int64_t nodes = 0;      // playout attempts a move (a USI engine: its go nodes)
    size_t tree_moves = 0;  // the game's moves (the opening's included) up to the tree's root
    int64_t reserved = 0;   // playout attempts of the search in progress
  };

  const ArenaEngine& engine(Color c) const { return s_.engines[sides_[c].engine]; }

  // The start of a turn, as the engine answers `go`: the score adjudication, the answers without
  // a search (a declaration, the root's own mate), else the tree moved to this position.
  bool begin_turn() {
    const Color us = pos_.side_to_move();
    started_ = Clock::now();
    if (Verdict v = scores_verdict(game_.scores, us, s_.config.game.scores); v.over) return end(v);
    if (s_.usi(sides_[us].engine)) {
      ask_usi_engine();
      return false;
    }
    const ArenaEngine& e = engine(us);
    if (s_.unloaded[sides_[us].engine]) return answer("resign", std::nullopt, std::nullopt);  // as the USI engine does
    if (pos_.declaration_win(e.params.rules.entering_king_rule)) return answer("win", std::nullopt, std::nullopt);
    if (e.params.root_mate_search && e.root_mate_nodes > 0) {
      MateLimits ml;
      ml.max_nodes = e.root_mate_nodes;
      const MateResult m = solver_.solve(pos_, ml);
      if (m.status == MateResult::MATE && !m.pv.empty())
        return answer(move_to_usi(m.pv[0]), MATE_SCORE - int(m.pv.size()), std::nullopt);
    }
    prepare_root(sides_[us]);
    return false;
  }

  // Keeps the subtree of the position to search when the tree's root leads to it (the engine's
  // own last move and the reply), as Searcher::prepare_root does; else a new root is needed.
  void prepare_root(Side& side) {
    search::Tree& tree = side.tree;
    const Color us = pos_.side_to_move();
    const auto& moves = game_.record.moves;
    const search::SearchParams& p = *tree.params;
    search::Node* keep =
        tree.root && !(p.draw_value_black != p.draw_value_white && us != tree.engine) ? tree.root : nullptr;
    search::Edge* keep_edge = nullptr;
    for (size_t i = side.tree_moves; i < moves.size() && keep; ++i) {
      keep_edge = nullptr;
      if (keep->ready())
        for (search::Edge& e : *keep)
          if (e.move == moves[i]) keep_edge = &e;
      keep = keep_edge ? keep_edge->child.load() : nullptr;
    }
    if (keep && (keep->terminal || !keep->ready())) keep = nullptr;
    if (keep != tree.root) {
      if (keep) keep_edge->child.store(nullptr);  // detach before the rest goes
      if (tree.root) tree.pool->release(tree.root);
      tree.root = keep;
    }
    side.tree_moves = moves.size();
    tree.engine = us;
    tree.playouts = 0;
    tree.seldepth = 0;
    side.reserved = 0;
    phase_ = tree.root ? Phase::SEARCH : Phase::ROOT;
  }

  // One batch of new leaves, collected as a search thread of the engine collects one
  // (Searcher::worker_loop): until `batch` leaves, more than batch / 2 collisions or 4 batch + 16
  // attempts; each attempt reserves one of the move's playouts. The last batch (playouts spent,
  // the root proven, the pool spent) moves the game on to its decision.
  int add_leaves(Side& side, search::LeafBatch& lb, int batch) {
    search::Tree& tree = side.tree;
    const int before = lb.batch.size();
    int collisions = 0;
    bool last = false;
    for (int attempts = 0; lb.batch.size() - before < batch && collisions <= batch / 2 && attempts < 4 * batch + 16;
         ++attempts) {
      if (tree.root->outcome() != search::Outcome::UNKNOWN || side.reserved++ >= side.nodes) {
        last = true;
        break;
      }
      const search::PlayoutEnd end = search::run_playout(tree, pos_, lb);
      if (end == search::PlayoutEnd::COLLISION) ++collisions;
      if (end == search::PlayoutEnd::FULL) {
        last = true;
        break;
      }
    }
    if (last) phase_ = Phase::DECIDE;
    return lb.batch.size() - before;
  }

  // The engine's decision after its search (Searcher::check_decision, then decide): the move it
  // prefers, turned away from moves the opponent's df-pn mate refutes; resignation below the
  // engine's resign value.
  bool decide() {
    const Color us = pos_.side_to_move();
    search::Tree& tree = sides_[us].tree;
    const ArenaEngine& e = engine(us);
    const int64_t nodes = tree.playouts.load();
    if (e.params.root_mate_search && e.params.root_threat_search && e.threat_mate_nodes > 0) {
      std::vector<Move> checked;
      for (int i = 0; i < 8; ++i) {
        search::Edge* best = search::most_visited(tree.root);
        if (!best || search::mate_of(*best) != 0) break;
        search::Node* c = best->child.load(std::memory_order_acquire);
        if (!c || !c->ready() || c->terminal || std::count(checked.begin(), checked.end(), best->move)) break;
        checked.push_back(best->move);
        Position after = pos_;
        after.do_move(best->move);
        MateLimits ml;
        ml.max_nodes = e.threat_mate_nodes;
        ml.shorten_nodes = 0;  // any mate will do
        const MateResult m = solver_.solve(after, ml);
        if (m.status != MateResult::MATE || m.pv.empty()) break;
        c->set_outcome(search::Outcome::WIN, int(m.pv.size()));
      }
    }
    // The first of the root's moves in preference order, as the engine's info lines sort them.
    const search::Edge* best = nullptr;
    for (const search::Edge& edge : *tree.root)
      if (!best || search::preference(edge) > search::preference(*best)) best = &edge;
    if (!best) return answer("resign", std::nullopt, nodes);
    const int visits = best->visits.load();
    const int mate = search::mate_of(*best);
    float winrate = visits > 0 ? float(best->value_sum.load() / visits) : 0.5f;
    if (mate != 0) winrate = mate > 0 ? 1.0f : 0.0f;
    const int score = mate > 0 ? MATE_SCORE - mate : mate < 0 ? -(MATE_SCORE + mate) : search::winrate_to_cp(winrate);
    if (mate <= 0 && winrate < e.params.resign_value) return answer("resign", score, nodes);
    return answer(move_to_usi(best->move), score, nodes);
  }

  // The side to move's USI engine asked for its move (position and go, as play_game sends them), on
  // a thread of its own: the worker goes on with its other games meanwhile.
  void ask_usi_engine() {
    const Color us = pos_.side_to_move();
    const Opening& opening = s_.schedule.opening(job_);
    std::string position = opening.sfen == "startpos" ? "position startpos" : "position sfen " + opening.sfen;
    if (!game_.record.moves.empty()) position += " moves";
    for (Move m : game_.record.moves) position += " " + move_to_usi(m);
    const std::string go = clock_.go(sides_[us].nodes);
    const int64_t limit_ms = clock_.limit_ms(us, settings_.timeout_ms);
    EngineProcess* process = processes_[sides_[us].engine].get();
    usi_answer_ = std::async(std::launch::async, [process, position, go, limit_ms, this] {
      return ask_move(*process, position, go, limit_ms, clock_.clocked(), settings_);
    });
    phase_ = Phase::USI;
  }

  // The USI engine's answer, on the clock, to the referee; true when the game is over.
  bool take_usi_answer() {
    const UsiAnswer a = usi_answer_.get();
    const Color us = pos_.side_to_move();
    if (a.kind == UsiAnswer::INTERRUPTED) {
      phase_ = Phase::STOPPED;
      return false;
    }
    if (a.kind != UsiAnswer::BESTMOVE) {
      if (a.failed()) {
        game_.failed[us] = true;
        processes_[sides_[us].engine].reset();  // started afresh for the slot's next game
      }
      return end(failed_answer_verdict(a, us, clock_.clocked()));
    }
    if (!clock_.charge(us, a.elapsed_ms, settings_.margin_ms)) {
      record_stats(a.elapsed_ms, a.nodes);
      return end(Verdict::loss(us, GameEnd::TIME_UP, "time forfeit"));
    }
    return answer(a.move, a.score, a.nodes, a.elapsed_ms);
  }

  void record_stats(int64_t elapsed, std::optional<int64_t> nodes) {
    game_.search[pos_.side_to_move()].record(elapsed, nodes);
  }

  // The engine's answer (a move, "resign" or "win") to the referee, as play_game hands it over;
  // no `nodes` for an answer without a tree search; `elapsed_ms` < 0: the time since the turn began.
  bool answer(const std::string& text, std::optional<int> score, std::optional<int64_t> nodes,
              int64_t elapsed_ms = -1) {
    const int64_t elapsed =
        elapsed_ms >= 0 ? elapsed_ms
                        : std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_).count();
    record_stats(elapsed, nodes);
    Move m = MOVE_NONE;
    if (Verdict v = answer_verdict(pos_, text, rules_, m); v.over) return end(v);
    pos_.do_move(m);
    game_.record.add_move(m, int(elapsed / 1000));
    game_.record.comments.push_back(move_comment(score, elapsed));
    game_.move_ms.push_back(elapsed);
    game_.scores.push_back(score);
    phase_ = Phase::TURN;
    return end(ending_verdict(judge_position(pos_, rules_), pos_.side_to_move()));
  }

  // Ends the game when the verdict says it is over, telling its USI engines how it ended.
  bool end(const Verdict& v) {
    if (!v.over) return false;
    game_.verdict = v;
    game_.record.end = v.end;
    for (Color c : {BLACK, WHITE})
      if (auto p = processes_.find(sides_[c].engine); p != processes_.end() && p->second && !game_.failed[c])
        p->second->send(!v.winner ? "gameover draw" : *v.winner == c ? "gameover win" : "gameover lose");
    drop();
    return true;
  }

  const Shared& s_;
  MateSolver& solver_;
  const int slot_;
  const std::vector<int> cpus_;
  GameSettings settings_;                                    // the match's, with the runner's stop as the interrupt
  std::map<int, std::unique_ptr<EngineProcess>> processes_;  // by engine index: the USI engines of the slot
  std::future<UsiAnswer> usi_answer_;                        // the USI engine's move in flight
  GameClock clock_{TimeControl{}};                           // the USI engines' clocks
  Side sides_[COLOR_NB];
  Schedule::Job job_;
  PlayedGame game_;
  Position pos_;
  GameRules rules_;  // the referee's: the ply limit counted from the game's start position
  Phase phase_ = Phase::TURN;
  bool active_ = false;
  Clock::time_point started_;  // when the side to move began its turn
};

// A worker thread: its games, the node pool and df-pn solver they share, and one batch per
// network, evaluated on its GPU's queue of that network.
class Worker {
 public:
  // Its games are the game slots first_slot, first_slot + 1, ... (their USI engines' CPUs from
  // `allowed` under --cpus-per-game).
  Worker(const Shared& shared, int id, std::vector<search::EvalQueue*> queues, int games, int batch, int first_slot,
         const std::vector<int>& allowed)
      : s_(shared), id_(id), queues_(std::move(queues)), pool_(size_t(games) * 2 * TREE_BYTES) {
    for (size_t e = 0; e < queues_.size(); ++e) batches_.emplace_back(batch);
    pending_.resize(queues_.size());
    for (int i = 0; i < games; ++i)
      games_.push_back(std::make_unique<ArenaGame>(s_, pool_, solver_, first_slot + i,
                                                   cpus_for_slot(allowed, s_.config.cpus_per_game, first_slot + i)));
  }

  void run() {
    try {
      loop();
    } catch (const std::exception& e) {
      s_.schedule.fail(e.what());
    }
    for (auto& g : games_) g->drop();
  }

 private:
  void loop() {
    size_t cursor = 0;
    const size_t n = games_.size();
    while (!s_.schedule.stopping()) {  // when it stops, the games in progress are dropped
      for (auto& lb : batches_) lb.clear();
      bool any = false;
      // From where the last round began, so that a full batch does not always leave out the same games.
      for (size_t k = 0; k < n; ++k) {
        ArenaGame& g = *games_[(cursor + k) % n];
        for (;;) {
          if (!g.active()) {
            Schedule::Job job;
            if (!s_.schedule.next(job)) break;
            if (!g.start(job)) return;  // a USI engine that cannot start: the schedule has failed
          }
          any = true;
          if (g.step(batches_) == ArenaGame::Progress::RUNNING) break;
          s_.schedule.finish(g.job(), id_, g.played());
        }
      }
      cursor = (cursor + 1) % n;
      if (!any) return;  // no game left to play
      // Every network's batch in its queue at once, then the answers: the GPU works on them together.
      bool queued = false;
      for (size_t e = 0; e < batches_.size(); ++e)
        if (batches_[e].batch.size() > 0) {
          queues_[e]->submit(batches_[e].batch, pending_[e]);
          queued = true;
        }
      std::exception_ptr error;
      for (size_t e = 0; e < batches_.size(); ++e)
        if (batches_[e].batch.size() > 0) {
          try {
            queues_[e]->wait(pending_[e]);
          } catch (...) {
            if (!error) error = std::current_exception();
          }
        }
      if (error) {
        for (auto& lb : batches_) search::fail_batch(lb);
        std::rethrow_exception(error);
      }
      for (auto& lb : batches_)
        if (lb.batch.size() > 0) search::finish_batch(lb);
      // Nothing for the network: the pool is spent (wait for frees) or the games wait on USI engines.
      if (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  const Shared& s_;
  int id_;
  std::vector<search::EvalQueue*> queues_;  // by engine index
  search::NodePool pool_;
  MateSolver solver_;
  std::vector<search::LeafBatch> batches_;           // by engine index
  std::vector<search::EvalQueue::Pending> pending_;  // by engine index
  std::vector<std::unique_ptr<ArenaGame>> games_;
};

}  // namespace

std::optional<std::string> arena_engine(const EngineSpec& spec, nn::BackendKind backend, ArenaEngine& out) {
  const bool gpu = backend == nn::BackendKind::CUDA;
  ArenaEngine a;
  search::SearchParams& p = a.params;
  p.threads = 1;
  p.batch_size = gpu ? 32 : 16;
  p.leaf_mate_plies = gpu ? 1 : 3;  // the engine's LeafMateSearchPly auto
  p.root_mate_search = true;
  p.root_threat_search = true;
  for (const auto& [name, value] : spec.options) {
    const std::string where = spec.name + ": option." + name + "=" + value;
    auto number = [&](int64_t lo, int64_t hi) -> std::optional<int64_t> {
      size_t used = 0;
      int64_t v = 0;
      try {
        v = std::stoll(value, &used);
      } catch (const std::exception&) {
        return std::nullopt;
      }
      if (used != value.size() || v < lo || v > hi) return std::nullopt;
      return v;
    };
    auto flag = [&]() -> std::optional<bool> {
      if (value == "true" || value == "false") return value == "true";
      return std::nullopt;
    };
    // What shapes a USI engine's process or its clock, not its play at a node limit.
    bool ignored = false;
    for (const char* o : {"Threads", "USI_Hash", "USI_Ponder", "MultiPV", "PV_Interval", "NetworkDelay",
                          "NetworkDelay2", "MinimumThinkingTime", "SlowMover"})
      ignored = ignored || iequals(name, o);
    if (ignored) continue;
    std::optional<int64_t> v;
    std::optional<bool> f;
    if (iequals(name, "C_init") && (v = number(0, 10000))) p.c_init = float(*v) / 100.0f;
    else if (iequals(name, "C_base") && (v = number(1, 100000000))) p.c_base = float(*v);
    else if (iequals(name, "C_fpu_reduction") && (v = number(0, 100))) p.fpu_reduction = float(*v) / 100.0f;
    else if (iequals(name, "C_fpu_reduction_root") && (v = number(0, 100))) p.fpu_reduction_root = float(*v) / 100.0f;
    else if (iequals(name, "Softmax_Temperature") && (v = number(1, 10000))) p.softmax_temperature = float(*v) / 100.0f;
    else if (iequals(name, "DrawValueBlack") && (v = number(0, 1000))) p.draw_value_black = float(*v) / 1000.0f;
    else if (iequals(name, "DrawValueWhite") && (v = number(0, 1000))) p.draw_value_white = float(*v) / 1000.0f;
    else if (iequals(name, "MaxMovesToDraw") && (v = number(0, 100000))) p.rules.max_plies = int(*v);
    else if (iequals(name, "BatchSize") && (v = number(1, 1024))) p.batch_size = int(*v);
    else if (iequals(name, "RootMateSearch") && (f = flag())) p.root_mate_search = *f;
    else if (iequals(name, "RootThreatSearch") && (f = flag())) p.root_threat_search = *f;
    else if (iequals(name, "Resign_Threshold") && (v = number(0, 1000)))
      p.resign_value = std::max(p.resign_value, float(*v) / 1000.0f);
    else if (iequals(name, "ResignValue") && (v = number(0, 99999)))
      p.resign_value = std::max(p.resign_value, 1.0f / (1.0f + std::exp(float(*v) / 756.0f)));
    else if (iequals(name, "LeafMateSearchPly") &&
             (value == "auto" || value == "0" || value == "1" || value == "3" || value == "5")) {
      if (value != "auto") p.leaf_mate_plies = std::stoi(value);
    } else if (iequals(name, "EnteringKingRule") &&
               (value == "NoEnteringKing" || value == "CSARule27" || value == "CSARule24")) {
      p.rules.entering_king_rule = value == "NoEnteringKing" ? EnteringKingRule::NONE
                                   : value == "CSARule24"    ? EnteringKingRule::POINT24
                                                             : EnteringKingRule::POINT27;
    } else {
      return where + ": not a search option the arena takes, or a bad value (arena.h lists them)";
    }
  }
  out = a;
  return std::nullopt;
}

bool any_network(const TournamentConfig& config) {
  return std::any_of(config.engines.begin(), config.engines.end(),
                     [](const EngineSpec& e) { return !e.model.empty(); });
}

std::optional<std::string> network_nodes_error(const TournamentConfig& config) {
  for (const auto& e : config.engines)
    if (!e.model.empty() && e.nodes <= 0 && config.game.tc.nodes <= 0)
      return e.name + ": a network (model=PATH) plays at a node count: nodes=N in its spec, or --tc nodes=N";
  return std::nullopt;
}

TournamentResult run_arena(const TournamentConfig& config, const ArenaSettings& settings) {
  if (!any_network(config) || config.engines.size() < 2)
    throw std::invalid_argument("the arena plays two or more engines, at least one a network (model=PATH)");
  if (auto err = network_nodes_error(config)) throw std::invalid_argument(*err);
  if (settings.gpus.empty() || settings.evaluators < 1 || settings.threads < 0 || settings.batch < 0)
    throw std::invalid_argument("the arena needs GPUs, evaluators >= 1, threads >= 0 and batch >= 0");
  const bool gpu = settings.backend == nn::BackendKind::CUDA;
  std::vector<ArenaEngine> engines(config.engines.size());
  int leaves = 1;  // the largest batch of leaves one search step adds
  for (size_t i = 0; i < engines.size(); ++i) {
    if (config.engines[i].model.empty()) continue;  // a USI engine process
    if (auto err = arena_engine(config.engines[i], settings.backend, engines[i])) throw std::invalid_argument(*err);
    leaves = std::max(leaves, engines[i].params.batch_size);
  }

  const int per_gpu = settings.threads > 0 ? settings.threads : gpu ? 16 : 1;
  const int total_games = std::max(1, config.concurrency);
  const int workers_total = std::min<int>(per_gpu * int(settings.gpus.size()), total_games);
  const int call_limit = std::max(leaves, settings.batch > 0 ? settings.batch : gpu ? 512 : 64);
  // Each worker's share of the games at once, and its batches: room for every game's leaves up to
  // the call limit.
  std::vector<int> games(workers_total);
  for (int w = 0; w < workers_total; ++w) games[w] = total_games / workers_total + (w < total_games % workers_total);
  const int batch = std::min(call_limit, games[0] * leaves);

  // A network that cannot be loaded resigns every move, as the USI engine does (a spoiled candidate
  // loses its gate instead of stopping the loop); the match says why.
  std::vector<std::optional<nn::Model>> models;
  std::vector<bool> unloaded;
  for (const auto& e : config.engines) {
    if (e.model.empty()) {  // a USI engine process: no network, no queue
      models.push_back(std::nullopt);
      unloaded.push_back(false);
      continue;
    }
    try {
      models.push_back(nn::load_model(e.model));
      unloaded.push_back(false);
    } catch (const std::exception& err) {
      std::cerr << "warning: " << e.name << ": cannot load the network (" << err.what() << "): it resigns every game\n";
      models.push_back(std::nullopt);
      unloaded.push_back(true);
    }
  }
  // queues[gpu][engine]; a CPU backend shares the cores the workers leave between its evaluators.
  std::vector<std::vector<std::unique_ptr<search::EvalQueue>>> queues(settings.gpus.size());
  const int networks = int(std::count_if(models.begin(), models.end(), [](const auto& m) { return m.has_value(); }));
  const int evaluators_total = settings.evaluators * std::max(1, networks) * int(settings.gpus.size());
  engine::NetworkSettings network;
  network.backend = nn::backend_kind_name(settings.backend);
  network.batch = batch;
  network.evaluators = settings.evaluators;
  network.cpu_threads = std::max(1, (usable_cpus().count - workers_total) / evaluators_total);
  network.precision = settings.precision;
  network.cuda = settings.cuda;
  engine::NetworkSetup setup = engine::NetworkSetup::resolve(network);  // (a backend named: taken as asked)
  for (size_t g = 0; g < settings.gpus.size(); ++g) {
    setup.settings.gpu = settings.gpus[g];
    for (const auto& model : models) {
      if (!model) {
        queues[g].push_back(nullptr);
        continue;
      }
      const int clients = (workers_total + int(settings.gpus.size()) - 1) / int(settings.gpus.size());
      queues[g].push_back(setup.make_queue(*model, clients));
      if (gpu) queues[g].back()->warm_up();
    }
  }

  TournamentResult result;
  Schedule schedule(config, result);
  const Shared shared{config, engines, unloaded, schedule};
  std::vector<std::unique_ptr<Worker>> workers;
  const std::vector<int> allowed = config.cpus_per_game > 0 ? affinity_cpus() : std::vector<int>();
  for (int w = 0, slot = 0; w < workers_total; slot += games[w], ++w) {
    std::vector<search::EvalQueue*> q;
    for (auto& queue : queues[w % settings.gpus.size()]) q.push_back(queue.get());
    workers.push_back(std::make_unique<Worker>(shared, w, std::move(q), games[w], batch, slot, allowed));
  }
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w] { w->run(); });
  for (auto& t : threads) t.join();
  schedule.done();
  return result;
}

}  // namespace jiriki::match
