#include "plait/model/engine_limits.h"

#include <cstdint>

#include "plait/core/error.h"

namespace plait::model {

void check_engine_limits(const spec::ModelSpec& m, const std::string& file) {
  const struct {
    const char* field;
    std::int64_t value, limit;
  } limits[] = {{"layers", m.layers, 1024},         {"hidden", m.hidden, 65536},
                {"heads", m.heads, 1024},           {"ffn_hidden", m.ffn_hidden, 262144},
                {"vocab", m.vocab, std::int64_t{1} << 20}, {"max_seq", m.max_seq, std::int64_t{1} << 20}};
  for (const auto& l : limits) {
    if (l.value > l.limit) {
      throw InputError(file, std::string("model.") + l.field,
                       "the CPU engine takes at most " + std::to_string(l.limit) + ", found " +
                           std::to_string(l.value));
    }
  }
}

}  // namespace plait::model
