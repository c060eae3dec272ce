// Model.run, Model.sweep and Model.generate (py_runs.h).
#include "py_runs.h"

#include <cmath>
#include <functional>

#include "focal/error.h"
#include "py_convert.h"
#include "py_errors.h"

namespace focalscope::py {

focal::CaptureRequest make_request(const focal::ModelConfig& cfg, int T, nb::handle layers, nb::handle heads,
                                   nb::handle queries, bool probs, bool scores, bool fp16, int topk, int topk_mass,
                                   nb::handle relevant, nb::handle budget) {
  focal::CaptureRequest req;
  req.layers = index_list(layers, cfg.n_layers, "layers", "layer", "the model has");
  req.heads = index_list(heads, cfg.n_heads, "heads", "head", "the model has");
  req.queries = index_list(queries, T, "queries", "query position", "the prompt has");
  req.store_probs = probs;
  req.store_scores = scores;
  req.probs_fp16 = fp16;
  req.topk_tokens = topk;
  req.run.topk_mass_k = topk_mass;
  for (int p : index_list(relevant, T, "relevant", "key position", "the prompt has")) req.run.relevant.push_back(p);
  req.budget_bytes = parse_budget(budget);
  return req;
}

PyCapture model_run(PyModel& m, nb::handle prompt, nb::handle temp, nb::handle layers, nb::handle heads,
                    nb::handle queries, nb::handle compare, std::optional<std::string> name, bool probs, bool scores,
                    bool fp16, int topk, int topk_mass, nb::handle relevant, nb::handle budget, nb::handle progress) {
  const focal::ModelConfig& cfg = m.cfg();
  const focal::TempSpec spec = to_spec(temp, cfg);
  const std::vector<int32_t> ids = m.ids_of(prompt);
  const focal::CaptureRequest req = make_request(cfg, (int)ids.size(), layers, heads, queries, probs, scores, fp16,
                                                 topk, topk_mass, relevant, budget);
  // As `focal capture`: the main run, and with compare= a second one and the per-row KL / JS between them.
  std::vector<std::pair<std::string, focal::TempSpec>> runs = {{name ? *name : spec.label(), spec}};
  if (name && (name->empty() || name->find('/') != std::string::npos))
    raise(PyExc_ValueError, "name: a run name must be non-empty and contain no '/'");
  if (!compare.is_none()) {
    focal::TempSpec other = to_spec(compare, cfg, "compare");
    std::string other_name = other.label();
    if (other_name == runs[0].first) other_name += "_b";
    runs.push_back({other_name, other});
  }
  focal::validate_capture_request(cfg, (int)ids.size(), req, (int)runs.size());

  PyCapture out;
  out.probs_fp16 = fp16 && probs;
  out.file = focal::make_capture_file(*m.model, ids);
  out.file.relevant = req.run.relevant;
  focal::CaptureRequest run_req = req;
  if (runs.size() == 2) run_req.probs_fp16 = false;  // KL / JS from the fp32 rows; save() still stores fp16
  PendingError pending;
  const bool has_progress = !progress.is_none();
  for (auto& [run_name, s] : runs) {
    focal::RunCapture rc;
    bool done;
    {
      nb::gil_scoped_release rel;
      std::lock_guard<std::mutex> lock(m.mu);
      std::function<void(int, int)> prog;
      if (has_progress) prog = [&, rn = run_name](int d, int t) { pending.call([&] { progress(rn, d, t); }); };
      done = focal::capture_run_cancellable(
          *m.model, ids, s, run_req, run_name, &rc, [&] { return pending.poll(); }, prog);
    }
    pending.rethrow();
    if (!done) raise(PyExc_KeyboardInterrupt, "run cancelled");
    out.file.runs.push_back(std::move(rc));
  }
  if (runs.size() == 2 && req.store_probs) {
    nb::gil_scoped_release rel;
    out.file.comparisons.push_back(focal::compare_runs(out.file, runs[0].first, runs[1].first));
  }
  return out;
}

focal::SweepFile model_sweep(PyModel& m, nb::handle prompt, const std::vector<double>& temps, nb::handle temp,
                             nb::handle relevant, int topk_mass, nb::handle progress) {
  const focal::ModelConfig& cfg = m.cfg();
  const focal::TempSpec base = to_spec(temp, cfg);
  const std::vector<int32_t> ids = m.ids_of(prompt);
  if (temps.empty()) raise(PyExc_ValueError, "temps: give at least one temperature");
  std::vector<float> ts;
  ts.reserve(temps.size());
  for (double t : temps) ts.push_back(check_temp(t, "temps: every temperature"));
  focal::RunOptions run;
  run.topk_mass_k = topk_mass;
  for (int p : index_list(relevant, (int)ids.size(), "relevant", "key position", "the prompt has"))
    run.relevant.push_back(p);
  PendingError pending;
  focal::SweepFile sf;
  const bool has_progress = !progress.is_none();
  try {
    nb::gil_scoped_release rel;
    std::lock_guard<std::mutex> lock(m.mu);
    sf = focal::run_sweep(
        *m.model, ids, base, ts, run,
        [&](size_t s) {
          if (has_progress) pending.call([&] { progress(ts[s], s + 1, ts.size()); });
        },
        [&] { return pending.poll(); });
  } catch (const focal::Error&) {
    pending.rethrow();
    throw;
  }
  pending.rethrow();
  return sf;
}

struct StopGeneration {};

PyGeneration model_generate(PyModel& m, nb::handle prompt, int n_new, nb::handle temp, double sample_temp, int top_k,
                            uint64_t seed, bool stop_at_eos, nb::handle on_token, bool capture, nb::handle layers,
                            nb::handle heads, bool probs, bool scores, bool fp16) {
  const focal::ModelConfig& cfg = m.cfg();
  const focal::TempSpec spec = to_spec(temp, cfg);
  const std::vector<int32_t> prompt_ids = m.ids_of(prompt);
  if (n_new < 1) raise(PyExc_ValueError, "n: generate at least 1 token");
  if (!std::isfinite(sample_temp) || sample_temp < 0) raise(PyExc_ValueError, "sample_temp: must be >= 0 (0: greedy)");
  if (top_k < 0) raise(PyExc_ValueError, "top_k: must be >= 0 (0: the whole vocabulary)");
  if ((int)prompt_ids.size() >= cfg.max_positions)
    raise(PyExc_ValueError, "prompt: the prompt fills the model's context; nothing to generate");
  const int cap = std::min(cfg.max_positions, (int)prompt_ids.size() + n_new);
  focal::CaptureRequest req;
  if (capture) {
    req = make_request(cfg, cap, layers, heads, nb::none(), probs, scores, fp16, 10, 5, nb::none(), nb::none());
    focal::validate_capture_request(cfg, cap, req, 1);
  }
  const focal::Tokenizer* tok = m.model->tokenizer();
  focal::SampleOptions so;
  so.sample_temp = (float)sample_temp;
  so.top_k = top_k;
  so.seed = seed;
  so.stop_at_eos = stop_at_eos;

  struct CancelObserver final : focal::ForwardObserver {
    PendingError* p;
    bool cancelled() const override { return p->poll(); }
  } obs;
  PendingError pending;
  obs.p = &pending;
  PyGeneration g;
  g.prompt_ids = prompt_ids;
  std::vector<int32_t> all = prompt_ids;
  const bool has_cb = !on_token.is_none();
  {
    nb::gil_scoped_release rel;
    std::lock_guard<std::mutex> lock(m.mu);
    focal::Session s(*m.model, cap);
    try {
      focal::generate(s, prompt_ids, n_new, spec, so, focal::RunOptions{}, &obs, [&](int32_t id) {
        std::string piece;
        if (tok) {
          const std::string before = tok->decode(all);
          all.push_back(id);
          const std::string after = tok->decode(all);
          piece = after.substr(std::min(before.size(), after.size()));
        } else {
          all.push_back(id);
        }
        g.ids.push_back(id);
        bool stop = false;
        if (has_cb)
          pending.call([&] {
            nb::object r = on_token(id, piece);
            stop = r.is(nb::handle(Py_False));
          });
        if (stop || pending.pending()) throw StopGeneration{};
      });
    } catch (const StopGeneration&) {}
  }
  pending.rethrow();
  if (tok) {
    const std::string full = tok->decode(all), head = tok->decode(prompt_ids);
    g.text = full.substr(std::min(head.size(), full.size()));
  }
  if (capture) {
    // As `focal generate --capture`: prompt + generated tokens re-run in one pass.
    PyCapture pc;
    pc.probs_fp16 = fp16 && probs;
    pc.file = focal::make_capture_file(*m.model, all);
    pc.file.n_prompt_tokens = (int)prompt_ids.size();  // where generation begins, as `focal generate --capture`
    focal::RunCapture rc;
    bool done;
    {
      nb::gil_scoped_release rel;
      std::lock_guard<std::mutex> lock(m.mu);
      done =
          focal::capture_run_cancellable(*m.model, all, spec, req, spec.label(), &rc, [&] { return pending.poll(); });
    }
    pending.rethrow();
    if (!done) raise(PyExc_KeyboardInterrupt, "run cancelled");
    pc.file.runs.push_back(std::move(rc));
    g.capture = std::move(pc);
  }
  return g;
}

}  // namespace focalscope::py
