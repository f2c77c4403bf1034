#!/usr/bin/env bash
# Rewrites the help blocks of docs/cli.md from the ckey binary. A line
#   <!-- ckey-help: ckey ARGS -->
# is followed by a fenced block holding exactly what `ckey ARGS` prints; this
# script replaces each such block (or adds it after a new marker line) with
# the binary's output. tests/test-cli.c fails when a block and the binary
# disagree, so run this after changing a help text in programs/ckey/help.c.
#
#   tools/gen-cli-doc.sh [CKEY_BINARY [DOC]]    (default: build/ckey docs/cli.md)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/ckey}
doc=${2:-$root/docs/cli.md}
[ -x "$bin" ] || { echo "gen-cli-doc: $bin is not built (make build/ckey)" >&2; exit 1; }
[ -f "$doc" ] || { echo "gen-cli-doc: no $doc" >&2; exit 1; }

out=$(mktemp)
help=$(mktemp)
trap 'rm -f "$out" "$help"' EXIT
marker='^<!-- ckey-help: ckey (.*) -->$'
fence='```'
state=text   # text; after-marker: an old block may follow; old-block: inside it
blocks=0
while IFS= read -r line || [ -n "$line" ]; do
  if [ "$state" = old-block ]; then
    [ "$line" = "$fence" ] && state=text
    continue
  fi
  if [ "$state" = after-marker ]; then
    state=text
    if [[ $line == "$fence"* ]]; then state=old-block; continue; fi
  fi
  printf '%s\n' "$line" >> "$out"
  if [[ $line =~ $marker ]]; then
    args=${BASH_REMATCH[1]}
    # ARGS are plain words (a command and --help): split on spaces, no globbing
    set -f
    # shellcheck disable=SC2086
    "$bin" $args > "$help" || { echo "gen-cli-doc: '$bin $args' failed" >&2; exit 1; }
    set +f
    if [ -s "$help" ] && [ "$(tail -c 1 "$help")" != "" ]; then
      echo "gen-cli-doc: '$bin $args' does not end in a newline" >&2; exit 1
    fi
    { printf '%stext\n' "$fence"; cat "$help"; printf '%s\n' "$fence"; } >> "$out"
    blocks=$((blocks + 1))
    state=after-marker
  fi
done < "$doc"
[ "$state" != old-block ] || { echo "gen-cli-doc: $doc: a help block is not closed" >&2; exit 1; }

if cmp -s "$out" "$doc"; then
  echo "gen-cli-doc: $doc is up to date ($blocks help blocks)"
else
  cat "$out" > "$doc"
  echo "gen-cli-doc: rewrote $doc ($blocks help blocks from $bin)"
fi
