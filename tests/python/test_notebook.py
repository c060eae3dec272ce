# The example notebook runs headless (nbclient) and shows what it should: the capture's HTML view, a heatmap and a
# distribution as PNGs. The executed notebook and its PNGs are kept in the output directory for a person to look at.
import base64

import nbformat
from nbclient import NotebookClient

from conftest import ROOT


def test_example_notebook_runs_headless(out_dir):
    path = ROOT / "examples" / "python_quickstart.ipynb"
    nb = nbformat.read(path, as_version=4)
    # Run from the repository's root, not examples/: the notebook finds the bundled model from any folder of the
    # repository (it named "../assets/..." and ran only from examples/).
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    nbformat.write(nb, out_dir / "python_quickstart.executed.ipynb")
    by_tag = {c.metadata.get("tags", [None])[0]: c for c in nb.cells if c.cell_type == "code"}
    for c in nb.cells:
        if c.cell_type == "code":
            assert not [o for o in c.outputs if o.output_type == "error"], c.source
    html = "".join(o.data.get("text/html", "") for o in by_tag["capture"].outputs if o.output_type == "execute_result")
    assert "focalscope capture" in html and "data:image/png;base64," in html and "<script" not in html
    text = "".join(o.get("text", "") for o in by_tag["arrays"].outputs)
    assert "(" in text and "focal_t0.4: entropy per layer" in text and "mean JS" in text
    for kind in ("heatmap", "distribution"):
        pngs = [o.data["image/png"] for o in by_tag[kind].outputs
                if o.output_type == "execute_result" and "image/png" in o.data]
        assert len(pngs) == 1, f"the {kind} cell shows no PNG"
        png = base64.b64decode(pngs[0])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
        (out_dir / f"notebook_{kind}.png").write_bytes(png)
    assert "16 tokens" in "".join(o.get("text", "") for o in by_tag["sweep"].outputs)
