// Reading and checking the openings that self-play games start from.
#include "selfplay/openings.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "shogi/hcpe.h"
#include "engine/search/playout.h"
#include "engine/search/search.h"

namespace jiriki::selfplay {

std::optional<std::string> parse_opening(const std::string& line, const search::SearchParams& rules, Opening& out) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  size_t i = 0;
  if (i < words.size() && words[i] == "position") ++i;
  std::string sfen;
  if (i < words.size() && words[i] == "startpos") {
    sfen = "startpos";
    ++i;
  } else {
    if (i < words.size() && words[i] == "sfen") ++i;
    for (; i < words.size() && words[i] != "moves"; ++i) sfen += (sfen.empty() ? "" : " ") + words[i];
  }
  if (sfen.empty()) return "no position";
  Position pos;
  if (auto err = pos.set_sfen(sfen)) return "bad SFEN: " + *err;
  // Move number 1: a game's length counts from its start position, as its record does.
  if (auto err = pos.set_sfen(pos.sfen(false) + " 1")) return "bad SFEN: " + *err;
  try {
    encode_hcp(pos);
  } catch (const std::exception& e) {
    return "the position cannot be recorded: " + std::string(e.what());
  }
  MoveList moves;
  auto over = [&] { return search::judge_position(pos, rules, 3, moves) != search::Ending::NONE; };
  if (over()) return "the game is already over at the start position";
  Opening o;
  o.sfen = pos.sfen();
  if (i < words.size() && words[i] == "moves") ++i;
  for (; i < words.size(); ++i) {
    Move m = move_from_usi(pos, words[i]);
    if (m == MOVE_NONE || !pos.is_legal(m)) return "illegal move " + words[i] + " in " + pos.sfen();
    pos.do_move(m);
    o.moves.push_back(m);
    if (over()) return "the game is over after " + words[i];
  }
  out = std::move(o);
  return std::nullopt;
}

std::vector<Opening> load_openings(const std::string& path, const search::SearchParams& rules) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<Opening> openings;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    Opening o;
    if (auto err = parse_opening(line, rules, o)) throw std::runtime_error(path + ":" + std::to_string(number) + ": " + *err);
    openings.push_back(std::move(o));
  }
  if (openings.empty()) throw std::runtime_error(path + ": no opening in the file");
  return openings;
}

}  // namespace jiriki::selfplay
