from lakelog.cli.main import main

main()
