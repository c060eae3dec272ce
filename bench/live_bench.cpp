// The app's propagate path without a window: LiveRunner::run on the bundled model at T tokens, as the app requests
// it (focal::live_capture_request: metrics of every head, the last layer's raw scores, probabilities up to 1024
// tokens, one head's rows past the device's layer-rows threshold; top-k next tokens and loss), for a global
// temperature change (every layer re-runs), a change of the last layer only and, when the runs hold one head's
// rows, a switch to another head (a re-run of the layer for its rows). Prints medians in ms.
// Threads: OMP_NUM_THREADS (the app's worker uses all cores but one). --device / --precision as the CLI's (the GPU
// device check times the 8B shape's propagate at T = 4096 this way).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/error.h"
#include "focal/model.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::puts(
        "usage: live_bench MODEL [T] [reps] [--device auto|cpu|cuda] [--precision auto|exact|fast] [--no-recycle]\n\n"
        "Median ms of the app's propagate (LiveRunner::run) for a global t change, a last-layer change and (when the "
        "runs hold one head's rows) a head switch, each run "
        "into the buffers of the result before the last, as the app does (--no-recycle: fresh buffers each run). "
        "Threads: OMP_NUM_THREADS.");
    return argc < 2 ? 2 : 0;
  }
  try {
    std::vector<std::string> pos;
    focal::Device device = focal::Device::kCpu;
    focal::LoadOptions lo;
    bool recycle = true;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--no-recycle")
        recycle = false;
      else if (a == "--device" && i + 1 < argc)
        device = focal::parse_device(argv[++i]);
      else if (a == "--precision" && i + 1 < argc)
        lo.precision = focal::parse_precision(argv[++i]);
      else
        pos.push_back(a);
    }
    auto model = focal::Model::load(pos.at(0), focal::resolve_device(device), lo);
    const focal::ModelConfig& c = model->config();
    const int T = pos.size() > 1 ? std::atoi(pos[1].c_str()) : 512,
              reps = pos.size() > 2 ? std::atoi(pos[2].c_str()) : 15;
    std::vector<int32_t> tokens(T);
    for (int i = 0; i < T; ++i) tokens[i] = i == 0 ? c.bos_id : 3 + (i * 7919) % (c.vocab_size - 3);
    // The request the app makes for the last layer's head 0 (focal::live_capture_request, the app's defaults)
    focal::CaptureRequest req = focal::live_capture_request(c, model->device(), T, c.n_layers - 1, 0);
    focal::LiveRunner runner(*model);
    focal::RunCapture prev, out, spare;  // as the app holds them: the last result, the new one, the one before
    focal::TempSpec spec = focal::TempSpec::focal(0.4f);
    runner.run(tokens, spec, req, "warm", nullptr, &prev);
    auto time_ms = [&](auto&& change) {
      std::vector<double> ms;
      for (int r = 0; r < reps; ++r) {
        change(r);
        const auto t0 = std::chrono::steady_clock::now();
        runner.run(tokens, spec, req, "run", &prev, &out, {}, {}, nullptr, recycle ? &spare : nullptr);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        spare = std::move(prev);
        prev = std::move(out);
        out = focal::RunCapture();
      }
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2];
    };
    const double global = time_ms([&](int r) { spec = focal::TempSpec::focal(r % 2 ? 0.4f : 0.3f); });
    const double last = time_ms([&](int r) { spec.layer_temp[c.n_layers - 1] = r % 2 ? 0.5f : 0.25f; });
    // Another head, when the runs hold the viewed head's rows only: the app re-runs the layer for its rows.
    const bool one_head = !req.heads.empty();
    const double head = one_head ? time_ms([&](int r) { req.heads = {(r + 1) % c.n_heads}; }) : 0.0;
    std::printf("T %d  global t change %.1f ms  last-layer change %.1f ms", T, global, last);
    if (one_head) std::printf("  head switch %.1f ms", head);
    std::printf("  (median of %d; %s, precision %s; %s; %s, %s)\n", reps, focal::device_name(model->device()),
                focal::precision_name(model->precision()), recycle ? "recycled buffers" : "fresh buffers",
                one_head ? "the viewed head's rows" : "every head's rows",
                req.store_probs ? "probabilities and scores" : "scores");
    std::printf("result propagate_T%d_ms %.1f\n", T, global);
    if (one_head) std::printf("result head_switch_T%d_ms %.1f\n", T, head);
  } catch (const focal::Error& e) {
    std::fprintf(stderr, "live_bench: %s\n", e.what());
    return 1;
  }
}
