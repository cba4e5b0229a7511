#include "loop/config.h"

#include "match/arena.h"
#include "nn/backend.h"
#include "shogi/game_rules.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace jiriki::loop {

using nlohmann::json;

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = {
      {"generations", 0, "generations to run, then stop (0: until stopped)"},
      {"seed", 1, "seed of the fresh network, self-play, training and matches (varied per generation)"},
      {"backend", "auto", "cpu, cuda or auto (cuda when jiriki was built with CUDA)"},
      {"gpus", "0",
       "CUDA devices the phases use in turn, e.g. \"0,1,2,3\", or \"all\": every one of the machine the run is on "
       "(self-play: one queue each; training: data parallel)"},
      {"blocks", 2, "residual blocks of the fresh network (generation 0)"},
      {"channels", 32, "channels of the fresh network"},
      {"activation", "relu", "relu or swish (fresh network)"},
      {"init_model", "",
       "generation 0 is this model file (e.g. one trained on teacher games) instead of a fresh network"},
      {"extra_data", "",
       "more training data for every generation: hcpe3/hcpe files or directories, comma-separated (e.g. earlier "
       "teacher games)"},
      {"openings", "", "openings file (lines 'startpos | [sfen] SFEN [moves ...]') for self-play and matches"},
      {"max_plies", GameRules{}.max_plies, "games reaching this many plies are draws (self-play and matches)"},
      {"selfplay_local", true,
       "the loop plays self-play itself (false: only `jiriki loop worker`s do, the loop waits for them)"},
      {"selfplay_positions", 2000, "new training positions per generation, made by the best network"},
      {"selfplay_playouts", 100, "self-play playouts per move (the small cap with selfplay_playout_cap_full)"},
      {"selfplay_playout_cap_full", 0, "playout-cap randomisation: the full cap (0: off)"},
      {"selfplay_args", "", "more `jiriki selfplay` options, e.g. \"--resign 0.05 --dirichlet-alpha 0.2\""},
      {"holdout_positions", 200, "held-out self-play positions per generation for the test metrics (0: none)"},
      {"train_steps", 200, "training steps per generation"},
      {"train_epochs", 0,
       "instead of train_steps: passes over the generation's window (steps = epochs x window / "
       "(train_batch x GPUs); under train_batch auto, steps of train_batch_start, counted in positions)"},
      {"train_batch", "auto", "positions per step per replica, or auto (tuned for goodput)"},
      {"train_batch_start", 64,
       "train_batch auto: the per-replica batch the tuner starts from (jiriki train --batch-start), which "
       "train_lr is given for"},
      {"train_lr", "auto", "peak learning rate (auto: jiriki train's default)"},
      {"train_fresh_every", 0,
       "every K-th generation (K, 2K, ...) trains a fresh network (blocks x channels) on the "
       "window, the others fine-tune the best (0: never, 1: every generation; the old key "
       "train_fresh true is 1)"},
      {"train_both", false,
       "a generation that trains fresh also fine-tunes the best: both candidates play the gate "
       "and the better one that passes is promoted (the cycles' choice, made by measurement)"},
      {"train_fresh_epochs", 0,
       "passes over the window of a fresh candidate (0: as a fine-tuned one, train_epochs or "
       "train_steps)"},
      {"train_fresh_args", "",
       "more `jiriki train` options for fresh candidates, after train_args (the last of an option "
       "counts), e.g. \"--lr 0.1 --warmup-steps 200\""},
      {"networks", json::array(),
       "more network shapes trained each generation on the same window, each gated against "
       "its own best, kept in models/NAME/ and recorded under networks.NAME (self-play uses "
       "the main network): a JSON array of {\"name\", \"init_model\" or \"blocks\", "
       "\"channels\", \"activation\", and optionally \"train_epochs\", \"train_args\", \"distill\" (the main "
       "network's share in the targets, e.g. 0.5: distillation from the network of the generation's self-play, "
       "which also makes every self-play move a training position; 0: none)}"},
      {"val_lambda", 0.333,
       "self-play training: weight of the search's eval in the value target (the rest: the result)"},
      {"train_launcher", "",
       "a command in front of `jiriki train`, e.g. \"mpirun -np 8 -H host1:4,host2:4\" (training across hosts)"},
      {"train_args", "", "more `jiriki train` options, e.g. \"--optimizer adamw\""},
      {"window_min_rows", 20000, "sliding window: the smallest window (KataGo's -min-rows)"},
      {"window_expand_per_row", 0.4, "sliding window: initial growth per new position (-expand-window-per-row)"},
      {"window_taper_exponent", 0.65, "sliding window: the window grows as total^this (-taper-window-exponent)"},
      {"window_taper_scale", 0, "sliding window: where the power law takes over (0: window_min_rows)"},
      {"window_max_rows", 0, "sliding window: a cap (0: none)"},
      {"prune_records", false,
       "delete a generation's self-play records once the window no longer reaches them (a "
       "bounded disk; their positions still count towards the window's growth)"},
      {"gate", true, "play each candidate against the best and promote only a winner (false: always promote)"},
      {"gate_nodes", 100, "playouts per move in gate and evaluation matches"},
      {"gate_games", 100, "most games of a gate match (SPRT may stop it earlier)"},
      {"gate_concurrency", 2, "games at once in matches of USI engine processes"},
      {"arena", true,
       "matches between jiriki networks at a node limit (the gate, eval_first, anchors with \"model\" and a "
       "nodes= tc), and the candidate of an anchor with \"engine\" and \"nodes\", play in the match's own "
       "process over every GPU of gpus (jiriki match's model=PATH engines); false: a USI engine process for "
       "each side of a game"},
      {"arena_concurrency", 0,
       "games at once of a match in one process, over all GPUs (0: all of them; against an engine's processes "
       "at most the cores)"},
      {"gate_sprt", "elo0=0 elo1=10 alpha=0.05 beta=0.05", "the gate's SPRT, as jiriki match --sprt takes it"},
      {"gate_random_plies", 8, "random opening plies of match games (when no openings file)"},
      {"gate_undecided", "score", "an undecided gate: score (promote when the candidate scored over 50%) or keep"},
      {"eval_first_games", 0, "games of each candidate against generation 0, for the Elo curve (0: none)"},
      {"anchor", "",
       "a USI engine every candidate also plays, a fixed outside reference for the Elo curve (a "
       "command line, or a jiriki match --engine spec with cmd=), e.g. gpsshogi at a node limit"},
      {"anchor_games", 0, "games of each candidate against the anchor (0: none)"},
      {"anchor_tc", "movetime=100", "the anchor matches' time control, for both engines (jiriki match --tc)"},
      {"anchor_args", "", "more `jiriki match` options for the anchor matches, e.g. \"--margin 200\""},
      {"anchor_every", 1,
       "the anchor and anchors play every K-th generation's candidates only (K, 2K, ...; 1: every generation), "
       "for shorter generations; `jiriki loop eval` plays the others' later"},
      {"anchors", json::array(),
       "more fixed references, each played by every generation: a JSON array of {\"name\", "
       "\"engine\" (as anchor) or \"model\" (a jiriki network file, e.g. the shipped one), "
       "\"games\", and optionally \"tc\" (default anchor_tc), \"args\", \"network\" (whose "
       "candidate plays: a name from networks; default the main one), \"nodes\" (with an \"engine\" and "
       "arena: the candidate plays at this many nodes a move in the match's own process, sharing each "
       "GPU's network calls, while the engine keeps its processes and the tc), \"every\" (this anchor's "
       "own anchor_every, e.g. a long replacement SPRT every 4th generation), \"play\" (\"candidate\", the "
       "generation's candidate, or \"best\", the line's best after the generation's gate: the network a "
       "replacement SPRT would ship)}; recorded under anchors.NAME; a match the same network already played in the "
       "same setting is not played again (repeat_of)"},
      {"engine_options", "", "more USI options of jiriki in matches, e.g. \"option.Threads=2\""},
      {"match_command", "", "the match program (empty: this jiriki's `match`); for tests and other tools"},
      {"teacher", "", "bootstrap: a USI engine (a command line, or a jiriki match --engine spec with cmd=)"},
      {"teacher_games", 200, "bootstrap: teacher-vs-teacher games"},
      {"teacher_tc", "movetime=100", "bootstrap: the teacher's time control (jiriki match --tc)"},
      {"teacher_args", "", "bootstrap: more `jiriki match` options for the teacher's games, e.g. \"--margin 200\""},
      {"teacher_concurrency", 2, "bootstrap: teacher games at once"},
      {"teacher_train_steps", 1000, "bootstrap: supervised training steps on the teacher's games"},
      {"teacher_val_lambda", 0.5, "bootstrap: elmo's lambda, the teacher eval's weight in the value target"},
      {"worker_positions", 1000, "`jiriki loop worker`: positions per round (then it looks for a newer best)"},
      {"plots", true, "draw RUN/plots/*.png with gnuplot after each generation"},
  };
  return keys;
}

