#!/usr/bin/env bash
# The session's device call, whichever GPU comes (go.sh [TUNE_S] [MODELS_S]), most needed first: on an H200 the
# table's missing entries of test_tuning's shapes (run.sh tune a), the B=128 model step with the persistent kernels,
# then the other shapes' (tune b, TUNE_S; a zero skips a stage); on another GPU (whose entries the H200 table cannot
# use; its model steps were measured on 12-06) the row kernels' store A/B (../h100-2026-12-06-rows-store/run.sh), which on an H200
# is the next call.
set -uo pipefail
here=docs/results/h200-2026-12-06-persistent-tune
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    bash $here/run.sh install
    bash $here/run.sh tune a 60
    [ "${2:-110}" -gt 0 ] && bash $here/run.sh models 1 "${2:-110}" 128
    [ "${1:-200}" -gt 0 ] && bash $here/run.sh tune b "${1:-200}"
else
    bash docs/results/h100-2026-12-06-rows-store/run.sh 540
fi
