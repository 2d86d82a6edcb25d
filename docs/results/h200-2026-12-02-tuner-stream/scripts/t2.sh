source .gpu/env.sh
L=batch_norm_2d_training_channels_last; T=batch_norm_2d_training
timeout 200 python3 .gpu/tx2.py "$L:1x128x17x17:bf16-f32;$T:1x64x56x56:f32" > $OUT/tx2.txt 2>&1; echo rc $?
cat $OUT/tx2.txt | cut -c1-250 | grep -v Warn
el done
