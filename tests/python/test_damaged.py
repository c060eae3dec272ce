# Damaged HDF5 files from Python (issue 36): files that crash or hang libhdf5 1.10 when read unprotected
# (tests/data/damaged-h5/) raise focalscope.FocalError naming the file as damaged, and the interpreter lives on:
# the file they were made from opens right after.
import pytest

from conftest import ROOT

DAMAGED = ROOT / "tests" / "data" / "damaged-h5"
SEEDS = ROOT / "fuzz" / "corpus" / "h5_bytes"


@pytest.fixture(autouse=True)
def short_limit(monkeypatch):
    monkeypatch.setenv("FOCAL_H5_CHECK_TIMEOUT_S", "3")  # read by the check at each open


@pytest.mark.parametrize("opener,name,seed", [
    ("open_capture", "capture-segv-h5hg-read.h5", "capture-fp16.h5"),
    ("open_sweep", "sweep-segv.h5", "sweep.h5"),
])
def test_damaged_file_raises_and_the_kernel_lives(fs, opener, name, seed):
    path = DAMAGED / name
    with pytest.raises(fs.FocalError, match=r"is damaged: the HDF5 library crashed reading it \(signal") as e:
        getattr(fs, opener)(str(path))
    assert str(path) in str(e.value)
    # Still alive, and a good file of the same kind opens.
    getattr(fs, opener)(str(SEEDS / seed))
