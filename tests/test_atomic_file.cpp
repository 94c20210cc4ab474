#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
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
