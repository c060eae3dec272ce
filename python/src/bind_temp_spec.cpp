// focalscope.TempSpec: the run settings, parsed by the one spec grammar (focal::TempSpec::parse).
#include <cstdlib>
#include <map>
#include <utility>

#include "focal/error.h"
#include "py_bindings.h"
#include "py_convert.h"

namespace focalscope::py {

using namespace nb::literals;

namespace {
// A stored float as the decimal it was given as (0.3, not 0.30000001192092896): `spec.t == 0.3` holds.
double decimal(float v) { return std::strtod(focal::shortest_decimal(v).c_str(), nullptr); }
}  // namespace

void bind_temp_spec(nb::module_& mod) {
  nb::class_<focal::TempSpec>(
      mod, "TempSpec",
      "How a run scales attention logits: softmax(q.k / (t sqrt(d_head))) with t per model, layer or head.\n\n"
      "TempSpec(0.4) is focal attention with t = 0.4; TempSpec(mode='standard'); TempSpec(0.4, layer_temp={0: 1.0}, "
      "head_temp={(2, 1): 0.3}); TempSpec(mode='learned', tau_scale=0.8); TempSpec(mode='ssmax', ssmax_s=1.0). "
      "Anywhere a temp= is taken, a string in the spec grammar works too (TempSpec.parse): 'native', 'standard', "
      "'focal:0.4', 'learned:0.8', 'ssmax:1', 'focal:0.4+2=0.3+2:1=0.5'.")
      .def(
          "__init__",
          [](focal::TempSpec* self, std::optional<double> t, std::optional<std::string> mode,
             const std::map<int, double>& layer_temp, const std::map<std::pair<int, int>, double>& head_temp,
             double tau_scale, double ssmax_s) {
            focal::TempSpec s;
            const std::string md = mode ? *mode : (t ? "focal" : "standard");
            try {
              s.mode = focal::parse_attn_mode(md, "mode");
            } catch (const focal::Error& e) { raise(PyExc_ValueError, e.what()); }
            if (t && s.mode != focal::AttnMode::kFocal)
              raise(PyExc_ValueError,
                    "t: a global t is for mode='focal' (use layer_temp / head_temp to override "
                    "layers or heads of other modes)");
            if (s.mode == focal::AttnMode::kFocal) {
              if (!t) raise(PyExc_ValueError, "mode='focal' needs t, e.g. TempSpec(0.4)");
              s.focal_temp = check_temp(*t, "t");
            }
            for (auto& [l, v] : layer_temp) s.layer_temp[l] = check_temp(v, "layer_temp[" + std::to_string(l) + "]");
            for (auto& [lh, v] : head_temp)
              s.head_temp[lh] =
                  check_temp(v, "head_temp[(" + std::to_string(lh.first) + ", " + std::to_string(lh.second) + ")]");
            s.tau_scale = check_temp(tau_scale, "tau_scale", "1 keeps the learned tau as trained");
            s.ssmax_s = check_temp(ssmax_s, "ssmax_s", "1 scales the logits by ln(n_visible) alone");
            // a mode's own option with another mode would do nothing (as the CLI's --tau-scale / --ssmax-s)
            if (tau_scale != 1.0 && s.mode != focal::AttnMode::kLearned)
              raise(PyExc_ValueError, "tau_scale: applies to mode='learned' only (this spec's mode is '" +
                                          std::string(focal::attn_mode_name(s.mode)) + "')");
            if (ssmax_s != 1.0 && s.mode != focal::AttnMode::kSsmax)
              raise(PyExc_ValueError, "ssmax_s: applies to mode='ssmax' only (this spec's mode is '" +
                                          std::string(focal::attn_mode_name(s.mode)) + "')");
            new (self) focal::TempSpec(s);
          },
          "t"_a = nb::none(), "mode"_a = nb::none(), "layer_temp"_a = std::map<int, double>{},
          "head_temp"_a = std::map<std::pair<int, int>, double>{}, "tau_scale"_a = 1.0, "ssmax_s"_a = 1.0)
      .def_static(
          "parse", [](const std::string& text) { return parse_temp(text, nullptr); }, "text"_a,
          "Parses the spec grammar shared with the CLI and the app: 'standard', 'focal:T' or 'T', 'learned' or "
          "'learned:X', 'ssmax' or 'ssmax:S', then any '+L=T' (layer) or '+L:H=T' (head) overrides, e.g. "
          "'focal:0.4+2=0.3+2:1=0.5'; run names ('focal_t0.4') work too. 'native' needs a model: pass the string "
          "as temp= or use Model.native_temp.")
      .def_prop_ro("text", &focal::TempSpec::text,
                   "The spec in the grammar's canonical spelling; TempSpec.parse(spec.text) == spec.")
      .def_static(
          "from_json", [](const std::string& j) { return focal::TempSpec::from_json(j, "TempSpec.from_json"); },
          "json"_a, "The spec a capture stores per run (its temp_spec_json).")
      .def_prop_ro(
          "mode", [](const focal::TempSpec& s) { return std::string(focal::attn_mode_name(s.mode)); },
          "'standard', 'focal', 'learned' or 'ssmax'.")
      .def_prop_ro(
          "t", [](const focal::TempSpec& s) { return decimal(s.focal_temp); }, "Global focal t (mode 'focal').")
      .def_prop_ro(
          "layer_temp",
          [](const focal::TempSpec& s) {
            std::map<int, double> out;
            for (const auto& [l, t] : s.layer_temp) out[l] = decimal(t);
            return out;
          },
          "{layer: t} overrides.")
      .def_prop_ro(
          "head_temp",
          [](const focal::TempSpec& s) {
            std::map<std::pair<int, int>, double> out;
            for (const auto& [lh, t] : s.head_temp) out[lh] = decimal(t);
            return out;
          },
          "{(layer, head): t} overrides.")
      .def_prop_ro(
          "tau_scale", [](const focal::TempSpec& s) { return decimal(s.tau_scale); }, "Multiplier on a learned tau.")
      .def_prop_ro(
          "ssmax_s", [](const focal::TempSpec& s) { return decimal(s.ssmax_s); }, "s of ssmax: logits * s * ln(n).")
      .def_prop_ro("label", &focal::TempSpec::label, "Run name this spec gets by default, e.g. 'focal_t0.4'.")
      .def("to_json", &focal::TempSpec::to_json, "JSON as stored in a capture's temp_spec_json.")
      .def("__eq__", [](const focal::TempSpec& a, const focal::TempSpec& b) { return a.to_json() == b.to_json(); })
      .def(
          "__eq__", [](const focal::TempSpec&, nb::handle) { return false; },
          nb::arg("other").none())  // another type (None included): not equal
      .def("__repr__", [](const focal::TempSpec& s) { return "TempSpec(" + s.to_json() + ")"; });
}

}  // namespace focalscope::py
