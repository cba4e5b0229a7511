// The CPUs the process may use (common/cpus.h): the cgroup quota files as the kernel writes them,
// and the affinity mask of a child pinned to one CPU.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cpus.h"

using namespace jiriki;

TEST_CASE("cpus: cgroup v2 cpu.max and v1 cfs quota/period", "[cpus]") {
  CHECK_FALSE(cgroup2_cpu_limit("max 100000"));
  CHECK(cgroup2_cpu_limit("150000 100000") == 1.5);
  CHECK(cgroup2_cpu_limit("200000 100000") == 2.0);
  CHECK_FALSE(cgroup2_cpu_limit(""));
  CHECK_FALSE(cgroup2_cpu_limit("garbage"));
  CHECK_FALSE(cgroup1_cpu_limit(-1, 100000));
  CHECK(cgroup1_cpu_limit(50000, 100000) == 0.5);
}

TEST_CASE("cpus: a process pinned to one CPU counts one, and says it is the affinity mask", "[cpus]") {
  const UsableCpus here = usable_cpus();
  CHECK(here.count >= 1);
  CHECK(here.why.find("affinity mask") != std::string::npos);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    cpu_set_t allowed, one;
    sched_getaffinity(0, sizeof allowed, &allowed);
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) {
        CPU_SET(c, &one);
        break;
      }
    if (sched_setaffinity(0, sizeof one, &one) != 0) _exit(100);
    const UsableCpus u = usable_cpus();
    _exit(u.count == 1 && u.why.starts_with("1 of ") ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
