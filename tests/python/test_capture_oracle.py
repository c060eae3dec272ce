# The Python package against the `focal` CLI: the same prompt and options give the same capture, sweep, generation
# and figure bytes, bit for bit (HDF5 datasets compared with h5py; only the created_utc timestamp, and the root's
# attrs_crc32 over it, may differ).
import h5py
import numpy as np
import pytest

from conftest import FOCAL, LEARNED, ROOT, STANDARD

PROMPT = "Once upon a time there was a little fox who lived in the forest. The fox liked to play."


def h5_items(path):
    """{name: ('dataset', dtype, array) | ('group', attrs)} plus root attributes, for a whole file."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            attrs = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in obj.attrs.items()}
            if isinstance(obj, h5py.Dataset):
                out[name] = ("dataset", obj.dtype.str, obj[()], attrs)
            else:
                out[name] = ("group", None, None, attrs)
        f.visititems(visit)
        # created_utc is the time of writing; the root's attrs_crc32 covers it (the root's other text attributes
        # are compared one by one here).
        out["/"] = ("group", None, None, {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                                         for k, v in f.attrs.items() if k not in ("created_utc", "attrs_crc32")})
        order = {g: list(f[g].keys()) for g in ("runs", "compare") if g in f}
    return out, order


def assert_same_h5(a, b):
    ia, oa = h5_items(a)
    ib, ob = h5_items(b)
    assert sorted(ia) == sorted(ib), f"different items: {sorted(set(ia) ^ set(ib))}"
    assert oa == ob, "runs / comparisons in a different order"
    for name in ia:
        kind, dt, va, attrs_a = ia[name]
        _, dt_b, vb, attrs_b = ib[name]
        assert attrs_a == attrs_b, f"{name}: attributes differ"
        if kind == "dataset":
            assert dt == dt_b, f"{name}: dtype {dt} vs {dt_b}"
            if va.dtype.kind == "f":
                assert va.tobytes() == vb.tobytes(), f"{name}: values differ"
            else:
                assert np.array_equal(va, vb), f"{name}: values differ"


def bits_equal(x, y):
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()


# (model, CLI options, Python keyword arguments)
CASES = {
    "native_all": (FOCAL, [], {}),
    "focal_compare_fp16": (FOCAL, ["--temp", "0.4", "--compare", "standard", "--layers", "1,3", "--heads", "0,2",
                                   "--fp16"],
                           dict(temp="focal:0.4", compare="standard", layers=[1, 3], heads=[0, 2], fp16=True)),
    "overrides": (STANDARD, ["--temp", "0.5", "--layer-temp", "0=1.0", "--head-temp", "2:1=0.3", "--queries", "0,5,9",
                             "--topk", "3", "--topk-mass", "2", "--relevant", "1,4", "--store", "scores"],
                  dict(temp=None, queries=[0, 5, 9], topk=3, topk_mass=2, relevant=[1, 4], probs=False)),
    "learned_vs_focal": (LEARNED, ["--compare", "focal:0.3", "--layers", "2", "--name", "mine"],
                         dict(compare="focal:0.3", layers=2, name="mine")),
    "ssmax": (STANDARD, ["--mode", "ssmax", "--ssmax-s", "1.5", "--heads", "4"], dict(temp="ssmax:1.5", heads=[4])),
}


@pytest.fixture(scope="module")
def oracle(cli, out_dir):
    """Each case captured once by the CLI."""
    files = {}
    for case, (model, opts, _) in CASES.items():
        path = out_dir / f"cli_{case}.h5"
        cli("capture", model, "--device", "cpu", "--prompt", PROMPT, *opts, "-o", path)
        files[case] = path
    return files


def py_capture(fs, models, case):
    model, _, kw = CASES[case]
    kw = dict(kw)
    if case == "overrides":
        kw["temp"] = fs.TempSpec(0.5, layer_temp={0: 1.0}, head_temp={(2, 1): 0.3})
    return models[model].run(PROMPT, **kw)


@pytest.mark.parametrize("case", list(CASES))
def test_saved_capture_equals_cli_file(fs, models, oracle, out_dir, case):
    cap = py_capture(fs, models, case)
    path = out_dir / f"py_{case}.h5"
    cap.save(path)
    assert_same_h5(path, oracle[case])
    # With the CLI file's timestamp the whole file is the same, byte for byte.
    with h5py.File(oracle[case], "r") as f:
        stamp = f.attrs["created_utc"]
    cap.save(out_dir / f"py_{case}_stamped.h5", created_utc=stamp)
    assert (out_dir / f"py_{case}_stamped.h5").read_bytes() == oracle[case].read_bytes()
    assert cap.created_utc == ""


@pytest.mark.parametrize("case", list(CASES))
def test_arrays_equal_cli_file(fs, models, oracle, case):
    cap = py_capture(fs, models, case)
    with h5py.File(oracle[case], "r") as f:
        assert bits_equal(cap.tokens, f["tokens/ids"][()])
        assert cap.pieces == [p.decode() for p in f["tokens/pieces"][()]]
        assert cap.runs == list(f["runs"].keys())
        for name in cap.runs:
            g = f["runs"][name]
            assert cap.layers(name) == g["layers"][()].tolist()
            assert cap.heads(name) == g["heads"][()].tolist()
            assert cap.queries(name) == g["queries"][()].tolist()
            if "probs" in g:
                stored = g["probs"][()]
                mine = cap.probs(name)
                # fp16 captures hold the float16-rounded values in memory: exact after the same cast
                assert bits_equal(mine.astype(stored.dtype), stored)
                assert stored.dtype == np.float16 or bits_equal(mine, stored)
            else:
                with pytest.raises(ValueError, match="stores no probabilities"):
                    cap.probs(name)
            if "scores" in g:
                assert bits_equal(cap.scores(name), g["scores"][()])
            assert bits_equal(cap.metrics(name), g["metrics"][()])
            assert bits_equal(cap.row_scale(name), g["row_scale"][()])
            ids, probs = cap.topk(name)
            assert bits_equal(ids, g["topk_ids"][()]) and bits_equal(probs, g["topk_probs"][()])
            assert bits_equal(cap.token_nll(name), g["token_nll"][()])
            if "tau" in g:
                assert bits_equal(cap.tau(name), g["tau"][()])
            else:
                assert cap.tau(name) is None
            assert cap.temp_spec(name).to_json() == g.attrs["temp_spec_json"]
        for cname, g in f["compare"].items():
            kl, js = cap.kl_js(g.attrs["run_a"], g.attrs["run_b"])
            assert bits_equal(kl, g["kl"][()]) and bits_equal(js, g["js"][()])


def test_open_capture_reads_cli_file(fs, models, oracle):
    cap = fs.open_capture(oracle["focal_compare_fp16"])
    assert type(cap) is fs.Capture
    mine = py_capture(fs, models, "focal_compare_fp16")
    assert cap.runs == mine.runs == ["focal_t0.4", "standard"]
    for run in cap.runs:
        # the file holds float16 (fp16=True); the reader widens it exactly. With compare= the runs keep fp32 rows in
        # memory (KL / JS are computed from them, as in the CLI), rounded to float16 only in the file.
        assert bits_equal(cap.probs(run), mine.probs(run).astype(np.float16).astype(np.float32))
        assert bits_equal(cap.metrics(run), mine.metrics(run))
    assert cap.created_utc.endswith("Z") and mine.created_utc == ""

def test_resaving_an_opened_fp16_capture_keeps_float16(fs, oracle, out_dir):
    # Capture.save()'s fp16 defaults to "as the capture was made": an opened float16 file was rewritten as float32
    # (twice the size, and no longer saying it held rounded rows).
    cap = fs.open_capture(oracle["focal_compare_fp16"])
    cap.save(out_dir / "resaved_fp16.h5")
    with h5py.File(oracle["focal_compare_fp16"], "r") as a, h5py.File(out_dir / "resaved_fp16.h5", "r") as b:
        for run in cap.runs:
            assert a["runs"][run]["probs"].dtype == np.float16
            assert b["runs"][run]["probs"].dtype == np.float16
            assert bits_equal(b["runs"][run]["probs"][()], a["runs"][run]["probs"][()])


def test_sweep_equals_cli(fs, models, cli, out_dir):
    cli("sweep", FOCAL, "--device", "cpu", "--prompt", PROMPT, "--temps", "0.3,0.5,1", "--relevant", "2",
        "-o", out_dir / "cli_sweep.h5")
    sw = models[FOCAL].sweep(PROMPT, [0.3, 0.5, 1.0], relevant=[2])
    assert sw.head_metrics.shape == (3, 4, 6, 8) and sw.mean_nll.shape == (3,)
    sw.save(out_dir / "py_sweep.h5")
    assert_same_h5(out_dir / "py_sweep.h5", out_dir / "cli_sweep.h5")
    back = fs.open_sweep(out_dir / "cli_sweep.h5")
    assert bits_equal(back.head_metrics, sw.head_metrics)
    assert back.relevant == sw.relevant == [2]  # the keys relevant_mass is over, recorded


def test_generate_equals_cli(fs, models, cli, out_dir):
    text = cli("generate", FOCAL, "--device", "cpu", "--prompt", "The little fox", "-n", "12",
               "--capture", out_dir / "cli_gen.h5", "--layers", "3")
    seen = []
    g = models[FOCAL].generate("The little fox", 12, capture=True, layers=3,
                               on_token=lambda i, piece: seen.append((i, piece)))
    assert [i for i, _ in seen] == g.ids and "".join(p for _, p in seen) == g.text
    assert len(g.ids) == 12
    # The CLI prints the prompt and the generated text on stdout ("wrote ..." goes to stderr).
    assert text == models[FOCAL].detokenize(g.prompt_ids) + g.text + "\n"
    g.capture.save(out_dir / "py_gen.h5")
    assert_same_h5(out_dir / "py_gen.h5", out_dir / "cli_gen.h5")


def test_generate_takes_the_clis_capture_options(fs, models, cli, out_dir):
    # generate(capture=True, queries=, name=, topk=, topk_mass=, relevant=, budget=) as `focal generate --capture`
    # with the same options: the same file, bit for bit (positions over prompt + generated tokens)
    cli("generate", FOCAL, "--device", "cpu", "--prompt", "The little fox", "-n", "12", "--capture",
        out_dir / "cli_gen_opts.h5", "--layers", "3", "--queries", "2,9,15", "--name", "mine", "--topk", "4",
        "--topk-mass", "3", "--relevant", "1,12", "--budget", "1G")
    g = models[FOCAL].generate("The little fox", 12, capture=True, layers=3, queries=[2, 9, 15], name="mine",
                               topk=4, topk_mass=3, relevant=[1, 12], budget="1G")
    g.capture.save(out_dir / "py_gen_opts.h5")
    assert_same_h5(out_dir / "py_gen_opts.h5", out_dir / "cli_gen_opts.h5")
    with pytest.raises(ValueError, match="need capture=True"):
        models[FOCAL].generate("The little fox", 2, queries=[1])
    # every capture option, as the CLI refuses each without --capture (layers=[0] returned capture=None)
    for opt in ({"layers": [0]}, {"heads": 1}, {"probs": False}, {"fp16": True}, {"topk": 3}, {"topk_mass": 2}):
        with pytest.raises(ValueError, match=f"^{next(iter(opt))}: need capture=True"):
            models[FOCAL].generate("The little fox", 2, **opt)
    with pytest.raises(ValueError, match="queries: position 20 lies beyond the"):
        models[FOCAL].generate("The little fox", 30, capture=True, queries=[20], stop_at_eos=True,
                               on_token=lambda i, s: len(s) < 0)  # stops after the first token


def test_generation_capture_marks_the_prompt_and_splits_the_loss(fs, models, cli, out_dir):
    m = models[FOCAL]
    g = m.generate("The little fox", 12, capture=True, layers=3)
    cap = g.capture
    P, T = len(g.prompt_ids), cap.n_tokens
    assert cap.n_prompt_tokens == P and T == P + len(g.ids)
    # The losses by hand from the stored token_nll: the prompt's own tokens 1..P-1, the generated tokens P..T-1.
    nll = cap.token_nll().astype(np.float64)
    assert cap.prompt_loss() == pytest.approx(nll[:P - 1].mean(), rel=1e-12)
    assert cap.generated_loss() == pytest.approx(nll[P - 1:T - 1].mean(), rel=1e-12)
    assert cap.generated_loss() < cap.prompt_loss()  # greedy tokens are the model's own top choices
    cap.save(out_dir / "py_gen_boundary.h5")
    with h5py.File(out_dir / "py_gen_boundary.h5", "r") as f:
        assert f.attrs["n_prompt_tokens"] == P
    assert fs.open_capture(out_dir / "py_gen_boundary.h5").n_prompt_tokens == P

    # The same ids run as a prompt: all prompt, one loss over every token, no generated loss, no attribute.
    again = m.run(cap.tokens, layers=3, compare="standard")
    assert again.n_prompt_tokens == T and np.isnan(again.generated_loss())
    assert again.prompt_loss() == pytest.approx(again.token_nll().astype(np.float64)[:T - 1].mean(), rel=1e-12)
    again.save(out_dir / "py_ids_compare.h5")
    with h5py.File(out_dir / "py_ids_compare.h5", "r") as f:
        assert "n_prompt_tokens" not in f.attrs

    # `focal generate --compare standard` is that run: the same runs and per-row KL / JS over exactly these tokens.
    cli("generate", FOCAL, "--device", "cpu", "--prompt", "The little fox", "-n", "12", "--layers", "3",
        "--compare", "standard", "--capture", out_dir / "cli_gen_compare.h5")
    c = fs.open_capture(out_dir / "cli_gen_compare.h5")
    assert c.n_prompt_tokens == P and bits_equal(c.tokens, cap.tokens)
    assert c.runs == again.runs == ["focal_t0.4", "standard"]
    for name in c.runs:
        assert bits_equal(c.probs(name), again.probs(name)) and bits_equal(c.scores(name), again.scores(name))
        assert c.prompt_loss(name) == pytest.approx(c.token_nll(name).astype(np.float64)[:P - 1].mean(), rel=1e-12)
    for x, y in zip(c.kl_js(), again.kl_js()):
        assert bits_equal(x, y)


@pytest.mark.parametrize("kind,opts", [("heatmap", dict(layer=3, head=2)),
                                       ("distribution", dict(layer=1, head=2, query=20)),
                                       ("heatmap", dict(layer=1, head=0, log_scale=True))])
def test_show_renders_the_cli_figure(fs, oracle, cli, out_dir, kind, opts):
    cap_path = oracle["focal_compare_fp16"]
    fig = fs.show(fs.open_capture(cap_path), kind=kind, **opts)
    args = []
    for k, v in opts.items():
        args += ["--log"] if k == "log_scale" else [f"--{k}", v]
    cli("figure", kind, cap_path, *args, "-o", out_dir / f"cli_{kind}.png")
    assert fig.format == "png" and fig.data[:8] == b"\x89PNG\r\n\x1a\n"
    assert fig.data == (out_dir / f"cli_{kind}.png").read_bytes()
    assert fig._repr_png_() == fig.data and fig._repr_svg_() is None
    svg = fs.show(fs.open_capture(cap_path), kind=kind, format="svg", **opts)
    assert svg._repr_svg_().lstrip().startswith("<?xml") and svg._repr_png_() is None


def test_gguf_model_equals_cli(fs, cli, out_dir):
    """fs.load takes a .gguf file like a directory (here the bundled model converted with scripts/hf_to_gguf.py)."""
    import subprocess
    import sys
    gguf_path = out_dir / "focal-t0.4.q8_0.gguf"
    subprocess.run([sys.executable, ROOT / "scripts" / "hf_to_gguf.py", ROOT / FOCAL, gguf_path, "--type", "Q8_0"],
                   check=True, capture_output=True)
    cli("capture", gguf_path, "--device", "cpu", "--prompt", PROMPT, "--temp", "0.3", "--layers", "0",
        "-o", out_dir / "cli_gguf.h5")
    model = fs.load(gguf_path, device="cpu")
    assert model.n_layers == 4 and model.vocab_size == 4096
    cap = model.run(PROMPT, "focal:0.3", layers=0)
    cap.save(out_dir / "py_gguf.h5")
    assert_same_h5(out_dir / "py_gguf.h5", out_dir / "cli_gguf.h5")
