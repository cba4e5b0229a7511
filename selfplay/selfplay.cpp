// The self-play run: evaluation queues per GPU, worker threads that own many games each, the
// record writer and the reports (see selfplay.h).
#include "selfplay/selfplay.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "common/cpus.h"
#include "engine/search/eval_queue.h"
#include "engine/search/playout.h"
#include "nn/model_file.h"
#include "selfplay/writer.h"

namespace jiriki::selfplay {

using Clock = std::chrono::steady_clock;

namespace {

// What every worker shares: the quota, the stop signal, the counters and the writer.
struct Shared {
  const SelfPlayConfig& config;
  Counters counters;
  RecordWriter writer;
  std::atomic<uint64_t> next_game{0};
  std::atomic<int64_t> started{0};  // games started (counters.games: those finished)
  std::atomic<bool> stop{false};
  std::atomic<int> workers_done{0};
  std::mutex error_mutex;
  std::string error;

  Shared(const SelfPlayConfig& c) : config(c), writer(c.out_dir, c.name, c.games_per_file, c.flush_seconds, c.csa) {}

  // The number of the next game to start, or false when the quota allows no new game.
  bool take_game(uint64_t& index) {
    if (stop.load(std::memory_order_relaxed)) return false;
    if (config.positions > 0 && !room_for_a_game()) return false;
    index = next_game.fetch_add(1, std::memory_order_relaxed);
    if (config.games > 0 && int64_t(index) >= config.games) return false;
    started.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // Under a --positions target: whether one more game fits. The games running when the target is
  // reached are finished, so a game starts only while the positions made and those the running games
  // are expected to add fall short of it. When the estimate was long, idle games start again
  // (Worker::loop).
  bool room_for_a_game() const {
    const int64_t made = counters.positions.load(std::memory_order_relaxed);
    if (made >= config.positions) return false;
    const int64_t finished = counters.games.load(), recorded = counters.recorded_positions.load();
    const int64_t running = started.load() - finished;
    return double(made) + expected_remaining_positions(finished, recorded, counters.recorded_positions_squared.load(),
                                                       running, made - recorded, expected_positions_per_game(config)) <
           double(config.positions);
  }

  void finished(FinishedGame g) {
    counters.games.fetch_add(1);
    counters.recorded_positions.fetch_add(g.positions);
    counters.recorded_positions_squared.fetch_add(int64_t(g.positions) * g.positions);
    counters.winners[g.record.winner()].fetch_add(1);
    counters.ends[size_t(g.end)].fetch_add(1);
    if (g.resign_disabled) {
      counters.no_resign_games.fetch_add(1);
      if (g.would_resign) {
        counters.would_resign.fetch_add(1);
        const GameResult loss = *g.would_resign == BLACK ? WHITE_WIN : BLACK_WIN;
        if (g.record.winner() != loss) counters.false_resign.fetch_add(1);
      }
    }
    writer.add(std::move(g.record));
  }

  void fail(const std::string& what) {
    std::lock_guard lock(error_mutex);
    if (error.empty()) error = what;
    stop = true;
  }
};

// One worker thread: its games, their node pool and the batch they fill together.
struct Worker {
  search::EvalQueue& queue;
  search::NodePool pool;
  std::vector<std::unique_ptr<Game>> games;
  search::LeafBatch lb;

  Worker(search::EvalQueue& q, size_t pool_bytes, int num_games, int batch, Shared& shared)
      : queue(q), pool(pool_bytes), lb(batch) {
    for (int i = 0; i < num_games; ++i)
      games.push_back(std::make_unique<Game>(shared.config.game, pool, shared.counters));
  }

  void run(Shared& shared) {
    try {
      loop(shared);
    } catch (const std::exception& e) {
      shared.fail(e.what());
    }
    for (auto& g : games) g->abandon();
    shared.workers_done.fetch_add(1);
  }

