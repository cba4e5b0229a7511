// `jiriki records`: converts game records between hcpe3, hcpe, CSA and KIF, and summarises a set
// of record files (games, positions, results, how games ended).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>

#include "command/commands.h"
#include "common/args.h"
#include "common/atomic_file.h"
#include "shogi/csa.h"
#include "shogi/hcpe3.h"
#include "shogi/kif.h"
#include "shogi/record_files.h"

namespace fs = std::filesystem;

namespace jiriki {

namespace {

using Format = RecordFormat;

// Everything read from the inputs: whole games, and loose positions from hcpe files.
struct Loaded {
  std::vector<GameRecord> games;
  std::vector<Hcpe3Game> hcpe3_games;  // kept as read, so hcpe3 -> hcpe keeps visit-count targets
  std::vector<HcpeRecord> positions;
  int bad_files = 0;
};

Loaded load(const std::vector<fs::path>& files) {
  Loaded L;
  for (const auto& f : files) {
    std::optional<std::string> err;
    switch (record_format(f)) {
      case Format::HCPE: {
        // hcpe has no header: random bytes of the right length read as records. Each is decoded,
        // and the first that is no position ends the file with an error (those before are kept).
        std::vector<HcpeRecord> recs;
        err = read_hcpe_file(f.string(), recs);
        for (size_t i = 0; i < recs.size() && !err; ++i) {
          Position pos;
          std::optional<std::string> bad = decode_hcp(recs[i].hcp, pos);
          if (!bad && (recs[i].result & 3) > 2)
            bad = "result " + std::to_string(recs[i].result & 3) + " is none of 0, 1, 2";
          if (!bad && recs[i].move16 && !pos.is_legal(Move(recs[i].move16)))
            bad = "its move is not legal in " + pos.sfen();
          if (bad)
            err = f.string() + ": record " + std::to_string(i + 1) + " (byte " +
                  std::to_string(i * sizeof(HcpeRecord)) + ") is not an hcpe position: " + *bad;
          else L.positions.push_back(recs[i]);
        }
        break;
      }
      case Format::HCPE3: {
        std::vector<Hcpe3Game> games;
        err = read_hcpe3_file(f.string(), games);  // keeps the games before a bad one
        for (auto& g : games) {
          L.games.push_back(record_from_hcpe3(g));
          L.hcpe3_games.push_back(std::move(g));
        }
        break;
      }
      case Format::CSA:
      case Format::KIF: {
        GameRecord rec;
        std::string bytes = read_file_bytes(f);
        err = record_format(f) == Format::CSA ? read_csa(bytes, rec) : read_kif(bytes, rec);
        if (!err) L.games.push_back(std::move(rec));
        else err = f.string() + ": " + *err;
        break;
      }
      case Format::UNKNOWN: break;
    }
    if (err) {
      std::cerr << "warning: skipped (part of) " << *err << "\n";
      ++L.bad_files;
    }
  }
  return L;
}

int convert(int argc, char** argv) {
  Args args("jiriki records convert --to hcpe|hcpe3|csa|kif|openings -o OUT INPUT...",
            "Converts records. INPUT: files or directories of .hcpe3, .hcpe, .csa, .kif files.\n"
            "hcpe and hcpe3 output go to one file; csa and kif output to a directory, one file per game.\n"
            "hcpe output holds the positions meant for training (all positions of CSA/KIF games).\n"
            "openings: a file of start positions for `jiriki match --openings`, the games' own positions\n"
            "every --every plies (teacher games from the positions a network's own games reach).");
  std::string to, out;
  int64_t every = 10;
  args.bind("to", to, "output format: hcpe, hcpe3, csa, kif or openings")
      .bind("o", out, "output file or directory")
      .bind("every", every, "--to openings: an opening at every this many plies of each game")
      .positionals();
  if (int rc = args.parse(argc, argv, 2); rc >= 0) return rc;
  if (to.empty() || out.empty() || args.rest().empty()) {
    std::cerr << "error: --to, -o and at least one INPUT are required (see --help)\n";
    return 2;
  }
  if (to == "openings") {
    if (every < 1) throw std::invalid_argument("--every must be at least 1");
    Loaded L = load(expand_record_inputs(args.rest()));
    if (!L.positions.empty()) std::cerr << "warning: hcpe inputs hold positions, not games: left out\n";
    // "sfen START moves M1 ... Mk" for k = every, 2 every, ... before the game's last move, so that
    // every opening leaves a game to play.
    std::string text;
    size_t lines = 0;
    for (const GameRecord& g : L.games) {
      std::string line = "sfen " + g.start.sfen() + " moves";
      for (size_t k = 0; k + 1 < g.moves.size(); ++k) {
        line += " " + move_to_usi(g.moves[k]);
        if ((k + 1) % size_t(every) == 0) text += line + "\n", ++lines;
      }
    }
    write_file_atomically(out, text);
    std::cout << "wrote " << lines << " openings from " << L.games.size() << " games to " << out << "\n";
    return L.bad_files ? 1 : 0;
  }
  Format target = record_format(fs::path("x." + to));
  if (target == Format::UNKNOWN) {
    std::cerr << "error: unknown output format '" << to << "'\n";
    return 2;
  }
  Loaded L = load(expand_record_inputs(args.rest()));
  size_t written = 0;
  if (target == Format::HCPE) {
    std::vector<HcpeRecord> recs = L.positions;
    size_t from_hcpe3 = 0;
    for (const auto& g : L.hcpe3_games) append_training_positions(g, recs), ++from_hcpe3;
    // CSA/KIF games (those not read from hcpe3) contribute every position.
    for (size_t i = L.hcpe3_games.size(); i < L.games.size(); ++i) {
      try {
        append_training_positions(hcpe3_from_record(L.games[i]), recs);
      } catch (const std::exception& e) {
        std::cerr << "warning: game " << i + 1 << " skipped: " << e.what() << "\n";
      }
    }
    if (auto err = write_hcpe_file(out, recs)) throw std::runtime_error(*err);
    written = recs.size();
    std::cout << "wrote " << written << " positions to " << out << "\n";
  } else if (target == Format::HCPE3) {
    if (!L.positions.empty()) std::cerr << "warning: hcpe inputs hold positions, not games: left out of hcpe3\n";
    std::vector<Hcpe3Game> games = L.hcpe3_games;
    for (size_t i = L.hcpe3_games.size(); i < L.games.size(); ++i) {
      try {
        games.push_back(hcpe3_from_record(L.games[i]));
      } catch (const std::exception& e) {
        std::cerr << "warning: game " << i + 1 << " skipped: " << e.what() << "\n";
      }
    }
    if (auto err = write_hcpe3_file(out, games)) throw std::runtime_error(*err);
    written = games.size();
    std::cout << "wrote " << written << " games to " << out << "\n";
  } else {
    if (!L.positions.empty()) std::cerr << "warning: hcpe inputs hold positions, not games: left out\n";
    fs::create_directories(out);
    const char* ext = target == Format::CSA ? ".csa" : ".kif";
    for (size_t i = 0; i < L.games.size(); ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "game%06zu%s", i + 1, ext);
      std::string text = target == Format::CSA ? write_csa(L.games[i]) : write_kif(L.games[i]);
      write_file_atomically((fs::path(out) / name).string(), text);
    }
    written = L.games.size();
    std::cout << "wrote " << written << " games to " << out << "/\n";
  }
  return L.bad_files ? 1 : 0;
}

int summary(int argc, char** argv) {
  Args args("jiriki records summary INPUT...", "Counts games, positions, results and game ends in record files.");
  args.positionals();
  if (int rc = args.parse(argc, argv, 2); rc >= 0) return rc;
  if (args.rest().empty()) {
    std::cerr << "error: at least one INPUT is required\n";
    return 2;
  }
  auto files = expand_record_inputs(args.rest());
  Loaded L = load(files);
  size_t plies = 0, training = 0, min_len = SIZE_MAX, max_len = 0;
  std::map<std::string, size_t> results, ends;
  const char* END_NAMES[] = {"none",    "resign",   "mate",         "sennichite",           "declaration",
                             "impasse", "time up",  "illegal move", "Black illegal action", "White illegal action",
                             "abort",   "max moves"};
  for (const auto& g : L.games) {
    plies += g.moves.size();
    min_len = std::min(min_len, g.moves.size());
    max_len = std::max(max_len, g.moves.size());
    auto r = game_result(g);
    results[!r ? "unknown" : *r == DRAW ? "draw" : *r == BLACK_WIN ? "Black won" : "White won"]++;
    ends[END_NAMES[int(g.end)]]++;
  }
  for (const auto& g : L.hcpe3_games)
    for (const auto& m : g.moves) training += !m.candidates.empty();
  std::cout << "files: " << files.size() << (L.bad_files ? " (" + std::to_string(L.bad_files) + " with errors)" : "")
            << "\n";
  std::cout << "games: " << L.games.size() << "\n";
  if (!L.games.empty()) {
    std::cout << "moves: " << plies << " (average " << double(plies) / L.games.size() << ", shortest " << min_len
              << ", longest " << max_len << ")\n";
    std::cout << "results:";
    for (const auto& [k, v] : results) std::cout << "  " << k << " " << v;
    std::cout << "\nends:";
    for (const auto& [k, v] : ends) std::cout << "  " << k << " " << v;
    std::cout << "\n";
  }
  if (!L.hcpe3_games.empty()) std::cout << "hcpe3 positions with search targets: " << training << "\n";
  if (!L.positions.empty()) std::cout << "hcpe positions: " << L.positions.size() << "\n";
  return L.bad_files ? 1 : 0;
}

}  // namespace

int cmd_records(int argc, char** argv) {
  std::string what = argc >= 2 ? argv[1] : "";
  if (what == "convert") return convert(argc, argv);
  if (what == "summary") return summary(argc, argv);
  if (!what.empty() && what != "--help" && what != "-h") {
    std::cerr << "error: unknown records command '" << what << "' (expected convert or summary)\n";
    return 2;
  }
  std::cout << "usage: jiriki records convert|summary ...\n"
               "  convert --to hcpe|hcpe3|csa|kif|openings -o OUT INPUT...   convert record files\n"
               "  summary INPUT...                                   count games, results and game ends\n"
               "Run 'jiriki records convert --help' for details.\n";
  return what.empty() ? 2 : 0;
}

}  // namespace jiriki
