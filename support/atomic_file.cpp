#include "support/atomic_file.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace ddlsim {

namespace {

// Temporaries alive now, so that SIGINT or SIGTERM (Ctrl-C, a scheduler's kill) removes
// them before the process dies, as an exception would: the handler may only use
// async-signal-safe calls, so the names live in fixed slots claimed with atomics.
constexpr std::size_t kSlots = 64;
constexpr std::size_t kNameBytes = 4096;
struct Slot {
  std::atomic<bool> live{false};
  char name[kNameBytes];
};
std::array<Slot, kSlots> g_slots;

extern "C" void remove_temporaries_and_die(int sig) {
  for (Slot& s : g_slots) {
    if (s.live.load()) ::unlink(s.name);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Claims a slot for `name`; -1 when the name is too long or every slot is taken (the
// temporary is then left behind by a signal, as before).
int claim(const std::string& name) {
  if (name.size() >= kNameBytes) return -1;
  static std::mutex m;
  const std::lock_guard lock(m);
  for (std::size_t i = 0; i < kSlots; ++i) {
    if (!g_slots[i].live.load()) {
      std::memcpy(g_slots[i].name, name.c_str(), name.size() + 1);
      g_slots[i].live.store(true);
      return static_cast<int>(i);
    }
  }
  return -1;
}

void release(int slot) {
  if (slot >= 0) g_slots[static_cast<std::size_t>(slot)].live.store(false);
}

// A new empty file named `target` plus a unique suffix, beside it (same file system, so
// a rename onto the target is atomic): its name, or nullopt with errno set.
std::optional<std::string> make_temporary(const std::string& target) {
  std::vector<char> name(target.begin(), target.end());
  for (char c : std::string(".tmp.XXXXXX")) name.push_back(c);
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) {
    const int error = errno;  // kept past the name's release
    name = {};
    errno = error;
    return std::nullopt;
  }
  ::close(fd);
  return std::string(name.data());
}

// The file a path names for writing: a link's target, or the path itself.
std::string followed(const std::string& path) {
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr) throw std::runtime_error("cannot write " + path + ": a link to a file that cannot be reached");
    std::string target = real;
    std::free(real);
    return target;
  }
  return path;
}

}  // namespace

void remove_temporaries_on_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction act {};
    act.sa_handler = remove_temporaries_and_die;
    sigemptyset(&act.sa_mask);
    ::sigaction(sig, &act, nullptr);
  }
}

void check_writable(const std::string& path) {
  if (path.empty()) throw std::runtime_error("cannot write an empty file name");
  if (path == "-") return;  // standard output
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw std::runtime_error("cannot write " + path + ": it is a directory");
    if (::access(path.c_str(), W_OK) != 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    return;
  }
  // A plain file is replaced by a temporary made beside it: its folder must take files.
  const std::string target = followed(path);
  const std::size_t slash = target.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash);
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0) throw std::runtime_error("cannot write " + path + ": no folder " + dir);
  if (!S_ISDIR(ds.st_mode)) throw std::runtime_error("cannot write " + path + ": " + dir + " is not a folder");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw std::runtime_error("cannot write " + path + ": folder " + dir + ": " + std::strerror(errno));
  }
  // Permissions can say yes where the file system says no (/proc, a read-only mount as
  // root): make the temporary AtomicFile would make, and remove it.
  const std::optional<std::string> probe = make_temporary(target);
  if (!probe) {
    throw std::runtime_error("cannot write " + path + ": folder " + dir + " takes no new file (" + std::strerror(errno) + ")");
  }
  ::unlink(probe->c_str());
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  if (path_ == "-") {
    to_stdout_ = direct_ = true;
    return;
  }
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw std::runtime_error("cannot write " + path_ + ": it is a directory");
    direct_ = true;  // a FIFO, a terminal, a device: no file to replace
    out_.open(path_, std::ios::binary);
    if (!out_) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
    return;
  }
  // A link is followed to the file it names, which is what gets replaced.
  const std::string target = followed(path_);
  target_ = target;
  // A unique temporary beside the target (same file system, so rename is atomic); two
  // AtomicFiles for the same target never share one.
  const std::optional<std::string> temp = make_temporary(target);
  if (!temp) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  temp_ = *temp;
  slot_ = claim(temp_);
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    std::remove(temp_.c_str());
    release(slot_);
    throw std::runtime_error("cannot write " + path_ + ": cannot open a temporary file beside it");
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_ && !direct_) {
    out_.close();
    std::remove(temp_.c_str());
  }
  release(slot_);
}

void AtomicFile::commit() {
  if (to_stdout_) {
    std::cout << held_.str() << std::flush;
    if (!std::cout) throw std::runtime_error("cannot write - (standard output): write failed");
    committed_ = true;
    return;
  }
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
  release(slot_);
  slot_ = -1;
}

}  // namespace ddlsim
