// Python arguments to runtime values for focalscope._core: index lists, temperatures in the one spec grammar, sizes.
#pragma once

#include "focal/config.h"
#include "focal/temp_spec.h"
#include "py_common.h"

namespace focalscope::py {

inline std::string path_str(const fs::path& p) { return p.string(); }

// None -> all; an int -> that one; a sequence of ints -> those. Checked against 0..n-1 with the parameter's name.
std::vector<int> index_list(nb::handle h, int n, const char* param, const char* what, const char* range_owner);

// t as a temperature: finite and > 0, else ValueError naming `what`.
float check_temp(double t, const std::string& what);

// The one spec grammar (focal::TempSpec::parse); a malformed or non-positive spec is a ValueError. `native` needs
// cfg.
focal::TempSpec parse_temp(const std::string& text, const focal::ModelConfig* cfg, const char* param = "temp");

// temp argument: None -> the model's native setting; str; a number t; a TempSpec. Validated against the model.
focal::TempSpec to_spec(nb::handle temp, const focal::ModelConfig& cfg, const char* param = "temp");

// The row metrics' names in the order of the metrics arrays' last axis.
std::vector<std::string> metric_names();

// budget argument: None -> 2 GiB; an int of bytes; a size such as "512M" (focal::parse_byte_size, as the CLI).
size_t parse_budget(nb::handle h);

}  // namespace focalscope::py
