// `jiriki loop`: the sliding window's formula, the TensorBoard event files (decoded here by a
// reader of our own), the config, and whole runs of a tiny network on the CPU: two generations end
// to end, a run killed at 20 points and restarted each time, and the gate's verdicts: with a fake
// match (a shell script writing summary.json, whose verdict the test sets) and with the real one.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "loop/config.h"
#include "loop/loop.h"
#include "loop/report.h"
#include "loop/tensorboard.h"
#include "loop/window.h"
#include "nn/backend.h"
#include "nn/model_file.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using jiriki::testing::TempDir;
using nlohmann::json;
using namespace jiriki::loop;

namespace {

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// ---- a TensorBoard event file reader, written apart from the writer --------------------------
struct Field {
  int number = 0, wire = 0;
  uint64_t varint = 0;  // wire 0
  std::string bytes;    // wire 1, 2, 5: the raw bytes
};

uint64_t read_varint(const std::string& s, size_t& i) {
  uint64_t v = 0;
  for (int shift = 0; i < s.size(); shift += 7) {
    const uint8_t b = uint8_t(s[i++]);
    v |= uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("truncated varint");
}

std::vector<Field> read_message(const std::string& s) {
  std::vector<Field> out;
  size_t i = 0;
  while (i < s.size()) {
    const uint64_t key = read_varint(s, i);
    Field f;
    f.number = int(key >> 3), f.wire = int(key & 7);
    if (f.wire == 0) f.varint = read_varint(s, i);
    else if (f.wire == 1) f.bytes = s.substr(i, 8), i += 8;
    else if (f.wire == 5) f.bytes = s.substr(i, 4), i += 4;
    else if (f.wire == 2) {
      const uint64_t n = read_varint(s, i);
      f.bytes = s.substr(i, n), i += n;
    } else throw std::runtime_error("unknown wire type");
    if (i > s.size()) throw std::runtime_error("truncated field");
    out.push_back(f);
  }
  return out;
}

template <typename T>
T little_endian(const std::string& b) {
  T v;
  REQUIRE(b.size() == sizeof(T));
  std::memcpy(&v, b.data(), sizeof(T));
  return v;
}

struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;
};

// Every record of an event file, each length and data checked against its masked CRC32C.
std::vector<DecodedEvent> decode_event_file(const std::string& bytes) {
  std::vector<DecodedEvent> out;
  size_t i = 0;
  while (i < bytes.size()) {
    REQUIRE(i + 12 <= bytes.size());
    const std::string len_bytes = bytes.substr(i, 8);
    const uint64_t len = little_endian<uint64_t>(len_bytes);
    CHECK(little_endian<uint32_t>(bytes.substr(i + 8, 4)) == masked_crc32c(len_bytes));
    REQUIRE(i + 12 + len + 4 <= bytes.size());
    const std::string data = bytes.substr(i + 12, len);
    CHECK(little_endian<uint32_t>(bytes.substr(i + 12 + len, 4)) == masked_crc32c(data));
    i += 12 + len + 4;
    DecodedEvent e;
    for (const Field& f : read_message(data)) {
      if (f.number == 1) e.wall_time = little_endian<double>(f.bytes);
      if (f.number == 2) e.step = int64_t(f.varint);
      if (f.number == 3) e.file_version = f.bytes;
      if (f.number == 5)
        for (const Field& v : read_message(f.bytes)) {
          REQUIRE(v.number == 1);
          std::string tag;
          float value = NAN;
          for (const Field& x : read_message(v.bytes)) {
            if (x.number == 1) tag = x.bytes;
            if (x.number == 2) value = little_endian<float>(x.bytes);
          }
          e.values.emplace_back(tag, value);
        }
    }
    out.push_back(e);
  }
  return out;
}

// ---- whole runs ---------------------------------------------------------------------------------
// The fake `jiriki match`: checks that the engines' model files (if any) exist, writes DIR/summary.json and
// exits as FAKE_MATCH_EXIT says (0 undecided, 10 H1, 11 H0), with a score to match (all won by a candidate
// whose model path holds FAKE_MATCH_BETTER), an anchor's SPRT result as FAKE_MATCH_ANCHOR_SPRT says; asked for
// --hcpe3 FILE, it copies FAKE_MATCH_HCPE3 there (the teacher's games).
std::string fake_match(const TempDir& dir) {
  const std::string path = dir.file("fake_match.sh");
  std::ofstream(path) << R"SH(#!/bin/sh
out=""
prev=""
for a in "$@"; do
  if [ "$prev" = "--out" ]; then out="$a"; fi
  if [ "$prev" = "--hcpe3" ]; then cp "$FAKE_MATCH_HCPE3" "$a" || exit 1; fi
  if [ "$prev" = "--engine" ]; then
    model=$(printf '%s\n' "$a" | sed -n 's/.*option\.ModelFile=\([^ ]*\).*/\1/p')
    if [ -n "$model" ] && [ ! -f "$model" ]; then echo "fake match: no model file '$model'" >&2; exit 1; fi
  fi
  prev="$a"
done
code=${FAKE_MATCH_EXIT:-0}
case $code in 10) w=3; l=1; score=0.75;; 11) w=1; l=3; score=0.25;; *) w=2; l=1; score=0.625;; esac
# A candidate whose model path holds FAKE_MATCH_BETTER wins every game (still with the exit code asked for).
if [ -n "$FAKE_MATCH_BETTER" ] && printf '%s\n' "$@" | grep "name=candidate" | grep -q "$FAKE_MATCH_BETTER"; then
  w=4; l=0; score=1.0
