# Cross-compiles jiriki.exe for 64-bit Windows on Debian with MinGW-w64's POSIX-thread compilers
# (package g++-mingw-w64-x86-64-posix): cmake --preset windows && cmake --build --preset windows.
# The binary is linked statically (no DLLs beside it) and compiled for x86-64-v3 (AVX2, BMI2, FMA),
# which every x86-64 processor since Haswell / Zen 1 runs.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(JIRIKI_MINGW_PREFIX x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${JIRIKI_MINGW_PREFIX}-gcc-posix)
set(CMAKE_CXX_COMPILER ${JIRIKI_MINGW_PREFIX}-g++-posix)
set(CMAKE_RC_COMPILER ${JIRIKI_MINGW_PREFIX}-windres)
set(CMAKE_FIND_ROOT_PATH /usr/${JIRIKI_MINGW_PREFIX})
# Headers and libraries only from the MinGW sysroot: the host's Linux ones must never be picked up.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CXX_FLAGS_INIT "-march=x86-64-v3")
set(CMAKE_C_FLAGS_INIT "-march=x86-64-v3")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
