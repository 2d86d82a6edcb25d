"""PTX of each _packed instance (sm_90) against the PTX its stand-in kernel's same instance had with
packed_coefficients.patch applied (build.py into /tmp/rkcdest with the patch applied), kernel names aside."""
import json, re
from pathlib import Path
from rust_kernels import builder, kernels

patched = {}
for d in Path('/tmp/rkcdest/kernels').iterdir():
    meta = json.loads((d / 'meta.json').read_text())
    patched[meta['id']] = (d / 'kernel.ptx').read_text()
norm = lambda t, name: t.replace(name, 'KERNEL')
same = differ = missing = 0
for k in kernels.instances():
    if not k.name.endswith('_packed'):
        continue
    base_id = k.id.replace('_packed__', '__').rsplit('__', 1)[0]
    if base_id not in patched:
        missing += 1
        continue
    new = norm(builder.build(k, 'sm_90').read_text(), k.name)
    if new == norm(patched[base_id], k.name.removesuffix('_packed')):
        same += 1
    else:
        differ += 1
        print('differs', k.id)
print(same, 'same,', differ, 'differ,', missing, 'not in the patched build')
