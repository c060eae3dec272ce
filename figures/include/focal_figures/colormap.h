// The figures' colour maps for other front ends (the app builds its textures from the same colours), and PNG
// writing of raw RGBA pixels (app screenshots).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace focal::figures {

struct Rgb8 {
  uint8_t r, g, b;
};
Rgb8 viridis8(double t);    // t in [0, 1], clamped; NaN -> 0
Rgb8 diverging8(double t);  // t in [-1, 1], blue - white - red
Rgb8 category8(int i);      // Okabe-Ito run colours, as in the figures
// One colour per run name by the kind of attention it names (standard blue, focal vermillion, learned bluish green,
// ssmax reddish purple; further runs the unused colours in order): the figures' rule, so a run has one colour in
// every figure and in the app.
std::vector<Rgb8> run_colors8(const std::vector<std::string>& names);

// Writes top-to-bottom RGBA rows (stride bytes apart) as a PNG, to a temporary name renamed into place. Throws
// focal::Error naming the path.
void write_png_rgba(const std::string& path, const uint8_t* rgba, int width, int height, int stride);

}  // namespace focal::figures
