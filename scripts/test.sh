#!/usr/bin/env bash
# trtkit's test command: installs what the tests need (scripts/test-setup.sh), then runs every
# test. Extra arguments go to `cargo nextest run` (a filter, `--no-capture`, …).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/test-setup.sh
exec cargo nextest run --locked --no-fail-fast "$@"
