#include "loop/report.h"

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/atomic_file.h"
#include "loop/child.h"
#include "match/stats.h"

namespace jiriki::loop {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<json> read_train_log(const std::string& path, const std::string& type) {
  std::map<int64_t, json> by_step;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    // A line cut by a kill is not JSON: skipped (its step is logged again by the resumed run).
    const json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == type && j.contains("step")) by_step[j["step"].get<int64_t>()] = j;
  }
  std::vector<json> out;
  for (auto& [step, j] : by_step) out.push_back(std::move(j));
  return out;
}

namespace {

// A number at a JSON pointer of `j`, if there is one.
bool number_at(const json& j, const std::string& pointer, double& out) {
  const json::json_pointer p(pointer);
  if (!j.contains(p) || !j.at(p).is_number()) return false;
  out = j.at(p).get<double>();
  return true;
}

// A match (at a JSON pointer of a generation's record) that one side won outright has no finite Elo:
// the Elo of the Wilson 95% bound of its
// score stands for it (the lower bound when the candidate won every game, the upper when it lost
// them all), drawn apart as "at least" / "at most"; NaN for any other match, or none played.
std::string unbounded_elo_or_nan(const json& record, const std::string& pointer) {
  double elo;
  const json::json_pointer at(pointer);
  if (!record.contains(at) || number_at(record, pointer + "/elo", elo)) return "NaN";
  const json& m = record.at(at);
  const auto e = jiriki::match::estimate_wdl(m.value("wins", int64_t(0)), m.value("draws", int64_t(0)),
                                             m.value("losses", int64_t(0)));
  if (m.value("games", int64_t(0)) == 0 || (e.score > 0 && e.score < 1)) return "NaN";
  std::ostringstream s;
  s << jiriki::match::elo_from_score(e.score >= 1 ? e.score_lo : e.score_hi);
  return s.str();
}

}  // namespace

std::vector<Scalar> generation_scalars(const json& record, const std::vector<json>& train_log,
                                       int64_t train_step_base) {
  std::vector<Scalar> out;
  const int64_t gen = record.value("generation", int64_t(0));
  const double wall = record.value("wall_time", 0.0);
  // TensorBoard tag <- the record's field.
  static const std::pair<const char*, const char*> generation_fields[] = {
      {"generation/positions", "/selfplay/positions"},
      {"generation/positions_total", "/positions_total"},
      {"generation/window", "/window"},
      {"generation/positions_per_hour", "/selfplay/positions_per_hour"},
      {"heldout/loss", "/train/test/loss"},
      {"heldout/policy_loss", "/train/test/policy_loss"},
      {"heldout/value_loss", "/train/test/value_loss"},
      {"heldout/policy_accuracy", "/train/test/policy_accuracy"},
      {"heldout/value_accuracy", "/train/test/value_accuracy"},
      {"gate/score", "/gate/score"},
      {"gate/elo", "/gate/elo"},
      {"gate/promoted", "/promoted_number"},
      {"eval_first/elo", "/eval_first/elo"},
      {"eval_anchor/elo", "/eval_anchor/elo"},
      {"seconds/selfplay", "/seconds/selfplay"},
      {"seconds/holdout", "/seconds/holdout"},
      {"seconds/train", "/seconds/train"},
      {"seconds/gate", "/seconds/gate"},
      {"seconds/eval_first", "/seconds/eval_first"},
      {"seconds/eval_anchor", "/seconds/eval_anchor"},
  };
  json r = record;
  r["promoted_number"] = record.value("promoted", false) ? 1 : 0;
  for (const auto& [tag, pointer] : generation_fields) {
    double v;
    if (number_at(r, pointer, v)) out.push_back({tag, gen, v, wall});
  }
  // The other networks' figures (networks/NAME/...) and the anchors' (anchors/NAME/...).
  static const std::pair<const char*, const char*> network_fields[] = {
      {"heldout/loss", "/train/test/loss"},
      {"heldout/policy_accuracy", "/train/test/policy_accuracy"},
      {"heldout/value_accuracy", "/train/test/value_accuracy"},
      {"gate/score", "/gate/score"},
      {"gate/elo", "/gate/elo"},
      {"gate/promoted", "/promoted_number"}};
  if (record.contains("networks") && record["networks"].is_object())
    for (const auto& [name, n] : record["networks"].items()) {
      json m = n;
      m["promoted_number"] = n.value("promoted", false) ? 1 : 0;
      for (const auto& [tag, pointer] : network_fields) {
        double v;
        if (number_at(m, pointer, v)) out.push_back({"networks/" + name + "/" + tag, gen, v, wall});
      }
    }
  if (record.contains("anchors") && record["anchors"].is_object())
    for (const auto& [name, a] : record["anchors"].items())
      for (const char* f : {"elo", "score"}) {
        double v;
        if (number_at(a, std::string("/") + f, v)) out.push_back({"anchors/" + name + "/" + f, gen, v, wall});
      }
  static const std::pair<const char*, const char*> step_fields[] = {
      {"train/loss", "/loss"},
      {"train/policy_loss", "/policy_loss"},
      {"train/value_loss", "/value_loss"},
      {"train/value_eval_loss", "/value_eval_loss"},
      {"train/policy_accuracy", "/policy_accuracy"},
      {"train/value_accuracy", "/value_accuracy"},
      {"train/lr", "/lr"},
      {"train/batch", "/batch"},
      {"train/noise_scale", "/noise_scale"},
      {"train/grad_norm", "/grad_norm"},
      {"train/samples_per_second", "/samples_per_second"},
  };
  const double train_start = record.value("train_wall_time", wall);
  for (const json& t : train_log) {
    const int64_t step = train_step_base + t["step"].get<int64_t>();
    const double w = train_start + t.value("elapsed_seconds", 0.0);
    for (const auto& [tag, pointer] : step_fields) {
      double v;
      if (number_at(t, pointer, v)) out.push_back({tag, step, v, w});
    }
  }
  return out;
}

