#include "plait/core/json_fields.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

namespace plait {
namespace {

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonFields, ReadsTypedFieldsWithDefaults) {
  auto j = nlohmann::json::parse(R"({"a": 3, "b": 0.5, "c": "x", "d": {"e": [1, 2]}})");
  JsonFields f(j, "cfg.json");
  EXPECT_EQ(f.integer("a"), 3);
  EXPECT_DOUBLE_EQ(f.number("b"), 0.5);
  EXPECT_EQ(f.string("c"), "x");
  EXPECT_EQ(f.integer("missing", 7), 7);
  auto d = f.object("d");
  EXPECT_EQ(d.integers("e"), (std::vector<std::int64_t>{1, 2}));
  d.check_no_unknown_fields();
  f.check_no_unknown_fields();
}

TEST(JsonFields, ErrorsNameFileAndDottedField) {
  auto j = nlohmann::json::parse(R"({"model": {"layers": "four", "hiden": 8}})");
  JsonFields f(j, "cfg.json");
  auto m = f.object("model");
  EXPECT_EQ(error_of([&] { m.integer("layers"); }),
            "cfg.json: model.layers: expected an integer, found string \"four\"");
  EXPECT_EQ(error_of([&] { m.integer("heads"); }), "cfg.json: model.heads: missing; expected an integer");
  EXPECT_EQ(error_of([&] { m.check_no_unknown_fields(); }), "cfg.json: model.hiden: unknown field");
}

TEST(JsonFields, RangeChecks) {
  auto j = nlohmann::json::parse(R"({"n": 0})");
  JsonFields f(j, "x.json");
  EXPECT_EQ(error_of([&] { f.integer_in("n", 1, 10); }),
            "x.json: n: expected an integer in [1, 10], found 0");
}

TEST(ReadJsonFile, MissingAndMalformedFilesAreInputErrors) {
  EXPECT_EQ(error_of([] { read_json_file("/nonexistent/plait.json"); }),
            "/nonexistent/plait.json: (file): cannot open the file");
  const std::string path = ::testing::TempDir() + "bad.json";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("{\"a\": ", f);
  std::fclose(f);
  EXPECT_NE(error_of([&] { read_json_file(path); }).find("malformed JSON at byte"), std::string::npos);
}

TEST(WriteJsonFile, WritesWhatReadJsonFileReadsBackAndNamesAFileItCannotOpen) {
  const std::string path = ::testing::TempDir() + "plait_write_json_file.json";
  const nlohmann::json doc = {{"a", 1}, {"b", {{"c", "x"}}}};
  write_json_file(path, doc, 1);
  EXPECT_EQ(read_json_file(path), doc);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, doc.dump(1) + "\n");
  EXPECT_EQ(error_of([&] { write_json_file("/nonexistent/plait.json", doc); }),
            "/nonexistent/plait.json: (file): cannot write the file: its directory /nonexistent does not exist or is "
            "not a directory");
}

}  // namespace
}  // namespace plait

namespace plait {
namespace {

TEST(ParseJsonText, NumbersBeyondADoubleNameTheFieldWithoutTheLibrarysMessage) {
  // Found by fuzzing: nlohmann throws out_of_range (not parse_error) for such numbers, with a
  // message of its own ("[json.exception.out_of_range.406] ...") that must not reach the user.
  EXPECT_EQ(error_of([] { parse_json_text("{\"a\": 1e999}", "x.json"); }),
            "x.json: a: 1e999 is beyond the range of a double (about 1.8e308 in magnitude)");
  EXPECT_EQ(error_of([] { parse_json_text(R"({"train": {"steps": 2, "lr": -1e400}})", "cfg.json"); }),
            "cfg.json: train.lr: -1e400 is beyond the range of a double (about 1.8e308 in magnitude)");
  EXPECT_EQ(error_of([] { parse_json_text(R"({"l": [1, 2, 1e400]})", "cfg.json"); }),
            "cfg.json: l[2]: 1e400 is beyond the range of a double (about 1.8e308 in magnitude)");
}

TEST(ParseJsonText, ADuplicateKeyIsAnErrorNamingItsPath) {
  // nlohmann keeps the last of two equal keys; a strict reader must not pick one silently.
  EXPECT_EQ(error_of([] { parse_json_text(R"({"train": {"lr": 1, "lr": 2}})", "cfg.json"); }),
            "cfg.json: train.lr: the key \"lr\" appears twice in one object (reading is strict: which "
            "one is meant?)");
  EXPECT_EQ(error_of([] { parse_json_text(R"({"a": 1, "b": [{"x": 1}, {"x": 2, "x": 3}]})", "p.json"); }),
            "p.json: b[1].x: the key \"x\" appears twice in one object (reading is strict: which one "
            "is meant?)");
  EXPECT_EQ(error_of([] { parse_json_text(R"({"a": 1, "a": 1})", "p.json"); }),
            "p.json: a: the key \"a\" appears twice in one object (reading is strict: which one is meant?)");
  // Equal keys in different objects are fine.
  const nlohmann::json ok = parse_json_text(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 3}, {"x": 4}]})", "p.json");
  EXPECT_EQ(ok["c"][1]["x"], 4);
}

TEST(ReadJsonFile, ADirectoryIsNamedAsSuch) {
  EXPECT_EQ(error_of([] { read_json_file(::testing::TempDir()); }),
            ::testing::TempDir() + ": (file): is a directory; expected a JSON file");
}

}  // namespace
}  // namespace plait
