// One run per output directory (directory_lock.h): a second lock of the directory is refused at
// once naming the holder; a lock whose holder was killed is free; a link at the lock file's name
// is refused without touching its target; the holder line parses strictly; a supervisor's wait for
// the lock takes it once its live holder ends, and gives up after its timeout naming the holder.
#include "plait/core/directory_lock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>

#include "plait/core/unique_name.h"
#include "support/temp_dir.h"

namespace plait {
namespace {
namespace fs = std::filesystem;

class DirectoryLockTest : public test::TempDirTest {};

// A child process that takes the lock of `dir`, says so through a pipe, then waits to be killed.
pid_t child_holding(const std::string& dir) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    try {
      const DirectoryLock lock(Directory::open(dir), "a test directory");
      const char ok = 1;
      if (::write(ready[1], &ok, 1) != 1) ::_exit(2);
      for (;;) ::pause();
    } catch (...) {
      ::_exit(1);
    }
  }
  ::close(ready[1]);
  char ok = 0;
  const bool got = ::read(ready[0], &ok, 1) == 1;
  ::close(ready[0]);
  return got ? pid : -1;
}

TEST_F(DirectoryLockTest, ASecondHolderIsRefusedAtOnceNamingTheFirst) {
  const Directory dir = Directory::open(dir_.string());
  {
    const DirectoryLock first(dir, "a test directory");
    EXPECT_EQ(first.warning(), "");
    const std::string text = bytes_of(path(DirectoryLock::kFileName));
    const auto holder = parse_lock_holder(text);
    ASSERT_TRUE(holder) << text;
    EXPECT_EQ(holder->pid, ::getpid());
    EXPECT_EQ(holder->host, host_name());
    // Another open of the file is another lock, even in this process (flock is per open file).
    try {
      const DirectoryLock second(dir, "a test directory");
      FAIL() << "locked twice";
    } catch (const DirectoryInUseError& e) {
      EXPECT_EQ(std::string(e.what()), dir_.string() + ": in use by another plait run (pid " + std::to_string(::getpid()) +
                                           " on host " + host_name() +
                                           "); a test directory is written by one run at a time: wait for that run "
                                           "to end, or choose another directory");
    }
  }
  // Released with its holder; the file stays (it is never what decides).
  EXPECT_TRUE(fs::exists(path(DirectoryLock::kFileName)));
  EXPECT_NO_THROW(DirectoryLock(dir, "a test directory"));
}

TEST_F(DirectoryLockTest, AKilledHoldersLockNeverBlocksTheNextRun) {
  const pid_t child = child_holding(dir_.string());
  ASSERT_GT(child, 0);
  try {
    const DirectoryLock refused(Directory::open(dir_.string()), "a test directory");
    ADD_FAILURE() << "the live child's lock was taken";
  } catch (const DirectoryInUseError& e) {
    EXPECT_NE(std::string(e.what()).find("(pid " + std::to_string(child) + " on host "), std::string::npos) << e.what();
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  // Its lock file still names it, but the lock died with it.
  EXPECT_EQ(parse_lock_holder(bytes_of(path(DirectoryLock::kFileName)))->pid, child);
  const DirectoryLock next(Directory::open(dir_.string()), "a test directory");
  EXPECT_EQ(parse_lock_holder(bytes_of(path(DirectoryLock::kFileName)))->pid, ::getpid());
}

TEST_F(DirectoryLockTest, AWaitTakesTheLockOnceItsLiveHolderEnds) {
  const pid_t child = child_holding(dir_.string());
  ASSERT_GT(child, 0);
  std::string told;
  std::thread killer([child] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(child, SIGKILL);
  });
  const std::unique_ptr<DirectoryLock> lock =
      wait_for_directory_lock(Directory::open(dir_.string()), "a test directory", 30, [&](const std::string& why) { told = why; });
  killer.join();
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_NE(lock, nullptr);
  EXPECT_NE(told.find("(pid " + std::to_string(child) + " on host "), std::string::npos) << told;
  EXPECT_EQ(parse_lock_holder(bytes_of(path(DirectoryLock::kFileName)))->pid, ::getpid());
}

TEST_F(DirectoryLockTest, AWaitGivesUpAfterItsTimeoutNamingTheHolder) {
  const pid_t child = child_holding(dir_.string());
  ASSERT_GT(child, 0);
  try {
    wait_for_directory_lock(Directory::open(dir_.string()), "a test directory", 0.3);
    ADD_FAILURE() << "the live child's lock was taken";
  } catch (const DirectoryInUseError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("(pid " + std::to_string(child) + " on host "), std::string::npos) << what;
    EXPECT_NE(what.find("; waited 0."), std::string::npos) << what;
    EXPECT_NE(what.find(" s for it to be released"), std::string::npos) << what;
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
}

TEST_F(DirectoryLockTest, ALinkAtTheLockFilesNameIsRefusedAndItsTargetUntouched) {
  put(path("victim"), "precious");
  fs::create_symlink(path("victim"), path(DirectoryLock::kFileName));
  try {
    const DirectoryLock lock(Directory::open(dir_.string()), "a test directory");
    FAIL() << "followed the link";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(".plait.lock: cannot open the lock file: it is a symbolic link"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(bytes_of(path("victim")), "precious");
}

TEST(LockHolder, ParsesOnlyTheExactLine) {
  const auto h = parse_lock_holder("plait-lock host=node-17.cluster_a pid=4242\n");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->host, "node-17.cluster_a");
  EXPECT_EQ(h->pid, 4242);
  EXPECT_EQ(lock_holder_text(*h), "plait-lock host=node-17.cluster_a pid=4242\n");
  for (const char* bad : {"", "plait-lock host=a pid=1", "plait-lock host= pid=1\n", "plait-lock host=a pid=\n",
                          "plait-lock host=a pid=01\n", "plait-lock host=a pid=2147483648\n",
                          "plait-lock host=a b pid=1\n", "plait-lock host=a pid=1\nmore\n", "plait-lock host=\x1b[2J pid=1\n",
                          "plait-lock host=a pid=-1\n", "plait-lock host=a pid=1 pid=2\n"}) {
    EXPECT_FALSE(parse_lock_holder(bad)) << bad;
  }
  EXPECT_FALSE(parse_lock_holder("plait-lock host=" + std::string(256, 'a') + " pid=1\n"));
  EXPECT_TRUE(parse_lock_holder("plait-lock host=" + std::string(255, 'a') + " pid=2147483647\n"));
}

}  // namespace
}  // namespace plait
