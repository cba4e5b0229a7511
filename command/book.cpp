// `jiriki book`: opening books in YaneuraOu's format: build one from game records, merge books,
// describe one, probe a position, import gpsshogi's book; `jiriki bench book` times lookups.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <unordered_set>

#include "book/build.h"
#include "book/gpsshogi.h"
#include "book/policy.h"
#include "command/commands.h"
#include "common/args.h"
#include "common/platform.h"
#include "engine/network_setup.h"
#include "engine/search/search.h"
#include "shogi/csa.h"
#include "shogi/hcpe3.h"
#include "shogi/kif.h"
#include "shogi/movegen.h"
#include "shogi/record_files.h"
#include "usi/engine.h"

namespace fs = std::filesystem;

namespace jiriki {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// `book build --think`: the positions one book move past the book (its leaves' children not in it)
// are searched with the engine, and each enters the book with its best moves: the value is the
// search's win rate as centipawns, the depth its principal variation's length, the count the
// playouts of the move.
struct ThinkOptions {
  int playouts = 1000;        // per position
  int multipv = 3;            // best moves kept per position
  int64_t max_positions = 0;  // 0: all
  std::string model = engine::DEFAULT_MODEL;
  std::string backend = "auto";
  int64_t hash_mib = 1024;  // search tree memory
};

int book_think(const std::vector<std::string>& inputs, const std::string& out_file, const ThinkOptions& o) {
  if (inputs.size() != 1) throw std::invalid_argument("--think extends one book: give one input book");
  book::Book b = book::Book::load(inputs[0]);
  const int playouts = o.playouts, multipv = o.multipv;
  const int64_t max_positions = o.max_positions;
  // The frontier: every legal book move's position that the book does not hold (by key, any move number).
  std::vector<Position> frontier;
  std::unordered_set<std::string> queued;
  for (const book::BookPosition& p : b.positions()) {
    Position pos;
    if (auto err = pos.set_sfen(p.key + " " + std::to_string(std::max(p.ply, 1)))) continue;
    for (const book::BookMove& m : p.moves) {
      if (!pos.is_legal(m.move)) continue;
      Position next = pos;
      next.do_move(m.move);
      const std::string key = next.sfen(false);
      if (legal_moves(next).size() == 0 || !b.find(key).empty() || !queued.insert(key).second) continue;
      frontier.push_back(next);
    }
  }
  if (max_positions > 0 && int64_t(frontier.size()) > max_positions) frontier.resize(size_t(max_positions));

  engine::NetworkSettings settings;
  settings.model = o.model;
  settings.backend = o.backend;
  const engine::NetworkSetup network = engine::NetworkSetup::resolve(settings);
  const nn::Model model = network.load_model();
  auto queue = network.make_queue(model);
  search::Searcher searcher(size_t(o.hash_mib) << 20);
  search::SearchParams params;
  params.threads = network.evaluators();
  params.batch_size = queue->max_batch();
  params.multipv = multipv;
  searcher.set_params(params);
  searcher.set_eval_queue(queue.get());
  queue->warm_up();
  std::cerr << network.network_line(model) << "; " << network.queue_line(*queue) << "\n"
            << "searching " << frontier.size() << " positions past the book's leaves, " << playouts
            << " playouts each\n";
  const auto t = Clock::now();
  auto last_report = t;
  for (size_t i = 0; i < frontier.size(); ++i) {
    const Position& pos = frontier[i];
    if (auto err = searcher.set_position(pos.sfen(), {})) throw std::runtime_error(*err);
    search::SearchLimits limits;
    limits.nodes = playouts;
    const search::SearchResult r = searcher.run(limits);
    book::BookPosition p{pos.sfen(false), pos.game_ply(), {}};
    for (const search::RootLine& l : r.info.lines) {
      book::BookMove m;
      m.move = l.move;
      m.ponder = l.pv.size() > 1 ? l.pv[1] : MOVE_NONE;
      m.value = l.mate > 0 ? 32000 - l.mate : l.mate < 0 ? -32000 - l.mate : search::winrate_to_cp(l.winrate);
      m.depth = int(l.pv.size());
      m.count = uint64_t(std::max(l.visits, 0));
      p.moves.push_back(m);
    }
    b.add(std::move(p));
    searcher.clear_tree();  // positions are unrelated: no subtree to keep
    if (seconds_since(last_report) > 5 || i + 1 == frontier.size()) {
      std::cerr << "searched " << i + 1 << "/" << frontier.size() << " positions in " << seconds_since(t) << " s\n";
      last_report = Clock::now();
    }
  }
  b.save(out_file);
  std::cout << "added " << frontier.size() << " searched positions; wrote " << b.size() << " positions to " << out_file
            << "\n";
  return 0;
}

int book_build(int argc, char** argv) {
  Args args(
      "jiriki book build [--min-count K] [--plies P] -o BOOK INPUT...\n"
      "       jiriki book build --think [--playouts N] [--multipv M] [--model FILE] -o BOOK BOOK_IN",
      "Builds a book from game records (hcpe3, CSA, KIF, or directories of them): every position met in\n"
      "the first P plies of the games and played from at least K times, each move with its count and a\n"
      "value (the records' mean engine score for the side that played it where they carry one, as hcpe3\n"
      "does, else that side's win rate as centipawns).\n"
      "With --think, extends a book instead: each position one book move past the book is searched with\n"
      "the engine for N playouts and added with its M best moves (value from the search's win rate).");
  book::BuildOptions opt;
  ThinkOptions think;
  std::string out_file;
  bool thinking = false;
  args.bind("min-count", opt.min_count, "K: positions played from fewer times are left out", 1)
      .bind("plies", opt.max_plies, "P: moves of each game that count", 1)
      .bind("o", out_file, "book file to write")
      .flag("think", thinking, "extend the input book by searching the positions just past it")
      .bind("playouts", think.playouts, "--think: playouts per position", 1)
      .bind("multipv", think.multipv, "--think: best moves kept per position", 1)
      .bind("max-positions", think.max_positions, "--think: search at most this many positions (0: all)", 0)
      .bind("model", think.model, "--think: network file (default: the engine's untrained stand-in)")
      .bind("backend", think.backend, "--think: auto, cpu, cuda or reference")
      .bind("hash", think.hash_mib, "--think: search tree memory in MiB", 1, int64_t(1) << 30)
      .positionals();
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (!args.has("o")) throw std::invalid_argument("-o BOOK is required");
  if (thinking) return book_think(args.rest(), out_file, think);
  if (args.rest().empty()) throw std::invalid_argument("no input records given");
  book::BookBuilder builder(opt);
  int bad = 0;
  const auto files = expand_record_inputs(args.rest());
  auto last_report = Clock::now();
  for (size_t i = 0; i < files.size(); ++i) {
    const fs::path& f = files[i];
    std::optional<std::string> err;
    switch (record_format(f)) {
      case RecordFormat::HCPE3: {
        std::vector<Hcpe3Game> games;
        err = read_hcpe3_file(f.string(), games);  // keeps the games before a bad one
        for (const Hcpe3Game& g : games) builder.add_hcpe3(g);
        break;
      }
      case RecordFormat::CSA:
      case RecordFormat::KIF: {
        GameRecord rec;
        const std::string bytes = read_file_bytes(f);
        err = record_format(f) == RecordFormat::CSA ? read_csa(bytes, rec) : read_kif(bytes, rec);
        if (!err) builder.add_record(rec);
        break;
      }
      default: err = "hcpe holds positions, not games: left out"; break;
    }
    if (err) {
      std::cerr << "warning: " << f.string() << ": " << *err << "\n";
      ++bad;
    }
    if (seconds_since(last_report) > 5) {
      std::cerr << "read " << i + 1 << "/" << files.size() << " files, " << builder.games() << " games\n";
      last_report = Clock::now();
    }
  }
  // Every input unreadable: no book is better than an empty one that looks like success.
  if (builder.games() == 0)
    throw std::runtime_error(std::to_string(bad) + " of " + std::to_string(files.size()) +
                             " input files could not be read and none held a game: no book written");
  const book::Book b = builder.build();
  b.save(out_file);
  std::size_t moves = 0;
  for (const auto& p : b.positions()) moves += p.moves.size();
  std::cout << "games " << builder.games() << ", positions seen " << builder.positions_seen() << ", written "
            << b.size() << " positions with " << moves << " moves to " << out_file
            << (bad ? " (" + std::to_string(bad) + " files with problems)" : "") << "\n";
  return 0;
}

int book_merge(int argc, char** argv) {
  Args args("jiriki book merge -o BOOK INPUT...",
            "Merges books: a position in several keeps every move; a move in several keeps the first\n"
            "book's line and the sum of the counts.");
  std::string out_file;
  args.bind("o", out_file, "book file to write").positionals();
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (!args.has("o") || args.rest().empty()) throw std::invalid_argument("-o BOOK and at least one input are required");
  book::Book out;
  for (const std::string& in : args.rest()) {
    const book::Book b = book::Book::load(in);
    for (const book::BookPosition& p : b.positions()) out.add(p);
  }
  out.save(out_file);
  std::cout << "wrote " << out.size() << " positions to " << out_file << "\n";
  return 0;
}

int book_info(int argc, char** argv) {
  Args args("jiriki book info BOOK",
            "Positions, moves, positions by move number and moves by search depth of a book (read whole, which\n"
            "checks every line); also says whether the file is sorted as BookOnTheFly needs.");
  args.positionals();
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (args.rest().size() != 1) throw std::invalid_argument("one book file expected");
  const std::string path = args.rest()[0];
  const book::Book b = book::Book::load(path);
  std::size_t moves = 0;
  std::map<int, std::size_t> by_ply, by_depth;
  for (const auto& p : b.positions()) {
    moves += p.moves.size();
    ++by_ply[p.ply];
    for (const auto& m : p.moves) ++by_depth[m.depth];
  }
  std::cout << path << ": " << b.size() << " positions, " << moves << " moves\n";
  std::cout << "positions by move number (the book's depth):";
  for (auto [ply, n] : by_ply) std::cout << " " << ply << ":" << n;
  std::cout << "\nmoves by search depth:";
  for (auto [depth, n] : by_depth) std::cout << " " << depth << ":" << n;
  std::cout << "\n";
  const bool sorted = b.text() == read_file_bytes(path);
  std::cout << "file as jiriki writes it (sorted, usable with BookOnTheFly): " << (sorted ? "yes" : "no") << "\n";
  return 0;
}

int book_probe(int argc, char** argv) {
  Args args("jiriki book probe BOOK [--sfen S] [--moves M...] [--on-the-fly] [--ignore-ply] [--no-flip]",
            "Lists the book moves of a position (the start position by default).");
  std::string sfen = "startpos", moves_text;
  bool on_the_fly = false;
  book::LookupOptions lo;
  args.bind("sfen", sfen, "the position")
      .bind("moves", moves_text, "moves played from it, space-separated")
      .flag("on-the-fly", on_the_fly, "search the file instead of loading it")
      .flag("ignore-ply", lo.ignore_ply, "match the position whatever its move number (IgnoreBookPly)")
      .flag("no-flip", lo.flipped, "do not look up White-to-move positions rotated (FlippedBook false)", false)
      .positionals();
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (args.rest().size() != 1) throw std::invalid_argument("one book file expected");
  Position pos;
  if (auto err = pos.set_sfen(sfen)) throw std::invalid_argument("--sfen: " + *err);
  std::istringstream ms(moves_text);
  for (std::string w; ms >> w;) {
    Move m = move_from_usi(pos, w);
    if (m == MOVE_NONE || !pos.is_legal(m)) throw std::invalid_argument("--moves: illegal move " + w);
    pos.do_move(m);
  }
  auto book = book::open_book(args.rest()[0], on_the_fly);
  const auto t = Clock::now();
  std::vector<book::BookMove> moves = book::probe(*book, pos, lo);
  const double us = seconds_since(t) * 1e6;
  book::sort_moves(moves);
  std::cout << pos.sfen() << "\n";
  if (moves.empty()) std::cout << "not in the book\n";
  uint64_t total = 0;
  for (const auto& m : moves) total += m.count;
  for (const auto& m : moves)
    std::printf("%-6s reply %-6s value %6d depth %3d count %8llu (%.1f%%)\n", move_to_usi(m.move).c_str(),
                m.ponder == MOVE_NONE ? "none" : move_to_usi(m.ponder).c_str(), m.value, m.depth,
                (unsigned long long)m.count, total ? 100.0 * double(m.count) / double(total) : 0.0);
  std::printf("lookup %.1f us (%s)\n", us, book->describe().c_str());
  return 0;
}

int book_import(int argc, char** argv) {
  Args args("jiriki book import [--from gpsshogi] [JOSEKI] -o BOOK",
            "Converts gpsshogi's opening book (Debian package gpsshogi-data) into a YaneuraOu book: every\n"
            "move of positive weight, with the weight as its count. The converted book keeps the package's\n"
            "licence: it is not shipped with jiriki.");
  std::string from = "gpsshogi", out_file;
  args.bind("from", from, "the source format (gpsshogi's joseki.dat)")
      .bind("o", out_file, "book file to write")
      .positionals();
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  if (from != "gpsshogi") throw std::invalid_argument("--from: only gpsshogi is known");
  if (!args.has("o")) throw std::invalid_argument("-o BOOK is required");
  if (args.rest().size() > 1) throw std::invalid_argument("at most one input file");
  const std::string in = args.rest().empty() ? "/usr/share/gpsshogi-data/data/joseki.dat" : args.rest()[0];
  book::GpsImportStats st;
  const auto t = Clock::now();
  const book::Book b = book::import_gpsshogi(in, &st);
  b.save(out_file);
  std::size_t moves = 0;
  for (const auto& p : b.positions()) moves += p.moves.size();
  std::cout << in << ": " << st.states << " states, " << st.moves << " moves; " << st.reached
            << " states reached from the start, " << st.zero_weight << " moves of weight 0 left out\n"
            << "wrote " << b.size() << " positions with " << moves << " moves to " << out_file << " in "
            << seconds_since(t) << " s\n";
  return 0;
}

}  // namespace

