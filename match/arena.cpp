// The in-process arena: games of two search trees each, stepped by worker threads that batch the
// leaves of all their games per network (see arena.h).
#include "match/arena.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <thread>

#include "common/cpus.h"
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
};

// One game between two engines' trees, stepped without ever blocking (as selfplay/game.h steps a
// self-play game): step() plays as far as it can without the network and leaves the next batch of
// leaves of the side to move in that engine's LeafBatch.
class ArenaGame {
 public:
  ArenaGame(const Shared& shared, search::NodePool& pool, MateSolver& solver) : s_(shared), solver_(solver) {
    for (auto& side : sides_) side.tree.pool = &pool;
  }
  ~ArenaGame() { drop(); }
  ArenaGame(const ArenaGame&) = delete;
  ArenaGame& operator=(const ArenaGame&) = delete;

  bool active() const { return active_; }
  const Schedule::Job& job() const { return job_; }
  const PlayedGame& played() const { return game_; }

  // Starts `job` from its opening, as play_game does.
  void start(const Schedule::Job& job) {
    drop();
    job_ = job;
    game_ = PlayedGame{};
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
    }
    phase_ = Phase::TURN;
    active_ = true;
  }

  // Drops the game (finished, or the match stops); nothing of it may be in flight.
  void drop() {
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
  enum class Phase { TURN, ROOT, SEARCH, DECIDE };
  struct Side {
    search::Tree tree;
    int engine = 0;
    int64_t nodes = 0;      // playout attempts a move
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
    const ArenaEngine& e = engine(us);
    if (s_.unloaded[sides_[us].engine]) return answer("resign", std::nullopt, -1);  // as the USI engine does
    if (pos_.declaration_win(e.params.rules.entering_king_rule)) return answer("win", std::nullopt, -1);
    if (e.params.root_mate_search && e.root_mate_nodes > 0) {
      MateLimits ml;
      ml.max_nodes = e.root_mate_nodes;
      const MateResult m = solver_.solve(pos_, ml);
      if (m.status == MateResult::MATE && !m.pv.empty())
        return answer(move_to_usi(m.pv[0]), MATE_SCORE - int(m.pv.size()), -1);
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

  // The engine's answer (a move, "resign" or "win") to the referee, as play_game hands it over;
  // `nodes` < 0 for an answer without a tree search.
  bool answer(const std::string& text, std::optional<int> score, int64_t nodes) {
    const Color us = pos_.side_to_move();
    const int64_t elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_).count();
    SearchStats& stats = game_.search[us];
    stats.moves++;
    stats.ms += elapsed;
    if (nodes >= 0) stats.counted++, stats.nodes += nodes, stats.nodes_ms += elapsed;
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

  // Ends the game when the verdict says it is over.
  bool end(const Verdict& v) {
    if (!v.over) return false;
    game_.verdict = v;
    game_.record.end = v.end;
    drop();
    return true;
  }

  const Shared& s_;
  MateSolver& solver_;
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
  Worker(const Shared& shared, int id, std::vector<search::EvalQueue*> queues, int games, int batch)
      : s_(shared), id_(id), queues_(std::move(queues)), pool_(size_t(games) * 2 * TREE_BYTES) {
    for (size_t e = 0; e < queues_.size(); ++e) batches_.emplace_back(batch);
    pending_.resize(queues_.size());
    for (int i = 0; i < games; ++i) games_.push_back(std::make_unique<ArenaGame>(s_, pool_, solver_));
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
            g.start(job);
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
      if (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the pool is spent: wait for frees
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

bool all_networks(const TournamentConfig& config) {
  return !config.engines.empty() && std::all_of(config.engines.begin(), config.engines.end(),
                                                [](const EngineSpec& e) { return !e.model.empty(); });
}

TournamentResult run_arena(const TournamentConfig& config, const ArenaSettings& settings) {
  if (!all_networks(config) || config.engines.size() < 2)
    throw std::invalid_argument("the arena plays networks (model=PATH) only, two or more");
  if (config.game.tc.nodes <= 0) throw std::invalid_argument("networks in one process play at --tc nodes=N only");
  if (settings.gpus.empty() || settings.evaluators < 1 || settings.threads < 0 || settings.batch < 0)
    throw std::invalid_argument("the arena needs GPUs, evaluators >= 1, threads >= 0 and batch >= 0");
  const bool gpu = settings.backend == nn::BackendKind::CUDA;
  std::vector<ArenaEngine> engines(config.engines.size());
  int leaves = 1;  // the largest batch of leaves one search step adds
  for (size_t i = 0; i < engines.size(); ++i) {
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
  const int evaluators_total = settings.evaluators * int(models.size() * settings.gpus.size());
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
  for (int w = 0; w < workers_total; ++w) {
    std::vector<search::EvalQueue*> q;
    for (auto& queue : queues[w % settings.gpus.size()]) q.push_back(queue.get());
    workers.push_back(std::make_unique<Worker>(shared, w, std::move(q), games[w], batch));
  }
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w] { w->run(); });
  for (auto& t : threads) t.join();
  schedule.done();
  return result;
}

}  // namespace jiriki::match
