// The timestamp every focalscope file records (captures, sweeps, logs, temperature files): one format, written and
// checked here.
#include "focal/provenance.h"

#include <cctype>
#include <ctime>

namespace focal {

std::string utc_timestamp_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

bool is_utc_timestamp(const std::string& s) {
  // YYYY-MM-DDTHH:MM:SSZ, each field in its range (the day against its month, leap years included)
  if (s.size() != 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != 'Z')
    return false;
  for (int i : {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18})
    if (!std::isdigit((unsigned char)s[i])) return false;
  auto num = [&](int at, int n) {
    int v = 0;
    for (int i = 0; i < n; ++i) v = v * 10 + (s[at + i] - '0');
    return v;
  };
  const int year = num(0, 4), month = num(5, 2), day = num(8, 2);
  if (month < 1 || month > 12 || day < 1) return false;
  static const int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (day > kDays[month - 1] + (month == 2 && leap ? 1 : 0)) return false;
  return num(11, 2) <= 23 && num(14, 2) <= 59 && num(17, 2) <= 60;  // 60: a leap second
}

}  // namespace focal
