#pragma once
// Errors plait raises. Every message says where (file, field, rank, step), what was expected
// and what was found; the CLI prints it as one line and exits non-zero.
#include <stdexcept>
#include <string>

namespace plait {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bad input file or value: "<file>: <field>: <problem>".
class InputError : public Error {
 public:
  InputError(const std::string& file, const std::string& field, const std::string& problem)
      : Error(file + ": " + field + ": " + problem) {}
};

}  // namespace plait
