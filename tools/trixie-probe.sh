#!/usr/bin/env bash
# Measure what Debian 13 (trixie)'s engines do with lockpipe's output, from a Debian 12 host,
# with binaries from Debian's archive. A measurement, not part of the pipeline or of CI:
# results and their reading are in docs/debian13.md.
#
#   sudo tools/trixie-probe.sh all        # every step below, then cleanup
#   sudo tools/trixie-probe.sh STEP ...   # quadlet chroot deploy-test docker buildx docker-tests artifact cleanup
#   sudo tools/trixie-probe.sh sid artifact-mount   # podman >= 5.7 from sid (not in `all`)
#
# quadlet       trixie's podman .deb (sha256 checked against trixie's Packages index),
#               extracted (not installed); its quadlet -dryrun on the golden units and on
#               units rendered for podman 4.4/4.9/5.0/5.4, both GPU modes; the stand-in
#               service compared; every key in lockpipe/deploy/keys.py fed to it alone.
# chroot        an mmdebstrap'ed trixie root with podman, docker.io, containerd, runc, skopeo,
#               systemd, python3; /proc /sys /dev and the repo (read-only) bound in; lockpipe
#               installed in a venv there.
# deploy-test   tests/integration/test_deploy_install.py inside the chroot (CI=true), where
#               /usr/libexec/podman/quadlet and /usr/bin/podman are Debian 13's.
# docker        containerd 1.7.24 + dockerd 26.1.5 from the chroot on their own sockets;
#               two no-cache builds through lockpipe's DockerEngine three ways, and
#               tests/integration/test_explain_docker.py, on the graphdriver store and on the
#               containerd image store. skopeo is Debian 13's (a wrapper into the chroot).
# buildx        for comparison: the docker CLI's buildx (a build session, not a posted tar) with
#               rewrite-timestamp=true, on both stores.
# docker-tests  the docker integration tests (-k docker) against dockerd 26.1.5.
# artifact      tests/integration/test_oci_payloads.py's `podman artifact pull` (podman 5.4+)
#               with Debian 13's podman (a wrapper into the chroot), CI=true.
# sid           trixie has podman 5.4.2, below 5.7's .artifact units: an mmdebstrap'ed sid root
#               ($S) with sid's podman and runc, the host's loopback-registry drop-in copied in.
# artifact-mount  `deploy --artifacts` against that podman, the Gemma 3 270M payload from the
#               tests' cache -> a store (loopback HTTP mirror) -> `payloads publish` -> the
#               loopback registry; its .artifact and .container units through sid's quadlet
#               -dryrun (system and user); the generated `podman artifact pull` run as it is,
#               then `podman run` with the generated --mount and image: the GGUF's size and
#               sha256 at the path the serve command names. Also a two-file artifact mounted
#               at a folder. Runs in a mount namespace of its own: nothing stays mounted.
# cleanup       stop the daemons this script started (by pid file), unmount, drop the bridge.
#
# Needs root, mmdebstrap, curl, xz, unshare, the loopback registry (127.0.0.1:5000) and the
# dev venv (/tmp/venv, or PY=...). Everything lives under /tmp; nothing is installed on the host.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-/tmp/venv/bin/python}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
W=${TRIXIE_PROBE_DIR:-/tmp/trixie-probe}   # downloads, outputs, wrappers
R=/tmp/trixie-root                          # the trixie rootfs
M=/tmp/trixie-mnt                           # R bound onto itself: BuildKit needs / to be a mount
D=/tmp/d26                                  # dockerd 26 / containerd state, same path in and out
BASE_REPO=lockpipe-test/busybox:1           # pushed by the integration tests' fixture
S=/tmp/sid-root                             # the sid rootfs (podman >= 5.7)
GEMMA=${LOCKPIPE_TEST_CACHE:-$HOME/.cache/lockpipe-tests}/gemma-3-270m-q4_k_m.gguf  # tests/fixtures_gemma.py
mkdir -p "$W/bin"

say() { printf '\n### %s\n' "$*"; }

packages() {
  [ -s "$W/Packages" ] || curl -fsS "$MIRROR/dists/trixie/main/binary-amd64/Packages.xz" | xz -dc > "$W/Packages"
}

# fetch_deb NAME: trixie's .deb for NAME into $W, its sha256 checked against the index; prints the path
fetch_deb() {
  packages
  local entry file sum
  entry=$(awk -v p="Package: $1" '$0==p{f=1} f&&/^$/{exit} f' "$W/Packages")
  file=$(sed -n 's/^Filename: //p' <<<"$entry"); sum=$(sed -n 's/^SHA256: //p' <<<"$entry")
  [ -f "$W/$(basename "$file")" ] || curl -fsS -o "$W/$(basename "$file")" "$MIRROR/$file"
  echo "$sum  $W/$(basename "$file")" | sha256sum -c --quiet >&2
  echo "$1 $(sed -n 's/^Version: //p' <<<"$entry") sha256 $sum verified" >&2
  echo "$W/$(basename "$file")"
}