  void loop(Shared& shared) {
    for (auto& g : games)
      if (uint64_t index; shared.take_game(index)) g->start(index);
    const size_t n = games.size();
    size_t cursor = 0;
    while (!shared.stop.load(std::memory_order_relaxed)) {
      lb.clear();
      // Round robin from where the last batch stopped, so that every game gets its turn.
      for (size_t visited = 0; visited < n && !lb.batch.full(); ++visited) {
        Game& g = *games[cursor];
        cursor = (cursor + 1) % n;
        // A game left idle when the positions looked enough starts when they turn out short.
        if (uint64_t index; !g.active() && shared.take_game(index)) g.start(index);
        while (g.active() && !lb.batch.full() && g.step(lb) == Game::Progress::FINISHED) {
          shared.finished(g.take_finished());
          if (uint64_t index; shared.take_game(index)) g.start(index);
        }
      }
      if (lb.batch.size() > 0) {
        try {
          queue.evaluate(lb.batch);
        } catch (...) {
          search::fail_batch(lb);
          throw;
        }
        search::finish_batch(lb);
      } else if (std::none_of(games.begin(), games.end(), [](const auto& g) { return g->active(); })) {
        return;  // the quota is met and every game of this worker is over
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the node pool is spent: wait for frees
      }
    }
  }
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

double expected_positions_per_game(const SelfPlayConfig& c) {
  // (80 plies with resignation at 5%.)
  return 100.0 * (c.game.full_playouts > 0 ? c.game.full_probability : 1.0);
}

double expected_remaining_positions(int64_t finished, int64_t recorded, int64_t recorded_squared, int64_t running,
                                    int64_t running_positions, double usual_game) {
  if (running <= 0) return 0.0;
  // A game caught running is more likely a long one: the length it is expected to reach is the
  // finished games' E[L²]/E[L], not their mean E[L] (which left 20% over the target with 3,840 games
  // at once on an H200). Never less than the usual game while fewer have finished than run: the
  // short ones finish first.
  double length = recorded > 0 ? double(recorded_squared) / double(recorded) : 0.0;
  if (finished < running) length = std::max(length, usual_game);
  const double progress = double(running_positions) / double(running);  // on average, so far
  return double(running) * std::max(length - progress, length / 2);
}

int auto_concurrent(const SelfPlayConfig& c) {
  // A game adds leaves_per_step leaves to a batch; a quarter more games than a batch holds keeps
  // batches full while some games are between moves.
  const int batch = c.network.batch();
  const int per_worker = (batch * 5 / 4 + c.game.leaves_per_step - 1) / std::max(c.game.leaves_per_step, 1);
  const int full = std::max(per_worker, 1) * std::max(c.threads, 1);
  // The games running when a --positions target is reached are finished, so thousands at once
  // would overshoot a small target many times over: one game at once per game's worth of the target.
  // (Counting 100 positions a game under the playout cap ran a quarter of the games: calls of 58
  // positions on an H200 where 166 made 1.43x the moves, docs/performance.md.)
  if (c.positions > 0) {
    const double per_game = expected_positions_per_game(c);
    return int(
        std::clamp<int64_t>(int64_t(double(c.positions) / std::max(per_game, 1.0)), std::max(c.threads, 1), full));
  }
  return full;
}

SelfPlayResult run_selfplay(const SelfPlayConfig& config, const std::atomic<bool>& stop, std::ostream& log) {
  const int batch = config.network.batch();
  if (config.threads < 1 || config.network.evaluators() < 1 || batch < 1 || config.gpus.empty())
    throw std::invalid_argument("threads, evaluators, batch and gpus must be positive");
  const int concurrent = config.concurrent > 0 ? config.concurrent : auto_concurrent(config);
  if (concurrent < config.threads) throw std::invalid_argument("fewer games than worker threads per GPU");
  const int workers_total = config.threads * int(config.gpus.size());
  const size_t hash =
      config.hash_bytes > 0 ? config.hash_bytes : size_t(concurrent) * config.gpus.size() * (size_t(8) << 20);

  const nn::Model model = config.network.load_model();
  std::vector<std::unique_ptr<search::EvalQueue>> queues;
  for (int gpu : config.gpus) {
    engine::NetworkSetup on = config.network;
    on.settings.gpu = gpu;
    // CPU backends: the cores the workers leave, shared by the evaluators (OpenMP teams that spin
    // against the workers on the same cores run many times slower).
    on.settings.cpu_cores = std::max(1, (usable_cpus().count - workers_total) / int(config.gpus.size()));
    queues.push_back(on.make_queue(model, config.threads));  // each worker thread calls it
  }
  log << "selfplay: " << config.network.settings.model << ", " << queues[0]->name() << " on " << config.gpus.size()
      << (config.network.on_gpu() ? " GPU(s)" : " queue") << ", batch " << batch << ", " << config.threads
      << " worker threads and " << concurrent << " games per queue, ";
  if (config.game.full_playouts > 0)
    log << config.game.full_playouts << " playouts with probability " << config.game.full_probability << ", else ";
  log << config.game.playouts << " playouts per move" << std::endl;

  Shared shared(config);
  std::vector<std::unique_ptr<Worker>> workers;
  for (size_t q = 0; q < queues.size(); ++q)
    for (int t = 0; t < config.threads; ++t) {
      const int games = concurrent / config.threads + (t < concurrent % config.threads);
      workers.push_back(std::make_unique<Worker>(*queues[q], hash / workers_total, games, batch, shared));
    }
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (auto& w : workers) threads.emplace_back([&shared, &w] { w->run(shared); });

  std::ofstream stats_file(config.out_dir + "/" + config.name + ".stats.jsonl", std::ios::app);
  auto take_snapshot = [&] {
    int64_t calls = 0, positions = 0, capacity = 0;
    for (const auto& q : queues) {
      const search::EvalQueue::Stats s = q->stats();
      calls += s.calls;
      positions += s.positions;
      capacity += s.calls * q->max_batch();
    }
    return snapshot(shared.counters, seconds_since(start), calls, positions, capacity);
  };
  auto report = [&](const Snapshot& now, const Snapshot& prev) {
    log << progress_line(now, prev) << std::endl;
    stats_file << stats_json(now, prev) << "\n" << std::flush;
  };

  // Files are written on a thread of their own: each is fsynced, and a slow disk must not hold up
  // the clock of --seconds, the stop signal or the reports, which this thread keeps.
  std::atomic<bool> writing{true};
  std::thread writer([&shared, &writing] {
    try {
      for (; writing.load(); std::this_thread::sleep_for(std::chrono::milliseconds(20))) shared.writer.write_due();
    } catch (const std::exception& e) {
      shared.fail(e.what());  // the games stay queued: the final flush tries them once more
    }
  });

  SelfPlayResult result;
  Snapshot last = take_snapshot();
  while (shared.workers_done.load() < int(workers.size())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!shared.stop.load() && (stop.load() || (config.seconds > 0 && seconds_since(start) >= config.seconds))) {
      result.stopped = true;
      shared.stop = true;
    }
    if (seconds_since(start) - last.seconds >= config.report_seconds) {
      Snapshot now = take_snapshot();
      report(now, last);
      last = now;
    }
  }
  for (auto& t : threads) t.join();
  writing = false;
  writer.join();
  try {
    shared.writer.flush();
  } catch (const std::exception& e) {
    shared.fail(e.what());
  }
  Snapshot now = take_snapshot();
  report(now, last);
  result.totals = now;
  result.files = shared.writer.files_written();
  result.games_written = shared.writer.games_written();
  result.error = shared.error;
  return result;
}

}  // namespace jiriki::selfplay
