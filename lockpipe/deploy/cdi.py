"""Does this host hold the CDI spec a ``--gpu-mode cdi`` unit names?

``AddDevice=nvidia.com/gpu=all`` is resolved by podman when the unit starts, from the CDI
specs in the directories containers.conf's ``cdi_spec_dirs`` names: by default
``/etc/cdi`` (static, where ``nvidia-ctk cdi generate --output=…`` writes) and
``/var/run/cdi`` (generated at boot), the container-device-interface library's
``DefaultStaticDir``/``DefaultDynamicDir``. Each spec is one ``.json`` or ``.yaml`` file
whose top-level ``kind`` is the device kind (``nvidia.com/gpu``). Without one, the unit
installs and then fails at start, so :func:`require_specs` refuses the install and
:func:`warn_if_missing` only warns when the unit is rendered for another host.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from lockpipe.deploy.unit import unit_lines
from lockpipe.errors import DeployError
from lockpipe.jsonshape import loads
from lockpipe.log import echo

CDI_DIRS: tuple[Path, ...] = (Path("/etc/cdi"), Path("/var/run/cdi"))
NVIDIA_KIND = "nvidia.com/gpu"
SPEC_SUFFIXES = (".json", ".yaml")
FIX = (
    "fix: `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` on this host "
    "(nvidia-container-toolkit), or render with --gpu-mode manual"
)
# A top-level `kind:` in YAML, quoted or not; the spec format puts it at column 0.
_YAML_KIND = re.compile(r"""^kind:[ \t]*(["']?)([^"'\s#]+)\1[ \t]*(?:#.*)?$""", re.M)
# A qualified CDI device name (vendor.com/class=name), optionally "-"-prefixed (optional).
_CDI_DEVICE = re.compile(r"^-?([A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*)=\S+$")


def _dirs(dirs: Sequence[Path] | None) -> Sequence[Path]:
    return CDI_DIRS if dirs is None else dirs  # looked up per call, so tests may patch it


def spec_kind(path: Path) -> str | None:
    """The ``kind`` a spec file declares; None when it cannot be read or declares none."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if path.suffix == ".json":
        try:
            doc = loads(text)
        except ValueError:
            return None
        kind = doc.get("kind") if isinstance(doc, dict) else None
        return kind if isinstance(kind, str) else None
    m = _YAML_KIND.search(text)
    return m.group(2) if m else None


def find_specs(kind: str, dirs: Sequence[Path] | None = None) -> tuple[Path, ...]:
    """The spec files of ``kind`` directly in ``dirs`` (default :data:`CDI_DIRS`)."""
    found: list[Path] = []
    for d in _dirs(dirs):
        try:
            files = sorted(d.iterdir()) if d.is_dir() else []
        except OSError:  # unreadable: podman could not read it either
            files = []
        found += [p for p in files if p.suffix in SPEC_SUFFIXES and spec_kind(p) == kind]
    return tuple(found)


def unit_kinds(text: str) -> tuple[str, ...]:
    """The CDI device kinds a rendered ``.container`` asks for in its ``AddDevice=`` lines."""
    kinds: list[str] = []
    for line in unit_lines(text):  # not splitlines(): a value may hold \x1c or \x85
        key, _, value = line.partition("=")
        m = _CDI_DEVICE.match(value.strip()) if key.strip() == "AddDevice" else None
        if m and m.group(1) not in kinds:
            kinds.append(m.group(1))
    return tuple(kinds)


def _where(dirs: Iterable[Path]) -> str:
    return " or ".join(str(d) for d in dirs)


def require_specs(text: str, name: str, dirs: Sequence[Path] | None = None) -> None:
    """DeployError naming the fix when the unit asks for a CDI kind no spec here provides."""
    for kind in unit_kinds(text):
        if not find_specs(kind, dirs):
            raise DeployError(
                f"{name}.container asks for {kind} through CDI (--gpu-mode cdi), but no CDI "
                f"spec of kind {kind} is in {_where(_dirs(dirs))}, so podman cannot start it "
                f"on this host; {FIX}"
            )


def warn_if_missing(dirs: Sequence[Path] | None = None) -> bool:
    """Warn in one line when no ``nvidia.com/gpu`` spec is here; True when one is."""
    if find_specs(NVIDIA_KIND, dirs):
        return True
    echo(f"warning: no CDI spec of kind {NVIDIA_KIND} in {_where(_dirs(dirs))}: the unit "
         "starts only on a host that has one (`nvidia-ctk cdi generate "
         "--output=/etc/cdi/nvidia.yaml` there), and --install refuses here",
         style="yellow")  # fmt: skip
    return False
