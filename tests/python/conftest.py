# Fixtures of the Python package's tests: the repository, the `focal` CLI (the oracle), the bundled models.
# FOCAL_CLI names the CLI (default build/cli/focal); FOCAL_PY_OUT keeps files for a person to look at.
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture(scope="session")
def focal_cli():
    cli = pathlib.Path(os.environ.get("FOCAL_CLI", ROOT / "build" / "cli" / "focal")).resolve()
    assert cli.is_file(), f"the focal CLI is not built at {cli}: build it (scripts/build.sh) or set FOCAL_CLI"
    return str(cli)


@pytest.fixture(scope="session")
def cli(focal_cli):
    """Runs the CLI from the repository root and returns its stdout; fails with its stderr."""
    def run(*args):
        p = subprocess.run([focal_cli, *map(str, args)], cwd=ROOT, capture_output=True, text=True)
        assert p.returncode == 0, f"focal {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stderr}"
        return p.stdout
    return run


@pytest.fixture(scope="session")
def out_dir(tmp_path_factory):
    keep = os.environ.get("FOCAL_PY_OUT")
    if keep:
        pathlib.Path(keep).mkdir(parents=True, exist_ok=True)
        return pathlib.Path(keep)
    return tmp_path_factory.mktemp("out")


@pytest.fixture(scope="session")
def fs():
    import focalscope
    return focalscope


# Models are loaded by the same relative path the CLI gets, so the provenance attribute model_path matches too.
FOCAL = "assets/models/focal-t0.4"
STANDARD = "assets/models/standard"
LEARNED = "assets/models/focal-learned"


@pytest.fixture(scope="session")
def models(fs):
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return {p: fs.load(p, device="cpu") for p in (FOCAL, STANDARD, LEARNED)}
    finally:
        os.chdir(cwd)
