#!/usr/bin/env bash
# Runs every Go fuzz target in the repository, one at a time, for $FUZZTIME
# each (default 10m), with one fuzzing worker (-parallel 1) to be kind to a
# shared machine. Prints a summary and exits non-zero if any target failed.
# A failing input is written by `go test` to <pkg>/testdata/fuzz/<Name>/:
# keep it, it becomes a regression test that CI runs with the seed corpus.
#
#   FUZZTIME=30s bash scripts/fuzz.sh          # every target, 30s each
#   FUZZTIME=1m  bash scripts/fuzz.sh FuzzPlural # only the named targets
set -euo pipefail

cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-10m}"
GO="${GO:-go}"
LOGDIR="${FUZZLOGDIR:-${TMPDIR:-/tmp}/vk-sandbox-fuzz}"
mkdir -p "$LOGDIR"

# "<package dir> <target>" for every func FuzzXxx(f *testing.F) in a _test.go.
mapfile -t targets < <(
	grep -rEo --include='*_test.go' '^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)' . |
		grep -v '^./\.' |
		sed -E 's#^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+)\(.*#\1 \2#' | sort -u
)
if [[ ${#targets[@]} -eq 0 ]]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi

want=" $* "
summary=()
failed=0
for entry in "${targets[@]}"; do
	read -r dir name <<<"$entry"
	if [[ $# -gt 0 && "$want" != *" $name "* ]]; then
		continue
	fi
	log="$LOGDIR/$name.log"
	echo "fuzz: $name in $dir for $FUZZTIME (log: $log)"
	start=$(date +%s)
	if "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -parallel 1 "$dir" >"$log" 2>&1; then
		status=ok
	else
		status=FAIL
		failed=$((failed + 1))
		tail -n 30 "$log" >&2
	fi
	execs=$(grep -Eo 'execs: [0-9]+' "$log" | tail -n 1 | awk '{print $2}')
	summary+=("$(printf '%-28s %-24s %-5s execs=%-10s %ss' "$name" "$dir" "$status" "${execs:-?}" "$(($(date +%s) - start))")")
done

echo
echo "fuzz summary (FUZZTIME=$FUZZTIME):"
printf '  %s\n' "${summary[@]}"
if [[ $failed -gt 0 ]]; then
	echo "fuzz: $failed target(s) failed; failing inputs are under <pkg>/testdata/fuzz/<Name>/" >&2
	exit 1
fi
