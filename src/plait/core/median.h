#pragma once
// The median of measured times (the middle value; the mean of the two middle ones for an even
// count): what plait's measurements report and compare, since one slow sample (another job's
// burst, a page-fault storm) does not move it. 0 for no values.
#include <algorithm>
#include <vector>

namespace plait {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace plait
