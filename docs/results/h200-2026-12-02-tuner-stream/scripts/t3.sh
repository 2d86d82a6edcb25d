source .gpu/env.sh
L=batch_norm_2d_training_channels_last; T=batch_norm_2d_training; R=batch_norm_2d_training_relu; RL=batch_norm_2d_training_relu_channels_last
el tests
timeout 100 python3 -m pytest -q tests/test_tuning.py -m gpu -p no:logging -p no:cacheprovider 2>&1 | tail -3
el tx
timeout 90 python3 .gpu/tx.py "$L:1x128x17x17:bf16-f32;$L:1x608x7x7:bf16-f32;$T:1x64x56x56:f32;$L:8x96x28x28:bf16-f32" 12 > $OUT/tx.txt 2>&1; echo rc $?
grep -v Warn $OUT/tx.txt | grep -v _warn_once | cut -c1-160
el tune
timeout 420 python3 -m rust_kernels tune --force --budget 360 --export $OUT/all1.json.gz > $OUT/tune1.log 2>&1; echo rc $?; tail -c 700 $OUT/tune1.log
el done
