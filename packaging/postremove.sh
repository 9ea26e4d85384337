#!/bin/sh
# Run by the .deb (postrm) and the .rpm (%postun) after the files went:
# make systemd forget the removed (or replaced) unit file. That is all the
# package undoes. It never touches the state directory
# (/var/lib/private/vk-sandbox, systemd's StateDirectory: it holds the only
# credentials that release this host's VMs) nor the operator's files in
# /etc/vk-sandbox. On purge, dpkg itself deletes the conffile
# /etc/vk-sandbox/env, which the package installed, and /etc/vk-sandbox if
# nothing else is left in it.
#
# Arguments: deb "remove", "purge", "upgrade ...", "abort-..."; rpm
# "<count>" (0 on erase, 1 or more on upgrade).
set -e
# The same guard as postinstall.sh.
if [ -n "${DPKG_ROOT:-}" ] || [ ! -d /run/systemd/system ] || ! command -v systemctl >/dev/null 2>&1; then
	exit 0
fi
systemctl daemon-reload || true
