#!/usr/bin/env bash
# Optional: installs Debian's Chromium, used only to look at the HTML timelines headlessly
# (docs/simulator.md shows the screenshot command). CI does not need it. Idempotent.
set -euo pipefail
if dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  exit 0
fi
echo "plait: installing chromium" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
