// Fuzzes the USI command handler: the input is a stream of command lines for one engine (a tiny
// network of 1 block x 16 channels on the CPU, so that an input costs about a millisecond). Beyond not crashing, the
// answers are checked against the USI rule by UsiReferee (tests/usi_session.h): whenever the engine is idle, every go
// has had exactly one answer (only gameover may withdraw one), in order, each bestmove legal in the position of the
// last accepted `position` at its go (resign when there was none).
//
// What the harness changes, and why: every go gets " nodes 2" appended (a search costs
// well under a millisecond, not the seconds a clock would give it; the clock arguments are still parsed), and setoption
// lines for the options that pick resources (ModelFile, Backend, GPU, Threads, BatchSize, USI_Hash, BookFile, and the
// aliases DNN_Model, UCT_Threads, DNN_Batch_Size) are dropped, so that an input cannot load other files or allocate
// without bound; the option parser itself is exercised by every other setoption. One engine serves every input (loading
// the network per input would be most of the time; it is made at the first input); each input starts from `stop`, every
// other option at its default, and no position.
#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/harness.h"
#include "tests/usi_session.h"

using namespace jiriki;

namespace {

bool resource_option(const std::string& line) {
  std::istringstream is(line);
  std::string setoption, name, id;
  is >> setoption >> name >> id;
  if (setoption != "setoption") return false;
  for (char& c : id) c = char(std::tolower((unsigned char)c));
  for (const char* n : {"modelfile", "backend", "gpu", "threads", "batchsize", "usi_hash", "bookfile", "dnn_model",
                        "uct_threads", "dnn_batch_size"})  // the last three: aliases
    if (id == n) return true;
  return false;
}

struct Harness {
  testing::UsiLines lines;
  usi::Engine engine{lines.stream};
  std::vector<std::string> reset;  // setoption lines restoring every other option's default

  Harness() {
    engine.command("usi");
    for (const std::string& l : lines.drain()) {
      // option name N type T default D ...
      std::istringstream is(l);
      std::string option, name, id, type, t, def, d;
      is >> option >> name >> id >> type >> t >> def >> d;
      if (option != "option" || def != "default") continue;
      const std::string set = "setoption name " + id + " value " + d;
      if (!resource_option(set)) reset.push_back(set);  // resources are set once, never by an input
    }
    engine.command("setoption name ModelFile value " + testing::tiny_model_path());
    engine.command("setoption name Backend value cpu");
    // A small node budget: searches of 2 nodes need no more. (A long run under ASan and UBSan still
    // grows by about 2 KB an input, and stopped at libFuzzer's 2 GB limit after about 870,000
    // inputs; the same harness built without sanitizers stayed at 139-152 MB over 105,000 inputs,
    // so that is the sanitizers' bookkeeping of the threads each search starts, not the engine's
    // memory. scripts/device/fuzz.sh restarts its processes to stay clear of it.)
    engine.command("setoption name USI_Hash value 64");
    engine.command("isready");
    lines.drain();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness* h = new Harness();  // never destroyed: libFuzzer exits without unwinding
  usi::Engine& e = h->engine;
  e.command("stop");
  for (const std::string& r : h->reset) e.command(r);
  e.command("position");  // rejected: no position
  h->lines.drain();

  testing::UsiReferee referee;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  bool running = true;
  for (std::string line; running && std::getline(in, line);) {
    if (resource_option(line)) continue;
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (first == "go") line += " nodes 2";
    if (auto err = referee.play(e, h->lines, line, &running)) {
      std::fprintf(stderr, "USI rule broken: %s\n", err->c_str());
      FUZZ_CHECK(false);
    }
  }
  bool unused;
  if (auto err = referee.play(e, h->lines, "stop", &unused)) {
    std::fprintf(stderr, "USI rule broken: %s\n", err->c_str());
    FUZZ_CHECK(false);
  }
  FUZZ_CHECK(referee.owed() == 0);
  return 0;
}
