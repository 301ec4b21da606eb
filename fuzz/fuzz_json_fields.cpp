// Fuzzes plait's strict JSON reading (core/json_fields: read_json_file + JsonFields) through a
// small generic config schema with every kind of field: strings, bounded and unbounded
// integers, numbers, booleans, arrays, a nested object and the unknown-field check. Every
// problem must surface as a plait::Error (an InputError naming file and field), never as
// another exception or a crash.
#include <cstdint>
#include <string>

#include "fuzz_input_file.h"
#include "plait/core/error.h"
#include "plait/core/json_fields.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static plait::fuzz::InputFile file;
  try {
    const nlohmann::json j = plait::read_json_file(file.write(data, size));
    const plait::JsonFields f(j, "config.json");
    (void)f.string("name", "gpt");
    (void)f.integer_in("n_layer", 1, 1024, 12);
    (void)f.integer("seed", 0);
    (void)f.number("learning_rate", 3e-4);
    (void)f.boolean("tied_embeddings", true);
    if (f.has("layers")) (void)f.integers("layers");
    if (f.has("devices")) (void)f.strings("devices");
    if (f.has("optimizer")) {
      const plait::JsonFields o = f.object("optimizer");
      (void)o.string("kind");
      (void)o.number("beta1", 0.9);
      (void)o.integer_in("warmup", 0, 1000000, 0);
      o.check_no_unknown_fields();
    }
    if (f.has("extra")) (void)f.raw("extra");
    f.check_no_unknown_fields();
  } catch (const plait::Error&) {
  }
  return 0;
}