namespace {
const ConfigKey* find_key(const std::string& name) {
  for (const auto& k : config_keys())
    if (name == k.name) return &k;
  return nullptr;
}
bool same_type(const json& def, const json& v) {
  if (def.is_boolean()) return v.is_boolean();
  if (def.is_number()) return v.is_number();
  if (def.is_array()) return v.is_array();
  return v.is_string();
}

// Checks one entry of an array key (networks, anchors): an object of the `allowed` fields, each of its
// type (number, string), with a plain name not used before. Throws naming the key and the entry.
void check_entry(const char* key, const json& e, const std::map<std::string, json::value_t>& allowed,
                 std::vector<std::string>& names) {
  const std::string where = std::string("loop config key '") + key + "'";
  if (!e.is_object() || !e.contains("name") || !e["name"].is_string())
    throw std::invalid_argument(where + ": each entry is an object with a \"name\", not " + e.dump());
  const std::string name = e["name"];
  if (name.empty() ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != std::string::npos)
    throw std::invalid_argument(where + ": the name \"" + name + "\" is not a plain name (letters, digits, _ and -)");
  if (std::find(names.begin(), names.end(), name) != names.end())
    throw std::invalid_argument(where + ": the name \"" + name + "\" is used twice");
  names.push_back(name);
  for (const auto& [field, value] : e.items()) {
    const auto it = allowed.find(field);
    if (it == allowed.end())
      throw std::invalid_argument(where + ", entry \"" + name + "\": unknown field '" + field + "'");
    const bool ok = it->second == json::value_t::string ? value.is_string() : value.is_number();
    if (!ok)
      throw std::invalid_argument(where + ", entry \"" + name + "\": '" + field + "' takes a " +
                                  (it->second == json::value_t::string ? "string" : "number") + ", not " +
                                  value.dump());
  }
}
}  // namespace

