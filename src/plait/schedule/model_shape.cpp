#include "plait/schedule/model_shape.h"

#include "plait/core/error.h"

namespace plait::schedule {

void check_model_shape(const ModelShape& shape, const std::string& where) {
  auto positive = [&](const char* field, std::int64_t value) {
    if (value < 1) {
      throw InputError(where, field, "expected a positive integer, found " + std::to_string(value));
    }
  };
  positive("layers", shape.layers);
  positive("hidden", shape.hidden);
  positive("heads", shape.heads);
  positive("vocab", shape.vocab);
  positive("max_seq", shape.max_seq);
  if (shape.hidden % shape.heads != 0) {
    throw InputError(where, "heads",
                     "expected a divisor of hidden " + std::to_string(shape.hidden) + ", found " +
                         std::to_string(shape.heads));
  }
}

}  // namespace plait::schedule
