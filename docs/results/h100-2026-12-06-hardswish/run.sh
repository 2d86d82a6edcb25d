#!/usr/bin/env bash
# On the GPU, from the repository root, with this commit's sm_90 wheel carried as whl_carry/whl.tar.xz
# (scripts/build_wheel.sh dist sm_90; python -m zipfile -e dist/*.whl DIR; python slim_wheel.py DIR; tar cJf
# whl_carry/whl.tar.xz -C DIR .): the steps named, in order, each within what is left of TOTAL seconds.
#   bash run.sh TOTAL STEP...
#   install  the wheel (../h200-2026-12-04-training-suite/install_wheel.sh)
#   check    check_hardswish.py: the Hardswish check cases, every kernel instance first, until its deadline
#   pytest   the GPU tests of the fused activations and the fused eval ops: Hardswish's, and against float64
#            every activation's
#   models   bench --models mobilenet_v3_large, B = 128, BN training, bf16 autocast, convert(fuse=True), CUDA graph,
#            NCHW and channels_last, without and with Hardswish fused (models.py), torch's BN the anchor in each
#   grads    scripts/model_grads_vs_float64.py MODEL train LAYOUT fuse: mobilenet_v3_large, efficientnet_b0
#   plans    plans_f32.py: every candidate plan's error on MobileNetV3-Large's BN inputs (B = 8, f32, NCHW)
#   silu     ../h100-2026-12-06-silu/check_silu.py run (the 16-bit SiLU cases), until the deadline
#   sanitize compute-sanitizer memcheck and racecheck over the training activation families
set -uo pipefail
total=${1:?seconds in all}; shift
here=docs/results/h100-2026-12-06-hardswish
left() { echo $(( total - SECONDS )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
cd /tmp && python -c "import rust_kernels" 2>/dev/null; cd - > /dev/null
for step in "$@"; do
    [ "$(left)" -gt 20 ] || { echo "no time left for $step"; continue; }
    case $step in
    install)
        bash docs/results/h200-2026-12-04-training-suite/install_wheel.sh
        (cd /tmp && python -c "import rust_kernels, sys; print(rust_kernels.__file__)") ;;
    check)
        budget=$(( $(left) < 170 ? $(left) - 20 : 150 ))
        (cd /tmp && timeout $(( budget + 60 )) python "$OLDPWD/$here/check_hardswish.py" "$budget") \
            > "$OUT/check_hardswish.log" 2>&1
        echo "check rc $? at $SECONDS s"; grep -E "^FAIL|cases run|passed" "$OUT/check_hardswish.log" | tail -n 5 ;;
    pytest)
        timeout $(( $(left) < 100 ? $(left) : 100 )) python -m pytest -q -m gpu -p no:cacheprovider \
            tests/test_activation.py tests/test_eval_fused.py \
            -k "hardswish or test_gpu_fused_matches_float64_as_closely_as_torch_unfused" > "$OUT/pytest.log" 2>&1
        echo "pytest rc $? at $SECONDS s"; grep -E "^E  .*Error|^FAILED" "$OUT/pytest.log" | head -n 12
        tail -n 1 "$OUT/pytest.log" ;;
    models)
        for layout in contiguous channels_last; do
            for side in without with; do
                [ "$(left)" -gt 90 ] || { echo "models $side $layout: no time left"; continue; }
                timeout 110 python $here/models.py $side --models mobilenet_v3_large --bn train --batch 128 \
                    --dtype bf16 --fuse --modes graph --memory-format $layout --budget 75 --profile-steps 0 \
                    --out "$OUT/models_${side}_$layout" > "$OUT/models_${side}_$layout.log" 2>&1
                echo "models $side $layout rc $? at $SECONDS s"
                grep -A4 "^model  " "$OUT/models_${side}_$layout.log" | cut -c1-200
            done
        done ;;
    grads)
        for model in mobilenet_v3_large efficientnet_b0; do
            for layout in contiguous channels_last; do
                [ "$(left)" -gt 60 ] || { echo "grads $model $layout: no time left"; continue; }
                timeout 90 python scripts/model_grads_vs_float64.py $model train $layout fuse \
                    > "$OUT/grads_${model}_$layout.log" 2>&1
                echo "grads $model $layout rc $? at $SECONDS s"; grep "max rel diff" "$OUT/grads_${model}_$layout.log"
            done
        done ;;
    plans)
        (cd /tmp && timeout $(( $(left) - 10 )) python "$OLDPWD/$here/plans_f32.py") > "$OUT/plans_f32.log" 2>&1
        echo "plans rc $? at $SECONDS s"; grep -E "OVER|pairs over|Error" "$OUT/plans_f32.log" | head -n 40 ;;
    silu)
        (cd /tmp && timeout $(( $(left) - 10 )) python "$OLDPWD/docs/results/h100-2026-12-06-silu/check_silu.py" run) \
            > "$OUT/check_silu.log" 2>&1
        echo "silu rc $? at $SECONDS s"; grep -E "^FAIL|passed" "$OUT/check_silu.log" | tail -n 5 ;;
    sanitize)
        export PATH=$PATH:/usr/local/cuda/bin
        (cd /tmp && timeout $(( $(left) - 5 )) python -m rust_kernels sanitize --family batch_norm_2d_act_forward \
            batch_norm_2d_act_backward --tools memcheck racecheck --out "$OUT" --timeout $(( ($(left) - 15) / 2 ))) \
            > "$OUT/sanitize_stdout.log" 2>&1
        echo "sanitize rc $? at $SECONDS s"; tail -n 12 "$OUT/sanitize_stdout.log" ;;
    *) echo "unknown step $step" ;;
    esac
done
