"""gpu-check's verdict on one llama-server run, by rules read from the pinned tree's own
log strings (run.sh extracts the tree; the unit tests read the same sdist).

Each rule is a format string that llama.cpp logs (found by a piece of its text in the file
that logs it), turned into a regular expression, so a log line is matched by what the tree
prints, not by a copy typed here. Standard library only: the GPU host has python3 + numpy.

    python3 judge.py build TIME_LEFT FULL_SECONDS    # which FA kernel set to build first
    python3 judge.py verdict TREE OUT CUDA CTK CTV SPEC_TYPES FA_ALL_QUANTS WHY PHASES NEGATIVE \
        DRAFT_COMPLETION    # OUT/server.log (qwen35 MTP), OUT/server-draft.log (gemma4 + assistant)
    python3 judge.py negative TREE LOG   # exit 0 when the log puts Flash Attention elsewhere
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

# (file in the tree, a piece of the format string's text): each finds exactly one call
FORMATS = {
    "mismatch": ("src/llama-context.cpp", "is assigned to device %s (usually due to missing"),
    "disabled": ("src/llama-context.cpp", "not supported, set to disabled"),
    "enabled": ("src/llama-context.cpp", "%s: %s enabled"),
    "offloaded": ("src/llama-model.cpp", "offloaded %d/%d layers"),
    "kv_size": ("src/llama-kv-cache.cpp", "cells, %3d layers"),
    "mtp_context": ("common/speculative.cpp", "creating MTP draft context"),
    "statistics": ("common/speculative.cpp", "statistics %16s"),
    "draft_load": ("common/speculative.cpp", "loading draft model '%s'"),
    "arch": ("src/llama-model.cpp", "arch                  = %s"),
}  # fmt: skip
# The --model-draft run: a gemma4 target drafted for by a gemma4-assistant (the lock's
# llama-cuda and llama-cuda-slots; src/llama-arch.cpp's names for the two architectures)
DRAFT_TARGET_ARCH, DRAFT_ARCH = "gemma4", "gemma4-assistant"
# The probe whose name the fused-op lines carry for flash attention (src/llama-context.cpp)
FA_PROBE = re.compile(r"llm_fused_op_flash_attn_probe\s*=\s*\{[^}]*?\"([^\"]+)\"", re.S)
CALL = re.compile(r"\b(?:LLAMA_LOG|LOG|SPC|SLT)_[A-Z]+\s*\(\s*(?:\*this\s*,\s*)?"
                  r"((?:\"(?:[^\"\\]|\\.)*\"\s*)+)")  # fmt: skip
LITERAL = re.compile(r"\"((?:[^\"\\]|\\.)*)\"")
SPEC = re.compile(r"%([-+ #0]*)(\d+|\*)?(?:\.(\d+|\*))?(hh|h|ll|l|z|j|t)?([diuxXfeEgsc%])")
FIELDS = {"%": "%", "s": r"\s*(.*?)", "c": "(.)", "f": r"\s*(-?[\d.]+)", "e": r"\s*(\S+)",
          "E": r"\s*(\S+)", "g": r"\s*(\S+)"}  # fmt: skip
# Two thirds of the time left may go to the build; the rest serves and writes the result
BUILD_SHARE = (2, 3)


class TreeError(Exception):
    """The tree lacks a log string a rule needs (another llama.cpp version): fix FORMATS."""


def c_format(source: str, piece: str, where: str) -> tuple[str, int]:
    """The one log call's format string in ``source`` holding ``piece``, and its line."""
    found = []
    for m in CALL.finditer(source):
        text = "".join(LITERAL.findall(m.group(1)))
        text = text.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
        if piece in text:
            found.append((text, source.count("\n", 0, m.start()) + 1))
    if len(found) != 1:
        raise TreeError(f"{where}: {len(found)} log calls hold {piece!r}, not one; "
                        "fix gpu-check/judge.py's FORMATS for this tree")  # fmt: skip
    return found[0]


def to_regex(fmt: str) -> re.Pattern[str]:
    """A printf format as a regular expression over one log line, each field a group."""
    out, at = [], 0
    for m in SPEC.finditer(fmt):
        out.append(re.escape(fmt[at : m.start()]))
        conv = m.group(5)
        out.append(FIELDS.get(conv, r"\s*(-?\d+)"))  # d, i, u, x: a whole number
        at = m.end()
    out.append(re.escape(fmt[at:].rstrip("\n")))
    return re.compile("".join(out) + r"\s*$")


@dataclass(frozen=True)
class Rules:
    fa_name: str  # the flash-attention probe's name
    patterns: dict[str, re.Pattern[str]]
    where: dict[str, str] = field(default_factory=dict)  # rule -> file:line in the tree

    def all(self, name: str, log: str) -> list[re.Match[str]]:
        pat = self.patterns[name]
        return [m for line in log.splitlines() if (m := pat.search(line))]


