// `jiriki perft` and `jiriki bench perft`: leaf counts of the legal move tree.
#include <chrono>
#include <iostream>
#include <optional>

#include "command/commands.h"
#include "common/args.h"
#include "shogi/movegen.h"

namespace jiriki {

// Sets up `pos` from an SFEN and a list of USI moves; throws with a message naming the problem.
static void setup(Position& pos, const std::string& sfen, const std::vector<std::string>& moves) {
  if (auto err = pos.set_sfen(sfen)) throw std::runtime_error(*err);
  for (const auto& text : moves) {
    Move m = move_from_usi(pos, text);
    if (m == MOVE_NONE) throw std::runtime_error("malformed move '" + text + "'");
    if (!pos.is_legal(m)) throw std::runtime_error("illegal move '" + text + "' in " + pos.sfen());
    pos.do_move(m);
  }
}

int cmd_perft(int argc, char** argv) {
  Args args("jiriki perft [--sfen S] [--moves M...] --depth N [--divide]",
            "Counts the leaves of the legal move tree to the given depth.");
  std::string sfen = "startpos";
  std::vector<std::string> moves;
  std::optional<int> depth;
  bool divide = false;
  args.bind("sfen", sfen, "start position")
      .bind("moves", moves, "USI moves played from the start position")
      .bind("depth", depth, "depth in plies (required)")
      .flag("divide", divide, "print the count below each legal move");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (!depth) {
    std::cerr << "error: --depth is required\n";
    return 2;
  }
  if (*depth < 1 || *depth > 20) {
    std::cerr << "error: --depth must be between 1 and 20\n";
    return 2;
  }
  const int plies = *depth;
  Position pos;
  setup(pos, sfen, moves);
  auto t0 = std::chrono::steady_clock::now();
  uint64_t total = 0;
  if (divide) {
    for (Move m : legal_moves(pos)) {
      pos.do_move(m);
      uint64_t n = perft(pos, plies - 1);
      pos.undo_move();
      total += n;
      if (plies == 1) std::cout << move_to_usi(m) << "\n";
      else std::cout << move_to_usi(m) << ": " << n << "\n";
    }
  } else {
    total = perft(pos, plies);
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "perft(" << plies << ") = " << total << "  (" << s << " s, " << uint64_t(total / std::max(s, 1e-9))
            << " leaves/s)\n";
  return 0;
}

int bench_perft(int argc, char** argv) {
  Args args("jiriki bench perft", "Single-threaded perft with bulk counting on two standard positions.");
  int depth_start = 6, depth_matsuri = 4;
  args.bind("depth-start", depth_start, "depth for the start position", 0, 20)
      .bind("depth-matsuri", depth_matsuri, "depth for the 'matsuri' position", 0, 20);
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  struct Case {
    const char* name;
    const char* sfen;
    int depth;
  };
  const Case cases[] = {
      {"startpos", Position::STARTPOS_SFEN, depth_start},
      {"matsuri", "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w GR5pnsg 1", depth_matsuri},
  };
  for (const Case& c : cases) {
    Position pos;
    setup(pos, c.sfen, {});
    auto t0 = std::chrono::steady_clock::now();
    uint64_t n = perft(pos, c.depth);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << c.name << " perft(" << c.depth << ") = " << n << "  " << s << " s  " << uint64_t(n / s)
              << " leaves/s\n";
  }
  return 0;
}

}  // namespace jiriki
