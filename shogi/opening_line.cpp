// Opening lines: the words, the SFEN, the moves, the file.
#include "shogi/opening_line.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "shogi/movegen.h"

namespace jiriki {

std::string OpeningLine::text() const {
  std::string s = sfen == "startpos" ? "startpos" : "sfen " + sfen;
  if (!moves.empty()) s += " moves";
  for (Move m : moves) (s += ' ') += move_to_usi(m);
  return s;
}

std::optional<std::string> parse_opening_line(const std::string& line, const OpeningCheck& check, bool from_move_one,
                                              OpeningLine& out) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  size_t i = 0;
  if (i < words.size() && words[i] == "position") ++i;
  OpeningLine o;
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
  if (from_move_one) {
    if (auto err = pos.set_sfen(pos.sfen(false) + " 1")) return "bad SFEN: " + *err;
    o.sfen = pos.sfen();
  }
  if (auto err = check(pos)) return *err + " at the start position";
  if (i < words.size() && words[i] == "moves") ++i;
  for (; i < words.size(); ++i) {
    Move m = move_from_usi(pos, words[i]);
    if (m == MOVE_NONE || !pos.is_legal(m)) return "illegal move " + words[i] + " in " + pos.sfen();
    pos.do_move(m);
    o.moves.push_back(m);
    if (auto err = check(pos)) return *err + " after " + words[i];
  }
  out = std::move(o);
  return std::nullopt;
}

void read_opening_lines(const std::string& path,
                        const std::function<std::optional<std::string>(const std::string&)>& take) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::string line;
  bool any = false;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    if (auto err = take(line)) throw std::runtime_error(path + ":" + std::to_string(number) + ": " + *err);
    any = true;
  }
  if (!any) throw std::runtime_error(path + ": no opening in the file");
}

}  // namespace jiriki
