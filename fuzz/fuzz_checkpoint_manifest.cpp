// Fuzzes the checkpoint manifest parser; a manifest it accepts must survive a write/parse round
// trip unchanged (what commit_checkpoint relies on).
#include <cstdint>
#include <string_view>

#include "plait/checkpoint/checkpoint_manifest.h"
#include "plait/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plait::checkpoint;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const CheckpointManifest m = parse_manifest(text, "manifest.json");
    const CheckpointManifest again = parse_manifest(manifest_to_text(m), "manifest.json");
    if (again.step != m.step || again.files.size() != m.files.size() || again.config != m.config ||
        again.data_position != m.data_position || again.rng_state != m.rng_state ||
        again.optimizer != m.optimizer || again.working_directory != m.working_directory) {
      __builtin_trap();
    }
    for (std::size_t i = 0; i < m.files.size(); ++i) {
      if (again.files[i].path != m.files[i].path || again.files[i].crc32c != m.files[i].crc32c ||
          again.files[i].bytes != m.files[i].bytes || again.files[i].tensors != m.files[i].tensors) {
        __builtin_trap();
      }
    }
  } catch (const plait::Error&) {
  }
  return 0;
}
