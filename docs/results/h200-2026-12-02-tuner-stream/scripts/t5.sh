source .gpu/env.sh
el bench
timeout 330 python3 -m rust_kernels bench --suite --family batch_norm_2d_training batch_norm_2d_training_channels_last batch_norm_2d_training_relu batch_norm_2d_training_relu_channels_last --compile-every 6 --skip-launch --dtype f32 bf16-f32 --reps 20 --budget 215 --out $OUT/bench_suite_training > $OUT/bench_suite_training.log 2>&1; echo rc $?
tail -12 $OUT/bench_suite_training.log | cut -c1-300
el done
