// `jiriki play`: one game of the network against itself at a fixed number of playouts a move,
// shown move by move on the terminal and ending with the final board and the result. It is the
// quick start's main job: the shortest way to see that the engine plays shogi.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include "command/commands.h"
#include "command/options.h"
#include "common/args.h"
#include "engine/search/search.h"
#include "shogi/game_rules.h"
#include "shogi/kif.h"
#include "usi/network.h"

namespace jiriki {

namespace {

// Why the game ended, with `to_move` the side to move at the end; `winner` receives the winner or
// stays empty for a draw.
const char* ending_text(Ending e, Color to_move, std::optional<Color>& winner) {
  switch (e) {
    case Ending::REPETITION_DRAW: return "sennichite (fourfold repetition): draw";
    case Ending::REPETITION_WIN: winner = to_move; return "perpetual check by the other side";
    case Ending::REPETITION_LOSS: winner = ~to_move; return "perpetual check";
    case Ending::MATED: winner = ~to_move; return "checkmate";
    case Ending::DECLARATION: winner = to_move; return "entering-king declaration";
    case Ending::MAX_MOVES: return "maximum game length: draw";
    case Ending::NONE: break;
  }
  return "";
}

}  // namespace

int cmd_play(int argc, char** argv) {
  Args args("jiriki play [--model FILE] [--playouts N] [--max-plies N] [--backend auto|cpu|cuda] [--threads T]",
            "Plays one game of the network against itself at a fixed number of playouts a move and shows it "
            "move by move, then the final board and the result. Without --model it plays the default network.");
  args.option("model", usi::DEFAULT_MODEL, "model file (<default>: the network the engine plays with by default)")
      .option("playouts", "300", "playouts per move")
      .option("max-plies", std::to_string(GameRules{}.max_plies), "the game is a draw after this many plies")
      .option("batch", "16", "leaves per network call per thread")
      .option("sfen", "startpos", "start position");
  options::add_backend(args, nn::BackendUse::INFERENCE);
  options::add_gpus(args, "the CUDA device");
  options::add_threads(args, "search threads", "2");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  const int64_t playouts = args.integer("playouts"), max_plies = args.integer("max-plies");
  const int threads = options::threads(args), batch = int(args.integer("batch"));
  if (playouts < 1 || max_plies < 1 || threads < 1 || batch < 1) {
    std::cerr << "error: --playouts, --max-plies, --threads and --batch must be positive\n";
    return 2;
  }
  Position pos;
  const std::string start_sfen = args.str("sfen") == "startpos" ? Position::STARTPOS_SFEN : args.str("sfen");
  if (auto err = pos.set_sfen(start_sfen)) {
    std::cerr << "error: --sfen: " << *err << "\n";
    return 2;
  }

  const nn::Model model = usi::load_network(args.str("model"), args.str("backend"));
  std::string backend;
  auto queue =
      usi::make_backend_queue(model, args.str("backend"), options::gpu(args), batch, threads, nullptr, &backend);
  std::cout << usi::describe_network(args.str("model"), args.str("backend"), model) << "\n" << backend << "\n";
  queue->warm_up();

  search::Searcher searcher(size_t(1024) << 20);
  search::SearchParams params;
  params.threads = threads;
  params.batch_size = batch;
  params.rules.max_plies = int(max_plies);
  params.rules = params.rules.counted_from(pos);  // from --sfen, whatever its move number
  searcher.set_params(params);
  searcher.set_eval_queue(queue.get());

  std::vector<Move> moves;
  std::optional<Color> winner;
  std::string reason;
  for (;;) {
    const Color us = pos.side_to_move();
    if (auto e = judge_position(pos, params.rules); e != Ending::NONE) {
      reason = ending_text(e, us, winner);
      break;
    }
    searcher.set_position(start_sfen, moves);
    search::SearchLimits limits;
    limits.nodes = playouts;
    const auto t0 = std::chrono::steady_clock::now();
    const search::SearchResult r = searcher.run(limits);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.error.empty()) {
      std::cerr << "error: " << r.error << "\n";
      return 1;
    }
    if (r.kind == search::SearchResult::RESIGN) {
      winner = ~us;
      reason = std::string(us == BLACK ? "Black" : "White") + " resigned";
      break;
    }
    if (r.kind == search::SearchResult::WIN) {
      winner = us;
      reason = "entering-king declaration";
      break;
    }
    const float winrate = r.info.lines.empty() ? 0.5f : r.info.lines.front().winrate;
    char line[160];
    std::snprintf(line, sizeof line, "%4d. %s%-14s %-6s  win %5.1f%%  %lld playouts  %.2f s", int(moves.size()) + 1,
                  us == BLACK ? "▲" : "△", move_to_kif(pos, r.best, moves.empty() ? MOVE_NONE : moves.back()).c_str(),
                  move_to_usi(r.best).c_str(), 100.0 * winrate, (long long)r.info.nodes, secs);
    std::cout << line << std::endl;
    pos.do_move(r.best);
    moves.push_back(r.best);
  }
  std::cout << "\n" << board_diagram(pos) << "\n";
  std::cout << "result after " << moves.size() << " plies: "
            << (!winner            ? "draw"
                : *winner == BLACK ? "Black (▲) wins"
                                   : "White (△) wins")
            << " (" << reason << ")\n";
  return 0;
}

}  // namespace jiriki
