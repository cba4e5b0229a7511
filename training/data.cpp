// Reading and checking training data (see training/data.h).
#include "training/data.h"

#include <glob.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "common/fnv1a.h"
#include "nn/model_file.h"
#include "shogi/movegen.h"

namespace fs = std::filesystem;

namespace jiriki::training {

std::string DataIssue::to_string() const { return file + ": byte offset " + std::to_string(offset) + ": " + message; }

namespace {

bool is_hcpe3(const std::string& path) { return fs::path(path).extension() == ".hcpe3"; }
bool is_data_file(const fs::path& p) { return p.extension() == ".hcpe" || p.extension() == ".hcpe3"; }

// Adds the data files one path names (a file, or a directory searched recursively).
void add_path(const std::string& path, std::vector<std::string>& out) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw std::runtime_error(path + ": no such file or directory");
  if (fs::is_directory(st)) {
    std::vector<std::string> found;
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (e.is_regular_file() && is_data_file(e.path())) found.push_back(e.path().string());
    if (found.empty()) throw std::runtime_error(path + ": the directory holds no .hcpe or .hcpe3 files");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  } else {
    if (!is_data_file(path))
      throw std::runtime_error(path + ": unknown training data format (expected a .hcpe or .hcpe3 file)");
    out.push_back(path);
  }
}

// The positions of one file, with candidate indices local to the file.
struct FileData {
  std::vector<TrainingPosition> positions;
  std::vector<Hcpe3Candidate> candidates;
  std::vector<DataIssue> issues;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error(path + ": read error");
  return bytes;
}

// hcpe: fixed 38-byte records, each checked on its own. (engine's read_hcpe_file rejects a
// truncated file whole; here its complete records are kept.)
FileData read_hcpe(const std::string& path) {
  FileData d;
  const std::vector<uint8_t> bytes = read_bytes(path);
  const size_t n = bytes.size() / sizeof(HcpeRecord);
  d.positions.reserve(n);
  Position pos;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t offset = i * sizeof(HcpeRecord);
    TrainingPosition tp;
    std::memcpy(&tp.record, &bytes[offset], sizeof(HcpeRecord));
    const HcpeRecord& r = tp.record;
    if (auto err = decode_hcp(r.hcp, pos)) {
      d.issues.push_back({path, offset, "bad position: " + *err});
    } else if ((r.result & hcpe3::RESULT_MASK) > WHITE_WIN) {
      d.issues.push_back({path, offset, "bad game result byte " + std::to_string(r.result)});
    } else if (!pos.is_legal(Move(r.move16))) {
      d.issues.push_back({path, offset, "the move " + std::to_string(r.move16) + " is not legal in " + pos.sfen()});
    } else {
      d.positions.push_back(tp);
    }
  }
  if (bytes.size() % sizeof(HcpeRecord))
    d.issues.push_back(
        {path, n * sizeof(HcpeRecord),
         "truncated record: " + std::to_string(bytes.size() % sizeof(HcpeRecord)) + " of 38 bytes; skipped"});
  return d;
}

// hcpe3: parse_hcpe3 checks the framing, the start positions and the legality of every move and
// candidate; here each move with candidates becomes a position, and with `every_move` each other move
// too, flagged NO_OWN_TARGET.
FileData read_hcpe3(const std::string& path, bool every_move) {
  FileData d;
  const std::vector<uint8_t> bytes = read_bytes(path);
  std::vector<Hcpe3Game> games;
  std::optional<std::string> error = parse_hcpe3(bytes, games);
  uint64_t offset = 0;  // of the current game, then of the current move
  for (const Hcpe3Game& g : games) {
    Position pos;
    decode_hcp(g.start, pos);  // checked by parse_hcpe3
    offset += 36;
    for (const Hcpe3Move& m : g.moves) {
      uint32_t visits = 0;
      for (const auto& c : m.candidates) visits += c.visits;
      if (!m.candidates.empty() && visits == 0) {
        d.issues.push_back({path, offset, "a training move whose candidates have no visits; position skipped"});
      } else if (!m.candidates.empty() || every_move) {
        TrainingPosition tp;
        tp.record.hcp = encode_hcp(pos);
        tp.record.eval = m.eval;
        tp.record.move16 = m.move;
        tp.record.result = g.winner();
        if (m.candidates.empty()) tp.record.pad = NO_OWN_TARGET;
        tp.candidate_count = uint16_t(m.candidates.size());
        tp.candidate_begin = d.candidates.size();
        d.candidates.insert(d.candidates.end(), m.candidates.begin(), m.candidates.end());
        d.positions.push_back(tp);
      }
      offset += 6 + 4 * m.candidates.size();
      pos.do_move(m.move);
    }
  }
  if (error) d.issues.push_back({path, offset, *error + "; the rest of the file is skipped"});
  return d;
}

FileData read_file(const std::string& path, bool every_move) {
  return is_hcpe3(path) ? read_hcpe3(path, every_move) : read_hcpe(path);
}

