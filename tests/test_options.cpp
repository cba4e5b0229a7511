// Options declared once: Args fills the field an option is bound to and shows its value as the
// default; each command's --help shows the defaults of the structs its options fill; the USI
// engine announces the defaults of SearchParams and TimeOptions.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/args.h"
#include "engine/search/search.h"
#include "match/tournament.h"
#include "nn/model.h"
#include "selfplay/game.h"
#include "selfplay/selfplay.h"
#include "training/trainer.h"
#include "usi/engine.h"

using namespace jiriki;

namespace {

// Parses `words` (argv[0] first) with `args`; the exit code of parse().
int parse(Args& args, std::vector<std::string> words) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return args.parse(int(argv.size()), argv.data());
}

// Every "--name X ... (default: D)" of a --help text: name -> D.
std::map<std::string, std::string> help_defaults(const std::string& help) {
  std::map<std::string, std::string> out;
  std::istringstream in(help);
  std::string name;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  -", 0) == 0) {
      const size_t b = line.find_first_not_of('-', 2), e = line.find(' ', b);
      name = line.substr(b, e - b);
    }
    const size_t d = line.rfind("(default: ");
    if (d != std::string::npos && line.back() == ')') out[name] = line.substr(d + 10, line.size() - d - 11);
  }
  return out;
}

// `jiriki ARGS --help`'s defaults.
std::map<std::string, std::string> cli_defaults(const std::string& command) {
  const std::string cmd = std::string(JIRIKI_BINARY) + " " + command + " --help";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  REQUIRE(pipe);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
  return help_defaults(out);
}

double number(const std::map<std::string, std::string>& defaults, const std::string& name) {
  INFO("--" << name);
  REQUIRE(defaults.count(name));
  return std::stod(defaults.at(name));
}

}  // namespace

TEST_CASE("args: a bound option shows its field as the default and fills the field", "[args]") {
  int playouts = 800;
  double prob = 0.25;
  std::string name = "x";
  std::vector<int> gpus = {0};
  bool csa = false;
  std::optional<int64_t> games;
  Args args("t", "test");
  args.bind("playouts", playouts, "playouts", 1, 1000000)
      .bind("prob", prob, "probability", 0.0, 1.0)
      .bind("name", name, "name")
      .bind("gpus", gpus, "devices", 0, 63)
      .flag("csa", csa, "csa")
      .bind("games", games, "games");
  const auto defaults = help_defaults(args.help_text());
  CHECK(defaults.at("playouts") == "800");
  CHECK(defaults.at("prob") == "0.25");
  CHECK(defaults.at("name") == "x");
  CHECK(defaults.at("gpus") == "0");
  CHECK(!defaults.count("csa"));
  CHECK(!defaults.count("games"));  // no default: the option fills the field only when given

  REQUIRE(parse(args, {"t", "--playouts", "16", "--prob=0.5", "--gpus", "1,3", "--csa", "--games", "7"}) == -1);
  CHECK(playouts == 16);
  CHECK(prob == 0.5);
  CHECK(name == "x");  // not given: the field keeps its value
  CHECK(gpus == std::vector<int>{1, 3});
  CHECK(csa);
  CHECK(games == 7);
  CHECK(args.has("playouts"));
  CHECK(!args.has("name"));
}

TEST_CASE("args: a bad value names the option and leaves its field alone", "[args]") {
  int playouts = 800;
  double prob = 0.25;
  std::vector<int> gpus = {0};
  auto fresh = [&] {
    auto a = std::make_unique<Args>("t", "test");
    a->bind("playouts", playouts, "playouts", 1, 1000000)
        .bind("prob", prob, "p", 0.0, 1.0)
        .bind("gpus", gpus, "g", 0, 63);
    return a;
  };
  CHECK_THROWS_WITH(parse(*fresh(), {"t", "--playouts", "0"}), "--playouts must be between 1 and 1000000");
  CHECK_THROWS_WITH(parse(*fresh(), {"t", "--playouts", "12x"}), "--playouts expects an integer, got '12x'");
  CHECK_THROWS_WITH(parse(*fresh(), {"t", "--playouts", "99999999999"}), Catch::Contains("--playouts"));
  CHECK_THROWS_WITH(parse(*fresh(), {"t", "--prob", "1.5"}), "--prob must be between 0 and 1");
  CHECK_THROWS_WITH(parse(*fresh(), {"t", "--prob", "a"}), "--prob expects a number, got 'a'");
  CHECK_THROWS_WITH(parse(*fresh(), {"t", "--gpus", "0,64"}), "--gpus must be between 0 and 63");
  CHECK_THROWS_WITH(parse(*fresh(), {"t", "--gpus", "0,,1"}), Catch::Contains("comma-separated"));
  CHECK(playouts == 800);
  CHECK(prob == 0.25);
  CHECK(gpus == std::vector<int>{0});
  CHECK(parse(*fresh(), {"t", "--no-such", "1"}) == 2);
  CHECK(parse(*fresh(), {"t", "--playouts"}) == 2);
}

