// Game records of a match.
#include "match/records.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "shogi/csa.h"
#include "shogi/hcpe3.h"
#include "shogi/kif.h"

namespace fs = std::filesystem;

namespace jiriki::match {

namespace {

std::string numbered(const char* dir, int64_t number, const char* ext) {
  char name[48];
  std::snprintf(name, sizeof name, "%s/%06lld.%s", dir, static_cast<long long>(number), ext);
  return name;
}

}  // namespace

Hcpe3Game hcpe3_from_game(const PlayedGame& game) {
  Hcpe3Game h = hcpe3_from_record(game.record);
  for (size_t i = 0; i < h.moves.size(); ++i) {
    if (int(i) < game.opening_plies) {
      h.moves[i].candidates.clear();  // the opening's moves are no engine's choice
      continue;
    }
    h.moves[i].eval = int16_t(std::clamp(game.scores[i].value_or(0), -32767, 32767));
  }
  return h;
}

RecordWriter::RecordWriter(RecordPaths paths) : paths_(std::move(paths)) {
  if (!paths_.dir.empty()) {
    fs::create_directories(fs::path(paths_.dir) / "csa");
    if (paths_.kif) fs::create_directories(fs::path(paths_.dir) / "kif");
    std::ofstream(fs::path(paths_.dir) / "games.jsonl", std::ios::trunc);
  }
  for (const auto& f : {paths_.hcpe3, paths_.hcpe}) {
    if (f.empty()) continue;
    if (fs::path(f).has_parent_path()) fs::create_directories(fs::path(f).parent_path());
    std::ofstream out(f, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + f);
  }
}

std::string RecordWriter::write(const PlayedGame& game, const GameInfo& info) {
  std::lock_guard lock(mutex_);
  std::string warning;
  const Verdict& v = game.verdict;
  if (!paths_.dir.empty()) {
    std::string csa = numbered("csa", info.number, "csa");
    write_file_atomically((fs::path(paths_.dir) / csa).string(), write_csa(game.record));
    if (paths_.kif)
      write_file_atomically((fs::path(paths_.dir) / numbered("kif", info.number, "kif")).string(),
                            write_kif(game.record));
    nlohmann::json j = {
        {"game", info.number},
        {"pair", info.pair},
        {"black", game.record.black},
        {"white", game.record.white},
        {"opening", info.opening},
        {"result", !v.winner            ? "draw"
                   : *v.winner == BLACK ? "black"
                                        : "white"},
        {"winner",
         !v.winner ? nlohmann::json() : nlohmann::json(*v.winner == BLACK ? game.record.black : game.record.white)},
        {"reason", v.reason},
        {"plies", game.record.moves.size()},
        {"opening_plies", game.opening_plies},
        {"time_ms", {{"black", game.search[BLACK].ms}, {"white", game.search[WHITE].ms}}},
        {"nodes", {{"black", game.search[BLACK].nodes}, {"white", game.search[WHITE].nodes}}},
        // answered moves, and the moves that reported nodes with their time: summaries of this file
        // (`jiriki match --summarize`) then give the runner's very figures
        {"moves", {{"black", game.search[BLACK].moves}, {"white", game.search[WHITE].moves}}},
        {"nodes_moves", {{"black", game.search[BLACK].counted}, {"white", game.search[WHITE].counted}}},
        {"nodes_ms", {{"black", game.search[BLACK].nodes_ms}, {"white", game.search[WHITE].nodes_ms}}},
        {"nps_moves", {{"black", game.search[BLACK].move_nps}, {"white", game.search[WHITE].move_nps}}},
        {"csa", csa},
    };
    std::string line = j.dump() + "\n";
    append_to_file((fs::path(paths_.dir) / "games.jsonl").string(), line);
  }
  if (!paths_.hcpe3.empty() || !paths_.hcpe.empty()) {
    try {
      Hcpe3Game h = hcpe3_from_game(game);
      if (!paths_.hcpe3.empty()) {
        std::vector<uint8_t> bytes;
        append_hcpe3(h, bytes);
        append_to_file(paths_.hcpe3, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
      }
      if (!paths_.hcpe.empty()) {
        std::vector<HcpeRecord> recs;
        append_training_positions(h, recs);
        append_to_file(paths_.hcpe,
                       std::string_view(reinterpret_cast<const char*>(recs.data()), recs.size() * sizeof(HcpeRecord)));
      }
    } catch (const std::invalid_argument& e) {
      warning = "game " + std::to_string(info.number) + " left out of the training records: " + e.what();
    }
  }
  return warning;
}

}  // namespace jiriki::match
