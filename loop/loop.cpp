#include "loop/loop.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/atomic_file.h"
#include "common/cpus.h"
#include "common/fnv1a.h"
#include "loop/child.h"
#include "loop/report.h"
#include "loop/window.h"
#include "nn/model.h"
#include "nn/model_file.h"
#include "shogi/hcpe3.h"

namespace jiriki::loop {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double unix_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string gen_name(int64_t g) {
  char b[16];
  std::snprintf(b, sizeof b, "gen%04lld", (long long)g);
  return b;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot read");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

// The file lock that keeps two loops out of one run directory (released by the kernel when the
// process dies, however it dies; closed in the phases at exec). A phase forked by a loop killed
// the moment before may hold it for an instant, until its own death signal lands: waited for.
struct RunLock {
  int fd = -1;
  explicit RunLock(const std::string& dir) {
    fd = ::open((dir + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error(dir + "/lock: cannot open");
    for (int tries = 0; ::flock(fd, LOCK_EX | LOCK_NB) != 0; ++tries) {
      if (tries == 100) {
        ::close(fd);
        throw std::runtime_error(dir + ": another jiriki loop is running in this directory");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~RunLock() {
    if (fd >= 0) ::close(fd);
  }
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
};

// Copies a file so that the target is either absent, the old file, or the whole new one.
void copy_atomically(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) throw std::runtime_error(from + ": cannot read");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_file_atomically(to, bytes);
}

// Leftovers of atomic writes cut by a kill ("NAME.tmp.PID") in the directories the loop writes.
void remove_temporaries(const std::string& run) {
  std::vector<fs::path> dirs = {run, run + "/plots", run + "/tensorboard", run + "/models"};
  if (fs::is_directory(run + "/models"))  // and each other network's
    for (const auto& e : fs::directory_iterator(run + "/models"))
      if (e.is_directory()) dirs.push_back(e.path());
  for (const fs::path& d : dirs) {
    if (!fs::is_directory(d)) continue;
    for (const auto& e : fs::directory_iterator(d))
      if (e.is_regular_file() && e.path().filename().string().find(".tmp") != std::string::npos) fs::remove(e.path());
  }
}

// Positions in .hcpe files under `path` (fixed-size records: no parse needed).
int64_t count_hcpe(const std::string& path) {
  if (!fs::exists(path)) return 0;
  int64_t n = 0;
  auto add = [&](const fs::path& f) {
    if (f.extension() == ".hcpe") n += int64_t(fs::file_size(f) / sizeof(HcpeRecord));
  };
  if (fs::is_directory(path)) {
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (e.is_regular_file()) add(e.path());
  } else {
    add(path);
  }
  return n;
}

// A figure of a summary for the terminal: the number, or "n/a" (a match's Elo is null when one side
// scored every point: the logistic Elo is then infinite).
std::string figure(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return "n/a";
  std::ostringstream s;
  s << j[key].get<double>();
  return s.str();
}

// "a,b,c" -> {"a", "b", "c"}, empty items left out.
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// A network the loop trains each generation: the main one (name "": self-play's, models/genNNNN.jnn)
// or one of the config's `networks` (models/NAME/genNNNN.jnn), each with a best of its own.
struct Network {
  std::string name;
  json shape;              // blocks, channels, activation: of its fresh candidates
  std::string init_model;  // its generation 0 ("": a fresh network)
  double train_epochs;     // a fine-tuned candidate's passes over the window (0: train_steps)
  std::string train_args;  // more `jiriki train` options, after the config's
  double distill = 0;      // the main network's share in its targets (training/teacher.h; 0: none)
};

class Loop {
 public:
  Loop(const std::string& run_dir, const std::atomic<bool>& stop, std::ostream& out)
      : run_(fs::absolute(run_dir).lexically_normal().string()),
        stop_(stop),
        out_(out),
        lock_(prepare(run_)),
        config_(read_config(run_)),
        self_(self_binary()) {
    remove_temporaries(run_);
    if (fs::exists(state_path())) {
      state_ = read_json(state_path());
      if (state_.contains("pruned"))  // a prune killed between its state and its deletion
        for (const auto& [name, n] : state_["pruned"].items()) fs::remove_all(run_ + "/selfplay/" + name);
    } else {
      state_ = {{"version", 1},
                {"generation", 0},
                {"step", config_.str("teacher").empty() ? "init" : "teacher_games"},
                {"best", ""},
                {"best_generation", 0},
                {"current", json::object()},
                {"history", json::array()},
                {"train_steps_total", 0},
                {"attempt", 0}};
      save();
    }
  }

  int run() {
    while (!done()) {
      if (stop_) return 130;
      const std::string step = state_["step"];
      state_["attempt"] = state_["attempt"].get<int>() + 1;
      save();
      const std::string point = std::to_string(generation()) + ":" + step;
      kill_if(point + ":start");
      status(step);
      const std::string next = run_step(step, point + ":mid");
      if (next.empty()) return 130;  // a phase stopped by Ctrl-C: redone by the next start
      kill_if(point + ":done");
      state_["step"] = next;
      state_["attempt"] = 0;
      save();
    }
    out_ << "loop: " << config_.integer("generations") << " generations done; best is "
         << state_["best"].get<std::string>() << " (generation " << state_["best_generation"] << ")\n";
    return 0;
  }

  // `jiriki loop eval`: plays the evaluation matches (against generation 0, against the anchor) that
  // finished generations lack, with `overrides` laid over the config in memory only; the history,
  // metrics and plots are written after each match.
  int evaluate(const json& overrides) {
    for (const auto& [k, v] : overrides.items()) config_.set(k, v);
    const int64_t first_games = config_.integer("eval_first_games");
    if (config_.integer("anchor_games") > 0 && config_.str("anchor").empty())
      throw std::invalid_argument("anchor games asked for, but the run names no anchor (--anchor)");
    json history = state_["history"];
    int played = 0;
    for (json& r : history) {
      const int64_t g = r["generation"].get<int64_t>();
      // The generation's network of the main lineage or of another: promoted, else its candidate (or,
      // for an anchor that plays the best, the line's best after the generation).
      auto model_of = [&](const std::string& network, bool best) -> std::string {
        const json* k = network_record(r, network);
        if (!k) return "";
        return run_ + "/" +
               (k->value("promoted", false) ? "models/" + prefix(network) + gen_name(g) + ".jnn"
                : best                      ? k->value("best", std::string())
                                            : k->value("candidate", std::string()));
      };
      std::vector<Anchor> wanted;  // eval_first first, as an anchor of generation 0 at gate_nodes
      if (first_games > 0 && !r.contains("eval_first"))
        wanted.push_back({"generation 0", "/eval_first", "eval_first",
                          engine_spec("opponent", run_ + "/models/gen0000.jnn", gate_tc()), gate_tc(), "", "",
                          first_games, 0, ""});
      for (const Anchor& x : anchors())
        if (!r.contains(json::json_pointer(x.record))) wanted.push_back(x);
      for (const Anchor& x : wanted) {
        const std::string model = model_of(x.network, x.best),
                          step = x.dir == "eval_first" ? "eval_first" : anchor_step(x);
        if (model.empty() || !fs::is_regular_file(model)) {
          out_ << gen_name(g) << ": its network " << (model.empty() ? x.network : model) << " is not here; no " << step
               << std::endl;
          continue;
        }
        const std::string file = fs::relative(model, run_).string(), played_hash = file_fnv1a64(model),
                          model_hash = x.model.empty() ? "" : file_fnv1a64(x.model);
        if (x.dir != "eval_first")
          if (const int64_t of = already_played(history, x, g, played_hash, model_hash); of >= 0) {
            r[json::json_pointer(x.record)] = repeat_record(file, played_hash, model_hash, x, of);
            out_ << gen_name(g) << ": " << step << " not played again: " << file << " played it in generation " << of
                 << std::endl;
            state_["history"] = history;
            save();
            continue;
          }
        out_ << gen_name(g) << ": " << step << ", " << x.games << " games" << std::endl;
        json s =
            match(step, x.dir + "/" + gen_name(g), model, x.engine, x.games, x.tc, x.args, false, "", g, &r, x.nodes);
        if (s.is_null()) return 130;
        if (!model_hash.empty()) s["model_fnv1a64"] = model_hash;
        s["played"] = file;
        s["played_fnv1a64"] = played_hash;
        s["setting"] = anchor_setting(x);
        r[json::json_pointer(x.record)] = s;
        double total = 0;  // the generation's seconds, this match's included
        for (const auto& [k, seconds] : r["seconds"].items())
          if (k != "total") total += seconds.get<double>();
        r["seconds"]["total"] = total;
        out_ << gen_name(g) << ": " << step << " score " << figure(s, "score") << " Elo " << figure(s, "elo")
             << std::endl;
        state_["history"] = history;
        save();
        write_metrics(run_, history);
        if (config_.flag("plots")) {
          const std::string warning = draw_plots(run_, history);
          if (!warning.empty()) out_ << "warning: " << warning << "\n";
        }
        ++played;
      }
    }
    out_ << "loop eval: " << played << " matches played" << std::endl;
    return 0;
  }

 private:
  static std::string prepare(const std::string& run) {
    fs::create_directories(run);
    return run;
  }
  std::string state_path() const { return run_ + "/state.json"; }
  void save() { write_file_atomically(state_path(), state_.dump(1) + "\n"); }
  int64_t generation() const { return state_["generation"].get<int64_t>(); }
  json& current() { return state_["current"]; }
  bool done() const {
    const int64_t g = config_.integer("generations");
    return g > 0 && generation() > g;
  }
  std::string best() const { return run_ + "/" + state_["best"].get<std::string>(); }
  std::string gen_dir(const std::string& kind) const {
    const std::string d = run_ + "/" + kind + "/" + gen_name(generation());
    fs::create_directories(d);
    return d;
  }
  std::string log_path(const std::string& step, int64_t gen = -1) const {
    fs::create_directories(run_ + "/logs");
    return run_ + "/logs/" + gen_name(gen < 0 ? generation() : gen) + "-" + step + ".log";
  }
  // A seed per generation and step, and for games per attempt too (a redone step does not replay
  // the same games; a resumed training must keep its seed).
  std::string seed(int salt, bool per_attempt = true, int64_t gen = -1) const {
    return std::to_string(config_.integer("seed") * 1000003 + (gen < 0 ? generation() : gen) * 1009 + salt * 101 +
                          (per_attempt ? state_["attempt"].get<int64_t>() : 0));
  }

  void status(const std::string& step) {
    std::time_t t = std::time(nullptr);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
    out_ << when << "  generation " << generation() << "  " << step << "  best " << state_["best"].get<std::string>();
    if (!state_["history"].empty()) {
      const json& last = state_["history"].back();
      if (last.contains("gate")) out_ << "  last gate Elo " << figure(last["gate"], "elo");
      out_ << "  positions " << last.value("positions_total", int64_t(0));
    }
    out_ << std::endl;
  }

  // Runs a phase of generation `gen` (default: the one in flight), adding its seconds to `record`
  // (default: the one in flight); an exit code outside `ok` is a failure naming the log. Returns the
  // exit code, or -1 when it was interrupted by Ctrl-C.
  int phase(const std::vector<std::string>& argv, const std::string& step, const std::string& kill_point,
            std::initializer_list<int> ok = {0}, int64_t gen = -1, json* record = nullptr) {
    return phases({argv}, step, kill_point, ok, gen, record);
  }

  // A phase of several processes at once (self-play, one per GPU), each run from a thread of its own
  // into its own log (the step's; with several, the step's with -0, -1, ...); the phase lasts as long
  // as the longest. One that fails interrupts the others, and the failure names its log. Returns the
  // first one's exit code, or -1 when interrupted by Ctrl-C.
  int phases(const std::vector<std::vector<std::string>>& argvs, const std::string& step, const std::string& kill_point,
             std::initializer_list<int> ok = {0}, int64_t gen = -1, json* record = nullptr) {
    const size_t n = argvs.size();
    auto fine = [&](int code) { return std::find(ok.begin(), ok.end(), code) != ok.end(); };
    std::vector<std::string> logs;
    for (size_t i = 0; i < n; ++i) {
      logs.push_back(n == 1 ? log_path(step, gen) : log_path(step + "-" + std::to_string(i), gen));
      std::ofstream head(logs[i], std::ios::app);  // the command line heads its output, so that a failed
      head << "$";                                 // phase can be rerun by hand
      for (const auto& a : argvs[i]) head << ' ' << (a.find(' ') == std::string::npos ? a : '\'' + a + '\'');
      head << '\n';
    }
    std::vector<ChildResult> results(n);
    std::vector<std::exception_ptr> errors(n);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        try {
          results[i] = run_child(argvs[i], logs[i], i == 0 ? kill_point : "");
          if (!fine(results[i].exit_code) && n > 1) interrupt_child();  // the phase has failed: stop the others
        } catch (...) {
          errors[i] = std::current_exception();
          if (n > 1) interrupt_child();
        }
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    double longest = 0;
    for (const auto& r : results) longest = std::max(longest, r.seconds);
    json& seconds = (record ? *record : current())["seconds"];
    if (!seconds.is_object()) seconds = json::object();
    seconds[step] = seconds.value(step, 0.0) + longest;
    save();  // at once: a phase interrupted now is machine time spent too, and its finished files still count
    if (stop_) return -1;
    for (size_t i = 0; i < n; ++i)
      if (!fine(results[i].exit_code) && results[i].exit_code != 130)
        throw std::runtime_error("the " + step + " phase failed (exit " + std::to_string(results[i].exit_code) +
                                 "); see " + logs[i] + " (start the loop again to retry it)");
    for (const auto& r : results)
      if (r.exit_code == 130) return -1;
    return results[0].exit_code;
  }

  std::vector<std::string> self_command(const std::string& sub) const { return {self_, sub}; }
  std::vector<std::string> match_command() const {
    const std::string m = config_.str("match_command");
    return m.empty() ? self_command("match") : split_command(m);
  }
  static void append(std::vector<std::string>& argv, const std::string& extra) {
    for (auto& w : split_command(extra)) argv.push_back(w);
  }
  // A jiriki engine playing `model` in a match at time control `tc`: a network the match plays in its
  // own process over every GPU (model=PATH, the arena) when the config allows it and `tc` is a node
  // limit, else a USI engine process. On several GPUs a USI engine's option.GPU lists them all, so
  // that the match's game slots take them in turn.
  std::string engine_spec(const std::string& name, const std::string& model, const std::string& tc) const {
    std::string s;
    if (arena(tc)) {
      s = "model=" + model + " name=" + name;
    } else {
      s = "cmd=" + self_ + " name=" + name + " option.ModelFile=" + model +
          " option.Backend=" + config_.search_backend();
      if (config_.search_backend() == "cuda" && split_list(config_.gpus()).size() > 1)
        s += " option.GPU=" + config_.gpus();
    }
    if (!config_.str("engine_options").empty()) s += " " + config_.str("engine_options");
    return s;
  }
  // Whether networks play each other in the match's own process at `tc`.
  bool arena(const std::string& tc) const { return config_.flag("arena") && tc.rfind("nodes=", 0) == 0; }
  void opening_args(std::vector<std::string>& a) const {
    if (!config_.str("openings").empty()) a.insert(a.end(), {"--openings", config_.str("openings")});
    else a.insert(a.end(), {"--random-plies", std::to_string(config_.integer("gate_random_plies"))});
    a.insert(a.end(), {"--max-plies", std::to_string(config_.integer("max_plies"))});
  }

  std::string run_step(const std::string& step, const std::string& kp) {
    if (step == "init") return step_init(kp);
    if (step == "teacher_games") return step_teacher_games(kp);
    if (step == "teacher_train") return step_teacher_train(kp);
    if (step == "selfplay") return step_selfplay("selfplay", config_.integer("selfplay_positions"), "holdout", kp);
    if (step == "holdout") return step_selfplay("holdout", config_.integer("holdout_positions"), "train", kp);
    if (step == "train") return step_train(kp);
    if (step == "gate") return step_gate(kp);
    if (step == "eval_first") return step_eval_first(kp);
    if (step == "eval_anchor") return step_eval_anchor(kp);
    if (step == "promote") return step_promote(kp);
    if (step == "record") return step_record(kp);
    throw std::runtime_error(state_path() + ": unknown step '" + step + "'");
  }

  // Generation 0 becomes the best; the loop goes on with generation 1.
  std::string start_generations(const std::string& model) {
    state_["best"] = model;
    state_["best_generation"] = 0;
    state_["generation"] = 1;
    current() = json::object();
    return "selfplay";
  }

  std::string step_init(const std::string& kp) {
    fs::create_directories(run_ + "/models");
    if (!config_.str("init_model").empty()) {
      const std::string from = config_.str("init_model");
      nn::load_model(from);  // a clear error now rather than in the first phase
      copy_atomically(from, run_ + "/models/gen0000.jnn");
      kill_if(kp);
      return start_generations("models/gen0000.jnn");
    }
    write_fresh(networks()[0].shape, uint64_t(config_.integer("seed")), run_ + "/models/gen0000.jnn", kp);
    return start_generations("models/gen0000.jnn");
  }

  // A fresh network of `shape` (blocks, channels, activation) at `path`, written whole or not at all.
  void write_fresh(const json& shape, uint64_t seed, const std::string& path, const std::string& kp) const {
    nn::Architecture a;
    a.blocks = int(shape["blocks"].get<int64_t>());
    a.channels = int(shape["channels"].get<int64_t>());
    a.activation = nn::parse_activation(shape["activation"].get<std::string>());
    nn::Model m(a);
    nn::init_model(m, seed);
    const std::string tmp = path + ".tmp";
    nn::save_model(m, tmp);
    kill_if(kp);  // mid-write: the temporary is left, the target absent
    fs::rename(tmp, path);
  }

  // An engine as a config key names it (teacher, anchor): a match --engine spec as written, or a
  // command line whose first word is the program and the rest its arguments.
  static std::string usi_spec(const std::string& t, const std::string& name) {
    if (t.find("cmd=") != std::string::npos) return t + " name=" + name;
    const auto words = split_command(t);
    std::string s = "cmd=" + words.at(0) + " name=" + name;
    if (words.size() > 1) {
      std::string rest;
      for (size_t i = 1; i < words.size(); ++i) rest += (i > 1 ? " " : "") + words[i];
      s += " args=\"" + rest + "\"";
    }
    return s;
  }

  std::string step_teacher_games(const std::string& kp) {
    const std::string dir = run_ + "/teacher";
    fs::remove_all(dir);  // a redone match starts over
    fs::create_directories(dir);
    auto a = match_command();
    a.insert(a.end(), {"--engine", usi_spec(config_.str("teacher"), "teacher-a"), "--engine",
                       usi_spec(config_.str("teacher"), "teacher-b"), "--games",
                       std::to_string(config_.integer("teacher_games")), "--concurrency",
                       std::to_string(config_.integer("teacher_concurrency")), "--seed", seed(1), "--tc",
                       config_.str("teacher_tc"), "--out", dir + "/match", "--hcpe3", dir + "/games.hcpe3"});
    opening_args(a);
    append(a, config_.str("teacher_args"));
    if (phase(a, "teacher_games", kp, {0, 10, 11}) < 0) return "";  // no SPRT: any verdict is a finished match
    const int64_t positions = count_positions(dir);
    if (positions == 0)
      throw std::runtime_error("the teacher's games hold no training positions (did it lose on time?); see " +
                               log_path("teacher_games"));
    current()["teacher_positions"] = positions;
    return "teacher_train";
  }

  // `jiriki train` into `dir`: from the network `init`, or fresh of `shape` (blocks, channels, activation)
  // when `init` is empty; `extra` are more options, after the config's (the last of an option counts).
  std::vector<std::string> train_command(const std::string& dir, const std::vector<std::string>& data, int64_t steps,
                                         double val_lambda, const std::string& init, const json& shape,
                                         const std::string& extra = "") const {
    auto a = split_command(config_.str("train_launcher"));
    for (auto& w : self_command("train")) a.push_back(w);
    for (const auto& d : data) a.insert(a.end(), {"--data", d});
    const std::string ckpt = dir + "/train.ckpt";
    a.insert(a.end(), {"--model-out",
                       dir + "/candidate.jnn",
                       "--checkpoint",
                       ckpt,
                       "--log",
                       dir + "/log.jsonl",
                       "--steps",
                       std::to_string(steps),
                       "--checkpoint-every",
                       std::to_string(std::max<int64_t>(1, steps / 4)),
                       "--batch",
                       config_.str("train_batch"),
                       "--val-lambda",
                       std::to_string(val_lambda),
                       "--seed",
                       seed(3, false),
                       "--backend",
                       config_.backend(),
                       "--log-every",
                       std::to_string(std::max<int64_t>(1, steps / 20))});
    if (config_.str("train_batch") == "auto")
      a.insert(a.end(), {"--batch-start", std::to_string(config_.integer("train_batch_start"))});
    if (config_.str("train_lr") != "auto") a.insert(a.end(), {"--lr", config_.str("train_lr")});
    if (config_.backend() == "cuda") a.insert(a.end(), {"--gpus", config_.gpus()});
    if (fs::exists(ckpt)) {
      a.push_back("--resume");  // a redone training step continues from its checkpoint
    } else if (!init.empty()) {
      a.insert(a.end(), {"--init", init});
    } else {
      a.insert(a.end(), {"--blocks", std::to_string(shape["blocks"].get<int64_t>()), "--channels",
                         std::to_string(shape["channels"].get<int64_t>()), "--activation",
                         shape["activation"].get<std::string>()});
    }
    append(a, config_.str("train_args"));
    append(a, extra);
    return a;
  }

  // The figures of a finished training: the last step's, the held-out test's, the throughput.
  void record_training(const std::string& dir, json& into) {
    json t = json::object();
    const auto train = read_train_log(dir + "/log.jsonl", "train");
    if (!train.empty()) {
      const json& last = train.back();
      for (const char* k : {"loss", "policy_loss", "value_loss", "policy_accuracy", "value_accuracy", "batch",
                            "samples_per_second", "noise_scale", "step"})
        if (last.contains(k)) t[k] = last[k];
    }
    const auto test = read_train_log(dir + "/log.jsonl", "test");
    if (!test.empty()) t["test"] = test.back();
    into["train"] = t;
    into["train_log"] = fs::relative(dir + "/log.jsonl", run_).string();
  }

  std::string step_teacher_train(const std::string& kp) {
    const std::string dir = gen_dir("train");
    auto a = train_command(dir, {run_ + "/teacher"}, config_.integer("teacher_train_steps"),
                           config_.real("teacher_val_lambda"), "", networks()[0].shape);
    if (phase(a, "teacher_train", kp) < 0) return "";
    fs::create_directories(run_ + "/models");
    copy_atomically(dir + "/candidate.jnn", run_ + "/models/gen0000.jnn");
    return start_generations("models/gen0000.jnn");
  }

  // Self-play (or held-out games) with the best network until this generation has `target` new
  // positions. Positions already made by a killed attempt (complete files) count, and so, for
  // self-play, do those the workers wrote since the generation began.
  std::string step_selfplay(const std::string& kind, int64_t target, const std::string& next, const std::string& kp) {
    if (target <= 0) return next;
    const std::string dir = gen_dir(kind);
    const std::string counted = kind == "selfplay" ? run_ + "/selfplay" : dir;
    json& c = current();
    const std::string base_key = kind + "_base";
    if (!c.contains(base_key)) {  // the count before this generation's games, kept across attempts
      c[base_key] = kind == "selfplay" ? count_positions(counted) - count_positions(dir) : 0;
      save();
    }
    if (kind == "selfplay") {
      // At every attempt, for the run may have moved to a machine without its older records (a carry
      // that left them behind), even in the middle of this generation.
      adopt_missing_records();
      const int64_t mine = count_positions(dir), others = count_positions(counted) - mine;
      if (others < c[base_key].get<int64_t>()) c[base_key] = others;  // records gone: they were not made now
      // Records the window should hold but that are not here are played again, by the newest best
      // network, on top of the generation's own positions.
      int64_t present = -mine;
      for (const auto& d : training_data()) present += count_hcpe(d) + count_positions(d);
      const int64_t total = present + state_.value("pruned_positions", int64_t(0)) + target;
      const int64_t refill = std::max<int64_t>(0, window_rows(total, config_.window()) - (present + target));
      const int64_t before = c.contains(kind) ? c[kind].value("refill", int64_t(0)) : 0;
      if (refill > 0 && refill != before) {
        c[kind]["refill"] = refill;
        out_ << "the window lacks " << refill << " positions that are not here: self-play plays them again"
             << std::endl;
      }
      save();
    }
    if (c.contains(kind) && c[kind].contains("refill")) target += c[kind]["refill"].get<int64_t>();
    int64_t made = count_positions(counted) - c[base_key].get<int64_t>();
    const bool local = kind != "selfplay" || config_.flag("selfplay_local");
    for (int call = 0; made < target; ++call) {
      if (local) {
        // One process per GPU at once (a process per GPU makes more positions than one process over
        // them all), each with its share of the positions still wanted, its own seed and file names.
        auto devices = split_list(config_.gpus());
        if (devices.empty()) devices = {"0"};
        const auto shares = split_positions(target - made, int(devices.size()));
        const std::string name = gen_name(generation()) + "-" + kind + "-" +
                                 std::to_string(state_["attempt"].get<int>()) + "-" +
                                 std::to_string(call);  // a name per run: files are never overwritten
        std::vector<std::vector<std::string>> commands;
        for (size_t i = 0; i < devices.size(); ++i) {
          if (shares[i] == 0) continue;
          auto a = self_command("selfplay");
          a.insert(a.end(), {"--model",
                             best(),
                             "--out",
                             dir,
                             "--positions",
                             std::to_string(shares[i]),
                             "--name",
                             devices.size() == 1 ? name : name + "-g" + std::to_string(i),
                             "--seed",
                             std::to_string(std::stoll(seed(kind == "selfplay" ? 5 : 7)) + int64_t(i) * 7919),
                             "--backend",
                             config_.search_backend(),
                             "--playouts",
                             std::to_string(config_.integer("selfplay_playouts")),
                             "--playout-cap-full",
                             std::to_string(config_.integer("selfplay_playout_cap_full")),
                             "--max-plies",
                             std::to_string(config_.integer("max_plies")),
                             "--report-seconds",
                             "60"});
          if (config_.search_backend() == "cuda") a.insert(a.end(), {"--gpus", devices[i]});
          if (!config_.str("openings").empty()) a.insert(a.end(), {"--start-sfens", config_.str("openings")});
          append(a, config_.str("selfplay_args"));
          commands.push_back(std::move(a));
        }
        if (phases(commands, kind, kp) < 0) return "";
      } else {  // workers only: wait for their files
        if (stop_) return "";
        std::this_thread::sleep_for(std::chrono::seconds(2));
      }
      const int64_t now = count_positions(counted) - c[base_key].get<int64_t>();
      if (local && now == made)
        throw std::runtime_error("the " + kind + " phase made no positions; see " + log_path(kind));
      made = now;
    }
    c[kind]["positions"] = made;
    const double seconds = c["seconds"].is_object() ? c["seconds"].value(kind, 0.0) : 0.0;
    if (seconds > 0) c[kind]["positions_per_hour"] = double(made) / seconds * 3600.0;
    return next;
  }

  // What every generation trains on: the self-play records, the teacher's games, extra_data.
  std::vector<std::string> training_data() const {
    std::vector<std::string> data = {run_ + "/selfplay"};
    if (fs::exists(run_ + "/teacher/games.hcpe3")) data.push_back(run_ + "/teacher");
    for (const auto& d : split_list(config_.str("extra_data"))) data.push_back(d);
    return data;
  }

  // A finished generation's self-play records that are gone without a prune (left behind when the run
  // moved to another machine) are counted as pruned, so that the totals, and so the window, stay whole.
  void adopt_missing_records() {
    for (const json& r : state_["history"]) {
      const std::string name = gen_name(r["generation"].get<int64_t>());
      const int64_t n = r.contains("selfplay") ? r["selfplay"].value("positions", int64_t(0)) : 0;
      if (n == 0 || fs::exists(run_ + "/selfplay/" + name) ||
          (state_.contains("pruned") && state_["pruned"].contains(name)))
        continue;
      state_["pruned"][name] = n;
      state_["pruned_positions"] = state_.value("pruned_positions", int64_t(0)) + n;
      out_ << "selfplay/" << name << "'s records are not here (" << n << " positions): counted as pruned" << std::endl;
    }
  }

  // Steps of a training of `epochs` passes over a window of `window` positions, each step taking
  // train_batch positions on each GPU; train_steps when `epochs` is 0.
  int64_t train_steps(int64_t window, double epochs) const {
    if (epochs <= 0) return config_.integer("train_steps");
    const int64_t gpus = config_.backend() == "cuda" ? int64_t(split_list(config_.gpus()).size()) : 1;
    // Under auto: steps of the starting batch, which the trainer counts in positions whatever it tunes.
    const std::string b = config_.str("train_batch");
    const double per_replica = b == "auto" ? double(config_.integer("train_batch_start")) : double(std::stoll(b));
    const double per_step = per_replica * double(std::max<int64_t>(1, gpus));
    return std::max<int64_t>(1, int64_t(std::ceil(epochs * double(window) / per_step)));
  }

  // The networks the loop trains: the main one first (self-play's), then the config's `networks`.
  std::vector<Network> networks() const {
    std::vector<Network> out = {{"",
                                 {{"blocks", config_.integer("blocks")},
                                  {"channels", config_.integer("channels")},
                                  {"activation", config_.str("activation")}},
                                 config_.str("init_model"),
                                 config_.real("train_epochs"),
                                 "",
                                 0.0}};
    for (const json& e : config_.values()["networks"])
      out.push_back({e["name"],
                     {{"blocks", e.value("blocks", config_.integer("blocks"))},
                      {"channels", e.value("channels", config_.integer("channels"))},
                      {"activation", e.value("activation", config_.str("activation"))}},
                     e.value("init_model", std::string()),
                     e.value("train_epochs", config_.real("train_epochs")),
                     e.value("train_args", std::string()),
                     e.value("distill", 0.0)});
    return out;
  }
  static std::string prefix(const std::string& network) { return network.empty() ? "" : network + "/"; }
  // A network's best (a path in the run): the main one's, or another's from the state.
  std::string best_of(const std::string& network) const {
    return network.empty() ? state_["best"].get<std::string>() : state_["networks"][network]["best"].get<std::string>();
  }
  // The generation's record of a network's chosen candidate: the generation's own for the main network,
  // networks.NAME for another; null when it has none (a network added to the config mid-generation).
  static const json* network_record(const json& r, const std::string& network) {
    if (network.empty()) return &r;
    return r.contains("networks") && r["networks"].contains(network) ? &r["networks"][network] : nullptr;
  }

  // Generation 0 of the other networks that the state lacks (a new run, or one given more networks):
  // their init_model, or a fresh network of their shape.
  void ensure_networks() {
    int salt = 0;
    for (const Network& n : networks()) {
      ++salt;
      if (n.name.empty() || (state_.contains("networks") && state_["networks"].contains(n.name))) continue;
      const std::string model = "models/" + n.name + "/gen0000.jnn";
      fs::create_directories(run_ + "/models/" + n.name);
      if (!n.init_model.empty()) {
        nn::load_model(n.init_model);  // a clear error rather than a failed phase
        copy_atomically(n.init_model, run_ + "/" + model);
      } else {
        write_fresh(n.shape, uint64_t(config_.integer("seed") + salt), run_ + "/" + model, "");
      }
      state_["networks"][n.name] = {{"best", model}, {"best_generation", 0}};
      save();
    }
  }

  // The generation's candidates, fixed at its first training attempt: for each network, the best
  // fine-tuned, or a fresh network every train_fresh_every-th generation (or both, with train_both).
  json plan_candidates(int64_t window) const {
    const int64_t every = config_.integer("train_fresh_every");
    const bool fresh = every > 0 && generation() % every == 0;
    std::vector<std::string> kinds = {fresh ? "fresh" : "finetune"};
    if (fresh && config_.flag("train_both")) kinds = {"finetune", "fresh"};
    json list = json::array();
    for (const Network& n : networks())
      for (const std::string& kind : kinds) {
        const std::string suffix = kind == "fresh" && kinds.size() > 1 ? "-fresh" : "";
        const double epochs = kind == "fresh" && config_.real("train_fresh_epochs") > 0
                                  ? config_.real("train_fresh_epochs")
                                  : n.train_epochs;
        list.push_back({{"network", n.name},
                        {"kind", kind},
                        {"id", prefix(n.name) + gen_name(generation()) + suffix},
                        {"step", "train" + (n.name.empty() ? "" : "-" + n.name) + suffix},
                        {"train_steps", train_steps(window, epochs)}});
      }
    return list;
  }

  std::string step_train(const std::string& kp) {
    ensure_networks();
    json& c = current();
    const std::vector<std::string> data = training_data();
    if (!c.contains("window")) {  // fixed at the first attempt: a resumed training must see the same settings
      int64_t total = state_.value("pruned_positions", int64_t(0));
      for (const auto& d : data) total += count_hcpe(d) + count_positions(d);
      c["positions_total"] = total;
      c["window"] = window_rows(total, config_.window());
      save();
    }
    if (!c.contains("candidates")) {  // (as the window)
      json list = plan_candidates(c["window"].get<int64_t>());
      if (c.contains("train_steps")) list[0]["train_steps"] = c["train_steps"];  // an earlier version's, resumed
      c["candidates"] = list;
      save();
    }
    if (!c.contains("train_wall_time")) c["train_wall_time"] = unix_time();
    for (json& k : c["candidates"]) {
      if (k.contains("candidate")) continue;  // trained by an earlier attempt
      const std::string dir = run_ + "/train/" + k["id"].get<std::string>();
      fs::create_directories(dir);
      const std::string network = k["network"];
      const auto nets = networks();
      const auto n = std::find_if(nets.begin(), nets.end(), [&](const Network& x) { return x.name == network; });
      if (n == nets.end())
        throw std::runtime_error("the generation's candidate " + k["id"].get<std::string>() +
                                 " is of a network the config no longer names");
      const bool fresh = k["kind"] == "fresh";
      auto a = train_command(dir, data, k["train_steps"].get<int64_t>(), config_.real("val_lambda"),
                             fresh ? "" : run_ + "/" + best_of(network), n->shape,
                             (fresh ? config_.str("train_fresh_args") + " " : "") + n->train_args);
      a.insert(a.end(), {"--window", std::to_string(c["window"].get<int64_t>())});
      if (n->distill > 0)  // the teacher: the network whose self-play this generation trains on
        a.insert(a.end(), {"--teacher", run_ + "/" + best_of(""), "--teacher-weight", std::to_string(n->distill)});
      if (config_.integer("holdout_positions") > 0)
        a.insert(a.end(), {"--test", run_ + "/holdout/" + gen_name(generation())});
      if (phase(a, k["step"], kp) < 0) return "";
      record_training(dir, k);
      k["candidate"] = fs::relative(dir + "/candidate.jnn", run_).string();
      save();
    }
    choose();
    return "gate";
  }

  // Each network's candidate: among those its gate accepted, the one that scored best, else its first.
  // Its figures go to the generation's record: the main network's at the top, another's under networks.NAME.
  void choose() {
    json& c = current();
    auto score = [](const json& k) { return k.contains("gate") ? k["gate"].value("score", 0.0) : 0.0; };
    for (const Network& n : networks()) {
      const json* pick = nullptr;
      for (const json& k : c["candidates"]) {
        if (k["network"] != n.name) continue;
        if (!pick || (k.value("accepted", false) && (!pick->value("accepted", false) || score(k) > score(*pick))))
          pick = &k;
      }
      if (!pick) continue;
      json& into = n.name.empty() ? c : c["networks"][n.name];
      for (const char* f : {"candidate", "train", "train_log", "train_steps", "gate", "accepted"})
        if (pick->contains(f)) into[f] = (*pick)[f];
      into["train_kind"] = (*pick)["kind"];
    }
  }

  // A match of `candidate` against `opponent` (an --engine spec) at `tc`, with `extra` options, in
  // RUN/`out`, logged as `step` of generation `gen` (default: the one in flight) into `record`
  // (default: the one in flight); its summary, or null when interrupted. `candidate_nodes` > 0 (and
  // the arena allowed): the candidate plays at that many nodes in the match's own process against a
  // USI opponent.
  json match(const std::string& step, const std::string& out, const std::string& candidate, const std::string& opponent,
             int64_t games, const std::string& tc, const std::string& extra, bool sprt, const std::string& kp,
             int64_t gen = -1, json* record = nullptr, int64_t candidate_nodes = 0) {
    if (gen < 0) gen = generation();
    const std::string dir = run_ + "/" + out;
    fs::remove_all(dir);  // a redone match starts over
    fs::create_directories(fs::path(dir).parent_path());
    auto a = match_command();
    // The same openings for every candidate of a kind of match (gate, eval_first, anchors).
    const int salt = step.rfind("gate", 0) == 0 ? 9 : step == "eval_first" ? 11 : 13;
    // A network opponent in the match's own process (model=PATH) plays a network candidate there too,
    // with all of the match's games at once (or arena_concurrency) spread over every GPU.
    // A USI opponent against a candidate at a node count of its own plays there too, its processes
    // as many at once as the games, up to the cores.
    const bool mixed = candidate_nodes > 0 && config_.flag("arena") && opponent.rfind("model=", 0) != 0;
    const bool in_process = mixed || opponent.rfind("model=", 0) == 0;
    int64_t arena_games = config_.integer("arena_concurrency") > 0 ? config_.integer("arena_concurrency") : games;
    if (mixed) arena_games = std::min<int64_t>(arena_games, usable_cpus().count);
    std::string candidate_spec =
        in_process ? engine_spec("candidate", candidate, tc) : engine_spec("candidate", candidate, "");
    if (mixed)
      candidate_spec = "model=" + candidate + " name=candidate nodes=" + std::to_string(candidate_nodes) +
                       (config_.str("engine_options").empty() ? "" : " " + config_.str("engine_options"));
    a.insert(a.end(), {"--engine", candidate_spec, "--engine", opponent, "--games", std::to_string(games),
                       "--concurrency", std::to_string(in_process ? arena_games : config_.integer("gate_concurrency")),
                       "--seed", seed(salt, true, gen), "--tc", tc, "--out", dir});
    if (in_process) {
      a.insert(a.end(), {"--backend", config_.search_backend()});
      if (config_.search_backend() == "cuda") a.insert(a.end(), {"--gpus", config_.gpus()});
    }
    opening_args(a);
    append(a, extra);
    if (sprt) a.insert(a.end(), {"--sprt", config_.str("gate_sprt")});
    const int code = phase(a, step, kp, {0, 10, 11}, gen, record);
    if (code < 0) return nullptr;
    json s = read_json(dir + "/summary.json");
    s["exit_code"] = code;
    return s;
  }

  std::string step_gate(const std::string& kp) {
    json& c = current();
    if (!c.contains("candidates")) {  // a generation trained by an earlier version of the loop
      json k = {{"network", ""}, {"kind", "finetune"}, {"id", gen_name(generation())}, {"step", "train"}};
      for (const char* f : {"candidate", "train", "train_log", "train_steps"})
        if (c.contains(f)) k[f] = c[f];
      c["candidates"] = json::array({k});
    }
    for (json& k : c["candidates"]) {
      if (k.contains("accepted")) continue;  // gated by an earlier attempt
      if (!config_.flag("gate")) {
        k["accepted"] = true;
        continue;
      }
      const std::string network = k["network"];
      json s = match("gate" + k["step"].get<std::string>().substr(5), "gate/" + k["id"].get<std::string>(),
                     run_ + "/" + k["candidate"].get<std::string>(),
                     engine_spec("opponent", run_ + "/" + best_of(network), gate_tc()), config_.integer("gate_games"),
                     gate_tc(), "", true, kp);
      if (s.is_null()) return "";
      const int code = s["exit_code"];
      const double score = s.contains("score") && s["score"].is_number() ? s["score"].get<double>() : 0.0;
      // SPRT's verdict when it has one; an undecided match by its score, or not at all.
      k["accepted"] = code == 10 || (code == 0 && config_.str("gate_undecided") == "score" && score > 0.5);
      k["gate"] = s;
      save();
    }
    choose();
    return "eval_first";
  }

  std::string step_eval_first(const std::string& kp) {
    const int64_t games = config_.integer("eval_first_games");
    if (games > 0) {
      json s = match("eval_first", "eval_first/" + gen_name(generation()),
                     run_ + "/" + current()["candidate"].get<std::string>(),
                     engine_spec("opponent", run_ + "/models/gen0000.jnn", gate_tc()), games, gate_tc(), "", false, kp);
      if (s.is_null()) return "";
      current()["eval_first"] = s;
    }
    return "eval_anchor";
  }

  // A fixed outside reference every generation plays: the config's anchor (recorded as eval_anchor)
  // and each of its anchors (recorded under anchors.NAME).
  struct Anchor {
    std::string name, record, dir, engine, tc, args, network;  // record: a JSON pointer into a generation's record
    int64_t games;
    int64_t nodes = 0;  // > 0: the candidate plays at this many nodes in the match's own process
    std::string model;  // a network anchor's file, whose content each match records (model_fnv1a64)
    int64_t every = 1;  // played by every K-th generation (K, 2K, ...)
    bool best = false;  // played by the line's best after the gate instead of the candidate
  };
  std::vector<Anchor> anchors() const {
    std::vector<Anchor> out;
    if (config_.integer("anchor_games") > 0)
      out.push_back({"anchor", "/eval_anchor", "eval_anchor", usi_spec(config_.str("anchor"), "anchor"),
                     config_.str("anchor_tc"), config_.str("anchor_args"), "", config_.integer("anchor_games"), 0, "",
                     config_.integer("anchor_every")});
    for (const json& e : config_.values()["anchors"]) {
      const std::string name = e["name"];
      const std::string tc = e.value("tc", config_.str("anchor_tc"));
      const std::string model =
          e.contains("model") ? fs::absolute(e["model"].get<std::string>()).lexically_normal().string() : "";
      const std::string engine = e.contains("model") ? engine_spec(name, model, tc) : usi_spec(e["engine"], name);
      out.push_back({name, "/anchors/" + name, "anchors/" + name, engine, tc, e.value("args", std::string()),
                     e.value("network", std::string()), e["games"].get<int64_t>(), e.value("nodes", int64_t(0)), model,
                     e.value("every", config_.integer("anchor_every")), e.value("play", std::string()) == "best"});
    }
    return out;
  }
  // A network anchor names a file, and a file can change under a run (a network shipped in the
  // meantime): each match records the file's checksum, and a change is said here and drawn by the plots
  // as another curve, so that Elo against two networks is never read as one line.
  static std::string file_fnv1a64(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("network " + path + ": cannot be read");
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    char hex[17];
    std::snprintf(
        hex, sizeof hex, "%016llx",
        static_cast<unsigned long long>(fnv1a64(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())));
    return hex;
  }
  void warn_if_anchor_changed(const Anchor& x, const std::string& hash) {
    const json::json_pointer at(x.record + "/model_fnv1a64");
    const json& history = state_["history"];
    for (auto r = history.rbegin(); r != history.rend(); ++r)
      if (r->contains(at)) {
        if ((*r)[at] != hash)
          out_ << "warning: anchor " << x.name << ": " << x.model << " is not the network generation "
               << (*r)["generation"] << " played (fnv1a64 " << (*r)[at].get<std::string>() << ", now " << hash
               << "): from here on its Elo is against another network, drawn as another curve\n";
        return;
      }
  }
  // What an anchor's match was played against, beyond the network that played it: the opponent (a
  // network anchor's file content apart, in model_fnv1a64), its time control, arguments and nodes.
  static std::string anchor_setting(const Anchor& x) {
    return (x.model.empty() ? x.engine : std::string("model")) + " | " + x.tc + " | " + x.args + " | " +
           std::to_string(x.nodes);
  }
  // A match an anchor has played already: the same network (by content) against the same opponent
  // in the same setting, in another generation of `history` (matches recorded before the setting was
  // are not known to be the same). A "best" anchor plays the line's best,
  // which stays one network over the generations its gates reject: played again, an SPRT that network
  // lost would be re-run until it passed, and its time spent twice. Returns that generation, or -1.
  int64_t already_played(const json& history, const Anchor& x, int64_t generation, const std::string& played_hash,
                         const std::string& model_hash) const {
    const json::json_pointer at(x.record);
    for (const json& r : history) {
      if (r.value("generation", int64_t(-1)) == generation || !r.contains(at)) continue;
      const json& m = r[at];
      if (m.contains("repeat_of") || m.value("setting", std::string()) != anchor_setting(x) ||
          m.value("model_fnv1a64", std::string()) != model_hash)
        continue;
      if (m.value("played_fnv1a64", std::string()) == played_hash) return r["generation"].get<int64_t>();
    }
    return -1;
  }
  // The record of an anchor's match not played again (already_played).
  static json repeat_record(const std::string& played, const std::string& played_hash, const std::string& model_hash,
                            const Anchor& x, int64_t of) {
    json s = {{"played", played}, {"played_fnv1a64", played_hash}, {"setting", anchor_setting(x)}, {"repeat_of", of}};
    if (!model_hash.empty()) s["model_fnv1a64"] = model_hash;
    return s;
  }
  // The log's and the seconds' name of an anchor's matches.
  static std::string anchor_step(const Anchor& x) {
    return x.record == "/eval_anchor" ? "eval_anchor" : "anchor-" + x.name;
  }

  std::string step_eval_anchor(const std::string& kp) {
    json& c = current();
    for (const Anchor& x : anchors()) {
      if (generation() % x.every != 0) continue;  // not this generation's (loop eval plays it later)
      const json::json_pointer at(x.record);
      const json* k = network_record(c, x.network);
      if (c.contains(at) || !k) continue;  // played by an earlier attempt, or no candidate to play it
      const std::string model_hash = x.model.empty() ? "" : file_fnv1a64(x.model);
      if (!model_hash.empty()) warn_if_anchor_changed(x, model_hash);
      // The line's best after this generation's gate: its candidate if the gate accepted it (promoted next).
      const std::string played =
          x.best && !k->value("accepted", false) ? best_of(x.network) : (*k)["candidate"].get<std::string>();
      const std::string played_hash = file_fnv1a64(run_ + "/" + played);
      if (const int64_t of = already_played(state_["history"], x, generation(), played_hash, model_hash); of >= 0) {
        c[at] = repeat_record(played, played_hash, model_hash, x, of);
        save();
        continue;
      }
      json s = match(anchor_step(x), x.dir + "/" + gen_name(generation()), run_ + "/" + played, x.engine, x.games, x.tc,
                     x.args, false, kp, -1, nullptr, x.nodes);
      if (s.is_null()) return "";
      if (!model_hash.empty()) s["model_fnv1a64"] = model_hash;
      s["played"] = played;
      s["played_fnv1a64"] = played_hash;
      s["setting"] = anchor_setting(x);
      c[at] = s;
      save();
    }
    return "promote";
  }
  std::string gate_tc() const { return "nodes=" + std::to_string(config_.integer("gate_nodes")); }

  std::string step_promote(const std::string& kp) {
    const json& c = current();
    for (const Network& n : networks()) {
      const json* k = network_record(c, n.name);
      if (!k || !k->value("accepted", false)) continue;
      const std::string model = "models/" + prefix(n.name) + gen_name(generation()) + ".jnn";
      fs::create_directories(fs::path(run_ + "/" + model).parent_path());
      copy_atomically(run_ + "/" + (*k)["candidate"].get<std::string>(), run_ + "/" + model);
      if (n.name.empty()) {
        kill_if(kp);
        state_["best"] = model;
        state_["best_generation"] = generation();
      } else {
        state_["networks"][n.name] = {{"best", model}, {"best_generation", generation()}};
      }
    }
    return "record";
  }

  std::string step_record(const std::string& kp) {
    json r = current();
    r["generation"] = generation();
    r["promoted"] = r.value("accepted", false);
    r["best"] = state_["best"];
    r["best_generation"] = state_["best_generation"];
    if (r.contains("networks"))
      for (auto& [name, n] : r["networks"].items()) {
        n["promoted"] = n.value("accepted", false);
        n["best"] = state_["networks"][name]["best"];
        n["best_generation"] = state_["networks"][name]["best_generation"];
      }
    r["wall_time"] = unix_time();
    r["train_step_base"] = state_["train_steps_total"];
    double total = 0;
    if (!r["seconds"].is_object()) r["seconds"] = json::object();
    for (const auto& [k, v] : r["seconds"].items()) total += v.get<double>();
    r["seconds"]["total"] = total;
    json history = state_["history"];
    history.push_back(r);
    write_metrics(run_, history);
    kill_if(kp);
    const auto train_log = read_train_log(run_ + "/" + r.value("train_log", std::string()), "train");
    write_tensorboard(run_, r, train_log, r["train_step_base"].get<int64_t>());
    if (config_.flag("plots")) {
      const std::string warning = draw_plots(run_, history);
      if (!warning.empty()) out_ << "warning: " << warning << "\n";
    }
    if (config_.flag("prune_records") && r.contains("window")) prune_records(r["window"].get<int64_t>());
    state_["history"] = history;
    state_["train_steps_total"] = r["train_step_base"].get<int64_t>() + r["train"].value("step", int64_t(0));
    state_["generation"] = generation() + 1;
    current() = json::object();
    out_ << "generation " << r["generation"] << ": " << (r["promoted"].get<bool>() ? "promoted" : "kept the best");
    if (r.contains("gate"))
      out_ << ", gate score " << figure(r["gate"], "score") << " Elo " << figure(r["gate"], "elo");
    if (r["train"].contains("test"))
      out_ << ", held-out policy accuracy " << figure(r["train"]["test"], "policy_accuracy");
    if (r.contains("networks"))
      for (const auto& [name, n] : r["networks"].items()) {
        out_ << "; " << name << ": " << (n["promoted"].get<bool>() ? "promoted" : "kept its best");
        if (n.contains("gate"))
          out_ << ", gate score " << figure(n["gate"], "score") << " Elo " << figure(n["gate"], "elo");
      }
    out_ << "\n";
    // An anchor that is an SPRT (the replacement rule against a shipped network) says its decision.
    for (const Anchor& x : anchors()) {
      const json::json_pointer at(x.record);
      const json* k = network_record(r, x.network);
      if (r.contains(at) && r[at].contains("repeat_of"))
        out_ << "anchor " << x.name << ": not played again: " << r[at]["played"].get<std::string>()
             << " played it in generation " << r[at]["repeat_of"] << "\n";
      if (!r.contains(at) || !k || !r[at].contains("sprt") || !r[at]["sprt"].is_object()) continue;
      const std::string decision = r[at]["sprt"].value("result", std::string("none"));
      const std::string who = r[at].value("played", k->value("candidate", std::string("the candidate"))),
                        against = x.model.empty() ? x.name : x.model;
      out_ << "anchor " << x.name << ": SPRT " << (decision == "none" ? "undecided" : decision) << " over "
           << r[at]["games"] << " games, Elo " << figure(r[at], "elo") << ": " << who
           << (decision == "H1"   ? " beats "
               : decision == "H0" ? " does not beat "
                                  : " has not yet shown it beats ")
           << against << "\n";
    }
    return "selfplay";
  }

  // Deletes the oldest generations' self-play directories while the newer ones still hold `window`
  // positions: no later window reaches them, since a window grows by less than the positions added
  // (expand_per_row < 1). Their counts go to the state first, so that the totals (and so the window's
  // growth) stay as if they were there; a directory the state already names was deleted by a killed
  // prune and is deleted again.
  void prune_records(int64_t window) {
    const std::string root = run_ + "/selfplay";
    if (!fs::is_directory(root)) return;
    std::vector<fs::path> gens;
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory() && e.path().filename().string().rfind("gen", 0) == 0) gens.push_back(e.path());
    std::sort(gens.begin(), gens.end());
    json& pruned = state_["pruned"];
    if (!pruned.is_object()) pruned = json::object();
    int64_t kept = count_positions(root);
    for (size_t i = 0; i + 1 < gens.size(); ++i) {
      const std::string name = gens[i].filename().string();
      const int64_t n = count_positions(gens[i].string());
      if (!pruned.contains(name)) {
        if (kept - n < window) break;
        pruned[name] = n;
        state_["pruned_positions"] = state_.value("pruned_positions", int64_t(0)) + n;
        save();
        out_ << "pruned " << name << "'s self-play records (" << n << " positions, outside the window of " << window
             << ")\n";
      }
      fs::remove_all(gens[i]);
      kept -= n;
    }
  }

  std::string run_;
  const std::atomic<bool>& stop_;
  std::ostream& out_;
  RunLock lock_;
  Config config_;
  std::string self_;
  json state_;
};

}  // namespace

void write_config(const std::string& run_dir, const Config& c) {
  fs::create_directories(run_dir);
  write_file_atomically(run_dir + "/config.json", c.values().dump(2) + "\n");
}

Config read_config(const std::string& run_dir) {
  const std::string path = run_dir + "/config.json";
  return fs::exists(path) ? Config::load(path) : Config();
}

std::vector<int64_t> split_positions(int64_t total, int parts) {
  std::vector<int64_t> shares(std::max(parts, 1), 0);
  for (size_t i = 0; i < shares.size(); ++i)
    shares[i] = std::max<int64_t>(total, 0) / int64_t(shares.size()) +
                (int64_t(i) < std::max<int64_t>(total, 0) % int64_t(shares.size()));
  return shares;
}

int64_t count_positions(const std::string& path) {
  if (!fs::exists(path)) return 0;
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (e.is_regular_file() && e.path().extension() == ".hcpe3") files.push_back(e.path());
  } else {
    files.push_back(path);
  }
  // Files are written whole and never changed, so a count is kept per (path, size, time): a long
  // run's thousands of files are read once, not at every step.
  struct Seen {
    uintmax_t size;
    fs::file_time_type time;
    int64_t positions;
  };
  static std::map<std::string, Seen> seen;
  int64_t n = 0;
  for (const auto& f : files) {
    const uintmax_t size = fs::file_size(f);
    const fs::file_time_type time = fs::last_write_time(f);
    auto it = seen.find(f.string());
    if (it == seen.end() || it->second.size != size || it->second.time != time) {
      std::vector<Hcpe3Game> games;
      if (auto err = read_hcpe3_file(f.string(), games)) throw std::runtime_error(f.string() + ": " + *err);
      int64_t p = 0;
      for (const auto& g : games)
        for (const auto& m : g.moves) p += !m.candidates.empty();
      it = seen.insert_or_assign(f.string(), Seen{size, time, p}).first;
    }
    n += it->second.positions;
  }
  return n;
}

int run_loop(const std::string& run_dir, const std::atomic<bool>& stop, std::ostream& out) {
  Loop loop(run_dir, stop, out);
  return loop.run();
}

int evaluate_run(const std::string& run_dir, const nlohmann::json& overrides, const std::atomic<bool>& stop,
                 std::ostream& out) {
  if (!fs::exists(run_dir + "/state.json")) throw std::runtime_error(run_dir + ": no loop run here (no state.json)");
  Loop loop(run_dir, stop, out);
  return loop.evaluate(overrides);
}

int run_worker(const std::string& run_dir, const std::string& name, const std::string& selfplay_extra,
               const std::atomic<bool>& stop, std::ostream& out) {
  const std::string run = fs::absolute(run_dir).lexically_normal().string();
  const std::string dir = run + "/selfplay/workers/" + name, logs = run + "/logs";
  fs::create_directories(dir);
  fs::create_directories(logs);
  const std::string self = self_binary();
  for (int round = 0; !stop; ++round) {
    const Config config = read_config(run);
    if (!fs::exists(run + "/state.json")) {  // the loop has not started yet
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    const json state = read_json(run + "/state.json");
    const int64_t gens = config.integer("generations");
    if (gens > 0 && state["generation"].get<int64_t>() > gens) {
      out << "worker " << name << ": the run is done" << std::endl;
      break;
    }
    if (state["best"].get<std::string>().empty()) {  // generation 0 is not made yet
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    const std::string best = run + "/" + state["best"].get<std::string>();
    out << "worker " << name << ": round " << round << " with " << state["best"].get<std::string>() << std::endl;
    std::vector<std::string> a = {self,
                                  "selfplay",
                                  "--model",
                                  best,
                                  "--out",
                                  dir,
                                  "--positions",
                                  std::to_string(config.integer("worker_positions")),
                                  "--name",
                                  name + "-" + std::to_string(::time(nullptr)) + "-" + std::to_string(round),
                                  "--seed",
                                  std::to_string(config.integer("seed") * 7919 + round * 31 + ::getpid()),
                                  "--backend",
                                  config.search_backend(),
                                  "--playouts",
                                  std::to_string(config.integer("selfplay_playouts")),
                                  "--playout-cap-full",
                                  std::to_string(config.integer("selfplay_playout_cap_full")),
                                  "--max-plies",
                                  std::to_string(config.integer("max_plies"))};
    if (!config.str("openings").empty()) a.insert(a.end(), {"--start-sfens", config.str("openings")});
    for (auto& w : split_command(config.str("selfplay_args"))) a.push_back(w);
    for (auto& w : split_command(selfplay_extra)) a.push_back(w);
    const ChildResult r = run_child(a, logs + "/worker-" + name + ".log", "");
    if (stop || r.exit_code == 130) break;
    if (r.exit_code != 0)
      throw std::runtime_error("worker self-play failed (exit " + std::to_string(r.exit_code) + "); see " + logs +
                               "/worker-" + name + ".log");
  }
  return stop ? 130 : 0;
}

}  // namespace jiriki::loop
