// POSIX and Windows forms of the operating-system calls (see platform.h).
#include "common/platform.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#ifdef _WIN32
#include <fcntl.h>
#include <io.h>
#include <process.h>
#include <windows.h>
#else
#include <fcntl.h>
#include <iconv.h>
#include <sched.h>
#include <unistd.h>
#endif

namespace jiriki {

#ifdef _WIN32

int process_id() { return _getpid(); }

std::filesystem::path executable_path() {
  std::wstring buf(32768, L'\0');
  const DWORD n = GetModuleFileNameW(nullptr, buf.data(), DWORD(buf.size()));
  if (n == 0 || n >= buf.size()) return {};
  buf.resize(n);
  return std::filesystem::path(buf);
}

std::vector<int> affinity_cpus() {
  DWORD_PTR process = 0, system = 0;
  if (!GetProcessAffinityMask(GetCurrentProcess(), &process, &system)) return {};
  std::vector<int> cpus;
  for (int c = 0; c < 64; ++c)
    if (uint64_t(process) >> c & 1) cpus.push_back(c);
  return cpus;
}

bool set_affinity_cpus(const std::vector<int>&) { return false; }

void set_binary_stdin() { _setmode(_fileno(stdin), _O_BINARY); }

int sync_file_descriptor(int fd) { return _commit(fd) == 0 ? 0 : errno; }

int replace_file(const std::string& from, const std::string& to) {
  if (MoveFileExA(from.c_str(), to.c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) return 0;
  return GetLastError() == ERROR_ACCESS_DENIED ? EACCES : EIO;
}

const int OPEN_BINARY = _O_BINARY;

namespace {

UINT code_page(const char* encoding) {
  if (std::string_view(encoding) == "UTF-8") return CP_UTF8;
  if (std::string_view(encoding) == "CP932") return 932;
  throw std::runtime_error(std::string("cannot convert text from or to ") + encoding);
}

// The length of the character starting at s[0] in code page `cp` (its lead byte says).
size_t char_length(UINT cp, std::string_view s) {
  const auto b = uint8_t(s[0]);
  size_t n = 1;
  if (cp == CP_UTF8) n = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
  else if ((b >= 0x81 && b <= 0x9f) || (b >= 0xe0 && b <= 0xfc)) n = 2;
  return std::min(n, s.size());
}

}  // namespace

// A character at a time, so that the offset of the first one that does not convert is known.
std::optional<size_t> convert_text(const char* to, const char* from, std::string_view in, std::string& out) {
  const UINT to_cp = code_page(to), from_cp = code_page(from);
  out.clear();
  for (size_t i = 0; i < in.size();) {
    const size_t n = char_length(from_cp, in.substr(i));
    wchar_t wide[2];
    const int w = MultiByteToWideChar(from_cp, MB_ERR_INVALID_CHARS, in.data() + i, int(n), wide, 2);
    if (w <= 0) return i;
    char bytes[8];
    BOOL lossy = FALSE;
    const int m = to_cp == CP_UTF8
                      ? WideCharToMultiByte(to_cp, 0, wide, w, bytes, sizeof bytes, nullptr, nullptr)
                      : WideCharToMultiByte(to_cp, WC_NO_BEST_FIT_CHARS, wide, w, bytes, sizeof bytes, nullptr, &lossy);
    if (m <= 0 || lossy) return i;
    out.append(bytes, size_t(m));
    i += n;
  }
  return std::nullopt;
}

ReadOnlyFile::ReadOnlyFile(const std::string& path, const std::string& what) {
  HANDLE h = CreateFileA(path.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr, OPEN_EXISTING,
                         FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) throw std::runtime_error("cannot open " + what + " " + path);
  LARGE_INTEGER size;
  if (!GetFileSizeEx(h, &size)) {
    CloseHandle(h);
    throw std::runtime_error("cannot read the size of " + path);
  }
  handle_ = intptr_t(h);
  size_ = size.QuadPart;
}

ReadOnlyFile::~ReadOnlyFile() { CloseHandle(HANDLE(handle_)); }

int64_t ReadOnlyFile::read_at(int64_t offset, void* buf, size_t n) const {
  OVERLAPPED at{};  // on a handle opened without FILE_FLAG_OVERLAPPED: a synchronous read at this offset
  at.Offset = DWORD(uint64_t(offset));
  at.OffsetHigh = DWORD(uint64_t(offset) >> 32);
  DWORD got = 0;
  const DWORD want = DWORD(std::min<size_t>(n, 1u << 30));
  if (ReadFile(HANDLE(handle_), buf, want, &got, &at)) return got;
  return GetLastError() == ERROR_HANDLE_EOF ? 0 : -1;
}

#else

int process_id() { return int(::getpid()); }

std::filesystem::path executable_path() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : p;
}

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool set_affinity_cpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) return false;
    CPU_SET(c, &set);
  }
  return !cpus.empty() && sched_setaffinity(0, sizeof set, &set) == 0;
}

void set_binary_stdin() {}

int sync_file_descriptor(int fd) { return ::fsync(fd) == 0 ? 0 : errno; }

int replace_file(const std::string& from, const std::string& to) {
  return std::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

const int OPEN_BINARY = 0;

std::optional<size_t> convert_text(const char* to, const char* from, std::string_view in, std::string& out) {
  iconv_t cd = iconv_open(to, from);
  if (cd == (iconv_t)-1) throw std::runtime_error(std::string("iconv cannot convert ") + from + " to " + to);
  out.clear();
  char* src = const_cast<char*>(in.data());
  size_t src_left = in.size();
  std::string buf(4096, '\0');
  std::optional<size_t> bad;
  while (src_left > 0) {
    char* dst = buf.data();
    size_t dst_left = buf.size();
    size_t r = iconv(cd, &src, &src_left, &dst, &dst_left);
    out.append(buf.data(), buf.size() - dst_left);
    if (r == (size_t)-1 && errno != E2BIG) {
      bad = size_t(src - in.data());
      break;
    }
  }
  iconv_close(cd);
  return bad;
}

ReadOnlyFile::ReadOnlyFile(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + what + " " + path);
  handle_ = fd;
  size_ = ::lseek(fd, 0, SEEK_END);
}

ReadOnlyFile::~ReadOnlyFile() { ::close(int(handle_)); }

int64_t ReadOnlyFile::read_at(int64_t offset, void* buf, size_t n) const {
  for (;;) {
    const ssize_t got = ::pread(int(handle_), buf, n, offset);
    if (got >= 0 || errno != EINTR) return got;
  }
}

#endif

std::string user_cache_file(const char* variable, const std::string& name) {
  if (const char* e = std::getenv(variable); e && *e) return std::string(e) == "off" ? "" : e;
  for (const auto& [root, below] : {std::pair{"XDG_CACHE_HOME", "/jiriki/"}, std::pair{"HOME", "/.cache/jiriki/"},
                                    std::pair{"LOCALAPPDATA", "\\jiriki\\"}})
    if (const char* r = std::getenv(root); r && *r) return r + std::string(below) + name;
  return "";
}

std::optional<int> affinity_cpu_count() {
  const size_t n = affinity_cpus().size();
  return n > 0 ? std::optional(int(n)) : std::nullopt;
}

}  // namespace jiriki
