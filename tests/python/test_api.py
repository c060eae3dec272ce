# The Python API itself: shapes, dtypes and hand-checkable values, zero-copy views, errors as Python exceptions
# naming the problem, cancellation between layers (Ctrl-C), the GIL released during a forward.
import math
import os
import re
import signal
import sys
import threading
import time

import numpy as np
import pytest

from conftest import FOCAL, LEARNED, ROOT, STANDARD

PROMPT = "The cat sat on the mat. The dog sat on the log."


@pytest.fixture(scope="module")
def cap(models):
    return models[FOCAL].run(PROMPT, "focal:0.4", compare="standard", layers=[1, 3], heads=[0, 5], queries=[2, 7, 12])


def test_shapes_dtypes_and_values(models, cap):
    m = models[FOCAL]
    T = len(m.tokenize(PROMPT))
    assert (m.n_layers, m.n_heads, m.d_head, m.vocab_size) == (4, 6, 32, 4096)
    assert cap.n_tokens == T and cap.runs == ["focal_t0.4", "standard"]
    p = cap.probs("focal_t0.4", 3, 5)
    assert p.shape == (3, T) and p.dtype == np.float32 and not p.flags.writeable
    assert cap.probs("standard").shape == (2, 2, 3, T)
    assert cap.probs(1, layer=1).shape == (2, 3, T)
    assert cap.probs(1, head=5).shape == (2, 3, T)
    assert cap.scores("standard", 1, 0).shape == (3, T)
    for c, q in enumerate(cap.queries()):
        # each row is a distribution over keys 0..q; keys after the query are stored as 0
        assert math.isclose(float(p[c, : q + 1].sum(dtype=np.float64)), 1.0, rel_tol=1e-5)
        assert not p[c, q + 1 :].any()
        # probs = softmax(scores * row_scale) over the visible keys
        s = cap.scores("focal_t0.4", 3, 5)[c, : q + 1].astype(np.float64) * cap.row_scale("focal_t0.4")[3, 5, q]
        ref = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
        np.testing.assert_allclose(p[c, : q + 1], ref, rtol=2e-5, atol=1e-7)
    # focal t = 0.4: every row's logits are scaled by 1/0.4; standard: by 1
    assert np.all(cap.row_scale("focal_t0.4") == np.float32(1 / np.float32(0.4)))
    assert np.all(cap.row_scale("standard") == 1.0)
    met = cap.metrics("focal_t0.4")
    assert met.shape == (4, 6, T, 8) and met.dtype == np.float32
    assert cap.metric_names == ["entropy_nats", "entropy_norm", "eff_support", "max_prob", "topk_mass", "tail_mass",
                                "sink_mass", "relevant_mass"]
    # row 0 sees one key: entropy 0, max and sink 1; relevant_mass is NaN without relevant keys
    assert np.all(met[:, :, 0, 0] == 0) and np.all(met[:, :, 0, 3] == 1) and np.all(met[:, :, 0, 6] == 1)
    assert np.all(np.isnan(met[..., 7]))
    np.testing.assert_allclose(met[..., 2], np.exp(met[..., 0]), rtol=1e-5)
    ids, tp = cap.topk()
    assert ids.shape == tp.shape == (T, 10) and ids.dtype == np.int32 and tp.dtype == np.float32
    assert np.all(np.diff(tp, axis=1) <= 0) and np.all(tp.sum(1) <= 1.0 + 1e-6)
    # the stored text of the next tokens: the model's own pieces of those ids, row by row, for each run
    for run in ("focal_t0.4", "standard"):
        ids_r = cap.topk(run)[0]
        assert cap.topk_pieces(run) == [m.pieces(row) for row in ids_r]
    assert cap.tau("focal_t0.4") is None
    nll = cap.token_nll()
    assert nll.shape == (T,) and np.isnan(nll[-1]) and np.all(nll[:-1] > 0)
    kl, js = cap.kl_js("focal_t0.4", "standard")
    assert kl.shape == js.shape == (2, 2, 3) and kl.dtype == np.float32
    assert np.all(kl >= 0) and np.all(js >= 0) and np.all(js <= math.log(2) + 1e-6)
    kl_aa, js_aa = cap.kl_js(0, 0)
    assert np.all(kl_aa == 0) and np.all(js_aa == 0)
    assert cap.tokens.dtype == np.int32 and cap.tokens.tolist() == m.tokenize(PROMPT).tolist()
    assert m.detokenize(cap.tokens) == PROMPT and len(cap.pieces) == T


