// The game driver: clocks, engine answers and the referee.
#include "match/game.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <sstream>

namespace jiriki::match {

namespace {

int64_t ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// CPU time of the calling thread, in microseconds.
double thread_cpu_us() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) / 1e3;
}

}  // namespace

std::string move_comment(std::optional<int> score, int64_t ms) {
  char buf[64];
  std::string s = "time " + std::to_string(ms / 1000) + ".";
  std::snprintf(buf, sizeof buf, "%03d", int(ms % 1000));
  s += buf;
  if (!score) return s;
  if (std::abs(*score) > MATE_SCORE - 1000) {
    int plies = MATE_SCORE - std::abs(*score);
    return s + " score mate " + (*score > 0 ? "" : "-") + std::to_string(plies);
  }
  return s + " score cp " + std::to_string(*score);
}

std::optional<int64_t> parse_info_nodes(const std::string& line) {
  if (!starts_with(line, "info ") || starts_with(line, "info string")) return std::nullopt;
  std::istringstream in(line);
  std::string w;
  while (in >> w && w != "nodes") {
    if (w == "pv" || w == "string") return std::nullopt;  // the rest is moves or text
  }
  std::string value;
  if (!(in >> value) || value.empty() || value.size() > 18 ||
      value.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(value);
}

std::optional<int> parse_info_score(const std::string& line) {
  if (!starts_with(line, "info ") || starts_with(line, "info string")) return std::nullopt;
  std::istringstream in(line);
  std::string w;
  while (in >> w && w != "score") {}
  std::string kind, value;
  if (!(in >> kind >> value)) return std::nullopt;
  try {
    if (kind == "cp") return std::stoi(value);
    if (kind == "mate") {
      // "mate +" / "mate -": mate found, distance unknown.
      if (value == "+" || value == "-") return value == "+" ? MATE_SCORE : -MATE_SCORE;
      int n = std::stoi(value);
      bool winning = n > 0 || (n == 0 && value[0] != '-');
      return winning ? MATE_SCORE - std::abs(n) : -(MATE_SCORE - std::abs(n));
    }
  } catch (const std::exception&) {}
  return std::nullopt;
}

void play_opening(Position& pos, PlayedGame& game, const Opening& opening) {
  for (Move m : opening.moves) {
    pos.do_move(m);
    game.record.add_move(m);
    game.record.comments.emplace_back();
    game.move_ms.push_back(-1);
    game.scores.push_back(std::nullopt);
  }
  game.opening_plies = int(opening.moves.size());
}

std::string GameClock::go(int64_t nodes) const {
  if (!clocked()) return "go nodes " + std::to_string(nodes);
  std::string go = "go btime " + std::to_string(remaining_[BLACK]) + " wtime " + std::to_string(remaining_[WHITE]);
  if (tc_.byoyomi_ms > 0) go += " byoyomi " + std::to_string(tc_.byoyomi_ms);
  else if (tc_.inc_ms > 0) go += " binc " + std::to_string(tc_.inc_ms) + " winc " + std::to_string(tc_.inc_ms);
  return go;
}

bool GameClock::charge(Color us, int64_t elapsed_ms, int64_t margin_ms) {
  if (!clocked()) return true;
  if (elapsed_ms > limit_ms(us, 0) + margin_ms) return false;
  remaining_[us] = std::max<int64_t>(0, remaining_[us] - elapsed_ms) + tc_.inc_ms;
  return true;
}

UsiAnswer ask_move(EngineProcess& e, const std::string& position, const std::string& go, int64_t limit_ms, bool clocked,
                   const GameSettings& settings) {
  UsiAnswer a;
  e.send(position);
  e.send(go);
  a.sent_at = Clock::now();
  const auto deadline = a.sent_at + std::chrono::milliseconds(limit_ms + (clocked ? settings.margin_ms : 0));
  while (auto line = e.read_line(deadline)) {
    if (starts_with(line->text, "bestmove")) {
      std::istringstream words(line->text);
      std::string bestmove;
      words >> bestmove >> a.move;
      a.kind = UsiAnswer::BESTMOVE;
      a.at = line->at;
      a.elapsed_ms = ms_between(a.sent_at, line->at);
      return a;
    }
    if (auto s = parse_info_score(line->text)) a.score = s;
    if (auto n = parse_info_nodes(line->text)) a.nodes = n;
  }
  if (settings.interrupt && *settings.interrupt) return a;  // the wait ended on the interrupt, not the clock
  if (e.ended()) {
    a.kind = UsiAnswer::CRASH;
    return a;
  }
  // Out of time: a working engine answers `stop` at once; one that does not is killed.
  e.send("stop");
  const auto grace = Clock::now() + std::chrono::milliseconds(settings.grace_ms);
  while (auto line = e.read_line(grace))
    if (starts_with(line->text, "bestmove")) {
      a.kind = UsiAnswer::TIME_UP;
      return a;
    }
  e.kill();
  a.kind = UsiAnswer::NO_ANSWER;
  return a;
}

Verdict failed_answer_verdict(const UsiAnswer& a, Color us, bool clocked) {
  switch (a.kind) {
    case UsiAnswer::CRASH:
      return Verdict::loss(us, us == BLACK ? GameEnd::BLACK_ILLEGAL_ACTION : GameEnd::WHITE_ILLEGAL_ACTION, "crash");
    case UsiAnswer::TIME_UP: return Verdict::loss(us, GameEnd::TIME_UP, clocked ? "time forfeit" : "no answer");
    case UsiAnswer::NO_ANSWER: return Verdict::loss(us, GameEnd::TIME_UP, "no answer");
    default: return {true, std::nullopt, GameEnd::ABORT, "interrupted"};
  }
}

PlayedGame play_game(EngineProcess& black, EngineProcess& white, const Opening& opening, const GameSettings& settings) {
  const TimeControl& tc = settings.tc;
  PlayedGame g;
  Position pos;
  pos.set_sfen(opening.sfen);
  g.record.start = pos;
  const GameRules rules = settings.rules.counted_from(pos);  // a game's plies count from its start, as its record's
  g.record.black = black.spec().name;
  g.record.white = white.spec().name;
  const std::string position_base = opening.sfen == "startpos" ? "position startpos" : "position sfen " + opening.sfen;
  std::string moves_text;  // " 7g7f 3c3d ..."
  for (Move m : opening.moves) moves_text += " " + move_to_usi(m);
  play_opening(pos, g, opening);

  EngineProcess* engines[COLOR_NB] = {&black, &white};
  for (auto* e : engines) e->send("usinewgame");
  GameClock clock(tc);
  std::optional<Clock::time_point> last_answer;
  double last_taken_cpu = 0;
  Verdict v;
  while (true) {
    const Color us = pos.side_to_move();
    if (settings.interrupt && *settings.interrupt) {
      v = {true, std::nullopt, GameEnd::ABORT, "interrupted"};
      break;
    }
    v = scores_verdict(g.scores, us, settings.scores);
    if (v.over) break;
    EngineProcess& e = *engines[us];
    const std::string go = clock.go(e.spec().nodes > 0 ? e.spec().nodes : tc.nodes);
    const std::string position = moves_text.empty() ? position_base : position_base + " moves" + moves_text;
    const double cpu_before = thread_cpu_us();
    const UsiAnswer a = ask_move(e, position, go, clock.limit_ms(us, settings.timeout_ms), clock.clocked(), settings);
    if (last_answer) {
      g.runner_us += std::chrono::duration<double, std::micro>(a.sent_at - *last_answer).count();
      g.runner_cpu_us += cpu_before - last_taken_cpu;
      ++g.runner_moves;
    }
    if (a.kind != UsiAnswer::BESTMOVE) {
      g.failed[us] = a.failed();
      v = failed_answer_verdict(a, us, clock.clocked());
      break;
    }
    const int64_t elapsed = a.elapsed_ms;
    g.search[us].record(elapsed, a.nodes);
    last_answer = a.at;
    last_taken_cpu = thread_cpu_us();
    if (!clock.charge(us, elapsed, settings.margin_ms)) {
      v = Verdict::loss(us, GameEnd::TIME_UP, "time forfeit");
      break;
    }
    const std::string& text = a.move;
    const std::optional<int> score = a.score;
    Move m = MOVE_NONE;
    v = answer_verdict(pos, text, rules, m);
    if (v.over) break;
    pos.do_move(m);
    g.record.add_move(m, int(elapsed / 1000));
    g.record.comments.push_back(move_comment(score, elapsed));
    g.move_ms.push_back(elapsed);
    g.scores.push_back(score);
    moves_text += " " + text;
    v = ending_verdict(judge_position(pos, rules), pos.side_to_move());
    if (v.over) break;
  }
  g.verdict = v;
  g.record.end = v.end;
  for (Color c : {BLACK, WHITE})
    if (!g.failed[c]) engines[c]->send(!v.winner ? "gameover draw" : *v.winner == c ? "gameover win" : "gameover lose");
  return g;
}

}  // namespace jiriki::match
