// What this binary is: its version, the commit it was built from, the backends and libraries
// compiled in and the networks embedded. `jiriki --version` prints it and the USI engine says it at
// `isready`, so that a result or a bug report names exactly what produced it.
#pragma once
#include <string>

namespace jiriki {

// One line: "jiriki 0.1.0 (git v0.1.0-3-gabcdef0) built with oneDNN 2.6.3, CUDA 13.0.88, ...;
// networks cpu.jnn 93ba40b4f5b13784, gpu.jnn ...".
std::string build_info();

}  // namespace jiriki
