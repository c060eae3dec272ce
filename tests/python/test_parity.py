# Python at parity with the `focal` CLI (issue 38 item 4): every figure kind `focal figure` draws, with its options,
# byte for byte through fs.figure / fs.show; batch stats files as numpy arrays (fs.open_stats); the per-head summary
# against `focal inspect`; KL / JS of a compare run without stored probabilities; generate(compare=).
import json
import re
import shutil

import h5py
import numpy as np
import pytest

from conftest import FOCAL, LEARNED, ROOT, STANDARD

PROMPT = "Once upon a time there was a little fox who lived in the forest. The fox liked to play."
DOCS = ["The cat sat on the mat and looked at the dog.",
        "Once upon a time a little fox lived in the forest, and every day the fox ran over the hill.",
        "A red ball rolled under the tree."]


def bits_equal(x, y):
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()


@pytest.fixture(scope="module")
def inputs(fs, cli, out_dir, models):
    """One file of every kind `focal figure` reads, made by the CLI."""
    d = out_dir / "parity"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    f = {"capture": d / "cap.h5", "capture2": d / "cap_learned.h5", "sweep": d / "sweep.h5",
         "sweep2": d / "sweep_std.h5", "stats": d / "stats.h5"}
    cli("capture", FOCAL, "--device", "cpu", "--prompt", PROMPT, "--temp", "0.4", "--compare", "standard",
        "--layers", "1,3", "--heads", "0,2", "-o", f["capture"])
    cli("capture", LEARNED, "--device", "cpu", "--prompt", PROMPT, "--layers", "1,3", "--heads", "0,2",
        "-o", f["capture2"])
    cli("sweep", FOCAL, "--device", "cpu", "--prompt", PROMPT, "--temps", "0.3,0.5,1", "-o", f["sweep"])
    cli("sweep", STANDARD, "--device", "cpu", "--prompt", PROMPT, "--temps", "0.3,0.5,1", "-o", f["sweep2"])
    (d / "corpus.txt").write_text("\n\n".join(DOCS) + "\n")
    cli("batch", FOCAL, "--device", "cpu", "--data", d / "corpus.txt", "--runs", "standard,focal:0.4",
        "--max-tokens", "32", "--keep-rows", "8", "-o", f["stats"])
    # A data directory in scripts/data/build_data.py's format (the bundled tokenizer), for focal train and eval.
    data = d / "data"
    data.mkdir()
    shutil.copy(ROOT / "assets" / "models" / "tokenizer.model", data / "tokenizer.model")
    ids = np.concatenate([models[FOCAL].tokenize(t) for t in DOCS * 40]).astype(np.int32)
    ids.tofile(data / "text_train.bin")
    ids[:400].tofile(data / "text_val.bin")
    rng = np.random.default_rng(3)
    for name in ("tasks_train.jsonl", "tasks_eval.jsonl"):
        with open(data / name, "w") as out:
            for length in (32, 64):
                for _ in range(6):
                    seq = [1] + rng.integers(10, 400, length - 3).tolist()
                    rel = int(rng.integers(1, length - 4))
                    seq += [3, seq[rel]]
                    out.write(json.dumps({"kind": "copy", "length": length, "ids": seq, "answers": [
                        {"answer_pos": len(seq) - 1, "answer_len": 1, "relevant": [rel]}]}) + "\n")
    tiny = ["--data", data, "--steps", "4", "--eval-every", "2", "--hidden", "32", "--layers", "2", "--heads", "2",
            "--kv-heads", "1", "--intermediate", "64", "--context", "128", "--seq-len", "32", "--batch", "2",
            "--eval-sequences", "2", "--warmup", "1"]
    for attn in ("standard", "learned"):
        cli("train", *tiny, "--attn", attn, "--out", d / "train" / attn)
        f["train_" + attn] = d / "train" / attn / "train_log.h5"
        f["eval_" + attn] = d / "train" / attn / "eval.h5"
        cli("eval", d / "train" / attn, "--device", "cpu", "--data", data, "--val-seq-len", "32",
            "--val-sequences", "2", "-o", f["eval_" + attn])
    if "temps" in fs.figure_kinds():
        f["temps"] = d / "temps.json"
        cli("calibrate", STANDARD, "--data", d / "corpus.txt", "-o", f["temps"], "--granularity", "head", "--steps",
            "2", "--seq-len", "16", "--batch", "2", "--val-windows", "2", "--eval-every", "2")
        f["capture_std"] = d / "capture_std.h5"
        cli("capture", STANDARD, "--device", "cpu", "--prompt", PROMPT, "--store", "metrics", "-o", f["capture_std"])
    if "positions" in fs.figure_kinds():
        f["positions"] = d / "positions.h5"
        cli("eval", FOCAL, "--positions", "--device", "cpu", "--data", d / "corpus.txt", "--max-tokens", "24",
            "--bootstrap", "20", "--quiet", "-o", f["positions"])
    return f


