#!/bin/sh
# Run by the .deb (prerm) and the .rpm (%preun) before the files go: on a
# removal, stop the service and disable it (the unit file is still there
# to disable). On an upgrade, nothing: the old process runs on until the
# new package's postinstall restarts it on the new binary. Stopping never
# releases a VM; the state directory is left alone.
#
# Arguments: deb "remove", or "upgrade <new version>", "deconfigure ...",
# "failed-upgrade ..."; rpm "<count>" (0 on erase, 1 or more on upgrade).
set -e
# The same guard as postinstall.sh: not in a foreign root (dpkg --root),
# and only with a running systemd.
if [ -n "${DPKG_ROOT:-}" ] || [ ! -d /run/systemd/system ] || ! command -v systemctl >/dev/null 2>&1; then
	exit 0
fi
case "$1" in
remove | 0)
	systemctl stop vk-sandbox.service || true
	systemctl disable vk-sandbox.service || true
	;;
esac
