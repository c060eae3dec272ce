// The warning sink of focal/log.h.
#include "focal/log.h"

#include <cstdio>
#include <mutex>
#include <utility>

namespace focal {

namespace {
std::mutex g_log_mutex;
std::function<void(const std::string&)> g_sink;  // empty: stderr
}  // namespace

void log_warning(const std::string& msg) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  if (g_sink) {
    g_sink(msg);
  } else {
    std::fprintf(stderr, "focal: warning: %s\n", msg.c_str());
  }
}

std::function<void(const std::string&)> set_warning_sink(std::function<void(const std::string&)> sink) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::swap(g_sink, sink);
  return sink;
}

}  // namespace focal
