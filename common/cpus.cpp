// The CPUs this process may use (see cpus.h).
#include "common/cpus.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "common/platform.h"

namespace jiriki {

namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

struct Quota {
  double cpus;
  std::string where;
};

// The smallest CPU quota on the way from the process's cgroup up to the root: a limit set on a
// parent (a container's, a systemd slice's) binds its children too.
std::optional<Quota> cgroup_quota() {
  std::ifstream self("/proc/self/cgroup");
  std::optional<Quota> best;
  auto consider = [&](std::optional<double> cpus, const std::string& where) {
    if (cpus && (!best || *cpus < best->cpus)) best = Quota{*cpus, where};
  };
  for (std::string line; std::getline(self, line);) {
    // hierarchy-ID:controllers:path; cgroup v2 is "0::/path".
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    std::vector<std::string> mounts;
    if (controllers.empty()) mounts = {"/sys/fs/cgroup"};
    else if (("," + controllers + ",").find(",cpu,") != std::string::npos)
      mounts = {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"};
    for (const std::string& mount : mounts)
      for (std::string p = path;; p = p.substr(0, p.rfind('/'))) {
        const std::string dir = mount + (p == "/" ? "" : p);
        if (controllers.empty()) {
          consider(cgroup2_cpu_limit(read_first_line(dir + "/cpu.max")), dir + "/cpu.max");
        } else {
          const std::string q = read_first_line(dir + "/cpu.cfs_quota_us");
          const std::string t = read_first_line(dir + "/cpu.cfs_period_us");
          try {
            if (!q.empty() && !t.empty())
              consider(cgroup1_cpu_limit(std::stoll(q), std::stoll(t)), dir + "/cpu.cfs_quota_us");
          } catch (const std::exception&) {}
        }
        if (p.empty() || p == "/") break;
      }
  }
  return best;
}

}  // namespace

std::optional<double> cgroup2_cpu_limit(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  int64_t period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
  try {
    const int64_t q = std::stoll(quota);
    return q > 0 ? std::optional(double(q) / double(period)) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<double> cgroup1_cpu_limit(int64_t quota_us, int64_t period_us) {
  if (quota_us <= 0 || period_us <= 0) return std::nullopt;
  return double(quota_us) / double(period_us);
}

UsableCpus usable_cpus() {
  const int machine = int(std::max(1u, std::thread::hardware_concurrency()));
  UsableCpus u;
  u.count = machine;
  if (const std::optional<int> mask = affinity_cpu_count()) {
    u.count = *mask;
    u.why = std::to_string(u.count) + " of " + std::to_string(machine) + " CPUs in the affinity mask";
  } else {
    u.why = std::to_string(machine) + " CPUs (the affinity mask could not be read)";
  }
  if (const std::optional<Quota> q = cgroup_quota()) {
    const int allowed = std::max(1, int(std::ceil(q->cpus - 1e-9)));
    std::ostringstream s;
    s << "; a cgroup CPU quota of " << q->cpus << " (" << q->where << ")";
    u.why += s.str();
    u.count = std::min(u.count, allowed);
  } else {
    u.why += "; no cgroup CPU quota";
  }
  return u;
}

}  // namespace jiriki
