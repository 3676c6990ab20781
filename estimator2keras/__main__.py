from estimator2keras.cli import main

raise SystemExit(main())
