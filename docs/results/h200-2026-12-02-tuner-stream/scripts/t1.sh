source .gpu/env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
L=batch_norm_2d_training_channels_last; T=batch_norm_2d_training
el tx
timeout 400 python3 .gpu/tx.py "$L:1x128x17x17:bf16-f32;$L:1x608x7x7:bf16-f32;$T:1x64x56x56:f32;$L:8x96x28x28:bf16-f32;$L:32x256x56x56:bf16-f32" 10 > $OUT/tx.txt 2>&1; echo rc $?
cat $OUT/tx.txt | cut -c1-250
el done
