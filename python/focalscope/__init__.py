"""focalscope: run language models under Focal Attention and read what every attention head did.

    import focalscope as fs
    model = fs.load("assets/models/focal-t0.4")
    cap = model.run("The cat sat on the mat.", temp="focal:0.4", compare="standard")
    p = cap.probs("focal_t0.4", layer=3, head=1)      # numpy float32 [query, key], a view
    fs.show(cap, layer=3, head=1, kind="heatmap")     # inline in Jupyter

Everything here is the C++ runtime (focalscope._core); the API is described in docs/python.md.
"""
from ._core import (Capture, FocalError, Figure, Generation, Model, Stats, Sweep, TempSpec, cached_models, cpu_gemm,
                    cuda_built, figure, figure_kinds, load, metric_names, open_capture, open_stats, open_sweep, show,
                    version)

__version__ = version()
__all__ = ["Capture", "FocalError", "Figure", "Generation", "Model", "Stats", "Sweep", "TempSpec", "cached_models",
           "cpu_gemm", "cuda_built", "figure", "figure_kinds", "load", "metric_names", "open_capture", "open_stats",
           "open_sweep", "show", "version"]
