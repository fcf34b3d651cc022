#!/usr/bin/env bash
# trtkit's test command: installs what the tests need (scripts/test-setup.sh), then runs every
# test. Extra arguments go to `cargo nextest run` (a filter, `--no-capture`, …).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/test-setup.sh
# Each fuzz target of tests/fuzz.rs runs this many seconds (2 when the test is run alone).
export TRTKIT_FUZZ_SECONDS="${TRTKIT_FUZZ_SECONDS:-20}"
exec cargo nextest run --locked --no-fail-fast "$@"
