// Fuzzes the latency-table reader (sim::read_latency_table, Zorse's model_latencies.json shape,
// what `plait profile` writes and cluster specs name as profiles), strict and lenient. A table
// it accepts must hold finite fits (lenient skips the unusable ones), at most one entry per
// (model, device, seq, dtype) (else which one a profile uses is arbitrary), and, strict, write
// back and read again to the same entries. Anything but a plait::Error is a finding.
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "fuzz_input_file.h"
#include "plait/core/error.h"
#include "plait/sim/latency_table.h"

namespace {

using Key = std::tuple<std::string, std::string, std::int64_t, std::string>;

std::map<Key, const plait::sim::LatencyEntry*> by_key(const plait::sim::LatencyTable& t) {
  std::map<Key, const plait::sim::LatencyEntry*> out;
  for (const auto& e : t.entries) {
    if (!out.emplace(Key{e.model, e.device, e.seq, e.dtype}, &e).second) __builtin_trap();  // twice
  }
  return out;
}

bool same(const plait::sim::LatencyEntry& a, const plait::sim::LatencyEntry& b) {
  return a.model == b.model && a.device == b.device && a.dtype == b.dtype && a.seq == b.seq &&
         a.forward_slope_ms == b.forward_slope_ms && a.forward_intercept_ms == b.forward_intercept_ms &&
         a.backward_slope_ms == b.backward_slope_ms && a.backward_intercept_ms == b.backward_intercept_ms &&
         a.forward_ms == b.forward_ms && a.backward_ms == b.backward_ms;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plait::sim;
  static plait::fuzz::InputFile file;
  static plait::fuzz::InputFile again;
  for (const bool strict : {true, false}) {
    try {
      const LatencyTable t = read_latency_table(file.write(data, size), strict);
      for (const LatencyEntry& e : t.entries) {
        if (!std::isfinite(e.forward_slope_ms) || !std::isfinite(e.forward_intercept_ms) ||
            !std::isfinite(e.backward_slope_ms) || !std::isfinite(e.backward_intercept_ms)) {
          __builtin_trap();
        }
      }
      const auto entries = by_key(t);
      if (!strict) continue;
      const std::string text = latency_table_json(t.entries).dump();
      const LatencyTable back =
          read_latency_table(again.write(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()), true);
      const auto written = by_key(back);
      if (written.size() != entries.size()) __builtin_trap();
      for (const auto& [key, e] : entries) {
        const auto it = written.find(key);
        if (it == written.end() || !same(*it->second, *e)) __builtin_trap();
      }
    } catch (const plait::Error&) {
    }
  }
  return 0;
}