int cmd_book(int argc, char** argv) {
  const std::string what = argc >= 2 ? argv[1] : "";
  if (what == "build") return book_build(argc - 1, argv + 1);
  if (what == "merge") return book_merge(argc - 1, argv + 1);
  if (what == "info") return book_info(argc - 1, argv + 1);
  if (what == "probe") return book_probe(argc - 1, argv + 1);
  if (what == "import") return book_import(argc - 1, argv + 1);
  if (!what.empty() && what != "--help" && what != "-h") {
    std::cerr << "error: unknown book command '" << what << "' (expected build, merge, info, probe or import)\n";
    return 2;
  }
  std::cout << "usage: jiriki book build|merge|info|probe|import ...\n"
               "  build -o BOOK [--min-count K] [--plies P] INPUT...   a book from game records\n"
               "  build --think [--playouts N] -o BOOK BOOK_IN          extend a book by searching past its leaves\n"
               "  merge -o BOOK INPUT...                                 merge books\n"
               "  info BOOK                                              positions, moves, move numbers\n"
               "  probe BOOK [--sfen S] [--moves M...]                   the book moves of a position\n"
               "  import [JOSEKI] -o BOOK                                gpsshogi's joseki.dat to our format\n"
               "Books are in YaneuraOu's text format (#YANEURAOU-DB2016 1.00). Run 'jiriki book build --help' etc.\n";
  return what.empty() ? 2 : 0;
}

