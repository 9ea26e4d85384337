#!/usr/bin/env bash
# build-tools.sh builds binaries the tests and demos need from the pinned
# tools modules under tools/, caches them outside the clone, and links them
# into the git-ignored bin/. With no argument it builds the set `make test`
# needs (etcd, kube-apiserver, kube-scheduler, kubectl, the agent-sandbox
# controller, vk-chartcheck: Helm's renderer and Prometheus's rule parser
# for the chart tests); arguments name tools or tools modules to build instead, e.g.
# `build-tools.sh jaeger vk-jaegerui` for make demo-observability and
# make test-observability, `build-tools.sh release` (goreleaser and
# cyclonedx-gomod, tools/release) for make release-snapshot,
# `build-tools.sh staticcheck` (tools/staticcheck) for make lint, or
# `build-tools.sh etcd kube-apiserver` for make demo.
#
# Cache: ${VK_TOOLS_CACHE:-$HOME/.cache/vk-sandbox-tools}/<dir>-<key>/, one
# directory per tools module, where <key> is a short sha256 of that module's
# own files (go.mod, go.sum, its Go files) plus GOOS/GOARCH. A version bump
# in one tools module rebuilds only that module's binaries, adding a module
# rebuilds nothing else, and a fresh CI clone reuses the binaries of the
# previous run. A cached binary is reused only if it runs with --version;
# otherwise it is rebuilt, so a new machine (empty cache) always works with
# just Go and the module proxy.
#
# Environment:
#   VK_TOOLS_CACHE   cache root (default $HOME/.cache/vk-sandbox-tools)
#   VK_TOOLS_REBUILD set to 1 to ignore cached binaries
set -euo pipefail

# One line a binary: <name> <tools module dir> <main package> <set>, where
# <set> is "test" for what a bare run builds (what `make test` needs) and
# "extra" for what is built only when named. To add a binary, add a line
# (and, if needed, a tools/<dir> module).
TOOLS=(
	"etcd           etcd go.etcd.io/etcd/server/v3 test"
	"kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver test"
	"kube-scheduler kube k8s.io/kubernetes/cmd/kube-scheduler test"
	"kubectl        kubectl github.com/cocoonstack/vk-sandbox/tools/kubectl test"
	"agent-sandbox-controller agent-sandbox sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller test"
	"vk-chartcheck  chartcheck github.com/cocoonstack/vk-sandbox/tools/chartcheck test"
	"jaeger         jaeger github.com/jaegertracing/jaeger/cmd/jaeger extra"
	"vk-jaegerui    jaegerui github.com/cocoonstack/vk-sandbox/tools/jaegerui extra"
	"goreleaser     release github.com/goreleaser/goreleaser/v2 extra"
	"cyclonedx-gomod release github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod extra"
	"staticcheck    staticcheck honnef.co/go/tools/cmd/staticcheck extra"
)

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
start_all=$SECONDS

log() { printf 'build-tools: %s\n' "$*" >&2; }

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }

goos="$(go env GOOS)"
goarch="$(go env GOARCH)"

cache_root="${VK_TOOLS_CACHE:-$HOME/.cache/vk-sandbox-tools}"
mkdir -p "$cache_root" "$root/bin"

# cache_of prints the cache directory of one tools module: its name and a
# key over its own files only, so that no other module's change moves it.
cache_of() {
	local dir="$1" key
	key="$(
		cd "$root/tools/$dir"
		{
			printf '%s/%s\n' "$goos" "$goarch"
			for f in go.mod go.sum *.go; do
				[[ -f "$f" ]] || continue
				printf '== %s\n' "$f"
				cat "$f"
			done
		} | sha256sum | cut -c1-16
	)"
	printf '%s/%s-%s' "$cache_root" "$dir" "$key"
}

# wanted: the TOOLS lines selected by the arguments (a tool's name or its
# module's dir), or the "test" set when there are none.
wanted=()
if (($# == 0)); then
	for entry in "${TOOLS[@]}"; do
		[[ "${entry##* }" == test ]] && wanted+=("$entry")
	done
else
	for arg in "$@"; do
		found=0
		for entry in "${TOOLS[@]}"; do
			read -r name dir _ <<<"$entry"
			if [[ "$arg" == "$name" || "$arg" == "$dir" ]]; then
				wanted+=("$entry")
				found=1
			fi
		done
		((found)) || { log "unknown tool $arg (known: $(printf '%s\n' "${TOOLS[@]}" | awk '{print $1}' | tr '\n' ' '))"; exit 2; }
	done
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
	kubectl)
		# k8s.io/kubectl v0.N.P is Kubernetes v1.N.P.
		v="$(cd "$root/tools/kubectl" && go list -mod=mod -m -f '{{.Version}}' k8s.io/kubectl)"
		v="v1.${v#v0.}"
		local kminor="${v#v1.}"
		kminor="${kminor%%.*}"
		printf -- '-X k8s.io/component-base/version.gitVersion=%s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=%s -X k8s.io/component-base/version.gitTreeState=clean' "$v" "$kminor"
		;;
	release)
		v="$(cd "$root/tools/release" && go list -mod=mod -m -f '{{.Version}}' github.com/goreleaser/goreleaser/v2)"
		printf -- '-X main.version=%s' "$v"
		;;
	jaeger)
		v="$(cd "$root/tools/jaeger" && go list -mod=mod -m -f '{{.Version}}' github.com/jaegertracing/jaeger)"
		printf -- '-X github.com/jaegertracing/jaeger/internal/version.latestVersion=%s' "$v"
		;;
	esac
}

# usable: the binary runs and reports its version (cyclonedx-gomod has a
# version subcommand instead of the flag).
usable() {
	local arg=--version
	[[ "$(basename "$1")" == cyclonedx-gomod ]] && arg=version
	[[ -x "$1" ]] && "$1" "$arg" >/dev/null 2>&1
}

# GOFLAGS from the environment replaces the go env file's value, so extend
# the effective one instead of overwriting it.
goflags="$(go env GOFLAGS) -mod=mod"

locked=""
for entry in "${wanted[@]}"; do
	read -r name dir pkg _ <<<"$entry"
	cache="$(cache_of "$dir")"
	mkdir -p "$cache"
	# Serialize concurrent runs (parallel test packages, CI jobs sharing
	# $HOME) per module, so that one builds and the others reuse.
	if [[ "$locked" != "$cache" ]] && command -v flock >/dev/null; then
		exec 9>"$cache/.lock"
		flock 9
		locked="$cache"
	fi
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

log "bin/ -> $cache_root ($((SECONDS - start_all))s total)"
