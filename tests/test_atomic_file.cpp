#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <csignal>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "support/atomic_file.hpp"

using namespace ddlsim;
namespace fs = std::filesystem;

namespace {
std::string read(const fs::path& p) {
  std::stringstream ss;
  ss << std::ifstream(p).rdbuf();
  return ss.str();
}
std::size_t entries(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), {}));
}
struct Dir {
  fs::path path = fs::temp_directory_path() / ("ddlsim_atomic_" + std::to_string(::getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() { fs::remove_all(path); }
};
}  // namespace

TEST_CASE("an atomic file appears only on commit, whole") {
  // Expected: before commit the target does not exist (only a temporary does); after
  // commit the target holds exactly what was written and no temporary remains.
  Dir d;
  const fs::path target = d.path / "out.txt";
  {
    AtomicFile f(target.string());
    f.stream() << "hello";
    CHECK_FALSE(fs::exists(target));
    CHECK(entries(d.path) == 1);
    f.commit();
  }
  CHECK(read(target) == "hello");
  CHECK(entries(d.path) == 1);
}

TEST_CASE("an atomic file abandoned by an exception leaves nothing, and keeps the old target") {
  // Expected: an exception between opening and commit leaves the folder as it was: no
  // temporary, and an existing target with its old content.
  Dir d;
  const fs::path target = d.path / "out.txt";
  std::ofstream(target) << "old";
  try {
    AtomicFile f(target.string());
    f.stream() << "partial new content";
    throw std::runtime_error("failure half-way");
  } catch (const std::runtime_error&) {
  }
  CHECK(read(target) == "old");
  CHECK(entries(d.path) == 1);
}

TEST_CASE("two atomic files for one target do not share a temporary") {
  // Expected: the second commit wins whole; the first commit's content is not mixed in.
  Dir d;
  const fs::path target = d.path / "same.txt";
  AtomicFile a(target.string());
  AtomicFile b(target.string());
  a.stream() << "aaaaaaaaaaaaaaaa";
  b.stream() << "bb";
  a.commit();
  b.commit();
  CHECK(read(target) == "bb");
  CHECK(entries(d.path) == 1);
}

TEST_CASE("an atomic file in a folder that does not exist fails with the path") {
  CHECK_THROWS_WITH_AS(AtomicFile("/nonexistent-dir/x.json"), doctest::Contains("cannot write /nonexistent-dir/x.json"),
                       std::runtime_error);
}

TEST_CASE("an atomic file follows a link, writes a FIFO in place and refuses a directory") {
  // Expected: through a symbolic link the file it names gets the content and the link
  // stays a link; a FIFO (as /dev/stdout may be) is written as a stream and stays a
  // FIFO; a directory or a link to nowhere is refused before anything is written.
  Dir d;
  const fs::path real = d.path / "real.csv", link = d.path / "link.csv";
  std::ofstream(real) << "old";
  fs::create_symlink("real.csv", link);
  {
    AtomicFile f(link.string());
    f.stream() << "new";
    f.commit();
  }
  CHECK(fs::is_symlink(link));
  CHECK(read(real) == "new");
  CHECK(entries(d.path) == 2);
  const fs::path fifo = d.path / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  {
    // A reader on the other end first, so that opening for writing does not block.
    std::ifstream reader;
    std::thread t([&] {
      reader.open(fifo);
      std::stringstream ss;
      ss << reader.rdbuf();
      got = ss.str();
    });
    {
      AtomicFile f(fifo.string());
      f.stream() << "streamed";
      f.commit();
    }
    t.join();
  }
  CHECK(got == "streamed");
  CHECK(fs::is_fifo(fifo));
  CHECK_THROWS_WITH_AS(AtomicFile((d.path / "..").string() + "/" + d.path.filename().string()),
                       doctest::Contains("it is a directory"), std::runtime_error);
  fs::create_symlink("nowhere/x.csv", d.path / "dangling.csv");
  CHECK_THROWS_WITH_AS(AtomicFile((d.path / "dangling.csv").string()), doctest::Contains("a link to a file that cannot be reached"),
                       std::runtime_error);
}

TEST_CASE("check_writable refuses before any work what an atomic file would refuse") {
  // Expected: a missing folder, a path through a plain file, a directory and a dangling
  // link are refused naming the path; a new file in an existing folder, an existing file
  // and a link to one pass, and nothing is left by the check (it makes and removes the
  // temporary an AtomicFile would make).
  Dir d;
  CHECK_NOTHROW(check_writable((d.path / "new.csv").string()));
  std::ofstream(d.path / "old.csv") << "x";
  CHECK_NOTHROW(check_writable((d.path / "old.csv").string()));
  fs::create_symlink("old.csv", d.path / "link.csv");
  CHECK_NOTHROW(check_writable((d.path / "link.csv").string()));
  CHECK(entries(d.path) == 2);
  const std::string missing = (d.path / "no" / "x.csv").string();
  CHECK_THROWS_WITH_AS(check_writable(missing), ("cannot write " + missing + ": no folder " + (d.path / "no").string()).c_str(),
                       std::runtime_error);
  const std::string through = (d.path / "old.csv" / "x.csv").string();
  CHECK_THROWS_WITH_AS(check_writable(through), doctest::Contains("old.csv is not a folder"), std::runtime_error);
  CHECK_THROWS_WITH_AS(check_writable(d.path.string()), doctest::Contains("it is a directory"), std::runtime_error);
  fs::create_symlink("nowhere/x.csv", d.path / "dangling.csv");
  CHECK_THROWS_WITH_AS(check_writable((d.path / "dangling.csv").string()),
                       doctest::Contains("a link to a file that cannot be reached"), std::runtime_error);
  CHECK(entries(d.path) == 3);  // old.csv and the two links: the probe's temporaries removed
  // A folder whose permissions allow writing but whose file system takes no new file
  // (/proc on Linux, even as root): refused by the check, as AtomicFile would fail later.
  if (fs::is_directory("/proc/self")) {
    CHECK_THROWS_WITH_AS(check_writable("/proc/x.csv"), "cannot write /proc/x.csv: folder /proc takes no new file (No such file or directory)",
                         std::runtime_error);
  }
}

TEST_CASE("a signal that ends the program removes the temporaries of uncommitted files") {
  // Expected: a child process that opens two atomic files, writes to them and is then
  // sent SIGTERM dies by SIGTERM (the handler re-raises it) and leaves the folder as it
  // was: no temporary, the old target untouched. A committed file stays.
  Dir d;
  std::ofstream(d.path / "kept.csv") << "old";
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    remove_temporaries_on_signals();  // as ddlsim's main does (replacing the test runner's handler)
    AtomicFile done((d.path / "done.csv").string());
    done.stream() << "whole";
    done.commit();
    AtomicFile a((d.path / "kept.csv").string()), b((d.path / "new.csv").string());
    a.stream() << "partial";
    b.stream() << "partial";
    ::kill(::getpid(), SIGTERM);
    ::_exit(0);  // not reached
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(read(d.path / "kept.csv") == "old");
  CHECK(read(d.path / "done.csv") == "whole");
  CHECK(entries(d.path) == 2);
}

TEST_CASE("the path - is standard output, written whole on commit and not at all without it") {
  // Expected: nothing reaches standard output before commit() nor from a file abandoned
  // uncommitted; commit() writes the content once; no file named "-" is made.
  Dir d;
  const fs::path old_cwd = fs::current_path();
  fs::current_path(d.path);
  std::ostringstream captured;
  std::streambuf* const saved = std::cout.rdbuf(captured.rdbuf());
  {
    AtomicFile dropped("-");
    dropped.stream() << "lost";
  }
  AtomicFile f("-");
  f.stream() << "{\"a\": 1}\n";
  const std::string before = captured.str();
  f.commit();
  std::cout.rdbuf(saved);
  fs::current_path(old_cwd);
  CHECK(before.empty());
  CHECK(captured.str() == "{\"a\": 1}\n");
  CHECK_NOTHROW(check_writable("-"));
  CHECK(entries(d.path) == 0);
}
