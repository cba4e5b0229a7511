// Brief busy-waiting before a thread sleeps on a condition variable: where the awaited event is a
// fraction of a millisecond away (the next loop of a forward pass, a gradient bucket landing, the
// other replicas reaching a barrier), a wake-up from sleep costs more than the wait itself (several
// microseconds on Linux, more from an idle core's deep sleep state, a wineserver round trip under Wine).
#pragma once
#include <thread>

namespace jiriki {

// About 0.1 ms of waiting: longer than the gaps those waits usually see, short enough that an idle
// thread leaves its core soon.
inline constexpr int SPIN_ROUNDS = 4000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Calls done() until it is true or SPIN_ROUNDS have passed; true when done.
template <class Done>
bool spin_until(const Done& done) {
  for (int i = 0; i < SPIN_ROUNDS; ++i) {
    if (done()) return true;
    cpu_relax();
  }
  return done();
}

}  // namespace jiriki
