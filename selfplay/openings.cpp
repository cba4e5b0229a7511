// Reading and checking the openings that self-play games start from.
#include "selfplay/openings.h"

#include <stdexcept>

#include "shogi/hcpe.h"

namespace jiriki::selfplay {

std::optional<std::string> parse_opening(const std::string& line, const GameRules& rules, Opening& out) {
  return parse_opening_line(
      line,
      [&](const Position& pos) -> std::optional<std::string> {
        try {
          encode_hcp(pos);
        } catch (const std::exception& e) {
          return "the position cannot be recorded (" + std::string(e.what()) + ")";
        }
        if (judge_position(pos, rules) != Ending::NONE) return "the game is over";
        return std::nullopt;
      },
      true, out);
}

std::vector<Opening> load_openings(const std::string& path, const GameRules& rules) {
  std::vector<Opening> openings;
  read_opening_lines(path, [&](const std::string& line) -> std::optional<std::string> {
    Opening o;
    if (auto err = parse_opening(line, rules, o)) return err;
    openings.push_back(std::move(o));
    return std::nullopt;
  });
  return openings;
}

}  // namespace jiriki::selfplay
