# Past the trained context (issue 33): a rotary model runs a longer prompt with a UserWarning (not an exception),
# the capture's provenance keeps the sentence the CLI prints, and generate() continues past the context as
# `focal generate` does, with the same tokens.
import warnings

import h5py
import pytest

from conftest import ROOT

PROMPT = "The quick brown fox jumps over the lazy dog while attention heads focus on tokens"


@pytest.fixture(scope="module")
def short_model(cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("past_context") / "model16"
    cli("init", d, "--tokenizer", ROOT / "assets" / "models" / "tokenizer.model", "--hidden", "32", "--layers", "1",
        "--heads", "2", "--kv-heads", "1", "--intermediate", "64", "--context", "16")
    return d


def test_prompt_past_the_context_warns_and_runs(fs, short_model, tmp_path, focal_cli):
    import subprocess
    m = fs.load(short_model, device="cpu")
    n = len(m.tokenize(PROMPT))
    assert n > 16
    sentence = f"{n} tokens run past the model's trained context of 16"
    with pytest.warns(UserWarning, match=sentence):
        cap = m.run(PROMPT, probs=False, scores=False)
    assert cap.tokens.shape == (n,)
    path = tmp_path / "py.h5"
    cap.save(path)
    with h5py.File(path) as f:
        assert sentence in f.attrs["warnings"]
    # The CLI prints the same sentence.
    p = subprocess.run([focal_cli, "capture", short_model, "--prompt", PROMPT, "--store", "metrics", "-o",
                        tmp_path / "cli.h5"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    with h5py.File(tmp_path / "cli.h5") as f:
        assert f.attrs["warnings"] == h5py.File(path).attrs["warnings"]
    # Within the context: no warning at all.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.run("The quick brown fox", probs=False, scores=False)


def test_generate_continues_past_the_context_as_the_cli(fs, short_model, cli):
    m = fs.load(short_model, device="cpu")
    prompt = "The quick brown fox"
    with pytest.warns(UserWarning, match="past the model's trained context of 16"):
        g = m.generate(prompt, 20)
    assert len(m.tokenize(prompt)) + len(g.ids) > 16
    out = cli("generate", short_model, "--prompt", prompt, "-n", "20")
    assert out.strip() == m.detokenize(m.tokenize(prompt).tolist() + g.ids).strip()


def test_rope_scaling_override_as_the_cli(fs, short_model, tmp_path, focal_cli):
    """load(rope_scaling=...) is `--rope-scaling`: the same per-token loss as the CLI's capture under the override
    (1e-6 relative: one code path), another than the model's own past its context (dynamic NTK rescales for the call's
    length), and both files record the override; a malformed one is refused naming it."""
    import subprocess
    import numpy as np
    plain = fs.load(short_model, device="cpu")
    # what loading chose is said as the CLI's "warning:" line says it (Python said nothing)
    with pytest.warns(UserWarning, match="load: rope_scaling dynamic:2 replaces the model's own"):
        m = fs.load(short_model, device="cpu", rope_scaling="dynamic:2")
    with pytest.warns(UserWarning, match="past the model's trained context of 16"):
        cap = m.run(PROMPT, probs=False, scores=False)
        ref = plain.run(PROMPT, probs=False, scores=False)
    cap.save(tmp_path / "py.h5")
    p = subprocess.run([focal_cli, "capture", short_model, "--prompt", PROMPT, "--store", "metrics",
                        "--rope-scaling", "dynamic:2", "-o", tmp_path / "cli.h5"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    cli_cap = fs.open_capture(tmp_path / "cli.h5")
    np.testing.assert_allclose(cap.token_nll()[:-1], cli_cap.token_nll()[:-1], rtol=1e-6)
    assert np.abs(cap.token_nll()[:-1] - ref.token_nll()[:-1]).max() > 1e-4
    for path in (tmp_path / "py.h5", tmp_path / "cli.h5"):
        with h5py.File(path) as f:
            assert "rope_scaling dynamic:2 replaces the model's own" in f.attrs["warnings"]
    with pytest.raises(ValueError, match="rope_scaling: .*sideways:2"):  # a setting's spelling, as the others
        fs.load(short_model, device="cpu", rope_scaling="sideways:2")
