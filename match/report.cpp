// summary.json and the final table.
#include "match/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "match/openings.h"

namespace jiriki::match {

namespace {

nlohmann::json number(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }

const char* sprt_name(SprtResult r) { return r == SprtResult::H1 ? "H1" : r == SprtResult::H0 ? "H0" : "none"; }

nlohmann::json pairing_json(const TournamentConfig& config, const PairingResult& pr) {
  EloEstimate e = estimate_wdl(pr.wins, pr.draws, pr.losses);
  EloEstimate p = estimate_penta(pr.penta);
  return {
      {"engines", {config.engines[pr.first].name, config.engines[pr.second].name}},
      {"games", pr.games()},
      {"wins", pr.wins},
      {"losses", pr.losses},
      {"draws", pr.draws},
      {"score", e.score},
      {"score_95", {e.score_lo, e.score_hi}},
      {"elo", number(e.elo)},
      {"elo_95", {number(e.lo), number(e.hi)}},
      {"los", e.los},
      {"penta", pr.penta},
      {"penta_elo", number(p.elo)},
      {"penta_elo_95", {number(p.lo), number(p.hi)}},
      {"nelo", number(p.nelo)},
  };
}

// Each game thread's instance of engine i: its nodes/s (0 where it reported no nodes); empty for
// summaries of files, which do not know the threads.
std::vector<double> instance_rates(const TournamentResult& result, int i) {
  std::vector<double> rates;
  if (size_t(i) < result.instances.size())
    for (const SearchStats& t : result.instances[i])
      if (t.moves > 0) rates.push_back(t.nodes_per_second());
  return rates;
}

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[128];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

}  // namespace

nlohmann::json summary_json(const TournamentConfig& config, const TournamentResult& result) {
  nlohmann::json j;
  j["engines"] = nlohmann::json::array();
  for (const auto& e : config.engines) j["engines"].push_back(e.name);
  j["games"] = result.games;
  j["pairings"] = nlohmann::json::array();
  for (const auto& pr : result.pairings) j["pairings"].push_back(pairing_json(config, pr));
  if (result.pairings.size() == 1)
    for (const auto& [k, v] : j["pairings"][0].items())
      if (k != "engines" && k != "games") j[k] = v;
  if (config.sprt)
    j["sprt"] = {{"llr", result.llr},         {"lower", config.sprt->lower()},   {"upper", config.sprt->upper()},
                 {"elo0", config.sprt->elo0}, {"elo1", config.sprt->elo1},       {"alpha", config.sprt->alpha},
                 {"beta", config.sprt->beta}, {"result", sprt_name(result.sprt)}};
  else j["sprt"] = nullptr;
  // crosstable.points[i][j]: engine i's points against engine j (null on the diagonal and for
  // engines that did not meet); crosstable.games likewise.
  const size_t n = config.engines.size();
  nlohmann::json points = nlohmann::json::array(), games = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) {
    points.push_back(std::vector<nlohmann::json>(n));
    games.push_back(std::vector<nlohmann::json>(n));
  }
  for (const auto& pr : result.pairings) {
    points[pr.first][pr.second] = pr.wins + 0.5 * pr.draws;
    points[pr.second][pr.first] = pr.losses + 0.5 * pr.draws;
    games[pr.first][pr.second] = games[pr.second][pr.first] = pr.games();
  }
  j["crosstable"] = {{"points", points}, {"games", games}};
  j["faults"] = nlohmann::json::object();
  for (size_t i = 0; i < n; ++i) {
    const EngineFaults& f = result.faults[i];
    j["faults"][config.engines[i].name] = {
        {"time", f.time}, {"illegal", f.illegal}, {"crash", f.crash}, {"no_answer", f.no_answer}};
  }
  j["search"] = nlohmann::json::object();
  for (size_t i = 0; i < n; ++i) {
    const SearchStats& t = result.search[i];
    j["search"][config.engines[i].name] = {{"moves", t.moves},
                                           {"ms_per_move", t.ms_per_move()},
                                           {"moves_with_nodes", t.counted},
                                           {"nodes_per_move", t.nodes_per_move()},
                                           {"nodes_per_second", t.nodes_per_second()},
                                           {"nodes_per_second_median", t.median_nodes_per_second()},
                                           {"instances_nodes_per_second", instance_rates(result, int(i))}};
  }
  j["runner_us_per_move"] = result.runner_us_per_move;
  j["runner_cpu_us_per_move"] = result.runner_cpu_us_per_move;
  j["runner_moves"] = result.runner_moves;
  return j;
}

