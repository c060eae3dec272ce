# The content checksums of every file kind against their documented rule (docs/capture-format.md "Content
# checksums"), recomputed with Python's zlib and h5py as an independent oracle; and what the readers do with an edit:
# a changed value is refused naming the object, a researcher's own note attribute is not, and deleting the
# invalidated checksum accepts a deliberate edit.
import zlib

import h5py
import numpy as np
import pytest

from conftest import FOCAL, STANDARD

PROMPT = "The key is blue. The door is red. The key is"


def value_bytes(obj, name):
    """What attrs_crc32 takes of one attribute: strings with a NUL each, numbers as stored (little-endian)."""
    aid = obj.attrs.get_id(name)
    t = aid.get_type()
    v = obj.attrs[name]
    if isinstance(t, h5py.h5t.TypeStringID) and t.is_variable_str():
        vals = [v] if np.ndim(v) == 0 else list(v)
        return b"".join((x.encode() if isinstance(x, str) else bytes(x)) + b"\0" for x in vals)
    a = np.asarray(v, dtype=aid.dtype)
    return a.astype(a.dtype.newbyteorder("<")).tobytes()


def data_crc(ds):
    if h5py.check_string_dtype(ds.dtype) is not None and h5py.check_string_dtype(ds.dtype).length is None:
        return zlib.crc32(b"".join(s + b"\0" for s in ds[()].reshape(-1)))
    return zlib.crc32(np.ascontiguousarray(ds[()]).astype(ds.dtype.newbyteorder("<")).tobytes())


def check_file(path):
    """Every dataset's crc32 and every object's attrs_crc32 recomputed; returns the number of objects checked."""
    n = 0
    with h5py.File(path, "r") as f:
        objs = [("/", f)]
        f.visititems(lambda name, o: objs.append((name, o)))
        for name, o in objs:
            if isinstance(o, h5py.Dataset):
                assert "crc32" in o.attrs, f"{path}:{name} has no crc32"
                assert data_crc(o) == o.attrs["crc32"], f"{path}:{name}: crc32 differs"
            if len(o.attrs) == 0:
                continue
            names = [x.decode() if isinstance(x, bytes) else x for x in o.attrs["attrs_crc32_names"]]
            assert names == sorted(names, key=str.encode), f"{path}:{name}: names not in ascending byte order"
            assert set(names) == set(o.attrs) - {"attrs_crc32", "attrs_crc32_names"}, f"{path}:{name}"
            crc = zlib.crc32(("/" + name if name != "/" else "/").encode() + b"\0")  # the object's path first
            for a in names:
                crc = zlib.crc32(a.encode() + b"\0" + value_bytes(o, a), crc)
            assert crc == o.attrs["attrs_crc32"], f"{path}:{name}: attrs_crc32 differs"
            n += 1
    return n


@pytest.fixture(scope="module")
def files(cli, out_dir):
    d = out_dir / "checksums"
    d.mkdir(exist_ok=True)
    docs = d / "docs.jsonl"
    docs.write_text('{"text": "the cat sat on the mat and the dog ran"}\n{"text": "a b c d e f g h"}\n')
    out = {k: d / (k + ".h5") for k in ("capture", "capture_fp16", "sweep", "stats", "positions")}
    cli("capture", FOCAL, "--prompt", PROMPT, "--compare", "standard", "--relevant", "3", "-o", out["capture"])
    cli("capture", FOCAL, "--prompt", PROMPT, "--fp16", "-o", out["capture_fp16"])
    cli("sweep", FOCAL, "--prompt", PROMPT, "--temps", "0.4:1.0:0.3", "-o", out["sweep"])
    cli("batch", FOCAL, "--data", docs, "--quiet", "-o", out["stats"])
    cli("eval", FOCAL, "--positions", "--data", docs, "--max-tokens", "8", "-o", out["positions"])
    cli("calibrate", STANDARD, "--data", docs, "--steps", "2", "--seq-len", "8", "-o", d / "cal.json")
    out["calibration_log"] = d / "cal.log.h5"
    return out


def test_every_file_kind_matches_the_documented_rule(files):
    for kind, path in files.items():
        assert check_file(path) >= 3, kind


def test_an_edited_value_is_refused_a_note_is_not_and_a_deleted_checksum_accepts_the_edit(fs, files, tmp_path):
    src = files["capture"]
    edited = tmp_path / "edited.h5"
    edited.write_bytes(src.read_bytes())
    with h5py.File(edited, "r+") as f:
        run = list(f["runs"])[0]
        f[f"runs/{run}/token_nll"][0] = 0.5
    with pytest.raises(fs.FocalError, match=f"/runs/{run}/token_nll is damaged"):
        fs.open_capture(edited)
    with h5py.File(edited, "r+") as f:  # the documented way to keep a deliberate edit
        for a in ("crc32", "attrs_crc32", "attrs_crc32_names"):
            del f[f"runs/{run}/token_nll"].attrs[a]
    assert fs.open_capture(edited).token_nll(run)[0] == pytest.approx(0.5)

    noted = tmp_path / "noted.h5"
    noted.write_bytes(src.read_bytes())
    with h5py.File(noted, "r+") as f:
        f.attrs["note"] = "checked by alice"
        f[f"runs/{run}"].attrs["note"] = "the good run"
    fs.open_capture(noted)

    spec = tmp_path / "spec.h5"
    spec.write_bytes(src.read_bytes())
    with h5py.File(spec, "r+") as f:
        f[f"runs/{run}"].attrs.modify("temp_spec_json", '{"mode":"focal","focal_temp":0.5}')
    with pytest.raises(fs.FocalError, match="attrs_crc32"):
        fs.open_capture(spec)
