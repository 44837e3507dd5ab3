#!/usr/bin/env bash
# The whole test suite: formatting, vet, and every test (the conformance
# suite against boxbroker and against broken brokers included).
set -euo pipefail
cd "$(dirname "$0")"
export PATH="/usr/local/go/bin:$PATH"
unformatted=$(gofmt -l . | grep -v '^vendor/' || true)
if [ -n "$unformatted" ]; then
  echo "gofmt -l lists:"; echo "$unformatted"; exit 1
fi
go vet ./...
go test -count=1 -timeout 20m ./...

# Fuzz every target for a short bounded time (go fuzzes one target per
# call). BOXBROKER_FUZZTIME sets the time per target (default 5s; 0
# skips). A failing input is written under its package's testdata/fuzz,
# where the next `go test` runs it as a regression.
fuzztime=${BOXBROKER_FUZZTIME:-5s}
if [ "$fuzztime" != "0" ]; then
  out=$(mktemp)
  trap 'rm -f "$out"' EXIT
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
fi
