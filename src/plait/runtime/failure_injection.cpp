#include "plait/runtime/failure_injection.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "plait/core/error.h"

namespace plait::runtime {

namespace {

FailureInjection::Point parse_point(const std::string& text, const std::string& whole, const std::string& flag) {
  using Kind = FailureInjection::Kind;
  const auto bad = [&] {
    return Error(flag + ": expected RANK:STEP[:kill|nan-loss|nan-grad|kill-in-save|kill-in-eval|"
                        "kill-in-commit|stop|hang|sigterm|sigusr1|slow=F|link=B[@L]][,...], found '" + whole + "'");
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
  static const std::pair<const char*, Kind> kinds[] = {
      {"", Kind::kThrow},           {"kill", Kind::kKill},
      {"nan-loss", Kind::kNanLoss}, {"nan-grad", Kind::kNanGradient},
      {"kill-in-save", Kind::kKillInSave}, {"kill-in-eval", Kind::kKillInEval},
      {"kill-in-commit", Kind::kKillInCommit}, {"stop", Kind::kStop},
      {"hang", Kind::kHang},        {"sigterm", Kind::kSigterm},
      {"sigusr1", Kind::kSigusr1}};
  FailureInjection::Point p;
  p.rank = static_cast<int>(number(rank));
  p.step = number(step);
  if (kind.starts_with("slow=")) {
    // A factor, as a decimal: "3", "2.5".
    const std::string f = kind.substr(5);
    char* end = nullptr;
    p.factor = f.empty() ? 0 : std::strtod(f.c_str(), &end);
    if (f.empty() || end != f.c_str() + f.size() || !(p.factor >= 1 && p.factor <= 1000)) {
      throw Error(flag + ": slow=F needs a factor F in [1, 1000], found '" + whole + "'");
    }
    p.kind = Kind::kSlow;
    return p;
  }
  if (kind.starts_with("link=")) {
    // Bytes per second, then an optional "@" and seconds of latency, as decimals ("2e6@0.001").
    const std::string f = kind.substr(5);
    const std::size_t at = f.find('@');
    const auto decimal = [&](const std::string& s, double& out) {
      char* end = nullptr;
      out = s.empty() ? -1 : std::strtod(s.c_str(), &end);
      return !s.empty() && end == s.c_str() + s.size() && out >= 0 && out < 1e15;
    };
    const bool ok = decimal(f.substr(0, at), p.bytes_per_second) &&
                    (at == std::string::npos || decimal(f.substr(at + 1), p.latency_seconds)) && p.latency_seconds <= 60;
    if (!ok) {
      throw Error(flag + ": link=B[@L] needs bytes per second B >= 0 (0 ends the fault) and a latency L in [0, 60] "
                         "seconds, found '" + whole + "'");
    }
    p.kind = Kind::kLink;
    return p;
  }
  for (const auto& [name, k] : kinds) {
    if (kind == name) {
      p.kind = k;
      return p;
    }
  }
  throw bad();
}

}  // namespace

FailureInjection parse_failure_injection(const std::string& text, const std::string& flag) {
  FailureInjection f;
  if (text.empty()) return f;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t comma = text.find(',', begin);
    f.points.push_back(parse_point(text.substr(begin, comma - begin), text, flag));
    if (comma == std::string::npos) return f;
    begin = comma + 1;
  }
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

void signal_self(int rank, std::int64_t step, int signal) {
  std::fprintf(stderr, "plait: rank %d: step %lld: sending itself %s (injected failure)\n", rank,
               static_cast<long long>(step), signal == SIGTERM ? "SIGTERM" : "SIGUSR1");
  std::fflush(stderr);
  std::raise(signal);
}

void hang_self(int rank, std::int64_t step) {
  std::fprintf(stderr, "plait: rank %d: step %lld: hanging, alive, without progress (injected failure)\n", rank,
               static_cast<long long>(step));
  std::fflush(stderr);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace plait::runtime
