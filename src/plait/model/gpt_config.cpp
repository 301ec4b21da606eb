#include "plait/model/gpt_config.h"

#include <string>

namespace plait::model {

std::int64_t GPTConfig::block_parameter_count() const {
  const std::int64_t c = hidden;
  return 12 * c * c + 13 * c;
}

std::int64_t GPTConfig::parameter_count() const {
  const std::int64_t c = hidden;
  const std::int64_t embeddings = std::int64_t{vocab} * c + std::int64_t{max_seq} * c;
  const std::int64_t head = tie_embeddings ? 0 : std::int64_t{vocab} * c;
  return embeddings + layers * block_parameter_count() + 2 * c + head;
}

GPTConfig parse_gpt_config(const JsonFields& m) {
  // Bounds keep every size product below 2^31 per row and stop absurd values early.
  GPTConfig c;
  c.layers = static_cast<int>(m.integer_in("layers", 1, 1024));
  c.hidden = static_cast<int>(m.integer_in("hidden", 1, 65536));
  c.heads = static_cast<int>(m.integer_in("heads", 1, 1024));
  c.vocab = static_cast<int>(m.integer_in("vocab", 1, 1 << 20));
  c.max_seq = static_cast<int>(m.integer_in("max_seq", 1, 1 << 20));
  c.tie_embeddings = m.boolean("tie_embeddings", true);
  m.check_no_unknown_fields();
  if (c.hidden % c.heads != 0) {
    m.fail("heads", "hidden " + std::to_string(c.hidden) + " is not divisible by heads " +
                        std::to_string(c.heads));
  }
  return c;
}

}  // namespace plait::model
