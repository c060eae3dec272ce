# Models by their Hugging Face name from Python: a hub cache laid out as huggingface_hub lays it out (refs/, snapshots/
# of symlinks into blobs/), built from the bundled model; load() by name and revision, cached_models(), and the
# error for a name that is not cached.
import shutil

import pytest

from conftest import FOCAL, ROOT

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def hub(tmp_path, monkeypatch):
    repo = tmp_path / "hub" / "models--focal--tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "blobs").mkdir()
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    for i, f in enumerate(sorted(p for p in (ROOT / FOCAL).iterdir() if p.is_file())):
        shutil.copyfile(f, repo / "blobs" / f"blob{i}")
        (snap / f.name).symlink_to(f"../../blobs/blob{i}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return snap


def test_load_by_name(fs, models, hub):
    assert fs.cached_models() == ["focal/tiny"]
    for name in ("focal/tiny", "focal/tiny@main", f"focal/tiny@{COMMIT}"):
        m = fs.load(name, device="cpu")
        assert m.path == str(hub)
        assert m.weights_checksum == models[FOCAL].weights_checksum
    with pytest.raises(fs.FocalError, match=r"close to it: focal/tiny.*never downloads"):
        fs.load("focal/tiyn")
