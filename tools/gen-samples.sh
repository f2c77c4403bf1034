#!/usr/bin/env bash
# Rewrites the sample outputs of README.md and docs/cli.md from the ckey
# binary. A line
#   <!-- ckey-sample: ckey ARGS -->      (or)   <!-- ckey-sample: make example -->
# is followed by a fenced block holding what `ckey ARGS` prints, stdout and
# stderr together in the order written ("make example": the ckey command of
# the Makefile's example target). Each command runs in a scratch directory
# holding links to the repository's tests/ and examples/, so relative paths
# read as in the repository and outputs land in the scratch directory.
# tests/test-cli.c fails when a block and the program disagree (timing
# figures such as "0.002 s" excepted), so run this after changing what those
# commands print.
#
#   tools/gen-samples.sh [CKEY_BINARY [DOC...]]   (default: build/ckey README.md docs/cli.md)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "$(dirname "${1:-$root/build/ckey}")" && pwd)/$(basename "${1:-$root/build/ckey}")
shift || true
docs=("$@")
[ ${#docs[@]} -gt 0 ] || docs=("$root/README.md" "$root/docs/cli.md")
[ -x "$bin" ] || { echo "gen-samples: $bin is not built (make build/ckey)" >&2; exit 1; }

scratch=$(mktemp -d)
out=$(mktemp)
sample=$(mktemp)
old=$(mktemp)
trap 'rm -rf "$scratch" "$out" "$sample" "$old"' EXIT
ln -s "$root/tests" "$scratch/tests"
ln -s "$root/examples" "$scratch/examples"

# The ckey arguments of the Makefile's example recipe ("build/ckey ARGS").
example_args() {
  awk '/^example:/ { f = 1; next } f && /^\t/ { print; next } f { exit }' "$root/Makefile" |
    sed 's/\\$//' | tr '\t\n' '  ' | tr -s ' ' | sed 's/^ //; s/ $//' |
    sed -n 's/^build\/ckey //p'
}

# Timing figures ("0.002 s") as "T s": an old block that differs from the
# program's output only in those is kept, so a rerun changes nothing.
mask_timings() {
  sed -E 's/(^|[^0-9.])[0-9]+\.[0-9]+ s([^[:alnum:]]|$)/\1T s\2/g' "$1"
}

# The sample's fenced block: the old one when only timings differ.
emit_block() {
  if [ "$1" = old ] && cmp -s <(mask_timings "$old") <(mask_timings "$sample"); then
    { printf '%stext\n' "$fence"; cat "$old"; printf '%s\n' "$fence"; } >> "$out"
  else
    { printf '%stext\n' "$fence"; cat "$sample"; printf '%s\n' "$fence"; } >> "$out"
  fi
}

marker='^<!-- ckey-sample: (.*) -->$'
fence='```'
for doc in "${docs[@]}"; do
  [ -f "$doc" ] || { echo "gen-samples: no $doc" >&2; exit 1; }
  : > "$out"
  state=text   # text; after-marker: an old block may follow; old-block: inside it
  blocks=0
  while IFS= read -r line || [ -n "$line" ]; do
    if [ "$state" = old-block ]; then
      if [ "$line" = "$fence" ]; then emit_block old; state=text; else printf '%s\n' "$line" >> "$old"; fi
      continue
    fi
    if [ "$state" = after-marker ]; then
      state=text
      if [[ $line == "$fence"* ]]; then state=old-block; : > "$old"; continue; fi
      emit_block new
    fi
    printf '%s\n' "$line" >> "$out"
    if [[ $line =~ $marker ]]; then
      what=${BASH_REMATCH[1]}
      case $what in
        "make example") args=$(example_args)
          [ -n "$args" ] || { echo "gen-samples: no 'build/ckey ...' recipe for example: in the Makefile" >&2; exit 1; };;
        "ckey "*) args=${what#ckey };;
        *) echo "gen-samples: $doc: '$what' is neither 'ckey ARGS' nor 'make example'" >&2; exit 1;;
      esac
      # ARGS are plain words: split on spaces, no globbing
      set -f
      # shellcheck disable=SC2086
      (cd "$scratch" && "$bin" $args) > "$sample" 2>&1 ||
        { echo "gen-samples: '$what' failed:" >&2; cat "$sample" >&2; exit 1; }
      set +f
      blocks=$((blocks + 1))
      state=after-marker
    fi
  done < "$doc"
  [ "$state" != old-block ] || { echo "gen-samples: $doc: a sample block is not closed" >&2; exit 1; }
  [ "$state" != after-marker ] || emit_block new
  if cmp -s "$out" "$doc"; then
    echo "gen-samples: $doc is up to date ($blocks samples)"
  else
    cat "$out" > "$doc"
    echo "gen-samples: rewrote $doc ($blocks samples from $bin)"
  fi
done
