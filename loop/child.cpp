#include "loop/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace jiriki::loop {

namespace {
// The interruptible children in flight (self-play runs one per GPU at once); 0 marks a free slot.
constexpr int MAX_CHILDREN = 64;
std::atomic<pid_t> g_children[MAX_CHILDREN];

// The slot `pid` now holds, or -1 when every slot is taken (the child is then not interruptible).
int hold_slot(pid_t pid) {
  for (int i = 0; i < MAX_CHILDREN; ++i)
    if (pid_t free = 0; g_children[i].compare_exchange_strong(free, pid)) return i;
  return -1;
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
  for (auto& child : g_children)
    if (pid_t p = child.load()) ::kill(p, SIGINT);
}

ChildResult run_child(const std::vector<std::string>& argv, const std::string& log_path, const std::string& kill_point,
                      bool interruptible) {
  if (argv.empty()) throw std::invalid_argument("run_child: no command");
  const pid_t parent = ::getpid();
  const auto start = std::chrono::steady_clock::now();
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) throw std::runtime_error("cannot open " + log_path + ": " + std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // The child: dies with the loop; its output goes to the log; only async-signal-safe calls here.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(137);  // the loop died before prctl took effect
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::execvp(args[0], args.data());
    const char msg[] = "error: cannot run the phase's program\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(log);
  const int slot = interruptible ? hold_slot(pid) : -1;
  const char* at = std::getenv("JIRIKI_LOOP_KILL_AT");
  if (at && kill_point == at) {
    const char* d = std::getenv("JIRIKI_LOOP_KILL_DELAY_MS");
    std::this_thread::sleep_for(std::chrono::milliseconds(d ? std::atoi(d) : 300));
    ::raise(SIGKILL);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
  if (slot >= 0) g_children[slot] = 0;
  ChildResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace jiriki::loop
