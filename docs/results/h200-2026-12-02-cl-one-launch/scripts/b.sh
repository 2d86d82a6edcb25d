source .gpu/env.sh
L=batch_norm_2d_training_channels_last; RL=batch_norm_2d_training_relu_channels_last
el smoke
timeout 40 python3 -X faulthandler .gpu/smoke.py 2>&1 | grep -v Warn | tail -12
el check
timeout 150 python3 .gpu/fcheck.py batch_norm_2d_forward,batch_norm_2d_backward,batch_norm_2d_act_forward,batch_norm_2d_act_backward channels_last 7 110 > $OUT/check_cuda_one_launch.txt 2>&1; echo rc $?
grep -v "^batch_norm_2d_\(forward\|backward\|act\)" $OUT/check_cuda_one_launch.txt | head -30 | cut -c1-220; tail -3 $OUT/check_cuda_one_launch.txt
el prof
timeout 150 python3 -X faulthandler .gpu/prof.py "$L:1x608x7x7:bf16-f32;$L:1x128x17x17:bf16-f32;$L:8x96x28x28:bf16-f32;$L:32x672x7x7:bf16-f32;$RL:8x96x28x28:bf16-f32" ours,torch > $OUT/prof.txt 2>&1; echo rc $?
grep -v "Warn\|warn_once" $OUT/prof.txt | cut -c1-260 | head -40
el tune
timeout 230 env -u RUST_KERNELS_QUIET python3 -m rust_kernels tune --op $L $RL --budget 150 --export $OUT/tune_cl.json.gz > $OUT/tune_cl.log 2>&1; echo rc $?; tail -c 1200 $OUT/tune_cl.log
el done