void write_metrics(const std::string& run_dir, const json& history) {
  std::string text;
  for (const json& r : history) text += r.dump() + "\n";
  write_file_atomically(run_dir + "/metrics.jsonl", text);
}

void write_tensorboard(const std::string& run_dir, const json& record, const std::vector<json>& train_log,
                       int64_t train_step_base) {
  const std::string dir = run_dir + "/tensorboard";
  fs::create_directories(dir);
  char name[64];
  std::snprintf(name, sizeof name, "events.out.tfevents.%010lld.jiriki", (long long)record.value("generation", 0));
  write_event_file(dir + "/" + name, generation_scalars(record, train_log, train_step_base),
                   record.value("wall_time", 0.0));
}

namespace {

std::string find_in_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string d;
  while (std::getline(dirs, d, ':'))
    if (!d.empty() && ::access((d + "/" + program).c_str(), X_OK) == 0) return d + "/" + program;
  return "";
}

std::string number_or_nan(const json& j, const std::string& pointer) {
  double v;
  if (!number_at(j, pointer, v)) return "NaN";
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

std::string draw_plots(const std::string& run_dir, const json& history) {
  const std::string gnuplot = find_in_path("gnuplot");
  if (gnuplot.empty()) return "gnuplot is not installed: no plots (apt-get install gnuplot-nox)";
  const std::string dir = run_dir + "/plots";
  fs::create_directories(dir);
  // The data gnuplot reads: one row per generation, one per training step.
  std::ostringstream gens, steps;
  gens << "# generation gate_elo lo hi eval_first_elo lo hi positions_per_hour heldout_loss policy_accuracy "
          "value_accuracy anchor_elo lo hi eval_first_bound anchor_bound";
  steps << "# global_step loss policy_loss value_loss\n";
  // An Elo interval open at one end (a side that scored every point, or nearly) has a null bound: it is
  // written far off the chart (kUnbounded), whose range then follows the finite figures, so that the
  // point is drawn with its bar running off the edge rather than left out.
  constexpr double kUnbounded = 1e4;
  double elo_low = 0, elo_high = 0;
  bool open_interval = false, first_bounds = false, anchor_bounds = false;
  // The anchors' and the other networks' matches, each 4 more columns (Elo, lo, hi, the Elo of the
  // score bound when one side won outright) after the 16 above, in the order they first appear. A
  // network anchor whose file changed during the run (model_fnv1a64) is a curve for each content,
  // titled with the generation it first played from there on.
  struct Curve {
    std::string pointer, title;  // the match's JSON pointer in a generation's record, the curve's title
    std::string model;           // only the records whose anchor file had this checksum ("": all)
  };
  std::vector<Curve> more;
  // An anchor match's file checksum; matches recorded before checksums were are one content of their own.
  auto model_of = [](const json& match) { return match.value("model_fnv1a64", std::string("unrecorded")); };
  // Which network's candidate (or best: anchors[].play) plays each anchor (the config's
  // anchors[].network; "": the main one).
  std::map<std::string, std::string> anchor_network, anchor_play;
  if (std::ifstream in(run_dir + "/config.json"); in) {
    const json config = json::parse(in, nullptr, false);
    if (!config.is_discarded() && config.contains("anchors") && config["anchors"].is_array())
      for (const json& a : config["anchors"])
        if (a.is_object() && a.contains("name") && a["name"].is_string()) {
          anchor_network[a["name"].get<std::string>()] = a.value("network", std::string());
          anchor_play[a["name"].get<std::string>()] = a.value("play", std::string("candidate"));
        }
  }
  std::map<std::string, std::set<std::string>> anchor_models;  // each anchor's file checksums
  for (const json& r : history)
    if (r.contains("anchors") && r["anchors"].is_object())
      for (const auto& [name, m] : r["anchors"].items()) anchor_models[name].insert(model_of(m));
  for (const json& r : history)
    for (const char* group : {"anchors", "networks"})
      if (r.contains(group) && r[group].is_object())
        for (const auto& [name, m] : r[group].items()) {
          const bool anchor = group == std::string("anchors");
          const std::string pointer = "/" + std::string(group) + "/" + name + (anchor ? "" : "/gate");
          const std::string& network = anchor_network[name];
          Curve c{pointer,
                  anchor ? (network.empty() ? "" : network + " ") +
                               (anchor_play.count(name) ? anchor_play[name] : "candidate") + " vs " + name
                         : name + " candidate vs its best (gate)",
                  ""};
          if (anchor && anchor_models[name].size() > 1) c.model = model_of(m);
          if (!anchor && !m.contains("gate")) continue;
          const auto same = [&](const Curve& x) { return x.pointer == c.pointer && x.model == c.model; };
          if (std::any_of(more.begin(), more.end(), same)) continue;
          const bool later =
              std::any_of(more.begin(), more.end(), [&](const Curve& x) { return x.pointer == c.pointer; });
          if (later) c.title += " (another file from generation " + std::to_string(r.value("generation", 0)) + ")";
          more.push_back(c);
        }
  for (const Curve& c : more) gens << ' ' << c.pointer.substr(1) << "_elo lo hi bound";
  std::vector<bool> more_bounds(more.size(), false);  // some generation won or lost that match outright
  gens << '\n';
  for (const json& r : history) {
    gens << r.value("generation", 0);
    for (const char* p :
         {"/gate/elo", "/gate/elo_95/0", "/gate/elo_95/1", "/eval_first/elo", "/eval_first/elo_95/0",
          "/eval_first/elo_95/1", "/selfplay/positions_per_hour", "/train/test/loss", "/train/test/policy_accuracy",
          "/train/test/value_accuracy", "/eval_anchor/elo", "/eval_anchor/elo_95/0", "/eval_anchor/elo_95/1"}) {
      const std::string pointer = p;
      const bool elo = pointer.find("/elo") != std::string::npos;
      const bool bound = pointer.find("/elo_95/") != std::string::npos;
      double v, centre;
      const std::string match = pointer.substr(0, pointer.find('/', 1));
      if (bound && !number_at(r, pointer, v) && number_at(r, match + "/elo", centre)) {
        gens << ' ' << (pointer.back() == '0' ? -kUnbounded : kUnbounded);
        open_interval = true;
        continue;
      }
      if (elo && number_at(r, pointer, v)) {
        elo_low = std::min(elo_low, v);
        elo_high = std::max(elo_high, v);
      }
      gens << ' ' << number_or_nan(r, pointer);
    }
    for (const char* match : {"eval_first", "eval_anchor"}) {
      const std::string bound = unbounded_elo_or_nan(r, "/" + std::string(match));
      if (bound != "NaN") {
        (match == std::string("eval_first") ? first_bounds : anchor_bounds) = true;
        elo_low = std::min(elo_low, std::stod(bound));
        elo_high = std::max(elo_high, std::stod(bound));
      }
      gens << ' ' << bound;
    }
    for (size_t i = 0; i < more.size(); ++i) {
      const std::string& pointer = more[i].pointer;
      const json::json_pointer at(pointer);
      if (!more[i].model.empty() && r.contains(at) && model_of(r[at]) != more[i].model) {
        gens << " NaN NaN NaN NaN";  // the anchor's file had other content in this generation
        continue;
      }
      double elo, v;
      const bool has = number_at(r, pointer + "/elo", elo);
      for (const char* b : {"/elo_95/0", "/elo_95/1"})
        if (has && !number_at(r, pointer + b, v)) open_interval = true;
      if (has) elo_low = std::min(elo_low, elo), elo_high = std::max(elo_high, elo);
      gens << ' ' << number_or_nan(r, pointer + "/elo");
      for (const char* b : {"/elo_95/0", "/elo_95/1"})
        gens << ' '
             << (has && !number_at(r, pointer + b, v) ? (b[8] == '0' ? "-1e4" : "1e4") : number_or_nan(r, pointer + b));
      const std::string bound = unbounded_elo_or_nan(r, pointer);
      if (bound != "NaN") {
        more_bounds[i] = true;
        elo_low = std::min(elo_low, std::stod(bound));
        elo_high = std::max(elo_high, std::stod(bound));
      }
      gens << ' ' << bound;
    }
    gens << '\n';
    const int64_t base = r.value("train_step_base", int64_t(0));
    for (const json& t : read_train_log(run_dir + "/" + r.value("train_log", std::string()), "train"))
      steps << base + t["step"].get<int64_t>() << ' ' << number_or_nan(t, "/loss") << ' '
            << number_or_nan(t, "/policy_loss") << ' ' << number_or_nan(t, "/value_loss") << '\n';
  }
  write_file_atomically(dir + "/generations.dat", gens.str());
  write_file_atomically(dir + "/steps.dat", steps.str());
  // One gnuplot run per plot (a plot with no data yet fails alone); each PNG is drawn to a
  // temporary name and renamed, so a kill leaves the previous plot whole.
  const std::string gens_file = "'" + dir + "/generations.dat'", steps_file = "'" + dir + "/steps.dat'";
  // The anchor's curve only when some generation played it (gnuplot refuses a curve with no point).
  const bool anchored =
      std::any_of(history.begin(), history.end(), [](const json& r) { return r.contains("eval_anchor"); });
  const std::string anchor_curve = anchored ? ", '' using 1:12:13:14 with yerrorlines title 'candidate vs anchor'" : "";
  // Matches one side won outright: a triangle at the Elo of the score's bound (up: at least, down: at most).
  std::string more_curves;
  for (size_t i = 0; i < more.size(); ++i) {
    const size_t col = 17 + 4 * i;
    more_curves += ", '' using 1:" + std::to_string(col) + ":" + std::to_string(col + 1) + ":" +
                   std::to_string(col + 2) + " with yerrorlines title '" + more[i].title + "'";
    if (more_bounds[i])
      more_curves += ", '' using 1:" + std::to_string(col + 3) + " with points pt 12 ps 1.5 title '" + more[i].title +
                     ", won or lost outright: Elo of the score bound'";
  }
  std::string bound_curves;
  if (first_bounds)
    bound_curves +=
        ", '' using 1:15 with points pt 8 ps 1.5 title 'vs generation 0, won or lost outright: Elo of the score bound'";
  if (anchor_bounds)
    bound_curves +=
        ", '' using 1:16 with points pt 10 ps 1.5 title 'vs anchor, won or lost outright: Elo of the score bound'";
  std::string elo_range;
  if (open_interval) {
    const double pad = std::max(50.0, (elo_high - elo_low) * 0.1);
    std::ostringstream range;
    range << "set yrange [" << elo_low - pad << ":" << elo_high + pad << "]\n";
    elo_range = range.str();
  }
  const std::pair<const char*, std::string> plots[] = {
      {"loss", "set title 'training loss'\nset xlabel 'training step (all generations)'\nset ylabel 'loss'\nplot " +
                   steps_file +
                   " using 1:2 with lines title 'total', '' using 1:3 with lines title 'policy', '' using "
                   "1:4 with lines title 'value'\n"},
      {"heldout", "set title 'held-out positions'\nset xlabel 'generation'\nset ylabel 'loss / accuracy'\nplot " +
                      gens_file +
                      " using 1:9 with linespoints title 'loss', '' using 1:10 with linespoints title "
                      "'policy top-1 accuracy', '' using 1:11 with linespoints title 'value accuracy'\n"},
      {"elo", "set title 'Elo by generation (95% interval)'\nset xlabel 'generation'\nset ylabel 'Elo'\n" + elo_range +
                  "plot " + gens_file +
                  " using 1:2:3:4 with yerrorlines title 'candidate vs best (gate)', '' using 1:5:6:7 with "
                  "yerrorlines title 'candidate vs generation 0'" +
                  anchor_curve + more_curves + bound_curves + "\n"},
      {"positions_per_hour",
       "set title 'self-play positions per hour'\nset xlabel 'generation'\nset ylabel "
       "'positions/hour'\nplot " +
           gens_file + " using 1:8 with linespoints title 'positions/hour'\n"},
  };
  std::string warnings;
  fs::remove(dir + "/gnuplot.log");  // this drawing's messages only
  for (const auto& [name, body] : plots) {
    const std::string png = dir + "/" + name + ".png", script = dir + "/" + name + ".gp";
    // Generation axes: whole-number ticks while they fit, and room beside the first and last points.
    const std::string axes = std::string(name) == "loss" ? ""
                             : history.size() <= 20      ? "set xtics 1\nset offsets graph 0.05, graph 0.05, 0, 0\n"
                                                         : "set offsets graph 0.05, graph 0.05, 0, 0\n";
    write_file_atomically(script, "set terminal png size 900,560\nset grid\nset datafile missing 'NaN'\n" + axes +
                                      "set output '" + png + ".tmp'\n" + body);
    // Not interrupted by a stop: the record step finishes its plots (a second or two).
    const ChildResult r = run_child({gnuplot, script}, dir + "/gnuplot.log", "", false);
    std::error_code ec;
    if (r.exit_code == 0) fs::rename(png + ".tmp", png, ec);
    if (r.exit_code != 0 || ec) {
      fs::remove(png + ".tmp", ec);
      warnings += std::string(warnings.empty() ? "" : "; ") + name + ".png not drawn (see " + dir + "/gnuplot.log)";
    }
  }
  return warnings;
}

std::string redraw_plots(const std::string& run_dir) {
  std::ifstream in(run_dir + "/state.json");
  if (!in) throw std::runtime_error("cannot read " + run_dir + "/state.json: not a loop run directory");
  const json state = json::parse(in, nullptr, false);
  if (state.is_discarded() || !state.contains("history") || !state["history"].is_array())
    throw std::runtime_error(run_dir + "/state.json is not a loop state (no history)");
  return draw_plots(run_dir, state["history"]);
}

}  // namespace jiriki::loop
