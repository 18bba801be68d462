import os
import subprocess
from pathlib import Path

import pytest

from fixture.harness import BUILD_DIR, client_path
from fixture.source import write_source

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `root` (pyproject's markers) are skipped when not root, with the marker's
    reason: `pytest.mark.root(reason="the BCC collector needs root")`."""
    if os.geteuid() == 0:
        return
    for item in items:
        if (mark := item.get_closest_marker("root")) is not None:
            item.add_marker(pytest.mark.skip(reason=mark.kwargs.get("reason", "needs root")))


@pytest.fixture(scope="session")
def built_clients() -> Path:
    """The eight fixture clients, built by the project's Makefile (a no-op when up to date)."""
    subprocess.run(["make", "-s", "-C", str(ROOT), "clients"], check=True)
    assert client_path("baseline").exists()
    return BUILD_DIR


@pytest.fixture(scope="session")
def exerciser(tmp_path_factory) -> Path:
    """tests/programs/exerciser.c: a subject whose every syscall the test controls."""
    out = tmp_path_factory.mktemp("bin") / "exerciser"
    subprocess.run(["gcc", "-O2", "-g", "-pthread", "-o", str(out),
                    str(ROOT / "tests" / "programs" / "exerciser.c")], check=True)
    return out


@pytest.fixture(scope="session")
def data_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "data.bin"
    path.write_bytes(os.urandom(200_000))
    return path


@pytest.fixture(scope="session")
def source_file(tmp_path_factory) -> Path:
    return write_source(tmp_path_factory.mktemp("source") / "source.bin")
