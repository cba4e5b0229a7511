// USI engine processes through Boost.Process v1 (Boost 1.74): pipes, a reader thread, process groups.
#include "match/engine_process.h"

#include <fcntl.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <boost/process.hpp>

#include "common/platform.h"
#include "match/process.h"

namespace bp = boost::process;

namespace jiriki::match {

std::optional<std::string> parse_engine_spec(const std::string& text, EngineSpec& out) {
  EngineSpec spec;
  size_t i = 0;
  while (true) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i == text.size()) break;
    size_t eq = text.find('=', i);
    size_t space = text.find_first_of(" \t", i);
    if (eq == std::string::npos || eq > space) return "expected KEY=VALUE at '" + text.substr(i) + "'";
    std::string key = text.substr(i, eq - i), value;
    i = eq + 1;
    if (i < text.size() && text[i] == '"') {
      size_t close = text.find('"', i + 1);
      if (close == std::string::npos) return "unclosed quote after " + key + "=";
      value = text.substr(i + 1, close - i - 1);
      i = close + 1;
    } else {
      size_t end = text.find_first_of(" \t", i);
      if (end == std::string::npos) end = text.size();
      value = text.substr(i, end - i);
      i = end;
    }
    if (key == "cmd") spec.cmd = value;
    else if (key == "model") spec.model = value;
    else if (key == "name") spec.name = value;
    else if (key == "dir") spec.dir = value;
    else if (key == "args") {
      std::string word;
      for (char c : value + ' ') {
        if (c == ' ' || c == '\t') {
          if (!word.empty()) spec.args.push_back(word);
          word.clear();
        } else {
          word += c;
        }
      }
    } else if (key.rfind("option.", 0) == 0 && key.size() > 7) {
      spec.options.emplace_back(key.substr(7), value);
    } else if (key.rfind("env.", 0) == 0 && key.size() > 4) {
      spec.env.emplace_back(key.substr(4), value);
    } else if (key == "nodes") {
      char* end = nullptr;
      errno = 0;
      const long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno == ERANGE || n < 1)
        return "nodes=" + value + " is not a positive count";
      spec.nodes = n;
    } else {
      return "unknown engine field '" + key + "' (expected cmd, model, name, dir, args, nodes, env.VAR or option.NAME)";
    }
  }
  if (spec.cmd.empty() == spec.model.empty()) return "cmd=PATH (a USI engine) or model=PATH (a network), one of them";
  if (!spec.model.empty() && (!spec.dir.empty() || !spec.args.empty() || !spec.env.empty()))
    return "model=PATH plays in this process: dir, args and env.VAR are for cmd=PATH";
  if (spec.name.empty())
    spec.name = spec.cmd.empty() ? std::filesystem::path(spec.model).stem().string()
                                 : std::filesystem::path(spec.cmd).filename().string();
  out = std::move(spec);
  return std::nullopt;
}

EngineSpec spec_for_slot(const EngineSpec& spec, int slot) {
  EngineSpec s = spec;
  for (auto& [name, value] : s.options) {
    if (name.size() != 3 || std::toupper((unsigned char)name[0]) != 'G' ||
        std::toupper((unsigned char)name[1]) != 'P' || std::toupper((unsigned char)name[2]) != 'U' ||
        value.find(',') == std::string::npos)
      continue;
    std::vector<std::string> list;
    for (size_t b = 0;;) {
      const size_t e = value.find(',', b);
      list.push_back(value.substr(b, e == std::string::npos ? std::string::npos : e - b));
      if (e == std::string::npos) break;
      b = e + 1;
    }
    value = list[size_t(slot) % list.size()];
  }
  return s;
}

std::vector<int> cpus_for_slot(const std::vector<int>& allowed, int per_game, int slot) {
  if (per_game <= 0 || allowed.empty()) return {};
  std::vector<int> cpus;
  for (int i = 0; i < per_game; ++i)
    cpus.push_back(allowed[(size_t(slot) * size_t(per_game) + size_t(i)) % allowed.size()]);
  return cpus;
}

struct EngineProcess::Child {
  bp::pipe in;  // a bare pipe: bp::opstream's destructor throws (and terminates) on a dead reader
  bp::ipstream out;
  bp::group group;
  bp::child proc;
};

TrafficLog::TrafficLog(const std::string& path) : out_(path, std::ios::trunc) {
  if (!out_) throw std::runtime_error("cannot write " + path);
}

void TrafficLog::write(const std::string& engine, char direction, const std::string& line, Clock::time_point at) {
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%.3f ", std::chrono::duration<double, std::milli>(at - start_).count());
  std::lock_guard lock(mutex_);
  out_ << stamp << engine << ' ' << direction << ' ' << line << '\n' << std::flush;
}

EngineProcess::EngineProcess(EngineSpec spec, TrafficLog* log, std::string label, const std::atomic<bool>* interrupt)
    : spec_(std::move(spec)), log_(log), label_(label.empty() ? spec_.name : std::move(label)), interrupt_(interrupt) {
  // A write to an engine that has just died must fail, not end the runner with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
}

EngineProcess::~EngineProcess() { stop_child(true); }

