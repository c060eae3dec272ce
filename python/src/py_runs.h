// Model.run, Model.sweep and Model.generate of focalscope._core: the runs, with the GIL released and Ctrl-C polled
// between layers.
#pragma once

#include "focal/capture.h"
#include "py_objects.h"

namespace focalscope::py {

// The capture options' defaults of Model.run and Model.generate (the CLI's): bind_model.cpp declares them with these,
// and generate(capture=False) refuses a value other than these as an option without its capture.
constexpr bool kDefaultProbs = true, kDefaultScores = true, kDefaultFp16 = false;
constexpr int kDefaultTopk = 10, kDefaultTopkMass = 5;

// A CaptureRequest from the Python arguments (the CLI's selection options), checked against the model and T tokens.
focal::CaptureRequest make_request(const focal::ModelConfig& cfg, int T, nb::handle layers, nb::handle heads,
                                   nb::handle queries, bool probs, bool scores, bool fp16, int topk, int topk_mass,
                                   nb::handle relevant, nb::handle budget);

PyCapture model_run(PyModel& m, nb::handle prompt, nb::handle temp, nb::handle layers, nb::handle heads,
                    nb::handle queries, nb::handle compare, const std::optional<std::string>& name, bool probs,
                    bool scores, bool fp16, int topk, int topk_mass, nb::handle relevant, nb::handle budget,
                    nb::handle progress);

focal::SweepFile model_sweep(PyModel& m, nb::handle prompt, const std::vector<double>& temps, nb::handle temp,
                             nb::handle relevant, int topk_mass, nb::handle progress);

PyGeneration model_generate(PyModel& m, nb::handle prompt, int n_new, nb::handle temp, double sample_temp, int top_k,
                            nb::handle seed, bool stop_at_eos, nb::handle on_token, bool capture, nb::handle compare,
                            nb::handle layers, nb::handle heads, bool probs, bool scores, bool fp16, nb::handle queries,
                            const std::optional<std::string>& name, int topk, int topk_mass, nb::handle relevant,
                            nb::handle budget);

}  // namespace focalscope::py
