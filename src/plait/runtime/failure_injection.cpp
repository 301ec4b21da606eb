#include "plait/runtime/failure_injection.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "plait/core/error.h"

namespace plait::runtime {

FailureInjection parse_failure_injection(const std::string& text, const std::string& flag) {
  FailureInjection f;
  if (text.empty()) return f;
  const auto bad = [&] {
    return Error(flag + ": expected RANK:STEP[:kill|nan-loss|nan-grad|kill-in-save|kill-in-eval|"
                        "kill-in-commit|stop|hang], found '" + text + "'");
  };
  const std::size_t a = text.find(':');
  if (a == std::string::npos) throw bad();
  const std::size_t b = text.find(':', a + 1);
  const std::string rank = text.substr(0, a);
  const std::string step = text.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
  const std::string kind = b == std::string::npos ? "" : text.substr(b + 1);
  const auto number = [&](const std::string& s) {
    if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos) throw bad();
    return std::strtoll(s.c_str(), nullptr, 10);
  };
  f.rank = static_cast<int>(number(rank));
  f.step = number(step);
  if (kind.empty()) f.kind = FailureInjection::Kind::kThrow;
  else if (kind == "kill") f.kind = FailureInjection::Kind::kKill;
  else if (kind == "nan-loss") f.kind = FailureInjection::Kind::kNanLoss;
  else if (kind == "nan-grad") f.kind = FailureInjection::Kind::kNanGradient;
  else if (kind == "kill-in-save") f.kind = FailureInjection::Kind::kKillInSave;
  else if (kind == "kill-in-eval") f.kind = FailureInjection::Kind::kKillInEval;
  else if (kind == "kill-in-commit") f.kind = FailureInjection::Kind::kKillInCommit;
  else if (kind == "stop") f.kind = FailureInjection::Kind::kStop;
  else if (kind == "hang") f.kind = FailureInjection::Kind::kHang;
  else throw bad();
  return f;
}

void kill_self(int rank, std::int64_t step, const char* where) {
  std::fprintf(stderr, "plait: rank %d: step %lld: killing itself with SIGKILL %s (injected failure)\n",
               rank, static_cast<long long>(step), where);
  std::fflush(stderr);
  std::raise(SIGKILL);
  std::abort();  // not reached
}

void stop_self(int rank, std::int64_t step) {
  std::fprintf(stderr, "plait: rank %d: step %lld: stopping itself with SIGSTOP (injected failure)\n", rank,
               static_cast<long long>(step));
  std::fflush(stderr);
  std::raise(SIGSTOP);
}

void hang_self(int rank, std::int64_t step) {
  std::fprintf(stderr, "plait: rank %d: step %lld: hanging, alive, without progress (injected failure)\n", rank,
               static_cast<long long>(step));
  std::fflush(stderr);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace plait::runtime
