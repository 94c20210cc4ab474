#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "engine_fixtures.hpp"
#include "sim/chrome_trace.hpp"

using namespace ddlsim;
using ddlsim::test::Rig;

TEST_CASE("the trace is valid Trace Event JSON with one track per resource") {
  // Expected: a compute task of 1 s and a transfer of 200 B on a 100 B/s channel become
  // complete events of 1e6 us and 2e6 us on tracks 0 and 1; the marker an instant event;
  // the allocation a counter sample of 64 bytes on pool "dev0.hbm".
  Rig r;
  const auto s = r.stream("dev0.compute");
  const auto ch = r.channel("dev0.link", 100);
  const auto c = r.g.add(Compute{s, Seconds(1), Flops(2e12)}, "fwd \"L0\"").id();
  const auto x = r.transfer(ch, 200, "send");
  const auto m = r.g.add(Marker{}, "done").id();
  const auto a = r.g.add(Allocate{PoolId(0), Bytes(64)}, "act").id();
  r.g.add_edge(c, m);
  r.g.add_edge(x, m);
  r.g.add_edge(m, a);
  std::ostringstream os;
  ChromeTrace trace(os, {"dev0.hbm"});
  r.run({&trace});

  const auto doc = nlohmann::json::parse(os.str());
  const auto& events = doc.at("traceEvents");
  int complete = 0, instant = 0, counter = 0;
  bool named_compute = false;
  for (const auto& e : events) {
    const std::string ph = e.at("ph");
    if (ph == "M" && e.at("name") == "thread_name" && e.at("tid") == 0) {
      named_compute = e.at("args").at("name") == "dev0.compute";
    }
    if (ph == "X") {
      ++complete;
      if (e.at("name") == "fwd \"L0\"") {
        CHECK(e.at("tid") == 0);
        CHECK(e.at("dur").get<double>() == 1e6);
        CHECK(e.at("args").at("flops").get<double>() == 2e12);
      } else {
        CHECK(e.at("name") == "send");
        CHECK(e.at("tid") == 1);
        CHECK(e.at("dur").get<double>() == 2e6);
        CHECK(e.at("args").at("bytes").get<double>() == 200);
      }
    }
    if (ph == "i") {
      ++instant;
      CHECK(e.at("ts").get<double>() == 2e6);
    }
    if (ph == "C") {
      ++counter;
      CHECK(e.at("name") == "dev0.hbm memory");
      CHECK(e.at("args").at("bytes").get<double>() == 64);
    }
  }
  CHECK(named_compute);
  CHECK(complete == 2);
  CHECK(instant == 1);
  CHECK(counter == 1);
}