fi
# An anchor's SPRT decides as FAKE_MATCH_ANCHOR_SPRT says (H1, H0; default none).
sprt=none
case "$out" in */anchors/*) sprt=${FAKE_MATCH_ANCHOR_SPRT:-none};; esac
mkdir -p "$out"
cat > "$out/summary.json" <<JSON
{"engines":["candidate","opponent"],"games":4,"wins":$w,"losses":$l,"draws":$((4 - w - l)),"score":$score,
 "elo":0,"elo_95":[-100,100],"los":0.5,"penta":[0,0,0,0,0],"sprt":{"llr":0,"lower":-2.94,"upper":2.94,"result":"$sprt"}}
JSON
echo "$@" >> "$out/../fake_match_calls.txt"
exit $code
)SH";
  fs::permissions(path, fs::perms::owner_all);
  return path;
}

// A fresh network of the given shape written by `jiriki nn init` into tmp; its path.
std::string init_network(const TempDir& tmp, const std::string& name, int blocks, int channels, int seed = 1) {
  const std::string path = tmp.file(name);
  REQUIRE(std::system((std::string(JIRIKI_BINARY) + " nn init --blocks " + std::to_string(blocks) + " --channels " +
                       std::to_string(channels) + " --seed " + std::to_string(seed) + " -o " + path + " > /dev/null")
                          .c_str()) == 0);
  return path;
}

json tiny_config(const std::string& match, int generations) {
  return {{"generations", generations},
          {"blocks", 1},
          {"channels", 16},
          {"selfplay_positions", 60},
          {"selfplay_playouts", 4},
          {"selfplay_args",
           "--temperature-plies 20 --root-mate-plies 0 --leaf-mate-plies 0 --games-per-file 2 --concurrent 2"},
          {"holdout_positions", 10},
          {"max_plies", 40},
          {"train_steps", 8},
          {"train_batch", "16"},
          {"train_lr", "0.01"},
          {"window_min_rows", 50},
          {"gate_games", 4},
          {"gate_nodes", 4},
          {"gate_concurrency", 1},
          {"eval_first_games", 2},
          {"match_command", match},
          {"plots", true}};
}

// Runs `jiriki loop` with `env` in front; the exit code, or -9 when it was killed by SIGKILL.
int run_loop_cli(const std::string& env, const std::string& dir, const std::string& extra = "") {
  const std::string cmd = env + " " + JIRIKI_BINARY + " loop --dir " + dir + " " + extra + " >> " + dir + ".out 2>&1";
  const int rc = std::system(cmd.c_str());
  if (WIFSIGNALED(rc)) return WTERMSIG(rc) == SIGKILL ? -9 : -1;
  const int code = WEXITSTATUS(rc);
  return code == 128 + SIGKILL ? -9 : code;  // the shell reports a killed child as 137
}

std::string run_output(const std::string& dir) { return read_bytes(dir + ".out"); }

// Writes `c` as the config of a run in TMP/run and runs the loop until it ends, which it must do
// cleanly; the run's directory.
std::string run_to_end(const TempDir& tmp, const json& c) {
  std::ofstream(tmp.file("config.json")) << c.dump();
  const std::string dir = tmp.file("run");
  const int rc = run_loop_cli("", dir, "--config " + tmp.file("config.json"));
  INFO(run_output(dir));
  REQUIRE(rc == 0);
  return dir;
}

json read_json_file(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// The rows of a run's plots/generations.dat (the header first), each split into its fields.
std::vector<std::vector<std::string>> plot_rows(const std::string& run_dir) {
  std::istringstream rows(read_bytes(run_dir + "/plots/generations.dat"));
  std::vector<std::vector<std::string>> table;
  for (std::string line; std::getline(rows, line);) {
    std::istringstream fields(line);
    table.emplace_back(std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>());
  }
  return table;
}

// The run directory is consistent: the state names the step after the last generation, every
// record and model file reads back, the metrics and TensorBoard files hold one entry per generation,
// no temporary file is left in the loop's own directories.
// `steps`: each generation's training steps (tiny_config's 8; 0: as recorded, for train_epochs).
void check_finished_run(const std::string& dir, int generations, int64_t steps = 8) {
  const json state = read_json_file(dir + "/state.json");
  CHECK(state["generation"] == generations + 1);
  CHECK(state["step"] == "selfplay");
  REQUIRE(state["history"].size() == size_t(generations));
  CHECK(fs::exists(dir + "/" + state["best"].get<std::string>()));
  for (const auto& e : fs::recursive_directory_iterator(dir + "/models")) {
    if (e.is_directory()) continue;  // another network's (models/NAME/)
    INFO(e.path());
    CHECK(e.path().extension() == ".jnn");
    CHECK_NOTHROW(jiriki::nn::load_model(e.path().string()));
  }
  CHECK_NOTHROW(count_positions(dir + "/selfplay"));  // every hcpe3 file parses
  CHECK_NOTHROW(count_positions(dir + "/holdout"));
  std::ifstream metrics(dir + "/metrics.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(metrics, line)) {
    const json r = json::parse(line);
    CHECK(r["generation"] == ++n);
    CHECK(r["selfplay"]["positions"].get<int64_t>() >= 60);
    CHECK(r["train"]["step"] == r["train_steps"]);
    if (steps > 0) CHECK(r["train_steps"] == steps);
    CHECK(r["train"]["test"]["samples"].get<int64_t>() >= 10);
    // The window the training used is the formula's for the positions made so far.
    CHECK(r["window"] == window_rows(r["positions_total"], Config(tiny_config("", 0)).window()));
  }
  CHECK(n == generations);
  int event_files = 0;
  for (const auto& e : fs::directory_iterator(dir + "/tensorboard")) {
    ++event_files;
    const auto events = decode_event_file(read_bytes(e.path()));
    REQUIRE(!events.empty());
    CHECK(events[0].file_version == "brain.Event:2");
  }
  CHECK(event_files == generations);
  for (const char* sub : {"", "/models", "/plots", "/tensorboard"})
    if (fs::exists(dir + sub))
      for (const auto& e : fs::directory_iterator(dir + sub)) {
        INFO(e.path());
        CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
      }
}

}  // namespace

TEST_CASE("loop window: KataGo's shuffler formula, with hand-computed sizes", "[loop]") {
  WindowConfig c{.min_rows = 250000, .expand_per_row = 0.4, .taper_exponent = 0.5};
  // x = 1e6 - 250000 + 250000; (sqrt(1e6) - sqrt(250000)) / (0.5 / sqrt(250000)) = 500 / 0.001 = 500000;
  // x 0.4 = 200000, + 250000.
  CHECK(window_rows(1000000, c) == 450000);
  // Taper scale 10000: x = 760000; (871.7798 - 100) / (0.5 / 100) = 154355.96; x 0.4 = 61742.38, + 250000.
  c.taper_scale = 10000;
  CHECK(window_rows(1000000, c) == 311742);
  c.taper_scale = 0;
  c.max_rows = 400000;
  CHECK(window_rows(1000000, c) == 400000);
  // Below min_rows every row is used; at min_rows the window is min_rows.
  c.max_rows = 0;
  CHECK(window_rows(100000, c) == 100000);
  CHECK(window_rows(250000, c) == 250000);
  // Exponent 1: linear growth, expand_per_row window rows per row: (3000 - 1000) x 0.4 + 1000.
  WindowConfig linear{.min_rows = 1000, .expand_per_row = 0.4, .taper_exponent = 1.0};
  CHECK(window_rows(3000, linear) == 1800);
  // Just past min_rows the power law's slope is expand_per_row; it then grows ever more slowly.
  const WindowConfig k{.min_rows = 250000, .expand_per_row = 0.4, .taper_exponent = 0.65};
  CHECK(window_rows(250000 + 1000, k) == 250000 + 399);
  const int64_t a = window_rows(2000000, k) - window_rows(1000000, k),
                b = window_rows(3000000, k) - window_rows(2000000, k);
  CHECK(a > b);
  CHECK(b > 0);
}

TEST_CASE("loop tensorboard: CRC32C check value, hand-assembled bytes, and files that decode to what was written",
          "[loop]") {
  // The CRC-32C check value of "123456789" (the Castagnoli polynomial's catalogued "check").
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0);
  // One scalar event by hand: wall_time (field 1, fixed64) 0.0, step 0 left out, summary (field 5)
  // { value (field 1) { tag (field 1) "a", simple_value (field 2, fixed32) 1.0f = 0x3f800000 } }.
  const std::string expected = std::string(
      "\x09\0\0\0\0\0\0\0\0\x2a\x0a\x0a\x08\x0a\x01"
      "a"
      "\x15\0\0\x80\x3f",
      21);
  CHECK(scalar_event({"a", 0, 1.0, 0.0}) == expected);
  // The record framing: 8-byte length, its masked CRC, the data, its masked CRC.
  const std::string r = tf_record("xyz");
  REQUIRE(r.size() == 8 + 4 + 3 + 4);
  CHECK(r.substr(0, 8) == std::string("\x03\0\0\0\0\0\0\0", 8));
  const uint32_t c = crc32c("xyz");
  CHECK(little_endian<uint32_t>(r.substr(15, 4)) == ((c >> 15 | c << 17) + 0xA282EAD8u));

  const TempDir tmp("loop_tb");
  const std::vector<Scalar> written = {{"gate/elo", 3, 41.5, 1.7e9},
                                       {"train/loss", 1234567, 2.25, 1.7e9 + 5},
                                       {"heldout/policy_accuracy", 2, 0.125, 1.7e9 + 6}};
  write_event_file(tmp.file("events.out.tfevents.1.test"), written, 1.7e9);
  const auto events = decode_event_file(read_bytes(tmp.file("events.out.tfevents.1.test")));
  REQUIRE(events.size() == 4);
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK(events[0].wall_time == 1.7e9);
  for (size_t i = 0; i < written.size(); ++i) {
    const DecodedEvent& e = events[i + 1];
    CHECK(e.step == written[i].step);
    CHECK(e.wall_time == written[i].wall_time);
    REQUIRE(e.values.size() == 1);
    CHECK(e.values[0].first == written[i].tag);
    CHECK(e.values[0].second == float(written[i].value));
  }
}

TEST_CASE("loop config: defaults, overrides, and clear errors", "[loop]") {
  const Config d;
  CHECK(d.integer("generations") == 0);
  CHECK(d.flag("gate"));
  CHECK(d.window().taper_exponent == 0.65);
  const Config c(json{{"train_steps", 5}, {"gate", false}});
  CHECK(c.integer("train_steps") == 5);
  CHECK_FALSE(c.flag("gate"));
  CHECK_THROWS_WITH(Config(json{{"train_stpes", 5}}), Catch::Contains("unknown loop config key 'train_stpes'"));
  CHECK_THROWS_WITH(Config(json{{"gate", "yes"}}), Catch::Contains("'gate' takes a boolean"));
  CHECK_THROWS_WITH(Config(json{{"train_steps", 0}}), Catch::Contains("'train_steps' must be positive"));
  CHECK_THROWS_WITH(Config(json{{"backend", "tpu"}}), Catch::Contains("auto, cpu or cuda"));
  CHECK_THROWS_WITH(Config(json{{"anchor_games", 4}}), Catch::Contains("'anchor_games' needs an 'anchor'"));
  // gpus "all": the index of every usable CUDA device of this machine, in order; "0" on a machine
  // without any (one process on the CPU backend).
  CHECK(Config(json{{"gpus", "1,3"}}).gpus() == "1,3");
  const std::string all = Config(json{{"gpus", "all"}}).gpus();
  const std::vector<int> devices = jiriki::nn::cuda_devices();
  CHECK(int(devices.size()) == jiriki::nn::cuda_device_count());
  std::vector<std::string> listed;
  for (size_t at = 0; at <= all.size();) {
    const size_t comma = std::min(all.find(',', at), all.size());
    listed.push_back(all.substr(at, comma - at));
    at = comma + 1;
  }
  REQUIRE(listed.size() == std::max<size_t>(devices.size(), 1));
  for (size_t i = 0; i < listed.size(); ++i) CHECK(listed[i] == (devices.empty() ? "0" : std::to_string(devices[i])));
  // Every key is documented, in the help and with its default in docs/loop.md's table.
  std::ifstream doc_file(std::string(JIRIKI_SOURCE_DIR) + "/docs/loop.md");
  const std::string doc((std::istreambuf_iterator<char>(doc_file)), std::istreambuf_iterator<char>());
  for (const auto& k : config_keys()) {
    INFO(k.name);
    CHECK(config_help().find(k.name) != std::string::npos);
    CHECK(doc.find("| `" + std::string(k.name) + "` | `" + k.def.dump() + "` |") != std::string::npos);
  }
}

TEST_CASE("loop: two generations end to end; killed at 20 points and restarted each time", "[loop][cli]") {
  const TempDir tmp("loop_run");
  const std::string match = fake_match(tmp);
  const std::string config = tmp.file("config.json");
  std::ofstream(config) << tiny_config(match, 2).dump();

  SECTION("uninterrupted") {
    const std::string dir = tmp.file("run");
    const int rc = run_loop_cli("FAKE_MATCH_EXIT=10", dir, "--config " + config);
    INFO(run_output(dir));
    REQUIRE(rc == 0);
    check_finished_run(dir, 2);
    const json state = read_json_file(dir + "/state.json");
    CHECK(state["best"] == "models/gen0002.jnn");  // both candidates passed the gate
    CHECK(state["history"][1]["gate"]["exit_code"] == 10);
    CHECK(state["history"][1]["eval_first"]["games"] == 4);  // the fake's summary, read back
    CHECK(read_bytes(dir + "/eval_first/fake_match_calls.txt").find("model=" + dir + "/models/gen0000.jnn") !=
          std::string::npos);
    // The gate matched each candidate against the best of its time.
    const std::string calls = read_bytes(dir + "/gate/fake_match_calls.txt");
    CHECK(calls.find("model=" + dir + "/train/gen0002/candidate.jnn") != std::string::npos);
    CHECK(calls.find("model=" + dir + "/models/gen0001.jnn") != std::string::npos);
    CHECK(calls.find("option.ModelFile=") == std::string::npos);  // networks in the match's own process
    // Plots, when gnuplot is there.
    if (std::system("command -v gnuplot > /dev/null 2>&1") == 0)
      for (const char* p : {"loss", "heldout", "elo", "positions_per_hour"}) {
        INFO(p);
        CHECK(read_bytes(dir + "/plots/" + p + ".png").substr(1, 3) == "PNG");
      }
    // A finished run started again has nothing to do.
    CHECK(run_loop_cli("", dir) == 0);
    CHECK(read_json_file(dir + "/state.json")["history"].size() == 2);
    // `loop plot` draws them again from the state alone (records and networks gone), or says why not.
    if (std::system("command -v gnuplot > /dev/null 2>&1") == 0) {
      fs::remove_all(dir + "/plots");
      fs::remove_all(dir + "/selfplay");
      fs::remove_all(dir + "/models");
      CHECK(std::system((std::string(JIRIKI_BINARY) + " loop plot --dir " + dir + " > /dev/null").c_str()) == 0);
      CHECK(read_bytes(dir + "/plots/elo.png").substr(1, 3) == "PNG");
    }
    CHECK(std::system(
              (std::string(JIRIKI_BINARY) + " loop plot --dir " + tmp.file("none") + " 2> /dev/null").c_str()) != 0);
  }

  SECTION("killed") {
    const std::string dir = tmp.file("killed");
    const char* points[] = {"0:init:start",    "0:init:mid",    "0:init:done",   "1:selfplay:start", "1:selfplay:mid",
                            "1:selfplay:done", "1:holdout:mid", "1:train:start", "1:train:mid",      "1:train:done",
                            "1:gate:mid",      "1:gate:done",   "1:promote:mid", "1:record:mid",     "1:record:done",
                            "2:selfplay:mid",  "2:train:mid",   "2:gate:start",  "2:promote:done",   "2:record:mid"};
    bool first = true;
    for (const char* p : points) {
      INFO("kill point " << p);
      const int rc =
          run_loop_cli(std::string("FAKE_MATCH_EXIT=10 JIRIKI_LOOP_KILL_DELAY_MS=150 JIRIKI_LOOP_KILL_AT=") + p, dir,
                       first ? "--config " + config : "");
      first = false;
      INFO(run_output(dir));
      REQUIRE(rc == -9);
      // The state a killed loop leaves is whole and names the step it was in.
      const json state = read_json_file(dir + "/state.json");
      const std::string point = p;
      CHECK(std::to_string(state["generation"].get<int>()) + ":" + state["step"].get<std::string>() ==
            point.substr(0, point.rfind(':')));
    }
    const int rc = run_loop_cli("FAKE_MATCH_EXIT=10", dir);
    INFO(run_output(dir));
    REQUIRE(rc == 0);
    check_finished_run(dir, 2);
    CHECK(read_json_file(dir + "/state.json")["best"] == "models/gen0002.jnn");
  }
}

// The anchor: each candidate also plays a fixed outside engine, with the anchor's own time control
// and options; its Elo is kept per generation, written to TensorBoard and drawn beside the others.
TEST_CASE("loop anchor: every candidate plays the anchor engine, and its Elo is recorded and plotted", "[loop][cli]") {
  const TempDir tmp("loop_anchor");
  json c = tiny_config(fake_match(tmp), 2);
  c["anchor"] = "/usr/games/gpsusi -N 1";
  c["anchor_games"] = 2;
  c["anchor_tc"] = "movetime=50";
  c["anchor_args"] = "--margin 200";
  std::ofstream(tmp.file("config.json")) << c.dump();
  const std::string dir = tmp.file("run");
  const int rc = run_loop_cli("FAKE_MATCH_EXIT=10", dir, "--config " + tmp.file("config.json"));
  INFO(run_output(dir));
  REQUIRE(rc == 0);
  check_finished_run(dir, 2);
  const json state = read_json_file(dir + "/state.json");
  for (int g : {0, 1}) CHECK(state["history"][g]["eval_anchor"]["games"] == 4);  // the fake's summary, read back
  const std::string calls = read_bytes(dir + "/eval_anchor/fake_match_calls.txt");
  CHECK(calls.find("cmd=/usr/games/gpsusi name=anchor args=\"-N 1\"") != std::string::npos);
  CHECK(calls.find("option.ModelFile=" + dir + "/train/gen0002/candidate.jnn") != std::string::npos);
  CHECK(calls.find("--tc movetime=50") != std::string::npos);
  CHECK(calls.find("--margin 200") != std::string::npos);
  // The gate and eval_first keep their playouts a move.
  CHECK(read_bytes(dir + "/gate/fake_match_calls.txt").find("--tc nodes=4") != std::string::npos);
  if (std::system("command -v gnuplot > /dev/null 2>&1") == 0) {
    // generations.dat: the anchor's Elo and interval in columns 12-14 (the fake's 0, -100, 100); the
    // last two, the Elo of an outright result's bound, NaN (the fake's Elo is finite).
    const auto table = plot_rows(dir);
    REQUIRE(table.size() == 3);  // the header and two generations
    const auto& f = table[1];
    REQUIRE(f.size() == 16);
    CHECK(f[11] == "0");
    CHECK(f[12] == "-100");
    CHECK(f[13] == "100");
    CHECK(f[14] == "NaN");
    CHECK(f[15] == "NaN");
    CHECK(read_bytes(dir + "/plots/elo.gp").find("candidate vs anchor") != std::string::npos);
    CHECK(read_bytes(dir + "/plots/elo.png").substr(1, 3) == "PNG");
  }
}

TEST_CASE("loop eval: a run made without evaluation matches gets them afterwards, with options over its config",
          "[loop][cli]") {
  const TempDir tmp("loop_eval");
  json c = tiny_config(fake_match(tmp), 1);
  c["eval_first_games"] = 0;
  c["anchor"] = "/usr/games/gpsusi -N 1";
  c["plots"] = false;
  std::ofstream(tmp.file("config.json")) << c.dump();
  const std::string dir = tmp.file("run");
  const std::string eval = std::string(JIRIKI_BINARY) + " loop eval --dir " + dir;
  // No run there yet: a clear error, and no run directory made.
  CHECK(std::system((eval + " > " + tmp.file("none.out") + " 2>&1").c_str()) != 0);
  CHECK(read_bytes(tmp.file("none.out")).find("no loop run here") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/state.json"));
  // Generation 1 rejected by its gate, generation 2 promoted.
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=11", dir, "--config " + tmp.file("config.json")) == 0);
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=0", dir, "--generations 2") == 0);
  json state = read_json_file(dir + "/state.json");
  REQUIRE(state["history"].size() == 2);
  for (const auto& r : state["history"]) CHECK_FALSE((r.contains("eval_first") || r.contains("eval_anchor")));
  CHECK_FALSE(fs::exists(dir + "/eval_first"));

  const std::string args =
      " --games 2 --anchor-games 2 --anchor-tc movetime=50 --nodes 6 --concurrency 3 >> " + dir + ".out 2>&1";
  REQUIRE(std::system(("FAKE_MATCH_EXIT=0 " + eval + args).c_str()) == 0);
  INFO(run_output(dir));
  state = read_json_file(dir + "/state.json");
  for (const auto& r : state["history"]) {
    CHECK(r["eval_first"]["games"] == 4);  // the fake's summary, read back
    CHECK(r["eval_anchor"]["score"] == 0.625);
    CHECK(r["seconds"]["eval_first"].get<double>() > 0);
    double sum = 0;
    for (const auto& [k, v] : r["seconds"].items())
      if (k != "total") sum += v.get<double>();
    CHECK(r["seconds"]["total"].get<double>() == Approx(sum));
  }
  // Each generation's own network: the rejected one's candidate, the promoted one's model file, against
  // generation 0 at the playouts asked for; the anchor as the run names it, at the time control asked for.
  const std::string first = read_bytes(dir + "/eval_first/fake_match_calls.txt");
  CHECK(first.find("model=" + dir + "/train/gen0001/candidate.jnn") != std::string::npos);
  CHECK(first.find("model=" + dir + "/models/gen0002.jnn") != std::string::npos);
  CHECK(first.find("model=" + dir + "/models/gen0000.jnn name=opponent") != std::string::npos);
  CHECK(first.find("--tc nodes=6") != std::string::npos);
  CHECK(first.find("--concurrency 2") != std::string::npos);  // in one process: every game at once
  const std::string anchor = read_bytes(dir + "/eval_anchor/fake_match_calls.txt");
  CHECK(anchor.find("cmd=/usr/games/gpsusi name=anchor args=\"-N 1\"") != std::string::npos);
  CHECK(anchor.find("--tc movetime=50") != std::string::npos);
  // metrics.jsonl carries them; the config on disk is the run's own; a second call has nothing to play.
  std::ifstream metrics(dir + "/metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line); ++lines) CHECK(json::parse(line).contains("eval_anchor"));
  CHECK(lines == 2);
  CHECK(read_json_file(dir + "/config.json")["eval_first_games"] == 0);
  REQUIRE(std::system((eval + " --games 2 > " + tmp.file("again.out") + " 2>&1").c_str()) == 0);
  CHECK(read_bytes(tmp.file("again.out")).find("0 matches played") != std::string::npos);
}

TEST_CASE("loop plots: an Elo interval open at one end keeps its point, with its bar off the chart", "[loop]") {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    WARN("gnuplot not installed: the plots are not drawn");
    return;
  }
  const TempDir tmp("loop_plots");
  // Generation 2 beat the anchor 18-2: its interval's upper end is open (null), as jiriki match writes it.
  const json history = json::parse(R"([
    {"generation": 1, "eval_anchor": {"elo": 147.2, "elo_95": [-0.6, 383.3]}, "eval_first": {"elo": 17.4, "elo_95": [-89.4, 127.6]}},
    {"generation": 2, "eval_anchor": {"elo": 381.7, "elo_95": [208.5, null]}, "eval_first": {"elo": 157.7, "elo_95": [52.1, 302.2]}}
  ])");
  // (No training log nor held-out figures here: those plots are not drawn, and say so.)
  REQUIRE(jiriki::loop::draw_plots(tmp.file("run"), history).find("elo.png") == std::string::npos);
  const auto table = plot_rows(tmp.file("run"));
  REQUIRE(table.size() == 3);  // the header and two generations
  CHECK(table[1][12] == "-0.6");
  CHECK(table[1][13] == "383.3");
  CHECK(table[2][11] == "381.7");
  CHECK(table[2][12] == "208.5");
  CHECK(table[2][13] == "10000");  // off the chart, not NaN (gnuplot leaves out a row with NaN)
  // The range follows the finite figures (-89.4 to 383.3, padded by 50), not the open end.
  CHECK(read_bytes(tmp.file("run/plots/elo.gp")).find("set yrange [-139.4:433.3]") != std::string::npos);
  CHECK(read_bytes(tmp.file("run/plots/elo.png")).substr(1, 3) == "PNG");
  // Closed intervals only: gnuplot's own range.
  json closed = history;
  closed[1]["eval_anchor"]["elo_95"][1] = 500.0;
  REQUIRE(jiriki::loop::draw_plots(tmp.file("run"), closed).find("elo.png") == std::string::npos);
  CHECK(read_bytes(tmp.file("run/plots/elo.gp")).find("yrange") == std::string::npos);
}

TEST_CASE("loop plots: a match won or lost outright is drawn at the Elo of its score's Wilson bound", "[loop]") {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    WARN("gnuplot not installed: the plots are not drawn");
    return;
  }
  const TempDir tmp("loop_plots_outright");
  // Generation 2 won 40-0 against generation 0 and lost 0-20 to the anchor: jiriki match writes a
  // null Elo for both. Expected (Wilson, z = 1.96): 40 of 40 -> score >= 0.91238, Elo 407.0;
  // 0 of 20 -> score <= 0.16113, Elo -286.6.
  const json history = json::parse(R"([
    {"generation": 1, "eval_first": {"elo": 17.4, "elo_95": [-89.4, 127.6], "games": 40, "wins": 20, "losses": 18, "draws": 2}},
    {"generation": 2, "eval_first": {"elo": null, "elo_95": [null, null], "games": 40, "wins": 40, "losses": 0, "draws": 0},
     "eval_anchor": {"elo": null, "elo_95": [null, null], "games": 20, "wins": 0, "losses": 20, "draws": 0},
     "anchors": {"gps": {"elo": null, "elo_95": [null, null], "games": 20, "wins": 20, "losses": 0, "draws": 0}}}
  ])");
  REQUIRE(jiriki::loop::draw_plots(tmp.file("run"), history).find("elo.png") == std::string::npos);
  const auto table = plot_rows(tmp.file("run"));
  REQUIRE(table.size() == 3);
  // generation, 13 figures, 2 bounds (gnuplot's columns 15, 16), then the anchor gps: Elo, lo, hi, bound.
  REQUIRE(table[2].size() == 20);
  CHECK(table[1][19] == "NaN");  // generation 1 did not play gps
  // 20 of 20 -> score >= 0.83887 (Wilson, z = 1.96), Elo 286.6.
  CHECK(std::stod(table[2][19]) == Approx(286.61).margin(0.05));
  CHECK(read_bytes(tmp.file("run/plots/elo.gp")).find("using 1:20 with points") != std::string::npos);
  CHECK(table[1][14] == "NaN");  // a finite Elo: no bound drawn
  CHECK(table[2][4] == "NaN");   // no point estimate for 40-0
  CHECK(std::stod(table[2][14]) == Approx(407.03).margin(0.05));
  CHECK(std::stod(table[2][15]) == Approx(-286.61).margin(0.05));
  const std::string script = read_bytes(tmp.file("run/plots/elo.gp"));
  CHECK(script.find("using 1:15") != std::string::npos);
  CHECK(script.find("using 1:16") != std::string::npos);
  CHECK(read_bytes(tmp.file("run/plots/elo.png")).substr(1, 3) == "PNG");
}

TEST_CASE("loop gate: a rejected candidate is not promoted; without a gate every candidate is", "[loop][cli]") {
  const TempDir tmp("loop_gate");
  const std::string match = fake_match(tmp);
  json c = tiny_config(match, 1);
  c["plots"] = false;
  std::ofstream(tmp.file("config.json")) << c.dump();
  const std::string dir = tmp.file("run");
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=11", dir, "--config " + tmp.file("config.json")) == 0);
  json state = read_json_file(dir + "/state.json");
  CHECK(state["best"] == "models/gen0000.jnn");
  CHECK(state["history"][0]["promoted"] == false);
  CHECK_FALSE(fs::exists(dir + "/models/gen0001.jnn"));
  // An undecided match promotes a candidate that scored over 50% (the fake's 2-1-1: 62.5%).
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=0", dir, "--generations 2") == 0);
  state = read_json_file(dir + "/state.json");
  CHECK(state["history"][1]["promoted"] == true);
  CHECK(state["best"] == "models/gen0002.jnn");
  // Gate off: promoted whatever a match would say (none is played).
  c["gate"] = false;
  c["generations"] = 3;
  std::ofstream(tmp.file("config.json")) << c.dump();
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=11", dir, "--config " + tmp.file("config.json")) == 0);
  state = read_json_file(dir + "/state.json");
  CHECK(state["history"][2]["promoted"] == true);
  CHECK_FALSE(state["history"][2].contains("gate"));
  CHECK(state["best"] == "models/gen0003.jnn");
}

TEST_CASE("loop prune_records: the window's past generations are deleted, and the totals keep their positions",
          "[loop][cli]") {
  const TempDir tmp("loop_prune");
  json c = tiny_config(fake_match(tmp), 4);
  c["plots"] = false;
  c["gate"] = false;
  c["eval_first_games"] = 0;
  c["prune_records"] = true;
  const std::string dir = run_to_end(tmp, c);
  const json state = read_json_file(dir + "/state.json");
  REQUIRE(state["history"].size() == 4);
  // Each generation's total is the positions made so far, deleted or not, and its window is the formula's.
  int64_t made = 0;
  for (const json& r : state["history"]) {
    made += r["selfplay"]["positions"].get<int64_t>();
    CHECK(r["positions_total"] == made);
    CHECK(r["window"] == window_rows(made, Config(c).window()));
  }
  // With 60-odd positions a generation against windows of 54-105, generation 1 goes at the end of
  // generation 3 (its 3 x 60 positions, less generation 1's, still cover the window of 92 or so).
  CHECK_FALSE(fs::exists(dir + "/selfplay/gen0001"));
  CHECK(state["pruned"]["gen0001"] == state["history"][0]["selfplay"]["positions"]);
  CHECK(fs::exists(dir + "/selfplay/gen0004"));
  // What is left still holds the last window, and the deleted counts add up to the rest.
  const int64_t left = count_positions(dir + "/selfplay");
  CHECK(left >= state["history"][3]["window"].get<int64_t>());
  CHECK(left + state["pruned_positions"].get<int64_t>() == made);
  // A prune killed before its deletion: the next start deletes what the state names.
  fs::create_directories(dir + "/selfplay/gen0001");
  fs::copy(dir + "/selfplay/gen0004", dir + "/selfplay/gen0001", fs::copy_options::recursive);
  REQUIRE(run_loop_cli("", dir) == 0);
  CHECK_FALSE(fs::exists(dir + "/selfplay/gen0001"));
}

TEST_CASE("loop teacher: generation 0 learns from the teacher's games, whose positions stay in the window",
          "[loop][cli]") {
  const TempDir tmp("loop_teacher");
  // The "teacher's games": a few self-play games of a fresh network, with their evals.
  const std::string bin = JIRIKI_BINARY;
  init_network(tmp, "t.jnn", 1, 16);
  REQUIRE(std::system((bin + " selfplay --model " + tmp.file("t.jnn") + " --out " + tmp.file("t") +
                       " --games 2 --playouts 4 --max-plies 40 --concurrent 2 --name t > /dev/null 2>&1")
                          .c_str()) == 0);
  const std::string games = tmp.file("t/t-00000.hcpe3");
  REQUIRE(count_positions(games) == 80);
  json c = tiny_config(fake_match(tmp), 1);
  c["teacher_train_steps"] = 4;
  c["train_launcher"] = "env JIRIKI_LAUNCHED=1";  // as mpirun would be
  c["plots"] = false;
  std::ofstream(tmp.file("config.json")) << c.dump();
  const std::string dir = tmp.file("run");
  const int rc = run_loop_cli("FAKE_MATCH_EXIT=10 FAKE_MATCH_HCPE3=" + games, dir,
                              "--config " + tmp.file("config.json") + " --teacher \"/usr/games/gpsusi -N 1\"");
  INFO(run_output(dir));
  REQUIRE(rc == 0);
  check_finished_run(dir, 1);
  // The teacher played itself: a command with its arguments becomes an engine spec.
  const std::string calls = read_bytes(dir + "/teacher/fake_match_calls.txt");
  CHECK(calls.find("cmd=/usr/games/gpsusi name=teacher-a args=\"-N 1\"") != std::string::npos);
  CHECK(calls.find("--hcpe3 " + dir + "/teacher/games.hcpe3") != std::string::npos);
  // Supervised training with elmo's lambda from the config, then self-play from its network.
  CHECK(read_bytes(dir + "/logs/gen0000-teacher_train.log").find("--val-lambda 0.500000") != std::string::npos);
  CHECK(read_bytes(dir + "/logs/gen0000-teacher_train.log").find("$ env JIRIKI_LAUNCHED=1 " + bin + " train") == 0);
  CHECK(read_bytes(dir + "/logs/gen0000-teacher_train.log").find("--data " + dir + "/teacher") != std::string::npos);
  CHECK(fs::exists(dir + "/models/gen0000.jnn"));
  const json r = read_json_file(dir + "/state.json")["history"][0];
  CHECK(r["positions_total"] == count_positions(dir + "/selfplay") + 80);
}

TEST_CASE("loop worker: a worker's self-play feeds a loop that plays none itself", "[loop][cli]") {
  const TempDir tmp("loop_worker");
  json c = tiny_config(fake_match(tmp), 1);
  c["selfplay_local"] = false;
  c["worker_positions"] = 30;
  c["plots"] = false;
  std::ofstream(tmp.file("config.json")) << c.dump();
  const std::string dir = tmp.file("run"), bin = JIRIKI_BINARY;
  // The worker starts first and waits for the run; it stops once the run's generations are done.
  const std::string cmd = "(" + bin + " loop worker --dir " + dir + " --name w1 --selfplay-args \"--concurrent 2\" > " +
                          dir + ".worker 2>&1 &) ; FAKE_MATCH_EXIT=10 " + bin + " loop --dir " + dir + " --config " +
                          tmp.file("config.json") + " > " + dir + ".out 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  INFO(run_output(dir));
  check_finished_run(dir, 1);
  CHECK(count_positions(dir + "/selfplay/workers/w1") >= 60);
  CHECK_FALSE(fs::exists(dir + "/logs/gen0001-selfplay.log"));  // the loop played no self-play itself
  // The worker notices the end of the run after its round.
  for (int i = 0; i < 300 && read_bytes(dir + ".worker").find("done") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(read_bytes(dir + ".worker").find("worker w1: the run is done") != std::string::npos);
}

TEST_CASE("loop: SIGTERM or SIGINT stops the phase in flight, and the next start finishes the run", "[loop][cli]") {
  // The phase runs in a process group of its own: the loop passes either signal on to it.
  const std::string sig = GENERATE("TERM", "INT");
  INFO("SIG" << sig);
  const TempDir tmp("loop_term");
  json c = tiny_config(fake_match(tmp), 1);
  c["plots"] = false;
  c["selfplay_playouts"] = 800;  // self-play lasts seconds, so that the SIGTERM after 1 s finds it in flight
  std::ofstream(tmp.file("config.json")) << c.dump();
  const std::string dir = tmp.file("run"), bin = JIRIKI_BINARY;
  const std::string cmd = "FAKE_MATCH_EXIT=10 " + bin + " loop --dir " + dir + " --config " + tmp.file("config.json") +
                          " > " + dir + ".out 2>&1 & pid=$!; sleep 1; kill -" + sig + " $pid; wait $pid";
  const int rc = std::system(cmd.c_str());
  INFO(run_output(dir));
  REQUIRE(WIFEXITED(rc));
  CHECK(WEXITSTATUS(rc) == 130);
  const json state = read_json_file(dir + "/state.json");
  CHECK(state["history"].empty());
  // The interrupted self-play's second is kept: the generation's time and rate count every attempt.
  const double interrupted = state["current"]["seconds"].value("selfplay", 0.0);
  CHECK(interrupted > 0.5);
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=10", dir) == 0);
  check_finished_run(dir, 1);
  const json r = read_json_file(dir + "/state.json")["history"][0];
  CHECK(r["seconds"]["selfplay"].get<double>() > interrupted);
  CHECK(r["selfplay"]["positions_per_hour"].get<double>() ==
        Approx(r["selfplay"]["positions"].get<double>() / r["seconds"]["selfplay"].get<double>() * 3600));
}

TEST_CASE("loop gate with the real jiriki match: its command line and summary round-trip", "[loop][cli]") {
  const TempDir tmp("loop_real_match");
  json c = tiny_config("", 1);  // match_command empty: this jiriki's own match
  c["plots"] = false;
  c["gate_games"] = 2;
  c["eval_first_games"] = 2;
  const std::string dir = run_to_end(tmp, c);
  check_finished_run(dir, 1);
  const json r = read_json_file(dir + "/state.json")["history"][0];
  for (const char* m : {"gate", "eval_first"}) {
    INFO(m);
    CHECK(r[m]["games"] == 2);
    CHECK(r[m]["wins"].get<int>() + r[m]["losses"].get<int>() + r[m]["draws"].get<int>() == 2);
    CHECK(r[m]["elo_95"].size() == 2);
  }
  CHECK(r["gate"].contains("sprt"));
  // Both networks played in the match's own process (the arena), not as USI engine processes.
  const std::string gate_log = read_bytes(dir + "/logs/gen0001-gate.log");
  CHECK(gate_log.find("--engine 'model=" + dir + "/train/gen0001/candidate.jnn name=candidate'") != std::string::npos);
  CHECK(gate_log.find("name=opponent' --games 2 --concurrency 2") != std::string::npos);
  CHECK(gate_log.find("cmd=") == std::string::npos);
  // Promoted exactly when the match's verdict and score say so.
  const bool h1 = r["gate"]["exit_code"] == 10, undecided = r["gate"]["exit_code"] == 0;
  CHECK(r["promoted"] == (h1 || (undecided && r["gate"]["score"].get<double>() > 0.5)));
}

TEST_CASE("loop: generation 0 from a model file, and extra training data in every window", "[loop][cli]") {
  const TempDir tmp("loop_init_model");
  const std::string bin = JIRIKI_BINARY;
  init_network(tmp, "init.jnn", 1, 16, 7);
  REQUIRE(std::system((bin + " selfplay --model " + tmp.file("init.jnn") + " --out " + tmp.file("extra") +
                       " --games 2 --playouts 4 --max-plies 40 --concurrent 2 --name x > /dev/null 2>&1")
                          .c_str()) == 0);
  REQUIRE(count_positions(tmp.file("extra")) == 80);
  json c = tiny_config(fake_match(tmp), 1);
  c["init_model"] = tmp.file("init.jnn");
  c["extra_data"] = tmp.file("extra");
  c["plots"] = false;
  std::ofstream(tmp.file("config.json")) << c.dump();
  const std::string dir = tmp.file("run");
  const int rc = run_loop_cli("FAKE_MATCH_EXIT=10", dir, "--config " + tmp.file("config.json"));
  INFO(run_output(dir));
  REQUIRE(rc == 0);
  check_finished_run(dir, 1);
  CHECK(read_bytes(dir + "/models/gen0000.jnn") == read_bytes(tmp.file("init.jnn")));
  const json r = read_json_file(dir + "/state.json")["history"][0];
  CHECK(r["positions_total"] == count_positions(dir + "/selfplay") + 80);
  CHECK(read_bytes(dir + "/logs/gen0001-train.log").find("--data " + tmp.file("extra")) != std::string::npos);
  // A model file that is not one is refused before any phase runs.
  std::ofstream(tmp.file("bad.jnn")) << "not a model";
  c["init_model"] = tmp.file("bad.jnn");
  std::ofstream(tmp.file("bad.json")) << c.dump();
  CHECK(run_loop_cli("", tmp.file("run_bad"), "--config " + tmp.file("bad.json")) == 1);
  CHECK(run_output(tmp.file("run_bad")).find("bad.jnn") != std::string::npos);
}

TEST_CASE("loop train_fresh: every candidate is a fresh network of the config's size, not the best fine-tuned",
          "[loop][cli]") {
  const TempDir tmp("loop_train_fresh");
  // Generation 0 is a 1x16 network; the config asks for 2x8, which only a fresh network can be.
  init_network(tmp, "init.jnn", 1, 16, 7);
  json c = tiny_config(fake_match(tmp), 2);
  c["init_model"] = tmp.file("init.jnn");
  c["blocks"] = 2;
  c["channels"] = 8;
  c["plots"] = false;
  c["train_fresh"] = true;
  const std::string dir = run_to_end(tmp, c);
  check_finished_run(dir, 2);
  for (const char* gen : {"gen0001", "gen0002"}) {
    INFO(gen);
    const std::string log = read_bytes(dir + "/logs/" + gen + "-train.log");
    CHECK(log.find("--init") == std::string::npos);
    CHECK(log.find("--blocks 2 --channels 8") != std::string::npos);
    const auto arch = jiriki::nn::load_model(dir + "/models/" + gen + ".jnn").arch;
    CHECK(arch.blocks == 2);
    CHECK(arch.channels == 8);
  }
  // Off (the default): generation 1 fine-tunes generation 0 and keeps its size.
  c["train_fresh"] = false;
  c["generations"] = 1;
  const TempDir tmp2("loop_train_fresh_off");
  const std::string dir2 = run_to_end(tmp2, c);
  CHECK(read_bytes(dir2 + "/logs/gen0001-train.log").find("--init " + dir2 + "/models/gen0000.jnn") !=
        std::string::npos);
  CHECK(jiriki::nn::load_model(dir2 + "/models/gen0001.jnn").arch.channels == 16);
}

TEST_CASE("loop train_epochs: each generation trains that many passes over its window", "[loop][cli]") {
  const TempDir tmp("loop_train_epochs");
  json c = tiny_config(fake_match(tmp), 2);
  c["plots"] = false;
  c["train_epochs"] = 2.5;
  c["train_batch"] = "16";
  const std::string dir = run_to_end(tmp, c);
  check_finished_run(dir, 2, 0);
  const json history = read_json_file(dir + "/state.json")["history"];
  REQUIRE(history.size() == 2);
  for (const json& r : history) {
    INFO(r.dump());
    const int64_t window = r["window"].get<int64_t>();
    // ceil(2.5 x window / 16), worked out here from the recorded window.
    const int64_t steps = (5 * window + 31) / 32;
    CHECK(r["train_steps"] == steps);
    char gen[16];
    std::snprintf(gen, sizeof gen, "gen%04d", r["generation"].get<int>());
    CHECK(read_bytes(dir + "/logs/" + gen + "-train.log").find("--steps " + std::to_string(steps) + " ") !=
          std::string::npos);
  }
  CHECK(history[1]["window"].get<int64_t>() > history[0]["window"].get<int64_t>());  // the steps follow the window

  c["train_batch"] = "x16";
  CHECK_THROWS_WITH(Config(c), Catch::Contains("'train_batch' must be a positive number or auto, not \"x16\""));
}

TEST_CASE("loop distill: a network of `networks` learns from the self-play network's outputs on every move",
          "[loop][cli]") {
  const TempDir tmp("loop_distill");
  json c = tiny_config(fake_match(tmp), 1);
  c["plots"] = false;
  c["selfplay_playouts"] = 2;
  c["selfplay_playout_cap_full"] = 4;  // a quarter of the moves searched fully: the rest have no target of their own
  c["networks"] = json::array({{{"name", "pupil"}, {"blocks", 1}, {"channels", 8}, {"distill", 0.75}},
                               {{"name", "plain"}, {"blocks", 1}, {"channels", 8}}});
  const std::string dir = run_to_end(tmp, c);
  check_finished_run(dir, 1, 0);
  const std::string pupil = read_bytes(dir + "/logs/gen0001-train-pupil.log");
  INFO(pupil);
  CHECK(pupil.find("--teacher " + dir + "/models/gen0000.jnn --teacher-weight 0.75") != std::string::npos);
  // The trainer read the moves between the searched ones too, with the teacher's targets alone.
  const std::regex counts(R"((\d+) positions with their own targets, (\d+) with the teacher's alone)");
  std::smatch m;
  REQUIRE(std::regex_search(pupil, m, counts));
  CHECK(std::stoll(m[1]) > 0);
  CHECK(std::stoll(m[2]) > std::stoll(m[1]));  // three moves in four have none
  CHECK(read_bytes(dir + "/logs/gen0001-train-plain.log").find("--teacher") == std::string::npos);
  CHECK(read_bytes(dir + "/logs/gen0001-train.log").find("--teacher") == std::string::npos);
  c["networks"] = json::array({{{"name", "pupil"}, {"distill", 1.5}}});
  CHECK_THROWS_WITH(Config(c), Catch::Contains("'distill' must be in [0, 1]"));
}

TEST_CASE("loop train_epochs under train_batch auto: steps of train_batch_start, the tuner starting there",
          "[loop][cli]") {
  const TempDir tmp("loop_epochs_auto");
  json c = tiny_config(fake_match(tmp), 1);
  c["plots"] = false;
  c["train_epochs"] = 2;
  c["train_batch"] = "auto";
  c["train_batch_start"] = 8;
  c["train_args"] = "--tune-min 8 --tune-max 16";
  const std::string dir = run_to_end(tmp, c);
  check_finished_run(dir, 1, 0);
  const json r = read_json_file(dir + "/state.json")["history"][0];
  const int64_t steps = (2 * r["window"].get<int64_t>() + 7) / 8;  // ceil(2 x window / 8)
  CHECK(r["train_steps"] == steps);
  const std::string log = read_bytes(dir + "/logs/gen0001-train.log");
  CHECK(log.find("--steps " + std::to_string(steps) + " ") != std::string::npos);
  CHECK(log.find("--batch auto ") != std::string::npos);
  CHECK(log.find("--batch-start 8 ") != std::string::npos);
}

TEST_CASE("loop gate with the real jiriki match: a worsened candidate loses and is not promoted", "[loop][cli]") {
  const TempDir tmp("loop_worsened");
  // The training "launcher" trains as usual, then spoils the candidate's file: the engine cannot load
  // it, says so, and resigns every move, so it loses every game it plays.
  const std::string worsen = tmp.file("worsen.sh");
  std::ofstream(worsen) << "#!/bin/sh\n\"$@\" || exit $?\nprev=\"\"\nfor a in \"$@\"; do\n"
                           "  if [ \"$prev\" = \"--model-out\" ]; then echo 'a worsened network' > \"$a\"; fi\n"
                           "  prev=\"$a\"\ndone\n";
  json c = tiny_config("", 1);
  c["train_launcher"] = "sh " + worsen;
  c["gate_games"] = 4;
  c["plots"] = false;
  const std::string dir = run_to_end(tmp, c);
  const json r = read_json_file(dir + "/state.json")["history"][0];
  INFO(r.dump());
  CHECK(r["gate"]["games"].get<int>() >= 2);
  CHECK(r["gate"]["losses"] == r["gate"]["games"]);
  CHECK(r["gate"]["score"] == 0.0);
  CHECK(r["promoted"] == false);
  CHECK(read_json_file(dir + "/state.json")["best"] == "models/gen0000.jnn");
  CHECK_FALSE(fs::exists(dir + "/models/gen0001.jnn"));
}

TEST_CASE("loop config: how generations train, more networks, more anchors; the older train_fresh key", "[loop]") {
  CHECK(Config(json{{"train_fresh", true}}).integer("train_fresh_every") == 1);
  CHECK(Config(json{{"train_fresh", false}}).integer("train_fresh_every") == 0);
  CHECK_FALSE(Config(json{{"train_fresh", true}}).values().contains("train_fresh"));  // rewritten as the new key
  CHECK_THROWS_WITH(Config(json{{"train_both", true}}), Catch::Contains("'train_both' needs 'train_fresh_every'"));
  CHECK_THROWS_WITH(Config(json{{"train_both", true}, {"train_fresh_every", 2}, {"gate", false}}),
                    Catch::Contains("'train_both' needs"));
  CHECK_NOTHROW(Config(json{{"train_both", true}, {"train_fresh_every", 2}}));
  CHECK_NOTHROW(Config(json{{"train_fresh_epochs", 2}}));  // (under train_batch auto: steps of train_batch_start)
  CHECK_THROWS_WITH(Config(json{{"networks", "cpu"}}), Catch::Contains("'networks' takes a array"));
  CHECK_THROWS_WITH(Config(json{{"networks", json::array({{{"blocks", 2}}})}}), Catch::Contains("with a \"name\""));
  CHECK_THROWS_WITH(Config(json{{"networks", json::array({{{"name", "a/b"}}})}}), Catch::Contains("not a plain name"));
  CHECK_THROWS_WITH(Config(json{{"networks", json::array({{{"name", "a"}}, {{"name", "a"}}})}}),
                    Catch::Contains("\"a\" is used twice"));
  CHECK_THROWS_WITH(Config(json{{"networks", json::array({{{"name", "a"}, {"blocks", "6"}}})}}),
                    Catch::Contains("'blocks' takes a number"));
  CHECK_THROWS_WITH(Config(json{{"networks", json::array({{{"name", "a"}, {"channels", 0}}})}}),
                    Catch::Contains("'channels' must be positive"));
  CHECK_THROWS_WITH(Config(json{{"networks", json::array({{{"name", "a"}, {"size", 6}}})}}),
                    Catch::Contains("unknown field 'size'"));
  CHECK_NOTHROW(Config(json{{"networks", json::array({{{"name", "a"}, {"train_epochs", 2}}})}}));
  CHECK_THROWS_WITH(Config(json{{"anchors", json::array({{{"name", "x"}, {"games", 2}}})}}),
                    Catch::Contains("needs an \"engine\" or a \"model\""));
  CHECK_THROWS_WITH(Config(json{{"anchors", json::array({{{"name", "x"}, {"engine", "a"}, {"model", "b"}}})}}),
                    Catch::Contains("needs an \"engine\" or a \"model\""));
  CHECK_THROWS_WITH(Config(json{{"anchors", json::array({{{"name", "x"}, {"engine", "a"}}})}}),
                    Catch::Contains("needs \"games\""));
  CHECK_THROWS_WITH(
      Config(json{{"anchors", json::array({{{"name", "x"}, {"engine", "a"}, {"games", 2}, {"network", "cpu"}}})}}),
      Catch::Contains("its network \"cpu\" is not one of"));
  CHECK_THROWS_WITH(
      Config(json{{"anchors", json::array({{{"name", "x"}, {"model", "m.jnn"}, {"games", 2}, {"nodes", 100}}})}}),
      Catch::Contains("\"nodes\" (the candidate's count against an \"engine\") must be positive"));
  CHECK_THROWS_WITH(
      Config(json{{"anchors", json::array({{{"name", "x"}, {"engine", "a"}, {"games", 2}, {"nodes", 0}}})}}),
      Catch::Contains("must be positive"));
  // The GPU machine's configs are valid.
  for (const char* f :
       {"loop.json", "loop_rl.json", "loop_teacher.json", "loop_x2.json", "loop_x4.json", "loop_distill.json"}) {
    INFO(f);
    CHECK_NOTHROW(Config::load(std::string(JIRIKI_SOURCE_DIR) + "/scripts/device/" + f));
  }
  CHECK_NOTHROW(
      Config(json{{"networks", json::array({{{"name", "cpu"}, {"blocks", 6}, {"channels", 64}}})},
                  {"anchors", json::array({{{"name", "x"}, {"model", "m.jnn"}, {"games", 2}, {"network", "cpu"}}})}}));
}

TEST_CASE("loop train_fresh_every with train_both: fine-tuned and fresh candidates, the better one promoted",
          "[loop][cli]") {
  const TempDir tmp("loop_train_both");
  init_network(tmp, "init.jnn", 1, 16, 7);
  json c = tiny_config(fake_match(tmp), 2);
  c["init_model"] = tmp.file("init.jnn");
  c["blocks"] = 2;
  c["channels"] = 8;
  c["plots"] = false;
  c["train_fresh_every"] = 2;
  c["train_both"] = true;
  c["train_fresh_args"] = "--lr 0.02";
  std::ofstream(tmp.file("config.json")) << c.dump();
  const std::string dir = tmp.file("run");
  const int rc =
      run_loop_cli("FAKE_MATCH_EXIT=10 FAKE_MATCH_BETTER=gen0002-fresh", dir, "--config " + tmp.file("config.json"));
  INFO(run_output(dir));
  REQUIRE(rc == 0);
  check_finished_run(dir, 2);
  const json history = read_json_file(dir + "/state.json")["history"];
  // Generation 1: the best fine-tuned only.
  CHECK(history[0]["candidates"].size() == 1);
  CHECK(history[0]["train_kind"] == "finetune");
  CHECK(read_bytes(dir + "/logs/gen0001-train.log").find("--init " + dir + "/models/gen0000.jnn") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/logs/gen0001-train-fresh.log"));
  // Generation 2: both; the fresh one has the config's shape and its own options, after the others.
  REQUIRE(history[1]["candidates"].size() == 2);
  CHECK(read_bytes(dir + "/logs/gen0002-train.log").find("--init " + dir + "/models/gen0001.jnn") != std::string::npos);
  const std::string fresh_log = read_bytes(dir + "/logs/gen0002-train-fresh.log");
  CHECK(fresh_log.find("--init") == std::string::npos);
  CHECK(fresh_log.find("--blocks 2 --channels 8") != std::string::npos);
  CHECK(fresh_log.find("--lr 0.01 --blocks 2 --channels 8 --activation relu --lr 0.02 ") != std::string::npos);
  // Both played the gate against the same best; the fresh one won every game and was promoted.
  for (const json& k : history[1]["candidates"]) {
    INFO(k.dump());
    CHECK(k["accepted"] == true);
    CHECK(k["gate"]["games"] == 4);
  }
  const std::string calls = read_bytes(dir + "/gate/fake_match_calls.txt");
  CHECK(calls.find("model=" + dir + "/train/gen0002-fresh/candidate.jnn") != std::string::npos);
  CHECK(calls.find("model=" + dir + "/train/gen0002/candidate.jnn") != std::string::npos);
  CHECK(history[1]["train_kind"] == "fresh");
  CHECK(history[1]["gate"]["score"] == 1.0);
  CHECK(history[1]["candidate"] == "train/gen0002-fresh/candidate.jnn");
  CHECK(read_bytes(dir + "/models/gen0002.jnn") == read_bytes(dir + "/train/gen0002-fresh/candidate.jnn"));
  CHECK(jiriki::nn::load_model(dir + "/models/gen0002.jnn").arch.channels == 8);
  CHECK(jiriki::nn::load_model(dir + "/models/gen0001.jnn").arch.channels == 16);

  // Without FAKE_MATCH_BETTER the two tie, and the first (fine-tuned) stays the choice.
  c["generations"] = 2;
  const TempDir tmp2("loop_train_both_tie");
  c["match_command"] = fake_match(tmp2);
  const std::string dir2 = run_to_end(tmp2, c);
  CHECK(read_json_file(dir2 + "/state.json")["history"][1]["train_kind"] == "finetune");
}

TEST_CASE("loop: a generation trained by an earlier version of the loop is gated and promoted", "[loop][cli]") {
  const TempDir tmp("loop_old_state");
  json c = tiny_config(fake_match(tmp), 1);
  c["plots"] = false;
  std::ofstream(tmp.file("config.json")) << c.dump();
  const std::string dir = tmp.file("run");
  REQUIRE(run_loop_cli("JIRIKI_LOOP_KILL_AT=1:gate:start", dir, "--config " + tmp.file("config.json")) == -9);
  // The state as an earlier version left it: the candidate and its training's figures, no list of candidates.
  json state = read_json_file(dir + "/state.json");
  REQUIRE(state["step"] == "gate");
  for (const char* k : {"candidates", "train_kind", "accepted"}) state["current"].erase(k);
  REQUIRE(state["current"].contains("candidate"));
  std::ofstream(dir + "/state.json") << state.dump();
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=10", dir) == 0);
  check_finished_run(dir, 1);
  CHECK(read_json_file(dir + "/state.json")["best"] == "models/gen0001.jnn");
}

TEST_CASE(
    "loop networks and anchors: a second shape trained on the same window with its own lineage; anchors "
    "played by either network",
    "[loop][cli]") {
  const TempDir tmp("loop_networks");
  const std::string bin = JIRIKI_BINARY;
  init_network(tmp, "shipped.jnn", 1, 8, 3);
  json c = tiny_config(fake_match(tmp), 2);
  c["networks"] = json::array({{{"name", "small"}, {"blocks", 1}, {"channels", 8}, {"train_args", "--lr 0.005"}}});
  c["anchors"] = json::array(
      {{{"name", "shipped"}, {"model", tmp.file("shipped.jnn")}, {"games", 2}, {"tc", "nodes=3"}, {"network", "small"}},
       {{"name", "gps"}, {"engine", "/usr/games/gpsusi -N 1"}, {"games", 2}, {"args", "--margin 200"}},
       {{"name", "gps-nodes"}, {"engine", "/usr/games/gpsusi"}, {"games", 2}, {"nodes", 40}}});
  c["anchor_tc"] = "movetime=50";
  const std::string dir = run_to_end(tmp, c);
  check_finished_run(dir, 2);
  const json state = read_json_file(dir + "/state.json");
  // Every candidate promoted (the fake's undecided 62.5%), each network in its own lineage.
  CHECK(state["best"] == "models/gen0002.jnn");
  CHECK(state["networks"]["small"]["best"] == "models/small/gen0002.jnn");
  for (const char* gen : {"gen0000", "gen0001", "gen0002"}) {
    INFO(gen);
    const auto arch = jiriki::nn::load_model(dir + "/models/small/" + gen + ".jnn").arch;
    CHECK(arch.channels == 8);
    CHECK(jiriki::nn::load_model(dir + "/models/" + gen + ".jnn").arch.channels == 16);
  }
  const json& h = state["history"];
  for (int g : {0, 1}) {
    INFO(g);
    const json& small = h[g]["networks"]["small"];
    CHECK(small["promoted"] == true);
    CHECK(small["train"]["test"]["samples"].get<int64_t>() >= 10);  // the same held-out positions
    CHECK(small["gate"]["games"] == 4);
    CHECK(h[g]["anchors"]["shipped"]["games"] == 4);
    CHECK(h[g]["anchors"]["gps"]["games"] == 4);
    CHECK(h[g]["anchors"]["gps-nodes"]["games"] == 4);
  }
  // Same data and window, its own best and options; self-play with the main network only.
  const std::string small_log = read_bytes(dir + "/logs/gen0002-train-small.log");
  CHECK(small_log.find("--init " + dir + "/models/small/gen0001.jnn") != std::string::npos);
  CHECK(small_log.find("--window " + std::to_string(h[1]["window"].get<int64_t>())) != std::string::npos);
  CHECK(small_log.find("--lr 0.005") != std::string::npos);
  CHECK(read_bytes(dir + "/logs/gen0002-train.log").find("--lr 0.005") == std::string::npos);
  CHECK(read_bytes(dir + "/logs/gen0002-selfplay.log").find("--model " + dir + "/models/gen0001.jnn") !=
        std::string::npos);
  const std::string gate = read_bytes(dir + "/gate/small/fake_match_calls.txt");
  CHECK(gate.find("model=" + dir + "/train/small/gen0002/candidate.jnn name=candidate") != std::string::npos);
  CHECK(gate.find("model=" + dir + "/models/small/gen0001.jnn name=opponent") != std::string::npos);
  // The anchors: a network file played by the small network's candidate at its own time control, an
  // engine played by the main one at anchor_tc with its own options.
  const std::string shipped = read_bytes(dir + "/anchors/shipped/fake_match_calls.txt");
  CHECK(shipped.find("model=" + tmp.file("shipped.jnn") + " name=shipped") != std::string::npos);
  CHECK(shipped.find("model=" + dir + "/train/small/gen0002/candidate.jnn name=candidate") != std::string::npos);
  CHECK(shipped.find("--tc nodes=3") != std::string::npos);
  const std::string gps = read_bytes(dir + "/anchors/gps/fake_match_calls.txt");
  CHECK(gps.find("cmd=/usr/games/gpsusi name=gps args=\"-N 1\"") != std::string::npos);
  CHECK(gps.find("name=candidate option.ModelFile=" + dir + "/train/gen0002/candidate.jnn") != std::string::npos);
  CHECK(gps.find("--tc movetime=50") != std::string::npos);
  CHECK(gps.find("--margin 200") != std::string::npos);
  // With "nodes", the candidate plays at that count in the match's own process, the engine as before.
  const std::string gps_nodes = read_bytes(dir + "/anchors/gps-nodes/fake_match_calls.txt");
  CHECK(gps_nodes.find("model=" + dir + "/train/gen0002/candidate.jnn name=candidate nodes=40") != std::string::npos);
  CHECK(gps_nodes.find("cmd=/usr/games/gpsusi name=gps-nodes") != std::string::npos);
  CHECK(gps_nodes.find("--tc movetime=50") != std::string::npos);
  CHECK(gps_nodes.find("--backend") != std::string::npos);
  // TensorBoard has the small network's and the anchors' figures.
  const auto events = decode_event_file(read_bytes(dir + "/tensorboard/events.out.tfevents.0000000002.jiriki"));
  std::map<std::string, float> tags;
  for (const auto& e : events)
    for (const auto& [tag, v] : e.values) tags[tag] = v;
  CHECK(tags.count("networks/small/gate/score") == 1);
  CHECK(tags["anchors/gps/score"] == 0.625f);
  if (std::system("command -v gnuplot > /dev/null 2>&1") == 0) {
    // generations.dat: 16 columns, then Elo, lo, hi and outright bound of each anchor and of the small
    // network's gate.
    const auto table = plot_rows(dir);
    REQUIRE(table.size() == 3);
    REQUIRE(table[1].size() == 16 + 4 * 4);
    CHECK(table[1][16] == "0");
    CHECK(table[1][17] == "-100");
    CHECK(table[1][19] == "NaN");  // not won outright: no bound
    const std::string script = read_bytes(dir + "/plots/elo.gp");
    // Each anchor's curve names the network whose candidate played it.
    for (const char* t : {"'small candidate vs shipped'", "'candidate vs gps'", "small candidate vs its best"})
      CHECK(script.find(t) != std::string::npos);
    CHECK(read_bytes(dir + "/plots/elo.png").substr(1, 3) == "PNG");
  }
  // An anchor added afterwards: `loop eval` plays it for every generation, with each one's network.
  json config = read_json_file(dir + "/config.json");
  config["anchors"].push_back({{"name", "late"}, {"engine", "/usr/games/gpsusi"}, {"games", 2}, {"network", "small"}});
  std::ofstream(dir + "/config.json") << config.dump();
  REQUIRE(std::system((bin + " loop eval --dir " + dir + " > " + tmp.file("eval.out") + " 2>&1").c_str()) == 0);
  INFO(read_bytes(tmp.file("eval.out")));
  CHECK(read_bytes(tmp.file("eval.out")).find("2 matches played") != std::string::npos);
  const json after = read_json_file(dir + "/state.json")["history"];
  for (int g : {0, 1}) CHECK(after[g]["anchors"]["late"]["games"] == 4);
  const std::string late = read_bytes(dir + "/anchors/late/fake_match_calls.txt");
  CHECK(late.find("name=candidate option.ModelFile=" + dir + "/models/small/gen0001.jnn") != std::string::npos);
}

TEST_CASE("loop: anchor_every plays the anchors in every K-th generation only, and loop eval the others later",
          "[loop][cli]") {
  const TempDir tmp("loop_anchor_every");
  json c = tiny_config(fake_match(tmp), 2);
  c["plots"] = false;
  // "often" overrides anchor_every with its own "every".
  c["anchors"] = json::array({{{"name", "gps"}, {"engine", "/usr/games/gpsusi -N 1"}, {"games", 2}},
                              {{"name", "often"}, {"engine", "/usr/games/gpsusi -N 1"}, {"games", 2}, {"every", 1}}});
  c["anchor_every"] = 2;
  std::ofstream(tmp.file("config.json")) << c.dump();
  const std::string dir = tmp.file("run");
  REQUIRE(run_loop_cli("FAKE_MATCH_ANCHOR_SPRT=H1", dir, "--config " + tmp.file("config.json")) == 0);
  check_finished_run(dir, 2);
  // Each anchor's SPRT decision is said with the generation's line.
  const std::string out = run_output(dir);
  INFO(out);
  CHECK(out.find("anchor often: SPRT H1 over 4 games, Elo 0: train/gen0001/candidate.jnn beats often") !=
        std::string::npos);
  CHECK(out.find("anchor gps: SPRT H1 over 4 games, Elo 0: train/gen0002/candidate.jnn beats gps") !=
        std::string::npos);
  CHECK(out.find("anchor gps: SPRT H1 over 4 games, Elo 0: train/gen0001") == std::string::npos);
  const json h = read_json_file(dir + "/state.json")["history"];
  CHECK(!h[0]["anchors"].contains("gps"));  // generation 1
  CHECK(h[0]["anchors"]["often"]["games"] == 4);
  CHECK(h[1]["anchors"]["gps"]["games"] == 4);
  CHECK(h[1]["anchors"]["often"]["games"] == 4);
  CHECK(!h[0]["seconds"].contains("anchor-gps"));
  CHECK(h[0]["seconds"].contains("anchor-often"));
  CHECK(h[1]["seconds"].contains("anchor-gps"));
  const std::string bin = JIRIKI_BINARY;
  REQUIRE(std::system((bin + " loop eval --dir " + dir + " > " + tmp.file("eval.out") + " 2>&1").c_str()) == 0);
  INFO(read_bytes(tmp.file("eval.out")));
  CHECK(read_json_file(dir + "/state.json")["history"][0]["anchors"]["gps"]["games"] == 4);
  CHECK_THROWS_WITH(Config(json{{"anchor_every", 0}}), Catch::Contains("'anchor_every'"));
  CHECK_THROWS_WITH(
      Config(json{{"anchors", json::array({{{"name", "x"}, {"engine", "a"}, {"games", 2}, {"every", 0}}})}}),
      Catch::Contains("\"every\" (play it every K-th generation) must be positive"));
}

// The config of the anchor tests below, in TMP/config.json: one generation at a time, the fake match,
// two engine anchors, "ship" played by the best after the gate and "cand" by the candidate.
static void write_ship_and_cand_config(const TempDir& tmp) {
  json c = tiny_config(fake_match(tmp), 1);
  c["eval_first_games"] = 0;
  c["anchors"] = json::array({{{"name", "ship"}, {"engine", "/usr/games/gpsusi -N 1"}, {"games", 2}, {"play", "best"}},
                              {{"name", "cand"}, {"engine", "/usr/games/gpsusi -N 1"}, {"games", 2}}});
  std::ofstream(tmp.file("config.json")) << c.dump();
}

TEST_CASE("loop: an anchor with play best is played by the line's best after the gate, the others by the candidate",
          "[loop][cli]") {
  const TempDir tmp("loop_anchor_best");
  write_ship_and_cand_config(tmp);
  const std::string dir = tmp.file("run");
  // Generation 1's gate rejects its candidate (every match H0): the best is still generation 0.
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=11 FAKE_MATCH_ANCHOR_SPRT=H1", dir, "--config " + tmp.file("config.json")) ==
          0);
  // Generation 2's gate accepts it (undecided at 62.5%): its candidate is the best it plays.
  REQUIRE(run_loop_cli("FAKE_MATCH_ANCHOR_SPRT=H1", dir, "--generations 2") == 0);
  const std::string out = run_output(dir);
  INFO(out);
  const json h = read_json_file(dir + "/state.json")["history"];
  REQUIRE(h.size() == 2);
  CHECK(h[0]["promoted"] == false);
  CHECK(h[1]["promoted"] == true);
  CHECK(h[0]["anchors"]["ship"]["played"] == "models/gen0000.jnn");
  CHECK(h[0]["anchors"]["cand"]["played"] == "train/gen0001/candidate.jnn");
  CHECK(h[1]["anchors"]["ship"]["played"] == "train/gen0002/candidate.jnn");
  const std::string ship = read_bytes(dir + "/anchors/ship/fake_match_calls.txt");
  CHECK(ship.find("name=candidate option.ModelFile=" + dir + "/models/gen0000.jnn") != std::string::npos);
  CHECK(ship.find("ModelFile=" + dir + "/train/gen0001/candidate.jnn") == std::string::npos);
  // The decision names the network that played.
  CHECK(out.find("anchor ship: SPRT H1 over 4 games, Elo 0: models/gen0000.jnn beats ship") != std::string::npos);
  CHECK(out.find("anchor cand: SPRT H1 over 4 games, Elo 0: train/gen0001/candidate.jnn beats cand") !=
        std::string::npos);
  CHECK(read_bytes(dir + "/plots/elo.gp").find("'best vs ship'") != std::string::npos);
  // `loop eval` plays an anchor added later with each generation's best after it, as the loop would have.
  json config = read_json_file(dir + "/config.json");
  config["anchors"].push_back({{"name", "late"}, {"engine", "/usr/games/gpsusi -N 1"}, {"games", 2}, {"play", "best"}});
  std::ofstream(dir + "/config.json") << config.dump();
  const std::string bin = JIRIKI_BINARY;
  REQUIRE(std::system((bin + " loop eval --dir " + dir + " > " + tmp.file("eval.out") + " 2>&1").c_str()) == 0);
  const json after = read_json_file(dir + "/state.json")["history"];
  CHECK(after[0]["anchors"]["late"]["played"] == "models/gen0000.jnn");
  CHECK(after[1]["anchors"]["late"]["played"] == "models/gen0002.jnn");
  CHECK_THROWS_WITH(
      Config(json{{"anchors", json::array({{{"name", "x"}, {"engine", "a"}, {"games", 2}, {"play", "worst"}}})}}),
      Catch::Contains("\"play\" must be \"candidate\" or \"best\", not \"worst\""));
}

TEST_CASE("loop: an anchor's match already played by the same network in the same setting is not played again",
          "[loop][cli]") {
  const TempDir tmp("loop_anchor_repeat");
  write_ship_and_cand_config(tmp);
  const std::string dir = tmp.file("run");
  // Generation 1's gate accepts its candidate (undecided at 62.5%); generations 2 and 3 reject theirs
  // (every match H0): the best stays generation 1's network, which "ship" played as the candidate.
  REQUIRE(run_loop_cli("FAKE_MATCH_ANCHOR_SPRT=H0", dir, "--config " + tmp.file("config.json")) == 0);
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=11", dir, "--generations 3") == 0);
  std::string out = run_output(dir);
  INFO(out);
  json h = read_json_file(dir + "/state.json")["history"];
  REQUIRE(h.size() == 3);
  CHECK(h[0]["promoted"] == true);
  CHECK(h[1]["promoted"] == false);
  CHECK(h[0]["anchors"]["ship"]["played"] == "train/gen0001/candidate.jnn");
  CHECK(h[0]["anchors"]["ship"]["games"] == 4);
  for (int g : {1, 2}) {
    CHECK(h[g]["anchors"]["ship"]["played"] == "models/gen0001.jnn");
    CHECK(h[g]["anchors"]["ship"]["repeat_of"] == 1);
    CHECK(h[g]["anchors"]["ship"]["played_fnv1a64"] == h[0]["anchors"]["ship"]["played_fnv1a64"]);
    CHECK_FALSE(h[g]["anchors"]["ship"].contains("games"));
    CHECK(h[g]["anchors"]["cand"]["games"] == 4);  // a new candidate each generation
  }
  const auto calls = [&](const std::string& name) {
    const std::string text = read_bytes(dir + "/anchors/" + name + "/fake_match_calls.txt");
    return std::count(text.begin(), text.end(), '\n');
  };
  CHECK(calls("ship") == 1);
  CHECK(calls("cand") == 3);
  CHECK(out.find("anchor ship: not played again: models/gen0001.jnn played it in generation 1") != std::string::npos);
  // Another time control is another match: generation 4 plays it.
  json config = read_json_file(dir + "/config.json");
  config["anchors"][0]["tc"] = "nodes=8";
  std::ofstream(dir + "/config.json") << config.dump();
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=11", dir, "--generations 4") == 0);
  h = read_json_file(dir + "/state.json")["history"];
  REQUIRE(h.size() == 4);
  CHECK(h[3]["anchors"]["ship"]["games"] == 4);
  CHECK(calls("ship") == 2);
  // `loop eval` plays an anchor added later once for the network generations 1-3 share.
  config["anchors"].push_back({{"name", "late"}, {"engine", "/usr/games/gpsusi -N 1"}, {"games", 2}, {"play", "best"}});
  std::ofstream(dir + "/config.json") << config.dump();
  const std::string bin = JIRIKI_BINARY;
  REQUIRE(std::system((bin + " loop eval --dir " + dir + " > " + tmp.file("eval.out") + " 2>&1").c_str()) == 0);
  out = read_bytes(tmp.file("eval.out"));
  INFO(out);
  h = read_json_file(dir + "/state.json")["history"];
  CHECK(h[0]["anchors"]["late"]["games"] == 4);
  for (int g : {1, 2, 3}) CHECK(h[g]["anchors"]["late"]["repeat_of"] == 1);
  CHECK(calls("late") == 1);
  CHECK(out.find("gen0002: anchor-late not played again: models/gen0001.jnn played it in generation 1") !=
        std::string::npos);
}

TEST_CASE("loop: a network anchor's file that changes during the run is said, recorded and drawn as another curve",
          "[loop][cli]") {
  const TempDir tmp("loop_anchor_changed");
  const std::string shipped = init_network(tmp, "shipped.jnn", 1, 8, 3);
  json c = tiny_config(fake_match(tmp), 1);
  c["eval_first_games"] = 0;
  c["anchors"] = json::array({{{"name", "shipped"}, {"model", shipped}, {"games", 2}}});
  const std::string dir = run_to_end(tmp, c);
  // The same file in generation 2, another network in its place for generation 3 (a network shipped
  // in the meantime).
  REQUIRE(run_loop_cli("", dir, "--generations 2") == 0);
  CHECK(run_output(dir).find("warning: anchor shipped") == std::string::npos);
  init_network(tmp, "shipped.jnn", 1, 8, 4);
  REQUIRE(run_loop_cli("", dir, "--generations 3") == 0);
  const std::string out = run_output(dir);
  INFO(out);
  CHECK(out.find("warning: anchor shipped: " + shipped + " is not the network generation 2 played") !=
        std::string::npos);
  const json h = read_json_file(dir + "/state.json")["history"];
  REQUIRE(h.size() == 3);
  const std::string first = h[0]["anchors"]["shipped"]["model_fnv1a64"];
  CHECK(first.size() == 16);
  CHECK(h[1]["anchors"]["shipped"]["model_fnv1a64"] == first);
  CHECK(h[2]["anchors"]["shipped"]["model_fnv1a64"] != first);
  if (std::system("command -v gnuplot > /dev/null 2>&1") == 0) {
    // Two curves for the one anchor: generations 1-2 in the first, 3 in the second.
    const auto table = plot_rows(dir);
    REQUIRE(table.size() == 4);
    REQUIRE(table[1].size() == 16 + 4 * 2);
    CHECK(table[1][16] == "0");
    CHECK(table[2][16] == "0");
    CHECK(table[3][16] == "NaN");
    CHECK(table[1][20] == "NaN");
    CHECK(table[3][20] == "0");
    CHECK(read_bytes(dir + "/plots/elo.gp").find("'candidate vs shipped (another file from generation 3)'") !=
          std::string::npos);
  }
}

TEST_CASE("loop: self-play records left behind count as pruned, and the next self-play plays the window's share again",
          "[loop][cli]") {
  const TempDir tmp("loop_refill");
  json c = tiny_config(fake_match(tmp), 2);
  c["plots"] = false;
  c["eval_first_games"] = 0;
  const std::string dir = run_to_end(tmp, c);
  json state = read_json_file(dir + "/state.json");
  const int64_t made = state["history"][0]["selfplay"]["positions"].get<int64_t>() +
                       state["history"][1]["selfplay"]["positions"].get<int64_t>();
  // The run moved to a machine without its records.
  fs::remove_all(dir + "/selfplay");
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=10", dir, "--generations 3") == 0);
  INFO(run_output(dir));
  CHECK(run_output(dir).find("selfplay/gen0001's records are not here") != std::string::npos);
  state = read_json_file(dir + "/state.json");
  CHECK(state["pruned_positions"] == made);
  const json& r = state["history"][2];
  // The window for the positions made so far, less what this generation plays anyway, is played again.
  const int64_t refill = window_rows(made + 60, Config(c).window()) - 60;
  REQUIRE(refill > 0);
  CHECK(r["selfplay"]["refill"] == refill);
  CHECK(r["selfplay"]["positions"].get<int64_t>() >= 60 + refill);
  CHECK(r["positions_total"] == made + r["selfplay"]["positions"].get<int64_t>());
  CHECK(count_positions(dir + "/selfplay") >= r["window"].get<int64_t>());
  // A run with its records gets no refill.
  CHECK_FALSE(state["history"][1]["selfplay"].contains("refill"));
}

TEST_CASE(
    "loop: a run that moves without its records in the middle of a self-play counts and refills from what is there",
    "[loop][cli]") {
  const TempDir tmp("loop_refill_mid");
  json c = tiny_config(fake_match(tmp), 2);
  c["plots"] = false;
  c["eval_first_games"] = 0;
  const std::string dir = run_to_end(tmp, c);
  const json before = read_json_file(dir + "/state.json");
  const int64_t made = before["history"][0]["selfplay"]["positions"].get<int64_t>() +
                       before["history"][1]["selfplay"]["positions"].get<int64_t>();
  // Generation 3's self-play starts where the records are (its count before the generation is taken
  // then), the loop is killed in it, and the run goes on elsewhere without any of them.
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=10 JIRIKI_LOOP_KILL_DELAY_MS=150 JIRIKI_LOOP_KILL_AT=3:selfplay:mid", dir,
                       "--generations 3") == -9);
  REQUIRE(read_json_file(dir + "/state.json")["current"]["selfplay_base"] == made);
  fs::remove_all(dir + "/selfplay");
  REQUIRE(run_loop_cli("FAKE_MATCH_EXIT=10", dir, "--generations 3") == 0);
  INFO(run_output(dir));
  const json state = read_json_file(dir + "/state.json");
  CHECK(state["pruned_positions"] == made);
  const json& r = state["history"][2];
  // The generation's count is what its directory holds (not that less the records that went), and the
  // window's share of the records that went is played again, once.
  CHECK(r["selfplay"]["positions"] == count_positions(dir + "/selfplay/gen0003"));
  const int64_t refill = window_rows(made + 60, Config(c).window()) - 60;
  REQUIRE(refill > 0);
  CHECK(r["selfplay"]["refill"] == refill);
  CHECK(r["selfplay"]["positions"].get<int64_t>() >= 60 + refill);
  CHECK(r["positions_total"] == made + r["selfplay"]["positions"].get<int64_t>());
}

TEST_CASE("loop: self-play positions shared out over the processes of the GPUs", "[loop]") {
  CHECK(split_positions(10, 4) == std::vector<int64_t>{3, 3, 2, 2});
  CHECK(split_positions(126000, 4) == std::vector<int64_t>{31500, 31500, 31500, 31500});
  CHECK(split_positions(2, 4) == std::vector<int64_t>{1, 1, 0, 0});
  CHECK(split_positions(7, 1) == std::vector<int64_t>{7});
  CHECK(split_positions(7, 0) == std::vector<int64_t>{7});
  CHECK(split_positions(-3, 2) == std::vector<int64_t>{0, 0});
}

TEST_CASE("loop: self-play runs one process per entry of gpus at once, each with its share and seed", "[loop][cli]") {
  const TempDir tmp("loop_selfplay_per_gpu");
  json c = tiny_config(fake_match(tmp), 1);
  c["gpus"] = "0,1";  // on the CPU backend: two self-play processes all the same
  c["plots"] = false;
  const std::string dir = run_to_end(tmp, c);
  check_finished_run(dir, 1);
  const json r = read_json_file(dir + "/state.json")["history"][0];
  // Each process wrote its own files; together they made the generation's positions.
  int64_t per_process[2] = {0, 0};
  for (const auto& e : fs::directory_iterator(dir + "/selfplay/gen0001")) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".hcpe3") continue;
    for (int i : {0, 1})
      if (name.rfind("gen0001-selfplay-", 0) == 0 && name.find("-g" + std::to_string(i) + "-") != std::string::npos)
        per_process[i] += count_positions(e.path().string());
  }
  INFO(per_process[0] << " + " << per_process[1]);
  CHECK(per_process[0] >= 30);
  CHECK(per_process[1] >= 30);
  CHECK(r["selfplay"]["positions"] == count_positions(dir + "/selfplay/gen0001"));
  CHECK(r["selfplay"]["positions"].get<int64_t>() >= 60);
  for (int i : {0, 1}) {
    const std::string log = read_bytes(dir + "/logs/gen0001-selfplay-" + std::to_string(i) + ".log");
    INFO(log);
    CHECK(log.find("--positions 30 ") != std::string::npos);
  }
  const std::string seeds[2] = {read_bytes(dir + "/logs/gen0001-selfplay-0.log"),
                                read_bytes(dir + "/logs/gen0001-selfplay-1.log")};
  auto seed_of = [](const std::string& log) {
    const size_t at = log.find("--seed ") + 7;
    return log.substr(at, log.find(' ', at) - at);
  };
  CHECK(seed_of(seeds[0]) != seed_of(seeds[1]));
  // The held-out positions are made the same way.
  CHECK(fs::exists(dir + "/logs/gen0001-holdout-0.log"));
}
