#include "plait/spec/recompute.h"

#include "plait/core/error.h"

namespace plait::spec {

bool Recompute::any() const {
  switch (form) {
    case Form::none: return false;
    case Form::full: return true;
    case Form::each: return each > 0;
    case Form::per_stage:
      for (int n : per_stage) {
        if (n > 0) return true;
      }
      return false;
  }
  return false;
}

std::vector<int> Recompute::resolve(const std::vector<int>& vstage_layers) const {
  const std::size_t v = vstage_layers.size();
  if (form == Form::none) return std::vector<int>(v, 0);
  if (form == Form::full) return vstage_layers;
  if (form == Form::per_stage && per_stage.size() != v) {
    throw Error("expected one layer count per virtual stage (" + std::to_string(v) + "), found " +
                std::to_string(per_stage.size()));
  }
  std::vector<int> out(v);
  for (std::size_t s = 0; s < v; ++s) {
    const int n = form == Form::each ? each : per_stage[s];
    if (n < 0 || n > vstage_layers[s]) {
      throw Error("virtual stage " + std::to_string(s) + " has " + std::to_string(vstage_layers[s]) +
                  " layer" + (vstage_layers[s] == 1 ? "" : "s") + ", cannot recompute " +
                  std::to_string(n));
    }
    out[s] = n;
  }
  return out;
}

std::string Recompute::describe() const {
  switch (form) {
    case Form::none: return "none";
    case Form::full: return "full";
    case Form::each: return std::to_string(each) + " layer" + (each == 1 ? "" : "s") + " per stage";
    case Form::per_stage: {
      std::string s = "[";
      for (std::size_t i = 0; i < per_stage.size(); ++i) s += (i ? ", " : "") + std::to_string(per_stage[i]);
      return s + "] layers per stage";
    }
  }
  return "";
}

}  // namespace plait::spec
