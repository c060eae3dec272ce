# A temperature file of `focal calibrate` (issue 34) is a spec in Python too: temp="calibrated:FILE" gives the run the
# CLI's `--temp calibrated:FILE` gives (the CLI is the oracle: per-token loss and every metric within 1e-6
# relative, one code path), names it as the CLI does, and a file made for another model is refused with the reason.
import numpy as np
import pytest

from conftest import ROOT, STANDARD

PROMPT = "The keeper lit the lamp by the door, and the children counted the windows that were still dark."


@pytest.fixture(scope="module")
def temps(cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("calibrated")
    text = d / "text.txt"
    text.write_text(("The old house stood at the end of the lane, and every evening the keeper lit the lamp by the "
                     "door. Children passed it on their way home from school and counted the windows that were still "
                     "dark.\n\n") * 12)
    out = d / "temps.json"
    cli("calibrate", ROOT / STANDARD, "--data", text, "-o", out, "--granularity", "head", "--steps", "4",
        "--seq-len", "32", "--batch", "2", "--val-windows", "2", "--eval-every", "2")
    return out


def test_calibrated_spec_matches_the_cli(fs, models, cli, temps, tmp_path):
    m = models[STANDARD]
    cap = m.run(PROMPT, f"calibrated:{temps}", probs=False, scores=False)
    out = tmp_path / "cli.h5"
    cli("capture", ROOT / STANDARD, "--prompt", PROMPT, "--temp", f"calibrated:{temps}", "--store", "metrics",
        "-o", out)
    ref = fs.open_capture(out)
    assert cap.runs == ref.runs
    run = cap.runs[0]
    np.testing.assert_allclose(cap.token_nll(run)[:-1], ref.token_nll(run)[:-1], rtol=1e-6)
    np.testing.assert_allclose(cap.metrics(run), ref.metrics(run), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(cap.row_scale(run), ref.row_scale(run), rtol=1e-6)
    # not the model's own standard run: the calibrated temperatures moved the row scales
    std = m.run(PROMPT, "standard", probs=False, scores=False)
    assert not np.allclose(cap.row_scale(run), std.row_scale())


def test_calibrated_file_of_another_model_is_refused(fs, models, temps):
    with pytest.raises(fs.FocalError, match="calibrated for other weights"):
        models["assets/models/focal-learned"].run(PROMPT, f"calibrated:{temps}", probs=False, scores=False)
