#!/usr/bin/env bash
# build-tools.sh builds the test-only control plane binaries (etcd,
# kube-apiserver, kube-scheduler) from the pinned tools modules under tools/,
# caches them outside the clone, and links them into the git-ignored bin/.
#
# Cache: ${VK_TOOLS_CACHE:-$HOME/.cache/vk-sandbox-tools}/<key>/, where <key>
# is a short sha256 of every tools/*/go.mod and go.sum plus GOOS/GOARCH. A
# version bump in a tools module therefore gets a fresh directory, and a
# fresh CI clone reuses the binaries of the previous run. A cached binary is
# reused only if it runs with --version; otherwise it is rebuilt, so a new
# machine (empty cache) always works with just Go and the module proxy.
#
# Environment:
#   VK_TOOLS_CACHE   cache root (default $HOME/.cache/vk-sandbox-tools)
#   VK_TOOLS_REBUILD set to 1 to ignore cached binaries
set -euo pipefail

# One line a binary: <name> <tools module dir> <main package>.
# To add a binary, add a line (and, if needed, a tools/<dir> module).
TOOLS=(
	"etcd           etcd go.etcd.io/etcd/server/v3"
	"kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver"
	"kube-scheduler kube k8s.io/kubernetes/cmd/kube-scheduler"
	"agent-sandbox-controller agent-sandbox sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
)

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
start_all=$SECONDS

log() { printf 'build-tools: %s\n' "$*" >&2; }

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }

goos="$(go env GOOS)"
goarch="$(go env GOARCH)"

key="$(
	cd "$root/tools"
	{
		printf '%s/%s\n' "$goos" "$goarch"
		for f in */go.mod */go.sum; do
			[[ -f "$f" ]] || continue
			printf '== %s\n' "$f"
			cat "$f"
		done
	} | sha256sum | cut -c1-16
)"
cache_root="${VK_TOOLS_CACHE:-$HOME/.cache/vk-sandbox-tools}"
cache="$cache_root/$key"
mkdir -p "$cache" "$root/bin"

# Serialize concurrent runs (parallel test packages, CI jobs sharing $HOME)
# so that one builds and the others reuse.
if command -v flock >/dev/null; then
	exec 9>"$cache/.lock"
	flock 9
fi

# ldflags_for stamps a version into binaries that would otherwise report
# v0.0.0-master. Only the link step sees -X, so the Go build cache is shared
# with plain builds.
ldflags_for() {
	local dir="$1" v
	case "$dir" in
	kube)
		v="$(cd "$root/tools/kube" && go list -mod=mod -m -f '{{.Version}}' k8s.io/kubernetes)"
		local minor="${v#v1.}"
		minor="${minor%%.*}"
		printf -- '-X k8s.io/component-base/version.gitVersion=%s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=%s -X k8s.io/component-base/version.gitTreeState=clean' "$v" "$minor"
		;;
	esac
}

usable() { [[ -x "$1" ]] && "$1" --version >/dev/null 2>&1; }

# GOFLAGS from the environment replaces the go env file's value, so extend
# the effective one instead of overwriting it.
goflags="$(go env GOFLAGS) -mod=mod"

for entry in "${TOOLS[@]}"; do
	read -r name dir pkg <<<"$entry"
	out="$cache/$name"
	t0=$SECONDS
	if [[ "${VK_TOOLS_REBUILD:-0}" != 1 ]] && usable "$out"; then
		log "$name: reused $out"
	else
		log "$name: building $pkg (tools/$dir)"
		# Build beside the cache entry and rename, so an interrupted build
		# never leaves a truncated binary under the final name.
		tmp="$(mktemp -d "$cache/.build-$name.XXXXXX")"
		if ! (cd "$root/tools/$dir" && GOFLAGS="$goflags" go build -o "$tmp/$name" -ldflags "$(ldflags_for "$dir")" "$pkg"); then
			rm -rf "$tmp"
			log "$name: build failed"
			exit 1
		fi
		mv -f "$tmp/$name" "$out"
		rm -rf "$tmp"
		usable "$out" || { log "$name: built binary does not run --version"; exit 1; }
		log "$name: built in $((SECONDS - t0))s"
	fi
	ln -sfn "$out" "$root/bin/$name"
done

log "bin/ -> $cache ($((SECONDS - start_all))s total)"
