"""``python -m pipeline.payloads``: the same as ``python -m pipeline payloads``.

Kept so the tests and the benchmark can start the verb as its own process
(and kill it mid-file).
"""

from __future__ import annotations

import sys

from pipeline.__main__ import main

if __name__ == "__main__":
    sys.exit(main(["payloads", *sys.argv[1:]]))
