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

#include "common/platform.h"

namespace jiriki::match {

namespace {

std::atomic<bool> stop_requested{false};

}  // namespace

Schedule::Schedule(const TournamentConfig& config, TournamentResult& result)
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
      for (bool swapped : {false, true}) {
        const auto [a, b] = pairings[p];
        jobs_.push_back({p, k, swapped, int64_t(jobs_.size()) + 1, swapped ? b : a, swapped ? a : b});
      }
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

Schedule::~Schedule() = default;

bool Schedule::stopping() const { return stop_ || stop_requested; }

bool Schedule::next(Job& job) {
  while (!stopping()) {
    const int64_t j = next_job_++;
    if (j >= int64_t(jobs_.size())) return false;
    if (!pair_starts(j, jobs_[j])) continue;
    job = jobs_[j];
    return true;
  }
  return false;
}

// Whether game j is played under start_within_ms: the first game of a pair decides for both
// (its partner is the next job, which another thread may take at once and then waits for that).
bool Schedule::pair_starts(int64_t j, const Job& job) {
  if (config_.start_within_ms <= 0) return true;
  std::atomic<int>& decision = pair_decision_[j - job.swapped];
  if (!job.swapped) {
    const auto elapsed = std::chrono::steady_clock::now() - started_at_;
    decision = elapsed <= std::chrono::milliseconds(config_.start_within_ms) ? PLAY : SKIP;
  }
  while (decision == UNDECIDED) std::this_thread::yield();
  return decision == PLAY;
}

void Schedule::fail(const std::string& error) {
  std::lock_guard lock(mutex_);
  if (result_.error.empty()) result_.error = error;
  stop_ = true;
}

void Schedule::finish(const Job& job, int thread, const PlayedGame& game) {
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
                      job.black,
                      job.white,
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

void Schedule::progress() {
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

void Schedule::print_progress(const std::string& s) {
  static const bool tty = isatty(2);
  if (tty) std::cerr << "\r\033[K" << s << std::flush;
  else std::cerr << s << "\n";
}

void Schedule::done() {
  const double moves = double(std::max<int64_t>(1, result_.runner_moves));
  result_.runner_us_per_move = runner_us_ / moves;
  result_.runner_cpu_us_per_move = runner_cpu_us_ / moves;
  result_.interrupted = stop_requested;
  if (config_.progress && isatty(2)) std::cerr << "\n";
}

namespace {

// One game thread of run_tournament: its own engine processes, games taken from the schedule.
void play_games(const TournamentConfig& config, Schedule& schedule, int thread, const std::vector<int>& cpus) {
  std::map<int, std::unique_ptr<EngineProcess>> engines;
  auto ready = [&](int i) { return ready_engine(engines[i], config, schedule, i, thread, cpus); };
  Schedule::Job job;
  while (schedule.next(job)) {
    EngineProcess* b = ready(job.black);
    EngineProcess* w = b ? ready(job.white) : nullptr;
    if (!w) break;
    GameSettings settings = config.game;
    settings.interrupt = &stop_requested;
    PlayedGame game = play_game(*b, *w, schedule.opening(job), settings);
    if (game.verdict.end == GameEnd::ABORT) break;
    if (game.failed[BLACK]) engines[job.black].reset();
    if (game.failed[WHITE]) engines[job.white].reset();
    schedule.finish(job, thread, game);
  }
}

}  // namespace

EngineProcess* ready_engine(std::unique_ptr<EngineProcess>& e, const TournamentConfig& config, Schedule& schedule,
                            int engine, int slot, const std::vector<int>& cpus) {
  const auto timeout = std::chrono::milliseconds(config.game.timeout_ms);
  if (e && e->sync(timeout)) return e.get();
  std::string error;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (stop_requested) return nullptr;
    EngineSpec spec = spec_for_slot(config.engines[engine], slot);
    if (!cpus.empty()) spec.cpus = cpus;
    e = std::make_unique<EngineProcess>(std::move(spec), schedule.traffic_log(),
                                        config.engines[engine].name + "#" + std::to_string(slot), &stop_requested);
    auto err = e->start(timeout);
    if (!err) return e.get();
    error = *err;
  }
  if (stop_requested) return nullptr;
  schedule.fail(error + " (three starts)");
  return nullptr;
}

const std::atomic<bool>* stop_flag() { return &stop_requested; }

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
  Schedule schedule(config, result);
  std::vector<std::thread> threads;
  const std::vector<int> allowed = config.cpus_per_game > 0 ? affinity_cpus() : std::vector<int>();
  for (int t = 0; t < std::max(1, config.concurrency); ++t)
    threads.emplace_back(
        [&, t, cpus = cpus_for_slot(allowed, config.cpus_per_game, t)] { play_games(config, schedule, t, cpus); });
  for (auto& t : threads) t.join();
  schedule.done();
  return result;
}

}  // namespace jiriki::match
