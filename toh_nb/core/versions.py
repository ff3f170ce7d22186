"""Version checks for the few places that must touch another library's internals (issue 43).

Where no public seam exists (ipykernel's per-comm subshell hook, pyzmq's stream callback, Ray's
single-node switch), an adapter module names each use as a :class:`Quirk`: the versions of each package
it is known to work on. On any other version the adapter leaves the library alone and takes its
documented fallback, and says why (:meth:`Quirk.problem`), rather than guessing at internals that may
have moved. The adapters are ``notebook/kernel_adapter.py`` and ``providers/ray/ray_adapter.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Iterable, Mapping

Version = tuple[int, ...]

#: why a quirk is off (one place for these texts)
ABSENT = "{package} is not installed"
UNTESTED = "{package} {version} is outside {lowest} to before {below}, the versions this is known to work on"


def parse_version(text: str) -> Version:
    """``"7.4.0"`` -> ``(7, 4, 0)``; a pre-release's or local tail is dropped (``"8.0.0a1"`` -> ``(8, 0, 0)``,
    ``"2.60.0.dev0"`` -> ``(2, 60, 0)``)."""
    numbers = []
    for part in text.strip().split("."):
        digits = ""
        for char in part:
            if not char.isdigit():
                break
            digits += char
        if not digits:
            break
        numbers.append(int(digits))
        if len(digits) < len(part):
            break
    return tuple(numbers)


def dotted(version: Version) -> str:
    return ".".join(map(str, version))


def installed(packages: Iterable[str]) -> dict[str, Version | None]:
    """Each distribution's installed version (None: not installed), from its metadata (nothing imported)."""
    found: dict[str, Version | None] = {}
    for package in packages:
        try:
            found[package] = parse_version(metadata.version(package))
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


@dataclass(frozen=True)
class Quirk:
    """One use of a library's internals and the versions it is known to work on: for each package,
    ``(package, lowest, below)``, the first version it works on and the first one it is not known to."""

    name: str
    needs: tuple[tuple[str, Version, Version], ...]

    def problem(self, versions: Mapping[str, Version | None]) -> str | None:
        """None when ``versions`` (package -> installed version) are all known to work; else why not."""
        for package, lowest, below in self.needs:
            version = versions.get(package)
            if version is None:
                return ABSENT.format(package=package)
            if not lowest <= version < below:
                return UNTESTED.format(package=package, version=dotted(version), lowest=dotted(lowest),
                                       below=dotted(below))
        return None