std::string final_table(const TournamentConfig& config, const TournamentResult& result) {
  std::string s;
  auto name = [&](int i) { return config.engines[i].name; };
  for (const auto& pr : result.pairings) {
    EloEstimate e = estimate_wdl(pr.wins, pr.draws, pr.losses);
    EloEstimate p = estimate_penta(pr.penta);
    s += name(pr.first) + " vs " + name(pr.second) + ": " + std::to_string(pr.games()) + " games, +" +
         std::to_string(pr.wins) + " -" + std::to_string(pr.losses) + " =" + std::to_string(pr.draws) +
         fmt(", score %.3f [%.3f, %.3f]\n", e.score, e.score_lo, e.score_hi);
    s += fmt("  Elo %.1f [%.1f, %.1f]", e.elo, e.lo, e.hi) + fmt(", LOS %.1f%%\n", 100 * e.los);
    s += "  pairs LL LD DD/WL WD WW: " + std::to_string(pr.penta[0]) + " " + std::to_string(pr.penta[1]) + " " +
         std::to_string(pr.penta[2]) + " " + std::to_string(pr.penta[3]) + " " + std::to_string(pr.penta[4]) +
         fmt(", Elo %.1f [%.1f, %.1f]", p.elo, p.lo, p.hi) + fmt(", nElo %.1f\n", p.nelo);
  }
  if (config.sprt)
    s += fmt("SPRT elo0 %.2f elo1 %.2f: LLR %.3f", config.sprt->elo0, config.sprt->elo1, result.llr) +
         fmt(" (%.3f, %.3f) -> ", config.sprt->lower(), config.sprt->upper()) + sprt_name(result.sprt) + "\n";
  const int n = int(config.engines.size());
  if (n > 2) {
    s += "crosstable (points of the row against the column):\n";
    size_t w = 6;
    for (int i = 0; i < n; ++i) w = std::max(w, name(i).size() + 1);
    auto pad = [&](std::string t) { return t + std::string(w > t.size() ? w - t.size() : 1, ' '); };
    s += pad("");
    for (int i = 0; i < n; ++i) s += pad(name(i));
    s += "total\n";
    for (int i = 0; i < n; ++i) {
      s += pad(name(i));
      double total = 0;
      int64_t played = 0;
      for (int k = 0; k < n; ++k) {
        std::string cell = "-";
        for (const auto& pr : result.pairings) {
          double pts = -1;
          if (pr.first == i && pr.second == k) pts = pr.wins + 0.5 * pr.draws;
          if (pr.second == i && pr.first == k) pts = pr.losses + 0.5 * pr.draws;
          if (pts >= 0) {
            cell = fmt("%g/", pts) + std::to_string(pr.games());
            total += pts;
            played += pr.games();
          }
        }
        s += pad(cell);
      }
      s += fmt("%g/", total) + std::to_string(played) + "\n";
    }
  }
  for (int i = 0; i < n; ++i) {
    const EngineFaults& f = result.faults[i];
    s += name(i) + " lost by: time " + std::to_string(f.time) + ", illegal move " + std::to_string(f.illegal) +
         ", crash " + std::to_string(f.crash) + ", no answer " + std::to_string(f.no_answer) + "\n";
  }
  for (int i = 0; i < n; ++i) {
    const SearchStats& t = result.search[i];
    s += name(i) + fmt(" thought %.0f ms a move", t.ms_per_move()) +
         (t.counted ? fmt(", %.0f nodes a move, %.0f nodes/s", t.nodes_per_move(), t.nodes_per_second())
                    : std::string(", reported no nodes")) +
         " (" + std::to_string(t.moves) + " moves)" +
         (t.move_nps.empty() ? std::string()
          : int64_t(t.move_nps.size()) == t.counted
              ? fmt(", median of its moves %.0f nodes/s", t.median_nodes_per_second())
              // (games.jsonl lines written before the moves' rates were: the median is of the others)
              : fmt(", median of its %.0f moves with rates %.0f nodes/s", double(t.move_nps.size()),
                    t.median_nodes_per_second())) +
         "\n";
    const std::vector<double> rates = instance_rates(result, i);
    if (rates.size() > 1 && t.counted) {
      s += "  nodes/s of each of its " + std::to_string(rates.size()) + " instances:";
      for (double r : rates) s += fmt(" %.0f", r);
      s += "\n";
    }
  }
  if (result.runner_moves > 0)  // (summaries of games.jsonl files have no runner timings)
    s += fmt("runner: %.1f us per move from a bestmove's arrival to the next go (CPU time %.1f us), %.0f moves\n",
             result.runner_us_per_move, result.runner_cpu_us_per_move, double(result.runner_moves));
  return s;
}

