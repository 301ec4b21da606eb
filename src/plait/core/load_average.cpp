#include "plait/core/load_average.h"

#include <cstdio>
#include <fstream>

namespace plait {

std::optional<LoadAverage> read_load_average() {
  std::ifstream in("/proc/loadavg");
  LoadAverage load;
  if (!(in >> load.one >> load.five >> load.fifteen)) return std::nullopt;
  return load;
}

std::string load_average_text() {
  const std::optional<LoadAverage> load = read_load_average();
  if (!load) return "load average unavailable";
  char text[96];
  std::snprintf(text, sizeof text, "load average %.2f %.2f %.2f (1/5/15 min)", load->one, load->five,
                load->fifteen);
  return text;
}

}  // namespace plait