def cli_args(opts):
    """fs.figure keyword options -> `focal figure` options."""
    names = {"log_scale": "--log", "log_floor": "--floor", "linear_scale": "--linear", "x_axis": "--x",
             "task_kind": "--kind", "width_in": "--width", "height_in": "--height", "last_keys": "--keys"}
    args = []
    for k, v in opts.items():
        opt = names.get(k, "--" + k.replace("_", "-"))
        if v is True:
            args.append(opt)
        elif k == "keys":
            args += [opt, f"{v[0]}:{v[1]}"]
        elif k == "last_keys":
            args += [opt, f"last:{v}"]
        elif isinstance(v, (list, tuple)):
            args += [opt, ",".join(map(str, v))]
        else:
            args += [opt, str(v)]
    return args


# (kind, input files, options): every kind `focal figure --help` lists, and each of its options at least once.
FIGURES = [
    ("distribution", ["capture"], {}),
    ("distribution", ["capture"], dict(layer=3, head=2, query=20, top_keys=5, overlay=True)),
    ("distribution", ["capture"], dict(layer=1, head=0, keys=(2, 12), no_sink=True, runs=["standard"])),
    ("distribution", ["capture"], dict(last_keys=8, title="last keys", width_in=7)),
    ("distribution", ["capture", "capture2"], dict(runs=["standard", "learned"])),
    ("heatmap", ["capture"], dict(layer=3, head=2, runs=["standard", "focal_t0.4"], log_scale=True,
                                  log_floor=0.001)),
    ("heatmap", ["capture"], dict(layers=[1], heads=[0], no_title=True, height_in=2.5, dpi=100)),
    ("grid", ["capture"], dict(runs=["standard"], linear_scale=True)),
    ("grid", ["capture"], dict(layers=[3], log_scale=True, no_sink=True)),
    ("entropy", ["capture"], {}),
    ("entropy", ["capture"], dict(matrix=True, runs=["standard", "focal_t0.4"])),
    ("entropy", ["capture"], dict(matrix=True, metric="sink_mass", heads=[0, 1, 2])),
    ("entropy", ["capture"], dict(lines=True, metric="max_prob", layers=[0, 2, 3])),
    ("entropy", ["capture", "capture2"], dict(runs=["focal_t0.4", "learned"])),
    ("sweep", ["sweep"], {}),
    ("sweep", ["sweep"], dict(per_layer=True, metric="entropy_norm")),
    ("sweep", ["sweep"], dict(metric="loss", height_in=3)),
    ("sweep", ["sweep", "sweep2"], dict(metric="max_prob", layers=[0, 1], heads=[2])),
    ("training", ["train_standard", "train_learned"], {}),
    ("training", ["train_standard", "train_learned"], dict(metric="step_loss", x_axis="tokens",
                                                            labels=["std", "learned"])),
    ("training", ["train_learned"], dict(tau=True, clip=True, layers=[1])),
    ("retrieval", ["eval_standard", "eval_learned"], {}),
    ("retrieval", ["eval_standard", "eval_learned"], dict(metric="relevant_mass", layer=1, task_kind="copy",
                                                          labels=["a", "b"])),
    ("corpus", ["stats"], {}),
    ("corpus", ["stats"], dict(metric="max_prob", runs=["focal_t0.4", "standard"], layers=[0, 1], heads=[1, 2],
                               width_in=7)),
    ("positions", ["positions"], {}),
    ("positions", ["positions"], dict(width_in=5, title="loss by position")),
    ("temps", ["temps"], {}),
    ("temps", ["temps"], dict(layers=[1, 2], heads=[0, 3], width_in=4)),
    ("temps", ["temps", "capture_std"], dict(runs=["standard"], width_in=5)),
]


