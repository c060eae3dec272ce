// The CLI's words for runtime and figure errors: an Error about one field of a request (Error::field(), e.g.
// "layer_temp") is shown after the focal option that sets that field ("--layer-temp: layer_temp[7] = -1 ...").
#pragma once

#include <string>

#include "focal/error.h"

namespace focal::cli {

// The option that sets `field`, or "" when no option does.
std::string flag_for_field(const std::string& field);

// e.what(), preceded by "--option: " when the error is about a field an option sets.
std::string with_flag(const Error& e);

}  // namespace focal::cli
