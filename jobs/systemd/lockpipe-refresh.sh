#!/bin/bash
# lockpipe-refresh: what lockpipe-refresh.service runs (install it as
# /usr/local/libexec/lockpipe-refresh; docs/refresh.md). Settings come from the
# unit's EnvironmentFile, /etc/lockpipe/refresh.env:
#   LOCKPIPE_CHECKOUT  a git checkout of the project (required)
#   LOCKPIPE_REPORTS   where the reports go (default /var/lib/lockpipe/refresh):
#                      STAMP.md and STAMP.json per run, latest.md -> the newest
#   LOCKPIPE_BRANCH    unset: report only (--dry-run; the checkout is not touched).
#                      set: the branch is reset to LOCKPIPE_REMOTE/LOCKPIPE_BASE, the
#                      refreshed lock committed on it (the report is the message) and
#                      force-pushed, so it always holds one refresh commit on the base
#   LOCKPIPE_REMOTE    default origin;  LOCKPIPE_BASE  default main
#   LOCKPIPE_NOX       the nox to run (default: nox on PATH)
#   GITHUB_TOKEN, HF_TOKEN, PIPELINE_*  passed on to lockpipe as they are
set -euo pipefail
: "${LOCKPIPE_CHECKOUT:?set LOCKPIPE_CHECKOUT in /etc/lockpipe/refresh.env}"
reports=${LOCKPIPE_REPORTS:-/var/lib/lockpipe/refresh}
remote=${LOCKPIPE_REMOTE:-origin}
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$reports"
cd "$LOCKPIPE_CHECKOUT"
mode=(--dry-run)
if [[ -n "${LOCKPIPE_BRANCH:-}" ]]; then
  git fetch --quiet "$remote"
  git checkout --quiet -B "$LOCKPIPE_BRANCH" "$remote/${LOCKPIPE_BASE:-main}"
  mode=()
fi
"${LOCKPIPE_NOX:-nox}" -s refresh-digests -- "${mode[@]}" \
  --report-md "$reports/$stamp.md" --report-json "$reports/$stamp.json"
ln -sfn "$stamp.md" "$reports/latest.md"
if [[ -n "${LOCKPIPE_BRANCH:-}" ]] && ! git diff --quiet -- locks/digests.json; then
  git commit --quiet --file "$reports/$stamp.md" -- locks/digests.json
  git push --quiet --force "$remote" "$LOCKPIPE_BRANCH"
  echo "lockpipe-refresh: pushed $LOCKPIPE_BRANCH to $remote; report $reports/$stamp.md"
else
  echo "lockpipe-refresh: nothing to push; report $reports/$stamp.md"
fi
