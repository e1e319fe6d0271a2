#!/bin/sh
# Render the HTML report of realistic synthetic results to a PNG, to look at it as a user would.
#   ci/render_report_png.sh [OUT_PNG] [WINDOW=1400,2400]
# Needs Debian's chromium (apt-get install -y chromium). Writes the reports next to the PNG.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/tmp/report.png}
window=${2:-1400,2400}
py=${PYTHON:-$here/.venv/bin/python}
dir=$(mktemp -d)
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
(cd "$here" && "$py" -m tests.report.demo "$dir" >/dev/null)
timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
    --user-data-dir="$profile" --screenshot="$out" --window-size="$window" \
    "file://$dir/report.html" 2>/dev/null
echo "report: $dir/report.html"
echo "png:    $out"
