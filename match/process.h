// Starting child processes, the one way this program does it (Boost.Process): the match runner's
// engines (match/engine_process.h) and the overnight loop's phases (loop/child.h) are started with
// the program looked up the same way and under the same lock.
#pragma once
#include <mutex>
#include <string>

#include <boost/filesystem/path.hpp>

namespace jiriki::match {

// The lock this process starts every child under. The descriptors made for one child are made
// close-on-exec and the child spawned while it is held, so that no child started by another thread
// in between inherits them (an engine holding a copy of another engine's pipe keeps it open after
// that engine dies, and its reader never sees the crash).
std::mutex& spawn_mutex();

// The executable Boost.Process runs for `cmd`: a path as given, a name without '/' looked up in
// PATH; empty when it is not there.
boost::filesystem::path find_program(const std::string& cmd);

}  // namespace jiriki::match
