#!/usr/bin/env bash
# check-packages.sh checks what the .deb and .rpm of `make release-snapshot`
# do to a host, by letting dpkg and rpm themselves install, upgrade, remove
# and purge them in scratch roots and run their maintainer scripts there,
# chrooted, as on a host with a running systemd:
#
#   - no package owns /var/lib/vk-sandbox (the unit's StateDirectory=);
#   - install: daemon-reload only (the service is neither enabled nor
#     started);
#   - upgrade: daemon-reload and try-restart, never stop or disable;
#   - remove: stop and disable before the files go, daemon-reload after;
#   - purge: the conffile /etc/vk-sandbox/env goes, the operator's
#     credentials stay;
#   - the state directory systemd made (/var/lib/private/vk-sandbox, the
#     DynamicUser's, and the /var/lib/vk-sandbox link to it) is untouched by
#     all of them, byte for byte, owner and mode;
#   - an upgrade from a package that still owned /var/lib/vk-sandbox keeps
#     the state.
#
# Each scratch root has /bin/sh (the host's dash and its libraries),
# /dev/null, /run/systemd/system (systemd "runs") and a fake systemctl that
# appends its arguments to /systemctl.calls. No real systemd is involved:
# the checks are what the scripts ask of it. Needs root (dpkg and rpm
# chroot into the scratch root to run the scripts) and dpkg; the rpm part
# needs rpm and is skipped, saying so, without it. scripts/check-release.sh
# runs it; cmd/vk-sandbox/maintscripts_test.go runs the same scripts with
# every argument dpkg and rpm pass.
#
# Usage: scripts/check-packages.sh [dist-dir]   (default dist)
set -euo pipefail

dist="${1:-dist}"
failed=0
fail() { printf 'check-packages: FAIL: %s\n' "$*" >&2; failed=1; }
say() { printf 'check-packages: %s\n' "$*"; }

if [[ "$(id -u)" != 0 ]]; then
	# In CI the check must run: a skip there would pass unchecked packages.
	[[ "${CI:-}" == true ]] && { fail "needs root (dpkg and rpm chroot into the scratch roots)"; exit 1; }
	say "not root: skipped (dpkg and rpm chroot into the scratch roots)"
	exit 0
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# The DynamicUser's uid, as systemd allocates them (61184-65519).
dyn_uid=61234
reload="daemon-reload"
restart="try-restart vk-sandbox.service"
stop="stop vk-sandbox.service"
disable="disable vk-sandbox.service"

# new_root DIR: an empty host for dpkg and rpm to act on.
new_root() {
	local r="$1" f
	mkdir -p "$r/var/lib/dpkg/updates" "$r/var/lib/dpkg/info" "$r/run/systemd/system" "$r/usr/bin" "$r/bin" "$r/dev" "$r/tmp"
	touch "$r/var/lib/dpkg/status"
	for f in /bin/dash $(ldd /bin/dash | grep -o '/[^ ]*'); do
		mkdir -p "$r$(dirname "$f")"
		cp -L "$f" "$r$f"
	done
	ln -s dash "$r/bin/sh"
	mknod -m 0666 "$r/dev/null" c 1 3
	printf '#!/bin/sh\necho "$*" >>/systemctl.calls\n' >"$r/usr/bin/systemctl"
	chmod 0755 "$r/usr/bin/systemctl"
}

# expect_calls ROOT WHAT CALL...: the systemctl calls since the last check
# are exactly CALL..., in order.
expect_calls() {
	local r="$1" what="$2" got want
	shift 2
	got="$(cat "$r/systemctl.calls" 2>/dev/null || true)"
	want="$(printf '%s\n' "$@")"
	[[ $# -gt 0 ]] || want=""
	if [[ "$got" == "$want" ]]; then
		say "$what: systemctl ${*:-(no call)}"
	else
		fail "$what: systemctl calls were [${got//$'\n'/, }], want [${want//$'\n'/, }]"
	fi
	rm -f "$r/systemctl.calls"
}

# make_state ROOT: what systemd's StateDirectory= leaves after the unit's
# first start: the directory under /var/lib/private, the DynamicUser's,
# 0700, its files 0600, and /var/lib/vk-sandbox linked to it. A directory
# already at /var/lib/vk-sandbox (an old package's) is moved there, as
# systemd does.
make_state() {
	local r="$1" d="$1/var/lib/private/vk-sandbox"
	mkdir -p -m 0700 "$r/var/lib/private"
	if [[ -d "$r/var/lib/vk-sandbox" && ! -L "$r/var/lib/vk-sandbox" ]]; then
		mv "$r/var/lib/vk-sandbox" "$d"
	else
		mkdir -m 0700 "$d"
	fi
	ln -s private/vk-sandbox "$r/var/lib/vk-sandbox"
	head -c 4096 /dev/urandom | base64 >"$d/claims.json"
	head -c 32 /dev/urandom >"$d/node.key"
	: >"$d/claims.json.lock"
	chmod 0600 "$d"/*
	chown -R "$dyn_uid:$dyn_uid" "$d"
}

# state_of ROOT: owner, mode and content of the state directory and its files.
state_of() {
	local d="$1/var/lib/private/vk-sandbox"
	stat -c '%u:%g %a %n' "$d" "$d"/* | sed "s#$1##"
	(cd "$d" && sha256sum -- *)
}

# expect_state ROOT WHAT BEFORE: the state directory is as it was.
expect_state() {
	local now
	now="$(state_of "$1" 2>&1 || true)"
	[[ "$now" == "$3" ]] || fail "$2 changed the state directory: was
$3
is
$now"
}

# dpkg_in ROOT ARGS...: dpkg acting on ROOT. Without --force-script-chrootless
# it runs the maintainer scripts chrooted into ROOT with DPKG_ROOT empty, as
# on the host itself.
dpkg_in() {
	local r="$1"
	shift
	dpkg --root="$r" --log=/dev/null "$@" >"$scratch/dpkg.log" 2>&1 || {
		cat "$scratch/dpkg.log" >&2
		fail "dpkg --root $r $*"
		return 1
	}
}

arch="$(dpkg --print-architecture)"
debs=("$dist"/vk-sandbox_*_"$arch".deb)
deb="${debs[0]}"
if [[ ! -f "$deb" ]]; then
	fail "no $arch .deb in $dist: run make release-snapshot first"
	exit 1
fi

# The package owns no part of the state directory.
if grep -q ' \./var/lib/vk-sandbox' <<<"$(dpkg-deb -c "$deb")"; then
	fail "$deb installs /var/lib/vk-sandbox, the unit's StateDirectory="
fi
control="$(dpkg-deb --ctrl-tarfile "$deb" | tar -t)"
for s in postinst prerm postrm; do
	grep -qx "\./$s" <<<"$control" || fail "$deb has no $s"
done

# Version 2 of the same package (an upgrade), and the old layout: a
# package that still owned /var/lib/vk-sandbox and had no prerm or postrm.
dpkg-deb -R "$deb" "$scratch/v2"
sed -i 's/^Version: .*/&.1/' "$scratch/v2/DEBIAN/control"
dpkg-deb -b "$scratch/v2" "$scratch/v2.deb" >/dev/null
dpkg-deb -R "$deb" "$scratch/old"
sed -i 's/^Version: \(.*\)/Version: 0.0.1~\1/' "$scratch/old/DEBIAN/control"
rm "$scratch/old/DEBIAN/prerm" "$scratch/old/DEBIAN/postrm"
install -d -m 0700 "$scratch/old/var/lib/vk-sandbox"
dpkg-deb -b "$scratch/old" "$scratch/old.deb" >/dev/null

say "deb: install, upgrade, remove, purge"
r="$scratch/deb"
new_root "$r"
if dpkg_in "$r" -i "$deb"; then
	expect_calls "$r" "install" "$reload"
	dpkg --root="$r" -S /var/lib/vk-sandbox >/dev/null 2>&1 && fail "dpkg -S: a package owns /var/lib/vk-sandbox"
	[[ -e "$r/var/lib/vk-sandbox" ]] && fail "install made /var/lib/vk-sandbox (StateDirectory= makes it)"
	make_state "$r"
	before="$(state_of "$r")"
	install -m 0600 /dev/null "$r/etc/vk-sandbox/kubeconfig"
	install -m 0600 /dev/null "$r/etc/vk-sandbox/sandboxd-token"
	echo 'VK_NODE_NAME=edited' >>"$r/etc/vk-sandbox/env"

	dpkg_in "$r" -i "$scratch/v2.deb" &&
		expect_calls "$r" "upgrade (old prerm, old postrm, new postinst)" "$reload" "$reload" "$restart"
	expect_state "$r" "upgrade" "$before"
	[[ "$(readlink "$r/var/lib/vk-sandbox")" == private/vk-sandbox ]] || fail "upgrade took the /var/lib/vk-sandbox link away"
	grep -qx 'VK_NODE_NAME=edited' "$r/etc/vk-sandbox/env" || fail "upgrade replaced the edited /etc/vk-sandbox/env"

	dpkg_in "$r" -r vk-sandbox && expect_calls "$r" "remove (prerm, postrm)" "$stop" "$disable" "$reload"
	expect_state "$r" "remove" "$before"
	[[ -e "$r/usr/bin/vk-sandbox" ]] && fail "remove left /usr/bin/vk-sandbox"
	[[ -f "$r/etc/vk-sandbox/env" ]] || fail "remove deleted the conffile /etc/vk-sandbox/env (only purge does)"

	dpkg_in "$r" -P vk-sandbox && expect_calls "$r" "purge (postrm)" "$reload"
	expect_state "$r" "purge" "$before"
	[[ -e "$r/etc/vk-sandbox/env" ]] && fail "purge left the conffile /etc/vk-sandbox/env"
	for f in kubeconfig sandboxd-token; do
		[[ -f "$r/etc/vk-sandbox/$f" ]] || fail "purge deleted the operator's /etc/vk-sandbox/$f"
	done
fi

say "deb: upgrade from a package that owned /var/lib/vk-sandbox"
r="$scratch/deb-old"
new_root "$r"
if dpkg_in "$r" -i "$scratch/old.deb"; then
	rm -f "$r/systemctl.calls"
	make_state "$r"
	before="$(state_of "$r")"
	# dpkg deletes the link in place of the directory the old package
	# owned; the unit's next start (the try-restart, if it runs) makes it
	# again.
	dpkg_in "$r" -i "$deb" && expect_calls "$r" "upgrade from the old layout (new postinst)" "$reload" "$restart"
	expect_state "$r" "upgrade from the old layout" "$before"
	dpkg --root="$r" -S /var/lib/vk-sandbox >/dev/null 2>&1 && fail "after the upgrade a package still owns /var/lib/vk-sandbox"
fi

if ! command -v rpm >/dev/null; then
	say "rpm is not installed: the .rpm's scriptlets were not run"
else
	case "$arch" in amd64) rarch=x86_64 ;; arm64) rarch=aarch64 ;; *) rarch="$arch" ;; esac
	rpms=("$dist"/vk-sandbox-*."$rarch".rpm)
	rp="${rpms[0]}"
	[[ -f "$rp" ]] || { fail "no $rarch .rpm in $dist"; exit 1; }
	say "rpm: install, upgrade (reinstall), erase"
	grep -q '^/var/lib/vk-sandbox' <<<"$(rpm -qlp "$rp" 2>/dev/null)" && fail "$rp installs /var/lib/vk-sandbox, the unit's StateDirectory="
	r="$scratch/rpm"
	new_root "$r"
	rpm_in() { rpm --root="$r" --nodeps "$@" >"$scratch/rpm.log" 2>&1 || { cat "$scratch/rpm.log" >&2; fail "rpm --root $r $*"; }; }
	rpm --root="$r" --initdb
	rpm_in -i "$rp"
	expect_calls "$r" "rpm install (%post 1)" "$reload"
	make_state "$r"
	before="$(state_of "$r")"
	# The same package again is an upgrade to rpm: the new %post with 2,
	# then the old %preun and %postun with 1.
	rpm_in -U --replacepkgs "$rp"
	expect_calls "$r" "rpm upgrade (%post 2, %preun 1, %postun 1)" "$reload" "$restart" "$reload"
	expect_state "$r" "rpm upgrade" "$before"
	rpm_in -e vk-sandbox
	expect_calls "$r" "rpm erase (%preun 0, %postun 0)" "$stop" "$disable" "$reload"
	expect_state "$r" "rpm erase" "$before"
fi

if ((failed)); then
	say "FAILED"
	exit 1
fi
say "ok"
