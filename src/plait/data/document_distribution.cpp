#include "plait/data/document_distribution.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "plait/core/error.h"

namespace plait::data {

std::string DocumentDistribution::text() const {
  char buf[96];
  if (histogram) {
    std::snprintf(buf, sizeof buf, " (%lld documents, mean %.1f tokens, seed %llu)",
                  static_cast<long long>(histogram->documents),
                  static_cast<double>(histogram->tokens) / static_cast<double>(histogram->documents),
                  static_cast<unsigned long long>(seed));
    return "histogram " + histogram->file + buf;
  }
  std::snprintf(buf, sizeof buf, "lognormal(median %g, sigma %g, seed %llu)", median, sigma,
                static_cast<unsigned long long>(seed));
  return buf;
}

DocumentDistribution parse_document_distribution(const std::string& text, const std::string& flag) {
  auto fail = [&] {
    throw Error(flag + ": expected lognormal:MEDIAN:SIGMA[:SEED] (MEDIAN >= 1 tokens, SIGMA > 0) or histogram:PATH (the "
                "<name>.lengths.json plait data prepare writes, or its data directory), found '" + text + "'");
  };
  if (text.starts_with("histogram:")) {
    const std::string path = text.substr(10);
    if (path.empty()) fail();
    DocumentDistribution d;
    try {
      d.histogram = std::make_shared<const LengthHistogram>(read_document_lengths(path));
    } catch (const Error& e) {
      throw Error(flag + ": " + e.what());
    }
    return d;
  }
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t colon = text.find(':', at);
    parts.push_back(text.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  if (parts.size() < 3 || parts.size() > 4 || parts[0] != "lognormal") fail();
  auto number = [&](const std::string& part) {
    char* end = nullptr;
    const double v = std::strtod(part.c_str(), &end);
    if (part.empty() || *end != '\0' || !std::isfinite(v)) fail();
    return v;
  };
  DocumentDistribution d;
  d.median = number(parts[1]);
  d.sigma = number(parts[2]);
  if (parts.size() == 4) {
    const double seed = number(parts[3]);
    if (seed < 0 || seed != std::floor(seed) || seed > 1e18) fail();
    d.seed = static_cast<std::uint64_t>(seed);
  }
  if (!(d.median >= 1) || !(d.sigma > 0)) fail();
  return d;
}

std::vector<std::int64_t> distribution_starts(const DocumentDistribution& d, std::int64_t tokens) {
  std::mt19937_64 rng(d.seed);
  std::lognormal_distribution<double> lognormal(std::log(d.median), d.sigma);
  std::vector<double> counts;
  if (d.histogram) {
    for (const LengthBin& b : d.histogram->bins) counts.push_back(static_cast<double>(b.count));
  }
  std::discrete_distribution<std::size_t> bin(counts.begin(), counts.end());
  auto length = [&]() -> std::int64_t {
    if (!d.histogram) return std::llround(lognormal(rng));
    const LengthBin& b = d.histogram->bins[bin(rng)];
    return std::uniform_int_distribution<std::int64_t>(b.lo, b.hi)(rng);
  };
  std::vector<std::int64_t> starts = {0};
  while (true) {
    const std::int64_t next = starts.back() + std::max<std::int64_t>(1, length());
    if (next >= tokens) break;
    starts.push_back(next);
  }
  return starts;
}

}  // namespace plait::data
