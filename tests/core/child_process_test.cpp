// ChildProcess (child_process.h): a child's stdout and stderr arrive line by line, each on its
// stream, a last line without a newline included; its exit status comes back as a shell reports
// it (128 + N for signal N); a program that does not exist is an error naming it.
#include "plait/core/child_process.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plait/core/error.h"

namespace plait {
namespace {

TEST(ChildProcess, LinesArriveOnTheirStreamsAndTheStatusComesBack) {
  std::vector<std::string> out, err;
  int ticks = 0;
  ChildProcess child({"sh", "-c", "echo one; echo two >&2; sleep 0.25; printf 'three'; exit 7"});
  const int status = child.run(
      [&](ChildProcess::Stream s, const std::string& line) {
        (s == ChildProcess::Stream::kStdout ? out : err).push_back(line);
      },
      [&] { ++ticks; });
  EXPECT_EQ(status, 7);
  EXPECT_EQ(out, (std::vector<std::string>{"one", "three"}));
  EXPECT_EQ(err, (std::vector<std::string>{"two"}));
  EXPECT_GE(ticks, 2);  // at least every 100 ms while it slept
}

TEST(ChildProcess, ASignalledChildReportsItAsAShellDoes) {
  ChildProcess child({"sh", "-c", "kill -9 $$"});
  EXPECT_EQ(child.run([](ChildProcess::Stream, const std::string&) {}), 128 + 9);
}

TEST(ChildProcess, AMissingProgramIsAnErrorNamingIt) {
  try {
    ChildProcess child({"/nonexistent/plait-no-such-program"});
    FAIL() << "started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot start /nonexistent/plait-no-such-program"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace plait