int64_t own_targets(const std::vector<TrainingPosition>& positions) {
  return std::count_if(positions.begin(), positions.end(), has_own_target);
}

// Reads files[i] for every i in `which`, `threads` files at a time.
std::vector<FileData> read_files(const std::vector<std::string>& files, const std::vector<size_t>& which, int threads,
                                 bool every_move) {
  std::vector<FileData> out(which.size());
  std::vector<std::exception_ptr> errors(which.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next++) < which.size();) {
      try {
        out[k] = read_file(files[which[k]], every_move);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min<int>(threads, int(which.size())); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace

std::vector<std::string> expand_data_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    if (p.find_first_of("*?[") == std::string::npos) {
      add_path(p, out);
      continue;
    }
    glob_t g{};
    int rc = ::glob(p.c_str(), 0, nullptr, &g);
    if (rc == GLOB_NOMATCH) {
      globfree(&g);
      throw std::runtime_error(p + ": no file matches the pattern");
    }
    if (rc != 0) {
      globfree(&g);
      throw std::runtime_error(p + ": cannot expand the pattern");
    }
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);  // sorted by glob
    globfree(&g);
    for (const auto& m : matches) add_path(m, out);
  }
  std::set<std::string> seen;  // a file named twice is read once
  std::erase_if(out, [&](const std::string& f) { return !seen.insert(fs::weakly_canonical(f).string()).second; });
  return out;
}

Dataset load_dataset(const std::vector<std::string>& paths, const LoadOptions& options) {
  std::vector<std::string> files = expand_data_paths(paths);
  // Oldest first: by modification time, then by name.
  std::vector<std::pair<fs::file_time_type, std::string>> dated;
  for (auto& f : files) dated.emplace_back(fs::last_write_time(f), f);
  std::sort(dated.begin(), dated.end());
  for (size_t i = 0; i < files.size(); ++i) files[i] = dated[i].second;

  // Which files to read: all, or the newest ones until the window is full.
  std::vector<FileData> data(files.size());
  std::vector<bool> used(files.size(), false);
  const int threads = std::max(1, options.threads);
  if (options.window <= 0) {
    std::vector<size_t> all(files.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    auto read = read_files(files, all, threads, options.every_move);
    for (size_t i = 0; i < all.size(); ++i) data[i] = std::move(read[i]), used[i] = true;
  } else {
    int64_t have = 0;
    for (size_t end = files.size(); end > 0 && have < options.window;) {
      size_t begin = end > size_t(threads) ? end - threads : 0;
      std::vector<size_t> group;
      for (size_t i = begin; i < end; ++i) group.push_back(i);
      auto read = read_files(files, group, threads, options.every_move);
      // Newest first, so that the count stops where the window is full.
      for (size_t k = group.size(); k-- > 0 && have < options.window;) {
        have += own_targets(read[k].positions);
        data[group[k]] = std::move(read[k]);
        used[group[k]] = true;
      }
      end = begin;
    }
  }

  Dataset ds;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!used[i]) continue;
    FileData& d = data[i];
    ds.files.push_back(files[i]);
    for (TrainingPosition& tp : d.positions) {
      tp.candidate_begin += ds.candidates.size();
      ds.positions.push_back(tp);
    }
    ds.candidates.insert(ds.candidates.end(), d.candidates.begin(), d.candidates.end());
    ds.issues.insert(ds.issues.end(), d.issues.begin(), d.issues.end());
    d = FileData{};
  }
  if (options.window > 0 && own_targets(ds.positions) > options.window) {  // drop the oldest
    auto first = ds.positions.end();
    for (int64_t kept = 0; kept < options.window;) kept += has_own_target(*--first);
    ds.positions.erase(ds.positions.begin(), first);
  }
  if (ds.positions.empty()) throw std::runtime_error("no training positions in the data given");

  const uint64_t hp =
      fnv1a64(reinterpret_cast<const uint8_t*>(ds.positions.data()), ds.positions.size() * sizeof(TrainingPosition));
  const uint64_t hc =
      fnv1a64(reinterpret_cast<const uint8_t*>(ds.candidates.data()), ds.candidates.size() * sizeof(Hcpe3Candidate));
  ds.fingerprint = hp ^ (hc * FNV1A64_PRIME);
  return ds;
}

std::vector<HcpeRecord> random_game_records(int games, int plies, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<HcpeRecord> out;
  for (int g = 0; g < games; ++g) {
    Position pos;
    const uint8_t result = uint8_t(rng() % 3);
    for (int p = 0; p < plies; ++p) {
      MoveList moves = legal_moves(pos);
      if (moves.size() == 0) break;
      const Move m = moves.moves[rng() % moves.size()];
      HcpeRecord r;
      r.hcp = encode_hcp(pos);
      r.eval = int16_t(int(rng() % 2001) - 1000);
      r.move16 = m;
      r.result = result;
      out.push_back(r);
      pos.do_move(m);
    }
  }
  return out;
}

}  // namespace jiriki::training
