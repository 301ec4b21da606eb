// Fuzzes the safetensors reader: header length, JSON header validation (dtype, shapes, offsets
// covering the buffer exactly, duplicate names) and reading every tensor it accepted. A header
// that passes must describe a file whose every tensor can be read in bounds.
#include <cstdint>
#include <vector>

#include "fuzz_input_file.h"
#include "plait/checkpoint/safetensors_file.h"
#include "plait/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static plait::fuzz::InputFile file;
  try {
    plait::checkpoint::SafetensorsReader reader(file.write(data, size));
    std::uint64_t covered = 0;
    for (const auto& e : reader.header().tensors) {
      if (e.elements() > (1u << 20)) continue;  // bounded by the input size anyway
      std::vector<float> out(e.elements());
      reader.read(e.name, out);
      covered += e.end - e.begin;
    }
    (void)covered;
  } catch (const plait::Error&) {
  }
  return 0;
}
