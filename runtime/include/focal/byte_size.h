// Sizes as people type them, for memory budgets: "512M", "2G", "1.5GiB", "1000000". One parser for the CLI's
// --budget and Python's budget=, and one way to write a size in a message.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace focal {

// Bytes of a size: a positive number, optionally followed by K, M or G (also k, m, g, KiB, MiB, GiB; powers of
// 1024). nullopt when `s` is not such a size.
inline std::optional<uint64_t> parse_byte_size(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return std::nullopt;
  const std::string suf = end;
  double mul = 1;
  if (suf == "K" || suf == "k" || suf == "KiB")
    mul = 1024.0;
  else if (suf == "M" || suf == "m" || suf == "MiB")
    mul = 1024.0 * 1024;
  else if (suf == "G" || suf == "g" || suf == "GiB")
    mul = 1024.0 * 1024 * 1024;
  else if (!suf.empty())
    return std::nullopt;
  if (!(v > 0) || !(v * mul < 1.8e19)) return std::nullopt;  // nan, <= 0, or past uint64
  return (uint64_t)(v * mul);
}

// The machine's physical memory in bytes (0 when unknown): the budget of what is refused before allocating (a
// model's weights, a CPU session's KV cache).
inline uint64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

// A size for a message, in the unit that shows it: "512.0 KiB", "3.2 MiB", "7.45 GiB" (powers of 1024, as
// parse_byte_size reads them).
inline std::string format_byte_size(uint64_t b) {
  char buf[32];
  if (b < (uint64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else if (b < (uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
  return buf;
}

}  // namespace focal
