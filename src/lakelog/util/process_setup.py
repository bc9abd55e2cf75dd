"""Set-up every `lakelog` process does before the rest of lakelog is imported.

Where Hypothesis gets imported (kio imports it in a process that imported pytest first, see
`lakelog/__init__.py`) it writes a `.hypothesis/` directory into the working directory on
first use: `lakelog serve --listen notaport` run in a clean directory could leave one
behind. Its storage goes to a per-user directory under the temp
dir instead (unless HYPOTHESIS_STORAGE_DIRECTORY is set), so no command leaves files where
it was run."""

from __future__ import annotations

import os
import tempfile

_uid = os.getuid() if hasattr(os, "getuid") else 0
os.environ.setdefault(
    "HYPOTHESIS_STORAGE_DIRECTORY",
    os.path.join(tempfile.gettempdir(), f"lakelog-hypothesis-{_uid}"),
)
