// Opening lines for matches.
#include "match/openings.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "match/adjudicate.h"
#include "shogi/movegen.h"

namespace jiriki::match {

std::string Opening::text() const {
  std::string s = sfen == "startpos" ? "startpos" : "sfen " + sfen;
  if (!moves.empty()) s += " moves";
  for (Move m : moves) (s += ' ') += move_to_usi(m);
  return s;
}

std::optional<std::string> parse_opening(const std::string& line, Opening& out) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  size_t i = 0;
  if (i < words.size() && words[i] == "position") ++i;
  Opening o;
  if (i < words.size() && words[i] == "startpos") {
    o.sfen = "startpos";
    ++i;
  } else {
    if (i < words.size() && words[i] == "sfen") ++i;
    for (; i < words.size() && words[i] != "moves"; ++i) o.sfen += (o.sfen.empty() ? "" : " ") + words[i];
  }
  if (o.sfen.empty()) return "no position";
  Position pos;
  if (auto err = pos.set_sfen(o.sfen)) return "bad SFEN: " + *err;
  if (judge_position(pos, 0, 0).over) return "the game is already over at the start position";
  if (i < words.size() && words[i] == "moves") ++i;
  for (; i < words.size(); ++i) {
    Move m = move_from_usi(pos, words[i]);
    if (m == MOVE_NONE || !pos.is_legal(m)) return "illegal move " + words[i] + " in " + pos.sfen();
    pos.do_move(m);
    o.moves.push_back(m);
    if (judge_position(pos, 0, 0).over) return "the game is over after " + words[i];
  }
  out = std::move(o);
  return std::nullopt;
}

std::vector<Opening> load_openings(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<Opening> openings;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    Opening o;
    if (auto err = parse_opening(line, o)) throw std::runtime_error(path + ":" + std::to_string(number) + ": " + *err);
    openings.push_back(std::move(o));
  }
  if (openings.empty()) throw std::runtime_error(path + ": no opening in the file");
  return openings;
}

Opening random_opening(int plies, std::mt19937_64& rng) {
  // Retries from the start in the rare case that every move of some position ends the game.
  while (true) {
    Opening o{"startpos", {}};
    Position pos;
    for (int p = 0; p < plies; ++p) {
      std::vector<Move> choices;
      for (Move m : legal_moves(pos)) {
        pos.do_move(m);
        if (!judge_position(pos, 0, 0).over) choices.push_back(m);
        pos.undo_move();
      }
      if (choices.empty()) break;
      Move m = choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)];
      pos.do_move(m);
      o.moves.push_back(m);
    }
    if (int(o.moves.size()) == plies) return o;
  }
}

}  // namespace jiriki::match
