#!/bin/sh
# Run by the .deb and .rpm after installing: make systemd see the unit.
# The service is neither enabled nor started: it needs
# /etc/vk-sandbox/kubeconfig and /etc/vk-sandbox/sandboxd-token first
# (docs/install.md).
set -e
# DPKG_ROOT is set when dpkg installs into another root (dpkg --root):
# the running systemd is not that root's.
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
fi