split_services() {  # split_services DRYRUN_OUTPUT DIR: one file per ---NAME.service--- section
  "$PY" - "$1" "$2" <<'PY'
import re, sys
from pathlib import Path
parts = re.split(r"^---(\S+)---$", Path(sys.argv[1]).read_text(), flags=re.M)
for i in range(1, len(parts) - 1, 2):
    Path(sys.argv[2], parts[i]).write_text(parts[i + 1].strip() + "\n")
PY
}

step_quadlet() {
  say "quadlet: trixie podman's generator, extracted on this Debian $(cat /etc/debian_version) host"
  local deb q out
  deb=$(fetch_deb podman)
  rm -rf "$W/x/podman"; mkdir -p "$W/x/podman"; dpkg-deb -x "$deb" "$W/x/podman"
  q=$W/x/podman/usr/libexec/podman/quadlet
  ldd "$q"; echo "needs: $(objdump -T "$q" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1); host: $(ldd --version | head -1)"
  echo "quadlet -version: $("$q" -version)"

  out=$W/quadlet; rm -rf "$out"; mkdir -p "$out/golden" "$out/bad" "$out/svc"
  cp "$REPO"/tests/data/deploy/*.container "$out/golden/"
  for mode in system user; do
    QUADLET_UNIT_DIRS=$out/golden "$q" -dryrun $([ $mode = user ] && echo -user) \
      > "$out/golden-$mode.txt" 2> "$out/golden-$mode.err" && echo "golden $mode: rc=0" || echo "golden $mode: rc=$?"
    grep -v 'Loading source unit file' "$out/golden-$mode.err" || echo "golden $mode: no warnings"
    grep -- '^---' "$out/golden-$mode.txt"
  done
  diff "$out/golden-system.txt" "$out/golden-user.txt" || true
  split_services "$out/golden-system.txt" "$out/svc"
  for s in "$out"/svc/*.service; do  # the tests' stand-in for the lockpipe ExecStartPre
    sed -i 's#^ExecStartPre=/usr/local/bin/lockpipe #ExecStartPre=/usr/bin/true #' "$s"
    systemd-analyze verify "$s" && echo "systemd-analyze verify $(basename "$s"): ok"
  done
  sed 's/^Entrypoint=/ContainerEntrypoint=/' "$out/golden/frank-small.container" > "$out/bad/frank-small.container"
  QUADLET_UNIT_DIRS=$out/bad "$q" -dryrun && echo "bad key: accepted?!" || echo "bad key: rc=$? (expected non-zero)"

  say "quadlet: units rendered from locks/digests.json for podman 4.4 4.9 5.0 5.4, cdi and manual"
  (cd "$REPO" && PYTHONPATH=$REPO "$PY" - "$out/render" locks/digests.json) <<'PY'
import itertools, sys
from pathlib import Path
import tests.unit.test_deploy_render as tdr
from lockpipe.deploy.render import render_quadlet
out, tdr.LOCK = Path(sys.argv[1]), Path(sys.argv[2])
for target in tdr.lock().targets:
    for mode, podman, ep in itertools.product(("manual", "cdi"), ((4, 4), (4, 9), (5, 0), (5, 4)), ("unknown", "image")):
        i = tdr.inputs(target, mode, podman=podman)  # image entrypoint unknown: Entrypoint= set
        if ep == "image":  # the image's entrypoint is the command's first word: no Entrypoint=
            if not i.command:
                continue
            i = tdr.inputs(target, mode, podman=podman, entrypoint=(i.command[0],))
        d = out / f"{mode}-{podman[0]}.{podman[1]}-ep-{ep}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{target}.container").write_text(render_quadlet(i).render())
print(f"rendered {len(list(out.glob('*/*.container')))} units in {len(list(out.iterdir()))} folders")
PY
  local d n_in n_out
  for d in "$out"/render/*/; do
    for mode in system user; do
      QUADLET_UNIT_DIRS=$d "$q" -dryrun $([ $mode = user ] && echo -user) > "$d/dryrun-$mode.txt" 2> "$d/dryrun-$mode.err" \
        || echo "$(basename "$d") $mode: rc=$?"
      n_in=$(ls "$d"/*.container | wc -l); n_out=$(grep -c '^---.*\.service---$' "$d/dryrun-$mode.txt" || true)
      echo "$(basename "$d") $mode: $n_in units -> $n_out services; other stderr: $(grep -vc 'Loading source unit file' "$d/dryrun-$mode.err" || true) lines"
    done
  done

  say "quadlet: verify.plain_service (Debian 12's stand-in) against the generator's ExecStart"
  (cd "$REPO" && PYTHONPATH=$REPO "$PY" - "$out/render") <<'PY'
import re, shlex, sys
from pathlib import Path
from lockpipe.deploy.unit import parse_unit
from lockpipe.deploy.verify import plain_service

def norm(argv):  # --flag value and -v value -> --flag=value, so both spellings compare equal
    out, it = [], iter(argv)
    for a in it:
        a = "--volume" if a == "-v" else a
        if a.startswith("--") and "=" not in a and a not in ("--replace", "--rm"):
            nxt = next(it, None)
            if nxt is not None and not nxt.startswith("-"):
                a = f"{a}={nxt}"
            elif nxt is not None:
                out.append(a)
                a = nxt
        out.append(a)
    return sorted(out)

def exec_start(text):
    return next(l for l in text.splitlines() if l.startswith("ExecStart="))[len("ExecStart="):]

same = diff = 0
for d in sorted(p for p in Path(sys.argv[1]).iterdir() if p.is_dir()):
    parts = re.split(r"^---(\S+)---$", (d / "dryrun-system.txt").read_text(), flags=re.M)
    gen = {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}
    for c in sorted(d.glob("*.container")):
        g = norm(shlex.split(exec_start(gen[c.stem + ".service"])))
        p = norm(shlex.split(exec_start(plain_service(parse_unit(c.read_text())).render())))
        same, diff = (same + 1, diff) if g == p else (same, diff + 1)
        if g != p:
            print(f"{d.name}/{c.name}: quadlet only {sorted(set(g) - set(p))}; stand-in only {sorted(set(p) - set(g))}")
print(f"ExecStart argv equal (order aside): {same}; different: {diff}")
PY

  say "quadlet: every key lockpipe/deploy/keys.py knows, alone in a unit, against quadlet $("$q" -version)"
  (cd "$REPO" && PYTHONPATH=$REPO "$PY" - "$q" "$("$q" -version)") <<'PY'
import subprocess, sys, tempfile
from pathlib import Path
from lockpipe.deploy import keys
quadlet, version = sys.argv[1], keys.parse_version(sys.argv[2])
known = sorted(set().union(*keys.ADDED.values()) | set(keys.MISSPELLED))
bad = []
for key in known:
    with tempfile.TemporaryDirectory() as d:
        Path(d, "k.container").write_text(f"[Container]\nImage=localhost/x:1\n{key}=x\n")
        r = subprocess.run([quadlet, "-dryrun"], env={"QUADLET_UNIT_DIRS": d}, capture_output=True, text=True)
        if ("unsupported key" in r.stderr) == (key in keys.supported_keys(version)):
            bad.append(f"  {key}: table {'has' if key in keys.supported_keys(version) else 'lacks'} it; quadlet: {r.stderr.strip()[-120:]}")
newer = [k for k in known if k not in keys.supported_keys(version)]
print(f"{len(known)} keys; {len(newer)} not in the table for {keys.show(version)} ({' '.join(newer)})")
print(f"disagreements with quadlet {sys.argv[2]}: {len(bad)}", *bad, sep="\n")
PY
}

mounted() { mountpoint -q "$1"; }

step_chroot() {
  say "chroot: trixie rootfs at $R"
  [ -x "$R/usr/bin/podman" ] || mmdebstrap --variant=apt \
    --include=podman,docker.io,containerd,runc,tini,skopeo,systemd,python3,python3-venv,iproute2,ca-certificates \
    trixie "$R" "$MIRROR"
  mounted "$R/proc" || mount -t proc proc "$R/proc"
  mounted "$R/sys" || { mount --rbind /sys "$R/sys"; mount --make-rslave "$R/sys"; }
  mounted "$R/dev" || { mount --rbind /dev "$R/dev"; mount --make-rslave "$R/dev"; }
  mkdir -p "$R$REPO" "$D" "$R$D"
  mounted "$R$REPO" || { mount --bind "$REPO" "$R$REPO"; mount -o remount,bind,ro "$R$REPO"; }
  mounted "$R$D" || mount --bind "$D" "$R$D"
  mkdir -p "$M"; mounted "$M" || { mount --rbind "$R" "$M"; mount --make-rslave "$M"; }
  cp /etc/resolv.conf "$R/etc/resolv.conf"
  # This host reaches PyPI through a TLS proxy whose CA it trusts locally: trust it there too.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$R/usr/local/share/ca-certificates/"
    chroot "$R" update-ca-certificates >/dev/null
  fi
  chroot "$R" sh -c 'cat /etc/debian_version; podman --version; dockerd --version; containerd --version;
    runc --version | head -1; skopeo --version; systemd-analyze --version | head -1; python3 --version'
  if [ ! -x "$R/opt/venv/bin/pytest" ]; then
    chroot "$R" sh -c "python3 -m venv /opt/venv && P='/opt/venv/bin/pip -q --disable-pip-version-check' &&
      \$P install --require-hashes -r $REPO/constraints/runtime.txt && \$P install pytest setuptools &&
      cd /tmp && \$P install --no-deps --no-build-isolation -e $REPO"
  fi
  # Debian 13's skopeo for the host's tests: root's containers-storage and /tmp seen as they are.
  cat > "$W/bin/skopeo" <<EOF
#!/bin/sh
# Debian 13's skopeo (in $M), seeing this host's /tmp and root's containers-storage.
exec unshare -m sh -c 'for p in /tmp /var/lib/containers /run/containers; do mkdir -p $M\$p; done &&
  mount --bind /var/lib/containers $M/var/lib/containers && mount --bind /run/containers $M/run/containers &&
  mount --bind /tmp $M/tmp && cd / && exec chroot $M /usr/bin/skopeo "\$@"' skopeo "\$@"
EOF
  chmod +x "$W/bin/skopeo"
  echo "skopeo wrapper: $("$W/bin/skopeo" --version)"
  # Debian 13's podman for the artifact step, in a folder of its own (not $W/bin: the other
  # steps keep the host's podman). It sees the host's /tmp, where the test keeps its --root,
  # and the host network; its default storage stays the chroot's.
  mkdir -p "$W/podman"
  cat > "$W/podman/podman" <<EOF
#!/bin/sh
# Debian 13's podman (in $M), seeing this host's /tmp and network.
exec unshare -m sh -c 'mount --bind /tmp $M/tmp && cd / && exec chroot $M /usr/bin/podman "\$@"' podman "\$@"
EOF
  chmod +x "$W/podman/podman"
  echo "podman wrapper: $("$W/podman/podman" --version)"
}

step_artifact() {
  mounted "$M" && [ -x "$W/podman/podman" ] || { echo "artifact: run the chroot step first" >&2; exit 1; }
  say "artifact: podman artifact pull with Debian 13's podman, tests/integration/test_oci_payloads.py (CI=true)"
  (cd "$REPO" && CI=true PATH=$W/podman:$PATH "$PY" -m pytest -p no:cacheprovider -q -rA \
    -k podman_artifact tests/integration/test_oci_payloads.py 2>&1 | grep -E '^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed') || true
}

step_sid() {
  say "sid: a sid root with podman >= 5.7 at $S"
  # This mirror's sid Release was past its Valid-Until (measured 2026-12-02: by 26 days).
  [ -x "$S/usr/bin/podman" ] || mmdebstrap --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
    --include=podman,runc,systemd,ca-certificates sid "$S" "$MIRROR"
  cp /etc/containers/registries.conf.d/*.conf "$S/etc/containers/registries.conf.d/"  # 127.0.0.1:5000 is http
  in_sid sh -c 'cat /etc/debian_version; podman --version; echo "quadlet $(/usr/libexec/podman/quadlet -version)";
    runc --version | head -1; dpkg-query -W podman runc conmon netavark golang-github-containers-common'
}

# in_sid CMD: CMD in the sid root, in a mount namespace of its own: the root bound onto itself
# (runc pivots from a mount), /proc /sys /dev, a fresh /run, and $W at its own path.
in_sid() {
  unshare -m sh -c 'mount --make-rprivate / && mount --rbind "$0" "$0" && mount -t proc proc "$0/proc" &&
    mount --rbind /sys "$0/sys" && mount --rbind /dev "$0/dev" && mount -t tmpfs tmpfs "$0/run" &&
    mkdir -p "$0$1" && mount --bind "$1" "$0$1" && cd / && shift &&
    exec chroot "$0" env PODMAN_IGNORE_CGROUPSV1_WARNING=1 "$@"' "$S" "$W" "$@"
}

step_artifact_mount() {
  [ -x "$S/usr/bin/podman" ] || { echo "artifact-mount: run the sid step first" >&2; exit 1; }
  [ -s "$GEMMA" ] || { echo "artifact-mount: no $GEMMA: run tests/integration/test_oci_payloads.py once (its fixture caches it)" >&2; exit 1; }
  local a=$W/artifact-mount lock=$REPO/locks/demo/digests.json prefix=127.0.0.1:5000/trixie-probe/models v pid
  v=$(in_sid podman --version); say "artifact-mount: deploy --artifacts for $v (sid)"
  rm -rf "$a"; mkdir -p "$a/bb/bin" "$a/hub"
  # The demo lock's Gemma payload, served at the Hub's resolve path by a loopback HTTP mirror.
  (cd "$REPO" && "$PY" - "$lock" "$a/hub" "$GEMMA") <<'PY'
import json, sys
from pathlib import Path
from urllib.parse import urlsplit
from lockpipe.demo import plan
doc = json.loads(Path(sys.argv[1]).read_text())
(name,) = doc["targets"][plan.TARGET]["payloads"]
u = urlsplit(plan.payload_url(doc, name))  # the mirror keeps it at HOST/PATH
path = Path(sys.argv[2], u.netloc + u.path)
path.parent.mkdir(parents=True)
path.symlink_to(sys.argv[3])
PY
  "$PY" -m http.server 0 --bind 127.0.0.1 --directory "$a/hub" > "$a/http.log" 2>&1 & pid=$!
  for _ in $(seq 50); do grep -q 'Serving HTTP' "$a/http.log" && break; sleep 0.1; done
  local port; port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$a/http.log" | head -1)
  (cd "$REPO" && "$PY" -m lockpipe payloads --lock "$lock" --store "$a/store" --mirror "http://127.0.0.1:$port" --quiet &&
    "$PY" -m lockpipe payloads publish --lock "$lock" --store "$a/store" --to "$prefix") 2>&1 || { kill "$pid"; exit 1; }
  kill "$pid"
  # A busybox image (this host's static busybox) for the container, by digest.
  cp /bin/busybox "$a/bb/bin/"; for c in sh ls stat sha256sum; do ln -s busybox "$a/bb/bin/$c"; done
  tar -C "$a/bb" -cf "$a/bb.tar" .
  in_sid sh -c "podman import -q '$a/bb.tar' localhost/trixie-probe/busybox:1 >/dev/null &&
    podman push -q --digestfile '$a/bb.digest' localhost/trixie-probe/busybox:1 127.0.0.1:5000/trixie-probe/busybox:1"
  (cd "$REPO" && "$PY" -m lockpipe deploy llama-cpu --lock "$lock" --state "$a/state" --store "$a/store" \
    --artifacts "$prefix" --podman-version "${v##* }" --no-inspect --no-verify --force \
    --image "127.0.0.1:5000/trixie-probe/busybox@$(cat "$a/bb.digest")" --out "$a/units") 2>&1 | grep -v '^WARNING (--force)'
  grep -H -e '^Artifact=' -e '^Mount=' -e '^Exec=' "$a"/units/*

  say "artifact-mount: $v's quadlet -dryrun on them"
  local mode
  for mode in system user; do
    in_sid env QUADLET_UNIT_DIRS="$a/units" /usr/libexec/podman/quadlet -dryrun $([ $mode = user ] && echo -user) \
      > "$a/dryrun-$mode.txt" 2> "$a/dryrun-$mode.err" && echo "$mode: rc=0" || echo "$mode: rc=$?"
    echo "$mode: $(grep -- '^---' "$a/dryrun-$mode.txt" | tr '\n' ' ')other stderr: $(grep -vc 'Loading source unit file' "$a/dryrun-$mode.err" || true) lines"
  done
  grep -e '^ExecStart=.*artifact pull' -e '^Requires=' "$a/dryrun-system.txt"

  say "artifact-mount: the generated pull, then podman run with the generated --mount and image"
  # ExecStart's argv (shlex), the run's --mount and image, and the lock's path and pin of the GGUF.
  (cd "$REPO" && "$PY" - "$a/dryrun-system.txt" "$lock") > "$a/argv" <<'PY'
import json, re, shlex, sys
from pathlib import Path
units = dict(re.findall(r"^---(\S+)---\n(.*?)(?=^---|\Z)", Path(sys.argv[1]).read_text(), re.M | re.S))
def exec_start(text):
    return shlex.split(next(l for l in text.splitlines() if l.startswith("ExecStart="))[10:])
pull = next(exec_start(t) for n, t in units.items() if n.endswith("-artifact.service"))
service = units["llama-cpu.service"]
run = exec_start(service)
image = re.search(r"^Image=(.*)$", service, re.M).group(1)
assert image in run, (image, run)
(p,) = json.loads(Path(sys.argv[2]).read_text())["payloads"].values()
print(shlex.join(pull), run[run.index("--mount") + 1], image, run[run.index("-m") + 1],
      p["size"], p["sha256"], sep="\n")
PY
  local pull mnt img gguf size sha
  { read -r pull; read -r mnt; read -r img; read -r gguf; read -r size; read -r sha; } < "$a/argv"
  echo "pull:  $pull"; echo "mount: $mnt"; echo "image: $img"; echo "path:  $gguf (lock: $size bytes, sha256 $sha)"
  # crun refuses this host's hybrid cgroups ("drop all controllers from cgroupv2"): runc runs it.
  in_sid sh -c "podman artifact rm -a >/dev/null 2>&1; $pull >/dev/null && podman artifact ls &&
    podman --runtime runc run --rm --network=none --entrypoint /bin/sh --mount '$mnt' '$img' \
      -c 'ls -l \"\$(dirname $gguf)\"; stat -c \"%s bytes\" $gguf; sha256sum $gguf'" > "$a/run.txt" 2>&1 \
    && echo "run: rc=0" || echo "run: rc=$?"
  cat "$a/run.txt"
  grep -q "^$size bytes$" "$a/run.txt" && grep -q "^$sha  $gguf$" "$a/run.txt" &&
    echo "RESULT: $gguf in the container is the lock's pin ($size bytes, sha256 $sha)" ||
    { echo "RESULT: the mounted file is not the pinned one" >&2; exit 1; }

  say "artifact-mount: a two-file artifact (podman artifact add) mounted at a folder"
  printf '{}\n' > "$a/config.json"; printf 'tok\n' > "$a/tokenizer.json"
  in_sid sh -c "podman artifact add localhost/trixie-probe/two:1 '$a/config.json' '$a/tokenizer.json' >/dev/null &&
    podman --runtime runc run --rm --network=none --mount type=artifact,source=localhost/trixie-probe/two:1,destination=/artifacts/two \
      '$img' sh -c 'ls /artifacts/two; sha256sum /artifacts/two/*'; podman artifact rm localhost/trixie-probe/two:1 >/dev/null"
  sha256sum "$a/config.json" "$a/tokenizer.json" | sed "s#$a/#(host) #"
}

step_deploy_test() {
  say "deploy-test: tests/integration/test_deploy_install.py inside trixie (CI=true)"
  chroot "$R" env -i PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root CI=true PYTHONDONTWRITEBYTECODE=1 \
    sh -c "cd $REPO && pytest -p no:cacheprovider -rA -q tests/integration/test_deploy_install.py" | tail -15
}

start_daemons() {  # start_daemons gd|cs
  local store=$1
  if ! [ -S "$D/containerd.sock" ] || ! kill -0 "$(cat "$D/containerd.pid" 2>/dev/null)" 2>/dev/null; then
    chroot "$M" containerd config default > "$D/containerd.toml"
    sed -i "s#^root = .*#root = \"$D/containerd-root\"#; s#^state = .*#state = \"$D/containerd-state\"#;
      0,/^  address = \"\/run\/containerd\/containerd.sock\"/s##  address = \"$D/containerd.sock\"#" "$D/containerd.toml"
    setsid chroot "$M" containerd --config "$D/containerd.toml" > "$D/containerd.log" 2>&1 < /dev/null &
    echo $! > "$D/containerd.pid"; sleep 3
  fi
  ip link show d26br0 >/dev/null 2>&1 || { ip link add d26br0 type bridge; ip addr add 172.31.251.1/24 dev d26br0; ip link set d26br0 up; }
  mkdir -p "$D/$store"
  # iptables off and its own bridge: the host's dockerd 20.10 owns docker0 and the DOCKER chains.
  printf '{"insecure-registries": ["127.0.0.1:5000"], "iptables": false, "ip6tables": false, "bridge": "d26br0"%s}\n' \
    "$([ "$store" = cs ] && echo ', "features": {"containerd-snapshotter": true}')" > "$D/$store/daemon.json"
  setsid chroot "$M" dockerd --config-file "$D/$store/daemon.json" --host "unix://$D/$store/docker.sock" \
    --data-root "$D/$store/root" --exec-root "$D/$store/exec" --pidfile "$D/$store/pid" \
    --containerd "$D/containerd.sock" > "$D/$store/dockerd.log" 2>&1 < /dev/null &
  echo $! > "$D/$store/dockerd.pid"
  for _ in $(seq 30); do [ -S "$D/$store/docker.sock" ] && break; sleep 1; done
  "$PY" -c "import docker; i = docker.DockerClient(base_url='unix://$D/$store/docker.sock').info();
print('dockerd', i['ServerVersion'], 'storage', i['Driver'], i['DriverStatus'], 'cgroup v' + i['CgroupVersion'])"
}

stop_dockerd() {
  local pid; pid=$(cat "$D/$1/dockerd.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  rm -f "$D/$1/dockerd.pid"
}

base_ref() {  # the busybox base the tests push, by digest
  curl -fsS -o /dev/null -D - -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://127.0.0.1:5000/v2/${BASE_REPO%:*}/manifests/${BASE_REPO#*:}" |
    tr -d '\r' | sed -n "s#^[Dd]ocker-[Cc]ontent-[Dd]igest: #127.0.0.1:5000/$BASE_REPO@#p"
}

docker_builds() {  # two no-cache builds, three ways, through lockpipe's DockerEngine
  (cd "$REPO" && DOCKER_HOST=unix://$D/$1/docker.sock PYTHONPATH=$REPO "$PY" - "$(base_ref)") <<'PY'
import io, sys, tarfile, tempfile, time
from pathlib import Path
import lockpipe.engines.docker as dk
from lockpipe.engines.base import BuildRequest
engine, asked = dk.DockerEngine(), dk.rewrite_params

def mtimes(image_id):  # mtimes of /app and /app/greeting in the saved image's layers
    outer = tarfile.open(fileobj=io.BytesIO(b"".join(engine.client.images.get(image_id).save())))
    found = set()
    for m in outer.getmembers():
        try:
            inner = tarfile.open(fileobj=outer.extractfile(m)) if m.isfile() else None
        except tarfile.ReadError:
            continue
        found |= {f"{e.name}={int(e.mtime)}" for e in (inner.getmembers() if inner else ()) if e.name.strip("./") in ("app", "app/greeting")}
    return ",".join(sorted(found))

print(f"dockerd {engine.version()}; lockpipe posts {asked(engine.version())}")
with tempfile.TemporaryDirectory() as tmp:
    (Path(tmp) / "Dockerfile").write_text(f"FROM {sys.argv[1]}\nRUN mkdir -p /app && echo fixed > /app/greeting\n")
    for how in ("as-lockpipe", "sde-only", "neither"):
        dk.rewrite_params = asked if how == "as-lockpipe" else (lambda v: {})
        args = {} if how == "neither" else {"SOURCE_DATE_EPOCH": "1700000000"}
        ids = []
        for n in (1, 2):
            req = BuildRequest(context=Path(tmp), dockerfile="Dockerfile", tag=f"localhost/trixie-probe/{how}:{n}",
                               build_args=args, timestamp=1700000000, platform="linux/amd64", no_cache=True)
            try:
                ids.append(engine.build(req, lambda line: None))
            except Exception as exc:
                print(f"{how} build {n}: FAILED {type(exc).__name__}: {exc}")
                break
            a = engine.client.images.get(ids[-1]).attrs
            print(f"{how} build {n}: {ids[-1][:19]} created={a['Created']} layer2={a['RootFS']['Layers'][-1][:19]} mtimes {mtimes(ids[-1])}")
            time.sleep(1.05 - time.time() % 1)  # the next build starts in a later second
        if len(ids) == 2:
            print(f"{how}: {'same image' if ids[0] == ids[1] else 'different images'}")
PY
}

explain_test() {  # explain_test STORE [extra pytest args]: the repo's docker reproducibility test
  local store=$1; shift
  (cd "$REPO" && DOCKER_HOST=unix://$D/$store/docker.sock CI=true PATH=$W/bin:$PATH PYTHONPATH=$W \
    "$PY" -m pytest -p no:cacheprovider -q -s "$@" tests/integration/test_explain_docker.py 2>&1 |
    grep -E '^(app:|  cause|    /)|agree|[0-9]+ (passed|failed) in|^E +lockpipe' | cut -c1-400) || true
}

write_plugin() {  # a pytest plugin for the probe only: each build in a new second; print the verdict
  cat > "$W/slow_second_build.py" <<'PY'
"""Probe-only pytest plugin: each no-cache build starts in a later wall-clock second than the
last one ended (layer tars keep whole-second mtimes), and reproduce_and_explain's verdict is printed."""
import time
import lockpipe.imagebuild.reproduce as br
import lockpipe.verify.reproduce as vr
_build, _explain = br.run_build, vr.reproduce_and_explain
def _slow(*a, **k):
    record = _build(*a, **k)
    time.sleep(1.05 - time.time() % 1)
    return record
def _say(*a, **k):
    result = _explain(*a, **k)
    print(f"\n{result}")
    return result
br.run_build, vr.reproduce_and_explain = _slow, _say
PY
}

step_docker() {
  fetch_deb docker.io >/dev/null; fetch_deb containerd >/dev/null; fetch_deb runc >/dev/null
  write_plugin
  for store in gd cs; do
    say "docker: dockerd 26 with the $([ $store = gd ] && echo graphdriver || echo containerd) image store"
    start_daemons "$store"
    echo "-- test_explain_docker.py as committed, 5 runs (its fixture pushes the busybox base):"
    for _ in 1 2 3 4 5; do explain_test "$store" | tr '\n' ' '; echo; done
    echo "-- test_explain_docker.py with each build in a new second:"
    explain_test "$store" -p slow_second_build
    echo "-- two no-cache builds through DockerEngine, three ways:"
    docker_builds "$store"
    stop_dockerd "$store"
  done
}

step_buildx() {  # the docker CLI's own path (a build session, not an uploaded tar), for comparison
  chroot "$M" sh -c 'command -v docker-buildx >/dev/null || [ -x /usr/libexec/docker/cli-plugins/docker-buildx ] ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-buildx >/dev/null'
  local ref; ref=$(base_ref); mkdir -p "$D/ctx"
  printf 'FROM %s\nRUN mkdir -p /app && echo fixed > /app/greeting\n' "$ref" > "$D/ctx/Dockerfile"
  for store in gd cs; do
    say "buildx: docker buildx build (buildx $(chroot "$M" docker buildx version | cut -d' ' -f2)) on the $store store"
    start_daemons "$store"
    for n in 1 2; do
      chroot "$M" env DOCKER_HOST="unix://$D/$store/docker.sock" docker buildx build --no-cache -q --provenance=false \
        --build-arg SOURCE_DATE_EPOCH=1700000000 --output "type=image,name=localhost/trixie-probe/buildx:$n,rewrite-timestamp=true" \
        "$D/ctx" > /dev/null 2> "$D/buildx-$store-$n.err" && echo "build $n: rc=0" ||
        echo "build $n: rc=$?: $(tail -1 "$D/buildx-$store-$n.err")"
      chroot "$M" env DOCKER_HOST="unix://$D/$store/docker.sock" docker image inspect --format "build $n: {{.Id}} created={{.Created}} layers={{.RootFS.Layers}}" "localhost/trixie-probe/buildx:$n" 2>&1 | cut -c1-250
      sleep 1.2
    done
    stop_dockerd "$store"
  done
}

step_docker_tests() {
  say "docker-tests: pytest tests/integration -k docker against dockerd 26 (graphdriver), Debian 13 skopeo"
  start_daemons gd
  (cd "$REPO" && DOCKER_HOST=unix://$D/gd/docker.sock CI=true PATH=$W/bin:$PATH \
    "$PY" -m pytest -p no:cacheprovider -q -rA -k docker tests/integration 2>&1 | grep -E '^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed') || true
  stop_dockerd gd
}

step_cleanup() {
  say "cleanup"
  local pid
  for s in gd cs; do stop_dockerd "$s"; done
  if pid=$(cat "$D/containerd.pid" 2>/dev/null); then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    rm -f "$D/containerd.pid"
  fi
  ! mounted "$M" || umount -R "$M" || umount -R -l "$M"
  for p in "$R$D" "$R$REPO" "$R/dev" "$R/sys" "$R/proc"; do ! mounted "$p" || umount -R "$p" || umount -R -l "$p"; done
  ! ip link show d26br0 >/dev/null 2>&1 || ip link del d26br0
  # Overlay mounts of containers that never ran would still pin $D; none should be left.
  if findmnt -rn -o TARGET | grep -q -e "^$D" -e "^$R" -e "^$M"; then echo "still mounted:"; findmnt -rn -o TARGET | grep -e "^$D" -e "^$R" -e "^$M"; fi
  echo "left for inspection: $W $R $S $D (rm -rf them when done)"
}

[ $# -gt 0 ] || { sed -n '2,40p' "$0"; exit 2; }
[ "$1" != all ] || set -- quadlet chroot deploy-test docker buildx docker-tests artifact cleanup
for s in "$@"; do
  case $s in
    quadlet) step_quadlet ;; chroot) step_chroot ;; deploy-test) step_deploy_test ;;
    docker) step_docker ;; buildx) step_buildx ;; docker-tests) step_docker_tests ;; artifact) step_artifact ;;
    sid) step_sid ;; artifact-mount) step_artifact_mount ;; cleanup) step_cleanup ;;
    *) echo "unknown step $s; steps: quadlet chroot deploy-test docker buildx docker-tests artifact sid artifact-mount cleanup all" >&2; exit 2 ;;
  esac
done
