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
