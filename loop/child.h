// Each phase of the loop runs as a child process (of this same binary, or the match program), as
// KataGo's loop runs separate programs: a crash or a kill of a phase stays in that process, and
// the loop, whose state file says which step was in flight, redoes only that step.
#pragma once
#include <string>
#include <vector>

namespace jiriki::loop {

// The path of the running jiriki binary (/proc/self/exe resolved).
std::string self_binary();

// Splits a command line on spaces, with "double quotes" grouping words (no other escapes).
std::vector<std::string> split_command(const std::string& line);

struct ChildResult {
  int exit_code = -1;  // the exit status, or 128 + the signal that ended it
  double seconds = 0;
};

// Runs argv[0] (a path, or a name looked up in PATH) with argv through Boost.Process (match/process.h),
// its stdout and stderr appended to `log_path`, in a process group of its own, and waits for it; a
// program that cannot run is exit code 127, with the reason in the log. The child is killed with
// SIGKILL when the loop dies (so that a killed loop leaves no phase running), and what it leaves
// running in its group is killed when it ends. `kill_point` is the name of this moment for the test
// hook (see kill_if). An `interruptible` child is one interrupt_child() signals. Several may run at
// once, each from its own thread.
ChildResult run_child(const std::vector<std::string>& argv, const std::string& log_path, const std::string& kill_point,
                      bool interruptible = true);

// The test hook: when the environment's JIRIKI_LOOP_KILL_AT equals `point`, the process kills
// itself with SIGKILL, as a crash or `kill -9` would. For a point of a running child ("...:mid"),
// run_child waits JIRIKI_LOOP_KILL_DELAY_MS (default 300) after starting it first.
void kill_if(const std::string& point);

// Sends SIGINT to the process groups of the interruptible children in flight, if any (the loop's
// SIGINT and SIGTERM handler calls it; async-signal-safe).
void interrupt_child();

}  // namespace jiriki::loop
