// Round axis ticks (1-2-5 x 10^k) and number labels, shared by the figures and the app so that every axis and
// colour bar is labelled at round values with a true minus sign.
#pragma once

#include <string>
#include <vector>

namespace focal::figures {

struct Ticks {
  std::vector<double> values;
  std::vector<std::string> labels;
  double lo = 0, hi = 1;  // axis limits (the outer ticks when expanded)
};

// Ticks at multiples of 1, 2 or 5 x 10^k covering [lo, hi], about max_ticks of them at most. With expand the limits
// grow outwards to the nearest ticks. Labels use as many decimals as the step needs and a true minus sign.
Ticks nice_ticks(double lo, double hi, int max_ticks, bool expand);
// Ticks at integer powers of ten between lo_exp and hi_exp (exponents), labelled 10⁻³ etc.
Ticks log10_ticks(double lo_exp, double hi_exp, int max_ticks);
// v with as many decimals as step needs (0.25 with step 0.05 -> "0.25"), a true minus sign, never "−0".
std::string format_number(double v, double step);
// v with `digits` significant digits and no trailing zeros, e.g. for cell annotations; never "−0".
std::string format_sig(double v, int digits);

}  // namespace focal::figures
