#pragma once
// Names no other process chooses: temporary files, staging directories. Predictable names
// ("<file>.tmp", "<file>.tmp-<pid>") let another user plant a link there first, and let two
// runs that share a directory (two machines on one file system) pick the same one.
#include <string>

namespace plait {

// 16 lower-case hex digits from the kernel's random source (getrandom(2)); where that fails,
// SplitMix64 of the time, pid and a counter, which still differs between processes and calls.
std::string unique_token();

// This machine's host name ("unknown-host" when it cannot be read).
std::string host_name();

}  // namespace plait
