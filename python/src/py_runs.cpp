// Model.run, Model.sweep and Model.generate (py_runs.h).
#include "py_runs.h"

#include <cmath>
#include <functional>
#include <limits>

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

namespace {

using Settings = std::vector<std::pair<std::string, focal::TempSpec>>;

// The main setting (named `name`, else by its label) and, with compare, a second one (a clash of names gets "_b"),
// as `focal capture` / `focal generate --compare` name them.
Settings settings_of(const focal::ModelConfig& cfg, const focal::TempSpec& spec, nb::handle compare,
                     const std::optional<std::string>& name) {
  if (name && (name->empty() || name->find('/') != std::string::npos))
    raise(PyExc_ValueError, "name: a run name must be non-empty and contain no '/'");
  if (name)  // as focal capture --name
    if (const std::string other = spec.other_setting_named(*name, &cfg); !other.empty())
      raise(PyExc_ValueError, "name: '" + *name + "' names the setting " + other + ", and the run is " + spec.label() +
                                  ": give another name, or leave name out");
  Settings runs = {{name ? *name : spec.label(), spec}};
  if (!compare.is_none()) {
    focal::TempSpec other = to_spec(compare, cfg, "compare");
    std::string other_name = other.label();
    if (other_name == runs[0].first) other_name += "_b";
    runs.push_back({other_name, other});
  }
  return runs;
}

// Checks the request for these settings against its budget. Comparing without stored probabilities runs the two
// settings in lockstep, holding one layer's compared rows of the first run (fp32) until the second has run that
// layer (focal::capture_runs_lockstep).
void check_settings(const focal::ModelConfig& cfg, int T, const focal::CaptureRequest& req, const Settings& runs) {
  focal::validate_capture_request(cfg, T, req, (int)runs.size());
  if (runs.size() == 2 && !req.store_probs) {
    const size_t held = focal::capture_held_row_bytes(cfg, T, req);
    const size_t need = 2 * focal::estimate_capture_bytes(cfg, T, req) + held;
    if (need > req.budget_bytes)
      raise(PyExc_ValueError,
            "budget: the comparison holds one layer's compared rows of the first run (" + std::to_string(held >> 20) +
                " MiB) beside the two runs, about " + std::to_string(need >> 20) + " MiB in all, over the budget of " +
                std::to_string(req.budget_bytes >> 20) + " MiB: narrow heads or queries, or raise budget");
  }
}

// Runs every setting over out.file.token_ids into out.file.runs, and with two settings the per-row KL / JS between
// them, as the CLI's capture_settings_into: from the fp32 rows (also when the file stores fp16). With probabilities
// stored, compare_runs compares the two runs' rows, as the CLI does. Without (probs=False), the two runs go in
// lockstep a layer at a time (focal::capture_runs_lockstep: the same numbers), holding one layer's compared rows of
// the first run, so neither run's T^2 rows are kept.
void capture_settings_into(PyModel& m, PyCapture& out, const Settings& runs, const focal::CaptureRequest& req,
                           nb::handle progress) {
  const std::vector<int32_t>& ids = out.file.token_ids;
  focal::CaptureRequest run_req = req;
  if (runs.size() == 2) run_req.probs_fp16 = false;  // KL / JS from the fp32 rows; save() still stores fp16
  PendingError pending;
  const bool has_progress = !progress.is_none();
  auto run_locked = [&](const std::string& label, const auto& body) {
    bool done;
    {
      nb::gil_scoped_release rel;
      std::lock_guard<std::mutex> lock(m.mu);
      std::function<void(int, int)> prog;
      if (has_progress) prog = [&, label](int d, int t) { pending.call([&] { progress(label, d, t); }); };
      auto cancelled = [&] { return pending.poll(); };
      done = body(cancelled, prog);
    }
    pending.rethrow();
    if (!done) raise(PyExc_KeyboardInterrupt, "run cancelled");
  };
  if (runs.size() == 2 && !req.store_probs) {
    focal::RunCapture a, b;
    focal::Comparison cmp;
    run_locked(runs[0].first + " vs " + runs[1].first, [&](const auto& cancelled, const auto& prog) {
      return focal::capture_runs_lockstep(*m.model, ids, runs[0].second, runs[0].first, runs[1].second, runs[1].first,
                                          run_req, &a, &b, &cmp, cancelled, prog);
    });
    out.file.runs.push_back(std::move(a));
    out.file.runs.push_back(std::move(b));
    out.file.comparisons.push_back(std::move(cmp));
    return;
  }
  for (const auto& [run_name, s] : runs) {
    focal::RunCapture rc;
    run_locked(run_name, [&, &s = s, &run_name = run_name](const auto& cancelled, const auto& prog) {
      return focal::capture_run_cancellable(*m.model, ids, s, run_req, run_name, &rc, cancelled, prog);
    });
    out.file.runs.push_back(std::move(rc));
  }
  if (runs.size() == 2) {
    nb::gil_scoped_release rel;
    out.file.comparisons.push_back(focal::compare_runs(out.file, runs[0].first, runs[1].first));
  }
}

}  // namespace