namespace {

// One line of games.jsonl.
struct GameLine {
  size_t file = 0;
  int64_t game = 0, pair = 0;
  std::string black, white, reason;
  std::optional<Color> winner;
  SearchStats search[COLOR_NB];
  bool estimated = false;  // no answered-move counts in the line
};

GameLine parse_game_line(const std::string& text, size_t file) {
  const auto j = nlohmann::json::parse(text);
  GameLine g;
  g.file = file;
  g.game = j.at("game").get<int64_t>();
  g.pair = j.at("pair").get<int64_t>();
  g.black = j.at("black").get<std::string>();
  g.white = j.at("white").get<std::string>();
  g.reason = j.at("reason").get<std::string>();
  const std::string result = j.at("result").get<std::string>();
  if (result == "black") g.winner = BLACK;
  else if (result == "white") g.winner = WHITE;
  else if (result != "draw") throw std::runtime_error("result '" + result + "' is none of black, white, draw");
  if (g.black == g.white) throw std::runtime_error("an engine plays itself ('" + g.black + "')");
  g.estimated = !j.contains("moves");
  Color first_mover = BLACK;  // after the opening, for lines without the counts
  if (g.estimated) {
    Opening o;
    if (auto err = parse_opening(j.at("opening").get<std::string>(), o)) throw std::runtime_error("opening: " + *err);
    std::istringstream fields(o.sfen);
    std::string board, side;
    fields >> board >> side;
    first_mover = (o.sfen != "startpos" && side == "w") != (o.moves.size() % 2 == 1) ? WHITE : BLACK;
  }
  const int64_t engine_plies = j.at("plies").get<int64_t>() - j.at("opening_plies").get<int64_t>();
  for (Color c : {BLACK, WHITE}) {
    const char* side = c == BLACK ? "black" : "white";
    SearchStats& s = g.search[c];
    s.ms = j.at("time_ms").at(side).get<int64_t>();
    s.nodes = j.at("nodes").at(side).get<int64_t>();
    if (!g.estimated) {
      s.moves = j.at("moves").at(side).get<int64_t>();
      s.counted = j.at("nodes_moves").at(side).get<int64_t>();
      s.nodes_ms = j.at("nodes_ms").at(side).get<int64_t>();
      if (j.contains("nps_moves")) s.move_nps = j.at("nps_moves").at(side).get<std::vector<int64_t>>();
    } else {
      // its plies after the opening, and a resignation (an answer, but no ply)
      s.moves =
          (c == first_mover ? (engine_plies + 1) / 2 : engine_plies / 2) + (g.reason == "resign" && g.winner == ~c);
      if (s.nodes > 0) s.counted = s.moves, s.nodes_ms = s.ms;
    }
  }
  return g;
}

}  // namespace

