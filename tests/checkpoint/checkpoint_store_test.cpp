#include "plait/checkpoint/checkpoint_store.h"

#include "plait/checkpoint/checkpoint_scan.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <limits>
#include <thread>

#include "plait/core/error.h"
#include "support/temp_dir.h"

namespace plait::checkpoint {
namespace {
namespace fs = std::filesystem;

// A toy "model": 8 layers with a weight and an Adam moment each, every value derived from
// (step, layer, index) so any mix-up or stale byte shows.
struct Toy {
  static constexpr int kLayers = 8;
  std::int64_t step;
  std::size_t width;
  std::vector<std::vector<float>> weights, moments;
  Toy(std::int64_t s, std::size_t w) : step(s), width(w) {
    for (int l = 0; l < kLayers; ++l) {
      weights.emplace_back(w), moments.emplace_back(w);
      for (std::size_t i = 0; i < w; ++i) {
        weights[l][i] = value(l, i, 0);
        moments[l][i] = value(l, i, 1);
      }
    }
  }
  float value(int l, std::size_t i, int kind) const {
    return static_cast<float>(step) * 1000.0f + l * 10.0f + static_cast<float>(i % 97) * 0.5f + kind;
  }
  static std::string name(int l) { return "h." + std::to_string(l) + ".mlp.c_fc.weight"; }
  // One file per pipeline stage, layers split evenly over `stages`.
  std::vector<CheckpointFile> files(int stages) const {
    std::vector<CheckpointFile> out(stages);
    for (int s = 0; s < stages; ++s) out[s].name = "stage_" + std::to_string(s) + ".safetensors";
    for (int l = 0; l < kLayers; ++l) {
      auto& f = out[l * stages / kLayers];
      f.tensors.push_back({name(l), {static_cast<std::int64_t>(width)}, weights[l]});
      f.tensors.push_back({name(l) + ".adam_m", {static_cast<std::int64_t>(width)}, moments[l]});
    }
    return out;
  }
  CheckpointManifest manifest() const {
    CheckpointManifest m;
    m.step = step;
    m.config = {{"n_layer", kLayers}};
    m.data_position = {{"step", step}, {"sample", step * 16}};
    m.rng_state = {{"seed", 1234}, {"draws", step}};
    return m;
  }
  // Checks a checkpoint holds exactly this toy's tensors.
  void expect_in(const CheckpointReader& r) const {
    EXPECT_EQ(r.manifest().step, step);
    EXPECT_EQ(r.tensor_names().size(), 2u * kLayers);
    std::vector<float> buf(width);
    for (int l = 0; l < kLayers; ++l) {
      r.read(name(l), buf);
      ASSERT_EQ(buf, weights[l]) << name(l);
      r.read(name(l) + ".adam_m", buf);
      ASSERT_EQ(buf, moments[l]);
    }
  }
};

class CheckpointStore : public test::TempDirTest {
 protected:
  std::string root() const { return path("ckpt"); }
  std::string save(const Toy& t, int stages, int keep_last = 0) {
    const auto files = t.files(stages);
    return save_checkpoint(root(), t.manifest(), files, keep_last);
  }
};

TEST_F(CheckpointStore, RoundTripsAndLoadsIntoAnotherStageLayout) {
  EXPECT_EQ(latest_checkpoint(root()), std::nullopt);
  const Toy t(100, 300);
  const std::string dir = save(t, 4);  // written by a 4-stage pipeline
  EXPECT_EQ(fs::path(dir).filename(), "step_00000100");
  ASSERT_EQ(latest_checkpoint(root()), dir);
  CheckpointReader r(dir);
  t.expect_in(r);  // read by global name: a 2-stage (or any) layout asks for its own layers
  EXPECT_EQ(r.manifest().files.size(), 4u);
  EXPECT_EQ(r.manifest().data_position["sample"], 1600);
  EXPECT_EQ(r.manifest().rng_state["seed"], 1234);
  EXPECT_EQ(r.manifest().config["n_layer"], 8);
  EXPECT_EQ(r.shape("h.3.mlp.c_fc.weight"), (std::vector<std::int64_t>{300}));
  std::vector<float> buf(300);
  EXPECT_THROW(r.read("h.9.mlp.c_fc.weight", buf), InputError);
  // A 2-stage run saves the same state in 2 files; the tensors read back identically.
  const Toy t2(200, 300);
  t2.expect_in(CheckpointReader(save(t2, 2)));
  EXPECT_EQ(list_checkpoints(root()).size(), 2u);
}

TEST_F(CheckpointStore, KeepsOnlyTheNewestWhenAskedAndNeverOverwritesLatest) {
  for (int s = 1; s <= 4; ++s) save(Toy(s, 16), 2, 2);
  const auto all = list_checkpoints(root());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(fs::path(all[0]).filename(), "step_00000003");
  EXPECT_THROW(save(Toy(4, 16), 2), Error);
  Toy(4, 16).expect_in(CheckpointReader(*latest_checkpoint(root())));
}

// What a crash leaves behind must not matter: the last complete checkpoint stays loadable.
TEST_F(CheckpointStore, LeftoversOfACrashedSaveAreIgnoredAndCleanedUp) {
  const Toy good(10, 64);
  save(good, 2);
  // A save of step 20 that died after writing half a file and a temporary file.
  const std::string staging = begin_checkpoint(root(), 20, new_checkpoint_run());
  EXPECT_EQ(fs::path(staging).filename().string().substr(0, 22), "step_00000020.partial-");
  put(staging + "/stage_0.safetensors.tmp-0123456789abcdef", "partial");
  put(staging + "/stage_1.safetensors", "half a file");
  put(path("ckpt/latest.tmp-0123456789abcdef"), "step_000");
  good.expect_in(CheckpointReader(*latest_checkpoint(root())));
  // The next save (step 30) succeeds and touches nothing of the other run's; a run that holds
  // the root's lock (so no other live run writes here) removes what dead runs left.
  save(Toy(30, 64), 2);
  EXPECT_TRUE(fs::exists(staging));
  Toy(30, 64).expect_in(CheckpointReader(*latest_checkpoint(root())));
  const std::vector<std::string> removed = remove_abandoned_staging(root());
  EXPECT_EQ(removed, (std::vector<std::string>{"latest.tmp-0123456789abcdef", fs::path(staging).filename().string()}));
  EXPECT_FALSE(fs::exists(staging));
  EXPECT_FALSE(fs::exists(path("ckpt/latest.tmp-0123456789abcdef")));
  Toy(30, 64).expect_in(CheckpointReader(*latest_checkpoint(root())));
}

TEST_F(CheckpointStore, SigkillDuringSavesLeavesTheLastCompleteCheckpointLoadable) {
  // A child saves checkpoints of 8 x 2 x 256K floats (16 MiB each) in a loop; the parent kills
  // it with SIGKILL at varying moments and checks that `latest` always opens, verifies its
  // checksums, and holds one step's values throughout.
  const std::size_t width = 256 * 1024;
  for (int round = 0; round < 4; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (std::int64_t s = 1;; ++s) save(Toy(round * 1000 + s, width), 3);
    }
    // Wait for the first complete checkpoint of this round, then a little more.
    const std::string latest_file = path("ckpt/latest");
    for (int i = 0; i < 2000; ++i) {
      if (fs::exists(latest_file) &&
          CheckpointReader(*latest_checkpoint(root())).manifest().step > round * 1000) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(7 + 23 * round));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    const CheckpointReader r(*latest_checkpoint(root()));
    ASSERT_GT(r.manifest().step, round * 1000) << "round " << round;
    Toy(r.manifest().step, width).expect_in(r);
  }
}

TEST_F(CheckpointStore, CorruptedFilesAreRejectedWithPreciseErrors) {
  const std::string dir = save(Toy(5, 32), 2);
  const std::string f0 = dir + "/stage_0.safetensors";
  const std::string good = bytes_of(f0);
  const auto open_error = [&] {
    try {
      CheckpointReader r(dir);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::string flipped = good;
  flipped[good.size() - 3] ^= 0x01;
  put(f0, flipped);
  const std::string crc_error = open_error();
  EXPECT_EQ(crc_error.rfind(f0 + ": (checksum): the manifest's CRC-32C is 0x", 0), 0u) << crc_error;
  EXPECT_NE(crc_error.find("; the file is corrupted"), std::string::npos);
  put(f0, good.substr(0, good.size() - 4));
  EXPECT_EQ(open_error(), f0 + ": (size): the manifest says " + std::to_string(good.size()) +
                              " bytes, found " + std::to_string(good.size() - 4));
  put(f0, good);
  EXPECT_EQ(open_error(), "(no error)");

  const std::string manifest = bytes_of(dir + "/manifest.json");
  put(dir + "/manifest.json", manifest.substr(0, manifest.size() / 2));
  EXPECT_NE(open_error().find("manifest.json: (syntax): malformed JSON at byte"), std::string::npos);
  nlohmann::json m = nlohmann::json::parse(manifest);
  m["files"][0]["tensors"].erase(0);
  put(dir + "/manifest.json", m.dump());
  EXPECT_EQ(open_error(), f0 + ": (tensors): do not match the manifest's list: \"h.0.mlp.c_fc.weight\" is in the file but not listed");
  m = nlohmann::json::parse(manifest);
  m["files"][1]["path"] = "../stage_0.safetensors";
  put(dir + "/manifest.json", m.dump());
  EXPECT_EQ(open_error(), dir + "/manifest.json: files[1].path: expected a plain file name inside the checkpoint directory, found \"../stage_0.safetensors\"");
  put(dir + "/manifest.json", manifest);
  EXPECT_EQ(open_error(), "(no error)");

  put(root() + "/latest", "../../etc\n");
  try {
    latest_checkpoint(root());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), root() + "/latest: (contents): expected a checkpoint directory name like \"step_00000100\", found \"../../etc\"");
  }
}

// A save stopped between renaming step_N.partial/ to step_N/ and rewriting `latest` (a kill, or
// a full disk failing the write of latest's temporary file) leaves a complete step_N/ that
// `latest` does not name: the scan finds it, and point_latest repairs `latest`.
TEST_F(CheckpointStore, AnInterruptedCommitLeavesANewerCompleteCheckpointTheScanFinds) {
  save(Toy(2, 16), 2);
  const Toy newest(4, 16);
  const auto files = newest.files(2);
  const std::string run = new_checkpoint_run();
  const std::string staging = begin_checkpoint(root(), 4, run);
  CheckpointManifest m = newest.manifest();
  for (const auto& f : files) m.files.push_back(write_checkpoint_file(staging, f.name, f.tensors));
  EXPECT_THROW(commit_checkpoint(root(), m, run, 0, [] { throw Error("No space left on device"); }), Error);
  ASSERT_TRUE(fs::is_directory(path("ckpt/step_00000004")));
  EXPECT_EQ(fs::path(*latest_checkpoint(root())).filename(), "step_00000002");

  const CheckpointScan scan = scan_checkpoints(root());
  ASSERT_TRUE(scan.found);
  EXPECT_EQ(fs::path(*scan.found).filename(), "step_00000004");
  EXPECT_TRUE(scan.skipped.empty());
  EXPECT_EQ(fs::path(*scan.latest).filename(), "step_00000002");
  EXPECT_EQ(scan.complete, 2u);
  point_latest(root(), *scan.found);
  newest.expect_in(CheckpointReader(*latest_checkpoint(root())));
}

TEST_F(CheckpointStore, TheScanSkipsNewerCheckpointsThatDoNotVerifySayingWhy) {
  save(Toy(2, 16), 2);
  save(Toy(4, 16), 2);
  const std::string six = save(Toy(6, 16), 2);
  std::string bytes = bytes_of(six + "/stage_1.safetensors");
  bytes[bytes.size() - 2] ^= 0x40;
  put(six + "/stage_1.safetensors", bytes);
  // A caller's own check (the runtime's: finite values, AdamW moments) can refuse one too.
  const CheckpointScan scan = scan_checkpoints(root(), [](const std::string& dir) {
    const CheckpointReader r(dir);
    if (r.manifest().step == 4) throw InputError(dir, "tensor \"x\"", "element 0 is NaN");
  });
  ASSERT_TRUE(scan.found);
  EXPECT_EQ(fs::path(*scan.found).filename(), "step_00000002");
  ASSERT_EQ(scan.skipped.size(), 2u);
  EXPECT_EQ(fs::path(scan.skipped[0].dir).filename(), "step_00000006");
  EXPECT_NE(scan.skipped[0].why.find("stage_1.safetensors: (checksum)"), std::string::npos) << scan.skipped[0].why;
  EXPECT_EQ(scan.skipped[1].why, path("ckpt/step_00000004") + ": tensor \"x\": element 0 is NaN");
  // Nothing at all: a root that does not exist.
  const CheckpointScan none = scan_checkpoints(path("nowhere"));
  EXPECT_FALSE(none.found);
  EXPECT_EQ(none.complete, 0u);
}

TEST_F(CheckpointStore, SetAsideRenamesWithoutDeletingAndListingIgnoresIt) {
  const std::string four = save(Toy(4, 16), 2);
  const std::string before = bytes_of(four + "/stage_0.safetensors");
  const std::string aside = set_checkpoint_aside(four);
  EXPECT_EQ(fs::path(aside).filename(), "step_00000004.aside");
  EXPECT_EQ(bytes_of(aside + "/stage_0.safetensors"), before);
  EXPECT_TRUE(list_checkpoints(root()).empty());
  save(Toy(4, 16), 2);  // the step again, and aside again: a second name, nothing replaced
  EXPECT_EQ(fs::path(set_checkpoint_aside(path("ckpt/step_00000004"))).filename(), "step_00000004.aside.2");
  EXPECT_TRUE(fs::is_directory(aside));
  // keep_last never prunes what is aside.
  for (int s = 5; s <= 8; ++s) save(Toy(s, 16), 2, 1);
  EXPECT_EQ(list_checkpoints(root()).size(), 1u);
  EXPECT_TRUE(fs::is_directory(aside));
  EXPECT_TRUE(fs::is_directory(path("ckpt/step_00000004.aside.2")));
}

TEST_F(CheckpointStore, ReadingRefusesNonFiniteValuesAndAManifestOfAnotherStep) {
  Toy t(3, 16);
  t.weights[2][5] = std::numeric_limits<float>::quiet_NaN();
  t.moments[6][0] = -std::numeric_limits<float>::infinity();
  const std::string dir = save(t, 2);  // the store writes what it is given; the runtime checks
  const CheckpointReader r(dir);      // the CRCs are right
  std::vector<float> buf(16);
  try {
    r.read(Toy::name(2), buf);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), dir + "/stage_0.safetensors: tensor \"h.2.mlp.c_fc.weight\": element 5 is NaN; "
                                           "a checkpoint holds finite values only (the file is damaged, or the run "
                                           "that saved it had diverged)");
  }
  try {
    r.read(Toy::name(6) + ".adam_m", buf);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("element 0 is infinite"), std::string::npos) << e.what();
  }
  // A step directory whose manifest names another step (renamed or copied by hand).
  fs::rename(dir, path("ckpt/step_00000009"));
  try {
    CheckpointReader moved(path("ckpt/step_00000009"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path("ckpt/step_00000009") + "/manifest.json: step: the manifest is of step 3, "
                                           "but its directory step_00000009 is named for step 9");
  }
}

