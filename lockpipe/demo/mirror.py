"""A loopback HTTP mirror laid out as ``{base}/{host}/{path}``, as ``--mirror`` expects.

Files are hard-linked into its folder (copied across file systems); it logs the
paths it served, so a caller can prove a fetch came from it and not upstream.
"""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from lockpipe.demo.bases import link_or_copy


class Mirror:
    """A loopback HTTP server on a free port, serving ``root``; it logs what it served."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.served: list[str] = []
        mirror = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                mirror.served.append(self.path)

        root.mkdir(parents=True, exist_ok=True)
        handler = functools.partial(Handler, directory=str(root))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, upstream_url: str, path: Path) -> None:
        """Serve ``path`` where a fetch of ``upstream_url`` through the mirror looks."""
        parts = urlsplit(upstream_url)
        dest = self.root / parts.netloc / parts.path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            link_or_copy(path, dest)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
