// An output file that appears whole or not at all: the content is written to a
// temporary file beside the target and renamed over it by commit(). If commit() is never
// reached (an error, an exception), the temporary file is removed and the target is left
// as it was. A symbolic link is followed: the file it names is replaced, the link kept.
// A target that is not a plain file (a FIFO, a terminal, /dev/stdout) is written
// directly, as a stream (it cannot be replaced whole); a directory is refused. The path
// "-" is standard output: the content is held and written there by commit(), so it
// too appears whole or not at all.
// A program that calls remove_temporaries_on_signals() leaves no temporary behind when
// SIGINT, SIGTERM or SIGHUP ends it either.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace ddlsim {

/// Throws std::runtime_error ("cannot write PATH: ...") when an AtomicFile for `path`
/// would fail to open: a directory, a missing or read-only folder, a dangling link, a
/// folder whose file system takes no new file (it makes and removes the temporary an
/// AtomicFile would make). Commands call it before their work, so a bad output path
/// costs no simulation.
void check_writable(const std::string& path);

/// Sets SIGINT, SIGTERM and SIGHUP to remove the temporaries of the atomic files alive
/// (not yet committed) and then end the process as the signal would by default.
void remove_temporaries_on_signals();

class AtomicFile {
 public:
  /// Opens the temporary file; throws std::runtime_error naming the path if it cannot.
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return to_stdout_ ? static_cast<std::ostream&>(held_) : out_; }
  /// Flushes, closes and renames into place; throws std::runtime_error on failure.
  void commit();

 private:
  std::string path_;    // as given, for messages
  std::string target_;  // the file replaced: path_, or what a link at path_ names
  std::string temp_;
  std::ofstream out_;
  bool committed_ = false;
  bool direct_ = false;  // the target is not a plain file: written in place
  bool to_stdout_ = false;   // "-": held in held_ until commit() writes it to std::cout
  std::ostringstream held_;
  int slot_ = -1;        // where the signal handler finds temp_ (-1: nowhere)
};

}  // namespace ddlsim
