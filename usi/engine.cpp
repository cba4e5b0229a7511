// The USI command loop (see engine.h).
#include "usi/engine.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/build_info.h"
#include "common/cpus.h"
#include "common/platform.h"
#include "engine/network_setup.h"
#include "shogi/movegen.h"

namespace jiriki::usi {

namespace {

// Splits off the first word of a line; `rest` keeps the remainder's spacing (file names).
std::string first_word(const std::string& line, std::string* rest) {
  size_t b = line.find_first_not_of(" \t");
  if (b == std::string::npos) {
    rest->clear();
    return "";
  }
  size_t e = line.find_first_of(" \t", b);
  std::string word = line.substr(b, e == std::string::npos ? std::string::npos : e - b);
  size_t r = e == std::string::npos ? std::string::npos : line.find_first_not_of(" \t", e);
  *rest = r == std::string::npos ? "" : line.substr(r);
  return word;
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream is(s);
  std::vector<std::string> w;
  for (std::string t; is >> t;) w.push_back(t);
  return w;
}

std::optional<int64_t> parse_int(const std::string& s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

Engine::Engine(std::ostream& out) : out_(out), searcher_(size_t(1024) << 20), mate_solver_(64) {
  EngineSettings& e = settings_;
  search::SearchParams& p = settings_.search;
  search::TimeOptions& t = settings_.time;
  Options& o = options_;
  o.spin("USI_Hash", e.hash_mb, 1, 1 << 20, "search tree memory in MiB");
  o.check("USI_Ponder", e.ponder, "think on the opponent's time");
  o.spin("Threads", e.threads, 0, 256, "search threads (0: 8 on the GPU, 2 on a CPU backend)");
  o.string("ModelFile", e.model, "the network file (<default>: the network built in)");
  o.combo("Backend", e.backend,
          {{"auto", "auto"},
           {"cpu", "cpu"},
           {"cuda", "cuda"},
           {"simd", "simd"},
           {"onednn", "onednn"},
           {"reference", "reference"}},
          "where the network runs (auto: the GPU when one is usable, else the CPU)");
  o.combo("Precision", e.precision,
          {{"auto", nn::Precision::AUTO},
           {"fp32", nn::Precision::FP32},
           {"bf16", nn::Precision::BF16},
           {"int8", nn::Precision::INT8}},
          "the network's arithmetic (auto: bf16 on the GPU; on a CPU int8 for a ReLU network where it has AVX2, else "
          "bf16 where it has AVX-512 bf16, else fp32)");
  o.spin("GPU", e.gpu, 0, 15, "the CUDA device");
  o.spin("BatchSize", e.batch, 0, 1024, "leaves per network call per thread (0: 16 on a CPU backend, 128 on the GPU)");
  o.spin("MultiPV", p.multipv, 1, 100, "best moves reported");
  o.spin("NetworkDelay", t.network_delay, 0, 10000, "ms of usual lag between GUI and engine");
  o.spin("NetworkDelay2", t.network_delay2, 0, 10000, "ms of the worst lag, kept in hand");
  o.spin("MinimumThinkingTime", t.minimum_thinking_time, 0, 600000, "ms of thought at least");
  o.spin("SlowMover", t.slow_mover, 1, 1000, "per cent of the optimum time used");
  o.spin("ResignValue", e.resign_cp, 0, 99999, "resign at an evaluation of minus this, in centipawns (99999: never)");
  o.spin("Resign_Threshold", e.resign_permille, 0, 1000, "resign below this win rate, per mille (0: never)");
  o.spin("DrawValueBlack", p.draw_value_black, 0, 1000, "a draw's win rate playing Black, per mille", 1000);
  o.spin("DrawValueWhite", p.draw_value_white, 0, 1000, "a draw's win rate playing White, per mille", 1000);
  o.spin("MaxMovesToDraw", p.rules.max_plies, 0, 100000, "the move number at which a game is drawn (0: no limit)");
  o.combo("EnteringKingRule", p.rules.entering_king_rule,
          {{"NoEnteringKing", EnteringKingRule::NONE},
           {"CSARule27", EnteringKingRule::POINT27},
           {"CSARule24", EnteringKingRule::POINT24}},
          "the entering-king declaration rule");
  o.spin("C_init", p.c_init, 0, 10000, "PUCT c_init, in hundredths", 100);
  o.spin("C_base", p.c_base, 1, 100000000, "PUCT c_base");
  o.spin("C_fpu_reduction", p.fpu_reduction, 0, 100, "first-play urgency reduction, in hundredths", 100);
  o.spin("C_fpu_reduction_root", p.fpu_reduction_root, 0, 100, "the same at the root, in hundredths", 100);
  o.spin("Softmax_Temperature", p.softmax_temperature, 1, 10000, "policy softmax temperature, in hundredths", 100);
  o.combo("LeafMateSearchPly", e.leaf_mate_plies,
          {{"auto", EngineSettings::AUTO_PLIES}, {"0", 0}, {"1", 1}, {"3", 3}, {"5", 5}},
          "mate search plies at new leaves (auto: 3 on a CPU backend, 1 on the GPU)");
  o.check("RootMateSearch", p.root_mate_search, "a df-pn mate search of the root in a thread of its own");
  o.check("RootThreatSearch", p.root_threat_search, "with RootMateSearch: prove lost the root moves allowing a mate");
  o.spin("PV_Interval", e.pv_interval_ms, 100, 100000, "ms between info lines");
  book_.add_options(o);
  // The names dlshogi and YaneuraOu users already type, where the meaning is the same.
  o.alias("DNN_Model", "ModelFile");
  o.alias("DNN_Batch_Size", "BatchSize");
  o.alias("UCT_Threads", "Threads");
  o.alias("PvInterval", "PV_Interval");
}

Engine::~Engine() { finish(true); }

const char* state_name(State s) {
  switch (s) {
    case State::IDLE: return "idle";
    case State::THINKING: return "thinking";
    case State::PONDERING: return "pondering";
  }
  return "?";
}

void Engine::send(const std::string& line) {
  std::lock_guard lock(out_mutex_);
  out_ << line << std::endl;
}

void Engine::error(const std::string& message) {
  constexpr size_t MAX = 300;  // room for an SFEN and a move list's worth of context
  if (message.size() <= MAX) return send("info string error: " + message);
  send("info string error: " + message.substr(0, MAX) + "... (" + std::to_string(message.size()) + " characters, cut)");
}

int Engine::loop(std::istream& in) {
  // Reading a command must not flush the output behind the back of the threads that write answers:
  // a tied stream flushes without their lock, and a racing flush writes a line twice.
  in.tie(nullptr);
  for (std::string line; std::getline(in, line);)
    if (!command(line)) return 0;
  finish(true);  // end of input: a GUI that went away
  return 0;
}

State Engine::state() {
  settle();
  return state_;
}

void Engine::settle() {
  if (state_ == State::THINKING && !searcher_.searching() && !mate_running_) finish(true);
}

void Engine::finish(bool send_answer) {
  quiet_ = !send_answer;
  searcher_.stop();
  mate_stop_ = true;
  searcher_.wait();
  if (mate_thread_.joinable()) mate_thread_.join();
  quiet_ = false;
  state_ = State::IDLE;
}

// Every command's effect in every state. Commands not listed by state act the same in all three:
//   usi, setoption, position     the same in every state; a search already running is not changed
//   isready                      idle: loads the network if an option changed; then readyok
//   unknown or malformed         an error line; nothing else changes
bool Engine::command(const std::string& raw) {
  std::string line = raw;
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  std::string args;
  const std::string cmd = first_word(line, &args);
  if (cmd.empty()) return true;
  settle();
  const State s = state_;
  try {
    if (cmd == "usi") cmd_usi();
    else if (cmd == "isready") cmd_isready();
    else if (cmd == "setoption") cmd_setoption(args);
    else if (cmd == "position") cmd_position(args);
    else if (cmd == "usinewgame") {
      // idle: a fresh tree. thinking, pondering: the search answers first (the GUI skipped stop).
      finish(true);
      searcher_.clear_tree();
    } else if (cmd == "go") {
      // idle: -> thinking, or pondering for go ponder; no position: bestmove resign at once.
      // thinking, pondering: the running search answers first (each go gets its own bestmove).
      if (s != State::IDLE) {
        send(std::string("info string go while ") + state_name(s) + ": the running search answers first");
        finish(true);
      }
      cmd_go(args);
    } else if (cmd == "stop") {
      // idle: nothing. thinking, pondering: -> idle, bestmove sent.
      if (s != State::IDLE) finish(true);
    } else if (cmd == "ponderhit") {
      // pondering: -> thinking, the clock runs from now (the clock given with ponderhit, if any, replaces
      // that of go ponder). idle, thinking: nothing.
      if (s == State::PONDERING) cmd_ponderhit(args);
    } else if (cmd == "gameover") {
      // idle: nothing. thinking, pondering: -> idle, and no bestmove after the game ended.
      if (s != State::IDLE) finish(false);
    } else if (cmd == "quit") {
      finish(true);
      return false;
    } else error("unknown command '" + cmd + "'");
  } catch (const std::exception& e) {
    error(cmd + ": " + e.what());
  } catch (...) {
    error(cmd + ": unexpected failure");
  }
  return true;
}

void Engine::cmd_usi() {
  send("id name jiriki");
  send("id author the jiriki authors");
  for (const Option& o : options_.all()) send(o.usi_line());
  send("usiok");
}

// engine_options.txt beside the executable, read at every isready as YaneuraOu does, so that options
// can be set without a GUI. Each line is `Name value`, `Name=value` or `setoption name Name value V`;
// blank lines and lines starting with # are skipped. Its values replace those the GUI set.
void Engine::read_engine_options() {
  const std::filesystem::path exe = executable_path();
  if (exe.empty()) return;
  const std::filesystem::path file = exe.parent_path() / "engine_options.txt";
  std::ifstream in(file);
  if (!in) return;
  int set = 0, line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    std::string rest;
    const std::string first = first_word(line, &rest);
    if (first.empty() || first[0] == '#') continue;
    std::string name, value;
    if (first == "setoption" || first == "option") {
      if (!parse_setoption(rest, &name, &value)) {
        error(file.string() + " line " + std::to_string(line_number) + ": expected 'setoption name <id> value <x>'");
        continue;
      }
    } else {
      const size_t eq = first.find('=');
      name = first.substr(0, eq);
      value = eq == std::string::npos ? rest : first.substr(eq + 1) + (rest.empty() ? "" : " " + rest);
    }
    if (auto err = set_option(name, value)) {
      error(file.string() + " line " + std::to_string(line_number) + ": " + *err);
      continue;
    }
    ++set;
  }
  send("info string " + file.string() + ": " + std::to_string(set) + " options set");
}

std::optional<std::string> Engine::set_option(const std::string& name, const std::string& value) {
  if (auto err = options_.set(name, value)) return err;
  // These shape the evaluators: the network is made again at the next isready or go.
  const std::string c = *options_.canonical(name);
  if (c == "ModelFile" || c == "Backend" || c == "Precision" || c == "GPU" || c == "BatchSize" || c == "Threads")
    network_dirty_ = true;
  return std::nullopt;
}

void Engine::cmd_isready() {
  read_engine_options();
  if (state_ == State::IDLE) ensure_network();
  book_.prepare([this](const std::string& l) { send(l); });
  send("readyok");
}

// `name NAME [value VALUE]`; the value is the rest of the line (paths may hold spaces).
bool Engine::parse_setoption(const std::string& args, std::string* name_out, std::string* value_out) {
  std::string rest;
  if (first_word(args, &rest) != "name") return false;
  std::string name, value;
  size_t v = rest.find(" value ");
  if (v == std::string::npos) {
    name = rest;
    if (name.ends_with(" value")) name.resize(name.size() - 6);
  } else {
    name = rest.substr(0, v);
    value = rest.substr(v + 7);
    size_t b = value.find_first_not_of(" \t"), e = value.find_last_not_of(" \t");
    value = b == std::string::npos ? "" : value.substr(b, e - b + 1);
  }
  while (!name.empty() && name.back() == ' ') name.pop_back();
  *name_out = name;
  *value_out = value;
  return true;
}

void Engine::cmd_setoption(const std::string& args) {
  std::string name, value;
  if (!parse_setoption(args, &name, &value)) return error("setoption: expected 'setoption name <id> [value <x>]'");
  if (name.empty()) return error("setoption: no option name");
  if (auto err = set_option(name, value)) return error(*err);
}

void Engine::cmd_position(const std::string& args) {
  // Whatever happens below, the previous position is gone: a go after a rejected position must
  // not play a move of the one before it.
  game_.reset();
  no_game_reason_ = "the last position command was rejected";
  std::vector<std::string> w = words(args);
  size_t i = 0;
  Game game;
  if (i < w.size() && w[i] == "startpos") {
    game.sfen = Position::STARTPOS_SFEN;
    ++i;
  } else if (i < w.size() && w[i] == "sfen") {
    for (++i; i < w.size() && w[i] != "moves"; ++i) game.sfen += (game.sfen.empty() ? "" : " ") + w[i];
  } else {
    return error("position: expected 'position startpos|sfen <sfen> [moves ...]'");
  }
  if (auto err = game.pos.set_sfen(game.sfen)) return error("position: " + *err);
  if (i < w.size()) {
    if (w[i] != "moves") return error("position: expected 'moves', got '" + w[i] + "'");
    for (++i; i < w.size(); ++i) {
      Move m = move_from_usi(game.pos, w[i]);
      if (m == MOVE_NONE) return error("position: malformed move '" + w[i] + "'");
      if (!game.pos.is_legal(m)) return error("position: illegal move '" + w[i] + "' in " + game.pos.sfen());
      game.pos.do_move(m);
      game.moves.push_back(m);
    }
  }
  game_ = std::move(game);
}

bool Engine::ensure_network() {
  if (!network_dirty_ && queue_) return true;
  searcher_.wait();
  searcher_.set_eval_queue(nullptr);
  queue_.reset();  // frees the old network's memory (GPU included) before the new one is made
  try {
    const EngineSettings& e = settings_;
    engine::NetworkSettings settings;
    settings.model = e.model;
    settings.backend = e.backend;
    settings.precision = e.precision;
    settings.gpu = e.gpu;
    settings.batch = e.batch;
    settings.evaluators = e.threads;
    const engine::NetworkSetup network = engine::NetworkSetup::resolve(settings);
    const nn::Model model = network.load_model();
    queue_ = network.make_queue(model);
    queue_->warm_up();  // here, not in the first timed search
    search_threads_ = network.evaluators();
    gpu_queue_ = network.on_gpu();
    send("info string " + build_info());
    send("info string " + network.network_line(model));
    const UsableCpus cpus = usable_cpus();
    send("info string CPUs: " + std::to_string(cpus.count) + " (" + cpus.why + ")");
    send("info string " + network.queue_line(*queue_));
    send("info string leaf mate search " + std::to_string(leaf_mate_plies()) + " plies");
  } catch (const std::exception& e) {
    error("cannot load the network: " + std::string(e.what()));
    return false;
  }
  searcher_.set_eval_queue(queue_.get());
  searcher_.clear_tree();  // values from another network
  network_dirty_ = false;
  return true;
}

int Engine::leaf_mate_plies() const {
  const int plies = settings_.leaf_mate_plies;
  return plies == EngineSettings::AUTO_PLIES ? (gpu_queue_ ? 1 : 3) : plies;
}

search::SearchParams Engine::search_params() const {
  search::SearchParams p = settings_.search;
  p.threads = queue_ ? search_threads_ : 1;
  p.batch_size = queue_ ? queue_->max_batch() : 1;
  p.leaf_mate_plies = leaf_mate_plies();
  // Centipawns to a win rate, the inverse of search::winrate_to_cp.
  p.resign_value = std::max(float(settings_.resign_permille) / 1000.0f,
                            1.0f / (1.0f + std::exp(float(settings_.resign_cp) / 756.0f)));
  return p;
}

void Engine::cmd_go(const std::string& args) {
  std::vector<std::string> w = words(args);
  const auto mate = std::find(w.begin(), w.end(), "mate");
  if (mate != w.end()) return start_mate(mate + 1 == w.end() ? "" : *(mate + 1));
  if (!game_) {
    send("info string error: go: no position to play in (" + no_game_reason_ + "): bestmove resign");
    return send("bestmove resign");
  }
  try {
    start_search(w);  // nothing throws once the search has started
  } catch (const std::exception& e) {
    error(std::string("go: ") + e.what() + ": bestmove resign");
    send("bestmove resign");
  }
}

// Reads the clock words of a `go` or of a `ponderhit` (YaneuraOu's extension: a GUI that sent
// `go ponder` without a clock sends it there). Returns whether any clock word was given. A word or
// number that cannot be read counts as a clock word (a zero clock at worst: the quickest answer),
// never as an endless search a GUI would wait on.
bool Engine::read_clock(const std::string& cmd, const std::vector<std::string>& w, search::GoClock* clock,
                        search::SearchLimits* limits) {
  bool timed = false;
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string& k = w[i];
    if (k == "infinite") {
      limits->infinite = true;
      continue;
    }
    if (k == "ponder") {
      limits->ponder = true;
      continue;
    }
    int64_t* field = nullptr;
    int64_t* field2 = nullptr;
    if (k == "btime") field = &clock->time[BLACK];
    else if (k == "wtime") field = &clock->time[WHITE];
    else if (k == "binc") field = &clock->inc[BLACK];
    else if (k == "winc") field = &clock->inc[WHITE];
    else if (k == "byoyomi") field = &clock->byoyomi[BLACK], field2 = &clock->byoyomi[WHITE];
    else if (k == "bbyoyomi") field = &clock->byoyomi[BLACK];
    else if (k == "wbyoyomi") field = &clock->byoyomi[WHITE];
    else if (k == "movetime") field = &clock->movetime;
    else if (k == "nodes") field = &limits->nodes;
    else if (k == "depth") {
      // A tree search grows no depth to stop at; the GUI is told so, and gets an answer at once.
      error(cmd +
            ": depth is not supported by this engine (a tree search has no depth limit): use go nodes N "
            "or go movetime MS; answering at once");
      if (i + 1 < w.size() && parse_int(w[i + 1])) ++i;
      timed = true;
      continue;
    } else {
      error(cmd + ": unknown parameter '" + k + "' ignored");
      timed = true;
      continue;
    }
    std::optional<int64_t> v = i + 1 < w.size() ? parse_int(w[i + 1]) : std::nullopt;
    if (!v || *v < 0) {
      error(cmd + ": " + k + " needs a non-negative integer" + (i + 1 < w.size() ? ", not '" + w[i + 1] + "'" : ""));
      if (i + 1 < w.size() && !v) ++i;
      timed = true;
      continue;
    }
    ++i;
    *field = *v;
    if (field2) *field2 = *v;
    if (k != "nodes") timed = true;
  }
  return timed;
}

search::TimeBudget Engine::budget(const search::GoClock& clock, Color us, int game_ply) const {
  return search::allocate_time(clock, us, game_ply, settings_.time);
}

void Engine::cmd_ponderhit(const std::string& args) {
  search::GoClock clock;
  search::SearchLimits ignored;
  const bool timed = read_clock("ponderhit", words(args), &clock, &ignored);
  searcher_.ponderhit(timed ? std::optional(budget(clock, pondered_side_, pondered_ply_)) : std::nullopt);
  state_ = State::THINKING;
}

void Engine::start_search(const std::vector<std::string>& w) {
  search::GoClock clock;
  search::SearchLimits limits;
  const bool timed = read_clock("go", w, &clock, &limits);
  // A bare `go` runs until stop; so does `go ponder` without a clock, unless its ponderhit brings one.
  if (!timed && limits.nodes == 0 && !limits.ponder) limits.infinite = true;
  if (timed && !limits.infinite) {
    limits.use_time = true;
    limits.time = budget(clock, game_->pos.side_to_move(), game_->pos.game_ply());
  }
  pondered_side_ = game_->pos.side_to_move();
  pondered_ply_ = game_->pos.game_ply();

  // A book move is played at once; not while pondering or analysing, which must wait for stop.
  if (!limits.ponder && !limits.infinite)
    if (auto b = book_.choose(game_->pos, [this](const std::string& l) { send(l); })) {
      for (const std::string& l : b->info) send(l);
      const bool ponder = b->ponder != MOVE_NONE && settings_.ponder;
      return send("bestmove " + move_to_usi(b->move) + (ponder ? " ponder " + move_to_usi(b->ponder) : ""));
    }

  ensure_network();  // an error here is reported, and the search answers resign
  searcher_.set_hash_size(size_t(settings_.hash_mb) << 20);
  searcher_.set_params(search_params());
  if (auto err = searcher_.set_position(game_->sfen, game_->moves)) throw std::runtime_error(*err);
  send_ponder_ = settings_.ponder;
  searcher_.start(
      limits, [this](const search::SearchInfo& info) { send_info(info); },
      [this](const search::SearchResult& r) { send_result(r); }, settings_.pv_interval_ms);
  state_ = limits.ponder ? State::PONDERING : State::THINKING;
}

void Engine::start_mate(const std::string& time) {
  MateLimits limits;
  if (time != "infinite") {
    std::optional<int64_t> t = parse_int(time);
    if (!t || *t < 0) {
      // Answered all the same (the GUI waits for it): a zero time finds nothing.
      error("go mate: expected a time in milliseconds or 'infinite', not '" + time + "'");
      return send("checkmate timeout");
    }
    limits.time_ms = *t;
  }
  if (!game_) {
    send("info string error: go mate: no position to search (" + no_game_reason_ + ")");
    return send("checkmate timeout");
  }
  mate_stop_ = false;
  mate_running_ = true;
  limits.stop = &mate_stop_;
  mate_thread_ = std::thread([this, limits, pos = game_->pos]() mutable {
    MateResult r = mate_solver_.solve(pos, limits);
    std::string line = "checkmate";
    if (r.status == MateResult::MATE)
      for (Move m : r.pv) line += " " + move_to_usi(m);
    else line += r.status == MateResult::NO_MATE ? " nomate" : " timeout";
    mate_running_ = false;  // before the answer: the GUI may send go as soon as it reads it
    if (!quiet_) send(line);
  });
  state_ = State::THINKING;
}

void Engine::send_info(const search::SearchInfo& info) {
  for (size_t i = 0; i < info.lines.size(); ++i) {
    const search::RootLine& l = info.lines[i];
    std::ostringstream s;
    s << "info depth " << info.depth << " seldepth " << info.seldepth << " time " << info.time_ms << " nodes "
      << info.nodes << " nps " << info.nps << " hashfull " << info.hashfull;
    if (info.lines.size() > 1) s << " multipv " << i + 1;
    if (l.mate != 0) s << " score mate " << l.mate;
    else s << " score cp " << search::winrate_to_cp(l.winrate);
    s << " pv";
    for (Move m : l.pv) s << " " << move_to_usi(m);
    send(s.str());
  }
}

void Engine::send_result(const search::SearchResult& r) {
  if (!r.error.empty()) error(r.error);
  if (quiet_) return;
  switch (r.kind) {
    case search::SearchResult::RESIGN: send("bestmove resign"); break;
    case search::SearchResult::WIN: send("bestmove win"); break;
    case search::SearchResult::MOVE:
      send("bestmove " + move_to_usi(r.best) +
           (r.ponder != MOVE_NONE && send_ponder_ ? " ponder " + move_to_usi(r.ponder) : ""));
      break;
  }
}

}  // namespace jiriki::usi
