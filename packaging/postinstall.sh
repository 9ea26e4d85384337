#!/bin/sh
# Run by the .deb (postinst) and the .rpm (%post) once the new files are in
# place: make systemd see the unit, and on an upgrade restart a running
# service on the new binary. A fresh install neither enables nor starts it:
# it needs /etc/vk-sandbox/kubeconfig and /etc/vk-sandbox/sandboxd-token
# first (docs/install.md).
#
# Arguments: deb "configure [<old version>]" (the old version is set on an
# upgrade), rpm "<count>" (1 on install, 2 or more on upgrade).
set -e
# DPKG_ROOT is set when dpkg installs into another root (dpkg --root): the
# running systemd is not that root's. Without a running systemd there is
# nothing to tell.
if [ -n "${DPKG_ROOT:-}" ] || [ ! -d /run/systemd/system ] || ! command -v systemctl >/dev/null 2>&1; then
	exit 0
fi
systemctl daemon-reload || true
case "$1" in
configure) upgrade=${2:+yes} ;;
[2-9] | [1-9][0-9]*) upgrade=yes ;;
*) upgrade= ;;
esac
# try-restart restarts the service only if it runs: an upgrade never starts
# a service the operator left stopped. A restart leaves every VM running
# (docs/install.md, "Upgrade").
if [ -n "$upgrade" ]; then
	systemctl try-restart vk-sandbox.service || true
fi
