#pragma once
// An emulated link between a rank and the ranks it sends to (issue 26 part 3, the link form of
// fault injection: FailureInjection::kLink). The alpha-beta model the simulator and the link
// profiler use (sim::LinkProfile, runtime/link_profiler.h): a message of b bytes takes
//   latency + b / bytes_per_second
// on the link. On the emulated cluster every rank shares one host, where a message costs a
// memcpy; a slower link is emulated on the sending side: before posting a message the rank sleeps
// for the model's time (a blocking copy over the slow link would hold it as long), and the time
// counts as the send's (RankStepTimes::send_seconds). Off (the default): no delay.
#include <cstddef>

namespace plait::runtime {

class LinkEmulator {
 public:
  bool active() const { return bytes_per_second_ > 0; }
  double bytes_per_second() const { return bytes_per_second_; }
  double latency_seconds() const { return latency_; }
  // bytes_per_second 0 turns the emulation off.
  void set(double bytes_per_second, double latency_seconds) {
    bytes_per_second_ = bytes_per_second;
    latency_ = bytes_per_second > 0 ? latency_seconds : 0;
  }
  // The model's time for `bytes`, 0 when off.
  double seconds(std::size_t bytes) const;
  // Sleeps seconds(bytes); returns the time slept.
  double delay(std::size_t bytes) const;

 private:
  double bytes_per_second_ = 0;
  double latency_ = 0;
};

}  // namespace plait::runtime