TEST_CASE("options: each command's --help shows the defaults of the structs its options fill", "[options][cli]") {
  const selfplay::GameSettings game;
  const selfplay::SelfPlayConfig selfplay_config;
  const auto sp = cli_defaults("selfplay");
  CHECK(number(sp, "playouts") == game.playouts);
  CHECK(number(sp, "playout-cap-prob") == Approx(game.full_probability));
  CHECK(number(sp, "temperature-plies") == game.temperature_plies);
  CHECK(number(sp, "dirichlet-alpha") == Approx(game.dirichlet_alpha));
  CHECK(number(sp, "dirichlet-weight") == Approx(game.dirichlet_weight));
  CHECK(number(sp, "resign") == Approx(game.resign_winrate));
  CHECK(number(sp, "no-resign-fraction") == Approx(game.no_resign_fraction));
  CHECK(number(sp, "root-mate-plies") == game.root_mate_plies);
  CHECK(number(sp, "max-plies") == game.search.rules.max_plies);
  CHECK(number(sp, "leaf-mate-plies") == game.search.leaf_mate_plies);
  CHECK(number(sp, "seed") == game.seed);
  CHECK(number(sp, "games-per-file") == selfplay_config.games_per_file);
  CHECK(number(sp, "flush-seconds") == selfplay_config.flush_seconds);
  CHECK(number(sp, "report-seconds") == selfplay_config.report_seconds);

  const training::TrainConfig train;
  const auto tr = cli_defaults("train");
  CHECK(number(tr, "blocks") == nn::Architecture{}.blocks);
  CHECK(number(tr, "channels") == nn::Architecture{}.channels);
  CHECK(number(tr, "batch") == train.batch);
  CHECK(number(tr, "epochs") == train.epochs);
  CHECK(number(tr, "momentum") == Approx(train.optimizer.momentum));
  CHECK(number(tr, "weight-decay") == Approx(train.optimizer.weight_decay));
  CHECK(number(tr, "beta2") == Approx(train.optimizer.beta2));
  CHECK(number(tr, "val-lambda") == Approx(train.val_lambda));
  CHECK(number(tr, "bn-momentum") == Approx(train.bn_momentum));
  CHECK(number(tr, "log-every") == train.log_every);
  CHECK(number(tr, "check-every") == train.check_every);
  CHECK(number(tr, "tune-max") == train.tune_max);
  CHECK(tr.at("schedule") == "cosine");

  const auto init = cli_defaults("nn init");
  CHECK(number(init, "blocks") == nn::Architecture{}.blocks);
  CHECK(number(init, "channels") == nn::Architecture{}.channels);

  const search::SearchParams search;
  const auto play = cli_defaults("play");
  CHECK(number(play, "batch") == search.batch_size);
  CHECK(number(play, "threads") == search.threads);
  CHECK(number(play, "max-plies") == GameRules{}.max_plies);

  const match::TournamentConfig tournament;
  const auto m = cli_defaults("match");
  CHECK(number(m, "games") == tournament.games);
  CHECK(number(m, "concurrency") == tournament.concurrency);
  CHECK(number(m, "timeout") == tournament.game.timeout_ms);
  CHECK(number(m, "max-plies") == tournament.game.rules.max_plies);
}

TEST_CASE("usi: the usi listing's defaults are SearchParams' and TimeOptions'", "[usi][options]") {
  std::ostringstream out;
  usi::Engine engine(out);
  engine.command("usi");
  std::map<std::string, std::string> defaults;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    std::istringstream w(line);
    std::string option, name_word, name, type_word, type, default_word, value;
    if (w >> option >> name_word >> name >> type_word >> type >> default_word >> value && option == "option")
      defaults[name] = value;
  }
  const search::SearchParams p;
  auto spin = [&](const std::string& name) {
    INFO(name);
    REQUIRE(defaults.count(name));
    return std::stoll(defaults.at(name));
  };
  CHECK(spin("C_init") == std::llround(p.c_init * 100));
  CHECK(spin("C_base") == std::llround(p.c_base));
  CHECK(spin("C_fpu_reduction") == std::llround(p.fpu_reduction * 100));
  CHECK(spin("C_fpu_reduction_root") == std::llround(p.fpu_reduction_root * 100));
  CHECK(spin("Softmax_Temperature") == std::llround(p.softmax_temperature * 100));
  CHECK(spin("DrawValueBlack") == std::llround(p.draw_value_black * 1000));
  CHECK(spin("DrawValueWhite") == std::llround(p.draw_value_white * 1000));
  CHECK(spin("MaxMovesToDraw") == p.rules.max_plies);
  CHECK(spin("MultiPV") == p.multipv);
  CHECK(defaults.at("RootThreatSearch") == (p.root_threat_search ? "true" : "false"));
  CHECK(defaults.at("EnteringKingRule") == "CSARule27");
  REQUIRE(p.rules.entering_king_rule == EnteringKingRule::POINT27);
  const search::TimeOptions t;
  CHECK(spin("NetworkDelay") == t.network_delay);
  CHECK(spin("NetworkDelay2") == t.network_delay2);
  CHECK(spin("MinimumThinkingTime") == t.minimum_thinking_time);
  CHECK(spin("SlowMover") == t.slow_mover);
  const book::BookOptions b;
  CHECK(spin("BookMoves") == b.book_moves);
  CHECK(spin("BookEvalWhiteLimit") == b.eval_white_limit);
}

TEST_CASE("usi: setoption writes through the table, aliases included, and refuses bad values", "[usi][options]") {
  std::ostringstream out;
  usi::Engine engine(out);
  const auto reply = [&](const std::string& command) {
    out.str("");
    engine.command(command);
    return out.str();
  };
  CHECK(reply("setoption name C_init value 150").empty());
  CHECK(reply("setoption name c_init value 10001").find("out of range [0, 10000]") != std::string::npos);
  CHECK(reply("setoption name UCT_Threads value 3").empty());
  CHECK(reply("setoption name PvInterval value 50").find("PV_Interval value 50 is out of range") != std::string::npos);
  CHECK(reply("setoption name EnteringKingRule value CSARule24").empty());
  CHECK(reply("setoption name EnteringKingRule value X").find("takes one of") != std::string::npos);
  CHECK(reply("setoption name NoSuchOption value 1").find("unknown option") != std::string::npos);
  // The announced defaults stay the declared ones whatever was set since.
  CHECK(reply("usi").find("option name C_init type spin default 100 min 0 max 10000") != std::string::npos);
}
