#!/usr/bin/env bash
# Screenshot a `trtkit report -o PAGE.html` page with headless Chromium, to look at it as a
# person would.  Usage: scripts/screenshot_report.sh PAGE.html OUT.png [WIDTH,HEIGHT]
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 PAGE.html OUT.png [WIDTH,HEIGHT]" >&2
    exit 2
fi
page=$(realpath "$1")
out=$(realpath -m "$2")
size=${3:-1400,3000}
browser=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [ -z "$browser" ]; then
    echo "$0: no chromium found (apt-get install chromium, or set CHROMIUM)" >&2
    exit 1
fi
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --screenshot="$out" --window-size="$size" "file://$page" 2>/dev/null
[ -s "$out" ] || { echo "$0: chromium wrote no screenshot" >&2; exit 1; }
echo "$out"
