source .gpu/env.sh
L=batch_norm_2d_training_channels_last; T=batch_norm_2d_training; RL=batch_norm_2d_training_relu_channels_last
el tests
timeout 100 python3 -m pytest -q tests/test_tuning.py -m gpu -p no:logging -p no:cacheprovider > $OUT/tests.txt 2>&1; tail -3 $OUT/tests.txt
el prof
timeout 100 python3 .gpu/prof.py "$L:1x608x7x7:bf16-f32;$L:1x128x17x17:bf16-f32;$L:8x96x28x28:bf16-f32;$T:1x64x56x56:f32;$L:32x672x7x7:bf16-f32;$T:32x240x14x14:bf16-f32;$RL:4x256x14x14:f32" ours,compile,torch > $OUT/prof.txt 2>&1; echo rc $?; grep -v Warn $OUT/prof.txt | grep -v _warn | cut -c1-150
el tune
timeout 440 python3 -m rust_kernels tune --force --shapes .gpu/small_rest.txt --budget 390 --export $OUT/all2.json.gz > $OUT/tune2.log 2>&1; echo rc $?; tail -c 600 $OUT/tune2.log
el done
