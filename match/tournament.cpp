// Scheduling games over threads and keeping the score.
#include "match/tournament.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

namespace jiriki::match {

namespace {

std::atomic<bool> stop_requested{false};

struct Job {
  int pairing;
  int64_t pair;    // index of the opening pair within the pairing
  bool swapped;    // the second game of the pair: the second engine plays Black
  int64_t number;  // 1, 2, ... in schedule order
};

// The shared state of the worker threads.
class Scheduler {
 public:
  Scheduler(const TournamentConfig& config, TournamentResult& result)
      : config_(config), result_(result), writer_(config.records) {
    if (!config.log.empty()) log_ = std::make_unique<TrafficLog>(config.log);
    auto pairings = make_pairings(int(config.engines.size()), config.gauntlet);
    for (auto [a, b] : pairings) result_.pairings.push_back({a, b});
    result_.faults.assign(config.engines.size(), {});
    result_.search.assign(config.engines.size(), {});
    const int64_t pairs = (config.games + 1) / 2;
    // Pair-major order: every pairing advances together, and both games of a pair run close in time.
    for (int64_t k = 0; k < pairs; ++k)
      for (int p = 0; p < int(pairings.size()); ++p)
        for (bool swapped : {false, true}) jobs_.push_back({p, k, swapped, int64_t(jobs_.size()) + 1});
    pair_decision_ = std::vector<std::atomic<int>>(jobs_.size());
    std::mt19937_64 rng(config.seed);
    if (config.openings.empty()) {
      for (int64_t k = 0; k < pairs; ++k) openings_.push_back(random_opening(config.random_plies, rng));
    } else {
      std::vector<size_t> order(config.openings.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      for (int64_t k = 0; k < pairs; ++k) openings_.push_back(config.openings[order[k % order.size()]]);
    }
  }

  void worker(int thread) {
    std::map<int, std::unique_ptr<EngineProcess>> engines;
    const auto timeout = std::chrono::milliseconds(config_.game.timeout_ms);
    // The engine of index i, in sync and ready for a game; nullptr when three starts in a row
    // failed (then the tournament stops: the engine is broken, not unlucky).
    auto ready = [&](int i) -> EngineProcess* {
      auto& e = engines[i];
      if (e && e->sync(timeout)) return e.get();
      std::string error;
      for (int attempt = 0; attempt < 3; ++attempt) {
        e = std::make_unique<EngineProcess>(config_.engines[i], log_.get(),
                                            config_.engines[i].name + "#" + std::to_string(thread));
        auto err = e->start(timeout);
        if (!err) return e.get();
        error = *err;
      }
      fail(error + " (three starts)");
      return nullptr;
    };
    while (!stop_ && !stop_requested) {
      const int64_t j = next_job_++;
      if (j >= int64_t(jobs_.size())) break;
      const Job& job = jobs_[j];
      if (!pair_starts(j, job)) continue;
      const PairingResult& pr = result_.pairings[job.pairing];
      const int black = job.swapped ? pr.second : pr.first, white = job.swapped ? pr.first : pr.second;
      EngineProcess* b = ready(black);
      EngineProcess* w = b ? ready(white) : nullptr;
      if (!w) break;
      GameSettings settings = config_.game;
      settings.interrupt = &stop_requested;
      PlayedGame game = play_game(*b, *w, openings_[job.pair], settings);
      if (game.verdict.end == GameEnd::ABORT) break;
      if (game.failed[BLACK]) engines[black].reset();
      if (game.failed[WHITE]) engines[white].reset();
      finish(job, thread, black, white, game);
    }
  }

  // Whether game j is played under start_within_ms: the first game of a pair decides for both
  // (its partner is the next job, which another thread may take at once and then waits for that).
  bool pair_starts(int64_t j, const Job& job) {
    if (config_.start_within_ms <= 0) return true;
    std::atomic<int>& decision = pair_decision_[j - job.swapped];
    if (!job.swapped) {
      const auto elapsed = std::chrono::steady_clock::now() - started_at_;
      decision = elapsed <= std::chrono::milliseconds(config_.start_within_ms) ? PLAY : SKIP;
    }
    while (decision == UNDECIDED) std::this_thread::yield();
    return decision == PLAY;
  }

  void fail(const std::string& error) {
    std::lock_guard lock(mutex_);
    if (result_.error.empty()) result_.error = error;
    stop_ = true;
  }

 private:
  void finish(const Job& job, int thread, int black, int white, const PlayedGame& game) {
    std::string warning, write_error;
    try {
      warning = writer_.write(game, {job.number, job.pair + 1, openings_[job.pair].text()});
    } catch (const std::exception& e) {
      // A full disk: the game still counts, the match stops, and the records keep the games before.
      write_error = "game " + std::to_string(job.number) + "'s records could not be written (" + e.what() +
                    "); the match stopped, the records hold the games before it";
    }
    if (!write_error.empty()) fail(write_error);
    std::lock_guard lock(mutex_);
    if (!warning.empty()) std::cerr << "\nwarning: " << warning << "\n";
    GameOutcome outcome{job.pairing,
                        job.pair,
                        black,
                        white,
                        game.verdict.winner,
                        game.verdict.reason,
                        {game.search[BLACK], game.search[WHITE]},
                        thread};
    if (tally_.add(outcome) && config_.sprt) {
      const Penta& penta = result_.pairings[job.pairing].penta;
      result_.llr = sprt_llr(penta, *config_.sprt);
      result_.sprt = sprt_result(result_.llr, *config_.sprt);
      if (result_.sprt != SprtResult::NONE) stop_ = true;
    }
    result_.runner_moves += game.runner_moves;
    runner_us_ += game.runner_us;
    runner_cpu_us_ += game.runner_cpu_us;
    if (config_.progress) progress();
  }

  void progress() {
    const int64_t total = int64_t(jobs_.size());
    char line[256];
    if (result_.pairings.size() == 1) {
      const PairingResult& pr = result_.pairings[0];
      EloEstimate e = estimate_wdl(pr.wins, pr.draws, pr.losses);
      std::snprintf(line, sizeof line, "games %lld/%lld  %s vs %s  +%lld -%lld =%lld  elo %.1f [%.1f, %.1f]",
                    (long long)result_.games, (long long)total, config_.engines[pr.first].name.c_str(),
                    config_.engines[pr.second].name.c_str(), (long long)pr.wins, (long long)pr.losses,
                    (long long)pr.draws, e.elo, e.lo, e.hi);
      std::string s = line;
      if (config_.sprt) {
        std::snprintf(line, sizeof line, "  llr %.2f (%.2f, %.2f)", result_.llr, config_.sprt->lower(),
                      config_.sprt->upper());
        s += line;
      }
      print_progress(s);
    } else {
      std::snprintf(line, sizeof line, "games %lld/%lld", (long long)result_.games, (long long)total);
      print_progress(line);
    }
  }

  void print_progress(const std::string& s) {
    static const bool tty = isatty(2);
    if (tty) std::cerr << "\r\033[K" << s << std::flush;
    else std::cerr << s << "\n";
  }

 public:
  void done() {
    const double moves = double(std::max<int64_t>(1, result_.runner_moves));
    result_.runner_us_per_move = runner_us_ / moves;
    result_.runner_cpu_us_per_move = runner_cpu_us_ / moves;
    result_.interrupted = stop_requested;
    if (config_.progress && isatty(2)) std::cerr << "\n";
  }

 private:
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

}  // namespace

bool Tally::add(const GameOutcome& g) {
  PairingResult& pr = result_.pairings[g.pairing];
  // Points of the pairing's first engine, in half points.
  const bool first_is_black = g.black == pr.first;
  const int halves = !g.winner ? 1 : (*g.winner == BLACK) == first_is_black ? 2 : 0;
  (halves == 2 ? pr.wins : halves == 1 ? pr.draws : pr.losses)++;
  if (g.winner) {
    EngineFaults& f = result_.faults[*g.winner == BLACK ? g.white : g.black];
    if (g.reason == "time forfeit") f.time++;
    if (g.reason == "no answer") f.no_answer++;
    if (g.reason == "crash") f.crash++;
    // answer_verdict's reasons for a move that loses at once
    if (g.reason == "false declaration" || g.reason.rfind("illegal move", 0) == 0 ||
        g.reason.rfind("unparsable move", 0) == 0)
      f.illegal++;
  }
  result_.search[g.black].add(g.search[BLACK]);
  result_.search[g.white].add(g.search[WHITE]);
  if (g.thread >= 0) {
    result_.instances.resize(result_.search.size());
    for (Color c : {BLACK, WHITE}) {
      auto& per_thread = result_.instances[c == BLACK ? g.black : g.white];
      if (int(per_thread.size()) <= g.thread) per_thread.resize(g.thread + 1);
      per_thread[g.thread].add(g.search[c]);
    }
  }
  ++result_.games;
  auto key = std::make_pair(g.pairing, g.pair);
  auto it = half_pairs_.find(key);
  if (it == half_pairs_.end()) {
    half_pairs_[key] = halves;
    return false;
  }
  pr.penta[it->second + halves]++;
  half_pairs_.erase(it);
  return true;
}

void request_stop() { stop_requested = true; }

std::vector<std::pair<int, int>> make_pairings(int engines, bool gauntlet) {
  std::vector<std::pair<int, int>> p;
  for (int a = 0; a < engines; ++a)
    for (int b = a + 1; b < engines; ++b)
      if (!gauntlet || a == 0) p.emplace_back(a, b);
  return p;
}

TournamentResult run_tournament(const TournamentConfig& config) {
  TournamentResult result;
  Scheduler scheduler(config, result);
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, config.concurrency); ++t) threads.emplace_back([&, t] { scheduler.worker(t); });
  for (auto& t : threads) t.join();
  scheduler.done();
  return result;
}

}  // namespace jiriki::match
