from rust_kernels.cli import main

raise SystemExit(main())
