// Temperature overrides for a set of layers or heads at once (the app's "overrides" row and the script's
// set-temp), not only the selected layer or head.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "focal/temp_spec.h"

namespace focalscope {

// "0-5,9", "*" (all of 0..n-1) or "" (none) -> sorted unique indices, each checked against n. Throws focal::Error
// naming `what` (e.g. "layers") and the bad item.
std::vector<int> parse_index_set(const std::string& text, int n, const std::string& what);

// spec with t set for every listed layer (heads empty: layer overrides) or for every (layer, head) pair of the
// lists (head overrides). t <= 0 removes those overrides instead.
focal::TempSpec with_overrides(focal::TempSpec spec, const std::vector<int>& layers, const std::vector<int>& heads,
                               float t);

// The script's `spec SPEC [a|b]`: SPEC in the one temperature-spec grammar (focal::TempSpec::parse), `native` being
// the open model's setting, validated against that model. Every error is one focal::Error that starts with `where`
// (the script's file:line). cfg null (no model open) is an error too.
focal::TempSpec parse_spec_command(const std::string& text, const focal::ModelConfig* cfg, const std::string& where);

// Names for two settings that a message sets side by side ("generated under X; A is now Y"): their labels, and
// where the labels are equal but the settings are not (focal_t0.4+overrides before and after a layer's t moved), each
// with the overrides that differ, e.g. "focal_t0.4+overrides (layer 1 t = 0.2)" and "... (layer 1 t = 0.6)".
std::pair<std::string, std::string> labels_apart(const focal::TempSpec& was, const focal::TempSpec& now);

}  // namespace focalscope