def rules(tree: Path) -> Rules:
    """The rules from the llama.cpp tree at ``tree`` (its root, holding src/ and common/)."""
    patterns, where = {}, {}
    for name, (rel, piece) in FORMATS.items():
        path = tree / rel
        if not path.is_file():
            raise TreeError(f"{path}: missing; point at the pinned llama.cpp tree's root")
        fmt, line = c_format(path.read_text(errors="replace"), piece, str(path))
        patterns[name], where[name] = to_regex(fmt), f"{rel}:{line}"
    probe = FA_PROBE.search((tree / "src/llama-context.cpp").read_text(errors="replace"))
    if probe is None:
        raise TreeError(f"{tree}/src/llama-context.cpp: no llm_fused_op_flash_attn_probe")
    return Rules(probe.group(1), patterns, where)


def choose_build(time_left: int | None, full_seconds: int | None) -> tuple[str, str]:
    """FA_ALL_QUANTS ON or OFF, and why: the full kernel set unless the time left cannot
    fit its build (measured here before, or never measured: then OFF first)."""
    if time_left is None:
        return "ON", "the full kernel set (no TIME_LEFT given)"
    num, den = BUILD_SHARE
    if full_seconds is None or full_seconds * den > time_left * num:
        return "OFF", (f"TIME_LEFT={time_left}s cannot fit the full build "
                       f"({full_seconds if full_seconds is not None else 'never measured'}s "
                       "here): FA_ALL_QUANTS=OFF first")  # fmt: skip
    return "ON", f"TIME_LEFT={time_left}s fits the full build ({full_seconds}s measured here)"


@dataclass(frozen=True)
class Expect:
    cuda: bool
    ctk: str
    ctv: str
    spec_types: tuple[str, ...]  # as --spec-type lists them
    draft_arch: str | None = None  # --model-draft's architecture; None: no --model-draft
    target_arch: str | None = None  # the -m model's architecture, where it is checked


def fa_moved(log: str, r: Rules) -> str | None:
    """The first line that puts flash attention on another device than its layer's."""
    return next((m.group(0) for m in r.all("mismatch", log) if m.group(4) == r.fa_name), None)


def judge(log: str, timings: dict[str, int], r: Rules, e: Expect) -> list[str]:
    """What is wrong with the run, one line each (none: it measured what it claims)."""
    problems = []
    if timings.get("predicted_n", 0) < 200:
        problems.append(f"generated {timings.get('predicted_n')} tokens, asked 256")
    if e.cuda and "CUDA" not in log:
        problems.append("the server log never mentions CUDA: it did not run on the card")
    for m in r.all("mismatch", log):
        if m.group(4) == r.fa_name:
            problems.append(f"{r.fa_name} assigned to device {m.group(5)} while layer "
                            f"{m.group(2)} is on {m.group(3)} (missing kernels for "
                            f"{e.ctk}/{e.ctv} in this build; {r.where['mismatch']})")  # fmt: skip
            break
    if any(m.group(2) == r.fa_name for m in r.all("disabled", log)):
        problems.append(f"-fa auto resolved {r.fa_name} to disabled ({r.where['disabled']})")
    elif not any(m.group(2) == r.fa_name for m in r.all("enabled", log)):
        problems.append(f"the log never says '{r.fa_name} enabled': -fa auto did not resolve "
                        f"to on ({r.where['enabled']})")  # fmt: skip
    kv = r.all("kv_size", log)
    if not kv or (kv[0].group(7), kv[0].group(9)) != (e.ctk, e.ctv):
        got = f"{kv[0].group(7)}/{kv[0].group(9)}" if kv else "no llama_kv_cache size line"
        problems.append(f"the main context's KV cache is {got}, not {e.ctk}/{e.ctv} "
                        f"({r.where['kv_size']})")  # fmt: skip
    if e.cuda:
        offloaded = r.all("offloaded", log)
        if not offloaded:
            problems.append(f"no 'offloaded X/Y layers to GPU' line ({r.where['offloaded']})")
        for m in offloaded:
            if m.group(2) != m.group(3):
                problems.append(f"not every layer is on the card: offloaded {m.group(2)}/"
                                f"{m.group(3)} ({r.where['offloaded']})")  # fmt: skip
    if e.draft_arch is not None:
        problems += draft_model_problems(log, r, e)
    elif "draft-mtp" in e.spec_types and not r.all("mtp_context", log):
        problems.append(f"no MTP draft context was created ({r.where['mtp_context']})")
    stats = {m.group(1): int(m.group(5)) for m in r.all("statistics", log)}
    for t in e.spec_types:
        if t not in stats:
            problems.append(f"no '{t}' statistics line: --spec-type {t} is not in use "
                            f"({r.where['statistics']})")  # fmt: skip
    first = e.spec_types[0] if e.spec_types else None
    if first is not None and stats.get(first, 0) == 0:
        problems.append(f"'{first}' generated no drafts ({r.where['statistics']})")
    if timings.get("draft_n", 0) == 0:
        problems.append("the answer's timings carry no drafted tokens (draft_n)")
    return problems


