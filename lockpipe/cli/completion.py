"""``lockpipe completion bash``: a bash completion script made from lockpipe's own parser.

No dependency: the script is written from the argparse parser that runs the verbs, so it
cannot drift from them. It completes verbs, each verb's options, the values of options
with choices (``--engine``, ``--color``, …), paths after an option that takes one, and
the lock's target and payload names, which it asks ``lockpipe completion bash --names``
for (the lock found from the current folder, as every verb finds it).

    eval "$(lockpipe completion bash)"                    # this shell
    lockpipe completion bash > ~/.local/share/bash-completion/completions/lockpipe
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from lockpipe.errors import LockpipeError
from lockpipe.lock.model import load_lock
from lockpipe.log import result


def _verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subparsers here, as shtab reads them
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS]


def bash_script(parser: argparse.ArgumentParser) -> str:
    """The completion script for ``parser`` (lockpipe's own, from ``main.build_parser``)."""
    verbs = _verbs(parser)
    opts, values, paths = [], [], []
    for verb, sub in verbs.items():
        actions = _options(sub)
        flags = " ".join(s for a in actions for s in a.option_strings)
        opts.append(f"        {shlex.quote(verb)}) opts={shlex.quote(flags)} ;;")
        for a in actions:
            if a.nargs == 0:
                continue
            for flag in a.option_strings:
                if a.choices:
                    words = shlex.quote(" ".join(str(c) for c in a.choices))
                    values.append(f"        {shlex.quote(f'{verb} {flag}')}) values={words} ;;")
                else:
                    paths.append(f"{verb} {flag}")
    takes_path = "|".join(shlex.quote(p) for p in paths) or "''"
    return f"""\
# bash completion for lockpipe, written by `lockpipe completion bash` from its parser
_lockpipe() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} verb= i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${{COMP_WORDS[i]}} in -*) ;; *) verb=${{COMP_WORDS[i]}}; break ;; esac
    done
    if [[ -z $verb ]]; then
        COMPREPLY=($(compgen -W {shlex.quote(" ".join([*verbs, "--help", "--version"]))} -- "$cur"))
        return
    fi
    local opts= values=
    case $verb in
{chr(10).join(opts)}
    esac
    case "$verb $prev" in
{chr(10).join(values)}
        {takes_path}) return ;;  # a path or a free value: bash's default completion
    esac
    if [[ -n $values ]]; then
        COMPREPLY=($(compgen -W "$values" -- "$cur"))
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$(lockpipe completion bash --names 2>/dev/null)" -- "$cur"))
    fi
}}
complete -o default -F _lockpipe lockpipe
"""


def names(lock_path: Path | None) -> list[str]:
    """The lock's target and payload names; none where no valid lock is found (completion
    never prints an error into a prompt)."""
    if lock_path is None:
        return []
    try:
        lock = load_lock(lock_path)
    except (LockpipeError, OSError):
        return []
    return sorted({*lock.targets, *lock.payloads})


def do_completion(args: argparse.Namespace) -> int:
    if args.names:
        for name in names(args.lock):
            result(name)
        return 0
    from lockpipe.cli.main import build_parser

    sys.stdout.write(bash_script(build_parser()))  # as written: no console styling
    return 0
