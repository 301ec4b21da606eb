#pragma once
// One unit of pipeline work: forward (F), input-gradient backward (B), weight-gradient backward
// (W) or the fused full backward (BW) of one (micro-batch, sequence segment, model chunk).
// Text form: kind, micro-batch, '.', segment, and 'c' + chunk when a rank holds several chunks:
// "F0.1", "BW3.0", "W2.1c1" (the compact style of torch.distributed.pipelining's "2F0").
#include <cstdint>
#include <string>
#include <string_view>

namespace plait::schedule {

enum class ActionKind : std::uint8_t { F = 0, B = 1, W = 2, BW = 3 };
inline constexpr int kNumActionKinds = 4;

// "F", "B", "W", "BW".
std::string_view kind_name(ActionKind kind);

// True for the kinds that carry a gradient to the previous stage (B and BW).
inline bool is_backward_input(ActionKind kind) {
  return kind == ActionKind::B || kind == ActionKind::BW;
}

struct Action {
  ActionKind kind = ActionKind::F;
  std::int32_t microbatch = 0;
  std::int32_t segment = 0;
  // Index into the rank's list of virtual stages (Layout::rank_vstages), not a virtual stage.
  std::int32_t chunk = 0;

  friend bool operator==(const Action&, const Action&) = default;
};

// "F0.1", or "F0.1c1" when with_chunk is set.
std::string to_string(const Action& action, bool with_chunk);

// Appends the text of `action` to `out` (no allocation per call beyond `out`'s growth).
void append_action(std::string& out, const Action& action, bool with_chunk);

// Model chunks per rank an action may name (c0 .. c1023).
inline constexpr std::int32_t kMaxChunks = 1024;

// Parses one action token. On failure returns false and sets `error` to what was expected and
// `error_offset` to the offset in `token` where it went wrong.
bool parse_action(std::string_view token, Action& action, std::string& error,
                  std::size_t& error_offset);

}  // namespace plait::schedule