void EngineProcess::reader(std::shared_ptr<Child> child) {
  std::string line;
  while (std::getline(child->out, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto at = Clock::now();
    if (log_) log_->write(label_, '>', line, at);
    {
      std::lock_guard lock(mutex_);
      lines_.push_back({std::move(line), at});
    }
    cv_.notify_all();
    line.clear();
  }
  {
    std::lock_guard lock(mutex_);
    eof_ = true;
  }
  cv_.notify_all();
}

void EngineProcess::stop_child(bool polite) {
  if (!child_) return;
  if (polite && send("quit")) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, std::chrono::milliseconds(500), [&] { return eof_; });
  }
  std::error_code ec;
  child_->group.terminate(ec);  // the engine and anything it started; an empty group is fine
  child_->proc.wait(ec);
  if (reader_.joinable()) reader_.join();
  child_.reset();
  std::lock_guard lock(mutex_);
  lines_.clear();
  eof_ = true;
}

void EngineProcess::kill() { stop_child(false); }

std::optional<std::string> EngineProcess::start(std::chrono::milliseconds timeout) {
  stop_child(false);
  const boost::filesystem::path exe = find_program(spec_.cmd);
  if (exe.empty()) return spec_.name + ": " + spec_.cmd + " is not in PATH";
  if (!spec_.dir.empty() && !std::filesystem::is_directory(spec_.dir))
    return spec_.name + ": working directory " + spec_.dir + " does not exist";
  bp::environment env = boost::this_process::environment();
  for (const auto& [var, value] : spec_.env) env[var] = value;
  // Each engine must inherit its own pipes only (match/process.h): the pipes are made close-on-exec
  // (the child's dup2 onto its stdin and stdout keeps those), and made and spawned under the spawn
  // lock. (bp::limit_handles of Boost 1.74 closes the redirected pipes too.)
  std::lock_guard spawn_lock(spawn_mutex());
  // The child inherits the mask of the thread that starts it: this thread takes the engine's CPUs
  // for the spawn and its own back after.
  const std::vector<int> own_cpus = spec_.cpus.empty() ? std::vector<int>() : affinity_cpus();
  if (!spec_.cpus.empty() && (own_cpus.empty() || !set_affinity_cpus(spec_.cpus)))
    return spec_.name + ": cannot confine the engine to its CPUs on this system";
  struct RestoreCpus {
    const std::vector<int>& cpus;
    ~RestoreCpus() {
      if (!cpus.empty()) set_affinity_cpus(cpus);
    }
  } restore{own_cpus};
  auto child = std::make_shared<Child>();
  for (int fd : {child->in.native_source(), child->in.native_sink(), child->out.pipe().native_source(),
                 child->out.pipe().native_sink()})
    ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
  try {
    if (spec_.dir.empty())
      child->proc = bp::child(exe, bp::args(spec_.args), bp::std_in<child->in, bp::std_out> child->out,
                              bp::std_err > bp::null, env, child->group);
    else
      child->proc = bp::child(exe, bp::args(spec_.args), bp::std_in<child->in, bp::std_out> child->out,
                              bp::std_err > bp::null, env, bp::start_dir(spec_.dir), child->group);
  } catch (const std::exception& e) {
    return spec_.name + ": cannot start " + spec_.cmd + ": " + e.what();
  }
  {
    std::lock_guard lock(mutex_);
    lines_.clear();
    eof_ = false;
  }
  child_ = child;
  reader_ = std::thread(&EngineProcess::reader, this, child);

  const auto deadline = Clock::now() + timeout;
  send("usi");
  while (true) {
    auto line = read_line(deadline);
    if (!line) return spec_.name + (ended() ? ": the engine ended before usiok" : ": no usiok in time");
    if (line->text == "usiok") break;
  }
  for (const auto& [name, value] : spec_.options) send("setoption name " + name + " value " + value);
  if (!sync(timeout)) return spec_.name + (ended() ? ": the engine ended before readyok" : ": no readyok in time");
  return std::nullopt;
}

bool EngineProcess::sync(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  {
    std::lock_guard lock(mutex_);
    lines_.clear();
  }
  if (!send("isready")) return false;
  while (auto line = read_line(deadline))
    if (line->text == "readyok") return true;
  return false;
}

bool EngineProcess::send(const std::string& line) {
  if (!child_) return false;
  if (log_) log_->write(label_, '<', line, Clock::now());
  std::string bytes = line + '\n';
  try {
    for (size_t done = 0; done < bytes.size();) {
      int n = child_->in.write(bytes.data() + done, int(bytes.size() - done));
      if (n <= 0) return false;
      done += size_t(n);
    }
  } catch (const std::exception&) {  // EPIPE: the engine is gone
    return false;
  }
  return true;
}

std::optional<EngineLine> EngineProcess::read_line(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  auto ready = [&] { return !lines_.empty() || eof_; };
  if (!interrupt_) {
    cv_.wait_until(lock, deadline, ready);
  } else {
    // The interrupt is a flag a signal handler sets, not a condition to notify: look at it every 50 ms.
    while (!ready() && !*interrupt_ && Clock::now() < deadline)
      cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)), ready);
  }
  if (lines_.empty()) return std::nullopt;
  EngineLine l = std::move(lines_.front());
  lines_.pop_front();
  return l;
}

bool EngineProcess::ended() {
  std::lock_guard lock(mutex_);
  return eof_ && lines_.empty();
}

}  // namespace jiriki::match
