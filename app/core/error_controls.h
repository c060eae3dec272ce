// The app's words for runtime and figure errors: an Error about one field of a request (Error::field()) is shown
// with the control that sets that field ("t slider: focal_temp = 0 must be ..."), never with a CLI option.
#pragma once

#include <string>

#include "focal/error.h"

namespace focalscope {

// The control that sets `field` ("t slider", "layer override", "device menu", ...), or "" when none does.
std::string control_for_field(const std::string& field);

// e.what(), preceded by "CONTROL: " when the error is about a field one of the app's controls sets.
std::string with_control(const focal::Error& e);

}  // namespace focalscope
