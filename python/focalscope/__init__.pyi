# Type stubs of the focalscope package: everything is the extension module focalscope._core (its stubs, _core.pyi,
# are generated from the bindings at build time).
from ._core import (Capture as Capture, FocalError as FocalError, Figure as Figure, Generation as Generation,
                    Model as Model, Stats as Stats, Sweep as Sweep, TempSpec as TempSpec,
                    cached_models as cached_models, cpu_gemm as cpu_gemm, cuda_built as cuda_built, figure as figure,
                    figure_kinds as figure_kinds, load as load, metric_names as metric_names,
                    open_capture as open_capture, open_stats as open_stats, open_sweep as open_sweep,
                    show as show, version as version)

__version__: str
__all__: list[str]
