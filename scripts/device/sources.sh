# Sourced by prebuild.sh (here) and env.sh (on the GPU machine): sources_hash prints one hash of every
# file a build of jiriki reads (sources, CMake files, shipped networks), the same on both machines.
sources_hash() {
  find . \( -path ./.carry -o -path './build*' -o -path ./.git -o -path ./fuzz -o -path ./tests -o -path ./scripts \) -prune \
    -o -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cmake' -o -name CMakeLists.txt \
    -o -name '*.jnn' \) -print | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
}