def test_figure_walk_covers_every_cli_kind(fs, cli):
    """The walk below names every kind `focal figure --help` lists, and fs.figure_kinds() is that list."""
    text = cli("figure", "--help")
    block = text.split("kinds:")[1].split("input:")[0]
    kinds = re.findall(r"^  (\w+)\s", block, re.M)
    assert kinds == fs.figure_kinds()
    assert set(kinds) <= {k for k, _, _ in FIGURES}, "a kind of focal figure without a case here"


@pytest.mark.parametrize("case", range(len(FIGURES)), ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(FIGURES)])
def test_figure_equals_cli_bytes(fs, cli, inputs, out_dir, case):
    kind, files, opts = FIGURES[case]
    if kind not in fs.figure_kinds():
        pytest.skip(f"this build has no {kind} figure")
    paths = [inputs[f] for f in files]
    for fmt in ("png", "svg", "pdf"):  # no dates in any of them: the bytes themselves are compared
        out = out_dir / "parity" / f"cli_{kind}_{case}.{fmt}"
        cli("figure", kind, *paths, *cli_args(opts), "-o", out)
        fig = fs.figure(kind, *paths, format=fmt, **opts)
        assert fig.format == fmt and fig.data == out.read_bytes(), f"{kind} {opts} ({fmt}) differs from the CLI"
    # Objects in place of the files draw the same bytes when labelled as the CLI labels files (by their stem).
    opener = {"capture": fs.open_capture, "sweep": fs.open_sweep, "corpus": fs.open_stats}
    if kind in ("distribution", "heatmap", "grid", "entropy", "sweep", "corpus"):
        objs = [(p.stem, opener.get(kind, fs.open_capture)(p)) for p in paths]
        if kind == "corpus":
            objs = [o for _, o in objs]
        assert fs.figure(kind, *objs, **opts).data == (out_dir / "parity" / f"cli_{kind}_{case}.png").read_bytes()


def test_show_takes_sweeps_stats_and_figure_options(fs, cli, inputs, out_dir):
    sw = fs.open_sweep(inputs["sweep"])
    # an object is labelled "sweep", as the CLI labels the file sweep.h5: the default sweep figure, the same bytes
    cli("figure", "sweep", inputs["sweep"], "-o", out_dir / "parity" / "show_sweep_default.png")
    assert fs.show(sw).data == (out_dir / "parity" / "show_sweep_default.png").read_bytes()
    cli("figure", "sweep", inputs["sweep"], "--per-layer", "-o", out_dir / "parity" / "show_sweep.png")
    assert fs.show(("sweep", sw), per_layer=True).data == (out_dir / "parity" / "show_sweep.png").read_bytes()
    st = fs.open_stats(inputs["stats"])
    cli("figure", "corpus", inputs["stats"], "--metric", "sink_mass", "-o", out_dir / "parity" / "show_corpus.png")
    assert fs.show(st, metric="sink_mass").data == (out_dir / "parity" / "show_corpus.png").read_bytes()
    cap = fs.open_capture(inputs["capture"])
    cli("figure", "entropy", inputs["capture"], "--matrix", "--runs", "standard,focal_t0.4",
        "-o", out_dir / "parity" / "show_matrix.png")
    assert fs.show(("cap", cap), kind="entropy", matrix=True, runs=["standard", "focal_t0.4"]).data == \
        (out_dir / "parity" / "show_matrix.png").read_bytes()
    # show(cap, run=...) is runs=[run]; a run index names the same run
    assert fs.show(cap, layer=3, head=2, run=1).data == fs.show(cap, layer=3, head=2, runs="standard").data


def test_figure_save_takes_the_figures_format(fs, inputs, tmp_path):
    """Figure.save to a path whose extension names another format is refused (x.svg held PNG bytes); the figure's
    own extension, or none of the three, writes the bytes as rendered."""
    fig = fs.figure("heatmap", fs.open_capture(inputs["capture"]))
    assert fig.format == "png"
    with pytest.raises(ValueError, match="names svg but the figure is png: render it with format='svg'"):
        fig.save(tmp_path / "x.svg")
    assert not (tmp_path / "x.svg").exists()
    fig.save(tmp_path / "x.PNG")
    assert (tmp_path / "x.PNG").read_bytes() == fig.data


