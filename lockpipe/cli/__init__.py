"""The command line: ``lockpipe VERB`` (or ``python -m lockpipe VERB``), the nox sessions' verbs.

``main`` parses and dispatches; each verb group's module is imported only when
one of its verbs runs, so ``plan`` and ``--help`` never load the SDKs or HTTP.
"""
