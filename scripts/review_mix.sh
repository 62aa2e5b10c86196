#!/usr/bin/env bash
# The realistic review mix of scripts/load.sh and scripts/soak.sh: every recorded AdmissionReview
# (tests/fixtures/cluster-capture), rewritten as the API server sends it (keys in Go's field
# order, compact) into DIR/reviews, and listed in MIX weighted by how helm-locker decides it
# against STATE (`helm-locker review`): 8 for an object no release owns, 2 for a write to a
# locked object that is allowed, 2 for a kubectl change that is denied (~90/8/2%).
# With LOCKED_MIX, also lists there (once each) the writes to a locked object that change no
# field the chart sets: the controllers' updates of Helm's objects, the locked path's everyday load.
# With UNOWNED_MIX and DENIED_MIX, also lists there (once each) the mix's reviews of objects no
# release owns and its denials: each kind of review measured on its own.
#   scripts/review_mix.sh HELM_LOCKER STATE DIR MIX [LOCKED_MIX [UNOWNED_MIX DENIED_MIX]]
set -euo pipefail
cd "$(dirname "$0")/.."
locker=$1 state=$2 dir=$3 mix=$4 locked_mix=${5:-/dev/null} unowned_mix=${6:-/dev/null} denied_mix=${7:-/dev/null}
python3 scripts/go_order.py tests/fixtures/cluster-capture/reviews "$dir/reviews"
: >"$mix"
: >"$locked_mix"
: >"$unowned_mix"
: >"$denied_mix"
declare -A count=([unowned]=0 [locked-allowed]=0 [denied]=0)
for review in tests/fixtures/cluster-capture/reviews/*.json; do
  # The explanation is the last line on stderr (a note on the schema in use comes first).
  explained=$("$locker" review --releases "$state" --explain "$review" 2>&1 >/dev/null | tail -n 1)
  case $explained in
    "allowed: no Helm release owns"*) class=unowned weight=8 ;;
    denied:*) class=denied weight=2 ;;
    *) class=locked-allowed weight=2 ;;
  esac
  if [[ $explained == *"but no field the chart sets changes"* ]]; then
    echo "$dir/reviews/$(basename "$review")" >>"$locked_mix"
  fi
  # Helm's own uninstall DELETEs would be denied only because this state says "deployed"; a
  # user's kubectl edits are the denials worth measuring.
  [[ $class == denied && $review == *helm-* ]] && continue
  for _ in $(seq $weight); do echo "$dir/reviews/$(basename "$review")" >>"$mix"; done
  case $class in
    unowned) echo "$dir/reviews/$(basename "$review")" >>"$unowned_mix" ;;
    denied) echo "$dir/reviews/$(basename "$review")" >>"$denied_mix" ;;
  esac
  count[$class]=$((count[$class] + weight))
done
# A mix that is not the documented one measures something else: say so and stop.
if ((count[unowned] == 0 || count[denied] == 0)); then
  echo "review_mix.sh: no unowned or no denied review; has the --explain output changed?" >&2
  exit 1
fi
echo "mix: ${count[unowned]} unowned, ${count[locked-allowed]} locked but allowed, ${count[denied]} denied (of $(wc -l <"$mix"))"
