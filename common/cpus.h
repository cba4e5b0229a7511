// The CPUs this process may use, for every default thread count: the smaller of its affinity mask
// (taskset, numactl, a batch scheduler's pinning) and its cgroup CPU quota (docker --cpus, systemd
// CPUQuota, Kubernetes limits), rounded up. std::thread::hardware_concurrency counts the machine's
// CPUs instead, and a process pinned to 2 cores of 64 started 32 oneDNN threads per search thread.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace jiriki {

struct UsableCpus {
  int count = 1;    // at least 1
  std::string why;  // how it was found, e.g. "2 of 64 CPUs in the affinity mask; no cgroup CPU quota"
};

// Read afresh at each call (a few small files): the mask is the calling thread's.
UsableCpus usable_cpus();

// The CPUs a cgroup v2 `cpu.max` allows ("max 100000": none; "150000 100000": 1.5).
std::optional<double> cgroup2_cpu_limit(const std::string& cpu_max);
// The CPUs a cgroup v1 cfs_quota_us / cfs_period_us pair allows (a quota of -1: none).
std::optional<double> cgroup1_cpu_limit(int64_t quota_us, int64_t period_us);

}  // namespace jiriki