PyCapture model_run(PyModel& m, nb::handle prompt, nb::handle temp, nb::handle layers, nb::handle heads,
                    nb::handle queries, nb::handle compare, const std::optional<std::string>& name, bool probs,
                    bool scores, bool fp16, int topk, int topk_mass, nb::handle relevant, nb::handle budget,
                    nb::handle progress) {
  callable_arg(progress, "progress", "progress(run_name, layers_done, n_layers)");
  const focal::ModelConfig& cfg = m.cfg();
  const focal::TempSpec spec = to_spec(temp, cfg);
  const std::vector<int32_t> ids = m.ids_of(prompt);
  const focal::CaptureRequest req = make_request(cfg, (int)ids.size(), layers, heads, queries, probs, scores, fp16,
                                                 topk, topk_mass, relevant, budget);
  // As `focal capture`: the main run, and with compare= a second one and the per-row KL / JS between them.
  const Settings runs = settings_of(cfg, spec, compare, name);
  check_settings(cfg, (int)ids.size(), req, runs);

  PyCapture out;
  out.probs_fp16 = fp16 && probs;
  out.file = focal::make_capture_file(*m.model, ids);
  out.file.relevant = req.run.relevant;
  capture_settings_into(m, out, runs, req, progress);
  return out;
}

focal::SweepFile model_sweep(PyModel& m, nb::handle prompt, const std::vector<double>& temps, nb::handle temp,
                             nb::handle relevant, int topk_mass, nb::handle progress) {
  callable_arg(progress, "progress", "progress(t, done, total)");
  const focal::ModelConfig& cfg = m.cfg();
  focal::TempSpec base = to_spec(temp, cfg);
  if (!temp.is_none() && base.mode != focal::AttnMode::kFocal &&
      base.temp_file.empty())  // as `focal sweep --temp/--mode`; a temperature file: run_sweep names it
    raise(PyExc_ValueError,
          std::string("temp: a sweep runs focal attention at each t of temps; the setting given is ") +
              focal::attn_mode_name(base.mode) + " (leave temp out, or give a focal one)");
  base.mode = focal::AttnMode::kFocal;  // temp=None: the native overrides (if any) stay; t is swept
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
                            nb::handle seed, bool stop_at_eos, nb::handle on_token, bool capture, nb::handle compare,
                            nb::handle layers, nb::handle heads, bool probs, bool scores, bool fp16, nb::handle queries,
                            const std::optional<std::string>& name, int topk, int topk_mass, nb::handle relevant,
                            nb::handle budget) {
  callable_arg(on_token, "on_token", "on_token(id, text)");
  const focal::ModelConfig& cfg = m.cfg();
  const focal::TempSpec spec = to_spec(temp, cfg);
  const std::vector<int32_t> prompt_ids = m.ids_of(prompt);
  if (n_new < 1) raise(PyExc_ValueError, "n: generate at least 1 token");
  if (!std::isfinite(sample_temp) || sample_temp < 0) raise(PyExc_ValueError, "sample_temp: must be >= 0 (0: greedy)");
  if (top_k < 0) raise(PyExc_ValueError, "top_k: must be >= 0 (0: the whole vocabulary)");
  if (top_k > 0 && sample_temp == 0)  // as focal generate: greedy decoding would ignore it without a word
    raise(PyExc_ValueError,
          "top_k: " + std::to_string(top_k) +
              " shapes sampling, and the decoding is greedy: give sample_temp above 0, or leave top_k 0");
  if (!seed.is_none() && sample_temp == 0)  // likewise
    raise(PyExc_ValueError, "seed: " + nb::cast<std::string>(nb::str(seed)) +
                                " shapes sampling, and the decoding is greedy: give sample_temp above 0, or leave "
                                "seed out");
  // As `focal generate`: a rotary model generates past the trained context (one UserWarning, for the longest
  // sequence, unless the prompt already warned); a learned position table (GPT-2) stops at its end.
  const bool learned = cfg.arch.position == focal::PositionKind::kLearned;
  if ((int64_t)prompt_ids.size() + n_new > INT32_MAX)  // a session holds at most 2^31 - 1 positions
    raise(PyExc_ValueError, "n: " + std::to_string(prompt_ids.size()) + " prompt tokens and " + std::to_string(n_new) +
                                " new ones pass the 2147483647 positions a session holds; ask for fewer");
  if (learned && (int)prompt_ids.size() >= cfg.max_positions)
    raise(PyExc_ValueError, "prompt: the prompt fills the model's learned position table (" +
                                std::to_string(cfg.max_positions) + " positions); nothing to generate");
  const int cap =
      learned ? std::min(cfg.max_positions, (int)prompt_ids.size() + n_new) : (int)prompt_ids.size() + n_new;
  if (!learned && (int)prompt_ids.size() <= cfg.max_positions) {
    const std::string w = focal::context_length_warning(cfg, cap);
    if (!w.empty() && PyErr_WarnEx(PyExc_UserWarning, ("generate: " + w).c_str(), 1) != 0) throw nb::python_error();
  }
  if (!compare.is_none() && !capture)
    raise(PyExc_ValueError,
          "compare: needs capture=True (it is a second run recorded in the capture, as "
          "`focal generate --capture FILE --compare SPEC`)");
  if (!capture) {  // the capture's own options (as the CLI's without --capture): named, not ignored
    std::string given;
    auto note = [&](bool set, const char* what) {
      if (set) given += std::string(given.empty() ? "" : ", ") + what;
    };
    note(!layers.is_none(), "layers");
    note(!heads.is_none(), "heads");
    note(!queries.is_none(), "queries");
    note(!relevant.is_none(), "relevant");
    note(!budget.is_none(), "budget");
    note(name.has_value(), "name");
    note(probs != kDefaultProbs, "probs");  // a default value passes (the same call with capture=True would too)
    note(scores != kDefaultScores, "scores");
    note(fp16 != kDefaultFp16, "fp16");
    note(topk != kDefaultTopk, "topk");
    note(topk_mass != kDefaultTopkMass, "topk_mass");
    if (!given.empty())
      raise(PyExc_ValueError, given +
                                  ": need capture=True (they describe the capture; without it they would be "
                                  "ignored)");
  }
  focal::CaptureRequest req;
  Settings runs;
  if (capture) {  // checked before generating, against the longest sequence the generation can produce
    req = make_request(cfg, cap, layers, heads, queries, probs, scores, fp16, topk, topk_mass, relevant, budget);
    runs = settings_of(cfg, spec, compare, name);
    check_settings(cfg, cap, req, runs);
  }
  const focal::Tokenizer* tok = m.model->tokenizer();
  focal::SampleOptions so;
  so.sample_temp = (float)sample_temp;
  so.top_k = top_k;
  so.seed = 1;
  if (!seed.is_none()) {
    if (!nb::isinstance<nb::int_>(seed)) raise(PyExc_TypeError, "seed: an integer >= 0");
    // The CLI's range, 0 .. 2^64 - 1 (a seed of 2^63 or more failed with "std::bad_cast" through long long).
    if (!nb::try_cast<uint64_t>(seed, so.seed))
      raise(PyExc_ValueError, "seed: " + nb::cast<std::string>(nb::str(seed)) +
                                  " is out of range: give an integer in 0.." +
                                  std::to_string(std::numeric_limits<uint64_t>::max()));
  }
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
  size_t sent = tok ? tok->decode(all).size() : 0;  // bytes of the text handed to on_token so far, prompt included
  {
    nb::gil_scoped_release rel;
    std::lock_guard<std::mutex> lock(m.mu);
    focal::Session s(*m.model, cap);
    try {
      focal::generate(s, prompt_ids, n_new, spec, so, focal::RunOptions{}, &obs, [&](int32_t id) {
        std::string piece;  // the text this token completes: up to the last whole character (utf8_whole_end)
        all.push_back(id);
        if (tok) {
          const std::string after = tok->decode(all);
          const size_t end = utf8_whole_end(after);
          if (end > sent) piece = after.substr(sent, end - sent);
          sent = std::max(sent, end);
        }
        g.ids.push_back(id);
        bool stop = false;
        if (has_cb)
          pending.call([&] {
            nb::object r = tok ? on_token(id, text_of(piece)) : on_token(id, nb::none());
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
    // As `focal generate --capture [--compare SPEC]`: prompt + generated tokens re-run in one pass per setting (the
    // second setting re-runs exactly these tokens; it does not generate its own).
    // As the CLI: positions named past the tokens generated (it stopped early at end of text) are an error.
    std::string note;  // a learned position table's end (GPT-2): the last token is left out, as the CLI says
    all.resize(focal::generation_capture_tokens(m.model->config(), all.size(), &note));
    if (!note.empty() && PyErr_WarnEx(PyExc_UserWarning, ("generate: " + note).c_str(), 1) != 0)
      throw nb::python_error();
    const int n_all = (int)all.size();
    for (int q : req.queries)
      if (q >= n_all)
        raise(PyExc_ValueError, "queries: position " + std::to_string(q) + " lies beyond the " + std::to_string(n_all) +
                                    " tokens generated (generation stopped early at end of text)");
    for (int p : req.run.relevant)
      if (p >= n_all)
        raise(PyExc_ValueError, "relevant: position " + std::to_string(p) + " lies beyond the " +
                                    std::to_string(n_all) +
                                    " tokens generated (generation stopped early at end of text)");
    PyCapture pc;
    pc.probs_fp16 = fp16 && probs;
    pc.file = focal::make_capture_file(*m.model, all);
    pc.file.relevant = req.run.relevant;
    pc.file.n_prompt_tokens = (int)prompt_ids.size();  // where generation begins, as `focal generate --capture`
    capture_settings_into(m, pc, runs, req, nb::none());
    g.capture = std::move(pc);
  }
  return g;
}

}  // namespace focalscope::py