def test_figure_bad_input_raises_one_clear_exception(fs, inputs):
    cap = fs.open_capture(inputs["capture"])
    with pytest.raises(ValueError, match="kind: 'pie' is not a figure kind .*'corpus'"):
        fs.figure("pie", cap)
    with pytest.raises(TypeError, match="unknown option 'colour'"):
        fs.figure("heatmap", cap, colour="red")
    with pytest.raises(TypeError, match="the sweep figure draws Sweep objects or sweep files.*item 0 is a Capture"):
        fs.figure("sweep", cap)
    with pytest.raises(TypeError, match="training logs .*given as paths"):
        fs.figure("training", cap)
    with pytest.raises(ValueError, match="inputs: the heatmap figure needs"):
        fs.figure("heatmap")
    with pytest.raises(FileNotFoundError, match="no such file"):
        fs.figure("heatmap", "/nonexistent/cap.h5")
    with pytest.raises(ValueError, match="log_floor: .*add log_scale=True"):
        fs.figure("heatmap", cap, log_floor=0.01)
    with pytest.raises(ValueError, match="layer: must be 0 or more"):
        fs.figure("heatmap", cap, layer=-1)
    with pytest.raises(ValueError, match="two inputs are labelled 'x'"):
        fs.figure("entropy", ("x", cap), ("x", cap))
    with pytest.raises(ValueError, match="kind: give the figure kind for a path"):
        fs.show(str(inputs["capture"]))
    with pytest.raises(fs.FocalError, match="layer 2 is not stored"):  # the figure module's own message
        fs.figure("heatmap", cap, layer=2)


def test_open_stats_equals_the_runs_it_counted(fs, models, inputs, cli):
    """Each cell of a stats file against captures of its documents: count, mean, variance, min, max, histogram and
    position profile from the rows 1..T-1 of every document (tolerance 1e-9 relative: float64 sums of the same
    float32 metrics in another order)."""
    st = fs.open_stats(inputs["stats"])
    assert st.run_names == ["standard", "focal_t0.4"] and st.metric_names == fs.metric_names()
    R, L, H, M = 2, 4, 6, 8
    assert st.mean.shape == st.variance.shape == st.count.shape == st.min.shape == (R, L, H, M)
    assert st.hist.shape == (R, L, H, M, st.n_bins) and st.hist.dtype == np.uint64
    assert st.hist_edges.shape == (M, st.n_bins + 1)
    P = len(st.pos_edges) - 1
    assert st.pos_mean.shape == st.pos_count.shape == (R, L, H, M, P)
    assert st.n_docs == 3 and st.max_tokens == 32 and st.long == "cut" and st.model_path == str(ROOT / FOCAL)  # recorded absolute
    assert st.doc_head_means.shape == (3, R, L, H, M) and list(st.doc_n_tokens) == [
        min(32, len(models[FOCAL].tokenize(t))) for t in DOCS]
    # the fields `focal inspect` prints: where it ran, its warnings, each document's tokens before the cut
    assert (st.device, st.precision, st.warnings, st.tokenizer) == ("cpu", "exact", "", "tokenizer.model (sentencepiece)")
    assert list(st.doc_n_tokens_total) == [len(models[FOCAL].tokenize(t)) for t in DOCS]
    assert list(st.doc_n_windows) == [1, 1, 1]  # --long cut: one forward a document
    where, probs = st.kept_rows()
    assert where.shape == (8, 5) and probs.shape == (8, R, 32)

    rows = {r: [] for r in range(R)}  # per run: [L, H, T-1, M] of each document, rows 1..
    for spec_i, spec in enumerate(["standard", "focal:0.4"]):
        for t in DOCS:
            ids = models[FOCAL].tokenize(t)[:32]
            cap = models[FOCAL].run(ids, spec, probs=False, scores=False)
            rows[spec_i].append(cap.metrics().astype(np.float64)[:, :, 1:, :])
            assert cap.runs[0] == st.run_names[spec_i]
    for r in range(R):
        x = np.concatenate(rows[r], axis=2)  # [L, H, rows, M]
        ok = ~np.isnan(x)
        n = ok.sum(axis=2)
        assert np.array_equal(st.count[r], n)
        mean = np.where(ok, x, 0).sum(axis=2) / np.maximum(n, 1)
        # NaN where no row was counted (the file's own value; an empty relevant-mass cell read as a measured 0)
        np.testing.assert_allclose(st.mean[r], np.where(n > 0, mean, np.nan), rtol=1e-9, atol=1e-12)
        var = np.where(ok, (x - mean[:, :, None, :]) ** 2, 0).sum(axis=2) / np.maximum(n - 1, 1)
        np.testing.assert_allclose(st.variance[r], np.where(n > 1, var, np.nan), rtol=1e-7, atol=1e-12)
        with h5py.File(inputs["stats"], "r") as f:
            np.testing.assert_array_equal(np.isnan(st.mean[r]), np.isnan(f["stats/mean"][r]))
        np.testing.assert_array_equal(st.min[r], np.where(n > 0, np.nanmin(np.where(ok, x, np.inf), axis=2), np.inf))
        assert np.array_equal(st.hist[r].sum(axis=-1), n)
        assert np.array_equal(st.pos_count[r].sum(axis=-1), n)
        # position profile: bucket b holds positions pos_edges[b] .. pos_edges[b+1]-1 of every document
        for b in range(P):
            lo, hi = st.pos_edges[b], st.pos_edges[b + 1]
            sel = np.concatenate([d[:, :, max(lo - 1, 0):max(hi - 1, 0), :] for d in rows[r]], axis=2)
            ok_b = ~np.isnan(sel)
            n_b = ok_b.sum(axis=2)
            assert np.array_equal(st.pos_count[r, ..., b], n_b)
            want = np.where(n_b > 0, np.where(ok_b, sel, 0).sum(axis=2) / np.maximum(n_b, 1), np.nan)
            np.testing.assert_allclose(st.pos_mean[r, ..., b], want, rtol=1e-9)
    # `focal inspect` prints the corpus means (every layer, head and row >= 1 pooled) to 4 decimals.
    text = cli("inspect", inputs["stats"])
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("focal_t0.4 ") and "rows" not in ln)
    printed = [float(v) for v in line.split()[2:]]
    cols = [fs.metric_names().index(m) for m in ("entropy_nats", "entropy_norm", "eff_support", "max_prob",
                                                  "topk_mass", "sink_mass", "tail_mass")]
    pooled = (st.mean[1] * st.count[1]).sum(axis=(0, 1))[cols] / st.count[1].sum(axis=(0, 1))[cols]
    np.testing.assert_allclose(printed, pooled, atol=5.01e-5)
    assert fs.open_stats(inputs["stats"], docs=False).n_docs == 3
    with pytest.raises(AttributeError, match="docs=False"):
        fs.open_stats(inputs["stats"], docs=False).doc_head_means
    assert not hasattr(fs.open_stats(inputs["stats"], docs=False), "doc_ids")  # it raised ValueError
    with pytest.raises(FileNotFoundError):
        fs.open_stats("/nonexistent/stats.h5")


