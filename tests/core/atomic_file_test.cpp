// Files and directories plait writes inside its own trees (atomic_file.h, directory.h): a unique
// temporary name opened with O_EXCL | O_NOFOLLOW, a rename that replaces only when asked, links
// planted at any name refused or replaced without their targets ever being written, and no
// temporary file left behind by a failed write.
#include "plait/core/atomic_file.h"

#include <gtest/gtest.h>
#include <filesystem>
#include <string>

#include "plait/core/append_file.h"
#include "plait/core/directory.h"
#include "plait/core/json_fields.h"
#include "plait/core/error.h"
#include "support/file_size_limit.h"
#include "support/temp_dir.h"

namespace plait {
namespace {
namespace fs = std::filesystem;

class AtomicFileTest : public test::TempDirTest {
 protected:
  // Names in the test directory that AtomicFile made as temporaries.
  std::size_t temporaries() const {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += is_temporary_name(e.path().filename().string());
    return n;
  }
};

TEST_F(AtomicFileTest, TemporaryNamesAreUniqueAndRemovedWhenNotCommitted) {
  const Directory dir = Directory::open(dir_.string());
  {
    AtomicFile a(dir, "x"), b(dir, "x");
    EXPECT_NE(a.temporary_name(), b.temporary_name());
    EXPECT_TRUE(is_temporary_name(a.temporary_name())) << a.temporary_name();
    EXPECT_EQ(temporaries(), 2u);
    a.write("abc");
  }
  EXPECT_EQ(temporaries(), 0u);
  EXPECT_FALSE(fs::exists(path("x")));
  EXPECT_FALSE(is_temporary_name("x.tmp-12345"));
  EXPECT_FALSE(is_temporary_name("x.tmp-0123456789ABCDEF"));
}

TEST_F(AtomicFileTest, ALinkAtTheTargetIsReplacedItsTargetNeverWritten) {
  put(path("victim"), "precious");
  fs::create_symlink(path("victim"), path("out.json"));
  write_file_atomically(path("out.json"), "new");
  EXPECT_FALSE(fs::is_symlink(path("out.json")));
  EXPECT_EQ(bytes_of(path("out.json")), "new");
  EXPECT_EQ(bytes_of(path("victim")), "precious");
}

TEST_F(AtomicFileTest, AnAppendedLogRefusesALinkAndJsonOutputsReplaceOne) {
  put(path("victim"), "precious");
  fs::create_symlink(path("victim"), path("metrics.jsonl"));
  try {
    AppendFile log(path("metrics.jsonl"));
    FAIL() << "opened through the link";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path("metrics.jsonl") +
                                         ": (file): is a symbolic link; plait does not write through links (give the file itself)");
  }
  fs::remove(path("metrics.jsonl"));
  {
    AppendFile log(path("metrics.jsonl"));
    log.write("{\"step\": 0}\n");
  }
  AppendFile(path("metrics.jsonl")).write("{\"step\": 1}\n");
  EXPECT_EQ(bytes_of(path("metrics.jsonl")), "{\"step\": 0}\n{\"step\": 1}\n");
  fs::create_symlink(path("victim"), path("plan.json"));
  write_json_file(path("plan.json"), nlohmann::json{{"a", 1}});
  EXPECT_FALSE(fs::is_symlink(path("plan.json")));
  EXPECT_EQ(bytes_of(path("victim")), "precious");
}

TEST_F(AtomicFileTest, NeverReplacingKeepsWhatIsThereAndLeavesNoTemporary) {
  const Directory dir = Directory::open(dir_.string());
  put(path("shard.bin"), "another run's");
  AtomicFile f(dir, "shard.bin", AtomicFile::Replace::kNever);
  f.write("ours");
  try {
    f.commit();
    FAIL() << "replaced";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path("shard.bin") + ": already exists; refusing to replace it (another run may have written it)");
  }
  EXPECT_EQ(bytes_of(path("shard.bin")), "another run's");
  EXPECT_EQ(temporaries(), 0u);
  // Nor a link at that name, nor its target.
  put(path("victim"), "precious");
  fs::create_symlink(path("victim"), path("link.bin"));
  EXPECT_THROW(write_file_atomically(dir, "link.bin", "ours", AtomicFile::Replace::kNever), Error);
  EXPECT_TRUE(fs::is_symlink(path("link.bin")));
  EXPECT_EQ(bytes_of(path("victim")), "precious");
}

TEST_F(AtomicFileTest, AFailingWriteLeavesNoTemporaryFile) {
  const std::string error = test::error_under_file_size_limit(4096, [&] {
    AtomicFile f(Directory::open(dir_.string()), "big");
    f.write(std::string(1 << 16, 'x'));
    f.commit();
  });
  EXPECT_NE(error.find("cannot write: File too large"), std::string::npos) << error;
  EXPECT_EQ(temporaries(), 0u);
  EXPECT_FALSE(fs::exists(path("big")));
}

TEST_F(AtomicFileTest, PlaitsOwnDirectoriesNeverFollowALink) {
  fs::create_directories(path("elsewhere"));
  put(path("elsewhere/keep"), "precious");
  fs::create_symlink(path("elsewhere"), path("step_00000002"));
  const Directory dir = Directory::open(dir_.string());
  try {
    dir.child("step_00000002");
    FAIL() << "followed the link";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path("step_00000002") +
                                         ": is a symbolic link; plait never follows links inside its own directories (remove it)");
  }
  EXPECT_THROW(dir.make_child("step_00000002"), Error);
  EXPECT_EQ(dir.kind_of("step_00000002"), Directory::Kind::kLink);
  EXPECT_THROW(dir.read_file("step_00000002", 100), InputError);
  // Removing a tree removes a link inside it, never what it points at.
  fs::create_directories(path("tree/sub"));
  fs::create_directory_symlink(path("elsewhere"), path("tree/sub/link"));
  dir.remove_tree("tree");
  EXPECT_FALSE(fs::exists(path("tree")));
  EXPECT_EQ(bytes_of(path("elsewhere/keep")), "precious");
  dir.remove_tree("step_00000002");
  EXPECT_FALSE(fs::is_symlink(path("step_00000002")));
  EXPECT_EQ(bytes_of(path("elsewhere/keep")), "precious");
}

}  // namespace
}  // namespace plait