TEST_F(CheckpointStore, AManifestRecordsTheWorkingDirectoryOfItsRun) {
  CheckpointManifest m = Toy(1, 4).manifest();
  m.working_directory = "/home/me/run";
  const CheckpointManifest back = parse_manifest(manifest_to_text(m), "m.json");
  EXPECT_EQ(back.working_directory, "/home/me/run");
  EXPECT_EQ(parse_manifest(manifest_to_text(Toy(1, 4).manifest()), "m.json").working_directory, "");
  nlohmann::json j = nlohmann::json::parse(manifest_to_text(m));
  j["working_directory"] = "relative/dir";
  try {
    parse_manifest(j.dump(), "m.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "m.json: working_directory: expected an absolute directory, found \"relative/dir\"");
  }
}

// A symbolic link planted at any name plait writes inside a checkpoint root (a step directory,
// a staging directory, a tensor file, the manifest, `latest`) is refused or replaced as an
// entry: its target is never written, renamed or removed. Reading never follows one either.
TEST_F(CheckpointStore, PlantedLinksAreRefusedAndTheirTargetsNeverWritten) {
  save(Toy(1, 16), 2);
  fs::create_directories(path("elsewhere"));
  put(path("elsewhere/victim"), "precious");
  const auto intact = [&] {
    EXPECT_EQ(bytes_of(path("elsewhere/victim")), "precious");
    EXPECT_EQ(fs::directory_iterator(path("elsewhere"))->path().filename(), "victim");
    EXPECT_EQ(std::distance(fs::directory_iterator(path("elsewhere")), fs::directory_iterator()), 1);
  };
  const Toy t(2, 16);
  const auto files = t.files(2);
  CheckpointManifest m = t.manifest();
  // The staging directory swapped for a link after it was created: writers refuse it.
  const std::string run = new_checkpoint_run();
  std::string staging = begin_checkpoint(root(), 2, run);
  fs::remove_all(staging);
  fs::create_directory_symlink(path("elsewhere"), staging);
  EXPECT_THROW(write_checkpoint_file(staging, files[0].name, files[0].tensors), Error);
  EXPECT_THROW(commit_checkpoint(root(), m, run, 0), Error);
  intact();
  fs::remove(staging);
  // A link at a tensor file's name or the manifest's, inside the staging directory.
  staging = begin_checkpoint(root(), 2, run);
  fs::create_symlink(path("elsewhere/victim"), staging + "/" + files[0].name);
  EXPECT_THROW(write_checkpoint_file(staging, files[0].name, files[0].tensors), Error);
  fs::remove(staging + "/" + files[0].name);
  for (const auto& f : files) m.files.push_back(write_checkpoint_file(staging, f.name, f.tensors));
  // A link at the manifest's name is replaced as an entry; one at the step directory's name is
  // never replaced.
  fs::create_symlink(path("elsewhere/victim"), staging + "/manifest.json");
  fs::create_directory_symlink(path("elsewhere"), path("ckpt/step_00000002"));
  try {
    commit_checkpoint(root(), m, run, 0);
    FAIL() << "replaced the link";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path("ckpt/step_00000002") + ": already exists; refusing to replace it (another run may have written it)");
  }
  EXPECT_TRUE(fs::is_symlink(path("ckpt/step_00000002")));
  EXPECT_FALSE(fs::is_symlink(staging + "/manifest.json"));
  EXPECT_EQ(list_checkpoints(root()).size(), 1u);  // a link is no checkpoint
  intact();
  fs::remove(path("ckpt/step_00000002"));
  // `latest` as a link: replaced as an entry when written, refused when read.
  fs::remove(path("ckpt/latest"));
  fs::create_symlink(path("elsewhere/victim"), path("ckpt/latest"));
  EXPECT_THROW(latest_checkpoint(root()), InputError);
  commit_checkpoint(root(), m, run, 1);  // keep_last 1 prunes step 1 without following anything
  EXPECT_FALSE(fs::is_symlink(path("ckpt/latest")));
  t.expect_in(CheckpointReader(*latest_checkpoint(root())));
  intact();
  // A checkpoint's file swapped for a link is refused on reading, its target never read.
  const std::string two = *latest_checkpoint(root());
  fs::remove(two + "/stage_1.safetensors");
  fs::create_symlink(path("elsewhere/victim"), two + "/stage_1.safetensors");
  try {
    CheckpointReader r(two);
    FAIL() << "followed the link";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), two + "/stage_1.safetensors: (file): is a symbolic link; plait never follows links "
                                           "inside its own directories");
  }
  intact();
}

TEST_F(CheckpointStore, ACheckpointRootThatIsAFileIsNamed) {
  put(path("file"), "x");
  try {
    create_checkpoint_root(path("file"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path("file") + ": (checkpoint directory): is a file; checkpoints need a directory here");
  }
  EXPECT_THROW(save_checkpoint(path("file/sub"), Toy(1, 4).manifest(), Toy(1, 4).files(1)), InputError);
}

}  // namespace
}  // namespace plait::checkpoint
