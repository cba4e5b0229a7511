#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "common/platform.h"

namespace jiriki {

namespace {

// Writes all of `bytes` to fd, retrying short writes and EINTR; 0, or the errno of the failure.
int write_all(int fd, std::string_view bytes) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += size_t(w);
  }
  return 0;
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes) {
  std::string tmp = path + ".tmp." + std::to_string(process_id());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | OPEN_BINARY, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + path + " (creating " + tmp + "): " + std::strerror(errno));
  if (const int e = write_all(fd, bytes)) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(e));
  }
  if (const int e = sync_file_descriptor(fd); e != 0 || ::close(fd) != 0) {
    std::string err = std::strerror(e != 0 ? e : errno);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + path + " (flushing " + tmp + "): " + err);
  }
  if (const int e = replace_file(tmp, path)) {
    std::string err = std::strerror(e);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + err);
  }
}

void append_to_file(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | OPEN_BINARY, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  const off_t start = ::lseek(fd, 0, SEEK_END);
  if (const int e = write_all(fd, bytes)) {
    std::string err = std::strerror(e);
    if (start >= 0 && ::ftruncate(fd, start) != 0) err += "; the file could not be cut back to its last whole record";
    ::close(fd);
    throw std::runtime_error("cannot write " + path + ": " + err);
  }
  if (::close(fd) != 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace jiriki
