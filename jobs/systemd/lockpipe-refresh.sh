#!/bin/bash
# lockpipe-refresh: what lockpipe-refresh.service runs (installed as
# /usr/local/libexec/lockpipe-refresh; docs/refresh.md, "systemd"). Settings come from
# the unit's EnvironmentFile, /etc/lockpipe/refresh.env:
#   LOCKPIPE_CHECKOUT   a git clone of the project (default /var/lib/lockpipe/checkout).
#                       Only its .git is used: each run fetches LOCKPIPE_REMOTE/LOCKPIPE_BASE
#                       and refreshes in a fresh worktree of it, removed afterwards, so the
#                       report always compares against the newest lock on the base.
#   LOCKPIPE_REPORTS    where the reports go (default /var/lib/lockpipe/refresh):
#                       STAMP.md and STAMP.json per run, latest.md -> the newest
#   LOCKPIPE_KEEP_REPORTS  how many runs' reports to keep (default 30); older are deleted
#   LOCKPIPE_BRANCH     unset: report only (--dry-run). Set: a moved lock is committed on
#                       the base (the report is the message) and force-pushed to this
#                       branch, which thus always holds one refresh commit on the base; when
#                       nothing moved, a stale remote branch of that name is deleted
#   LOCKPIPE_REMOTE     default origin;  LOCKPIPE_BASE  default main
#   LOCKPIPE_GIT_NAME, LOCKPIPE_GIT_EMAIL  the refresh commit's author and committer
#                       (default "lockpipe refresh" <lockpipe@HOSTNAME>): the service's
#                       user has no git identity of its own
#   LOCKPIPE_NOX        the nox to run (default: nox on PATH)
#   LOCKPIPE_MIN_AGE    proposed upgrades first seen less than this long ago are held
#                       (default 3d); the first-seen record is $LOCKPIPE_REPORTS/first-seen.json,
#                       kept across runs (each run's worktree is fresh)
#   GITHUB_TOKEN, HF_TOKEN, LOCKPIPE_*  passed on to lockpipe as they are
set -euo pipefail
state=${STATE_DIRECTORY:-/var/lib/lockpipe}  # systemd sets it from StateDirectory=
checkout=${LOCKPIPE_CHECKOUT:-$state/checkout}
reports=${LOCKPIPE_REPORTS:-$state/refresh}
keep=${LOCKPIPE_KEEP_REPORTS:-30}
remote=${LOCKPIPE_REMOTE:-origin}
base=${LOCKPIPE_BASE:-main}
branch=${LOCKPIPE_BRANCH:-}
identity=(-c "user.name=${LOCKPIPE_GIT_NAME:-lockpipe refresh}"
          -c "user.email=${LOCKPIPE_GIT_EMAIL:-lockpipe@${HOSTNAME:-localhost}}")

fail() { echo "lockpipe-refresh: error: $*" >&2; exit 64; }
[[ "$keep" =~ ^[1-9][0-9]*$ ]] ||
  fail "LOCKPIPE_KEEP_REPORTS=$keep is not a whole number >= 1; set it in /etc/lockpipe/refresh.env"
git -C "$checkout" rev-parse --git-dir > /dev/null 2>&1 ||
  fail "LOCKPIPE_CHECKOUT=$checkout is not a git checkout; clone the repository there (docs/refresh.md, Install)"

stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$reports"
git -C "$checkout" worktree prune  # an interrupted run's worktree is forgotten, not in the way
git -C "$checkout" fetch --quiet "$remote" "+refs/heads/$base:refs/remotes/$remote/$base"
tree=$(mktemp -d "${TMPDIR:-/tmp}/lockpipe-refresh.XXXXXX")
cleanup() {
  git -C "$checkout" worktree remove --force "$tree/work" 2> /dev/null || true
  rm -rf -- "$tree"
}
trap cleanup EXIT
git -C "$checkout" worktree add --quiet --detach "$tree/work" "refs/remotes/$remote/$base"
cd "$tree/work"

mode=(--dry-run)
[[ -z "$branch" ]] || mode=()
"${LOCKPIPE_NOX:-nox}" -s refresh-digests -- "${mode[@]}" \
  --report-md "$reports/$stamp.md" --report-json "$reports/$stamp.json" \
  --propose --min-age "${LOCKPIPE_MIN_AGE:-3d}" --first-seen "$reports/first-seen.json"
ln -sfn "$stamp.md" "$reports/latest.md"

# Keep the newest $keep runs: the stamps sort as they were taken.
find "$reports" -maxdepth 1 -type f -name '*T*Z.md' -printf '%f\n' | sort -r |
  tail -n "+$((keep + 1))" | while read -r old; do
    rm -f -- "$reports/$old" "$reports/${old%.md}.json"
  done

if [[ -z "$branch" ]]; then
  echo "lockpipe-refresh: report only; report $reports/$stamp.md"
elif ! git diff --quiet -- locks/digests.json; then
  git "${identity[@]}" commit --quiet --file "$reports/$stamp.md" -- locks/digests.json
  git push --quiet --force "$remote" "HEAD:refs/heads/$branch"
  echo "lockpipe-refresh: pushed $branch to $remote; report $reports/$stamp.md"
elif git ls-remote --exit-code --heads "$remote" "refs/heads/$branch" > /dev/null; then
  git push --quiet "$remote" --delete "$branch"
  echo "lockpipe-refresh: every pin is current; deleted the stale $branch at $remote"
else
  echo "lockpipe-refresh: every pin is current; report $reports/$stamp.md"
fi