Config::Config() {
  for (const auto& k : config_keys()) values_[k.name] = k.def;
}

Config::Config(const json& j) : Config() {
  if (!j.is_object()) throw std::invalid_argument("the loop config must be a JSON object");
  for (const auto& [key, value] : j.items()) set(key, value);
  check();
}

Config Config::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot read the loop config");
  try {
    return Config(json::parse(in));
  } catch (const json::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

void Config::set(const std::string& key, const json& value) {
  if (key == "train_fresh" && value.is_boolean()) {  // the older key: every candidate fresh, or none
    values_["train_fresh_every"] = value.get<bool>() ? 1 : 0;
    return;
  }
  const ConfigKey* k = find_key(key);
  if (!k) throw std::invalid_argument("unknown loop config key '" + key + "' (see jiriki loop --config-help)");
  if (!same_type(k->def, value))
    throw std::invalid_argument("loop config key '" + key + "' takes a " + k->def.type_name() + ", not " +
                                value.dump());
  values_[key] = value;
}

void Config::check() const {
  auto positive = [&](const char* key) {
    if (real(key) <= 0) throw std::invalid_argument(std::string("loop config key '") + key + "' must be positive");
  };
  auto non_negative = [&](const char* key) {
    if (real(key) < 0) throw std::invalid_argument(std::string("loop config key '") + key + "' must not be negative");
  };
  for (const char* k : {"selfplay_positions", "selfplay_playouts", "train_steps", "blocks", "channels", "max_plies",
                        "window_expand_per_row", "window_taper_exponent", "gate_nodes", "gate_games",
                        "gate_concurrency", "teacher_games", "teacher_concurrency", "teacher_train_steps",
                        "worker_positions", "anchor_every", "train_batch_start"})
    positive(k);
  for (const char* k :
       {"generations", "holdout_positions", "selfplay_playout_cap_full", "window_min_rows", "window_taper_scale",
        "window_max_rows", "gate_random_plies", "eval_first_games", "anchor_games", "val_lambda", "teacher_val_lambda",
        "train_epochs", "train_fresh_every", "train_fresh_epochs"})
    non_negative(k);
  std::vector<std::string> names;
  for (const json& e : values_["networks"]) {
    check_entry("networks", e,
                {{"name", json::value_t::string},
                 {"init_model", json::value_t::string},
                 {"blocks", json::value_t::number_integer},
                 {"channels", json::value_t::number_integer},
                 {"activation", json::value_t::string},
                 {"train_epochs", json::value_t::number_float},
                 {"train_args", json::value_t::string},
                 {"distill", json::value_t::number_float}},
                names);
    for (const char* f : {"blocks", "channels"})
      if (e.contains(f) && e[f].get<double>() < 1)
        throw std::invalid_argument("loop config key 'networks', entry \"" + e["name"].get<std::string>() + "\": '" +
                                    f + "' must be positive");
    if (e.contains("distill") && !(e["distill"].get<double>() >= 0 && e["distill"].get<double>() <= 1))
      throw std::invalid_argument("loop config key 'networks', entry \"" + e["name"].get<std::string>() +
                                  "\": 'distill' must be in [0, 1]");
  }
  const std::vector<std::string> networks = names;
  names.clear();
  for (const json& e : values_["anchors"]) {
    check_entry("anchors", e,
                {{"name", json::value_t::string},
                 {"engine", json::value_t::string},
                 {"model", json::value_t::string},
                 {"games", json::value_t::number_integer},
                 {"tc", json::value_t::string},
                 {"args", json::value_t::string},
                 {"network", json::value_t::string},
                 {"nodes", json::value_t::number_integer},
                 {"every", json::value_t::number_integer},
                 {"play", json::value_t::string}},
                names);
    const std::string where = "loop config key 'anchors', entry \"" + e["name"].get<std::string>() + "\": ";
    if (e.contains("engine") == e.contains("model"))
      throw std::invalid_argument(where + "needs an \"engine\" or a \"model\"");
    if (e.value("games", 0.0) < 1) throw std::invalid_argument(where + "needs \"games\", a positive number");
    if (e.contains("nodes") && (!e.contains("engine") || e["nodes"].get<double>() < 1))
      throw std::invalid_argument(where + "\"nodes\" (the candidate's count against an \"engine\") must be positive");
    if (e.contains("every") && e["every"].get<double>() < 1)
      throw std::invalid_argument(where + "\"every\" (play it every K-th generation) must be positive");
    const std::string play = e.value("play", std::string("candidate"));
    if (play != "candidate" && play != "best")
      throw std::invalid_argument(where + "\"play\" must be \"candidate\" or \"best\", not \"" + play + "\"");
    const std::string n = e.value("network", std::string());
    if (!n.empty() && std::find(networks.begin(), networks.end(), n) == networks.end())
      throw std::invalid_argument(where + "its network \"" + n + "\" is not one of the key 'networks'");
  }
  const std::string batch = str("train_batch");
  if (batch != "auto" &&
      (batch.empty() || batch.find_first_not_of("0123456789") != std::string::npos || std::stoll(batch) < 1))
    throw std::invalid_argument("loop config key 'train_batch' must be a positive number or auto, not \"" + batch +
                                "\"");
  if (real("val_lambda") > 1 || real("teacher_val_lambda") > 1)
    throw std::invalid_argument("loop config keys 'val_lambda' and 'teacher_val_lambda' must be between 0 and 1");
  const std::string b = str("backend");
  if (b != "auto" && b != "cpu" && b != "cuda")
    throw std::invalid_argument("loop config key 'backend': auto, cpu or cuda");
  if (real("anchor_games") > 0 && str("anchor").empty())
    throw std::invalid_argument("loop config key 'anchor_games' needs an 'anchor' engine to play");
  if (flag("train_both") && (integer("train_fresh_every") == 0 || !flag("gate")))
    throw std::invalid_argument(
        "loop config key 'train_both' needs 'train_fresh_every' above 0 and the 'gate' to choose");
  if (flag("arena") && !str("engine_options").empty()) {
    // The networks of an in-process match take the engine's search options only.
    match::EngineSpec spec;
    match::ArenaEngine engine;
    auto err = match::parse_engine_spec("model=network " + str("engine_options"), spec);
    if (!err) err = match::arena_engine(spec, nn::BackendKind::CPU, engine);
    if (err)
      throw std::invalid_argument("loop config key 'engine_options': " + *err +
                                  "; set 'arena' to false to play matches between USI engine processes");
  }
  const std::string u = str("gate_undecided");
  if (u != "score" && u != "keep") throw std::invalid_argument("loop config key 'gate_undecided': score or keep");
}

int64_t Config::integer(const std::string& key) const { return int64_t(values_.at(key).get<double>()); }
double Config::real(const std::string& key) const { return values_.at(key).get<double>(); }
std::string Config::str(const std::string& key) const { return values_.at(key).get<std::string>(); }
bool Config::flag(const std::string& key) const { return values_.at(key).get<bool>(); }

WindowConfig Config::window() const {
  return {.min_rows = integer("window_min_rows"),
          .expand_per_row = real("window_expand_per_row"),
          .taper_exponent = real("window_taper_exponent"),
          .taper_scale = real("window_taper_scale"),
          .max_rows = integer("window_max_rows")};
}

std::string Config::backend() const {
  // "auto" is resolved where every subcommand resolves it (nn::resolve_backend): the GPU when one is
  // usable, else the CPU; the phases are then told the same backend explicitly.
  return backend_kind_name(nn::resolve_backend(str("backend"), nn::BackendUse::TRAINING).kind);
}

std::string Config::gpus() const {
  const std::string list = str("gpus");
  if (list != "all") return list;
  const std::vector<int> devices = nn::cuda_devices();
  if (devices.empty()) return "0";  // no usable GPU: one process on the CPU backend
  std::string all;
  for (int d : devices) all += (all.empty() ? "" : ",") + std::to_string(d);
  return all;
}

std::string Config::search_backend() const { return backend_kind_name(nn::resolve_backend(str("backend")).kind); }

std::string config_help() {
  std::ostringstream s;
  for (const auto& k : config_keys()) s << "  " << k.name << " (default " << k.def.dump() << "): " << k.help << "\n";
  return s.str();
}

}  // namespace jiriki::loop
