#include "support/atomic_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace ddlsim {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw std::runtime_error("cannot write " + path_ + ": it is a directory");
    direct_ = true;  // a FIFO, a terminal, a device: no file to replace
    out_.open(path_, std::ios::binary);
    if (!out_) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
    return;
  }
  // A link is followed to the file it names, which is what gets replaced.
  std::string target = path_;
  struct stat lst {};
  if (::lstat(path_.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    char* real = ::realpath(path_.c_str(), nullptr);
    if (real == nullptr) throw std::runtime_error("cannot write " + path_ + ": a link to a file that cannot be reached");
    target = real;
    std::free(real);
  }
  target_ = target;
  // A unique temporary beside the target (same file system, so rename is atomic); two
  // AtomicFiles for the same target never share one.
  std::vector<char> name(target.begin(), target.end());
  for (char c : std::string(".tmp.XXXXXX")) name.push_back(c);
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  ::close(fd);
  temp_ = name.data();
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    std::remove(temp_.c_str());
    throw std::runtime_error("cannot write " + path_ + ": cannot open a temporary file beside it");
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_ && !direct_) {
    out_.close();
    std::remove(temp_.c_str());
  }
}

void AtomicFile::commit() {
  out_.flush();
  const bool ok = static_cast<bool>(out_);
  out_.close();
  if (!ok || out_.fail()) throw std::runtime_error("cannot write " + path_ + ": write failed");
  if (direct_) {
    committed_ = true;
    return;
  }
  // mkstemp creates the file readable by its owner only; give it the usual permissions.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::chmod(temp_.c_str(), 0666 & ~mask);
  if (std::rename(temp_.c_str(), target_.c_str()) != 0) {
    throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  }
  committed_ = true;
}

}  // namespace ddlsim