def parse_inspect_tables(text):
    """{run: {(layer, head): [entropy, H/lnN, max_p, sink, tail]}} from `focal inspect`."""
    tables, run = {}, None
    for ln in text.splitlines():
        m = re.match(r"^run (\S+)", ln)
        if m:
            run = m.group(1)
            tables[run] = {}
        elif run and re.match(r"^\s+\d+\s+\d+\s", ln):
            v = ln.split()
            tables[run][(int(v[0]), int(v[1]))] = [float(x) for x in v[2:7]]
    return tables


def test_head_summary_equals_inspect(fs, inputs, cli):
    cap = fs.open_capture(inputs["capture"])
    printed = parse_inspect_tables(cli("inspect", inputs["capture"]))
    a, b = "focal_t0.4", "standard"
    columns = {"entropy_nats": 0, "entropy_norm": 1, "max_prob": 2, "sink_mass": 3, "tail_mass": 4}
    for metric, col in columns.items():
        s = cap.head_summary(metric, runs=(a, b))
        assert list(s) == ["layer", "head", a, b, "delta"]
        assert len(s["layer"]) == cap.n_layers * cap.n_heads
        m = cap.metric_names.index(metric)
        for run in (a, b):
            # oracle 1: the mean over rows 1..T-1 in float64, to 1e-6 relative
            ref = np.nanmean(cap.metrics(run)[:, :, 1:, m].astype(np.float64), axis=2).ravel()
            np.testing.assert_allclose(s[run], ref, rtol=1e-6)
            # oracle 2: what `focal inspect` prints, to its 4 decimals
            np.testing.assert_allclose(s[run], [printed[run][(l, h)][col] for l, h in zip(s["layer"], s["head"])],
                                       atol=5.01e-5)
        assert bits_equal(s["delta"], s[b] - s[a])
    ranked = cap.head_summary("entropy_nats", runs=(a, b), sort="abs_delta")
    assert np.all(np.diff(np.abs(ranked["delta"])) <= 0)
    plain = cap.head_summary("entropy_nats", runs=(a, b))
    i = int(np.argmax(np.abs(plain["delta"])))
    assert (ranked["layer"][0], ranked["head"][0]) == (plain["layer"][i], plain["head"][i])
    assert ranked["delta"][0] == plain["delta"][i]
    by_run = cap.head_summary("max_prob", sort="standard")
    assert list(by_run) == ["layer", "head", "focal_t0.4", "standard", "delta"]
    assert np.all(np.diff(by_run["standard"]) <= 0)
    one = cap.head_summary(runs="standard")
    assert list(one) == ["layer", "head", "standard"]
    with pytest.raises(ValueError, match="metric: 'entropy' is not a row metric"):
        cap.head_summary("entropy")
    with pytest.raises(ValueError, match="sort: 'abs_delta' needs two runs"):
        cap.head_summary(runs=[0], sort="abs_delta")
    with pytest.raises(KeyError, match="run 'nope' is not in the capture"):
        cap.head_summary(runs=("nope", "standard"))