int bench_book(int argc, char** argv) {
  Args args("jiriki bench book [--positions N] [--file PATH] [--lookups L] [--seed S]",
            "Writes a book of N positions from random games (kept in PATH, or a temporary file removed\n"
            "afterwards), then times loading it and looking positions up in memory and on the fly.");
  int64_t n = 1000000, lookups = 20000;
  std::string book_path;
  uint64_t seed = 1;
  args.bind("positions", n, "positions of the generated book", 1)
      .bind("file", book_path, "where to write the book (default: a temporary file, removed at the end)")
      .bind("lookups", lookups, "lookups timed (half of them positions in the book, half not)", 2)
      .bind("seed", seed, "seed of the random games");
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;
  const bool temporary = !args.has("file");
  const std::string path =
      temporary ? (fs::temp_directory_path() / ("jiriki_bench_book_" + std::to_string(process_id()) + ".db")).string()
                : book_path;
  SplitMix64 rng{seed};
  // Random games of up to 40 plies: almost every position is new, as in a large real book.
  book::Book b;
  std::vector<Position> hits, misses;
  std::unordered_set<uint64_t> seen;
  auto t = Clock::now();
  for (int64_t added = 0; added < n;) {
    Position pos;
    for (int ply = 0; ply < 40 && added < n; ++ply) {
      MoveList moves = legal_moves(pos);
      if (moves.size() == 0) break;
      const Move m = moves.moves[book::random_below(rng, moves.size())];
      if (seen.insert(pos.key()).second) {  // each position once (the start and early transpositions recur)
        b.add({pos.sfen(false), pos.game_ply(), {book::BookMove{m, MOVE_NONE, 0, 0, 1}}});
        ++added;
        if (int64_t(hits.size()) < lookups / 2 &&
            book::random_below(rng, uint64_t(std::max<int64_t>(n / lookups, 1))) == 0)
          hits.push_back(pos);
      }
      pos.do_move(m);
    }
    if (int64_t(misses.size()) < lookups / 2) {  // a position one random move past a game's end: not in the book
      MoveList moves = legal_moves(pos);
      if (moves.size() > 0) {
        pos.do_move(moves.moves[book::random_below(rng, moves.size())]);
        misses.push_back(pos);
      }
    }
  }
  b.save(path);
  std::printf("generated %zu positions (%.1f MB) in %.1f s: %s\n", b.size(), double(fs::file_size(path)) / 1e6,
              seconds_since(t), path.c_str());
  auto time_lookups = [&](const book::BookSource& src, const char* what) {
    book::LookupOptions lo;
    size_t found = 0, missed = 0;
    const auto t0 = Clock::now();
    for (const Position& p : hits) found += !book::probe(src, p, lo).empty();
    const double hit_us = seconds_since(t0) * 1e6 / double(std::max<size_t>(hits.size(), 1));
    const auto t1 = Clock::now();
    for (const Position& p : misses) missed += book::probe(src, p, lo).empty();
    const double miss_us = seconds_since(t1) * 1e6 / double(std::max<size_t>(misses.size(), 1));
    std::printf(
        "%-10s lookup: %.2f us per position in the book (%zu/%zu found), %.2f us per position not in it (%zu/%zu)\n",
        what, hit_us, found, hits.size(), miss_us, missed, misses.size());
  };
  t = Clock::now();
  const book::Book loaded = book::Book::load(path);
  std::printf("in memory: loaded in %.2f s\n", seconds_since(t));
  time_lookups(loaded, "in memory");
  t = Clock::now();
  const book::BookFile file(path);
  std::printf("on the fly: opened in %.6f s\n", seconds_since(t));
  time_lookups(file, "on the fly");

  // The engine as a GUI drives it: from `go` to `bestmove` at positions of the book (the book path
  // answers within the call, so the call's time is the answer's).
  for (bool on_the_fly : {false, true}) {
    std::ostringstream out;
    usi::Engine engine(out);
    for (const char* c : {"setoption name BookMoves value 10000", "setoption name Threads value 1"}) engine.command(c);
    engine.command("setoption name BookFile value " + path);
    engine.command(std::string("setoption name BookOnTheFly value ") + (on_the_fly ? "true" : "false"));
    t = Clock::now();
    engine.command("isready");
    const double ready_s = seconds_since(t);
    std::vector<double> ms;
    int from_book = 0;
    for (size_t i = 0; i < hits.size() && i < 1000; ++i) {
      engine.command("position sfen " + hits[i].sfen());
      out.str("");
      const auto t0 = Clock::now();
      engine.command("go btime 0 wtime 0 byoyomi 1000");
      ms.push_back(seconds_since(t0) * 1e3);
      from_book += out.str().find("info string book move") != std::string::npos;
      engine.command("stop");
    }
    std::sort(ms.begin(), ms.end());
    std::printf(
        "usi go -> bestmove (%s, isready %.1f s): %d/%zu answered from the book, median %.3f ms, "
        "99th percentile %.3f ms, max %.3f ms\n",
        on_the_fly ? "on the fly" : "in memory", ready_s, from_book, ms.size(), ms[ms.size() / 2],
        ms[ms.size() * 99 / 100], ms.back());
    engine.command("quit");
  }
  if (temporary) fs::remove(path);
  return 0;
}

}  // namespace jiriki
