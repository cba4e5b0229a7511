#include "loop/child.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>

#include "match/process.h"

namespace bp = boost::process;

namespace jiriki::loop {

namespace {

// The process groups of the interruptible children in flight (self-play runs one per GPU at once);
// 0 marks a free slot.
constexpr int MAX_CHILDREN = 64;
std::atomic<pid_t> g_groups[MAX_CHILDREN];

// The slot `group` now holds, or -1 when every slot is taken (the child is then not interruptible).
int hold_slot(pid_t group) {
  for (int i = 0; i < MAX_CHILDREN; ++i)
    if (pid_t free = 0; g_groups[i].compare_exchange_strong(free, group)) return i;
  return -1;
}

// A wait status as a shell reports it: the exit code, or 128 + the signal that ended the process.
int shell_exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

}  // namespace

std::string self_binary() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

std::vector<std::string> split_command(const std::string& line) {
  std::vector<std::string> out;
  std::string word;
  bool quoted = false, any = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (c == ' ' && !quoted) {
      if (any) out.push_back(word);
      word.clear();
      any = false;
    } else {
      word += c;
      any = true;
    }
  }
  if (quoted) throw std::invalid_argument("unbalanced quotes in '" + line + "'");
  if (any) out.push_back(word);
  return out;
}

void kill_if(const std::string& point) {
  const char* at = std::getenv("JIRIKI_LOOP_KILL_AT");
  if (at && point == at) ::raise(SIGKILL);
}

void interrupt_child() {
  for (auto& group : g_groups)
    if (pid_t g = group.load()) ::kill(-g, SIGINT);
}

ChildResult run_child(const std::vector<std::string>& argv, const std::string& log_path, const std::string& kill_point,
                      bool interruptible) {
  if (argv.empty()) throw std::invalid_argument("run_child: no command");
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  // Appended to, never truncated: the command line heads the log, and a redone step adds to it.
  // Close-on-exec ("e"): only this child gets it, on its stdout and stderr.
  std::unique_ptr<FILE, int (*)(FILE*)> log(std::fopen(log_path.c_str(), "ae"), std::fclose);
  if (!log) throw std::runtime_error("cannot open " + log_path + ": " + std::strerror(errno));
  auto cannot_run = [&](const std::string& why) {
    std::fprintf(log.get(), "error: cannot run the phase's program %s: %s\n", argv[0].c_str(), why.c_str());
    return ChildResult{127, seconds()};  // as a shell reports a command it cannot run
  };
  const boost::filesystem::path exe = match::find_program(argv[0]);
  if (exe.empty()) return cannot_run("not in PATH");

  // The child is in a process group of its own: stopping it (interrupt_child, or the end of the phase)
  // reaches every process it started, and Ctrl-C at the terminal reaches only the loop, which passes it on.
  bp::group group;
  bp::child child;
  // In the child before exec (async-signal-safe calls only): it dies with the loop, however the loop dies.
  auto die_with_loop = [parent = ::getpid()](auto&) {
#if defined(__linux__)
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(137);  // the loop died before prctl took effect
#else
    (void)parent;
#endif
  };
  try {
    std::lock_guard spawn_lock(match::spawn_mutex());
    child = bp::child(exe, bp::args(std::vector<std::string>(argv.begin() + 1, argv.end())), bp::std_in = bp::null,
                      (bp::std_out & bp::std_err) = log.get(), group, bp::extend::on_exec_setup = die_with_loop);
  } catch (const std::exception& e) {
    return cannot_run(e.what());
  }
  log.reset();
  const int slot = interruptible ? hold_slot(group.native_handle()) : -1;
  const char* at = std::getenv("JIRIKI_LOOP_KILL_AT");
  if (at && kill_point == at) {
    const char* d = std::getenv("JIRIKI_LOOP_KILL_DELAY_MS");
    std::this_thread::sleep_for(std::chrono::milliseconds(d ? std::atoi(d) : 300));
    ::raise(SIGKILL);
  }
  std::error_code ec;
  child.wait(ec);
  if (slot >= 0) g_groups[slot] = 0;
  if (ec) throw std::runtime_error("waiting for " + argv[0] + " failed: " + ec.message());
  // Whatever the phase left running in its group ends with it.
  group.terminate(ec);
  return {shell_exit_code(child.native_exit_code()), seconds()};
}

}  // namespace jiriki::loop