@pytest.mark.parametrize("sel", [dict(), dict(layers=[1, 3], heads=[0, 2], queries=[3, 9, 20])],
                         ids=["all_rows", "selection"])
def test_kl_js_without_stored_probabilities_equals_cli(fs, models, cli, out_dir, sel):
    """compare= with probs=False: KL / JS computed as the second run's rows arrive, equal bit for bit to the CLI's
    (which stores both runs' rows and compares them), with no probabilities kept."""
    args = []
    for k, v in sel.items():
        args += [f"--{k}", ",".join(map(str, v))]
    path = out_dir / "parity" / f"cli_kl_{len(sel)}.h5"
    cli("capture", FOCAL, "--device", "cpu", "--prompt", PROMPT, "--temp", "0.4", "--compare", "standard", *args,
        "-o", path)
    ref = fs.open_capture(path)
    cap = models[FOCAL].run(PROMPT, "focal:0.4", compare="standard", probs=False, **sel)
    for x, y in zip(cap.kl_js(), ref.kl_js()):
        assert bits_equal(x, y)
    for run in cap.runs:
        assert bits_equal(cap.metrics(run), ref.metrics(run)) and bits_equal(cap.scores(run), ref.scores(run))
        with pytest.raises(ValueError, match="stores no probabilities"):
            cap.probs(run)
    kl, js = cap.kl_js()
    assert kl.shape == (len(ref.layers()), len(ref.heads()), len(ref.queries()))
    assert np.all(js <= np.log(2) + 1e-6) and np.all(kl >= 0)
    cap.save(out_dir / "parity" / "py_kl_streamed.h5")
    back = fs.open_capture(out_dir / "parity" / "py_kl_streamed.h5")
    assert bits_equal(back.kl_js()[1], js)
    # no scores either: only metrics and the comparison, O(T) memory per head
    small = models[FOCAL].run(PROMPT, "focal:0.4", compare="standard", probs=False, scores=False, **sel)
    assert bits_equal(small.kl_js()[0], ref.kl_js()[0])


def test_generate_compare_equals_cli(fs, models, cli, out_dir):
    from test_capture_oracle import assert_same_h5
    path = out_dir / "parity" / "cli_gen_compare.h5"
    cli("generate", FOCAL, "--device", "cpu", "--prompt", "The little fox", "-n", "10", "--layers", "3",
        "--compare", "standard", "--capture", path)
    g = models[FOCAL].generate("The little fox", 10, capture=True, compare="standard", layers=3)
    assert g.capture.runs == ["focal_t0.4", "standard"] and g.capture.n_prompt_tokens == len(g.prompt_ids)
    g.capture.save(out_dir / "parity" / "py_gen_compare.h5")
    assert_same_h5(out_dir / "parity" / "py_gen_compare.h5", path)
    with pytest.raises(ValueError, match="compare: needs capture=True"):
        models[FOCAL].generate("The little fox", 4, compare="standard")


def test_version_and_gemm_kernels_equal_cli(fs, cli):
    """fs.version() and fs.cpu_gemm() are the two lines `focal --version` prints (one process each: the CPU's
    OpenBLAS core is picked when the library loads, the same way in both)."""
    out = cli("--version").splitlines()
    assert out[0] == f"focal {fs.version()}"
    assert out[1] == f"CPU GEMM: {fs.cpu_gemm()}"
    assert fs.cpu_gemm() and fs.__version__ == fs.version()