def test_learned_tau_and_spec(models):
    m = models[LEARNED]
    assert m.native_temp.mode == "learned"
    cap = m.run(PROMPT, probs=False, scores=False)
    tau = cap.tau()
    assert tau.shape == (4, cap.n_tokens) and np.all(tau > 0)
    half = m.run(PROMPT, "learned:0.5", probs=False, scores=False)
    # tau_used = tau * tau_scale, so the logit multiplier sqrt(d)/tau doubles
    np.testing.assert_allclose(half.tau(), tau * 0.5, rtol=1e-6)
    assert half.temp_spec().tau_scale == 0.5 and half.runs == ["learned_x0.5"]


def spec_table():
    """The shared table of the one spec grammar (tests/data/temp_specs.tsv), as the CLI and the app walk it."""
    rows = []
    for line in (ROOT / "tests" / "data" / "temp_specs.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            rows.append(line.split("\t"))
    assert len(rows) >= 30
    return rows


def test_temp_takes_the_shared_spec_table(fs, models):
    # temp= on the bundled learned-tau model (native = learned, 4 layers, 6 heads): a valid spec is the run's stored
    # setting; a malformed one a ValueError, one the model cannot take a FocalError, each with the table's phrase.
    m = models[LEARNED]
    for row in spec_table():
        spec = row[0]
        if row[1] != "error":
            cap = m.run("the cat", spec, probs=False, scores=False)
            assert cap.temp_spec().text == row[1], spec
            assert fs.TempSpec.parse(cap.temp_spec().text) == cap.temp_spec(), spec
            continue
        with pytest.raises((ValueError, fs.FocalError)) as err:
            m.run("the cat", spec, probs=False, scores=False)
        assert row[2] in str(err.value), (spec, str(err.value))


def test_views_are_zero_copy_and_keep_the_capture_alive(models):
    cap = models[FOCAL].run(PROMPT, layers=[2], heads=[1])
    whole = cap.probs()
    one = cap.probs(0, 2, 1)
    assert np.shares_memory(whole, one)
    assert whole.__array_interface__["data"][0] == cap.probs().__array_interface__["data"][0]
    met = cap.metrics()
    ref = met.copy()
    del cap
    import gc
    gc.collect()
    assert np.array_equal(met, ref, equal_nan=True) and one.sum() > 0  # still valid memory after the capture object went away


def test_temp_forms_agree(fs, models):
    m = models[STANDARD]
    a = m.run(PROMPT, "focal:0.4", probs=False, scores=False)
    for t in (0.4, "0.4", fs.TempSpec(0.4), fs.TempSpec.parse("focal:0.4")):
        b = m.run(PROMPT, t, probs=False, scores=False)
        assert b.runs == ["focal_t0.4"] and np.array_equal(a.metrics(), b.metrics(), equal_nan=True)
    assert fs.TempSpec(0.4) == fs.TempSpec.parse("focal:0.4")
    s = fs.TempSpec(0.5, layer_temp={0: 1.0}, head_temp={(2, 1): 0.3})
    assert s.mode == "focal" and s.layer_temp == {0: 1.0} and s.head_temp == {(2, 1): 0.3}
    # The temperatures as given, not float32 widened (0.30000001192092896): comparisons with the literal hold.
    assert fs.TempSpec(0.3).t == 0.3 and fs.TempSpec(mode="learned", tau_scale=0.8).tau_scale == 0.8
    assert fs.TempSpec.from_json(s.to_json()) == s
    std = m.run(PROMPT, "standard", probs=False, scores=False)
    native = m.run(PROMPT, None, probs=False, scores=False)  # the standard model's native setting is standard
    assert np.array_equal(std.metrics(), native.metrics(), equal_nan=True)


def test_selections_in_any_accepted_form(models):
    m = models[FOCAL]
    ref = m.run(PROMPT, layers=[1, 3], heads=[2])
    for layers, heads in ((np.array([1, 3]), np.int64(2)), ((1, 3), [2]), (range(1, 4, 2), np.array([2]))):
        c = m.run(PROMPT, layers=layers, heads=heads)
        assert c.layers() == [1, 3] and c.heads() == [2] and np.array_equal(c.probs(), ref.probs())
    assert m.run(PROMPT, layers=2).layers() == [2]
    with pytest.raises(TypeError, match="layers: expected None, an int or a sequence of ints, got bool"):
        m.run(PROMPT, layers=True)
    with pytest.raises(ValueError, match="heads: head 1 is listed twice"):
        m.run(PROMPT, heads=[1, 1])


def test_ids_in_any_accepted_form(models):
    m = models[FOCAL]
    ids = m.tokenize(PROMPT)
    a = m.run(PROMPT, probs=False, scores=False)
    for form in (ids, ids.tolist(), tuple(ids.tolist())):
        b = m.run(form, probs=False, scores=False)
        assert np.array_equal(a.metrics(), b.metrics(), equal_nan=True)


# --- errors ---------------------------------------------------------------------------------------------------------

def test_bad_input_raises_python_exceptions(fs, models, tmp_path):
    m = models[FOCAL]
    ids = m.tokenize(PROMPT)
    with pytest.raises(FileNotFoundError, match="no such model: '/nonexistent/model'"):
        fs.load("/nonexistent/model")
    with pytest.raises(FileNotFoundError, match="no such file"):
        fs.open_capture(tmp_path / "missing.h5")
    with pytest.raises(ValueError, match=r"t must be a number in \[1e-6, 1e6\] \(got -0.5\)"):
        m.run(PROMPT, -0.5)
    with pytest.raises(ValueError, match=r"'focal:0': t = 0 must be a number in \[1e-6, 1e6\]"):
        m.run(PROMPT, "focal:0")
    with pytest.raises(ValueError, match=r"\[1e-6, 1e6\]"):
        fs.TempSpec(0.0)
    # past fp32's reach: 1e-45 gave a row scale of inf and NaN probabilities, 1e-50 and 1e50 rounded to 0 and inf
    for t in (1e-45, 1e-50, 1e50, 1e7):
        with pytest.raises(ValueError, match=re.escape("(got %r)" % t)):
            fs.TempSpec(t)
    with pytest.raises(ValueError, match=re.escape("[1e-6, 1e6] (got -1.0)")):
        m.sweep(PROMPT, [0.5, -1.0])
    with pytest.raises(ValueError, match="'hot' is not a temperature setting"):
        m.run(PROMPT, "hot")
    with pytest.raises(IndexError, match=r"layers: layer 4 is out of range: the model has layers 0\.\.3"):
        m.run(PROMPT, layers=[0, 4])
    with pytest.raises(IndexError, match=r"heads: head -1 is out of range"):
        m.run(PROMPT, heads=-1)
    with pytest.raises(IndexError, match="queries: query position 99 is out of range"):
        m.run(PROMPT, queries=[99])
    with pytest.raises(TypeError, match="int32 array, got dtype int64"):
        m.run(ids.astype(np.int64))
    with pytest.raises(ValueError, match="not contiguous"):
        m.run(np.repeat(ids, 2)[::2])
    with pytest.raises(ValueError, match="1-D"):
        m.run(ids.reshape(1, -1))
    with pytest.raises(ValueError, match=r"token id 5000 at position 1 is outside the vocabulary \(0\.\.4095\)"):
        m.run([1, 5000])
    with pytest.raises(ValueError, match="empty"):
        m.run("")
    with pytest.raises(TypeError, match="expected a str"):
        m.run(3.5)
    with pytest.raises(ValueError, match="device"):
        fs.load(ROOT / FOCAL, device="gpu")
    with pytest.raises(ValueError, match="precision"):
        fs.load(ROOT / FOCAL, precision="half")
    # precision: the CPU always computes exact; fast on the CPU is refused, as by focal --precision
    assert fs.load(ROOT / FOCAL, device="cpu").precision == "exact"
    assert fs.load(ROOT / FOCAL, device="cpu", precision="exact").precision == "exact"
    with pytest.raises(fs.FocalError, match="precision fast runs on the CUDA backend only"):
        fs.load(ROOT / FOCAL, device="cpu", precision="fast")
    # runtime errors carry the runtime's message
    with pytest.raises(fs.FocalError, match="layer 9"):
        m.run(PROMPT, fs.TempSpec(0.4, layer_temp={9: 0.5}))
    with pytest.raises(fs.FocalError, match="budget"):
        m.run(PROMPT, budget="1K")
    bad = tmp_path / "bad_model"
    bad.mkdir()
    (bad / "config.json").write_text("{ not json")
    with pytest.raises(fs.FocalError, match="config.json"):
        fs.load(bad)
    gguf = tmp_path / "junk.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(fs.FocalError, match="junk.gguf"):
        fs.load(gguf)
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not an hdf5 file at all")
    with pytest.raises(fs.FocalError, match="junk.h5"):
        fs.open_capture(junk)
    cap = m.run(PROMPT, layers=[1], heads=[2])
    with pytest.raises(KeyError, match="run 'nope' is not in the capture"):
        cap.probs("nope")
    with pytest.raises(IndexError, match=r"layer 0 is not stored in run 'focal_t0.4' \(stored layers: 1\)"):
        cap.probs(0, 0, 2)
    with pytest.raises(IndexError, match="run index 3"):
        cap.metrics(3)
    with pytest.raises(ValueError, match="kind"):
        fs.show(cap, kind="pie")
    with pytest.raises(fs.FocalError, match="cannot|directory|write"):
        cap.save(tmp_path / "no_such_dir" / "x.h5")
    assert issubclass(fs.FocalError, RuntimeError)


# --- cancellation and the GIL ---------------------------------------------------------------------------------------

def long_ids(m, n=768):
    rng = np.random.default_rng(0)
    return rng.integers(3, m.vocab_size, size=n, dtype=np.int32)


def test_exception_in_progress_cancels_between_layers(models):
    m = models[FOCAL]
    seen = []

    def progress(run, done, total):
        seen.append((run, done, total))
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        m.run(PROMPT, compare="standard", progress=progress)
    assert seen == [("focal_t0.4", 1, 4), ("focal_t0.4", 2, 4)]  # stopped after layer 2; no second run
    # the model is still usable and gives the same results as before
    a = m.run(PROMPT, probs=False)
    b = m.run(PROMPT, probs=False)
    assert np.array_equal(a.metrics(), b.metrics(), equal_nan=True)


def test_ctrl_c_cancels_a_run_between_layers(models):
    """A real SIGINT arriving while the forward runs with the GIL released: the runtime polls between layers."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread")
    m = models[FOCAL]
    ids = long_ids(m)
    started = threading.Event()
    layers_done = []

    def progress(run, done, total):
        layers_done.append(done)
        started.set()

    def interrupt():
        started.wait(60)
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=interrupt)
    t.start()
    with pytest.raises(KeyboardInterrupt):
        m.run(ids, progress=progress)
    t.join()
    assert layers_done[0] == 1 and max(layers_done) < 4, layers_done  # cancelled before the last layer


def test_ctrl_c_cancels_generation_and_sweep(models):
    m = models[FOCAL]
    got = []

    def on_token(i, piece):
        got.append(i)
        if len(got) == 3:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        m.generate(PROMPT, 20, on_token=on_token, stop_at_eos=False)
    assert len(got) == 3
    temps_done = []

    def progress(t, done, total):
        temps_done.append(t)
        os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        m.sweep(PROMPT, [0.3, 0.5, 1.0], progress=progress)
    assert temps_done == [pytest.approx(0.3)]


def test_callbacks_and_timestamps_are_checked_before_the_run(fs, models, tmp_path):
    """progress=5 failed inside the run with "'int' object is not callable"; save(created_utc=) took any string."""
    m = models[FOCAL]
    with pytest.raises(TypeError, match=r"progress must be a function called as progress\(run_name"):
        m.run(PROMPT, progress=5)
    with pytest.raises(TypeError, match=r"progress must be a function called as progress\(t, done, total\)"):
        m.sweep(PROMPT, [0.5], progress="tick")
    with pytest.raises(TypeError, match=r"on_token must be a function"):
        m.generate(PROMPT, 2, on_token=3)
    cap = m.run(PROMPT, probs=False)
    for bad in ("yesterday", "2026-12-06", "2026-02-30T10:00:00Z", "2026-12-06T24:00:00Z", "2026-12-06 10:00:00Z"):
        with pytest.raises(ValueError, match="created_utc: .* YYYY-MM-DDTHH:MM:SSZ"):
            cap.save(tmp_path / "x.h5", created_utc=bad)
        assert not (tmp_path / "x.h5").exists()
    cap.save(tmp_path / "leap.h5", created_utc="2024-02-29T23:59:59Z")  # a leap day is a date
    assert fs.open_capture(tmp_path / "leap.h5").created_utc == "2024-02-29T23:59:59Z"


def test_on_token_stops_and_raises(models):
    m = models[FOCAL]
    got = []
    g = m.generate(PROMPT, 20, stop_at_eos=False, on_token=lambda i, s: got.append(i) or len(got) < 4)
    assert g.ids == got and len(g.ids) == 4

    def boom(i, s):
        raise ValueError("my callback failed")

    with pytest.raises(ValueError, match="my callback failed"):
        m.generate(PROMPT, 5, on_token=boom)
    sampled = m.generate(PROMPT, 8, sample_temp=0.8, top_k=20, seed=7, stop_at_eos=False)
    again = m.generate(PROMPT, 8, sample_temp=0.8, top_k=20, seed=7, stop_at_eos=False)
    assert sampled.ids == again.ids and len(sampled.ids) == 8
    # the seed takes the CLI's range, 0 .. 2^64 - 1 (2^63 and up failed with "std::bad_cast"); outside it is named
    top = m.generate(PROMPT, 3, sample_temp=0.8, seed=2**64 - 1, stop_at_eos=False)
    assert len(top.ids) == 3
    for bad in (-1, 2**64):
        with pytest.raises(ValueError, match=r"seed: -?\d+ is out of range: give an integer in 0\.\.18446744073709551615"):
            m.generate(PROMPT, 2, sample_temp=0.8, seed=bad)
    # a run name that spells another setting (as focal capture --name)
    with pytest.raises(ValueError, match="name: 'focal_t0.4' names the setting focal_t0.4, and the run is focal_t0.3"):
        m.run(PROMPT, 0.3, name="focal_t0.4")
    assert m.run(PROMPT, 0.3, name="focal_t0.3", probs=False).runs == ["focal_t0.3"]
    # no ids decode to no text (it raised "no tokens to run"), as transformers' decode([]) gives ''
    assert m.detokenize([]) == "" and m.pieces([]) == []
    # ... "native" (the model's own setting) and a compared run's "_b" form name settings too
    with pytest.raises(ValueError, match="name: 'native' names the setting "):
        m.run(PROMPT, 0.3, name="native")
    with pytest.raises(ValueError, match="name: 'standard_b' names the setting standard"):
        m.run(PROMPT, 0.3, name="standard_b")
    # top_k under greedy decoding would change nothing: refused, as `focal generate --top-k` without --sample-temp
    with pytest.raises(ValueError, match="top_k: 20 shapes sampling, and the decoding is greedy"):
        m.generate(PROMPT, 2, top_k=20)
    with pytest.raises(ValueError, match="seed: 5 shapes sampling, and the decoding is greedy"):
        m.generate(PROMPT, 2, seed=5)


def test_arguments_past_c_types_name_themselves(models):
    # nanobind's bare "std::bad_cast" (a RuntimeError) came through for these
    m = models[FOCAL]
    with pytest.raises(ValueError, match="prompt: the text has no UTF-8 spelling"):
        m.run("a\udcffb")
    with pytest.raises(ValueError, match="layers: 18446744073709551616 is out of range"):
        m.run("abc", layers=2**64)
    with pytest.raises(ValueError, match="budget: .* is out of range"):
        m.run("abc", budget=2**70)


def test_settings_record_what_applied(fs, models):
    # A mode's own number with another mode would do nothing: refused, as the CLI's --tau-scale / --ssmax-s
    with pytest.raises(ValueError, match="tau_scale: applies to mode='learned' only"):
        fs.TempSpec(0.4, tau_scale=0.8)
    with pytest.raises(ValueError, match="ssmax_s: applies to mode='ssmax' only"):
        fs.TempSpec(mode="standard", ssmax_s=2)
    # a spec read from JSON records what applied (a t under standard, a tau_scale under focal never scaled a logit)
    odd = fs.TempSpec.from_json(
        '{"focal_temp":0.5,"head_temp":[],"layer_temp":{},"mode":"standard","ssmax_s":2.0,"tau_scale":0.8}')
    assert odd == fs.TempSpec(mode="standard") and '"focal_temp":1.0' in odd.to_json()
    assert (fs.TempSpec(0.4) == None) is False  # noqa: E711 (another type: not equal, no TypeError)
    m = models[FOCAL]
    # a sweep runs focal attention at each t: another mode, or overrides on every layer, are refused
    with pytest.raises(ValueError, match="the setting given is ssmax"):
        m.sweep(PROMPT, [0.3, 0.5], temp="ssmax:2")
    with pytest.raises(fs.FocalError, match="would change nothing"):
        m.sweep(PROMPT, [0.3, 0.5], temp="focal:0.4+0=0.5+1=0.5+2=0.5+3=0.5")
    # a learned model's sweep (temp left out) still sweeps focal t
    assert len(models[LEARNED].sweep(PROMPT, [0.3, 0.5]).mean_nll) == 2


def test_files_from_the_real_world(fs, models, tmp_path):
    # A FIFO given as a file to read is refused at once (it blocked the open for ever, Ctrl-C included)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(fs.FocalError, match="not a regular file"):
        fs.open_capture(fifo)
    with pytest.raises(ValueError, match="is a FIFO, not a file"):
        models[FOCAL].run(PROMPT, "calibrated:%s" % fifo)
    # A capture that h5py holds open in the same session opens too (HDF5 refused it: "file locking flag values
    # don't match"), and reads the same
    import h5py

    path = tmp_path / "c.h5"
    models[FOCAL].run(PROMPT, "focal:0.4").save(path)
    alone = fs.open_capture(path)
    with h5py.File(path, "r"):
        held = fs.open_capture(path)
    assert np.array_equal(held.metrics(), alone.metrics(), equal_nan=True)
    # more new tokens than a session's positions: one clear error (it was "max_tokens must be positive")
    with pytest.raises(ValueError, match="2147483647 positions"):
        models[FOCAL].generate(PROMPT, 2**31 - 1)


def test_text_that_ends_inside_a_character(models):
    # The bundled tokenizer spells an emoji as four byte tokens (byte fallback), as byte-level BPE models (SmolLM2)
    # spell it over several tokens: text cut inside the character reads U+FFFD, it was a UnicodeDecodeError.
    m = models[FOCAL]
    ids = m.tokenize("a \N{GRINNING FACE}")
    assert m.detokenize(ids).endswith("\N{GRINNING FACE}")
    assert m.detokenize(ids[:-1]).endswith("\ufffd")
    # on_token hands out each token's text up to the last whole character; together it is the generated text
    pieces = []
    g = m.generate(PROMPT, 12, stop_at_eos=False, on_token=lambda i, s: pieces.append(s))
    assert "".join(pieces) == g.text and len(pieces) == 12


def test_gil_is_released_during_a_forward(models):
    m = models[FOCAL]
    ids = long_ids(m, 1024)
    done = threading.Event()
    ticks = []

    def work():
        try:
            m.run(ids)
        finally:
            done.set()

    t = threading.Thread(target=work)
    t0 = time.perf_counter()
    t.start()
    while not done.is_set():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    t.join()
    elapsed = time.perf_counter() - t0
    gaps = np.diff([t0, *ticks, time.perf_counter()])
    # The main thread kept running Python during the run: with the GIL held by the forward it would stall for the
    # whole run (one gap as long as the run itself).
    assert elapsed > 0.1 and len(ticks) >= 5 and gaps.max() < 0.5 * elapsed, (elapsed, len(ticks), gaps.max())


def test_repr_html_and_show(fs, models):
    cap = models[FOCAL].run(PROMPT, compare="standard", layers=[3], heads=[1])
    html = cap._repr_html_()
    assert "focalscope capture" in html and "focal_t0.4" in html and "data:image/png;base64," in html
    assert "<script" not in html and "http" not in html
    for kind in ("heatmap", "distribution"):
        for fmt in ("png", "svg"):
            fig = fs.show(cap, layer=3, head=1, kind=kind, format=fmt)
            assert fig.format == fmt and len(fig.data) > 1000


def test_type_stubs_are_installed_and_cover_the_api(fs):
    import ast
    import pathlib
    pkg = pathlib.Path(fs.__file__).parent
    assert (pkg / "py.typed").exists()
    core = ast.parse((pkg / "_core.pyi").read_text())
    names = {n.name for n in core.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert set(fs.__all__) <= names | {"FocalError"}, set(fs.__all__) - names
    model = next(n for n in core.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    run = next(n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    assert ast.unparse(run.returns) == "Capture" and ast.get_docstring(run).startswith("Runs a prompt")
    ast.parse((pkg / "__init__.pyi").read_text())


def test_repr_html_compare_line_is_the_clis(fs, models, cli, out_dir):
    # The notebook summary's mean KL / JS and row count are focal inspect's: over queries 1..T-1 (query 0, KL = 0,
    # was averaged in by both); the reference is the file's own per-row values, averaged here.
    import re
    path = out_dir / "html_compare.h5"
    cap = models[FOCAL].run(PROMPT, compare="standard", layers=[3], heads=[1])
    cap.save(path)
    shown = cli("inspect", path)
    m = re.search(r"mean KL ([0-9.]+) nats, mean JS ([0-9.]+) nats over (\d+) rows", shown)
    assert m, shown
    html = cap._repr_html_()
    h = re.search(r"mean KL ([0-9.e-]+) nats, mean JS ([0-9.e-]+) nats over (\d+) rows", html)
    assert h, html
    kl = np.asarray(fs.open_capture(path).kl_js("focal_t0.4", "standard")[0]).reshape(-1)
    want = float(np.mean(kl[1:]))
    assert int(m.group(3)) == int(h.group(3)) == kl.size - 1
    assert abs(float(m.group(1)) - want) <= 6e-5 and abs(float(h.group(1)) - want) <= 1e-5 * max(want, 1e-3)


def test_load_takes_the_clis_weight_options(fs, cli, out_dir):
    # fs.load(weights=, mmap=, allow_nonfinite_weights=) as focal --weights / --mmap / --allow-nonfinite-weights: a
    # capture of the bundled model with weights widened to fp32 matches the CLI's (the same forward: within 1e-6)
    path = out_dir / "weights_fp32.h5"
    cli("capture", FOCAL, "--device", "cpu", "--weights", "fp32", "--prompt", PROMPT, "--store", "metrics", "-o", path)
    ref = fs.open_capture(path)
    m = fs.load(FOCAL, device="cpu", weights="fp32", mmap=True, allow_nonfinite_weights=True)
    got = m.run(PROMPT, probs=False, scores=False)
    assert np.allclose(got.metrics(), ref.metrics(), atol=1e-6, equal_nan=True)
    with pytest.raises(ValueError, match="weights: 'fp8' is not one of native, fp32"):
        fs.load(FOCAL, weights="fp8")


def test_provenance_of_captures_and_sweeps(fs, models):
    # where and how it ran, and what it went on despite, as the files record them (focal inspect prints the same)
    m = models[FOCAL]
    c, s = m.run(PROMPT), m.sweep(PROMPT, [0.3, 0.5])
    for x in (c, s):
        assert (x.device, x.precision, x.warnings) == ("cpu", "exact", "")
        assert x.tokenizer == "tokenizer.model (sentencepiece)"  # the file and kind, as focal info names them
        # the model path is recorded absolute (the fixture loads "assets/models/..." from the repository root)
        assert x.model_path == str(ROOT / FOCAL) and os.path.isabs(x.model_path)
        assert (x.weights_checksum, x.tool_version) == (c.weights_checksum, fs.version())


def test_pieces_of_a_model_without_a_tokenizer_are_its_ids(fs, cli, out_dir):
    # as its captures store them (pieces() raised: "has no tokenizer.json or tokenizer.model")
    d = out_dir / "notok"
    cli("init", d, "--vocab", "64", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
        "--intermediate", "64")
    m = fs.load(d, device="cpu")
    assert m.pieces([1, 50]) == ["1", "50"]
    assert m.run(np.array([1, 50], dtype=np.int32), probs=False, scores=False).pieces == ["1", "50"]
    # generate from ids: no text to give, None (it was "", as if nothing had been generated), in on_token too
    seen = []
    g = m.generate([1, 50], n=3, stop_at_eos=False, on_token=lambda i, t: seen.append((i, t)))
    assert len(g.ids) == 3 and g.text is None
    assert seen == [(i, None) for i in g.ids]


def test_save_over_the_models_own_files_is_refused(fs, out_dir):
    # Capture.save / Sweep.save to a file of the model the data came from replaced the model (a capture written over
    # model.safetensors): refused, the model untouched; a capture saved into the model's directory under its own name
    # is fine, again and again.
    import shutil
    d = out_dir / "model_copy"
    shutil.copytree(ROOT / FOCAL, d, symlinks=False, dirs_exist_ok=True)
    weights = (d / "model.safetensors").read_bytes()
    m = fs.load(d, device="cpu")
    cap = m.run("The cat sat.", compare="standard")
    for name in ("model.safetensors", "config.json", "tokenizer.model"):
        with pytest.raises(fs.FocalError, match="is the model file"):
            cap.save(d / name)
    with pytest.raises(fs.FocalError, match="is the model file"):
        m.sweep("The cat sat.", temps=[0.5, 1.0]).save(d / "model.safetensors")
    assert (d / "model.safetensors").read_bytes() == weights
    cap.save(d / "cap.h5")
    cap.save(d / "cap.h5")
    assert fs.open_capture(d / "cap.h5").n_tokens == cap.n_tokens
