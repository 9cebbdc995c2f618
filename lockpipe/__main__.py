"""``python -m lockpipe``: the same as the ``lockpipe`` command."""

from __future__ import annotations

import sys

from lockpipe.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
