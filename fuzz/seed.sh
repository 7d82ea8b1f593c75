#!/usr/bin/env bash
# Seeds fuzz/corpus/<target>/ from the fixtures (the corpus is not
# committed). Run from the repository root: `just fuzz-seed`.
set -eu
cd "$(dirname "$0")/.."
c=fuzz/corpus
mkdir -p "$c"/{line,assembler,pipeline,decisions,config}

# Plain-text fixture logs (small ones whole, lines of all).
logs=$(find fixtures -type f \( -name '*.log' -o -name '*.jsonl' \) | sort)
n=0
for f in $logs; do
    head -c 2 "$f" | od -An -tx1 | grep -q '1f 8b' && continue
    base=$(echo "$f" | tr '/' '_')
    size=$(wc -c < "$f")
    if [ "$size" -le 65536 ]; then
        cp "$f" "$c/pipeline/$base"
    else
        # The first 64 KiB of a big one: whole requests, all line shapes.
        head -c 65536 "$f" > "$c/pipeline/$base.head"
    fi
    # The assembler's input is a program over the seed lines; any bytes
    # are one, so short slices of the logs seed it.
    head -c 512 "$f" > "$c/assembler/$base"
done
# One file per distinct line (at most 3000), for the line parser.
find fixtures -type f -name '*.log' -size -4M | sort | while read -r f; do
    head -c 2 "$f" | od -An -tx1 | grep -q '1f 8b' && continue
    head -n 400 "$f"
done | awk 'length($0) < 65536 && !seen[$0]++' | head -n 3000 | split -l 1 -a 4 - "$c/line/l"
# Decision records: lines and blocks of 20 lines.
find fixtures -type f -name '*.jsonl' | sort | while read -r f; do
    head -n 200 "$f"
done | split -l 20 -a 4 - "$c/decisions/d"
cp fuzz/seeds/config/*.yaml "$c/config/"
for t in line assembler pipeline decisions config; do
    echo "$t: $(ls "$c/$t" | wc -l) seed files"
done
