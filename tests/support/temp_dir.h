#pragma once
// A fresh temporary directory per test, removed afterwards: named after the process and the
// running test, so that ctest can run tests (and test executables) side by side.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace plait::test {

// "Suite.Test" of the running test ("main" outside one), usable in a file name: parameterized
// tests are named "Prefix/Suite.Test/3", so '/' becomes '_'.
inline std::string current_test_name() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "main";
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

// A file under gtest's temporary directory named after the running test, "plait_<Suite.Test>_<name>"
// (so that ctest can run tests side by side); it outlives the test.
inline std::string test_file(const std::string& name) {
  return ::testing::TempDir() + "/plait_" + current_test_name() + "_" + name;
}

// test_file(name) holding `text`; its path.
inline std::string write_test_file(const std::string& name, const std::string& text) {
  const std::string path = test_file(name);
  std::ofstream(path) << text;
  return path;
}

// The whole content of a file ("" when it cannot be read).
inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("plait_" + std::to_string(::getpid()) + "_" + current_test_name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `name` inside the directory (it may name a subdirectory: "in/a.txt").
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string bytes_of(const std::string& file) { return file_bytes(file); }
  static void put(const std::string& file, const std::string& bytes) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  }

  std::filesystem::path dir_;
};

}  // namespace plait::test
