"""``python -m pipeline``: runs a verb and turns every PipelineError into a clean exit."""

from __future__ import annotations

import signal
import sys

from pipeline.cli import run
from pipeline.errors import PipelineError
from pipeline.log import console


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    # A CI cancel or `kill` sends SIGTERM: treat it as Ctrl-C, so smoke containers are
    # removed, download journals flushed and builds stopped by the same cleanup.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except PipelineError as exc:
        console.print(f"error: {exc}", style="bold red", markup=False, highlight=False)
        return exc.return_code
    except KeyboardInterrupt:
        console.print(
            "interrupted; run again to resume (downloads keep what was written)", style="red"
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
