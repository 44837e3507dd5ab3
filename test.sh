#!/usr/bin/env bash
# ./test.sh: boxbroker's tests. The README's test command; .ci/run runs it
# with BOXBROKER_FULL=1.
#
# The default run (a few minutes at most on a quiet 2-core machine; the
# README gives the measured time) checks formatting (gofmt), runs go vet
# and every Go test: the conformance suite against boxbroker and against
# broken brokers, the official Go SDK against boxbroker, the durability
# test's kill -9, and the tests that need something the machine may lack,
# each of which runs when that is present and otherwise skips saying why:
# the TypeScript SDK and Claude Code (Node.js, and the pinned packages in
# ~/.cache/boxbroker-e2e, which a full run installs), the owner's page in
# Chromium (/usr/bin/chromium), the PostgreSQL store
# (BOXBROKER_TEST_POSTGRES), the systemd unit (systemd-analyze) and the
# container image (a container engine). Fuzzing is off.
#
# BOXBROKER_FULL=1 ./test.sh is the full run, as CI runs it: the same, but
# the pinned Node.js clients are installed with npm ci when missing (that
# needs the network) and every fuzz target is fuzzed for
# BOXBROKER_FUZZTIME (default 30s a target).
#
# Variables:
#   BOXBROKER_FULL=1              the full run
#   BOXBROKER_FUZZTIME=10s        fuzz time per target (default: 0, off; 30s with BOXBROKER_FULL=1)
#   BOXBROKER_REQUIRE_NETWORK=1   a test that skips for want of the network fails instead (CI)
#   BOXBROKER_REQUIRE_POSTGRES=1  the PostgreSQL store tests fail instead of skipping (CI)
# A missing container engine is never a failure, even in CI: CI machines
# have none, so the Dockerfile test always skips there, saying so.
#
# No test binds a fixed port or writes into the checkout or under your
# HOME, so this runs beside a `boxbroker serve` on the default ports and
# its data directory. The tests run with HOME, XDG_DATA_HOME,
# XDG_CONFIG_HOME, XDG_CACHE_HOME and XDG_STATE_HOME in a temporary
# folder (removed after), so that one which fell back to the default data
# directory (~/.local/share/boxbroker) would write there, not into yours;
# Go's build and module caches, its settings (go env -w) and the Node.js
# packages in ~/.cache/boxbroker-e2e stay where they are. A check after
# the tests says if the listing of your HOME, ~/.local/share and the
# default data directory changed meanwhile.
#
# At the end, the run lists every test that skipped, each with the
# reason it gave (what it lacks); go test's own lines (ok, FAIL and each
# failure's output) are printed as go test prints them.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="/usr/local/go/bin:$PATH"
full=${BOXBROKER_FULL:-}
if [ "$full" = "0" ]; then full=; fi
export BOXBROKER_FULL=$full

# Go's caches and settings, and the e2e packages' cache, from the real
# HOME, before HOME changes.
GOCACHE=$(go env GOCACHE) GOMODCACHE=$(go env GOMODCACHE) GOPATH=$(go env GOPATH) GOENV=$(go env GOENV)
export GOCACHE GOMODCACHE GOPATH GOENV
export BOXBROKER_E2E_CACHE=${BOXBROKER_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/boxbroker-e2e}
realhome=$HOME
realdata=${XDG_DATA_HOME:-$HOME/.local/share}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/boxbroker-test.XXXXXX")
cleanup() { rm -rf "$scratch"; }
trap cleanup EXIT
export HOME="$scratch/home"
export XDG_DATA_HOME="$HOME/.local/share" XDG_CONFIG_HOME="$HOME/.config" XDG_CACHE_HOME="$HOME/.cache" XDG_STATE_HOME="$HOME/.local/state"
mkdir -p "$XDG_DATA_HOME" "$XDG_CONFIG_HOME" "$XDG_CACHE_HOME" "$XDG_STATE_HOME"
# homeListing is a bounded listing of the real HOME: its entries, those
# of its data folder, and the default boxbroker data directory's.
homeListing() {
  { find "$realhome" "$realdata" "$realdata/boxbroker" -maxdepth 1 2>/dev/null || true; } | sort
}

unformatted=$(gofmt -l . | grep -v '^vendor/' || true)
if [ -n "$unformatted" ]; then
  echo "gofmt -l lists:"; echo "$unformatted"; exit 1
fi
go vet ./...
# staticcheck at a pinned version (the first run builds it into Go's cache).
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
# No test writes into the checkout: the untracked and ignored files git
# sees are the same after the tests as before.
untracked() { git status --porcelain --ignored --untracked-files=all 2>/dev/null | grep '^[?!][?!] ' || true; }
before=$(untracked)
homeBefore=$(homeListing)
# go test -json, printed as go test prints without it (the ok and FAIL
# lines, each failure's output) and the skips listed at the end; the
# status is go test's, or the summary's if that failed.
go test -count=1 -timeout 20m -json ./... | go run ./.ci/testsummary
after=$(untracked)
if [ "$before" != "$after" ]; then
  echo "files appeared in the checkout while the tests ran (written by a test, unless you made them meanwhile):"
  diff <(echo "$before") <(echo "$after") || true
  exit 1
fi
homeAfter=$(homeListing)
if [ "$homeBefore" != "$homeAfter" ]; then
  echo "the listing of $realhome changed while the tests ran (written by a test, unless something else did meanwhile):"
  diff <(echo "$homeBefore") <(echo "$homeAfter") || true
  exit 1
fi

# Fuzz every target for a bounded time (go fuzzes one target per call).
# A failing input is written under its package's testdata/fuzz, where the
# next `go test` runs it as a regression.
if [ -n "$full" ]; then
  fuzztime=${BOXBROKER_FUZZTIME:-30s}
else
  fuzztime=${BOXBROKER_FUZZTIME:-0}
fi
if [ "$fuzztime" != "0" ]; then
  out="$scratch/fuzz.out"
  for target in $(grep -r --include='*_test.go' -o '^func Fuzz[A-Za-z0-9_]*' . | sed 's/:func /:/' | sort); do
    pkg=$(dirname "${target%%:*}") name=${target##*:}
    echo "fuzz $pkg $name for $fuzztime"
    if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" >"$out" 2>&1; then
      # A real finding always writes its failing input. Go's fuzzer can
      # also stop with "context deadline exceeded" when its time runs out
      # mid-minimisation, which finds nothing: say so and go on.
      if grep -q 'Failing input written to' "$out" || ! grep -q 'context deadline exceeded' "$out"; then
        tail -40 "$out"; exit 1
      fi
      echo "fuzz $pkg $name: the fuzzer's time ran out mid-run (context deadline exceeded); no failing input"
    fi
  done
else
  echo "fuzzing off (BOXBROKER_FULL=1 or BOXBROKER_FUZZTIME=10s to fuzz)"
fi
