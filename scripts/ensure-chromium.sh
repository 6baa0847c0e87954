#!/usr/bin/env bash
# The admin's browser tests drive Debian's Chromium through Playwright (no browser
# download). Install it when it is missing and we may (root with apt-get); otherwise, or
# with EVENTFERRY_SKIP_BROWSER_TESTS set, those tests skip.
set -u
if [ -n "${EVENTFERRY_SKIP_BROWSER_TESTS:-}" ]; then
  echo "ensure-chromium: EVENTFERRY_SKIP_BROWSER_TESTS is set; no Chromium, the browser tests skip"
  exit 0
fi
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: installing Debian's chromium for the browser tests"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 \
    || echo "ensure-chromium: could not install chromium; the browser tests will skip" >&2
else
  echo "ensure-chromium: chromium not found; the browser tests will skip" >&2
fi
exit 0
