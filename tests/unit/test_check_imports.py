"""scripts/check_imports.py fails on an import cycle and passes without one."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_imports.py"


def _load():
    spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _run(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root), "--package", "pkg", *extra],
        capture_output=True,
        text=True,
        check=False,
    )


BASE = {
    "pkg/__init__.py": "",
    "pkg/low.py": "X = 1\n",
    "pkg/sub/__init__.py": "",
    "pkg/sub/mid.py": "from pkg import low\n",
}


def test_passes_without_a_cycle(tmp_path: Path) -> None:
    _package(tmp_path, {**BASE, "pkg/top.py": "from pkg.sub import mid\nimport pkg.low\n"})
    result = _run(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "runtime cycles: none; typing-only cycles: none" in result.stdout


def test_fails_on_a_lazy_import_cycle(tmp_path: Path) -> None:
    _package(
        tmp_path,
        {
            **BASE,
            "pkg/low.py": "def f():\n    from .sub.mid import g\n    return g\n",
        },
    )
    result = _run(tmp_path)
    assert result.returncode == 1
    assert "FAIL runtime cycle" in result.stdout
    assert "pkg.low" in result.stdout and "pkg.sub.mid" in result.stdout


def test_typing_only_cycle_is_reported_and_fails_only_through_a_forbidden_module(
    tmp_path: Path,
) -> None:
    _package(
        tmp_path,
        {
            **BASE,
            "pkg/low.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from pkg.sub.mid import g\n"
            ),
        },
    )
    result = _run(tmp_path, "--forbid")
    assert result.returncode == 0, result.stdout
    assert "runtime cycles: none; typing-only cycles: 1 (2 modules)" in result.stdout
    result = _run(tmp_path, "--forbid", "pkg.low")
    assert result.returncode == 1
    assert "FAIL typing-only cycle through pkg.low" in result.stdout


def test_from_import_edge_goes_to_the_submodule_if_there_is_one(tmp_path: Path) -> None:
    _package(tmp_path, {**BASE, "pkg/top.py": "from pkg.sub import mid\nfrom pkg.low import X\n"})
    _, runtime, typing = _load().build_graph(tmp_path, "pkg")
    assert runtime["pkg.top"] == {"pkg.sub.mid", "pkg.low"}
    assert not any(typing.values())


def test_lakelog_has_no_runtime_cycle() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout
