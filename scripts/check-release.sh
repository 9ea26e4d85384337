#!/usr/bin/env bash
# check-release.sh checks what `make release-snapshot` (goreleaser,
# .goreleaser.yaml) wrote into dist/: every archive holds the binary, the
# systemd unit, the env file, the docs and LICENSE; the binary is of the
# archive's architecture and stamped with the commit; checksums.txt
# verifies; each archive has a CycloneDX JSON SBOM; the .deb lists and
# installs (dpkg --root, into a scratch root) the binary, the unit and
# /etc/vk-sandbox/env as a config file, and not the state directory; the
# .rpm exists per architecture; systemd-analyze verifies the installed
# unit when it is available; and scripts/check-packages.sh runs the
# packages' maintainer scripts through dpkg and rpm (install, upgrade,
# remove, purge). CI runs it after make release-snapshot.
#
# Usage: scripts/check-release.sh [dist-dir]   (default dist)
set -euo pipefail

dist="${1:-dist}"
failed=0
fail() { printf 'check-release: FAIL: %s\n' "$*" >&2; failed=1; }
say() { printf 'check-release: %s\n' "$*"; }

[[ -d "$dist" ]] || { fail "no $dist/: run make release-snapshot first"; exit 1; }
commit="$(git rev-parse HEAD 2>/dev/null || true)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# json_field FILE EXPR: one field of a JSON document (jq, else python3).
json_field() {
	if command -v jq >/dev/null; then
		jq -er "$2" "$1"
	else
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval("d"+sys.argv[2]))' "$1" "$3"
	fi
}

for arch in amd64 arm64; do
	archives=("$dist"/vk-sandbox_*_linux_"$arch".tar.gz)
	a="${archives[0]}"
	if [[ ! -f "$a" ]]; then
		fail "no linux/$arch archive in $dist"
		continue
	fi
	list="$(tar -tzf "$a")"
	for f in vk-sandbox packaging/vk-sandbox.service packaging/env.example LICENSE README.md CHANGELOG.md docs/install.md docs/state-file.md docs/configuration.md; do
		grep -qx "$f" <<<"$list" || fail "$a lacks $f"
	done
	mkdir -p "$scratch/$arch"
	tar -xzf "$a" -C "$scratch/$arch" vk-sandbox
	info="$(go version -m "$scratch/$arch/vk-sandbox")"
	grep -q "GOARCH=$arch" <<<"$info" || fail "$a: the binary is not built for $arch"
	# -trimpath builds record no -ldflags in the build info, so the stamp
	# is looked for in the binary itself (an -X value is a plain string).
	if [[ -n "$commit" ]] && ! grep -qaF "$commit" "$scratch/$arch/vk-sandbox"; then
		fail "$a: the binary is not stamped with commit $commit"
	fi
	if [[ "$arch" == "$(go env GOARCH)" ]]; then
		v="$("$scratch/$arch/vk-sandbox" --version)"
		[[ -z "$commit" || "$v" == *"commit $commit"* ]] || fail "$a: --version says $v"
		say "$a: $v"
	fi

	sbom="$a.sbom.json"
	if [[ ! -f "$sbom" ]]; then
		fail "no SBOM $sbom"
	else
		format="$(json_field "$sbom" .bomFormat "['bomFormat']" 2>/dev/null || true)"
		spec="$(json_field "$sbom" .specVersion "['specVersion']" 2>/dev/null || true)"
		n="$(json_field "$sbom" '.components | length' ".get('components',[]).__len__()" 2>/dev/null || echo 0)"
		[[ "$format" == CycloneDX && -n "$spec" && "$n" -gt 0 ]] ||
			fail "$sbom is not a CycloneDX JSON SBOM with components (bomFormat '$format', specVersion '$spec', $n components)"
		say "$sbom: CycloneDX $spec, $n components"
	fi

	rpms=("$dist"/vk-sandbox-*."$( [[ $arch == amd64 ]] && echo x86_64 || echo aarch64 )".rpm)
	if [[ -f "${rpms[0]}" ]]; then
		[[ "$(head -c 4 "${rpms[0]}" | od -An -tx1 | tr -d ' \n')" == edabeedb ]] || fail "${rpms[0]} is not an RPM"
		if command -v rpm >/dev/null; then
			rpm -qlp "${rpms[0]}" | grep -qx /usr/bin/vk-sandbox || fail "${rpms[0]} does not install /usr/bin/vk-sandbox"
		fi
	else
		fail "no linux/$arch .rpm in $dist"
	fi
