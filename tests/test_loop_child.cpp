// loop/child.h: the loop's phases as child processes. Exit codes as a shell reports them, output
// appended to the log, a program that cannot run reported as 127, and the phase's process group:
// interrupted as a whole, and killed with whatever it left running when the phase ends.
#include <catch2/catch.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "loop/child.h"
#include "tests/temp_dir.h"

using namespace jiriki;
using Catch::Matchers::Contains;
using jiriki::testing::TempDir;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Whether process `pid` runs (a zombie does not: it has ended and waits for its parent to reap it).
bool running(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

// Waits up to 10 s for process `pid` to end.
bool ends(long pid) {
  for (int i = 0; i < 1000 && running(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return !running(pid);
}

// The process id a script wrote to `path`, waiting up to 10 s for it.
long pid_in(const std::string& path) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in(path);
    long pid = 0;
    if (in >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

}  // namespace

TEST_CASE("loop child: exit codes as a shell reports them, output appended to the log", "[loop]") {
  const TempDir tmp("loop_child_exit");
  const std::string log = tmp.file("phase.log");
  std::ofstream(log) << "$ the command line\n";
  loop::ChildResult r = loop::run_child({"sh", "-c", "echo out; echo err >&2; exit 3"}, log, "");
  CHECK(r.exit_code == 3);
  CHECK(r.seconds >= 0);
  CHECK(read_text(log) == "$ the command line\nout\nerr\n");

  r = loop::run_child({"sh", "-c", "kill -TERM $$"}, log, "");
  CHECK(r.exit_code == 128 + SIGTERM);
  r = loop::run_child({"true"}, log, "");
  CHECK(r.exit_code == 0);

  // A program that is not there: 127, as a shell says, with the reason in the log.
  r = loop::run_child({"jiriki-no-such-program"}, log, "");
  CHECK(r.exit_code == 127);
  CHECK_THAT(read_text(log), Contains("cannot run the phase's program jiriki-no-such-program"));
  r = loop::run_child({tmp.file("missing")}, log, "");
  CHECK(r.exit_code == 127);
  CHECK_THAT(read_text(log), Contains("$ the command line\nout\nerr\n"));  // still appended, never truncated
  CHECK_THROWS(loop::run_child({}, log, ""));
}

TEST_CASE("loop child: what a phase leaves running in its process group ends with it", "[loop]") {
  const TempDir tmp("loop_child_group");
  // The shell ends at once; its background sleep would run for a minute.
  const loop::ChildResult r =
      loop::run_child({"sh", "-c", "sleep 60 & echo $! > " + tmp.file("pid")}, tmp.file("phase.log"), "");
  CHECK(r.exit_code == 0);
  const long pid = pid_in(tmp.file("pid"));
  REQUIRE(pid > 0);
  CHECK(ends(pid));
}

TEST_CASE("loop child: interrupt_child sends SIGINT to the phase's whole group", "[loop]") {
  const TempDir tmp("loop_child_interrupt");
  // The shell exits 7 on SIGINT; its background sleep ignores SIGINT (a non-interactive shell's
  // background job), so it ends only by the kill of the group at the phase's end.
  const std::string script = "sleep 60 & echo $! > " + tmp.file("pid") + "; trap 'exit 7' INT; echo $$ > " +
                             tmp.file("ready") + "; while :; do sleep 0.05; done";
  loop::ChildResult r;
  std::atomic<bool> done{false};
  std::thread phase([&] {
    r = loop::run_child({"sh", "-c", script}, tmp.file("phase.log"), "");
    done = true;
  });
  const long pid = pid_in(tmp.file("pid"));
  for (int i = 0; i < 200 && !done; ++i) {  // until the phase is in flight and takes the signal
    if (std::ifstream(tmp.file("ready"))) loop::interrupt_child();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const bool interrupted = done;
  if (!interrupted) ::kill(pid_t(pid_in(tmp.file("ready"))), SIGKILL);  // a failure, not a hang
  phase.join();
  CHECK(interrupted);
  CHECK(r.exit_code == 7);
  REQUIRE(pid > 0);
  CHECK(ends(pid));
  loop::interrupt_child();  // no phase in flight: nothing happens
}
