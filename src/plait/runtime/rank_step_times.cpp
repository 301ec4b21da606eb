#include "plait/runtime/rank_step_times.h"

namespace plait::runtime {

void pack(const RankStepTimes& t, std::span<double> out) {
  std::size_t i = 0;
  for (double v : t.compute_seconds) out[i++] = v;
  for (double v : t.units) out[i++] = v;
  out[i++] = t.recv_wait_seconds;
  out[i++] = t.collective_wait_seconds;
  out[i++] = t.send_seconds;
  out[i++] = t.sent_bytes;
  out[i++] = t.first_seconds;
  out[i++] = t.first_units;
}

RankStepTimes unpack_rank_step_times(std::span<const double> in) {
  RankStepTimes t;
  std::size_t i = 0;
  for (double& v : t.compute_seconds) v = in[i++];
  for (double& v : t.units) v = in[i++];
  t.recv_wait_seconds = in[i++];
  t.collective_wait_seconds = in[i++];
  t.send_seconds = in[i++];
  t.sent_bytes = in[i++];
  t.first_seconds = in[i++];
  t.first_units = in[i++];
  return t;
}

}  // namespace plait::runtime
