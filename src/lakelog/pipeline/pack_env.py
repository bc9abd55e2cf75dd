"""Shipping Lakelog to Spark executors: an archive of Lakelog and what it imports, for
`spark.archives`, the way PySpark users ship a virtual environment.

On a cluster, Spark's executors start Python workers on other machines, and those import
`lakelog` (the pipeline's tasks, the Spark source's reader, the worker daemon). The archive
holds the installed files of Lakelog and of every distribution it needs at run time (its
dependencies and the `spark` extra's, followed recursively), except PySpark and py4j,
which every Spark installation puts on its workers' path itself (and whose version must be
the cluster's). Spark unpacks it into each executor's working directory as `lakelog_env/`,
and `spark.executorEnv.PYTHONPATH=lakelog_env` puts it on the workers' path.

The workers must run the same Python minor version on the same platform as this machine
(the archive holds compiled extensions): `lakelog_env/LAKELOG_ENV` names both, and the
check of the workers (`lakelog.spark.worker_check`) says when they differ. An archive is
built once per set of installed versions and Lakelog sources and kept in the cache.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import io
import json
import os
import platform
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = "lakelog_env"
"""The directory each executor unpacks the archive into, relative to its working dir."""
MARKER = "LAKELOG_ENV"
"""A small JSON file at the archive's top: the Python version and platform it was built for."""
LEFT_OUT = frozenset({"pyspark", "py4j"})
"""The cluster's own: Spark puts its pyspark and py4j zips on every worker's path."""
EXTRAS = ("spark",)
COMPRESS_LEVEL = 1
"""gzip level: shared libraries barely compress, and level 1 packs ~3x faster than 6."""


@dataclass(frozen=True)
class Packed:
    path: Path
    distributions: tuple[str, ...]
    size: int


def runtime_distributions(root: str = "lakelog", extras: tuple[str, ...] = EXTRAS) -> list[str]:
    """Canonical names of the installed distributions `root` needs at run time (with
    `extras`), transitively, markers evaluated for this interpreter, LEFT_OUT excepted."""
    environment = default_environment()
    found: set[str] = set()
    done: set[tuple[str, tuple[str, ...]]] = set()
    pending: list[tuple[str, tuple[str, ...]]] = [(canonicalize_name(root), extras)]
    while pending:
        name, wanted = pending.pop()
        if (name, wanted) in done:
            continue
        done.add((name, wanted))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency that is not installed here
        if name not in LEFT_OUT:  # left out, but what it needs (pyspark[sql]: pyarrow) is not
            found.add(name)
        contexts = [{**environment, "extra": extra} for extra in (*wanted, "")]
        for line in dist.requires or []:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is not None and not any(marker.evaluate(c) for c in contexts):
                continue
            child = canonicalize_name(requirement.name)
            pending.append((child, tuple(sorted(requirement.extras))))
    return sorted(found)


def _site_packages_files(name: str) -> Iterator[tuple[Path, str]]:
    """(file on disk, path inside the archive) of one installed distribution: its files
    under site-packages (scripts in bin/ are not needed by workers). An editable install of
    Lakelog points at its source tree, so its package directory is taken from there."""
    dist = metadata.distribution(name)
    site = Path(str(dist.locate_file(""))).resolve()
    editable = False
    for entry in dist.files or []:
        path = Path(str(dist.locate_file(entry))).resolve()
        if path.name.startswith("__editable__"):
            editable = True
            continue
        if site not in path.parents or "__pycache__" in path.parts or not path.is_file():
            continue
        yield path, path.relative_to(site).as_posix()
    if editable and canonicalize_name(name) == "lakelog":
        import lakelog

        package = Path(lakelog.__file__).resolve().parent
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                yield path, f"lakelog/{path.relative_to(package).as_posix()}"


def _fingerprint(names: list[str]) -> str:
    """Changes when an installed version, Python or the Lakelog sources change."""
    digest = hashlib.sha256()
    digest.update(f"{sys.version}|{platform.machine()}|{sorted(LEFT_OUT)}".encode())
    for name in names:
        digest.update(f"{name}={metadata.version(name)};".encode())
    for path, inside in _site_packages_files("lakelog"):
        stat = path.stat()
        digest.update(f"{inside}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:16]


def marker_content() -> dict[str, str]:
    return {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "platform": f"{sys.platform}-{platform.machine()}",
    }


def pack(output: Path) -> Packed:
    """Write the archive to `output` (a .tar.gz), atomically."""
    names = runtime_distributions()
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=output.parent, prefix=".packing-", suffix=".tar.gz")
    os.close(fd)
    try:
        with tarfile.open(temporary, "w:gz", compresslevel=COMPRESS_LEVEL) as archive:
            added: set[str] = set()
            for name in names:
                for path, inside in _site_packages_files(name):
                    if inside not in added:
                        added.add(inside)
                        archive.add(path, arcname=inside, recursive=False)
            info = tarfile.TarInfo(MARKER)
            body = json.dumps(marker_content()).encode()
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
        os.replace(temporary, output)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return Packed(output, tuple(names), output.stat().st_size)


def cached_pack(cache: Path) -> Path:
    """The archive for what is installed now, built into `cache` if not there yet; older
    archives in `cache` are removed (one set of installed versions is current)."""
    names = runtime_distributions()
    name = f"lakelog-env-{_fingerprint(names)}.tar.gz"
    target = cache / name
    if not target.exists():
        pack(target)
        for old in cache.glob("lakelog-env-*.tar.gz"):
            if old.name != name:
                old.unlink(missing_ok=True)
    return target


def driver_paths() -> list[str]:
    """Where this interpreter finds lakelog and its dependencies: site-packages, and the
    source tree of an editable install (a `.pth` file is not read from PYTHONPATH)."""
    import lakelog

    site = Path(str(metadata.distribution("numpy").locate_file(""))).resolve()
    source = Path(lakelog.__file__).resolve().parent.parent
    return [str(site)] if source == site else [str(site), str(source)]


def ship_confs(archive: Path) -> dict[str, str]:
    """The Spark confs that unpack `archive` on every executor and put it on the path.

    Spark gives the same PYTHONPATH to the Python processes the driver starts itself (a
    data source's planning steps run there, with the workers' interpreter), so after the
    unpacked archive it names where this driver's own interpreter finds lakelog: absent
    on other machines, so ignored there."""
    return {
        "spark.archives": f"{archive.resolve()}#{ROOT}",
        "spark.executorEnv.PYTHONPATH": os.pathsep.join([ROOT, *driver_paths()]),
    }