done

say "checksums.txt"
if [[ -f "$dist/checksums.txt" ]]; then
	(cd "$dist" && sha256sum --quiet -c checksums.txt) || fail "checksums.txt does not verify"
	for f in "$dist"/*.tar.gz "$dist"/*.deb "$dist"/*.rpm; do
		grep -q " $(basename "$f")\$" "$dist/checksums.txt" || fail "checksums.txt lacks $(basename "$f")"
	done
else
	fail "no $dist/checksums.txt"
fi

debs=("$dist"/vk-sandbox_*_amd64.deb)
deb="${debs[0]}"
if [[ ! -f "$deb" ]]; then
	fail "no amd64 .deb in $dist"
else
	contents="$(dpkg-deb -c "$deb")"
	for f in ./usr/bin/vk-sandbox ./usr/lib/systemd/system/vk-sandbox.service ./etc/vk-sandbox/env ./usr/share/doc/vk-sandbox/LICENSE; do
		grep -q " $f\$" <<<"$contents" || fail "$deb does not install $f"
	done
	# The unit's StateDirectory= makes the state directory; a package that
	# owned it would remove systemd's link to it on removal.
	grep -q ' \./var/lib/vk-sandbox' <<<"$contents" && fail "$deb installs /var/lib/vk-sandbox"
	dpkg-deb -I "$deb" conffiles 2>/dev/null | grep -qx /etc/vk-sandbox/env || fail "$deb: /etc/vk-sandbox/env is not a conffile"

	# Install into a scratch root: dpkg runs the maintainer scripts there
	# (unchrooted, with DPKG_ROOT set, so they leave this host alone).
	root="$scratch/root"
	mkdir -p "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/info"
	touch "$root/var/lib/dpkg/status"
	if dpkg --root="$root" --force-script-chrootless --force-not-root --log=/dev/null -i "$deb" >"$scratch/dpkg.log" 2>&1; then
		say "$deb installed into a scratch root"
		[[ -x "$root/usr/bin/vk-sandbox" ]] || fail "installed: /usr/bin/vk-sandbox is not executable"
		[[ "$(stat -c %a "$root/etc/vk-sandbox/env")" == 600 ]] || fail "installed: /etc/vk-sandbox/env is $(stat -c %a "$root/etc/vk-sandbox/env"), want 600"
		dpkg --root="$root" -s vk-sandbox 2>/dev/null | grep -q '^Status: install ok installed' || fail "dpkg does not list vk-sandbox as installed"
		if command -v systemd-analyze >/dev/null; then
			# The installed unit, run against the host's own units (a scratch
			# root has no sysinit.target), with ExecStart pointing at the
			# installed binary.
			sed "s#^ExecStart=/usr/bin/vk-sandbox#ExecStart=$root/usr/bin/vk-sandbox#" \
				"$root/usr/lib/systemd/system/vk-sandbox.service" >"$scratch/vk-sandbox.service"
			if systemd-analyze verify "$scratch/vk-sandbox.service" >"$scratch/verify.log" 2>&1; then
				say "systemd-analyze verify: the unit is valid"
			else
				cat "$scratch/verify.log" >&2
				fail "systemd-analyze verify rejects the installed unit"
			fi
		else
			say "systemd-analyze is not installed: unit verification skipped"
		fi
	else
		cat "$scratch/dpkg.log" >&2
		fail "dpkg -i --root could not install $deb"
	fi
fi

bash "$(dirname "${BASH_SOURCE[0]}")/check-packages.sh" "$dist" || fail "check-packages.sh: the maintainer scripts"

if ((failed)); then
	say "FAILED"
	exit 1
fi
say "ok: $(ls "$dist"/*.tar.gz "$dist"/*.deb "$dist"/*.rpm | wc -l) archives and packages, checksums, SBOMs"
