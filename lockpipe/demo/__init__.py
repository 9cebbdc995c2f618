"""``lockpipe demo``: the whole pipeline on the small llama-cpu target, offline.

Its inputs come from what a bare machine reaches (Debian's archive and PyPI) and are
served through a loopback mirror; its lock is the repository's ``locks/demo/``. The
planning (:mod:`lockpipe.demo.plan`) is pure; the other modules each do one thing to
the world: Debian bases (:mod:`.bases`), the Gemma GGUF (:mod:`.gemma`), the mirror
(:mod:`.mirror`), the registry (:mod:`.registry`) and the run itself (:mod:`.run`).
"""
