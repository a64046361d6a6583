#!/usr/bin/env bash
# Installs what the console's real-browser test (cli/tests/console_browser.rs) needs: Debian's
# `chromium` and `chromium-driver` packages (the browser and its WebDriver server), unless
# `chromium` and `chromedriver` are already on PATH. Nothing is downloaded from anywhere but
# the distribution's package archive. Needs root for apt-get; without root and without the
# programs it says so and fails (under CI=true the test would fail anyway).
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-chromium: chromium or chromedriver is missing and we are not root:" \
        "apt-get install chromium chromium-driver" >&2
    exit 1
fi
echo "install-chromium: installing Debian's chromium and chromium-driver" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium chromium-driver
