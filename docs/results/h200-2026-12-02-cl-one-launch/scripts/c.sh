source .gpu/env.sh
L=batch_norm_2d_training_channels_last; RL=batch_norm_2d_training_relu_channels_last
el smoke
timeout 25 python3 -X faulthandler .gpu/smoke.py 2>&1 | grep -v Warn | tail -12
el check
timeout 90 python3 .gpu/fcheck.py batch_norm_2d_forward,batch_norm_2d_backward,batch_norm_2d_act_forward,batch_norm_2d_act_backward 'channels_last(_act)?__(f32|f64|bf16-f32)__' 3 60 > $OUT/check_cuda_one_launch.txt 2>&1; echo rc $?
grep -v "^[0-9]" $OUT/check_cuda_one_launch.txt | tail -30 | cut -c1-200
el tune
timeout 115 env -u RUST_KERNELS_QUIET python3 -m rust_kernels tune --op $L $RL --shapes .gpu/shapes_cl.txt --budget 80 --export $OUT/tune_cl.json.gz > $OUT/tune_cl.log 2>&1; echo rc $?; tail -c 600 $OUT/tune_cl.log
el cmp
timeout 30 python3 .gpu/cmp.py .gpu/shapes_cl.txt > $OUT/one_launch_vs_two.txt 2>&1; tail -8 $OUT/one_launch_vs_two.txt
el done