GameFilesSummary summarize_game_files(const std::vector<std::string>& paths, const std::optional<SprtParams>& sprt) {
  std::vector<GameLine> lines;
  std::vector<std::string> cut;
  for (size_t f = 0; f < paths.size(); ++f) {
    std::ifstream in(paths[f]);
    if (!in) throw std::runtime_error("cannot read " + paths[f]);
    int number = 0;
    for (std::string text; std::getline(in, text);) {
      ++number;
      if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        lines.push_back(parse_game_line(text, f));
      } catch (const std::exception& e) {
        const std::string where = paths[f] + ":" + std::to_string(number);
        if (in.eof()) {  // the last line, without its newline: cut short, not corrupt
          cut.push_back(where);
          continue;
        }
        throw std::runtime_error(where + ": not a game line of jiriki match (" + e.what() + ")");
      }
    }
  }
  if (lines.empty()) throw std::runtime_error("no games in the files given");
  const std::vector<GameLine> written = lines;  // as they ended: the order a sequential test saw them
  // Lines are written as games end; the game numbers give the order they were scheduled in.
  std::stable_sort(lines.begin(), lines.end(), [](const GameLine& a, const GameLine& b) {
    return std::tie(a.file, a.game) < std::tie(b.file, b.game);
  });
  GameFilesSummary out;
  out.cut_lines = std::move(cut);
  std::map<std::string, int> index;
  auto engine = [&](const std::string& name) {
    auto [it, fresh] = index.emplace(name, int(index.size()));
    if (fresh) {
      EngineSpec spec;
      spec.name = name;
      out.config.engines.push_back(spec);
    }
    return it->second;
  };
  std::map<std::pair<int, int>, int> pairing;
  std::vector<GameOutcome> outcomes;
  for (const GameLine& g : lines) {
    const int b = engine(g.black), w = engine(g.white);
    const auto key = std::minmax(b, w);
    auto [it, fresh] = pairing.emplace(std::make_pair(key.first, key.second), int(pairing.size()));
    if (fresh) out.result.pairings.push_back({key.first, key.second});
    // Pairs are numbered within a file: the file's index keeps two runs' pairs apart.
    outcomes.push_back(
        {it->second, int64_t(g.file) << 40 | g.pair, b, w, g.winner, g.reason, {g.search[BLACK], g.search[WHITE]}});
    out.estimated_games += g.estimated;
  }
  out.result.faults.assign(out.config.engines.size(), {});
  out.result.search.assign(out.config.engines.size(), {});
  Tally tally(out.result);
  for (const GameOutcome& o : outcomes) tally.add(o);
  out.config.games = out.result.games;
  if (sprt) {
    if (out.result.pairings.size() != 1) throw std::runtime_error("an SPRT needs the games of exactly two engines");
    out.config.sprt = sprt;
    // The same games again, in the order they were written, with the test after each finished pair.
    TournamentResult replay;
    replay.pairings.push_back({out.result.pairings[0].first, out.result.pairings[0].second});
    replay.faults.assign(out.config.engines.size(), {});
    replay.search.assign(out.config.engines.size(), {});
    Tally again(replay);
    int64_t games = 0;
    for (const GameLine& g : written) {
      ++games;
      const int b = index.at(g.black), w = index.at(g.white);
      if (!again.add({0, int64_t(g.file) << 40 | g.pair, b, w, g.winner, g.reason, {g.search[BLACK], g.search[WHITE]}}))
        continue;
      const double llr = sprt_llr(replay.pairings[0].penta, *sprt);
      if (out.sprt_decided_games == 0 && sprt_result(llr, *sprt) != SprtResult::NONE) {
        out.sprt_decided_games = games;
        out.result.sprt = sprt_result(llr, *sprt);
        out.result.llr = llr;
      }
    }
    if (out.sprt_decided_games == 0) out.result.llr = sprt_llr(out.result.pairings[0].penta, *sprt);
  }
  return out;
}

}  // namespace jiriki::match
