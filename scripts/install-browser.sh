#!/bin/sh
# Installs what the browser tests need: Debian's chromium (with a CJK font, so Chinese
# pages render as text in screenshots) and Playwright for Python.
# Playwright cannot download its own browser here, so it drives /usr/bin/chromium.
# Without root or apt this says so and the browser tests skip (in CI they fail).
set -u
VENV_BIN=${VENV_BIN:-.venv/bin}
"$VENV_BIN/pip" install --quiet "playwright>=1.40,<2" || echo "install-browser: could not install playwright"
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null) \
    || echo "install-browser: apt-get could not install chromium"
else
  echo "install-browser: no /usr/bin/chromium and no root apt-get; browser tests will be skipped"
fi
exit 0
