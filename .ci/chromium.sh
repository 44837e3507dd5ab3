#!/usr/bin/env bash
# .ci/chromium.sh: Debian's Chromium for the owner's page browser test
# (internal/admin, TestOwnerPage_Browser). Idempotent; everything goes to
# stderr. If it cannot be installed, that test skips and says why.
set -uo pipefail
if [[ -x /usr/bin/chromium ]]; then
	exit 0
fi
echo "chromium.sh: installing chromium from Debian" >&2
export DEBIAN_FRONTEND=noninteractive
{ apt-get update -qq && apt-get install -y -qq chromium; } >&2 || echo "chromium.sh: could not install chromium; the browser test will skip" >&2
exit 0
