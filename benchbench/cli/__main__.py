from benchbench.cli.main import main

raise SystemExit(main())
