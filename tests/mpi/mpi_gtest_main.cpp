// GoogleTest under MPI: every rank runs every test in the same order. Rank 0 prints the usual
// report; other ranks print only their failures, prefixed with their rank. When a test fails
// on a rank, that rank aborts the job (abort_job: "plait: error: rank R: test X failed") once
// the test has ended: its peers may be blocked waiting for messages it will never send, and
// an abort is the one way to end them promptly with a non-zero exit. After each passing test
// the ranks meet in a barrier, so messages of one test cannot be matched by the next.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "mpi_test_session.h"
#include "plait/comm/abort_job.h"

namespace plait::test {
namespace {

plait::comm::MpiSession* g_session = nullptr;

class RankFailureListener : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailureListener(int rank) : rank_(rank) {}

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (rank_ == 0 || !result.failed()) return;
    const std::string line = "rank " + std::to_string(rank_) + ": " +
                             (result.file_name() ? result.file_name() : "?") + ":" +
                             std::to_string(result.line_number()) + ": " + result.message() +
                             "\n";
    std::fputs(line.c_str(), stderr);
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    const std::string name = std::string(info.test_suite_name()) + "." + info.name();
    if (info.result()->Failed()) plait::comm::abort_job("test " + name + " failed");
    mpi_session().world().barrier();
  }

 private:
  int rank_;
};

}  // namespace

plait::comm::MpiSession& mpi_session() { return *g_session; }

}  // namespace plait::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  plait::comm::MpiSession session;
  plait::test::g_session = &session;
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (session.rank() != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new plait::test::RankFailureListener(session.rank()));
  return RUN_ALL_TESTS();
}
