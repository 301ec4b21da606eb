// The document-length histogram plait data prepare writes beside the shards, read back for
// --documents histogram:PATH (data/document_length_file.h, data/document_distribution.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "plait/core/error.h"
#include "plait/data/document_distribution.h"
#include "plait/data/document_length_file.h"
#include "support/temp_dir.h"

namespace plait::data {
namespace {
namespace fs = std::filesystem;

std::string error_of(const std::string& path) {
  try {
    read_document_lengths(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Exact below 128 tokens, then 64 bins per octave, each at most 1/64 of its smallest length wide.
TEST(DocumentLengthFile, BinsAreExactThenSixtyFourPerOctave) {
  EXPECT_EQ(length_bin(1), (LengthBin{1, 1, 0, 0}));
  EXPECT_EQ(length_bin(127), (LengthBin{127, 127, 0, 0}));
  EXPECT_EQ(length_bin(128), (LengthBin{128, 129, 0, 0}));
  EXPECT_EQ(length_bin(129), (LengthBin{128, 129, 0, 0}));
  EXPECT_EQ(length_bin(69340), (LengthBin{68608, 69631, 0, 0}));
  for (std::int64_t n : {200, 4095, 4096, 100000, 1 << 30}) {
    const LengthBin b = length_bin(n);
    EXPECT_LE(b.lo, n);
    EXPECT_GE(b.hi, n);
    EXPECT_LE(static_cast<double>(b.hi - b.lo + 1), b.lo / 64.0) << n;
  }
}

// What is written reads back; the distribution drawn from it keeps the corpus's lengths.
TEST(DocumentLengthFile, RoundTripsAndDrawsTheCorpusLengths) {
  DocumentLengths lengths;
  for (std::int64_t n : {5, 5, 100, 300, 301, 5000, 69340}) lengths.add(n);
  const std::string text = document_lengths_text(lengths, "train");
  const fs::path dir = test::test_file("corpus");
  fs::create_directories(dir);
  std::ofstream(dir / document_lengths_file_name("corpus")) << text;
  const LengthHistogram h = read_document_lengths(dir.string());  // the directory's one file
  EXPECT_EQ(h.file, (dir / "corpus.lengths.json").string());
  EXPECT_EQ(h.documents, 7);
  EXPECT_EQ(h.tokens, 5 + 5 + 100 + 300 + 301 + 5000 + 69340);
  EXPECT_EQ(h.longest, 69340);
  ASSERT_EQ(h.bins.size(), 5u);  // 300 and 301 share a bin of 4
  EXPECT_EQ(h.bins[0], (LengthBin{5, 5, 2, 10}));
  EXPECT_EQ(h.bins[2], (LengthBin{300, 303, 2, 601}));
  EXPECT_EQ(h.bins[4], (LengthBin{68608, 69631, 1, 69340}));

  const DocumentDistribution d = parse_document_distribution("histogram:" + dir.string(), "--documents");
  ASSERT_TRUE(d.histogram);
  EXPECT_NE(d.text().find("histogram " + h.file + " (7 documents"), std::string::npos) << d.text();
  const std::vector<std::int64_t> starts = distribution_starts(d, 10'000'000);
  std::int64_t fives = 0, longest = 0;
  for (std::size_t i = 0; i + 1 < starts.size(); ++i) {
    const std::int64_t n = starts[i + 1] - starts[i];
    const LengthBin b = length_bin(n);
    EXPECT_TRUE(std::any_of(h.bins.begin(), h.bins.end(), [&](const LengthBin& x) { return x.lo == b.lo; })) << n;
    fives += n == 5;
    longest = std::max(longest, n);
  }
  // 2 of 7 documents are 5 tokens long.
  const double share = static_cast<double>(fives) / static_cast<double>(starts.size() - 1);
  EXPECT_NEAR(share, 2.0 / 7, 0.03);
  EXPECT_LE(longest, 69631);
  EXPECT_GE(longest, 68608);
}

// Every bad file is one error naming it and the field.
TEST(DocumentLengthFile, BadFilesAreErrorsNamingTheFile) {
  const std::string good = R"({"format": "plait-document-lengths", "version": 1, "split": "train",
    "documents": 3, "tokens": 605, "longest": 300, "bins": [[5, 5, 1, 5], [300, 303, 2, 600]]})";
  auto write = [](const std::string& name, const std::string& text) {
    const std::string path = test::test_file(name);
    std::ofstream(path) << text;
    return path;
  };
  const std::string ok = write("ok.lengths.json", good);
  EXPECT_EQ(error_of(ok), "");
  const std::string missing = test::test_file("missing.lengths.json");
  EXPECT_NE(error_of(missing).find(missing), std::string::npos) << error_of(missing);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    t.replace(t.find(from), from.size(), to);
    return write("bad.lengths.json", t);
  };
  const std::string path = test::test_file("bad.lengths.json");
  EXPECT_EQ(error_of(with("\"plait-document-lengths\"", "\"x\"")),
            path + ": format: expected \"plait-document-lengths\", found \"x\"");
  EXPECT_EQ(error_of(with("\"documents\": 3", "\"documents\": 4")), path + ": documents: 4, but the bins hold 3");
  EXPECT_EQ(error_of(with("\"tokens\": 605", "\"tokens\": 606")), path + ": tokens: 606, but the bins hold 605");
  EXPECT_EQ(error_of(with("[300, 303, 2, 600]", "[300, 304, 2, 600]")),
            path + ": bins[1]: lengths 300 .. 304 are not one bin (the bin of 300 is 300 .. 303)");
  EXPECT_EQ(error_of(with("[300, 303, 2, 600]", "[300, 303, 2, 500]")),
            path + ": bins[1]: 2 documents of 300 .. 303 tokens cannot hold 500 tokens");
  EXPECT_EQ(error_of(with("[[5, 5, 1, 5], [300, 303, 2, 600]]", "[[300, 303, 2, 600], [5, 5, 1, 5]]")),
            path + ": bins[1]: bins must be in increasing order of length");
  EXPECT_EQ(error_of(with("[5, 5, 1, 5]", "[5, 5, 0, 5]")),
            path + ": bins[0]: expected [lo, hi, count, tokens], four integers >= 1, found [5,5,0,5]");
  EXPECT_EQ(error_of(with("\"longest\": 300", "\"longest\": 299")),
            path + ": longest: 299 is not in the last bin (300 .. 303)");
  EXPECT_NE(error_of(with("\"split\": \"train\"", "\"split\": \"train\", \"x\": 1")).find(path), std::string::npos);
  // A directory must hold exactly one.
  const fs::path none = test::test_file("empty-dir");
  fs::create_directories(none);
  EXPECT_NE(error_of(none.string()).find(none.string() + ": (directory): holds no *.lengths.json"), std::string::npos);
  // The flag names itself and the file.
  try {
    parse_document_distribution("histogram:" + missing, "--documents");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--documents: " + missing, 0), 0u) << e.what();
  }
  EXPECT_THROW(parse_document_distribution("histogram:", "--documents"), Error);
  EXPECT_THROW(parse_document_distribution("uniform:3", "--documents"), Error);
}

}  // namespace
}  // namespace plait::data