def draft_model_problems(log: str, r: Rules, e: Expect) -> list[str]:
    """--model-draft: the log must load the draft model, and the model it loads must be of
    the draft architecture (the arch line that follows the loading line); the -m model's
    arch line (the first) must be the target's."""
    problems, loading, arch_after, first_arch = [], False, None, None
    load, arch = r.patterns["draft_load"], r.patterns["arch"]
    for line in log.splitlines():
        if load.search(line):
            loading = True
        elif m := arch.search(line):
            first_arch = first_arch or m.group(2)
            if loading and arch_after is None:
                arch_after = m.group(2)
    if not loading:
        problems.append(f"no 'loading draft model' line: --model-draft was not loaded "
                        f"({r.where['draft_load']})")  # fmt: skip
    elif arch_after != e.draft_arch:
        problems.append(f"the draft model loaded is {arch_after or 'of no logged arch'}, "
                        f"not {e.draft_arch} ({r.where['arch']})")  # fmt: skip
    if e.target_arch is not None and first_arch != e.target_arch:
        problems.append(f"the target model is {first_arch or 'of no logged arch'}, not "
                        f"{e.target_arch} ({r.where['arch']})")  # fmt: skip
    return problems


def _verdict(argv: list[str]) -> int:
    tree, out = Path(argv[0]), Path(argv[1])
    e = Expect(argv[2] == "ON", argv[3], argv[4], tuple(argv[5].split(",")))
    fa_all, why, phases, negative = argv[6], argv[7], argv[8], argv[9]
    e_draft = Expect(e.cuda, e.ctk, e.ctv, e.spec_types, DRAFT_ARCH, DRAFT_TARGET_ARCH)
    if not e.cuda:  # the option only chooses CUDA kernels: a CPU build has none of them
        fa_all, why = "n/a", f"GGML_CUDA=OFF: FA_ALL_QUANTS only selects CUDA kernels ({why})"
    r = rules(tree)
    t = json.loads((out / "completion.json").read_text())["timings"]
    print("timings:", json.dumps(t))
    metrics = (out / "metrics-after.txt").read_text().splitlines()
    names = sorted({ln.split()[0] for ln in metrics if ln.startswith("llamacpp:")})
    print("/metrics:", ", ".join(names))
    log = (out / "server.log").read_text(errors="replace")
    problems = judge(log, t, r, e)
    t_draft = json.loads(Path(argv[10]).read_text())["timings"]
    print("--model-draft timings:", json.dumps(t_draft))
    log_draft = (out / "server-draft.log").read_text(errors="replace")
    problems += [f"--model-draft {DRAFT_ARCH}: {p}" for p in judge(log_draft, t_draft, r, e_draft)]
    if negative.startswith("FAILED"):
        problems.append(f"the negative check: {negative}")
    stats = {m.group(1): m.group(0) for m in r.all("statistics", log)}
    measured = {"fa_all_quants": fa_all, "why": why, "kv": f"{e.ctk}/{e.ctv}",
                "mixed_pair": e.ctk != e.ctv, "negative_check": negative,
                "spec_types": list(e.spec_types), "draft_stats": stats, "rules": r.where,
                "draft_stats_model_draft": {m.group(1): m.group(0)
                                            for m in r.all("statistics", log_draft)},
                "draft_path": "draft-mtp over a qwen35 MTP block (llama-cuda-mtp's path), "
                f"and a {DRAFT_TARGET_ARCH} target with --model-draft {DRAFT_ARCH} (the "
                "path llama-cuda and llama-cuda-slots serve), each with ngram-mod beside "
                "it (the --spec-type they give)"}  # fmt: skip
    print("measured:", json.dumps(measured))
    seconds = {k: int(v) for k, v in (p.split("=") for p in phases.split())}
    (out / "result.json").write_text(json.dumps({"timings": t, "timings_model_draft": t_draft,
        "metrics": names,
        "problems": problems, "phase_seconds": seconds, "measured": measured}))  # fmt: skip
    if problems:
        print("gpu-check: " + "; ".join(problems), file=sys.stderr)
        return 1
    print("gpu-check: PASS")
    return 0


def _negative(tree: Path, log: Path) -> int:
    """A build without the mixed pair's kernels served it: -fa auto must have moved flash
    attention off the card, and the rule must see it (the rule's own ground truth)."""
    r = rules(tree)
    line = fa_moved(log.read_text(errors="replace"), r)
    if line is None:
        print(f"no line of {log} matches {r.where['mismatch']}'s {r.fa_name} mismatch, "
              "though this build lacks the pair's kernels")  # fmt: skip
        return 1
    print(f"seen, as the build lacks the pair's kernels: {line.strip()}")
    return 0


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["build"] and len(argv) == 3:
            left = int(argv[1]) if argv[1] else None
            full = int(argv[2]) if argv[2] else None
            print("\t".join(choose_build(left, full)))
            return 0
        if argv[:1] == ["verdict"] and len(argv) == 12:
            return _verdict(argv[1:])
        if argv[:1] == ["negative"] and len(argv) == 3:
            return _negative(Path(argv[1]), Path(argv[2]))
    except (TreeError, OSError, ValueError, KeyError) as exc:
        print(f"gpu-check: {exc}", file=sys.stderr)
        return 2
    print(__doc__.split("\n\n")[-1], file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
