// Formatting of self-play's progress line and stats records.
#include "selfplay/stats.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace jiriki::selfplay {

const char* end_kind_name(EndKind e) {
  switch (e) {
    case EndKind::MATE: return "mate";
    case EndKind::RESIGN: return "resign";
    case EndKind::SENNICHITE: return "sennichite";
    case EndKind::PERPETUAL_CHECK: return "perpetual_check";
    case EndKind::DECLARATION: return "declaration";
    case EndKind::MAX_MOVES: return "max_moves";
    case EndKind::COUNT: break;
  }
  return "?";
}

Snapshot snapshot(const Counters& c, double seconds, int64_t nn_calls, int64_t nn_positions, int64_t nn_capacity) {
  Snapshot s;
  s.seconds = seconds;
  s.moves = c.moves.load();
  s.positions = c.positions.load();
  s.playouts = c.playouts.load();
  s.games = c.games.load();
  s.recorded_positions = c.recorded_positions.load();
  for (size_t i = 0; i < s.winners.size(); ++i) s.winners[i] = c.winners[i].load();
  for (size_t i = 0; i < s.ends.size(); ++i) s.ends[i] = c.ends[i].load();
  s.no_resign_games = c.no_resign_games.load();
  s.would_resign = c.would_resign.load();
  s.false_resign = c.false_resign.load();
  s.nn_calls = nn_calls;
  s.nn_positions = nn_positions;
  s.nn_capacity = nn_capacity;
  return s;
}

namespace {
struct Rates {
  double positions, moves, playouts, evals, fill;
};
Rates rates(const Snapshot& now, const Snapshot& prev) {
  const double dt = std::max(now.seconds - prev.seconds, 1e-9);
  const int64_t cap = now.nn_capacity - prev.nn_capacity;
  return {(now.positions - prev.positions) / dt, (now.moves - prev.moves) / dt, (now.playouts - prev.playouts) / dt,
          (now.nn_positions - prev.nn_positions) / dt,
          cap > 0 ? double(now.nn_positions - prev.nn_positions) / cap : 0.0};
}
}  // namespace

std::string progress_line(const Snapshot& now, const Snapshot& prev) {
  const Rates r = rates(now, prev);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%7.0fs games %lld (B %lld W %lld D %lld) positions %lld | %.1f positions/s %.1f moves/s "
                "%.0f nodes/s %.0f evals/s batch fill %.1f%% | false resign %lld/%lld",
                now.seconds, (long long)now.games, (long long)now.winners[1], (long long)now.winners[2],
                (long long)now.winners[0], (long long)now.recorded_positions, r.positions, r.moves, r.playouts, r.evals,
                100 * r.fill, (long long)now.false_resign, (long long)now.would_resign);
  return buf;
}

std::string stats_json(const Snapshot& now, const Snapshot& prev) {
  const Rates r = rates(now, prev);
  nlohmann::json j;
  j["seconds"] = now.seconds;
  j["games"] = now.games;
  j["recorded_positions"] = now.recorded_positions;
  j["moves"] = now.moves;
  j["positions"] = now.positions;
  j["playouts"] = now.playouts;
  j["black_wins"] = now.winners[1];
  j["white_wins"] = now.winners[2];
  j["draws"] = now.winners[0];
  nlohmann::json ends;
  for (size_t i = 0; i < now.ends.size(); ++i) ends[end_kind_name(EndKind(i))] = now.ends[i];
  j["ends"] = ends;
  j["no_resign_games"] = now.no_resign_games;
  j["would_resign"] = now.would_resign;
  j["false_resign"] = now.false_resign;
  j["nn_calls"] = now.nn_calls;
  j["nn_positions"] = now.nn_positions;
  j["interval_seconds"] = now.seconds - prev.seconds;
  j["positions_per_second"] = r.positions;
  j["moves_per_second"] = r.moves;
  j["nodes_per_second"] = r.playouts;
  j["evals_per_second"] = r.evals;
  j["batch_fill"] = r.fill;
  return j.dump();
}

}  // namespace jiriki::selfplay
