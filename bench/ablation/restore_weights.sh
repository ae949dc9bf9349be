#!/usr/bin/env bash
# Bring the ablation's adapters back from git history into .models/ (git-ignored), where
# bench/train_h200.sh's stages restoresft and restore read them.
#
# Why history: a session's checkout holds only what landed on main, and the GPU machine goes
# cold between sessions, so an adapter that must outlive a session (the one SFT start every arm
# shares, a run's checkpoint) is committed under bench/results/ablation/weights/ and removed in
# the next commit. Kept in the tree, its 38 MB would travel with every device call (64 MiB in
# all) and leave no room for the model's parts.
#
#   bash bench/ablation/restore_weights.sh sft_pairs_s0 sft_final              # -> .models/sft_final
#   bash bench/ablation/restore_weights.sh pilot_unified_s0_ckpt6 grpo_ckpt    # -> .models/grpo_ckpt
#   bash bench/ablation/restore_weights.sh --list
# Then carry .models/<dest> in its own device call (tree + 38 MB) and run
# `bash bench/train_h200.sh restoresft` (or `RUN=... bash bench/train_h200.sh restore`).
set -euo pipefail
cd "$(dirname "$0")/../.."
base=bench/results/ablation/weights
if [ "${1:-}" = --list ]; then
  git log --diff-filter=A --name-only --format= -- "$base" | cut -d/ -f5 | sort -u
  exit 0
fi
[ $# -eq 2 ] || { echo "usage: $0 NAME DEST (or --list); NAME is a folder under $base" >&2; exit 2; }
name=$1 dest=.models/$2
case "$2" in */*|.|..|"") echo "DEST $2: give a folder name, restored as .models/NAME (e.g. grpo_ckpt)" >&2; exit 2 ;; esac
sha=$(git log --diff-filter=A --format=%H -1 -- "$base/$name")
[ -n "$sha" ] || { echo "no commit added $base/$name: see $0 --list" >&2; exit 1; }
grep -qxF '/.models/' .git/info/exclude 2>/dev/null || echo '/.models/' >> .git/info/exclude
# a fresh folder: a part left by an earlier restore (another checkpoint, more parts) would be
# joined into the adapter by train_h200.sh's restore, and SHA256SUMS would not notice it
rm -rf "$dest"
mkdir -p "$dest"
for f in $(git ls-tree --name-only "$sha" "$base/$name/"); do
  git show "$sha:$f" > "$dest/$(basename "$f")"
done
(cd "$dest" && sha256sum -c --quiet SHA256SUMS) && echo "$dest: $(ls "$dest" | wc -l) files from $sha, sums OK"
